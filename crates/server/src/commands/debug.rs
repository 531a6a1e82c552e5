//! DEBUG: the helpers Redis' test suite relies on (SLEEP, SET-ACTIVE-EXPIRE, OBJECT,
//! PROTOCOL, CHANGE-REPL-ID, LOG, ...) and Latch's own clock controls for tests:
//! JUMP-CLOCK moves the wall clock only, ADVANCE-CLOCK moves both clocks, so TTL tests
//! control time instead of sleeping.

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use latch_keyspace::{Locked, Value};

use super::client::{help_reply, subcommand_syntax_error};
use super::{dataset_digest, err, is, parse_f64, parse_i64, Ctx};
use crate::spec::{docflag, flag, CommandSpec, Group, LockPlan};

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "debug",
    group: Group::Server,
    summary: "Runs server debugging and testing helpers.",
    since: "1.0.0",
    complexity: "Depends on subcommand.",
    arity: -2,
    flags: flag::ADMIN | flag::NOSCRIPT | flag::LOADING | flag::STALE | flag::PROTECTED,
    doc_flags: docflag::SYSCALL,
    handler: Some(debug),
    lock: LockPlan::Keys,
    ..CommandSpec::BASE
}];

/// DEBUG SLEEP never blocks longer than this (an hour), so a typo cannot hang the server
/// for good.
const MAX_SLEEP_S: f64 = 3600.0;

