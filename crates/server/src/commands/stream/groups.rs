//! Consumer groups: XGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM.

use bytes::Bytes;
use latch_keyspace::stream::{Group as ConsumerGroup, Pending, StreamId};
use latch_keyspace::{Stream, Value};

use super::{
    log_group_id, log_xclaim, no_group_for_key, no_key_or_group, now_ms, parse_id, parse_strict_id,
    range_end_or_reply, range_start_or_reply, reply_entry, reply_id, stream_at, stream_or_reply,
    strict_id_or_reply, Deferred, WrongType,
};
use crate::commands::client::{help_reply, subcommand_syntax_error};
use crate::commands::{err, is, parse_i64, Ctx};
use crate::pubsub::notify;
use crate::spec::{acl, flag, keyflag, Arg, ArgType, CommandSpec, Group, KeySpec};

const GROUP_ID_ARG: Arg = Arg::oneof("id", &[Arg::string("id"), Arg::token("new_id", "$")]);

pub(super) const XGROUP: CommandSpec = CommandSpec {
    name: "xgroup",
    group: Group::Stream,
    summary: "Container for commands that manage consumer groups.",
    since: "5.0.0",
    complexity: "Depends on subcommand.",
    arity: -2,
    subcommands: &[
        CommandSpec {
            name: "delconsumer",
            group: Group::Stream,
            summary: "Removes a consumer (and its pending entries) from a consumer group.",
            since: "5.0.0",
            complexity: "O(1)",
            arity: 5,
            flags: flag::WRITE,
            acl: acl::STREAM,
            key_specs: &[KeySpec::single(2, keyflag::RW | keyflag::DELETE)],
            arguments: &[
                Arg::key("key", 0),
                Arg::string("groupname"),
                Arg::string("consumername"),
            ],
            handler: Some(xgroup),
            ..CommandSpec::BASE
        },
        CommandSpec {
            name: "setid",
            group: Group::Stream,
            summary: "Moves a consumer group's last delivered ID.",
            since: "5.0.0",
            complexity: "O(1)",
            arity: -5,
            flags: flag::WRITE,
            acl: acl::STREAM,
            key_specs: &[KeySpec::single(2, keyflag::RW | keyflag::UPDATE)],
            arguments: &[
                Arg::key("key", 0),
                Arg::string("groupname"),
                GROUP_ID_ARG,
                Arg::integer("entries_read")
                    .with_token("ENTRIESREAD")
                    .optional(),
            ],
            history: &[("7.0.0", "Gained the optional `ENTRIESREAD` argument.")],
            handler: Some(xgroup),
            ..CommandSpec::BASE
        },
        CommandSpec {
            name: "destroy",
            group: Group::Stream,
            summary: "Removes a consumer group from a stream.",
            since: "5.0.0",
            complexity:
                "O(N) where N is the number of entries in the group's pending entries list (PEL).",
            arity: 4,
            flags: flag::WRITE,
            acl: acl::STREAM,
            key_specs: &[KeySpec::single(2, keyflag::RW | keyflag::DELETE)],
            arguments: &[Arg::key("key", 0), Arg::string("groupname")],
            handler: Some(xgroup),
            ..CommandSpec::BASE
        },
        CommandSpec {
            name: "help",
            group: Group::Stream,
            summary: "Describes the XGROUP subcommands.",
            since: "5.0.0",
            complexity: "O(1)",
            arity: 2,
            flags: flag::LOADING | flag::STALE,
            acl: acl::STREAM,
            handler: Some(xgroup),
            ..CommandSpec::BASE
        },
        CommandSpec {
            name: "create",
            group: Group::Stream,
            summary: "Creates a consumer group on a stream, reading after the given ID.",
            since: "5.0.0",
            complexity: "O(1)",
            arity: -5,
            flags: flag::WRITE | flag::DENYOOM,
            acl: acl::STREAM,
            key_specs: &[KeySpec::single(2, keyflag::RW | keyflag::INSERT)],
            arguments: &[
                Arg::key("key", 0),
                Arg::string("groupname"),
                GROUP_ID_ARG,
                Arg::token("mkstream", "MKSTREAM").optional(),
                Arg::integer("entries_read")
                    .with_token("ENTRIESREAD")
                    .optional(),
            ],
            history: &[("7.0.0", "Gained the `ENTRIESREAD` option.")],
            handler: Some(xgroup),
            ..CommandSpec::BASE
        },
        CommandSpec {
            name: "createconsumer",
            group: Group::Stream,
            summary: "Adds a consumer to a consumer group.",
            since: "6.2.0",
            complexity: "O(1)",
            arity: 5,
            flags: flag::WRITE | flag::DENYOOM,
            acl: acl::STREAM,
            key_specs: &[KeySpec::single(2, keyflag::RW | keyflag::INSERT)],
            arguments: &[
                Arg::key("key", 0),
                Arg::string("groupname"),
                Arg::string("consumername"),
            ],
            handler: Some(xgroup),
            ..CommandSpec::BASE
        },
    ],
    ..CommandSpec::BASE
};

