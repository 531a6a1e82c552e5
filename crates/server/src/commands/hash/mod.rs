//! Hash commands (Redis' "hash" group), by theme:
//!
//! - [`fields`]: HSET, HMSET, HSETNX, HGET, HMGET, HDEL, HLEN, HEXISTS, HSTRLEN.
//! - [`whole`]: HGETALL, HKEYS, HVALS, HSCAN, HRANDFIELD.
//! - [`counters`]: HINCRBY, HINCRBYFLOAT.
//!
//! Shared here: reading a value as a hash (the one place that knows which value type is a
//! hash).

mod counters;
mod fields;
mod whole;

use std::collections::HashMap;

use latch_keyspace::Value;

use crate::spec::CommandSpec;

pub static COMMANDS: &[CommandSpec] = &[
    fields::HSET,
    fields::HMSET,
    fields::HGET,
    fields::HMGET,
    whole::HGETALL,
    fields::HDEL,
    fields::HLEN,
    fields::HEXISTS,
    counters::HINCRBY,
    counters::HINCRBYFLOAT,
    whole::HKEYS,
    whole::HVALS,
    fields::HSETNX,
    fields::HSTRLEN,
    whole::HSCAN,
    whole::HRANDFIELD,
];

/// A hash's fields and their values.
pub(crate) type Fields = HashMap<Vec<u8>, Vec<u8>>;

/// The fields of a hash value, `None` for any other type (the caller answers WRONGTYPE).
pub(crate) fn hash_of(value: &Value) -> Option<&Fields> {
    match value {
        Value::Hash(fields) => Some(fields),
        _ => None,
    }
}

fn hash_mut(value: &mut Value) -> Option<&mut Fields> {
    match value {
        Value::Hash(fields) => Some(fields),
        _ => None,
    }
}

/// The hash under `key` for writing, created empty when missing (Redis'
/// `hashTypeLookupWriteOrCreate`); `None` when the key holds another type. Callers validate
/// their arguments first and always add a field to a hash this creates, so no empty hash
/// is ever left behind.
fn hash_for_write<'a>(
    keys: &'a mut latch_keyspace::Locked<'_>,
    db: usize,
    key: &[u8],
) -> Option<&'a mut Fields> {
    if !keys.exists(db, key) {
        keys.set(db, key, Value::Hash(Box::default()), None);
    }
    keys.get(db, key).and_then(|entry| hash_mut(entry))
}