fn debug(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let sub = &args[1];
    let argc = args.len();
    if is(sub, "HELP") && argc == 2 {
        debug_help(ctx);
    } else if is(sub, "PAUSE-CRON") && argc == 3 {
        let paused = parse_i64(&args[2]).unwrap_or(0) != 0;
        ctx.server.cron_paused.store(paused, Ordering::Relaxed);
        ctx.reply.ok();
    } else if is(sub, "SEGFAULT") && argc == 2 {
        crate::crash::segfault();
    } else if is(sub, "SLEEP") && argc == 3 {
        debug_sleep(ctx, &args[2]);
    } else if is(sub, "SET-ACTIVE-EXPIRE") && argc == 3 {
        set_switch(ctx, |server| &server.active_expire, &args[2]);
    } else if is(sub, "OBJECT") && argc == 3 {
        debug_object(ctx, &args[2]);
    } else if is(sub, "DIGEST") && argc == 2 {
        debug_digest(ctx);
    } else if is(sub, "DIGEST-VALUE") {
        debug_digest_value(ctx, &args[2..]);
    } else if is(sub, "PROTOCOL") && argc == 3 {
        debug_protocol(ctx, &args[2]);
    } else if is(sub, "CHANGE-REPL-ID") && argc == 2 {
        ctx.server.replication.change_replid();
        ctx.reply.ok();
    } else if is(sub, "ERROR") && argc == 3 {
        // The argument as an error reply, verbatim (line breaks as spaces), written as
        // raw protocol as Redis does (so no error statistics count it): client libraries
        // test their error classes with it.
        let mut line = b"-".to_vec();
        line.extend(
            args[2]
                .iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        line.extend_from_slice(b"\r\n");
        ctx.reply.raw(&line);
    } else if is(sub, "LOG") && argc == 3 {
        tracing::warn!("DEBUG LOG: {}", String::from_utf8_lossy(&args[2]));
        ctx.reply.ok();
    } else if (is(sub, "JUMP-CLOCK") || is(sub, "ADVANCE-CLOCK")) && argc == 3 {
        let Some(ms) = parse_i64(&args[2]) else {
            ctx.reply.error(err::NOT_INTEGER);
            return;
        };
        let clock = ctx.server.keyspace.clock();
        if is(sub, "JUMP-CLOCK") {
            clock.jump_wall(ms);
        } else {
            clock.advance(ms);
        }
        ctx.reply.ok();
    } else if is(sub, "SET-SKIP-CHECKSUM-VALIDATION") && argc == 3 {
        set_switch(ctx, |server| &server.skip_checksum_validation, &args[2]);
    } else if is(sub, "SET-DISABLE-DENY-SCRIPTS") && argc == 3 {
        set_switch(ctx, |server| &server.script_disable_deny_script, &args[2]);
    } else if is(sub, "AOF-FLUSH-SLEEP") && argc == 3 {
        let us = parse_i64(&args[2]).unwrap_or(0).max(0) as u64;
        crate::persistence::aof::AofLog::set_flush_sleep_us(us);
        ctx.reply.ok();
    } else if is(sub, "CONFIG-REWRITE-FORCE-ALL") && argc == 2 {
        match ctx.server.rewrite_config(true) {
            Ok(()) => ctx.reply.ok(),
            Err(message) => ctx
                .reply
                .error(format!("ERR CONFIG-REWRITE-FORCE-ALL failed: {message}").as_bytes()),
        }
    } else if is(sub, "POPULATE") && (3..=5).contains(&argc) {
        debug_populate(ctx, &args[2..]);
    } else if is(sub, "LOADAOF") && argc == 2 {
        debug_loadaof(ctx);
    } else if is(sub, "QUICKLIST-PACKED-THRESHOLD") && argc == 3 {
        debug_quicklist_packed_threshold(ctx, &args[2]);
    } else if is(sub, "RELOAD") {
        debug_reload(ctx, &args[2..]);
    } else if is(sub, "REPLYBUFFER") && argc == 4 {
        debug_replybuffer(ctx, args);
    } else if is(sub, "JMAP") && argc == 2 {
        ctx.reply.ok();
    } else if is(sub, "PANIC-CONNECTION") && argc == 2 {
        // Latch's own: a bug's stand-in, for the tests that check a panic costs one
        // connection and not the server's bookkeeping.
        panic!("DEBUG PANIC-CONNECTION");
    } else {
        subcommand_syntax_error(ctx, args);
    }
}

/// REPLYBUFFER PEAK-RESET-TIME <NEVER|RESET|ms> and REPLYBUFFER RESIZING <0|1>: how
/// connections review their reply buffers (Redis' `clientsCronResizeOutputBuffer` knobs).
fn debug_replybuffer(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    use crate::net::{REPLY_PEAK_RESET_DEFAULT_MS, REPLY_PEAK_RESET_MS, REPLY_RESIZING};
    if is(&args[2], "PEAK-RESET-TIME") {
        let ms = if is(&args[3], "NEVER") {
            -1
        } else if is(&args[3], "RESET") {
            REPLY_PEAK_RESET_DEFAULT_MS
        } else {
            match parse_i64(&args[3]) {
                Some(ms) => ms,
                None => {
                    ctx.reply.error(err::NOT_INTEGER);
                    return;
                }
            }
        };
        REPLY_PEAK_RESET_MS.store(ms, Ordering::Relaxed);
    } else if is(&args[2], "RESIZING") {
        REPLY_RESIZING.store(parse_i64(&args[3]).unwrap_or(0) != 0, Ordering::Relaxed);
    } else {
        subcommand_syntax_error(ctx, args);
        return;
    }
    ctx.reply.ok();
}

/// The `SET-... <0|1>` subcommands: any non-zero integer turns the server's switch on,
/// anything else off (Redis reads the argument with atoi).
fn set_switch(
    ctx: &mut Ctx<'_, '_>,
    switch: fn(&crate::server::Server) -> &std::sync::atomic::AtomicBool,
    arg: &[u8],
) {
    let on = parse_i64(arg).unwrap_or(0) != 0;
    switch(ctx.server).store(on, Ordering::Relaxed);
    ctx.reply.ok();
}

fn debug_help(ctx: &mut Ctx<'_, '_>) {
    help_reply(
        ctx.reply,
        "debug",
        &[
            "ADVANCE-CLOCK <milliseconds>",
            "    Move both the monotonic and the wall clock forward (negative: back), as if",
            "    that much time had passed. Relative and absolute TTLs both see it.",
            "AOF-FLUSH-SLEEP <microsec>",
            "    Wait that long before each write of the AOF buffer (0: do not).",
            "CHANGE-REPL-ID",
            "    Pick a new replication id.",
            "JUMP-CLOCK <milliseconds>",
            "    Move only the wall clock: absolute TTLs (EXPIREAT, PXAT...) see the jump,",
            "    relative ones (EXPIRE, PX...) do not.",
            "CONFIG-REWRITE-FORCE-ALL",
            "    Like CONFIG REWRITE but writes every option, defaults included.",
            "DIGEST",
            "    The data set's digest (as redis-server computes it; zeros when empty).",
            "DIGEST-VALUE <key> [<key> ...]",
            "    Each value's digest.",
            "ERROR <string>",
            "    Reply with <string> as an error (for clients' tests of error replies).",
            "LOADAOF",
            "    Write and sync the AOF, empty the data set and load it back from the AOF.",
            "LOG <message>",
            "    Write <message> to the server log.",
            "OBJECT <key>",
            "    Describe the value stored at <key>.",
            "PAUSE-CRON <0|1>",
            "    Stop (1) or resume (0) the server's periodic tasks (expiry, save points,",
            "    a signal's shutdown...).",
            "PANIC-CONNECTION",
            "    Panic while running this command: the connection closes (after an error",
            "    reply) and the server goes on.",
            "QUICKLIST-PACKED-THRESHOLD <size>",
            "    Accepted for Redis' tests (lists have no separate large-element nodes).",
            "RELOAD [MERGE] [NOFLUSH] [NOSAVE]",
            "    Save the RDB file, empty the data set and load the file back. MERGE: keys",
            "    and libraries in the file replace those in memory (otherwise they fail the",
            "    load); NOFLUSH: keep the data set; NOSAVE: load the file as it is.",
            "POPULATE <count> [<prefix>] [<size>]",
            "    Create string keys <prefix>:0..<count-1> (prefix: key) holding value:<n>,",
            "    cut or padded with zero bytes to <size>; existing keys are kept.",
            "PROTOCOL <type>",
            "    Reply with a sample of a reply type: string, integer, double, bignum, null,",
            "    array, set, map, attrib, push, verbatim, true or false.",
            "SEGFAULT",
            "    Crash the server with a memory fault (the log gets a crash report).",
            "REPLYBUFFER PEAK-RESET-TIME <NEVER|RESET|milliseconds>",
            "    How often a client's reply buffer peak starts over (NEVER: it does not;",
            "    RESET: the default).",
            "REPLYBUFFER RESIZING <0|1>",
            "    Stop (0) or resume (1) shrinking and freeing clients' reply buffers.",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Stop (0) or resume (1) removing expired keys in the background.",
            "SET-DISABLE-DENY-SCRIPTS <0|1>",
            "    Let scripts call commands flagged noscript (1), or not (0).",
            "SET-SKIP-CHECKSUM-VALIDATION <0|1>",
            "    Let RESTORE skip the payload's checksum (1), or check it (0).",
            "SLEEP <seconds>",
            "    Hold the whole keyspace for <seconds> (a decimal number), blocking every",
            "    command that touches keys.",
        ],
    );
}

/// DEBUG DIGEST: the data set's digest, as redis-server computes it (dataset_digest.rs).
fn debug_digest(ctx: &mut Ctx<'_, '_>) {
    let keyspace = &ctx.server.keyspace;
    let mut total = [0u8; 20];
    let mut fold = |view: &mut Locked<'_>| {
        for db in 0..keyspace.num_dbs() {
            let mut keys = Vec::new();
            view.for_each_stored_key(db, &mut |slot| keys.push(dataset_digest::key_digest(slot)));
            dataset_digest::fold_db(&mut total, db, &keys);
        }
    };
    if ctx.keys.holds_all() {
        fold(ctx.keys);
    } else {
        fold(&mut keyspace.lock_all());
    }
    ctx.reply.simple(dataset_digest::hex(&total).as_bytes());
}