pub(super) const XACK: CommandSpec = CommandSpec {
    name: "xack",
    group: Group::Stream,
    summary: "Marks pending entries of a consumer group as processed; replies with how many were pending.",
    since: "5.0.0",
    complexity: "O(1) for each message ID processed.",
    arity: -4,
    flags: flag::WRITE | flag::FAST,
    acl: acl::STREAM,
    key_specs: &[KeySpec::single(1, keyflag::RW | keyflag::UPDATE)],
    arguments: &[
        Arg::key("key", 0),
        Arg::string("group"),
        Arg::string("id").multiple(),
    ],
    handler: Some(xack),
    ..CommandSpec::BASE
};

pub(super) const XPENDING: CommandSpec = CommandSpec {
    name: "xpending",
    group: Group::Stream,
    summary: "Describes the pending entries of a consumer group: a summary, or entries in an ID range.",
    since: "5.0.0",
    complexity: "O(N) with N being the number of elements returned, so asking for a small fixed number of entries per call is O(1). O(M), where M is the total number of entries scanned when used with the IDLE filter. When the command returns just the summary and the list of consumers is small, it runs in O(1) time; otherwise, an additional O(N) time for iterating every consumer.",
    arity: -3,
    flags: flag::READONLY,
    acl: acl::STREAM,
    key_specs: &[KeySpec::single(1, keyflag::RO | keyflag::ACCESS)],
    arguments: &[
        Arg::key("key", 0),
        Arg::string("group"),
        Arg::block(
            "filters",
            &[
                Arg::integer("min-idle-time")
                    .with_token("IDLE")
                    .optional()
                    .since("6.2.0"),
                Arg::string("start"),
                Arg::string("end"),
                Arg::integer("count"),
                Arg::string("consumer").optional(),
            ],
        )
        .optional(),
    ],
    history: &[("6.2.0", "Gained the `IDLE` filter and exclusive range bounds.")],
    tips: &["nondeterministic_output"],
    handler: Some(xpending),
    ..CommandSpec::BASE
};

pub(super) const XCLAIM: CommandSpec = CommandSpec {
    name: "xclaim",
    group: Group::Stream,
    summary: "Hands pending entries of a consumer group over to another consumer.",
    since: "5.0.0",
    complexity: "O(log N) with N being the number of messages in the PEL of the consumer group.",
    arity: -6,
    flags: flag::WRITE | flag::FAST,
    acl: acl::STREAM,
    key_specs: &[KeySpec::single(1, keyflag::RW | keyflag::UPDATE)],
    arguments: &[
        Arg::key("key", 0),
        Arg::string("group"),
        Arg::string("consumer"),
        Arg::string("min-idle-time"),
        Arg::string("id").multiple(),
        Arg::integer("ms").with_token("IDLE").optional(),
        Arg::new("unix-time-milliseconds", ArgType::UnixTime)
            .with_token("TIME")
            .optional(),
        Arg::integer("count").with_token("RETRYCOUNT").optional(),
        Arg::token("force", "FORCE").optional(),
        Arg::token("justid", "JUSTID").optional(),
        Arg::string("id").with_token("LASTID").optional(),
    ],
    tips: &["nondeterministic_output"],
    handler: Some(xclaim),
    ..CommandSpec::BASE
};

