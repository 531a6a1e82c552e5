//! XINFO STREAM | GROUPS | CONSUMERS | HELP: describing a stream and its groups.

use bytes::Bytes;
use latch_keyspace::stream::StreamId;
use latch_keyspace::Stream;
use latch_protocol::Reply;

use super::{no_group_for_key, now_ms, reply_entry, reply_id, stream_or_reply};
use crate::commands::client::{help_reply, subcommand_syntax_error};
use crate::commands::{err, is, parse_i64, Ctx};
use crate::spec::{acl, flag, keyflag, Arg, CommandSpec, Group, KeySpec};

const SUBCOMMAND_KEY: &[KeySpec] = &[KeySpec::single(2, keyflag::RO | keyflag::ACCESS)];

pub(super) const XINFO: CommandSpec = CommandSpec {
    name: "xinfo",
    group: Group::Stream,
    summary: "Container for commands that describe streams, their groups and consumers.",
    since: "5.0.0",
    complexity: "Depends on subcommand.",
    arity: -2,
    subcommands: &[
        CommandSpec {
            name: "groups",
            group: Group::Stream,
            summary: "Lists the consumer groups of a stream.",
            since: "5.0.0",
            complexity: "O(1)",
            arity: 3,
            flags: flag::READONLY,
            acl: acl::STREAM,
            key_specs: SUBCOMMAND_KEY,
            arguments: &[Arg::key("key", 0)],
            history: &[("7.0.0", "Gained the `entries-read` and `lag` fields.")],
            handler: Some(groups),
            ..CommandSpec::BASE
        },
        CommandSpec {
            name: "stream",
            group: Group::Stream,
            summary: "Describes a stream: its counters, and its first and last entries or (FULL) its entries and groups.",
            since: "5.0.0",
            complexity: "O(1)",
            arity: -3,
            flags: flag::READONLY,
            acl: acl::STREAM,
            key_specs: SUBCOMMAND_KEY,
            arguments: &[
                Arg::key("key", 0),
                Arg::block(
                    "full",
                    &[Arg::integer("count").with_token("COUNT").optional()],
                )
                .with_token("FULL")
                .optional(),
            ],
            history: &[
                ("6.0.0", "Gained the `FULL` form."),
                (
                    "7.0.0",
                    "Gained the `max-deleted-entry-id`, `entries-added`, `recorded-first-entry-id`, `entries-read` and `lag` fields.",
                ),
            ],
            handler: Some(stream_info),
            ..CommandSpec::BASE
        },
        CommandSpec {
            name: "help",
            group: Group::Stream,
            summary: "Describes the XINFO subcommands.",
            since: "5.0.0",
            complexity: "O(1)",
            arity: 2,
            flags: flag::LOADING | flag::STALE,
            acl: acl::STREAM,
            handler: Some(help),
            ..CommandSpec::BASE
        },
        CommandSpec {
            name: "consumers",
            group: Group::Stream,
            summary: "Lists the consumers of a consumer group.",
            since: "5.0.0",
            complexity: "O(1)",
            arity: 4,
            flags: flag::READONLY,
            acl: acl::STREAM,
            key_specs: SUBCOMMAND_KEY,
            arguments: &[Arg::key("key", 0), Arg::string("groupname")],
            tips: &["nondeterministic_output"],
            handler: Some(consumers),
            ..CommandSpec::BASE
        },
    ],
    ..CommandSpec::BASE
};

fn help(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    help_reply(
        ctx.reply,
        "xinfo",
        &[
            "CONSUMERS <key> <groupname>",
            "    List the consumers of <groupname> with their pending counts and idle times.",
            "GROUPS <key>",
            "    List the consumer groups of the stream.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Describe the stream; FULL adds its entries and groups (COUNT of each, default 10).",
        ],
    );
}

/// Redis writes a missing value (an unknown group counter or lag) as a null.
fn reply_optional(reply: &mut Reply, value: Option<i64>) {
    match value {
        Some(n) => reply.integer(n),
        None => reply.null(),
    }
}

/// XINFO CONSUMERS key group
fn consumers(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let now = now_ms(ctx);
    let Ok(found) = stream_or_reply(ctx.keys, ctx.reply, db, &args[2]) else {
        return;
    };
    let Some(stream) = found else {
        ctx.reply.error(err::NO_SUCH_KEY);
        return;
    };
    let Some(group) = stream.groups.get(&args[3][..]) else {
        no_group_for_key(ctx.reply, &args[2], &args[3]);
        return;
    };
    ctx.reply.array(group.consumers.len());
    for (name, consumer) in &group.consumers {
        ctx.reply.map(3);
        ctx.reply.bulk(b"name");
        ctx.reply.bulk(name);
        ctx.reply.bulk(b"pending");
        ctx.reply.integer(consumer.pending.len() as i64);
        ctx.reply.bulk(b"idle");
        ctx.reply.integer(now.wrapping_sub(consumer.seen_ms).max(0));
    }
}