/// DEBUG DIGEST-VALUE key...: each value's digest (all zeros for a missing key).
fn debug_digest_value(ctx: &mut Ctx<'_, '_>, keys: &[Bytes]) {
    let db = ctx.db();
    let digest_of = |view: &mut Locked<'_>, key: &[u8]| {
        let mut digest = [0u8; 20];
        if let Some(slot) = view.stored_slot(db, key) {
            dataset_digest::mix_value(&mut digest, slot.value(), slot.deadline().is_some());
        }
        digest
    };
    let digests: Vec<_> = if ctx.keys.holds_all() {
        keys.iter().map(|key| digest_of(ctx.keys, key)).collect()
    } else {
        let names: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        let mut view = ctx.server.keyspace.lock_keys(&names);
        keys.iter().map(|key| digest_of(&mut view, key)).collect()
    };
    ctx.reply.array(digests.len());
    for digest in &digests {
        ctx.reply.simple(dataset_digest::hex(digest).as_bytes());
    }
}

/// DEBUG POPULATE <count> [<prefix>] [<size>]: creates the string keys `prefix:0` ..
/// `prefix:<count-1>` (prefix `key`) holding `value:<n>`, cut or padded with zero bytes to
/// `size` when one is given; keys that exist are left alone. Like Redis, it neither
/// counts as a change for saving nor goes to the AOF or replicas.
fn debug_populate(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let parse_count = |arg: &[u8]| match parse_i64(arg) {
        None => Err(err::NOT_INTEGER),
        Some(n) if n < 0 => Err(err::NOT_POSITIVE),
        Some(n) => Ok(n as u64),
    };
    let count = match parse_count(&args[0]) {
        Ok(count) => count,
        Err(message) => return ctx.reply.error(message),
    };
    let size = match args.get(2).map(|arg| parse_count(arg)).transpose() {
        Ok(size) => size.unwrap_or(0) as usize,
        Err(message) => return ctx.reply.error(message),
    };
    // Redis formats the key into a 128-byte C buffer: the prefix ends at a NUL byte and
    // the key at 127 bytes.
    let prefix = args.get(1).map_or(&b"key"[..], |p| {
        &p[..p.iter().position(|&b| b == 0).unwrap_or(p.len())]
    });
    let db = ctx.db();
    let fill = |view: &mut Locked<'_>| {
        for n in 0..count {
            let mut key = prefix.to_vec();
            key.extend_from_slice(format!(":{n}").as_bytes());
            key.truncate(127);
            if view.exists(db, &key) {
                continue;
            }
            let mut value = format!("value:{n}").into_bytes();
            if size > 0 {
                value.resize(size, 0);
            }
            view.set(db, &key, Value::Str(value), None);
            view.signal_modified(db, &key);
        }
    };
    if ctx.keys.holds_all() {
        fill(ctx.keys);
    } else {
        fill(&mut ctx.server.keyspace.lock_all());
    }
    ctx.reply.ok();
}

