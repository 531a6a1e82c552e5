//! Server commands: TIME, LASTSAVE, MONITOR, SHUTDOWN, SLOWLOG, MEMORY, LATENCY; and the
//! latency monitor the gatekeeper feeds.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;

use bytes::Bytes;
use latch_keyspace::Value;

use super::client::{help_reply, subcommand_syntax_error};
use super::info::{memory_figures, with_whole_keyspace};
use super::{err, is, parse_i64, Ctx};
use crate::server::Server;
use crate::spec::{acl, flag, keyflag, Arg, BeginSearch, CommandSpec, FindKeys, Group, KeySpec};
use crate::table::table;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "time",
        group: Group::Server,
        summary: "Returns the server's clock as seconds and microseconds since the Unix epoch.",
        since: "2.6.0",
        complexity: "O(1)",
        arity: 1,
        flags: flag::LOADING | flag::STALE | flag::FAST,
        tips: &["nondeterministic_output"],
        handler: Some(time),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "lastsave",
        group: Group::Server,
        summary: "Returns the Unix time of the last successful save of the dataset.",
        since: "1.0.0",
        complexity: "O(1)",
        arity: 1,
        flags: flag::LOADING | flag::STALE | flag::FAST,
        acl: acl::ADMIN | acl::DANGEROUS,
        tips: &["nondeterministic_output"],
        handler: Some(lastsave),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "monitor",
        group: Group::Server,
        summary: "Turns this connection into a live feed of every command the server runs.",
        since: "1.0.0",
        complexity: "",
        arity: 1,
        flags: flag::ADMIN | flag::NOSCRIPT | flag::LOADING | flag::STALE,
        handler: Some(monitor),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "shutdown",
        group: Group::Server,
        summary: "Stops the server, saving the dataset first when persistence asks for it.",
        since: "1.0.0",
        complexity: "O(N) when saving, where N is the total number of keys in all databases when saving data, otherwise O(1)",
        arity: -1,
        flags: flag::ADMIN | flag::NOSCRIPT | flag::LOADING | flag::STALE | flag::NO_MULTI | flag::ALLOW_BUSY,
        arguments: &[
            Arg::oneof("nosave_save", &[
                Arg::token("nosave", "NOSAVE"),
                Arg::token("save", "SAVE"),
            ]).optional(),
            Arg::token("now", "NOW").optional().since("7.0.0"),
            Arg::token("force", "FORCE").optional().since("7.0.0"),
            Arg::token("abort", "ABORT").optional().since("7.0.0"),
        ],
        history: &[("7.0.0", "The NOW, FORCE and ABORT options were introduced.")],
        handler: Some(shutdown),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "slowlog",
        group: Group::Server,
        summary: "Groups the subcommands that read and clear the slow log.",
        since: "2.2.12",
        complexity: "Depends on subcommand.",
        arity: -2,
        subcommands: SLOWLOG_SUBCOMMANDS,
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "memory",
        group: Group::Server,
        summary: "Groups the subcommands that report on memory use.",
        since: "4.0.0",
        complexity: "Depends on subcommand.",
        arity: -2,
        subcommands: MEMORY_SUBCOMMANDS,
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "latency",
        group: Group::Server,
        summary: "Groups the subcommands of the latency monitor.",
        since: "2.8.13",
        complexity: "Depends on subcommand.",
        arity: -2,
        subcommands: LATENCY_SUBCOMMANDS,
        ..CommandSpec::BASE
    },
];

