//! Reading and writing single fields: HSET, HMSET, HSETNX, HGET, HMGET, HDEL, HLEN,
//! HEXISTS, HSTRLEN.

use bytes::Bytes;
use latch_keyspace::hash::text;
use latch_keyspace::{Hash, Locked};
use latch_protocol::Reply;

use super::{hash_for_write, hash_mut, hash_of, reply_elem};
use crate::commands::{arity_error, err, Ctx};
use crate::pubsub::notify;
use crate::spec::{acl, docflag, flag, keyflag, Arg, CommandSpec, Group, KeySpec};

const FIELD_VALUE_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::block("field_value", &[Arg::string("field"), Arg::string("value")]).multiple(),
];
const KEY_FIELD_ARGS: &[Arg] = &[Arg::key("key", 0), Arg::string("field")];

pub(super) const HSET: CommandSpec = CommandSpec {
    name: "hset",
    group: Group::Hash,
    summary: "Sets fields of a hash, creating it when needed; replies how many fields were new.",
    since: "2.0.0",
    complexity: "O(1) for each field/value pair added, so O(N) to add N field/value pairs when the command is called with multiple field/value pairs.",
    arity: -4,
    flags: flag::WRITE | flag::DENYOOM | flag::FAST,
    acl: acl::HASH,
    key_specs: &[KeySpec::single(1, keyflag::RW | keyflag::UPDATE)],
    arguments: FIELD_VALUE_ARGS,
    history: &[("4.0.0", "Takes any number of field and value pairs.")],
    handler: Some(hset),
    ..CommandSpec::BASE
};

pub(super) const HMSET: CommandSpec = CommandSpec {
    name: "hmset",
    group: Group::Hash,
    summary: "Sets fields of a hash, creating it when needed; replies OK.",
    since: "2.0.0",
    complexity: "O(N) where N is the number of fields being set.",
    arity: -4,
    flags: flag::WRITE | flag::DENYOOM | flag::FAST,
    acl: acl::HASH,
    key_specs: &[KeySpec::single(1, keyflag::RW | keyflag::UPDATE)],
    arguments: FIELD_VALUE_ARGS,
    doc_flags: docflag::DEPRECATED,
    deprecated_since: Some("4.0.0"),
    replaced_by: Some("`HSET` with multiple field-value pairs"),
    handler: Some(hmset),
    ..CommandSpec::BASE
};

pub(super) const HSETNX: CommandSpec = CommandSpec {
    name: "hsetnx",
    group: Group::Hash,
    summary:
        "Sets a field of a hash only when the field does not exist yet; replies 1 when it did so.",
    since: "2.0.0",
    complexity: "O(1)",
    arity: 4,
    flags: flag::WRITE | flag::DENYOOM | flag::FAST,
    acl: acl::HASH,
    key_specs: &[KeySpec::single(1, keyflag::RW | keyflag::INSERT)],
    arguments: &[
        Arg::key("key", 0),
        Arg::string("field"),
        Arg::string("value"),
    ],
    handler: Some(hsetnx),
    ..CommandSpec::BASE
};

pub(super) const HGET: CommandSpec = CommandSpec {
    name: "hget",
    group: Group::Hash,
    summary: "Replies with the value of one field of a hash, or nil.",
    since: "2.0.0",
    complexity: "O(1)",
    arity: 3,
    flags: flag::READONLY | flag::FAST,
    acl: acl::HASH,
    key_specs: &[KeySpec::single(1, keyflag::RO | keyflag::ACCESS)],
    arguments: KEY_FIELD_ARGS,
    handler: Some(hget),
    ..CommandSpec::BASE
};

pub(super) const HMGET: CommandSpec = CommandSpec {
    name: "hmget",
    group: Group::Hash,
    summary: "Replies with the values of several fields of a hash, nil for each missing one.",
    since: "2.0.0",
    complexity: "O(N) where N is the number of fields being requested.",
    arity: -3,
    flags: flag::READONLY | flag::FAST,
    acl: acl::HASH,
    key_specs: &[KeySpec::single(1, keyflag::RO | keyflag::ACCESS)],
    arguments: &[Arg::key("key", 0), Arg::string("field").multiple()],
    handler: Some(hmget),
    ..CommandSpec::BASE
};

pub(super) const HDEL: CommandSpec = CommandSpec {
    name: "hdel",
    group: Group::Hash,
    summary:
        "Removes fields from a hash (the key goes when it empties); replies how many were there.",
    since: "2.0.0",
    complexity: "O(N) where N is the number of fields to be removed.",
    arity: -3,
    flags: flag::WRITE | flag::FAST,
    acl: acl::HASH,
    key_specs: &[KeySpec::single(1, keyflag::RW | keyflag::DELETE)],
    arguments: &[Arg::key("key", 0), Arg::string("field").multiple()],
    history: &[("2.4.0", "Takes any number of fields.")],
    handler: Some(hdel),
    ..CommandSpec::BASE
};

pub(super) const HLEN: CommandSpec = CommandSpec {
    name: "hlen",
    group: Group::Hash,
    summary: "Replies how many fields a hash has.",
    since: "2.0.0",
    complexity: "O(1)",
    arity: 2,
    flags: flag::READONLY | flag::FAST,
    acl: acl::HASH,
    key_specs: &[KeySpec::single(1, keyflag::RO)],
    arguments: &[Arg::key("key", 0)],
    handler: Some(hlen),
    ..CommandSpec::BASE
};