pub(super) const XAUTOCLAIM: CommandSpec = CommandSpec {
    name: "xautoclaim",
    group: Group::Stream,
    summary: "Hands pending entries idle for long enough over to another consumer, walking the pending list from a cursor.",
    since: "6.2.0",
    complexity: "O(1) if COUNT is small.",
    arity: -6,
    flags: flag::WRITE | flag::FAST,
    acl: acl::STREAM,
    key_specs: &[KeySpec::single(1, keyflag::RW | keyflag::DELETE)],
    arguments: &[
        Arg::key("key", 0),
        Arg::string("group"),
        Arg::string("consumer"),
        Arg::string("min-idle-time"),
        Arg::string("start"),
        Arg::integer("count").with_token("COUNT").optional(),
        Arg::token("justid", "JUSTID").optional(),
    ],
    history: &[(
        "7.0.0",
        "The reply gained a third element: the IDs of deleted entries dropped from the pending list.",
    )],
    tips: &["nondeterministic_output"],
    handler: Some(xautoclaim),
    ..CommandSpec::BASE
};

const KEY_MUST_EXIST: &[u8] = b"ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.";

/// Every XGROUP subcommand: Redis checks options, the key and the group in one order for
/// all of them, so they share one handler.
fn xgroup(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let sub = &args[1];
    let argc = args.len();
    let db = ctx.db();
    let mut mkstream = false;
    let mut entries_read: Option<i64> = None;
    if argc >= 4 {
        let create = is(sub, "CREATE");
        let setid = is(sub, "SETID");
        let mut i = 5;
        while i < argc {
            if create && is(&args[i], "MKSTREAM") {
                mkstream = true;
                i += 1;
            } else if (create || setid) && is(&args[i], "ENTRIESREAD") && i + 1 < argc {
                let Some(n) = parse_i64(&args[i + 1]) else {
                    ctx.reply.error(err::NOT_INTEGER);
                    return;
                };
                if n < -1 {
                    ctx.reply
                        .error(b"ERR value for ENTRIESREAD must be positive or -1");
                    return;
                }
                entries_read = (n >= 0).then_some(n);
                i += 2;
            } else {
                subcommand_syntax_error(ctx, args);
                return;
            }
        }
        let exists = match stream_at(ctx.keys, db, &args[2]) {
            Err(WrongType) => {
                ctx.reply.error(err::WRONGTYPE);
                return;
            }
            Ok(found) => found.map(|s| s.groups.contains_key(&args[3][..])),
        };
        if !mkstream {
            let Some(has_group) = exists else {
                ctx.reply.error(KEY_MUST_EXIST);
                return;
            };
            let needs_group =
                is(sub, "SETID") || is(sub, "CREATECONSUMER") || is(sub, "DELCONSUMER");
            if !has_group && needs_group {
                no_group_for_key(ctx.reply, &args[2], &args[3]);
                return;
            }
        }
    }
    if is(sub, "HELP") && argc == 2 {
        help_reply(
            ctx.reply,
            "xgroup",
            &[
                "CREATE <key> <groupname> <id|$> [option]",
                "    Create a consumer group reading after <id> ($: the stream's last ID). Options:",
                "    * MKSTREAM",
                "      Create an empty stream when the key is missing.",
                "    * ENTRIESREAD entries_read",
                "      Set how many entries the group counts as read (for replication).",
                "CREATECONSUMER <key> <groupname> <consumer>",
                "    Add a consumer to the group.",
                "DELCONSUMER <key> <groupname> <consumer>",
                "    Remove a consumer and its pending entries.",
                "DESTROY <key> <groupname>",
                "    Remove the group.",
                "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
                "    Move the group's last delivered ID (and set its read counter).",
            ],
        );
    } else if is(sub, "CREATE") && (5..=8).contains(&argc) {
        group_create(ctx, args, mkstream, entries_read);
    } else if is(sub, "SETID") && (argc == 5 || argc == 7) {
        group_setid(ctx, args, entries_read);
    } else if is(sub, "DESTROY") && argc == 4 {
        let removed = match stream_at(ctx.keys, db, &args[2]) {
            Ok(Some(stream)) => stream.groups.remove(&args[3][..]).is_some(),
            _ => false,
        };
        if removed {
            ctx.keys.signal_modified(db, &args[2]);
            ctx.notify(notify::STREAM, "xgroup-destroy", &args[2]);
        }
        ctx.reply.integer(i64::from(removed));
    } else if is(sub, "CREATECONSUMER") && argc == 5 {
        let now = now_ms(ctx);
        let created = match stream_at(ctx.keys, db, &args[2]) {
            Ok(Some(stream)) => stream
                .groups
                .get_mut(&args[3][..])
                .is_some_and(|g| g.create_consumer(&args[4], now)),
            _ => false,
        };
        if created {
            ctx.keys.signal_modified(db, &args[2]);
            ctx.notify(notify::STREAM, "xgroup-createconsumer", &args[2]);
        }
        ctx.reply.integer(i64::from(created));
    } else if is(sub, "DELCONSUMER") && argc == 5 {
        let pending = match stream_at(ctx.keys, db, &args[2]) {
            Ok(Some(stream)) => stream
                .groups
                .get_mut(&args[3][..])
                .and_then(|g| g.delete_consumer(&args[4])),
            _ => None,
        };
        if pending.is_some() {
            ctx.keys.signal_modified(db, &args[2]);
            ctx.notify(notify::STREAM, "xgroup-delconsumer", &args[2]);
        }
        ctx.reply.integer(pending.unwrap_or(0) as i64);
    } else {
        subcommand_syntax_error(ctx, args);
    }
}

