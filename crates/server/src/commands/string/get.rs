//! Reading strings: GET, GETDEL, GETEX, MGET.

use bytes::Bytes;

use super::{expire_deadline, opt, parse_extended, reply_string, string_of, OptionsOf};
use crate::commands::{err, Ctx};
use crate::pubsub::notify;
use crate::spec::{acl, flag, keyflag, Arg, ArgType, CommandSpec, Group, KeySpec};

pub const GET: CommandSpec = CommandSpec {
    name: "get",
    group: Group::String,
    summary: "Returns the string stored at a key, or nil when the key does not exist.",
    since: "1.0.0",
    complexity: "O(1)",
    arity: 2,
    flags: flag::READONLY | flag::FAST,
    acl: acl::STRING,
    key_specs: &[KeySpec::single(1, keyflag::RO | keyflag::ACCESS)],
    arguments: &[Arg::key("key", 0)],
    handler: Some(get),
    ..CommandSpec::BASE
};

pub const GETDEL: CommandSpec = CommandSpec {
    name: "getdel",
    group: Group::String,
    summary: "Returns the string stored at a key and deletes the key.",
    since: "6.2.0",
    complexity: "O(1)",
    arity: 2,
    flags: flag::WRITE | flag::FAST,
    acl: acl::STRING,
    key_specs: &[KeySpec::single(
        1,
        keyflag::RW | keyflag::ACCESS | keyflag::DELETE,
    )],
    arguments: &[Arg::key("key", 0)],
    handler: Some(getdel),
    ..CommandSpec::BASE
};

pub const GETEX: CommandSpec = CommandSpec {
    name: "getex",
    group: Group::String,
    summary:
        "Returns the string stored at a key and optionally changes or removes its time to live.",
    since: "6.2.0",
    complexity: "O(1)",
    arity: -2,
    flags: flag::WRITE | flag::FAST,
    acl: acl::STRING,
    key_specs: &[KeySpec {
        notes: Some("RW and UPDATE because it changes the TTL"),
        ..KeySpec::single(1, keyflag::RW | keyflag::ACCESS | keyflag::UPDATE)
    }],
    arguments: &[
        Arg::key("key", 0),
        Arg::oneof(
            "expiration",
            &[
                Arg::integer("seconds").with_token("EX"),
                Arg::integer("milliseconds").with_token("PX"),
                Arg::new("unix-time-seconds", ArgType::UnixTime).with_token("EXAT"),
                Arg::new("unix-time-milliseconds", ArgType::UnixTime).with_token("PXAT"),
                Arg::token("persist", "PERSIST"),
            ],
        )
        .optional(),
    ],
    handler: Some(getex),
    ..CommandSpec::BASE
};

pub const MGET: CommandSpec = CommandSpec {
    name: "mget",
    group: Group::String,
    summary: "Returns the strings stored at several keys, nil for each key that is missing or not a string.",
    since: "1.0.0",
    complexity: "O(N) where N is the number of keys to retrieve.",
    arity: -2,
    flags: flag::READONLY | flag::FAST,
    acl: acl::STRING,
    key_specs: &[KeySpec::to_end(1, 1, keyflag::RO | keyflag::ACCESS)],
    arguments: &[Arg::key("key", 0).multiple()],
    tips: &["request_policy:multi_shard"],
    handler: Some(mget),
    ..CommandSpec::BASE
};

fn get(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let entry = ctx.keys.get(db, &args[1]);
    reply_string(ctx.reply, entry.map(|e| &*e));
}

fn getdel(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let key = &args[1][..];
    ctx.lookups_read(true);
    let entry = ctx.keys.get(db, key);
    let found = entry.is_some();
    if !reply_string(ctx.reply, entry.map(|e| &*e)) || !found {
        return;
    }
    if ctx.keys.remove(db, key).is_some() {
        ctx.keys.signal_modified(db, key);
        ctx.notify(notify::GENERIC, "del", key);
        ctx.propagate_with(|| vec![Bytes::from_static(b"DEL"), args[1].clone()]);
    }
}

fn getex(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Ok(options) = parse_extended(&args[2..], OptionsOf::Getex) else {
        ctx.reply.error(err::SYNTAX);
        return;
    };
    let db = ctx.db();
    let now = ctx.now();
    let key = &args[1][..];
    // Order as in Redis: a missing key answers nil before the expiry value is looked at.
    ctx.lookups_read(true);
    let Some(slot) = ctx.keys.get_slot(db, key) else {
        ctx.reply.null();
        return;
    };
    let had_deadline = slot.deadline().is_some();
    let Some(bytes) = string_of(slot.value()) else {
        ctx.reply.error(err::WRONGTYPE);
        return;
    };
    let deadline = match options.expire {
        Some(arg) => match expire_deadline(ctx.reply, now, options.flags, arg, "getex") {
            Some(deadline) => Some(deadline),
            None => return,
        },
        None => None,
    };
    // Reply before the TTL change, which may delete the key.
    ctx.reply.bulk(bytes);
    // Never logged as GETEX (which would be relative to the time of a replay) but as the
    // change it made, as Redis does.
    let logged: &'static [u8] = match deadline {
        // An absolute time already reached deletes the key (Redis' checkAlreadyExpired: a
        // deadline at or before now, except while loading, where the logged DEL that
        // followed does it).
        Some(deadline) if deadline.is_wall() && deadline.remaining_ms(now) <= 0 && !now.loading => {
            ctx.keys.remove(db, key);
            ctx.keys.signal_modified(db, key);
            ctx.notify(notify::GENERIC, "del", key);
            b"DEL"
        }
        Some(deadline) => {
            ctx.keys.set_deadline(db, key, Some(deadline));
            ctx.keys.signal_modified(db, key);
            ctx.notify(notify::GENERIC, "expire", key);
            let at_ms = deadline.unix_ms(now);
            ctx.propagate_with(|| {
                vec![
                    Bytes::from_static(b"PEXPIREAT"),
                    args[1].clone(),
                    Bytes::from(at_ms.to_string()),
                ]
            });
            return;
        }
        None if options.flags & opt::PERSIST != 0 && had_deadline => {
            ctx.keys.set_deadline(db, key, None);
            ctx.keys.signal_modified(db, key);
            ctx.notify(notify::GENERIC, "persist", key);
            b"PERSIST"
        }
        None => return,
    };
    ctx.propagate_with(|| vec![Bytes::from_static(logged), args[1].clone()]);
}

fn mget(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let keys = &args[1..];
    ctx.reply.array(keys.len());
    for key in keys {
        match ctx.keys.get(db, key).and_then(|entry| string_of(entry)) {
            Some(bytes) => ctx.reply.bulk(bytes),
            None => ctx.reply.null(),
        }
    }
}