static SLOWLOG_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "get",
        group: Group::Server,
        summary: "Returns the most recent slow log entries.",
        since: "2.2.12",
        complexity: "O(N) where N is the number of entries returned",
        arity: -2,
        flags: flag::ADMIN | flag::LOADING | flag::STALE,
        arguments: &[Arg::integer("count").optional()],
        history: &[("4.0.0", "Entries show the client's address and name.")],
        tips: &["request_policy:all_nodes", "nondeterministic_output"],
        handler: Some(slowlog_get),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "help",
        group: Group::Server,
        summary: "Lists the SLOWLOG subcommands with a short description of each.",
        since: "6.2.0",
        complexity: "O(1)",
        arity: 2,
        flags: flag::LOADING | flag::STALE,
        handler: Some(slowlog_help),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "len",
        group: Group::Server,
        summary: "Returns how many entries the slow log holds.",
        since: "2.2.12",
        complexity: "O(1)",
        arity: 2,
        flags: flag::ADMIN | flag::LOADING | flag::STALE,
        tips: &[
            "request_policy:all_nodes",
            "response_policy:agg_sum",
            "nondeterministic_output",
        ],
        handler: Some(slowlog_len),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "reset",
        group: Group::Server,
        summary: "Empties the slow log.",
        since: "2.2.12",
        complexity: "O(N) where N is the number of entries in the slowlog",
        arity: 2,
        flags: flag::ADMIN | flag::LOADING | flag::STALE,
        tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
        handler: Some(slowlog_reset),
        ..CommandSpec::BASE
    },
];

static MEMORY_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "doctor",
        group: Group::Server,
        summary: "Describes memory problems the server notices, in prose.",
        since: "4.0.0",
        complexity: "O(1)",
        arity: 2,
        tips: &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
        handler: Some(memory_doctor),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "help",
        group: Group::Server,
        summary: "Lists the MEMORY subcommands with a short description of each.",
        since: "4.0.0",
        complexity: "O(1)",
        arity: 2,
        flags: flag::LOADING | flag::STALE,
        handler: Some(memory_help),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "malloc-stats",
        group: Group::Server,
        summary: "Returns the memory allocator's own statistics.",
        since: "4.0.0",
        complexity: "Depends on how much memory is allocated, could be slow",
        arity: 2,
        tips: &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
        handler: Some(memory_malloc_stats),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "purge",
        group: Group::Server,
        summary: "Asks the allocator to return unused memory to the system.",
        since: "4.0.0",
        complexity: "Depends on how much memory is allocated, could be slow",
        arity: 2,
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        handler: Some(memory_purge),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "stats",
        group: Group::Server,
        summary: "Returns a breakdown of the server's memory use.",
        since: "4.0.0",
        complexity: "O(1)",
        arity: 2,
        tips: &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
        handler: Some(memory_stats),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "usage",
        group: Group::Server,
        summary: "Estimates how many bytes a key and its value take in memory.",
        since: "4.0.0",
        complexity: "O(N) where N is the number of samples.",
        arity: -3,
        flags: flag::READONLY,
        key_specs: &[KeySpec {
            flags: keyflag::RO,
            begin: BeginSearch::Index(2),
            find: FindKeys::Range {
                last_key: 0,
                key_step: 1,
                limit: 0,
            },
            notes: None,
        }],
        arguments: &[
            Arg::key("key", 0),
            Arg::integer("count").with_token("SAMPLES").optional(),
        ],
        handler: Some(memory_usage),
        ..CommandSpec::BASE
    },
];