/// XINFO GROUPS key
fn groups(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let Ok(found) = stream_or_reply(ctx.keys, ctx.reply, db, &args[2]) else {
        return;
    };
    let Some(stream) = found else {
        ctx.reply.error(err::NO_SUCH_KEY);
        return;
    };
    ctx.reply.array(stream.groups.len());
    for (name, group) in &stream.groups {
        ctx.reply.map(6);
        ctx.reply.bulk(b"name");
        ctx.reply.bulk(name);
        ctx.reply.bulk(b"consumers");
        ctx.reply.integer(group.consumers.len() as i64);
        ctx.reply.bulk(b"pending");
        ctx.reply.integer(group.pending.len() as i64);
        ctx.reply.bulk(b"last-delivered-id");
        reply_id(ctx.reply, group.last_id);
        ctx.reply.bulk(b"entries-read");
        reply_optional(ctx.reply, group.entries_read);
        ctx.reply.bulk(b"lag");
        reply_optional(ctx.reply, stream.lag(group));
    }
}

/// XINFO STREAM key [FULL [COUNT count]]
fn stream_info(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let Ok(found) = stream_or_reply(ctx.keys, ctx.reply, db, &args[2]) else {
        return;
    };
    let Some(stream) = found else {
        ctx.reply.error(err::NO_SUCH_KEY);
        return;
    };
    // Options are read after the key, as in Redis.
    let options = &args[3..];
    let full_count = match options.len() {
        0 => None,
        1 if is(&options[0], "FULL") => Some(10),
        3 if is(&options[0], "FULL") && is(&options[1], "COUNT") => {
            let Some(n) = parse_i64(&options[2]) else {
                ctx.reply.error(err::NOT_INTEGER);
                return;
            };
            Some(if n < 0 { 10 } else { n })
        }
        _ => {
            subcommand_syntax_error(ctx, args);
            return;
        }
    };
    let reply = &mut *ctx.reply;
    reply.map(if full_count.is_some() { 9 } else { 10 });
    reply.bulk(b"length");
    reply.integer(stream.len() as i64);
    reply.bulk(b"radix-tree-keys");
    reply.integer(stream.node_count() as i64);
    reply.bulk(b"radix-tree-nodes");
    reply.integer(stream.radix_tree_nodes() as i64);
    reply.bulk(b"last-generated-id");
    reply_id(reply, stream.last_id);
    reply.bulk(b"max-deleted-entry-id");
    reply_id(reply, stream.max_deleted_id);
    reply.bulk(b"entries-added");
    reply.integer(stream.entries_added as i64);
    reply.bulk(b"recorded-first-entry-id");
    reply_id(reply, stream.first_id);
    match full_count {
        None => {
            reply.bulk(b"groups");
            reply.integer(stream.groups.len() as i64);
            reply.bulk(b"first-entry");
            match stream.first_entry() {
                Some((id, fields)) => reply_entry(reply, *id, fields),
                None => reply.null(),
            }
            reply.bulk(b"last-entry");
            match stream.last_entry() {
                Some((id, fields)) => reply_entry(reply, *id, fields),
                None => reply.null(),
            }
        }
        Some(count) => reply_full(reply, stream, count),
    }
}

/// The FULL part of XINFO STREAM: entries, then every group with its pending entries and
/// consumers, each list cut at `count` (0: no limit).
fn reply_full(reply: &mut Reply, stream: &Stream, count: i64) {
    let limit = if count == 0 {
        usize::MAX
    } else {
        usize::try_from(count).unwrap_or(usize::MAX)
    };
    reply.bulk(b"entries");
    let entries: Vec<_> = stream
        .range(StreamId::MIN, StreamId::MAX)
        .take(limit)
        .collect();
    reply.array(entries.len());
    for (id, fields) in entries {
        reply_entry(reply, *id, fields);
    }
    reply.bulk(b"groups");
    reply.array(stream.groups.len());
    for (name, group) in &stream.groups {
        reply.map(7);
        reply.bulk(b"name");
        reply.bulk(name);
        reply.bulk(b"last-delivered-id");
        reply_id(reply, group.last_id);
        reply.bulk(b"entries-read");
        reply_optional(reply, group.entries_read);
        reply.bulk(b"lag");
        reply_optional(reply, stream.lag(group));
        reply.bulk(b"pel-count");
        reply.integer(group.pending.len() as i64);
        reply.bulk(b"pending");
        reply.array(group.pending.len().min(limit));
        for (id, pending) in group.pending.iter().take(limit) {
            reply.array(4);
            reply_id(reply, *id);
            reply.bulk(&pending.consumer);
            reply.integer(pending.delivery_ms);
            reply.integer(pending.deliveries as i64);
        }
        reply.bulk(b"consumers");
        reply.array(group.consumers.len());
        for (consumer_name, consumer) in &group.consumers {
            reply.map(4);
            reply.bulk(b"name");
            reply.bulk(consumer_name);
            reply.bulk(b"seen-time");
            reply.integer(consumer.seen_ms);
            reply.bulk(b"pel-count");
            reply.integer(consumer.pending.len() as i64);
            reply.bulk(b"pending");
            reply.array(consumer.pending.len().min(limit));
            for id in consumer.pending.iter().take(limit) {
                reply.array(3);
                reply_id(reply, *id);
                let (delivery_ms, deliveries) = group
                    .pending
                    .get(id)
                    .map_or((0, 0), |p| (p.delivery_ms, p.deliveries));
                reply.integer(delivery_ms);
                reply.integer(deliveries as i64);
            }
        }
    }
}