/// XGROUP CREATE key group <id|$> [MKSTREAM] [ENTRIESREAD n]
fn group_create(ctx: &mut Ctx<'_, '_>, args: &[Bytes], mkstream: bool, entries_read: Option<i64>) {
    let db = ctx.db();
    let (key, name) = (&args[2][..], &args[3][..]);
    let last_id = match stream_at(ctx.keys, db, key) {
        Ok(found) => found.map_or(StreamId::MIN, |s| s.last_id),
        Err(WrongType) => return,
    };
    let id = if &args[4][..] == b"$" {
        last_id
    } else {
        let Some(id) = strict_id_or_reply(ctx.reply, &args[4]) else {
            return;
        };
        id
    };
    if mkstream && !ctx.keys.exists(db, key) {
        ctx.keys
            .set(db, key, Value::Stream(Box::new(Stream::new())), None);
        ctx.keys.signal_modified(db, key);
    }
    let created = match stream_at(ctx.keys, db, key) {
        Ok(Some(stream)) if !stream.groups.contains_key(name) => {
            stream
                .groups
                .insert(name.to_vec(), ConsumerGroup::new(id, entries_read));
            true
        }
        _ => false,
    };
    if created {
        ctx.keys.signal_modified(db, key);
        ctx.reply.ok();
        ctx.notify(notify::STREAM, "xgroup-create", key);
    } else {
        ctx.reply
            .error(b"BUSYGROUP Consumer Group name already exists");
    }
}

/// XGROUP SETID key group <id|$> [ENTRIESREAD n]
fn group_setid(ctx: &mut Ctx<'_, '_>, args: &[Bytes], entries_read: Option<i64>) {
    let db = ctx.db();
    let Ok(Some(stream)) = stream_at(ctx.keys, db, &args[2]) else {
        return;
    };
    let id = if &args[4][..] == b"$" {
        stream.last_id
    } else {
        match parse_id(&args[4], 0) {
            Some(id) => id,
            None => {
                ctx.reply.error(super::INVALID_ID);
                return;
            }
        }
    };
    let Some(group) = stream.groups.get_mut(&args[3][..]) else {
        return;
    };
    let changed = group.last_id != id || group.entries_read != entries_read;
    group.last_id = id;
    group.entries_read = entries_read;
    ctx.reply.ok();
    if changed {
        ctx.keys.signal_modified(db, &args[2]);
    }
    // Reported even when nothing changed, as Redis does.
    ctx.notify(notify::STREAM, "xgroup-setid", &args[2]);
}

/// XACK key group id [id ...]
fn xack(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    // Redis reads the stream (a miss is reported).
    ctx.lookups_read(true);
    let db = ctx.db();
    let has_group = match stream_or_reply(ctx.keys, ctx.reply, db, &args[1]) {
        Err(()) => return,
        Ok(found) => found.is_some_and(|s| s.groups.contains_key(&args[2][..])),
    };
    if !has_group {
        ctx.reply.integer(0);
        return;
    }
    // All IDs are checked before any is acknowledged: the reply cannot be an error once
    // some were.
    let mut ids = Vec::with_capacity(args.len() - 3);
    for arg in &args[3..] {
        let Some(id) = strict_id_or_reply(ctx.reply, arg) else {
            return;
        };
        ids.push(id);
    }
    let acked = match stream_at(ctx.keys, db, &args[1]) {
        Ok(Some(stream)) => match stream.groups.get_mut(&args[2][..]) {
            Some(group) => ids.iter().filter(|&&id| group.ack(id)).count(),
            None => 0,
        },
        _ => 0,
    };
    if acked > 0 {
        ctx.keys.signal_modified(db, &args[1]);
    }
    ctx.reply.integer(acked as i64);
}