/// DEBUG QUICKLIST-PACKED-THRESHOLD <size>: in Redis, the element size from which a list
/// keeps an element in a node of its own. Latch's lists have no such nodes (an element of
/// any size sits in its pack), so the size is checked as Redis checks it and has no other
/// effect; lists behave the same either way.
fn debug_quicklist_packed_threshold(ctx: &mut Ctx<'_, '_>, size: &[u8]) {
    const LIMIT: u64 = (1 << 32) - (1 << 20);
    let size = std::str::from_utf8(size)
        .ok()
        .and_then(crate::config::parse_memory);
    match size {
        Some(size) if size <= LIMIT => ctx.reply.ok(),
        _ => ctx
            .reply
            .error(b"ERR argument must be a memory value bigger than 1 and smaller than 4gb"),
    }
}

/// DEBUG LOADAOF: syncs the AOF and loads the data set back from its files.
fn debug_loadaof(ctx: &mut Ctx<'_, '_>) {
    if latch_keyspace::Keyspace::thread_holds_shards() {
        ctx.reply
            .error(b"ERR DEBUG LOADAOF cannot run inside a transaction");
        return;
    }
    let server = ctx.server;
    match crate::server::beside_runtime(|| crate::persistence::aofdir::reload(server)) {
        Ok(()) => {
            tracing::warn!("Append Only File loaded by DEBUG LOADAOF");
            ctx.reply.ok();
        }
        Err(error) => {
            // redis-server exits here; Latch keeps running with what it could load.
            tracing::warn!("DEBUG LOADAOF could not load the AOF: {error:#}");
            ctx.reply.error(b"ERR Error trying to load the AOF");
        }
    }
}

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: saves the RDB file, empties the data set and
/// loads the file back (each step but the load can be left out).
fn debug_reload(ctx: &mut Ctx<'_, '_>, options: &[Bytes]) {
    let (mut merge, mut flush, mut save) = (false, true, true);
    for option in options {
        if is(option, "MERGE") {
            merge = true;
        } else if is(option, "NOFLUSH") {
            flush = false;
        } else if is(option, "NOSAVE") {
            save = false;
        } else {
            ctx.reply
                .error(b"ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.");
            return;
        }
    }
    if latch_keyspace::Keyspace::thread_holds_shards() {
        // Inside MULTI the transaction holds the shards the reload needs.
        ctx.reply
            .error(b"ERR DEBUG RELOAD cannot run inside a transaction");
        return;
    }
    let server = ctx.server;
    let result = crate::server::beside_runtime(|| {
        if save {
            if let Err(error) = crate::persistence::snapshot::save(server) {
                tracing::warn!("DEBUG RELOAD could not save: {error:#}");
                return Err(&b"ERR"[..]);
            }
        }
        let path = crate::persistence::path_in_dir(&server.config.dbfilename());
        match crate::persistence::snapshot::reload(server, &path, flush, merge) {
            Ok(_) => Ok(()),
            Err(error) => {
                tracing::warn!("DEBUG RELOAD could not load: {error:#}");
                Err(&b"ERR Error trying to load the RDB dump"[..])
            }
        }
    });
    match result {
        Ok(()) => {
            tracing::warn!("DB reloaded by DEBUG RELOAD");
            ctx.reply.ok();
        }
        Err(message) => ctx.reply.error(message),
    }
}

