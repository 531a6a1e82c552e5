//! DUMP and RESTORE: a value in Redis' serialized form (an RDB value, the RDB version and a
//! CRC64; `latch_persist::rdb`), so payloads move between Latch and Redis both ways.

use bytes::Bytes;
use latch_keyspace::{Deadline, Entry};
use latch_persist::rdb::{dump_payload, restore_payload_checking, RdbError};

use crate::commands::{err, is, parse_i64, Ctx};
use crate::pubsub::notify;
use crate::spec::{acl, docflag, flag, keyflag, Arg, CommandSpec, Group, KeySpec};

pub(super) const DUMP: CommandSpec = CommandSpec {
    name: "dump",
    summary: "Serializes a key's value in Redis' DUMP format, for RESTORE.",
    since: "2.6.0",
    complexity: "O(1) to find the key, then O(N*M) to serialize it (N elements of average size M).",
    arity: 2,
    flags: flag::READONLY,
    acl: acl::KEYSPACE,
    key_specs: &[KeySpec::single(1, keyflag::RO | keyflag::ACCESS)],
    arguments: &[Arg::key("key", 0)],
    tips: &["nondeterministic_output"],
    handler: Some(dump),
    ..CommandSpec::BASE
};

pub(super) const RESTORE: CommandSpec = CommandSpec {
    name: "restore",
    summary: "Creates a key from a DUMP payload, with an optional time to live.",
    since: "2.6.0",
    complexity:
        "O(1) to create the key, then O(N*M) to rebuild the value (O(N*M*log(N)) for sorted sets).",
    arity: -4,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::KEYSPACE | acl::DANGEROUS,
    key_specs: &[KeySpec::single(1, keyflag::OW | keyflag::UPDATE)],
    arguments: &[
        Arg::key("key", 0),
        Arg::integer("ttl"),
        Arg::string("serialized-value"),
        Arg::token("replace", "REPLACE").optional().since("3.0.0"),
        Arg::token("absttl", "ABSTTL").optional().since("5.0.0"),
        Arg::integer("seconds")
            .with_token("IDLETIME")
            .optional()
            .since("5.0.0"),
        Arg::integer("frequency")
            .with_token("FREQ")
            .optional()
            .since("5.0.0"),
    ],
    history: &[
        ("3.0.0", "Gained the `REPLACE` modifier."),
        ("5.0.0", "Gained the `ABSTTL` modifier."),
        ("5.0.0", "Gained the `IDLETIME` and `FREQ` options."),
    ],
    handler: Some(restore),
    ..CommandSpec::BASE
};

/// RESTORE as a cluster's MIGRATE sends it; without cluster mode it is plain RESTORE.
pub(super) const RESTORE_ASKING: CommandSpec = CommandSpec {
    name: "restore-asking",
    group: Group::Server,
    summary: "RESTORE as sent by MIGRATE within a cluster (an internal command).",
    since: "3.0.0",
    flags: flag::WRITE | flag::DENYOOM | flag::ASKING,
    doc_flags: docflag::SYSCALL,
    ..RESTORE
};

fn dump(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    match ctx.keys.get(db, &args[1]) {
        Some(entry) => {
            let payload = dump_payload(entry);
            ctx.reply.bulk(&payload);
        }
        None => ctx.reply.null(),
    }
}

/// RESTORE's options after the payload.
#[derive(Default)]
struct Options {
    replace: bool,
    absolute: bool,
    idle_s: Option<i64>,
    /// FREQ: the LFU counter the key starts with (under an LFU policy).
    frequency: Option<u8>,
}

fn parse_options(ctx: &mut Ctx<'_, '_>, rest: &[Bytes]) -> Option<Options> {
    let mut options = Options::default();
    let mut at = 0;
    while at < rest.len() {
        let has_value = at + 1 < rest.len();
        if is(&rest[at], "REPLACE") {
            options.replace = true;
        } else if is(&rest[at], "ABSTTL") {
            options.absolute = true;
        } else if is(&rest[at], "IDLETIME") && has_value {
            match parse_i64(&rest[at + 1]) {
                Some(seconds) if seconds >= 0 => options.idle_s = Some(seconds),
                Some(_) => {
                    ctx.reply.error(b"ERR Invalid IDLETIME value, must be >= 0");
                    return None;
                }
                None => {
                    ctx.reply.error(err::NOT_INTEGER);
                    return None;
                }
            }
            at += 1;
        } else if is(&rest[at], "FREQ") && has_value {
            match parse_i64(&rest[at + 1]) {
                Some(frequency) if (0..=255).contains(&frequency) => {
                    options.frequency = Some(frequency as u8);
                }
                Some(_) => {
                    ctx.reply
                        .error(b"ERR Invalid FREQ value, must be >= 0 and <= 255");
                    return None;
                }
                None => {
                    ctx.reply.error(err::NOT_INTEGER);
                    return None;
                }
            }
            at += 1;
        } else {
            ctx.reply.error(err::SYNTAX);
            return None;
        }
        at += 1;
    }
    Some(options)
}

