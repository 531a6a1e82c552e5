//! DEL, UNLINK, EXISTS, TYPE, TOUCH.

use bytes::Bytes;
use latch_keyspace::lazyfree;

use crate::commands::Ctx;
use crate::pubsub::notify;
use crate::spec::{acl, flag, keyflag, Arg, CommandSpec, KeySpec};

pub(super) const DEL: CommandSpec = CommandSpec {
    name: "del",
    summary: "Deletes keys; replies with how many existed.",
    complexity: "O(N) where N is the number of keys that will be removed. When a key to remove holds a value other than a string, the individual complexity for this key is O(M) where M is the number of elements in the list, set, sorted set or hash. Removing a single key that holds a string value is O(1).",
    arity: -2,
    flags: flag::WRITE,
    acl: acl::KEYSPACE,
    key_specs: &[KeySpec::to_end(1, 1, keyflag::RM | keyflag::DELETE)],
    arguments: &[Arg::key("key", 0).multiple()],
    tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
    handler: Some(del),
    ..CommandSpec::BASE
};

pub(super) const UNLINK: CommandSpec = CommandSpec {
    name: "unlink",
    summary: "Deletes keys like DEL; any slow freeing of memory happens off the command path.",
    since: "4.0.0",
    complexity: "O(1) for each key removed regardless of its size. Then the command does O(N) work in a different thread in order to reclaim memory, where N is the number of allocations the deleted objects where composed of.",
    arity: -2,
    flags: flag::WRITE | flag::FAST,
    acl: acl::KEYSPACE,
    key_specs: &[KeySpec::to_end(1, 1, keyflag::RM | keyflag::DELETE)],
    arguments: &[Arg::key("key", 0).multiple()],
    tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
    handler: Some(unlink),
    ..CommandSpec::BASE
};

pub(super) const EXISTS: CommandSpec = CommandSpec {
    name: "exists",
    summary: "Counts how many of the given keys exist (a key named twice counts twice).",
    complexity: "O(N) where N is the number of keys to check.",
    arity: -2,
    flags: flag::READONLY | flag::FAST,
    acl: acl::KEYSPACE,
    key_specs: &[KeySpec::to_end(1, 1, keyflag::RO)],
    arguments: &[Arg::key("key", 0).multiple()],
    history: &[("3.0.3", "Several keys may be given.")],
    tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
    handler: Some(exists),
    ..CommandSpec::BASE
};

/// DEL frees the values here, unless `lazyfree-lazy-user-del` makes it UNLINK.
fn del(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    remove_keys(ctx, args, lazyfree::user_del());
}

/// UNLINK removes the keys at once and frees big values on the lazyfree thread.
fn unlink(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    remove_keys(ctx, args, true);
}

fn remove_keys(ctx: &mut Ctx<'_, '_>, args: &[Bytes], lazily: bool) {
    let db = ctx.db();
    let mut removed = 0;
    for key in &args[1..] {
        if let Some(entry) = ctx.keys.remove(db, key) {
            if lazily {
                lazyfree::free(entry.value);
            }
            ctx.keys.signal_modified(db, key);
            ctx.notify(notify::GENERIC, "del", key);
            removed += 1;
        }
    }
    ctx.reply.integer(removed);
}

pub(super) const TYPE: CommandSpec = CommandSpec {
    name: "type",
    summary: "Names the type of value a key holds, or `none`.",
    arity: 2,
    flags: flag::READONLY | flag::FAST,
    acl: acl::KEYSPACE,
    key_specs: &[KeySpec::single(1, keyflag::RO)],
    arguments: &[Arg::key("key", 0)],
    handler: Some(type_of),
    ..CommandSpec::BASE
};

pub(super) const TOUCH: CommandSpec = CommandSpec {
    name: "touch",
    summary: "Marks keys as just used; replies with how many exist.",
    since: "3.2.1",
    complexity: "O(N) where N is the number of keys that will be touched.",
    arity: -2,
    flags: flag::READONLY | flag::FAST,
    acl: acl::KEYSPACE,
    key_specs: &[KeySpec::to_end(1, 1, keyflag::RO)],
    arguments: &[Arg::key("key", 0).multiple()],
    tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
    handler: Some(touch),
    ..CommandSpec::BASE
};

/// EXISTS counts hits and misses like a read but leaves access times alone.
fn exists(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let mut found = 0;
    for key in &args[1..] {
        if ctx.keys.get_untouched(db, key).is_some() {
            found += 1;
        }
    }
    ctx.reply.integer(found);
}

fn type_of(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let name = match ctx.keys.get_untouched(db, &args[1]) {
        Some(value) => value.kind().name(),
        None => "none",
    };
    ctx.reply.simple(name.as_bytes());
}

/// A read of each key that refreshes its access time, even for a client in no-touch mode
/// (touching is what the command is for, as in Redis 7.2).
fn touch(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let mut found = 0;
    let saved_touch = ctx.keys.touch;
    ctx.keys.touch = true;
    for key in &args[1..] {
        if ctx.keys.get(db, key).is_some() {
            found += 1;
        }
    }
    ctx.keys.touch = saved_touch;
    ctx.reply.integer(found);
}