static LATENCY_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "doctor",
        group: Group::Server,
        summary: "Describes the latency events recorded, in prose.",
        since: "2.8.13",
        complexity: "O(1)",
        arity: 2,
        flags: flag::ADMIN | flag::NOSCRIPT | flag::LOADING | flag::STALE,
        tips: &[
            "nondeterministic_output",
            "request_policy:all_nodes",
            "response_policy:special",
        ],
        handler: Some(latency_doctor),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "graph",
        group: Group::Server,
        summary: "Draws an ASCII graph of one latency event's history.",
        since: "2.8.13",
        complexity: "O(1)",
        arity: 3,
        flags: flag::ADMIN | flag::NOSCRIPT | flag::LOADING | flag::STALE,
        arguments: &[Arg::string("event")],
        tips: &[
            "nondeterministic_output",
            "request_policy:all_nodes",
            "response_policy:special",
        ],
        handler: Some(latency_graph),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "help",
        group: Group::Server,
        summary: "Lists the LATENCY subcommands with a short description of each.",
        since: "2.8.13",
        complexity: "O(1)",
        arity: 2,
        flags: flag::LOADING | flag::STALE,
        handler: Some(latency_help),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "histogram",
        group: Group::Server,
        summary: "Returns per-command latency histograms.",
        since: "7.0.0",
        complexity:
            "O(N) where N is the number of commands with latency information being retrieved.",
        arity: -2,
        flags: flag::ADMIN | flag::NOSCRIPT | flag::LOADING | flag::STALE,
        arguments: &[Arg::string("COMMAND").optional().multiple()],
        tips: &[
            "nondeterministic_output",
            "request_policy:all_nodes",
            "response_policy:special",
        ],
        handler: Some(latency_histogram),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "history",
        group: Group::Server,
        summary: "Returns the recorded samples of one latency event.",
        since: "2.8.13",
        complexity: "O(1)",
        arity: 3,
        flags: flag::ADMIN | flag::NOSCRIPT | flag::LOADING | flag::STALE,
        arguments: &[Arg::string("event")],
        tips: &[
            "nondeterministic_output",
            "request_policy:all_nodes",
            "response_policy:special",
        ],
        handler: Some(latency_history),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "latest",
        group: Group::Server,
        summary: "Returns the latest sample of every latency event.",
        since: "2.8.13",
        complexity: "O(1)",
        arity: 2,
        flags: flag::ADMIN | flag::NOSCRIPT | flag::LOADING | flag::STALE,
        tips: &[
            "nondeterministic_output",
            "request_policy:all_nodes",
            "response_policy:special",
        ],
        handler: Some(latency_latest),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "reset",
        group: Group::Server,
        summary: "Clears the samples of some or all latency events.",
        since: "2.8.13",
        complexity: "O(1)",
        arity: -2,
        flags: flag::ADMIN | flag::NOSCRIPT | flag::LOADING | flag::STALE,
        arguments: &[Arg::string("event").optional().multiple()],
        tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
        handler: Some(latency_reset),
        ..CommandSpec::BASE
    },
];

/// Samples kept per latency event, as in Redis.
const LATENCY_SAMPLES: usize = 160;

/// One event's recent samples: (unix seconds, latency ms), oldest first.
#[derive(Debug, Default)]
struct LatencySeries {
    samples: VecDeque<(i64, u64)>,
    max_ms: u64,
}

/// Latency events recorded over `latency-monitor-threshold`.
#[derive(Debug, Default)]
pub struct LatencyMonitor {
    events: BTreeMap<String, LatencySeries>,
}

impl LatencyMonitor {
    /// Records one sample; samples in the same second keep the larger latency.
    pub fn add_sample(&mut self, event: &str, unix_s: i64, latency_ms: u64) {
        let series = self.events.entry(event.to_string()).or_default();
        series.max_ms = series.max_ms.max(latency_ms);
        if let Some(last) = series.samples.back_mut() {
            if last.0 == unix_s {
                last.1 = last.1.max(latency_ms);
                return;
            }
        }
        series.samples.push_back((unix_s, latency_ms));
        while series.samples.len() > LATENCY_SAMPLES {
            series.samples.pop_front();
        }
    }

    /// Forgets one event (or all); returns how many were forgotten.
    fn reset(&mut self, event: Option<&str>) -> usize {
        match event {
            None => {
                let count = self.events.len();
                self.events.clear();
                count
            }
            Some(event) => self.events.remove(event).is_some() as usize,
        }
    }
}

/// Records a latency event when it reached `latency-monitor-threshold` (0 disables).
pub fn record_latency(server: &Server, event: &str, latency_ms: u64) {
    let threshold_ms = server.config.latency_monitor_threshold_ms();
    if threshold_ms == 0 || latency_ms < threshold_ms {
        return;
    }
    let unix_s = server.keyspace.clock().now().wall_s();
    server.latency.lock().add_sample(event, unix_s, latency_ms);
}

/// The gatekeeper's hook after each command: Redis files fast commands under their own event.
pub fn note_command_latency(server: &Server, spec: &CommandSpec, elapsed_us: u64) {
    let event = if spec.has_flag(flag::FAST) {
        "fast-command"
    } else {
        "command"
    };
    record_latency(server, event, elapsed_us / 1000);
}

fn time(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    let wall_us = ctx.server.keyspace.clock().wall_us();
    ctx.reply.array(2);
    ctx.reply.bulk_integer(wall_us.div_euclid(1_000_000));
    ctx.reply.bulk_integer(wall_us.rem_euclid(1_000_000));
}

