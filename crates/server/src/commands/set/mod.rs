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

use latch_keyspace::{Elem, Set, Value};

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

/// The set under a key, `None` for any other type (the caller answers WRONGTYPE).
pub(crate) fn set_of(value: &Value) -> Option<&Set> {
    match value {
        Value::Set(set) => Some(set),
        _ => None,
    }
}

fn set_mut(value: &mut Value) -> Option<&mut Set> {
    match value {
        Value::Set(set) => Some(set),
        _ => None,
    }
}

/// Writes one member as a bulk string.
fn bulk_member(reply: &mut latch_protocol::Reply, member: Elem<'_>) {
    match member {
        Elem::Int(n) => reply.bulk_integer(n),
        other => reply.bulk(other.as_bytes().unwrap_or_default()),
    }
}

/// Writes a set's members as a set reply (`~` in RESP3, an array in RESP2), in the set's
/// own order: ascending for an intset, storage order for a hashtable.
fn reply_members(reply: &mut latch_protocol::Reply, set: &Set) {
    reply.set(set.len());
    for member in set.iter() {
        bulk_member(reply, member);
    }
}

/// A copy of `set` built as Redis builds a union result (an intset while every member is an
/// integer and they are few enough): the order SUNION, SDIFF and a whole-set SPOP list in.
fn rebuilt(set: &Set) -> Set {
    let mut copy = Set::new();
    let mut text = Vec::new();
    for member in set.iter() {
        text.clear();
        member.append_to(&mut text);
        copy.insert(&text);
    }
    copy
}

/// Writes members as a set reply (`~` in RESP3, an array in RESP2).
fn reply_set(reply: &mut latch_protocol::Reply, members: &[&[u8]]) {
    reply.set(members.len());
    for member in members {
        reply.bulk(member);
    }
}
