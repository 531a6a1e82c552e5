//! Adding, removing and testing members: SADD, SREM, SMEMBERS, SCARD, SISMEMBER,
//! SMISMEMBER, SMOVE.

use bytes::Bytes;
use latch_keyspace::Value;

use latch_keyspace::Set;

use super::{reply_members, set_mut, set_of};
use crate::commands::{err, Ctx};
use crate::pubsub::notify;
use crate::spec::{acl, flag, keyflag, Arg, CommandSpec, Group, KeySpec};

pub(super) const SADD: CommandSpec = CommandSpec {
    name: "sadd",
    group: Group::Set,
    summary: "Adds members to a set, creating it when needed; replies how many were new.",
    since: "1.0.0",
    complexity: "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
    arity: -3,
    flags: flag::WRITE | flag::DENYOOM | flag::FAST,
    acl: acl::SET,
    key_specs: &[KeySpec::single(1, keyflag::RW | keyflag::INSERT)],
    arguments: &[Arg::key("key", 0), Arg::string("member").multiple()],
    history: &[("2.4.0", "Takes any number of members.")],
    handler: Some(sadd),
    ..CommandSpec::BASE
};

pub(super) const SREM: CommandSpec = CommandSpec {
    name: "srem",
    group: Group::Set,
    summary:
        "Removes members from a set (the key goes when it empties); replies how many were there.",
    since: "1.0.0",
    complexity: "O(N) where N is the number of members to be removed.",
    arity: -3,
    flags: flag::WRITE | flag::FAST,
    acl: acl::SET,
    key_specs: &[KeySpec::single(1, keyflag::RW | keyflag::DELETE)],
    arguments: &[Arg::key("key", 0), Arg::string("member").multiple()],
    history: &[("2.4.0", "Takes any number of members.")],
    handler: Some(srem),
    ..CommandSpec::BASE
};

pub(super) const SMEMBERS: CommandSpec = CommandSpec {
    name: "smembers",
    group: Group::Set,
    summary: "Lists every member of a set.",
    since: "1.0.0",
    complexity: "O(N) where N is the set cardinality.",
    arity: 2,
    flags: flag::READONLY,
    acl: acl::SET,
    key_specs: &[KeySpec::single(1, keyflag::RO | keyflag::ACCESS)],
    arguments: &[Arg::key("key", 0)],
    tips: &["nondeterministic_output_order"],
    handler: Some(smembers),
    ..CommandSpec::BASE
};

pub(super) const SCARD: CommandSpec = CommandSpec {
    name: "scard",
    group: Group::Set,
    summary: "Replies how many members a set has.",
    since: "1.0.0",
    complexity: "O(1)",
    arity: 2,
    flags: flag::READONLY | flag::FAST,
    acl: acl::SET,
    key_specs: &[KeySpec::single(1, keyflag::RO)],
    arguments: &[Arg::key("key", 0)],
    handler: Some(scard),
    ..CommandSpec::BASE
};

pub(super) const SISMEMBER: CommandSpec = CommandSpec {
    name: "sismember",
    group: Group::Set,
    summary: "Replies 1 when a value is a member of a set, 0 otherwise.",
    since: "1.0.0",
    complexity: "O(1)",
    arity: 3,
    flags: flag::READONLY | flag::FAST,
    acl: acl::SET,
    key_specs: &[KeySpec::single(1, keyflag::RO)],
    arguments: &[Arg::key("key", 0), Arg::string("member")],
    handler: Some(sismember),
    ..CommandSpec::BASE
};

pub(super) const SMISMEMBER: CommandSpec = CommandSpec {
    name: "smismember",
    group: Group::Set,
    summary: "Tests several values for membership in a set at once, one 1 or 0 per value.",
    since: "6.2.0",
    complexity: "O(N) where N is the number of elements being checked for membership",
    arity: -3,
    flags: flag::READONLY | flag::FAST,
    acl: acl::SET,
    key_specs: &[KeySpec::single(1, keyflag::RO | keyflag::ACCESS)],
    arguments: &[Arg::key("key", 0), Arg::string("member").multiple()],
    handler: Some(smismember),
    ..CommandSpec::BASE
};

pub(super) const SMOVE: CommandSpec = CommandSpec {
    name: "smove",
    group: Group::Set,
    summary: "Moves a member from one set to another; replies 1 when it was moved.",
    since: "1.0.0",
    complexity: "O(1)",
    arity: 4,
    flags: flag::WRITE | flag::FAST,
    acl: acl::SET,
    key_specs: &[
        KeySpec::single(1, keyflag::RW | keyflag::ACCESS | keyflag::DELETE),
        KeySpec::single(2, keyflag::RW | keyflag::INSERT),
    ],
    arguments: &[
        Arg::key("source", 0),
        Arg::key("destination", 1),
        Arg::string("member"),
    ],
    handler: Some(smove),
    ..CommandSpec::BASE
};