fn lastsave(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    ctx.reply.integer(
        ctx.server
            .persistence
            .last_save_unix_s
            .load(Ordering::Relaxed),
    );
}

fn monitor(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    // A client already monitoring gets no reply at all, as in Redis.
    if ctx.client.shared.monitor.swap(true, Ordering::Relaxed) {
        return;
    }
    ctx.server.clients.monitors.fetch_add(1, Ordering::Relaxed);
    ctx.reply.ok();
}

fn shutdown(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let (mut save, mut no_save, mut now, mut force, mut abort) =
        (false, false, false, false, false);
    for arg in &args[1..] {
        if is(arg, "NOSAVE") {
            no_save = true;
        } else if is(arg, "SAVE") {
            save = true;
        } else if is(arg, "NOW") {
            now = true;
        } else if is(arg, "FORCE") {
            force = true;
        } else if is(arg, "ABORT") {
            abort = true;
        } else {
            ctx.reply.error(err::SYNTAX);
            return;
        }
    }
    if (abort && (save || no_save || now || force)) || (save && no_save) {
        ctx.reply.error(err::SYNTAX);
        return;
    }
    if abort {
        if crate::shutdown::abort(ctx.server) {
            ctx.reply.ok();
        } else {
            ctx.reply.error(b"ERR No shutdown in progress.");
        }
        return;
    }
    let flags = [
        (save, crate::shutdown::SAVE),
        (no_save, crate::shutdown::NOSAVE),
        (now, crate::shutdown::NOW),
        (force, crate::shutdown::FORCE),
    ]
    .iter()
    .filter(|(given, _)| *given)
    .fold(0, |flags, (_, flag)| flags | flag);
    let server = ctx.server;
    if crate::server::beside_runtime(|| crate::shutdown::prepare(server, flags)) {
        // Redis exits without replying; the connection just closes.
        ctx.client.close_after_reply = true;
    } else {
        ctx.reply
            .error(b"ERR Errors trying to SHUTDOWN. Check logs.");
    }
}

fn slowlog_help(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    help_reply(
        ctx.reply,
        "slowlog",
        &[
            "GET [<count>]",
            "    Reply with the newest <count> entries (10 by default, -1 for all). Each",
            "    entry holds: id, unix time, duration in microseconds, the arguments,",
            "    the client's address and the client's name.",
            "LEN",
            "    Reply with the number of entries.",
            "RESET",
            "    Remove every entry.",
        ],
    );
}

fn slowlog_get(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if args.len() > 3 {
        return subcommand_syntax_error(ctx, args);
    }
    let mut count = 10usize;
    if let Some(arg) = args.get(2) {
        match parse_i64(arg) {
            Some(-1) => count = usize::MAX,
            Some(n) if n >= 0 => count = n as usize,
            _ => {
                ctx.reply
                    .error(b"ERR count should be greater than or equal to -1");
                return;
            }
        }
    }
    let slowlog = ctx.server.slowlog.lock();
    let shown = slowlog.entries.len().min(count);
    ctx.reply.array(shown);
    for entry in slowlog.entries.iter().take(shown) {
        ctx.reply.array(6);
        ctx.reply.integer(entry.id as i64);
        ctx.reply.integer(entry.unix_s);
        ctx.reply.integer(entry.duration_us as i64);
        ctx.reply.array(entry.args.len());
        for arg in &entry.args {
            ctx.reply.bulk(arg);
        }
        ctx.reply.bulk(entry.peer.as_bytes());
        ctx.reply.bulk(entry.name.as_bytes());
    }
}

fn slowlog_len(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    let len = ctx.server.slowlog.lock().entries.len();
    ctx.reply.integer(len as i64);
}

fn slowlog_reset(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    ctx.server.slowlog.lock().entries.clear();
    ctx.reply.ok();
}

