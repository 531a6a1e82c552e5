//! Writing strings: SET (and its older forms SETNX, SETEX, PSETEX, GETSET), MSET, MSETNX.

use bytes::Bytes;
use latch_keyspace::{Slot, Value};

use super::compare::Condition;
use super::{expire_deadline, opt, parse_extended, reply_string, string_of, OptionsOf};
use crate::commands::{arity_error, err, is, Ctx};
use crate::pubsub::notify;
use crate::spec::{acl, docflag, flag, keyflag, Arg, ArgType, CommandSpec, Group, KeySpec};

pub const SET: CommandSpec = CommandSpec {
    name: "set",
    group: Group::String,
    summary:
        "Stores a string at a key, with optional conditions, expiry, and return of the old value.",
    since: "1.0.0",
    complexity: "O(1)",
    arity: -3,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::STRING,
    key_specs: &[KeySpec {
        notes: Some("RW and ACCESS due to the optional `GET` argument"),
        ..KeySpec::single(
            1,
            keyflag::RW | keyflag::ACCESS | keyflag::UPDATE | keyflag::VARIABLE_FLAGS,
        )
    }],
    arguments: &[
        Arg::key("key", 0),
        Arg::string("value"),
        Arg::oneof(
            "condition",
            &[
                Arg::token("nx", "NX"),
                Arg::token("xx", "XX"),
                Arg::string("ifeq-value").with_token("IFEQ").since("8.4.0"),
                Arg::string("ifne-value").with_token("IFNE").since("8.4.0"),
                Arg::string("ifdeq-digest")
                    .with_token("IFDEQ")
                    .since("8.4.0"),
                Arg::string("ifdne-digest")
                    .with_token("IFDNE")
                    .since("8.4.0"),
            ],
        )
        .optional()
        .since("2.6.12"),
        Arg::token("get", "GET").optional().since("6.2.0"),
        Arg::oneof(
            "expiration",
            &[
                Arg::integer("seconds").with_token("EX").since("2.6.12"),
                Arg::integer("milliseconds")
                    .with_token("PX")
                    .since("2.6.12"),
                Arg::new("unix-time-seconds", ArgType::UnixTime)
                    .with_token("EXAT")
                    .since("6.2.0"),
                Arg::new("unix-time-milliseconds", ArgType::UnixTime)
                    .with_token("PXAT")
                    .since("6.2.0"),
                Arg::token("keepttl", "KEEPTTL").since("6.0.0"),
            ],
        )
        .optional(),
    ],
    history: &[
        ("2.6.12", "Gained the `EX`, `PX`, `NX` and `XX` options."),
        ("6.0.0", "Gained the `KEEPTTL` option."),
        ("6.2.0", "Gained the `GET`, `EXAT` and `PXAT` options."),
        ("7.0.0", "`NX` and `GET` may be combined."),
        (
            "8.4.0",
            "Gained the `IFEQ`, `IFNE`, `IFDEQ` and `IFDNE` options.",
        ),
    ],
    handler: Some(set),
    ..CommandSpec::BASE
};

pub const SETNX: CommandSpec = CommandSpec {
    name: "setnx",
    group: Group::String,
    summary: "Stores a string at a key only when the key does not exist yet.",
    since: "1.0.0",
    complexity: "O(1)",
    arity: 3,
    flags: flag::WRITE | flag::DENYOOM | flag::FAST,
    acl: acl::STRING,
    key_specs: &[KeySpec::single(1, keyflag::OW | keyflag::INSERT)],
    arguments: &[Arg::key("key", 0), Arg::string("value")],
    doc_flags: docflag::DEPRECATED,
    deprecated_since: Some("2.6.12"),
    replaced_by: Some("`SET` with the `NX` argument"),
    handler: Some(setnx),
    ..CommandSpec::BASE
};

pub const SETEX: CommandSpec = CommandSpec {
    name: "setex",
    group: Group::String,
    summary: "Stores a string at a key with a time to live in seconds.",
    since: "2.0.0",
    complexity: "O(1)",
    arity: 4,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::STRING,
    key_specs: &[KeySpec::single(1, keyflag::OW | keyflag::UPDATE)],
    arguments: &[
        Arg::key("key", 0),
        Arg::integer("seconds"),
        Arg::string("value"),
    ],
    doc_flags: docflag::DEPRECATED,
    deprecated_since: Some("2.6.12"),
    replaced_by: Some("`SET` with the `EX` argument"),
    handler: Some(setex),
    ..CommandSpec::BASE
};

