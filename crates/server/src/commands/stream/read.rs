//! Reading new entries: XREAD and XREADGROUP.
//!
//! With `BLOCK ms` and nothing to serve, the command blocks through [`gate::block`] on every
//! stream it names, and runs again whenever one of them changes (a *retry*). `$` is resolved
//! to the stream's last ID when the command first runs, and the arguments kept for the
//! retries carry that ID instead, so later retries still mean "after the call". XREADGROUP
//! blocks only for `>`: a history ID always answers at once. Inside MULTI or a script the
//! block answers a null array at once, as a timeout would.
//!
//! While an XREADGROUP waits, Redis 7.0 ends the wait with an error when its stream key is
//! deleted or holds another type (`-UNBLOCKED the stream key no longer exists`), or when its
//! group is gone (`-NOGROUP the consumer group this client was blocked on no longer
//! exists`). A retry that finds so answers the same. Retries only follow writes that signal
//! the key, so a FLUSHALL / FLUSHDB / SWAPDB that takes the key away wakes nobody and the
//! client keeps waiting (Redis answers `-UNBLOCKED` there too).

use std::time::Duration;

use bytes::Bytes;
use latch_keyspace::stream::StreamId;
use latch_keyspace::Value;
use latch_protocol::Resp;

use super::{
    log_group_id, log_xclaim, no_key_or_group, now_ms, parse_strict_id, reply_entry, Deferred,
    INVALID_ID,
};
use crate::commands::{err, is, parse_i64, Ctx};
use crate::gate;
use crate::pubsub::notify;
use crate::spec::{acl, flag, keyflag, Arg, BeginSearch, CommandSpec, FindKeys, Group, KeySpec};

/// The keys follow `STREAMS`, the first half of what remains.
const fn streams_keys(start_from: i32) -> KeySpec {
    KeySpec {
        flags: keyflag::RO | keyflag::ACCESS,
        begin: BeginSearch::Keyword {
            keyword: "STREAMS",
            start_from,
        },
        find: FindKeys::Range {
            last_key: -1,
            key_step: 1,
            limit: 2,
        },
        notes: None,
    }
}

const STREAMS_ARG: Arg = Arg::block(
    "streams",
    &[Arg::key("key", 0).multiple(), Arg::string("id").multiple()],
)
.with_token("STREAMS");

pub(super) const XREAD: CommandSpec = CommandSpec {
    name: "xread",
    group: Group::Stream,
    summary: "Replies with the entries of one or more streams that come after the given IDs.",
    since: "5.0.0",
    complexity: "For each stream mentioned: O(N) with N being the number of elements being returned, it means that XREAD-ing with a fixed COUNT is O(1). Note that when the BLOCK option is used, XADD will pay O(M) time in order to serve the M clients blocked on the stream getting new data.",
    arity: -4,
    flags: flag::BLOCKING | flag::READONLY,
    acl: acl::STREAM,
    key_specs: &[streams_keys(1)],
    arguments: &[
        Arg::integer("count").with_token("COUNT").optional(),
        Arg::integer("milliseconds").with_token("BLOCK").optional(),
        STREAMS_ARG,
    ],
    handler: Some(xread),
    ..CommandSpec::BASE
};

pub(super) const XREADGROUP: CommandSpec = CommandSpec {
    name: "xreadgroup",
    group: Group::Stream,
    summary: "Reads entries of streams on behalf of a consumer of a group: new ones, or the consumer's own pending ones.",
    since: "5.0.0",
    complexity: "For each stream mentioned: O(M) with M being the number of elements returned. If M is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1). On the other side when XREADGROUP blocks, XADD will pay the O(N) time in order to serve the N clients blocked on the stream getting new data.",
    arity: -7,
    flags: flag::BLOCKING | flag::WRITE,
    acl: acl::STREAM,
    key_specs: &[streams_keys(4)],
    arguments: &[
        Arg::block(
            "group_consumer",
            &[Arg::string("group"), Arg::string("consumer")],
        )
        .with_token("GROUP"),
        Arg::integer("count").with_token("COUNT").optional(),
        Arg::integer("milliseconds").with_token("BLOCK").optional(),
        Arg::token("noack", "NOACK").optional(),
        STREAMS_ARG,
    ],
    handler: Some(xreadgroup),
    ..CommandSpec::BASE
};

fn xread(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    read_generic(ctx, args, false);
}

fn xreadgroup(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    read_generic(ctx, args, true);
}