fn memory_help(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    help_reply(
        ctx.reply,
        "memory",
        &[
            "DOCTOR",
            "    Describe memory problems, if any are noticed.",
            "MALLOC-STATS",
            "    Reply with the allocator's statistics (none are kept).",
            "PURGE",
            "    Ask the allocator to hand unused pages back to the system.",
            "STATS",
            "    Reply with a breakdown of the server's memory use.",
            "USAGE <key> [SAMPLES <count>]",
            "    Estimate the bytes <key> and its value take.",
        ],
    );
}

fn memory_doctor(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    ctx.reply.verbatim(
        b"txt",
        b"No memory problems noticed: this report only looks at the process size for now.\n",
    );
}

fn memory_malloc_stats(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    ctx.reply
        .verbatim(b"txt", b"Stats not supported for the current allocator");
}

fn memory_purge(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    ctx.reply.ok();
}

fn memory_stats(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    let memory = memory_figures();
    let per_db: Vec<(usize, usize, usize)> = with_whole_keyspace(ctx, |keys| {
        (0..keys.keyspace().num_dbs())
            .filter_map(|db| {
                let count = keys.db_len(db);
                (count > 0).then(|| (db, count, keys.db_expires(db)))
            })
            .collect()
    });
    let total_keys: usize = per_db.iter().map(|(_, count, _)| count).sum();
    let used = memory.used_bytes;
    let clients_normal = ctx.server.clients.len() as u64 * CLIENT_OVERHEAD_BYTES;
    let overhead: u64 = clients_normal
        + per_db
            .iter()
            .map(|(_, count, expires)| (*count + *expires) as u64 * 8)
            .sum::<u64>();
    let dataset = used.saturating_sub(overhead);
    let reply = &mut *ctx.reply;
    reply.map(25 + per_db.len());
    let integer = |reply: &mut latch_protocol::Reply, name: &str, value: u64| {
        reply.bulk(name.as_bytes());
        reply.integer(value as i64);
    };
    integer(reply, "peak.allocated", memory.peak_bytes);
    integer(reply, "total.allocated", used);
    integer(reply, "startup.allocated", 0);
    integer(reply, "replication.backlog", 0);
    integer(reply, "clients.slaves", 0);
    integer(reply, "clients.normal", clients_normal);
    integer(reply, "cluster.links", 0);
    integer(reply, "aof.buffer", 0);
    integer(reply, "lua.caches", 0);
    integer(reply, "functions.caches", 0);
    for (db, count, expires) in &per_db {
        reply.bulk(format!("db.{db}").as_bytes());
        reply.map(2);
        integer(reply, "overhead.hashtable.main", *count as u64 * 8);
        integer(reply, "overhead.hashtable.expires", *expires as u64 * 8);
    }
    integer(reply, "overhead.total", overhead);
    integer(reply, "keys.count", total_keys as u64);
    integer(
        reply,
        "keys.bytes-per-key",
        if total_keys == 0 {
            0
        } else {
            dataset / total_keys as u64
        },
    );
    integer(reply, "dataset.bytes", dataset);
    reply.bulk(b"dataset.percentage");
    reply.double(dataset as f64 * 100.0 / used.max(1) as f64);
    reply.bulk(b"peak.percentage");
    reply.double(used as f64 * 100.0 / memory.peak_bytes.max(1) as f64);
    integer(reply, "allocator.allocated", used);
    integer(reply, "allocator.active", used);
    integer(reply, "allocator.resident", memory.rss_bytes);
    reply.bulk(b"allocator-fragmentation.ratio");
    reply.double(1.0);
    integer(reply, "allocator-fragmentation.bytes", 0);
    reply.bulk(b"allocator-rss.ratio");
    reply.double(1.0);
    integer(reply, "allocator-rss.bytes", 0);
    reply.bulk(b"fragmentation");
    reply.double(memory.rss_bytes as f64 / used.max(1) as f64);
    integer(
        reply,
        "fragmentation.bytes",
        memory.rss_bytes.saturating_sub(used),
    );
}

/// What one connection costs besides its buffers, roughly (for MEMORY STATS).
const CLIENT_OVERHEAD_BYTES: u64 = 20 * 1024;

/// jemalloc's size class for an allocation of `size` bytes: four classes per doubling.
fn allocation_size(size: usize) -> usize {
    if size <= 8 {
        return 8;
    }
    if size <= 128 {
        return size.div_ceil(16) * 16;
    }
    let power = usize::BITS - (size - 1).leading_zeros(); // size <= 2^power
    let step = 1usize << (power - 3);
    size.div_ceil(step) * step
}