fn restore(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(options) = parse_options(ctx, &args[4..]) else {
        return;
    };
    let db = ctx.db();
    let key = &args[1];
    if !options.replace && ctx.keys.exists(db, key) {
        ctx.reply.error(b"BUSYKEY Target key name already exists.");
        return;
    }
    let Some(ttl_ms) = parse_i64(&args[2]) else {
        ctx.reply.error(err::NOT_INTEGER);
        return;
    };
    if ttl_ms < 0 {
        ctx.reply.error(b"ERR Invalid TTL value, must be >= 0");
        return;
    }
    let check_crc = !ctx
        .server
        .skip_checksum_validation
        .load(std::sync::atomic::Ordering::Relaxed);
    let value = match restore_payload_checking(&args[3], check_crc) {
        Ok(value) => value,
        Err(RdbError::BadPayload) => {
            ctx.reply
                .error(b"ERR DUMP payload version or checksum are wrong");
            return;
        }
        Err(error) => {
            // As Redis: the reason is logged at verbose level, the client told no more.
            tracing::debug!("{}", error.log_line());
            ctx.reply.error(b"ERR Bad data format");
            return;
        }
    };
    let now = ctx.now();
    let deleted = options.replace && ctx.keys.remove_stored(db, key);
    // A relative TTL runs on the monotonic clock, like every relative TTL in Latch; the
    // log gets the absolute time (ABSTTL), so replay never extends it.
    let (deadline, unix_ms) = match (ttl_ms, options.absolute) {
        (0, _) => (None, None),
        (ms, true) => (Some(Deadline::at_wall(ms)), Some(ms)),
        (ms, false) => match Deadline::after(now, ms) {
            Some(deadline) => (Some(deadline), Some(deadline.unix_ms(now))),
            None => {
                ctx.reply
                    .error(b"ERR invalid expire time in 'restore' command");
                return;
            }
        },
    };
    if deadline.is_some_and(|deadline| deadline.is_passed(now)) {
        // Already expired: nothing is stored, and a replaced key is simply gone.
        if deleted {
            ctx.keys.signal_modified(db, key);
            ctx.notify(notify::GENERIC, "del", key);
            ctx.propagate(vec![Bytes::from_static(b"DEL"), key.clone()]);
        } else {
            ctx.propagate_nothing();
        }
        ctx.reply.ok();
        return;
    }
    let mut entry = Entry::new(value);
    entry.deadline = deadline;
    // The access field holds what the policy keeps (Redis' objectSetLRUOrLFU): under an
    // LFU policy the counter FREQ gives (a new key's without it), else the access time
    // IDLETIME gives (now without it).
    let now_s = i64::from(now.access_s());
    let access_s = match (ctx.server.keyspace.lfu(), options.idle_s) {
        (Some(_), _) => latch_keyspace::lfu::pack(
            latch_keyspace::lfu::minutes(now.wall_s()),
            options.frequency.unwrap_or(latch_keyspace::lfu::INIT),
        ),
        (None, Some(idle_s)) => (now_s - idle_s).max(0) as u32,
        (None, None) => now_s as u32,
    };
    ctx.keys.put_entry_accessed(db, key, entry, access_s);
    ctx.keys.signal_modified(db, key);
    ctx.notify(notify::GENERIC, "restore", key);
    if let (Some(unix_ms), false) = (unix_ms, options.absolute) {
        ctx.propagate_with(|| {
            let mut logged = args.to_vec();
            logged[2] = Bytes::from(unix_ms.to_string());
            logged.push(Bytes::from_static(b"ABSTTL"));
            logged
        });
    }
    ctx.reply.ok();
}