pub const PSETEX: CommandSpec = CommandSpec {
    name: "psetex",
    group: Group::String,
    summary: "Stores a string at a key with a time to live in milliseconds.",
    since: "2.6.0",
    complexity: "O(1)",
    arity: 4,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::STRING,
    key_specs: &[KeySpec::single(1, keyflag::OW | keyflag::UPDATE)],
    arguments: &[
        Arg::key("key", 0),
        Arg::integer("milliseconds"),
        Arg::string("value"),
    ],
    doc_flags: docflag::DEPRECATED,
    deprecated_since: Some("2.6.12"),
    replaced_by: Some("`SET` with the `PX` argument"),
    handler: Some(psetex),
    ..CommandSpec::BASE
};

pub const GETSET: CommandSpec = CommandSpec {
    name: "getset",
    group: Group::String,
    summary: "Stores a string at a key and returns the string it replaced.",
    since: "1.0.0",
    complexity: "O(1)",
    arity: 3,
    flags: flag::WRITE | flag::DENYOOM | flag::FAST,
    acl: acl::STRING,
    key_specs: &[KeySpec::single(
        1,
        keyflag::RW | keyflag::ACCESS | keyflag::UPDATE,
    )],
    arguments: &[Arg::key("key", 0), Arg::string("value")],
    doc_flags: docflag::DEPRECATED,
    deprecated_since: Some("6.2.0"),
    replaced_by: Some("`SET` with the `!GET` argument"),
    handler: Some(getset),
    ..CommandSpec::BASE
};

const KEY_VALUE_PAIRS: &[Arg] =
    &[Arg::block("key_value", &[Arg::key("key", 0), Arg::string("value")]).multiple()];

pub const MSET: CommandSpec = CommandSpec {
    name: "mset",
    group: Group::String,
    summary: "Stores several strings at several keys in one step.",
    since: "1.0.1",
    complexity: "O(N) where N is the number of keys to set.",
    arity: -3,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::STRING,
    key_specs: &[KeySpec::to_end(1, 2, keyflag::OW | keyflag::UPDATE)],
    arguments: KEY_VALUE_PAIRS,
    tips: &[
        "request_policy:multi_shard",
        "response_policy:all_succeeded",
    ],
    handler: Some(mset),
    ..CommandSpec::BASE
};

pub const MSETNX: CommandSpec = CommandSpec {
    name: "msetnx",
    group: Group::String,
    summary: "Stores several strings at several keys, only when none of the keys exists.",
    since: "1.0.1",
    complexity: "O(N) where N is the number of keys to set.",
    arity: -3,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::STRING,
    key_specs: &[KeySpec::to_end(1, 2, keyflag::OW | keyflag::INSERT)],
    arguments: KEY_VALUE_PAIRS,
    tips: &["request_policy:multi_shard", "response_policy:agg_min"],
    handler: Some(msetnx),
    ..CommandSpec::BASE
};

/// How a SET variant answers: SET, SETEX and PSETEX say `+OK` or nil; SETNX says 1 or 0.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answer {
    OkOrNil,
    OneOrZero,
}

/// The common core of SET, SETNX, SETEX and PSETEX (Redis' `setGenericCommand`). `flags`
/// holds the parsed options; `expire` the argument of EX/PX/EXAT/PXAT when there is one;
/// `condition` SET's IFEQ/IFNE/IFDEQ/IFDNE.
#[allow(clippy::too_many_arguments)]
fn set_generic(
    ctx: &mut Ctx<'_, '_>,
    args: &[Bytes],
    (key, value): (&Bytes, &Bytes),
    flags: u16,
    expire: Option<&[u8]>,
    condition: Option<Condition<'_>>,
    command: &str,
    answer: Answer,
) {
    if let Some(condition) = &condition {
        if !condition.validate(ctx.reply) {
            return;
        }
    }
    let db = ctx.db();
    let now = ctx.now();
    let deadline = match expire {
        Some(arg) => match expire_deadline(ctx.reply, now, flags, arg, command) {
            Some(deadline) => Some(deadline),
            None => return,
        },
        None => None,
    };
    // SET ... GET reads the key first (a read: a miss is reported), then looks it up to
    // write it.
    if flags & opt::GET != 0 {
        ctx.lookups_read(true);
    }
    let existing = ctx.keys.get_slot(db, key);
    if flags & opt::GET != 0 && !reply_string(ctx.reply, existing.as_deref().map(Slot::value)) {
        return;
    }
    let found = existing.is_some();
    let kept_deadline = if flags & opt::KEEPTTL != 0 {
        existing.as_deref().and_then(|slot| slot.deadline())
    } else {
        None
    };
    let mut refused = (flags & opt::NX != 0 && found) || (flags & opt::XX != 0 && !found);
    if let Some(condition) = &condition {
        // A condition compares strings: another type is WRONGTYPE (after GET's own check).
        let current = match existing.as_deref().map(|slot| string_of(slot.value())) {
            None => None,
            Some(Some(current)) => Some(&current[..]),
            Some(None) => {
                ctx.reply.error(crate::commands::err::WRONGTYPE);
                return;
            }
        };
        refused = !condition.holds(current);
    }
    if refused {
        if flags & opt::GET == 0 {
            match answer {
                Answer::OkOrNil => ctx.reply.null(),
                Answer::OneOrZero => ctx.reply.integer(0),
            }
        }
        return;
    }
    // An absolute deadline already in the past is stored as it is: the key is gone at its
    // next lookup, as in Redis (which sets the key and then its past expiry).
    ctx.keys.set(
        db,
        key,
        Value::Str(value.to_vec()),
        deadline.or(kept_deadline),
    );
    ctx.keys.signal_modified(db, key);
    ctx.notify(notify::STRING, "set", key);
    if flags & opt::GET == 0 {
        match answer {
            Answer::OkOrNil => ctx.reply.ok(),
            Answer::OneOrZero => ctx.reply.integer(1),
        }
    }
    if let Some(deadline) = deadline {
        ctx.notify(notify::GENERIC, "expire", key);
        // Logged with the absolute time the key ends at, as Redis does: a replay later must
        // not give the key a longer life than it had.
        let at_ms = deadline.unix_ms(now);
        ctx.propagate_with(|| {
            vec![
                Bytes::from_static(b"SET"),
                key.clone(),
                value.clone(),
                Bytes::from_static(b"PXAT"),
                Bytes::from(at_ms.to_string()),
            ]
        });
    } else if condition.is_some() {
        // The condition held here; replicas (redis-server 7 among them) get the plain write.
        ctx.propagate_with(|| {
            let mut write = vec![Bytes::from_static(b"SET"), key.clone(), value.clone()];
            if flags & opt::KEEPTTL != 0 {
                write.push(Bytes::from_static(b"KEEPTTL"));
            }
            write
        });
    } else if flags & opt::GET != 0 {
        // GET only reads: the log keeps the write without it (every GET, as Redis drops them).
        ctx.propagate_with(|| {
            args.iter()
                .enumerate()
                .filter(|(at, arg)| *at < 3 || !is(arg, "GET"))
                .map(|(_, arg)| arg.clone())
                .collect()
        });
    }
}