/// Bytes of an sds header for a string of `len` bytes.
fn sds_header(len: usize) -> usize {
    match len {
        0..=31 => 1,
        32..=255 => 3,
        256..=65_535 => 5,
        _ => 9,
    }
}

/// Redis' estimate for a key and its value: the value object, the key string and the
/// hash table entry, each rounded to the allocator's size classes.
pub fn estimate_key_bytes(key: &[u8], slot: &latch_keyspace::Slot) -> usize {
    const OBJECT_HEADER: usize = 16;
    const TABLE_ENTRY: usize = 24;
    let value = match slot.value() {
        Value::Str(bytes) => match slot.encoding() {
            "int" => OBJECT_HEADER,
            "embstr" => allocation_size(OBJECT_HEADER + 3 + bytes.len() + 1),
            _ => OBJECT_HEADER + allocation_size(sds_header(bytes.len()) + bytes.len() + 1),
        },
        other => OBJECT_HEADER + other.heap_bytes(),
    };
    value + allocation_size(sds_header(key.len()) + key.len() + 1) + TABLE_ENTRY
}

fn memory_usage(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let mut i = 3;
    while i < args.len() {
        if is(&args[i], "SAMPLES") && i + 1 < args.len() {
            match parse_i64(&args[i + 1]) {
                None => {
                    ctx.reply.error(err::NOT_INTEGER);
                    return;
                }
                Some(n) if n < 0 => {
                    ctx.reply.error(err::SYNTAX);
                    return;
                }
                // Strings need no sampling; the count only matters for collections.
                Some(_) => {}
            }
            i += 2;
        } else {
            ctx.reply.error(err::SYNTAX);
            return;
        }
    }
    // An inspection, not an access: no hit or miss, no access time change.
    let (touch, effects) = (ctx.keys.touch, ctx.keys.effects);
    ctx.keys.touch = false;
    let db = ctx.db();
    let size = ctx
        .keys
        .get_slot(db, &args[2])
        .map(|slot| estimate_key_bytes(&args[2], slot));
    let expired = ctx.keys.effects.expired;
    ctx.keys.touch = touch;
    ctx.keys.effects = latch_keyspace::Effects { expired, ..effects };
    match size {
        Some(bytes) => ctx.reply.integer(bytes as i64),
        None => ctx.reply.null(),
    }
}

fn latency_help(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    help_reply(
        ctx.reply,
        "latency",
        &[
            "DOCTOR",
            "    Describe the latency events recorded, in prose.",
            "GRAPH <event>",
            "    Draw the samples of <event> as a text chart.",
            "HISTORY <event>",
            "    Reply with the (unix time, milliseconds) samples of <event>.",
            "LATEST",
            "    Reply with the newest sample of every event.",
            "RESET [<event> ...]",
            "    Forget the samples of the events named (of every event when none is).",
            "HISTOGRAM [<command> ...]",
            "    Reply with the latency distribution of the commands named (or of all).",
        ],
    );
}

fn latency_latest(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    let monitor = ctx.server.latency.lock();
    ctx.reply.array(monitor.events.len());
    for (event, series) in &monitor.events {
        let (unix_s, latency_ms) = series.samples.back().copied().unwrap_or((0, 0));
        ctx.reply.array(4);
        ctx.reply.bulk(event.as_bytes());
        ctx.reply.integer(unix_s);
        ctx.reply.integer(latency_ms as i64);
        ctx.reply.integer(series.max_ms as i64);
    }
}

fn latency_history(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let event = String::from_utf8_lossy(&args[2]);
    let monitor = ctx.server.latency.lock();
    let Some(series) = monitor.events.get(event.as_ref()) else {
        ctx.reply.array(0);
        return;
    };
    ctx.reply.array(series.samples.len());
    for (unix_s, latency_ms) in &series.samples {
        ctx.reply.array(2);
        ctx.reply.integer(*unix_s);
        ctx.reply.integer(*latency_ms as i64);
    }
}