fn debug_sleep(ctx: &mut Ctx<'_, '_>, arg: &[u8]) {
    // Redis reads the number leniently: anything unparsable sleeps zero seconds.
    let seconds = parse_f64(arg)
        .filter(|s| s.is_finite() && *s > 0.0)
        .unwrap_or(0.0)
        .min(MAX_SLEEP_S);
    let pause = Duration::from_secs_f64(seconds);
    if ctx.keys.holds_all() {
        std::thread::sleep(pause);
    } else {
        let _all = ctx.server.keyspace.lock_all();
        std::thread::sleep(pause);
    }
    ctx.reply.ok();
}

/// Bytes Redis' RDB format would use for a string value (without compression).
fn serialized_length(value: &Value) -> usize {
    let length_prefix = |len: usize| match len {
        0..=63 => 1,
        64..=16_383 => 2,
        _ if len as u64 <= u32::MAX as u64 => 5,
        _ => 9,
    };
    match value {
        Value::Str(bytes) => match super::parse_i64(bytes).filter(|_| bytes.len() <= 11) {
            Some(n) if (-128..=127).contains(&n) => 2,
            Some(n) if (-32_768..=32_767).contains(&n) => 3,
            Some(n) if (i32::MIN as i64..=i32::MAX as i64).contains(&n) => 5,
            _ => length_prefix(bytes.len()) + bytes.len(),
        },
        // Collections: each element as a length-prefixed string, plus the element count.
        other => length_prefix(1) + other.heap_bytes(),
    }
}