fn sadd(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let key = &args[1][..];
    let added = match ctx.keys.get(db, key) {
        Some(entry) => {
            let Some(members) = set_mut(entry) else {
                ctx.reply.error(err::WRONGTYPE);
                return;
            };
            args[2..].iter().filter(|m| members.insert(m)).count()
        }
        None => {
            let mut members = Set::for_member(&args[2]);
            let added = args[2..].iter().filter(|m| members.insert(m)).count();
            ctx.keys.set(db, key, Value::Set(members), None);
            added
        }
    };
    if added > 0 {
        ctx.keys.signal_modified(db, key);
        ctx.notify(notify::SET, "sadd", key);
    }
    ctx.reply.integer(added as i64);
}

fn srem(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let key = &args[1][..];
    let Some(entry) = ctx.keys.get(db, key) else {
        ctx.reply.integer(0);
        return;
    };
    let Some(members) = set_mut(entry) else {
        ctx.reply.error(err::WRONGTYPE);
        return;
    };
    let removed = args[2..]
        .iter()
        .filter(|member| members.remove(&member[..]))
        .count();
    let emptied = members.is_empty();
    if emptied {
        ctx.keys.remove(db, key);
    }
    if removed > 0 {
        ctx.keys.signal_modified(db, key);
        ctx.notify(notify::SET, "srem", key);
        if emptied {
            ctx.notify(notify::GENERIC, "del", key);
        }
    }
    ctx.reply.integer(removed as i64);
}

fn smembers(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let Some(entry) = ctx.keys.get(db, &args[1]) else {
        ctx.reply.set(0);
        return;
    };
    let Some(members) = set_of(entry) else {
        ctx.reply.error(err::WRONGTYPE);
        return;
    };
    reply_members(ctx.reply, members);
}

fn scard(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    match ctx
        .keys
        .get(db, &args[1])
        .map(|e| set_of(e).map(|m| m.len()))
    {
        None => ctx.reply.integer(0),
        Some(None) => ctx.reply.error(err::WRONGTYPE),
        Some(Some(len)) => ctx.reply.integer(len as i64),
    }
}

fn sismember(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let member = &args[2][..];
    match ctx
        .keys
        .get(db, &args[1])
        .map(|e| set_of(e).map(|m| m.contains(member)))
    {
        None => ctx.reply.integer(0),
        Some(None) => ctx.reply.error(err::WRONGTYPE),
        Some(Some(found)) => ctx.reply.integer(i64::from(found)),
    }
}

fn smismember(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    // A missing key is an empty set: every answer is 0.
    let empty = Set::new();
    let members = match ctx.keys.get(db, &args[1]) {
        None => &empty,
        Some(entry) => match set_of(entry) {
            Some(members) => members,
            None => {
                ctx.reply.error(err::WRONGTYPE);
                return;
            }
        },
    };
    ctx.reply.array(args.len() - 2);
    for member in &args[2..] {
        ctx.reply.integer(i64::from(members.contains(&member[..])));
    }
}

fn smove(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let (source, destination, member) = (&args[1][..], &args[2][..], &args[3][..]);
    // Order as in Redis: a missing source answers 0 before any type check; then the
    // source's type, then the destination's.
    // Both keys are looked up first (either may expire on the way).
    let source_state = ctx.keys.get(db, source).map(|e| set_of(e).is_some());
    let destination_ok = ctx
        .keys
        .get(db, destination)
        .is_none_or(|e| set_of(e).is_some());
    let Some(source_is_set) = source_state else {
        ctx.reply.integer(0);
        return;
    };
    if !source_is_set || !destination_ok {
        ctx.reply.error(err::WRONGTYPE);
        return;
    }
    if source == destination {
        let found = ctx
            .keys
            .get(db, source)
            .and_then(|e| set_of(e))
            .is_some_and(|m| m.contains(member));
        ctx.reply.integer(i64::from(found));
        return;
    }
    let Some(members) = ctx.keys.get(db, source).and_then(|e| set_mut(e)) else {
        ctx.reply.integer(0);
        return;
    };
    if !members.remove(member) {
        ctx.reply.integer(0);
        return;
    }
    let emptied = members.is_empty();
    ctx.notify(notify::SET, "srem", source);
    if emptied {
        ctx.keys.remove(db, source);
        ctx.notify(notify::GENERIC, "del", source);
    }
    ctx.keys.signal_modified(db, source);
    let added = match ctx.keys.get(db, destination).and_then(|e| set_mut(e)) {
        Some(members) => members.insert(member),
        None => {
            let mut members = Set::for_member(member);
            members.insert(member);
            ctx.keys.set(db, destination, Value::Set(members), None);
            true
        }
    };
    if added {
        ctx.keys.signal_modified(db, destination);
        ctx.notify(notify::SET, "sadd", destination);
    }
    ctx.reply.integer(1);
}