fn latency_reset(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let mut monitor = ctx.server.latency.lock();
    let resets = if args.len() == 2 {
        monitor.reset(None)
    } else {
        args[2..]
            .iter()
            .map(|event| monitor.reset(Some(&String::from_utf8_lossy(event))))
            .sum()
    };
    ctx.reply.integer(resets as i64);
}

fn latency_doctor(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    let threshold_ms = ctx.server.config.latency_monitor_threshold_ms();
    let monitor = ctx.server.latency.lock();
    let mut report = String::new();
    if threshold_ms == 0 && monitor.events.is_empty() {
        report.push_str(
            "Latency monitoring is disabled. Enable it with CONFIG SET latency-monitor-threshold <milliseconds>.\n",
        );
    } else if monitor.events.is_empty() {
        report.push_str("No latency events were recorded: nothing to report.\n");
    } else {
        report.push_str("Latency events recorded:\n\n");
        for (i, (event, series)) in monitor.events.iter().enumerate() {
            let samples = series.samples.len().max(1) as u64;
            let mean_ms = series.samples.iter().map(|(_, ms)| ms).sum::<u64>() / samples;
            report.push_str(&format!(
                "{}. {event}: {} samples, mean {mean_ms} ms, worst {} ms.\n",
                i + 1,
                series.samples.len(),
                series.max_ms
            ));
        }
    }
    ctx.reply.verbatim(b"txt", report.as_bytes());
}

fn latency_graph(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let event = String::from_utf8_lossy(&args[2]).into_owned();
    let monitor = ctx.server.latency.lock();
    let Some(series) = monitor.events.get(&event) else {
        let message = format!("ERR No samples available for event '{event}'");
        ctx.reply.error(message.as_bytes());
        return;
    };
    let low = series.samples.iter().map(|(_, ms)| *ms).min().unwrap_or(0);
    let high = series.samples.iter().map(|(_, ms)| *ms).max().unwrap_or(0);
    let mut graph = format!(
        "{event} - high {high} ms, low {low} ms (all time high {} ms)\n",
        series.max_ms
    );
    graph.push_str(&"-".repeat(80));
    graph.push('\n');
    // One column per sample, as tall as its share of the highest sample (4 rows).
    for row in (1..=4u64).rev() {
        let line: String = series
            .samples
            .iter()
            .map(|(_, ms)| {
                if high > 0 && ms * 4 >= row * high {
                    '#'
                } else {
                    ' '
                }
            })
            .collect();
        graph.push_str(line.trim_end());
        graph.push('\n');
    }
    ctx.reply.verbatim(b"txt", graph.as_bytes());
}

/// LATENCY HISTOGRAM [command ...]: each command's cumulative latency distribution, from
/// its histogram (crate::latency_histogram); a container command stands for its
/// subcommands, unknown names are skipped, commands without calls left out.
fn latency_histogram(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let table = table();
    let commands: Vec<&crate::table::Command> = if args.len() == 2 {
        table.all().iter().collect()
    } else {
        let mut named = Vec::new();
        for name in &args[2..] {
            let Some(command) = table.by_full_name(name) else {
                continue;
            };
            let subcommands: Vec<_> = table.subcommands_of(command).collect();
            if subcommands.is_empty() {
                named.push(command);
            } else {
                named.extend(subcommands);
            }
        }
        named
    };
    let with_calls: Vec<(&str, u64, crate::latency_histogram::Cumulative)> = commands
        .iter()
        .filter_map(|command| {
            let (calls, cdf) = ctx.server.stats.commands[command.id].latency.cumulative()?;
            Some((command.full_name.as_str(), calls, cdf))
        })
        .collect();
    ctx.reply.map(with_calls.len());
    for (name, calls, cdf) in with_calls {
        ctx.reply.bulk(name.as_bytes());
        ctx.reply.map(2);
        ctx.reply.bulk(b"calls");
        ctx.reply.integer(calls as i64);
        ctx.reply.bulk(b"histogram_usec");
        ctx.reply.map(cdf.len());
        for (micros, count) in cdf {
            ctx.reply.integer(micros as i64);
            ctx.reply.integer(count as i64);
        }
    }
}