/// Stands for `>` among the parsed IDs, as in Redis (a literal maximal ID means the same).
const NEW_ONLY: StreamId = StreamId::MAX;

/// What XREAD / XREADGROUP parsed.
struct ReadArgs<'a> {
    /// Entries per stream, 0 for no limit.
    count: usize,
    streams_at: usize,
    streams: usize,
    group: Option<(&'a [u8], &'a [u8])>,
    noack: bool,
    /// `BLOCK`: `None` without it, `Some(None)` to wait forever (`BLOCK 0`).
    block: Option<Option<Duration>>,
}

fn parse_read<'a>(
    ctx: &mut Ctx<'_, '_>,
    args: &'a [Bytes],
    group_form: bool,
) -> Option<ReadArgs<'a>> {
    let mut parsed = ReadArgs {
        count: 0,
        streams_at: 0,
        streams: 0,
        group: None,
        noack: false,
        block: None,
    };
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - i - 1;
        let opt = &args[i];
        if is(opt, "BLOCK") && more > 0 {
            if ctx.client.in_script {
                // Redis refuses it outright rather than answering as a timeout would.
                let mut message = format!("ERR {}", String::from_utf8_lossy(&args[0]));
                message.push_str(" command is not allowed with BLOCK option from scripts");
                ctx.reply.error(message.as_bytes());
                return None;
            }
            i += 1;
            // Milliseconds, as Redis' getTimeoutFromObjectOrReply reads them.
            match parse_i64(&args[i]) {
                None => {
                    ctx.reply
                        .error(b"ERR timeout is not an integer or out of range");
                    return None;
                }
                Some(ms) if ms < 0 => {
                    ctx.reply.error(b"ERR timeout is negative");
                    return None;
                }
                Some(0) => parsed.block = Some(None),
                Some(ms) => parsed.block = Some(Some(Duration::from_millis(ms.unsigned_abs()))),
            }
        } else if is(opt, "COUNT") && more > 0 {
            i += 1;
            let Some(n) = parse_i64(&args[i]) else {
                ctx.reply.error(err::NOT_INTEGER);
                return None;
            };
            parsed.count = usize::try_from(n).unwrap_or(0);
        } else if is(opt, "STREAMS") && more > 0 {
            parsed.streams_at = i + 1;
            let rest = args.len() - parsed.streams_at;
            if !rest.is_multiple_of(2) {
                ctx.reply.error(b"ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.");
                return None;
            }
            parsed.streams = rest / 2;
            break;
        } else if is(opt, "GROUP") && more >= 2 {
            if !group_form {
                ctx.reply.error(
                    b"ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                );
                return None;
            }
            parsed.group = Some((&args[i + 1], &args[i + 2]));
            i += 2;
        } else if is(opt, "NOACK") {
            if !group_form {
                ctx.reply.error(
                    b"ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                );
                return None;
            }
            parsed.noack = true;
        } else {
            ctx.reply.error(err::SYNTAX);
            return None;
        }
        i += 1;
    }
    if parsed.streams_at == 0 {
        ctx.reply.error(err::SYNTAX);
        return None;
    }
    if group_form && parsed.group.is_none() {
        ctx.reply.error(b"ERR Missing GROUP option for XREADGROUP");
        return None;
    }
    // The gatekeeper locked the keys its key spec finds (after the first STREAMS from
    // argument 1, or 4 for XREADGROUP); touching any other key would be a bug, so refuse
    // rather than risk it. Redis' parser always agrees with its key spec here.
    let search_from = if group_form { 4 } else { 1 };
    let spec_streams = (search_from..args.len()).find(|&j| is(&args[j], "STREAMS"));
    if spec_streams != Some(parsed.streams_at - 1) {
        ctx.reply.error(err::SYNTAX);
        return None;
    }
    Some(parsed)
}