/// The range form of XPENDING.
struct PendingRange<'a> {
    min_idle_ms: i64,
    start: StreamId,
    end: StreamId,
    count: usize,
    consumer: Option<&'a [u8]>,
}

/// XPENDING key group [[IDLE min-idle] start end count [consumer]]
fn xpending(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let argc = args.len();
    if argc != 3 && !(6..=9).contains(&argc) {
        ctx.reply.error(err::SYNTAX);
        return;
    }
    let mut range = None;
    if argc >= 6 {
        let mut at = 3;
        let mut min_idle_ms = 0;
        if is(&args[3], "IDLE") {
            let Some(idle) = parse_i64(&args[4]) else {
                ctx.reply.error(err::NOT_INTEGER);
                return;
            };
            if argc < 8 {
                ctx.reply.error(err::SYNTAX);
                return;
            }
            min_idle_ms = idle;
            at += 2;
        }
        let Some(count) = parse_i64(&args[at + 2]) else {
            ctx.reply.error(err::NOT_INTEGER);
            return;
        };
        let Some(start) = range_start_or_reply(ctx.reply, &args[at]) else {
            return;
        };
        let Some(end) = range_end_or_reply(ctx.reply, &args[at + 1]) else {
            return;
        };
        range = Some(PendingRange {
            min_idle_ms,
            start,
            end,
            count: usize::try_from(count).unwrap_or(0),
            consumer: args.get(at + 3).map(|c| &c[..]),
        });
    }
    let db = ctx.db();
    let now = now_ms(ctx);
    let Ok(found) = stream_or_reply(ctx.keys, ctx.reply, db, &args[1]) else {
        return;
    };
    let Some(group) = found.and_then(|s| s.groups.get(&args[2][..])) else {
        no_key_or_group(ctx.reply, &args[1], &args[2], "");
        return;
    };
    let Some(range) = range else {
        ctx.reply.array(4);
        ctx.reply.integer(group.pending.len() as i64);
        let (Some(first), Some(last)) = (
            group.pending.keys().next(),
            group.pending.keys().next_back(),
        ) else {
            ctx.reply.null();
            ctx.reply.null();
            ctx.reply.null_array();
            return;
        };
        reply_id(ctx.reply, *first);
        reply_id(ctx.reply, *last);
        let owners: Vec<_> = group
            .consumers
            .iter()
            .filter(|(_, c)| !c.pending.is_empty())
            .collect();
        ctx.reply.array(owners.len());
        for (name, consumer) in owners {
            ctx.reply.array(2);
            ctx.reply.bulk(name);
            ctx.reply.bulk_integer(consumer.pending.len() as i64);
        }
        return;
    };
    let ids: Vec<StreamId> = match range.consumer {
        Some(name) => match group.consumers.get(name) {
            Some(consumer) => consumer
                .pending
                .range(range.start..=range.end.max(range.start))
                .filter(|id| **id <= range.end)
                .copied()
                .collect(),
            None => {
                ctx.reply.array(0);
                return;
            }
        },
        None => group
            .pending
            .range(range.start..=range.end.max(range.start))
            .filter(|(id, _)| **id <= range.end)
            .map(|(id, _)| *id)
            .collect(),
    };
    let mut out = Deferred::new(ctx.reply);
    for id in ids {
        if out.count >= range.count {
            break;
        }
        let Some(pending) = group.pending.get(&id) else {
            continue;
        };
        // Delivery times come from payloads too (any value): wrapping, as in Redis.
        let idle = now.wrapping_sub(pending.delivery_ms);
        if range.min_idle_ms != 0 && idle < range.min_idle_ms {
            continue;
        }
        out.count += 1;
        let reply = &mut out.scratch;
        reply.array(4);
        reply_id(reply, id);
        reply.bulk(&pending.consumer);
        reply.integer(idle.max(0));
        reply.integer(pending.deliveries as i64);
    }
    out.finish_array(ctx.reply);
}