pub(super) const HEXISTS: CommandSpec = CommandSpec {
    name: "hexists",
    group: Group::Hash,
    summary: "Replies 1 when a hash has the given field, 0 otherwise.",
    since: "2.0.0",
    complexity: "O(1)",
    arity: 3,
    flags: flag::READONLY | flag::FAST,
    acl: acl::HASH,
    key_specs: &[KeySpec::single(1, keyflag::RO)],
    arguments: KEY_FIELD_ARGS,
    handler: Some(hexists),
    ..CommandSpec::BASE
};

pub(super) const HSTRLEN: CommandSpec = CommandSpec {
    name: "hstrlen",
    group: Group::Hash,
    summary: "Replies with the length in bytes of one field's value (0 when absent).",
    since: "3.2.0",
    complexity: "O(1)",
    arity: 3,
    flags: flag::READONLY | flag::FAST,
    acl: acl::HASH,
    key_specs: &[KeySpec::single(1, keyflag::RO)],
    arguments: KEY_FIELD_ARGS,
    handler: Some(hstrlen),
    ..CommandSpec::BASE
};

/// HSET and HMSET: the same work, different replies.
fn set_fields(ctx: &mut Ctx<'_, '_>, args: &[Bytes], name: &str) -> Option<usize> {
    if args.len() % 2 == 1 {
        ctx.reply.error(&arity_error(name));
        return None;
    }
    let db = ctx.db();
    let key = &args[1][..];
    let Some(hash) = hash_for_write(ctx.keys, db, key) else {
        ctx.reply.error(err::WRONGTYPE);
        return None;
    };
    let mut created = 0;
    for pair in args[2..].chunks_exact(2) {
        if hash.insert(&pair[0], &pair[1]) {
            created += 1;
        }
    }
    ctx.keys.signal_modified(db, key);
    ctx.notify(notify::HASH, "hset", key);
    ctx.keys.add_dirty(db, key, (args.len() as u64 - 2) / 2 - 1);
    Some(created)
}

fn hset(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if let Some(created) = set_fields(ctx, args, "hset") {
        ctx.reply.integer(created as i64);
    }
}

fn hmset(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if set_fields(ctx, args, "hmset").is_some() {
        ctx.reply.ok();
    }
}

fn hsetnx(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let key = &args[1][..];
    let Some(hash) = hash_for_write(ctx.keys, db, key) else {
        ctx.reply.error(err::WRONGTYPE);
        return;
    };
    if hash.contains(&args[2]) {
        ctx.reply.integer(0);
        return;
    }
    hash.insert(&args[2], &args[3]);
    ctx.keys.signal_modified(db, key);
    ctx.notify(notify::HASH, "hset", key);
    ctx.reply.integer(1);
}

/// Looks up a hash for reading: `Ok(None)` for a missing key, `Err(())` after writing
/// WRONGTYPE.
pub(super) fn read<'a>(
    keys: &'a mut Locked<'_>,
    reply: &mut Reply,
    db: usize,
    key: &[u8],
) -> Result<Option<&'a Hash>, ()> {
    match keys.get(db, key) {
        None => Ok(None),
        Some(entry) => match hash_of(entry) {
            Some(hash) => Ok(Some(hash)),
            None => {
                reply.error(err::WRONGTYPE);
                Err(())
            }
        },
    }
}

fn hget(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let value = match read(ctx.keys, ctx.reply, db, &args[1]) {
        Err(()) => return,
        Ok(hash) => hash.and_then(|h| h.get(&args[2])),
    };
    match value {
        Some(value) => reply_elem(ctx.reply, value),
        None => ctx.reply.null(),
    }
}

fn hmget(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let Ok(hash) = read(ctx.keys, ctx.reply, db, &args[1]) else {
        return;
    };
    ctx.reply.array(args.len() - 2);
    for field in &args[2..] {
        match hash.and_then(|h| h.get(field)) {
            Some(value) => reply_elem(ctx.reply, value),
            None => ctx.reply.null(),
        }
    }
}

fn hdel(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let key = &args[1][..];
    let Some(entry) = ctx.keys.get(db, key) else {
        ctx.reply.integer(0);
        return;
    };
    let Some(hash) = hash_mut(entry) else {
        ctx.reply.error(err::WRONGTYPE);
        return;
    };
    let mut deleted = 0u64;
    for field in &args[2..] {
        if hash.remove(field) {
            deleted += 1;
            if hash.is_empty() {
                break;
            }
        }
    }
    let emptied = hash.is_empty();
    if emptied {
        ctx.keys.remove(db, key);
    }
    if deleted > 0 {
        ctx.keys.signal_modified(db, key);
        ctx.notify(notify::HASH, "hdel", key);
        if emptied {
            ctx.notify(notify::GENERIC, "del", key);
        }
        ctx.keys.add_dirty(db, key, deleted - 1);
    }
    ctx.reply.integer(deleted as i64);
}

fn hlen(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let len = match read(ctx.keys, ctx.reply, db, &args[1]) {
        Err(()) => return,
        Ok(hash) => hash.map_or(0, Hash::len),
    };
    ctx.reply.integer(len as i64);
}

fn hexists(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let found = match read(ctx.keys, ctx.reply, db, &args[1]) {
        Err(()) => return,
        Ok(hash) => hash.is_some_and(|h| h.contains(&args[2])),
    };
    ctx.reply.integer(i64::from(found));
}

fn hstrlen(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let len = match read(ctx.keys, ctx.reply, db, &args[1]) {
        Err(()) => return,
        // Integers kept as numbers count their digits, as Redis' sdigits10.
        Ok(hash) => hash
            .and_then(|h| h.get(&args[2]))
            .map_or(0, |value| text(value, &mut itoa::Buffer::new()).len()),
    };
    ctx.reply.integer(len as i64);
}
