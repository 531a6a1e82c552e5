//! Set commands (Redis' "set" group), by theme:
//!
//! - [`members`]: SADD, SREM, SMEMBERS, SCARD, SISMEMBER, SMISMEMBER, SMOVE.
//! - [`random`]: SRANDMEMBER, SPOP.
//! - [`algebra`]: SINTER, SINTERCARD, SINTERSTORE, SUNION, SUNIONSTORE, SDIFF, SDIFFSTORE.
//! - [`scan`]: SSCAN, and the cursor walk HSCAN shares.
//!
//! Shared here: reading a value as a set (the one place that knows which value type is a
//! set) and the order Redis lists members in.

mod algebra;
mod members;
pub(crate) mod random;
pub(crate) mod scan;

use std::collections::HashSet;

use latch_keyspace::{parse_i64_strict, Value};

use crate::spec::CommandSpec;

pub static COMMANDS: &[CommandSpec] = &[
    members::SADD,
    members::SREM,
    members::SMEMBERS,
    members::SCARD,
    members::SISMEMBER,
    members::SMISMEMBER,
    random::SRANDMEMBER,
    random::SPOP,
    scan::SSCAN,
    members::SMOVE,
    algebra::SINTER,
    algebra::SINTERCARD,
    algebra::SINTERSTORE,
    algebra::SUNION,
    algebra::SUNIONSTORE,
    algebra::SDIFF,
    algebra::SDIFFSTORE,
];

/// A set's members.
pub(crate) type Members = HashSet<Vec<u8>>;

/// The members of a set value, `None` for any other type (the caller answers WRONGTYPE).
pub(crate) fn set_of(value: &Value) -> Option<&Members> {
    match value {
        Value::Set(members) => Some(members),
        _ => None,
    }
}

fn set_mut(value: &mut Value) -> Option<&mut Members> {
    match value {
        Value::Set(members) => Some(members),
        _ => None,
    }
}

/// Redis 7.0 keeps a set of at most this many integers as a sorted intset (the default
/// `set-max-intset-entries`, as `Value::encoding` assumes).
const INTSET_MAX_ENTRIES: usize = 512;

/// Whether Redis would hold these members in an intset.
fn is_intset(members: &Members) -> bool {
    members.len() <= INTSET_MAX_ENTRIES && members.iter().all(|m| parse_i64_strict(m).is_some())
}

/// The members in the order Redis lists them: ascending numbers for an intset, table order
/// (arbitrary) otherwise.
pub(crate) fn members_in_order(members: &Members) -> Vec<&[u8]> {
    let mut listed: Vec<&[u8]> = members.iter().map(|m| &m[..]).collect();
    if is_intset(members) {
        listed.sort_by_key(|m| parse_i64_strict(m));
    }
    listed
}

/// Writes members as a set reply (`~` in RESP3, an array in RESP2).
fn reply_set(reply: &mut latch_protocol::Reply, members: &[&[u8]]) {
    reply.set(members.len());
    for member in members {
        reply.bulk(member);
    }
}