/// What a claim does to each pending entry it takes.
struct ClaimTerms<'a> {
    consumer: &'a [u8],
    min_idle_ms: i64,
    /// The delivery time claimed entries get.
    delivery_ms: i64,
    /// A fixed delivery counter (RETRYCOUNT), or `None` to count one more delivery.
    retry_count: Option<u64>,
    justid: bool,
    now: i64,
}

/// The outcome of claiming one ID.
enum Claimed {
    /// Taken by the consumer.
    Taken,
    /// The entry is gone from the stream; its pending record was dropped (if there was one,
    /// here as it was).
    Deleted(Option<Pending>),
    /// Not pending (and not forced), or not idle long enough.
    Skipped,
}

/// Claims one ID for `terms.consumer` (Redis' XCLAIM/XAUTOCLAIM loop body). `force`
/// creates the pending record when the entry exists but is not pending. `consumer_seen`
/// tracks whether the consumer was already looked up (its seen time refreshes once), and
/// then whether that created it.
fn claim_one(
    stream: &mut Stream,
    group_name: &[u8],
    id: StreamId,
    terms: &ClaimTerms<'_>,
    force: bool,
    consumer_seen: &mut Option<bool>,
) -> Claimed {
    let exists = stream.contains(&id);
    let Some(group) = stream.groups.get_mut(group_name) else {
        return Claimed::Skipped;
    };
    if !exists {
        let dropped = group.pending.get(&id).cloned();
        group.ack(id);
        return Claimed::Deleted(dropped);
    }
    let pending = group.pending.get(&id).map(|p| p.delivery_ms);
    match pending {
        None if !force => return Claimed::Skipped,
        Some(delivered)
            if terms.min_idle_ms > 0 && terms.now.wrapping_sub(delivered) < terms.min_idle_ms =>
        {
            return Claimed::Skipped;
        }
        _ => {}
    }
    if consumer_seen.is_none() {
        *consumer_seen = Some(group.touch_consumer(terms.consumer, terms.now));
    }
    if pending.is_none() {
        let record = Pending {
            consumer: terms.consumer.to_vec(),
            delivery_ms: terms.now,
            deliveries: 1,
        };
        group.insert_pending(id, terms.consumer, record);
    }
    if let Some(record) = group.transfer(id, terms.consumer) {
        record.delivery_ms = terms.delivery_ms;
        match terms.retry_count {
            Some(n) => record.deliveries = n,
            None if !terms.justid => record.deliveries = record.deliveries.saturating_add(1),
            None => {}
        }
    }
    Claimed::Taken
}

/// One claimed entry in the reply: its ID alone (JUSTID) or the whole entry.
fn reply_claimed(reply: &mut latch_protocol::Reply, stream: &Stream, id: StreamId, justid: bool) {
    if justid {
        reply_id(reply, id);
    } else if let Some(fields) = stream.get(&id) {
        reply_entry(reply, id, fields);
    }
}

/// XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME ms] [RETRYCOUNT n]
/// [FORCE] [JUSTID] [LASTID id]
fn xclaim(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    // Redis reads the stream (a miss is reported).
    ctx.lookups_read(true);
    let db = ctx.db();
    let has_group = match stream_or_reply(ctx.keys, ctx.reply, db, &args[1]) {
        Err(()) => return,
        Ok(found) => found.is_some_and(|s| s.groups.contains_key(&args[2][..])),
    };
    if !has_group {
        no_key_or_group(ctx.reply, &args[1], &args[2], "");
        return;
    }
    let Some(min_idle_ms) = parse_i64(&args[4]) else {
        ctx.reply
            .error(b"ERR Invalid min-idle-time argument for XCLAIM");
        return;
    };
    // IDs run until the first argument that is not one; options follow.
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match parse_strict_id(&args[j], 0) {
            Some(id) => ids.push(id),
            None => break,
        }
        j += 1;
    }
    let now = now_ms(ctx);
    let mut delivery_ms: Option<i64> = None;
    let mut retry_count: Option<u64> = None;
    let mut force = false;
    let mut justid = false;
    let mut last_id = StreamId::MIN;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = &args[j];
        let number = |message: &'static [u8], arg: &[u8], reply: &mut latch_protocol::Reply| {
            let n = parse_i64(arg);
            if n.is_none() {
                reply.error(message);
            }
            n
        };
        if is(opt, "FORCE") {
            force = true;
        } else if is(opt, "JUSTID") {
            justid = true;
        } else if is(opt, "IDLE") && more > 0 {
            j += 1;
            let message = b"ERR Invalid IDLE option argument for XCLAIM";
            let Some(idle) = number(message, &args[j], ctx.reply) else {
                return;
            };
            delivery_ms = Some(now.wrapping_sub(idle));
        } else if is(opt, "TIME") && more > 0 {
            j += 1;
            let message = b"ERR Invalid TIME option argument for XCLAIM";
            let Some(time) = number(message, &args[j], ctx.reply) else {
                return;
            };
            delivery_ms = Some(time);
        } else if is(opt, "RETRYCOUNT") && more > 0 {
            j += 1;
            let message = b"ERR Invalid RETRYCOUNT option argument for XCLAIM";
            let Some(count) = number(message, &args[j], ctx.reply) else {
                return;
            };
            // A negative count reads as "not given", as in Redis.
            retry_count = u64::try_from(count).ok();
        } else if is(opt, "LASTID") && more > 0 {
            j += 1;
            let Some(id) = strict_id_or_reply(ctx.reply, &args[j]) else {
                return;
            };
            last_id = id;
        } else {
            let message = format!(
                "ERR Unrecognized XCLAIM option '{}'",
                String::from_utf8_lossy(opt)
            );
            ctx.reply.error(message.as_bytes());
            return;
        }
        j += 1;
    }
    // A delivery time in the future or before 1970 is taken as now: clients compute it
    // from their own clocks, which may run ahead.
    let delivery_ms = delivery_ms
        .filter(|&t| (0..=now).contains(&t))
        .unwrap_or(now);
    let terms = ClaimTerms {
        consumer: &args[3],
        min_idle_ms: min_idle_ms.max(0),
        delivery_ms,
        retry_count,
        justid,
        now,
    };
    let Ok(Some(stream)) = stream_at(ctx.keys, db, &args[1]) else {
        return;
    };
    let mut changed = false;
    // The new last ID needs logging unless an XCLAIM logged below carries it.
    let mut log_last_id = false;
    if let Some(group) = stream.groups.get_mut(&args[2][..]) {
        if last_id > group.last_id {
            group.last_id = last_id;
            changed = true;
            log_last_id = true;
        }
    }
    let logging = ctx.server.persistence.is_logging();
    let mut logged = Vec::new();
    let mut out = Deferred::new(ctx.reply);
    let mut consumer_seen = None;
    for (at, id) in ids.into_iter().enumerate() {
        let outcome = claim_one(stream, &args[2], id, &terms, force, &mut consumer_seen);
        let touched = match outcome {
            Claimed::Taken => {
                reply_claimed(&mut out.scratch, stream, id, justid);
                out.count += 1;
                stream
                    .groups
                    .get(&args[2][..])
                    .and_then(|g| g.pending.get(&id))
                    .cloned()
            }
            Claimed::Deleted(dropped) => dropped,
            Claimed::Skipped => None,
        };
        let Some(pending) = touched else {
            continue;
        };
        changed = true;
        log_last_id = false;
        if logging {
            let group_last = stream
                .groups
                .get(&args[2][..])
                .map_or(last_id, |g| g.last_id);
            // The ID as the client wrote it, as Redis logs it.
            let id_arg = args[5 + at].clone();
            logged.push(log_xclaim(&args[1], &args[2], id_arg, &pending, group_last));
        }
    }
    if log_last_id && logging {
        if let Some(group) = stream.groups.get(&args[2][..]) {
            logged.push(log_group_id(&args[1], &args[2], group));
        }
    }
    out.finish_array(ctx.reply);
    if changed {
        ctx.keys.signal_modified(db, &args[1]);
    }
    if consumer_seen == Some(true) {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", &args[1]);
    }
    // Logged as the exact changes (a claim depends on the time and on idle times), as
    // Redis does.
    ctx.propagate_nothing();
    for entry in logged {
        ctx.propagate(entry);
    }
}

