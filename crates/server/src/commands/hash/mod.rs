//! Hash commands (Redis' "hash" group), by theme:
//!
//! - [`fields`]: HSET, HMSET, HSETNX, HGET, HMGET, HDEL, HLEN, HEXISTS, HSTRLEN.
//! - [`whole`]: HGETALL, HKEYS, HVALS, HSCAN, HRANDFIELD.
//! - [`counters`]: HINCRBY, HINCRBYFLOAT.
//!
//! Shared here: reading a value as a hash (the one place that knows which value type is a
//! hash), and replying with what a hash holds. The value itself, its compact and large
//! forms and when it converts, is `latch_keyspace::hash`.

mod counters;
mod fields;
mod whole;

use latch_keyspace::{Elem, Hash, Value};
use latch_protocol::Reply;

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

/// A value as a hash, `None` for any other type (the caller answers WRONGTYPE).
pub(crate) fn hash_of(value: &Value) -> Option<&Hash> {
    match value {
        Value::Hash(hash) => Some(hash),
        _ => None,
    }
}

fn hash_mut(value: &mut Value) -> Option<&mut Hash> {
    match value {
        Value::Hash(hash) => Some(hash),
        _ => None,
    }
}

/// Replies with a field or value as a bulk string (a compact hash keeps integers as
/// numbers; Redis replies with their decimal text too).
#[inline]
fn reply_elem(reply: &mut Reply, elem: Elem<'_>) {
    match elem {
        Elem::Bytes(bytes) => reply.bulk(bytes),
        Elem::Int(n) => reply.bulk_integer(n),
        Elem::Float(x) => reply.bulk(x.to_string().as_bytes()),
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
) -> Option<&'a mut Hash> {
    if !keys.exists(db, key) {
        keys.set(db, key, Value::Hash(Hash::new()), None);
    }
    keys.get(db, key).and_then(|entry| hash_mut(entry))
}