fn set(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Ok(options) = parse_extended(&args[3..], OptionsOf::Set) else {
        ctx.reply.error(err::SYNTAX);
        return;
    };
    set_generic(
        ctx,
        args,
        (&args[1], &args[2]),
        options.flags,
        options.expire,
        options.condition,
        "set",
        Answer::OkOrNil,
    );
}

fn setnx(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    set_generic(
        ctx,
        args,
        (&args[1], &args[2]),
        opt::NX,
        None,
        None,
        "setnx",
        Answer::OneOrZero,
    );
}

fn setex(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    set_generic(
        ctx,
        args,
        (&args[1], &args[3]),
        opt::EX,
        Some(&args[2]),
        None,
        "setex",
        Answer::OkOrNil,
    );
}

fn psetex(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    set_generic(
        ctx,
        args,
        (&args[1], &args[3]),
        opt::PX,
        Some(&args[2]),
        None,
        "psetex",
        Answer::OkOrNil,
    );
}

fn getset(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let key = &args[1][..];
    ctx.lookups_read(true);
    let existing = ctx.keys.get(db, key);
    if !reply_string(ctx.reply, existing.as_deref()) {
        return;
    }
    ctx.lookups_read(false);
    // Like SET without options: the new value has no TTL.
    ctx.keys.set(db, key, Value::Str(args[2].to_vec()), None);
    ctx.keys.signal_modified(db, key);
    ctx.notify(notify::STRING, "set", key);
    // Logged as the SET it amounts to, as Redis does.
    ctx.propagate_with(|| vec![Bytes::from_static(b"SET"), args[1].clone(), args[2].clone()]);
}

fn mset(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if args.len().is_multiple_of(2) {
        ctx.reply.error(&arity_error("mset"));
        return;
    }
    store_pairs(ctx, &args[1..]);
    ctx.reply.ok();
}

fn msetnx(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if args.len().is_multiple_of(2) {
        ctx.reply.error(&arity_error("msetnx"));
        return;
    }
    let db = ctx.db();
    let pairs = &args[1..];
    if pairs
        .chunks_exact(2)
        .any(|pair| ctx.keys.exists(db, &pair[0]))
    {
        ctx.reply.integer(0);
        return;
    }
    store_pairs(ctx, pairs);
    ctx.reply.integer(1);
}

/// Stores `key value key value ...` (a later pair for the same key wins), clearing TTLs.
fn store_pairs(ctx: &mut Ctx<'_, '_>, pairs: &[Bytes]) {
    let db = ctx.db();
    for pair in pairs.chunks_exact(2) {
        ctx.keys
            .set(db, &pair[0], Value::Str(pair[1].to_vec()), None);
        ctx.keys.signal_modified(db, &pair[0]);
        ctx.notify(notify::STRING, "set", &pair[0]);
    }
}