fn read_generic(ctx: &mut Ctx<'_, '_>, args: &[Bytes], group_form: bool) {
    let Some(parsed) = parse_read(ctx, args, group_form) else {
        return;
    };
    if group_form {
        // Never logged as itself (a replay would deliver to whoever reads then), only as
        // the changes it made, below, as Redis does.
        ctx.propagate_nothing();
    }
    let logging = ctx.server.persistence.is_logging();
    let mut logged: Vec<Vec<Bytes>> = Vec::new();
    let db = ctx.db();
    let keys = &args[parsed.streams_at..parsed.streams_at + parsed.streams];
    let id_args = &args[parsed.streams_at + parsed.streams..];
    let retry = gate::is_retry(ctx);
    // The streams are read (a miss is reported), except when a blocked client is served.
    ctx.lookups_read(!retry);
    // Every key, group and ID is checked before anything is served.
    let mut after: Vec<StreamId> = Vec::with_capacity(parsed.streams);
    for (key, id_arg) in keys.iter().zip(id_args) {
        let stream = match ctx.keys.get(db, key).map(|v| &*v) {
            None => None,
            Some(Value::Stream(stream)) => Some(stream),
            // A blocked XREAD waits on through a key of another type (as in Redis); a blocked
            // XREADGROUP ends below.
            Some(_) if retry => None,
            Some(_) => {
                ctx.reply.error(err::WRONGTYPE);
                return;
            }
        };
        if let Some((group, _)) = parsed.group {
            if retry {
                // The stream and its group existed when the client blocked.
                let Some(stream) = stream else {
                    ctx.reply
                        .error(b"UNBLOCKED the stream key no longer exists");
                    return;
                };
                if !stream.groups.contains_key(group) {
                    ctx.reply.error(
                        b"NOGROUP the consumer group this client was blocked on no longer exists",
                    );
                    return;
                }
            } else if !stream.is_some_and(|s| s.groups.contains_key(group)) {
                no_key_or_group(ctx.reply, key, group, " in XREADGROUP with GROUP option");
                return;
            }
        }
        let id = match &id_arg[..] {
            b"$" => {
                if group_form {
                    ctx.reply.error(b"ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.");
                    return;
                }
                stream.map_or(StreamId::MIN, |s| s.last_id)
            }
            b">" => {
                if !group_form {
                    ctx.reply.error(b"ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.");
                    return;
                }
                NEW_ONLY
            }
            other => match parse_strict_id(other, 0) {
                Some(id) => id,
                None => {
                    ctx.reply.error(INVALID_ID);
                    return;
                }
            },
        };
        after.push(id);
    }
    let now = now_ms(ctx);
    let resp3 = ctx.reply.resp() == Resp::V3;
    let mut served = Deferred::new(ctx.reply);
    let mut changed = Vec::new();
    let mut consumer_created = Vec::new();
    // The streams are looked up again (a miss reported again, as Redis does).
    for (key, &id) in keys.iter().zip(&after) {
        let Some(Value::Stream(stream)) = ctx.keys.get(db, key) else {
            continue;
        };
        let out = &mut served.scratch;
        match parsed.group {
            None => {
                let ready = stream.last_live_id().is_some_and(|last| last > id);
                let Some(start) = id.next().filter(|_| ready) else {
                    continue;
                };
                let limit = if parsed.count == 0 {
                    usize::MAX
                } else {
                    parsed.count
                };
                let items: Vec<_> = stream.range(start, StreamId::MAX).take(limit).collect();
                if !resp3 {
                    out.array(2);
                }
                out.bulk(key);
                out.array(items.len());
                for (entry_id, fields) in items {
                    reply_entry(out, *entry_id, fields);
                }
            }
            Some((group_name, consumer)) => {
                let Some(group_last) = stream.groups.get(group_name).map(|g| g.last_id) else {
                    continue;
                };
                let history = id != NEW_ONLY;
                if !history && stream.last_live_id().is_none_or(|last| last <= group_last) {
                    continue;
                }
                if !resp3 {
                    out.array(2);
                }
                out.bulk(key);
                let created = stream
                    .groups
                    .get_mut(group_name)
                    .is_some_and(|g| g.touch_consumer(consumer, now));
                let mut modified = created;
                if created {
                    consumer_created.push(key);
                }
                // As Redis logs it: a consumer NOACK creates is logged on its own (no XCLAIM
                // will name it); a history read's new delivery counts are not logged.
                if logging && created && parsed.noack {
                    logged.push(vec![
                        Bytes::from_static(b"XGROUP"),
                        Bytes::from_static(b"CREATECONSUMER"),
                        key.clone(),
                        Bytes::copy_from_slice(group_name),
                        Bytes::copy_from_slice(consumer),
                    ]);
                }
                if history {
                    modified |=
                        reply_history(out, stream, group_name, consumer, id, parsed.count, now);
                } else {
                    let ids = stream
                        .deliver_new(group_name, consumer, parsed.count, parsed.noack, now)
                        .unwrap_or_default();
                    modified |= !ids.is_empty();
                    out.array(ids.len());
                    for &entry_id in &ids {
                        if let Some(fields) = stream.get(&entry_id) {
                            reply_entry(out, entry_id, fields);
                        }
                    }
                    if let Some(group) = stream.groups.get(group_name).filter(|_| logging) {
                        let delivered = Delivered {
                            key,
                            group_name,
                            group,
                            last_before: group_last,
                            noack: parsed.noack,
                        };
                        delivered.log(&mut logged, &ids);
                    }
                }
                if modified {
                    changed.push(key);
                }
            }
        }
        served.count += 1;
    }
    if served.count == 0 {
        match parsed.block {
            Some(timeout) => block(ctx, args, &parsed, &after, timeout),
            None => ctx.reply.null_array(),
        }
        return;
    }
    if resp3 {
        ctx.reply.map(served.count);
        ctx.reply.raw(served.scratch.buffer());
    } else {
        served.finish_array(ctx.reply);
    }
    for key in changed {
        ctx.keys.signal_modified(db, key);
    }
    for key in consumer_created {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
    }
    for entry in logged {
        ctx.propagate(entry);
    }
}