/// XAUTOCLAIM's COUNT bound, as Redis computes it (so its allocation cannot overflow).
const AUTOCLAIM_MAX_COUNT: i64 = i64::MAX / 16;
/// XAUTOCLAIM looks at no more than this many pending entries per one it may claim.
const AUTOCLAIM_ATTEMPTS_FACTOR: u64 = 10;

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]
fn xautoclaim(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    // Redis reads the stream (a miss is reported).
    ctx.lookups_read(true);
    let Some(min_idle_ms) = parse_i64(&args[4]) else {
        ctx.reply
            .error(b"ERR Invalid min-idle-time argument for XAUTOCLAIM");
        return;
    };
    let Some(start) = range_start_or_reply(ctx.reply, &args[5]) else {
        return;
    };
    let mut count: u64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if is(&args[j], "COUNT") && more > 0 {
            match parse_i64(&args[j + 1]) {
                Some(n) if (1..=AUTOCLAIM_MAX_COUNT).contains(&n) => count = n as u64,
                _ => {
                    ctx.reply.error(b"ERR COUNT must be > 0");
                    return;
                }
            }
            j += 1;
        } else if is(&args[j], "JUSTID") {
            justid = true;
        } else {
            ctx.reply.error(err::SYNTAX);
            return;
        }
        j += 1;
    }
    let db = ctx.db();
    let now = now_ms(ctx);
    let Ok(found) = stream_or_reply(ctx.keys, ctx.reply, db, &args[1]) else {
        return;
    };
    let Some(stream) = found.filter(|s| s.groups.contains_key(&args[2][..])) else {
        no_key_or_group(ctx.reply, &args[1], &args[2], "");
        return;
    };
    let terms = ClaimTerms {
        consumer: &args[3],
        min_idle_ms: min_idle_ms.max(0),
        delivery_ms: now,
        retry_count: None,
        justid,
        now,
    };
    let logging = ctx.server.persistence.is_logging();
    let mut logged = Vec::new();
    let mut attempts = count.saturating_mul(AUTOCLAIM_ATTEMPTS_FACTOR);
    let mut claimed = Deferred::new(ctx.reply);
    let mut deleted: Vec<StreamId> = Vec::new();
    let mut consumer_seen = None;
    let mut changed = false;
    // The last pending ID looked at; the walk resumes after it.
    let mut cursor: Option<StreamId> = None;
    let mut exhausted = false;
    while attempts > 0 && count > 0 {
        attempts -= 1;
        let next = stream.groups.get(&args[2][..]).and_then(|g| {
            let from = match cursor {
                None => std::ops::Bound::Included(start),
                Some(id) => std::ops::Bound::Excluded(id),
            };
            g.pending
                .range((from, std::ops::Bound::Unbounded))
                .next()
                .map(|(id, _)| *id)
        });
        let Some(id) = next else {
            exhausted = true;
            break;
        };
        cursor = Some(id);
        let touched = match claim_one(stream, &args[2], id, &terms, false, &mut consumer_seen) {
            Claimed::Taken => {
                reply_claimed(&mut claimed.scratch, stream, id, justid);
                claimed.count += 1;
                stream
                    .groups
                    .get(&args[2][..])
                    .and_then(|g| g.pending.get(&id))
                    .cloned()
            }
            Claimed::Deleted(dropped) => {
                deleted.push(id);
                dropped
            }
            Claimed::Skipped => continue,
        };
        count -= 1;
        changed = true;
        if let Some(pending) = touched.filter(|_| logging) {
            let group_last = stream
                .groups
                .get(&args[2][..])
                .map_or(StreamId::MIN, |g| g.last_id);
            let id_arg = Bytes::from(id.to_string());
            logged.push(log_xclaim(&args[1], &args[2], id_arg, &pending, group_last));
        }
    }
    let next_cursor = if exhausted {
        StreamId::MIN
    } else {
        stream
            .groups
            .get(&args[2][..])
            .and_then(|g| {
                let from = match cursor {
                    None => std::ops::Bound::Included(start),
                    Some(id) => std::ops::Bound::Excluded(id),
                };
                g.pending
                    .range((from, std::ops::Bound::Unbounded))
                    .next()
                    .map(|(id, _)| *id)
            })
            .unwrap_or(StreamId::MIN)
    };
    ctx.reply.array(3);
    reply_id(ctx.reply, next_cursor);
    claimed.finish_array(ctx.reply);
    ctx.reply.array(deleted.len());
    for id in deleted {
        reply_id(ctx.reply, id);
    }
    if changed {
        ctx.keys.signal_modified(db, &args[1]);
    }
    if consumer_seen == Some(true) {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", &args[1]);
    }
    // Logged as the exact changes (a claim depends on the time and on idle times), as
    // Redis does.
    ctx.propagate_nothing();
    for entry in logged {
        ctx.propagate(entry);
    }
}