fn describe_object(keys: &mut Locked<'_>, db: usize, key: &[u8]) -> Option<String> {
    let now = keys.now();
    let slot = keys.stored_slot(db, key)?;
    let access_s = slot.access_s();
    let value = slot.value();
    let encoding = slot.encoding();
    // Redis shares the objects of small integers; they show the "immortal" count.
    let shared_integer = encoding == "int"
        && match value {
            Value::Str(bytes) => super::parse_i64(bytes).is_some_and(|n| (0..10_000).contains(&n)),
            _ => false,
        };
    let refcount = if shared_integer { i32::MAX as i64 } else { 1 };
    let idle_s = u64::from(now.access_s().saturating_sub(access_s));
    let lru_clock = (now.wall_s() as u64) & ((1 << 24) - 1);
    let lru = lru_clock.wrapping_sub(idle_s) & ((1 << 24) - 1);
    let serialized = serialized_length(value);
    let address = 0x7f00_0000_0000u64 | (keys.keyspace().hash(key) & 0xff_ffff_fff0);
    Some(format!(
        "Value at:0x{address:x} refcount:{refcount} encoding:{encoding} serializedlength:{} lru:{lru} lru_seconds_idle:{idle_s}",
        serialized
    ))
}

fn debug_object(ctx: &mut Ctx<'_, '_>, key: &Bytes) {
    let db = ctx.db();
    // DEBUG names no keys in its spec, so the gatekeeper locked nothing (or, inside a
    // transaction, everything).
    let line = if ctx.keys.holds_all() {
        describe_object(ctx.keys, db, key)
    } else {
        let mut view = ctx.server.keyspace.lock_keys(&[key]);
        let line = describe_object(&mut view, db, key);
        let expired = view.effects.expired;
        if expired > 0 {
            ctx.server
                .stats
                .expired_keys
                .fetch_add(expired, Ordering::Relaxed);
        }
        line
    };
    match line {
        Some(line) => ctx.reply.simple(line.as_bytes()),
        None => ctx.reply.error(err::NO_SUCH_KEY),
    }
}

// 3.141 is the sample value Redis replies with, not an approximation of pi.
#[allow(clippy::approx_constant)]
fn debug_protocol(ctx: &mut Ctx<'_, '_>, name: &[u8]) {
    let resp3 = ctx.reply.resp() == latch_protocol::Resp::V3;
    let reply = &mut *ctx.reply;
    if is(name, "string") {
        reply.bulk(b"Hello World");
    } else if is(name, "integer") {
        reply.integer(12345);
    } else if is(name, "double") {
        reply.double(3.141);
    } else if is(name, "bignum") {
        reply.big_number(b"1234567999999999999999999999999999999");
    } else if is(name, "null") {
        reply.null();
    } else if is(name, "array") {
        reply.array(3);
        (0..3).for_each(|j| reply.integer(j));
    } else if is(name, "set") {
        reply.set(3);
        (0..3).for_each(|j| reply.integer(j));
    } else if is(name, "map") {
        reply.map(3);
        for j in 0..3 {
            reply.integer(j);
            reply.boolean(j == 1);
        }
    } else if is(name, "attrib") {
        if resp3 {
            reply.raw(b"|1\r\n");
            reply.bulk(b"key-popularity");
            reply.array(2);
            reply.bulk(b"key:123");
            reply.integer(90);
        }
        reply.bulk(b"Some real reply following the attribute");
    } else if is(name, "push") {
        if !resp3 {
            reply.error(b"ERR RESP2 is not supported by this command");
            return;
        }
        reply.push(2);
        reply.bulk(b"server-cpu-usage");
        reply.integer(42);
        reply.bulk(b"Some real reply following the push reply");
    } else if is(name, "true") {
        reply.boolean(true);
    } else if is(name, "false") {
        reply.boolean(false);
    } else if is(name, "verbatim") {
        reply.verbatim(b"txt", b"This is a verbatim\nstring");
    } else {
        reply.error(b"ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false");
    }
}