/// New entries (XREADGROUP `>`) delivered to a group, as they are logged.
struct Delivered<'a> {
    key: &'a Bytes,
    group_name: &'a [u8],
    /// The group after the delivery.
    group: &'a latch_keyspace::stream::Group,
    /// The group's last ID before it.
    last_before: StreamId,
    noack: bool,
}

impl Delivered<'_> {
    /// What delivering `ids` is logged as: an XCLAIM per entry made pending (as Redis logs
    /// it, moving the group's last ID along), then the group's new last ID and read counter.
    /// Redis logs the latter only for NOACK, which makes nothing pending; logged always, it
    /// also keeps the read counter (`entries-read`), which XCLAIM does not carry.
    fn log(&self, logged: &mut Vec<Vec<Bytes>>, ids: &[StreamId]) {
        if !self.noack {
            for &id in ids {
                if let Some(pending) = self.group.pending.get(&id) {
                    let id_arg = Bytes::from(id.to_string());
                    let last_id = id.max(self.last_before);
                    logged.push(log_xclaim(
                        self.key,
                        self.group_name,
                        id_arg,
                        pending,
                        last_id,
                    ));
                }
            }
        }
        if self.group.last_id != self.last_before {
            logged.push(log_group_id(self.key, self.group_name, self.group));
        }
    }
}

/// Nothing to serve under `BLOCK`: waits on every named stream. The arguments kept for the
/// retries have each `$` replaced by the ID it stood for now (`after`), so entries added
/// between the call and a retry still count as new.
fn block(
    ctx: &mut Ctx<'_, '_>,
    args: &[Bytes],
    parsed: &ReadArgs<'_>,
    after: &[StreamId],
    timeout: Option<Duration>,
) {
    let ids_at = parsed.streams_at + parsed.streams;
    let keys = &args[parsed.streams_at..ids_at];
    if !args[ids_at..].iter().any(|id| &id[..] == b"$") {
        gate::block(ctx, args, keys, timeout, false);
        return;
    }
    let mut resolved = args.to_vec();
    for (arg, id) in resolved[ids_at..].iter_mut().zip(after) {
        if &arg[..] == b"$" {
            *arg = Bytes::from(id.to_string());
        }
    }
    gate::block(ctx, &resolved, keys, timeout, false);
}

/// Replies with a consumer's own pending entries after `after` (XREADGROUP with an ID),
/// counting each as delivered once more. Entries deleted since show as their ID with a
/// null in place of the fields. Returns whether any pending entry changed.
fn reply_history(
    out: &mut latch_protocol::Reply,
    stream: &mut latch_keyspace::Stream,
    group_name: &[u8],
    consumer: &[u8],
    after: StreamId,
    count: usize,
    now: i64,
) -> bool {
    let limit = if count == 0 { usize::MAX } else { count };
    let ids: Vec<StreamId> = match (after.next(), stream.groups.get(group_name)) {
        (Some(start), Some(group)) => group
            .consumers
            .get(consumer)
            .map(|c| c.pending.range(start..).take(limit).copied().collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    let mut changed = false;
    out.array(ids.len());
    for id in ids {
        match stream.get(&id) {
            Some(fields) => reply_entry(out, id, fields),
            None => {
                out.array(2);
                super::reply_id(out, id);
                out.null_array();
                continue;
            }
        }
        if let Some(pending) = stream
            .groups
            .get_mut(group_name)
            .and_then(|g| g.pending.get_mut(&id))
        {
            pending.delivery_ms = now;
            pending.deliveries = pending.deliveries.saturating_add(1);
            changed = true;
        }
    }
    changed
}
