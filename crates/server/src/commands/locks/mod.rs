//! Latch's own lock commands, named as Redis modules name theirs:
//!
//! - `LOCK.ACQUIRE name token ttl-ms [WAIT timeout-ms] [NOTIFY]`: takes the lock for `token` for
//!   `ttl-ms` milliseconds. Answers `[fencing-token, ttl-ms]`, or nil when the lock is held
//!   (without WAIT) or the wait timed out. With WAIT the client waits in the server, first
//!   come first served (`WAIT 0`: without limit), and is granted the lock the moment it is
//!   deleted, released, or its TTL runs out. The holder asking again gets its grant again,
//!   with the TTL renewed and the same fencing token (a request retried after a lost reply
//!   is safe). With NOTIFY (RESP3 only) the holder is sent a push when the lock runs out
//!   or is taken from it (`lock_watch.rs`).
//! - `LOCK.RELEASE name token`: 1 when `token` held the lock and it is released, else 0.
//! - `LOCK.EXTEND name token ttl-ms`: 1 when `token` holds the lock and its TTL is now
//!   `ttl-ms`, else 0.
//! - `LOCK.INFO name`: the holder's token, the fencing token, the TTL left, and the
//!   waiters (client id and milliseconds waited, first in line first), in one reply.
//!
//! A lock is an ordinary string key, `name`, holding the holder's token with a TTL: the key
//! `SET name token NX PX ttl` and redis-py's Lock use, so old and new clients share a lock
//! (a waiter is woken by any client's `DEL`, and by the TTL running out). The fencing token
//! comes from the counter `{name}:fence`, the one `latch-lock` keeps: incremented by every
//! grant and never below the server's clock in microseconds, so it keeps growing across a
//! failover to a replica that missed the last grants. Both are ordinary keys, so RDB, AOF
//! and replicas carry them as they are, and redis-server loads the files. Each command's
//! effects are logged as one transaction.
//!
//! Only the first lock waiter in line may take a free lock: a client that asks without
//! waiting finds the lock taken while others wait (clients using `SET NX` do not know
//! the line and may still take it first). The first in line also retries at the holder's
//! deadline, so an expired lock passes on then, not when a sweep finds it.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use latch_keyspace::{Deadline, KeyWaiter, Now, Value};

use crate::client::{LockWait, Waiter};
use crate::commands::{err, is, parse_i64, Ctx};
use crate::gate;
use crate::lock_stats::Grant;
use crate::pubsub::notify;
use crate::spec::{acl, flag, keyflag, Arg, ArgType, CommandSpec, Group, KeySpec, LockPlan};

mod shared;

pub static COMMANDS: &[CommandSpec] = &[ACQUIRE, RELEASE, EXTEND, INFO, LIST];

const NAME: Arg = Arg::key("name", 0);

pub const ACQUIRE: CommandSpec = CommandSpec {
    name: "lock.acquire",
    group: Group::Lock,
    summary: "Takes a lock for a token with a TTL, optionally waiting in line for it; answers \
              the fencing token and the TTL, or nil.",
    since: "0.1.0",
    complexity: "O(1)",
    arity: -4,
    flags: flag::WRITE | flag::DENYOOM | flag::BLOCKING,
    acl: acl::STRING | acl::BLOCKING,
    lock: LockPlan::LockAndFence,
    key_specs: &[KeySpec::single(
        1,
        keyflag::RW | keyflag::ACCESS | keyflag::INSERT | keyflag::UPDATE,
    )],
    arguments: &[
        NAME,
        Arg::string("token"),
        Arg::integer("ttl-ms"),
        Arg::integer("timeout-ms").with_token("WAIT").optional(),
        Arg::token("notify", "NOTIFY").optional(),
        Arg::oneof(
            "mode",
            &[
                Arg::token("shared", "SHARED"),
                Arg::integer("permits").with_token("PERMITS"),
            ],
        )
        .optional(),
    ],
    handler: Some(acquire),
    ..CommandSpec::BASE
};

pub const RELEASE: CommandSpec = CommandSpec {
    name: "lock.release",
    group: Group::Lock,
    summary: "Releases a lock its token holds; the first waiter in line takes it at once.",
    since: "0.1.0",
    complexity: "O(1)",
    arity: 3,
    flags: flag::WRITE | flag::FAST,
    acl: acl::STRING,
    lock: LockPlan::LockAndFence,
    key_specs: &[KeySpec::single(1, keyflag::RW | keyflag::DELETE)],
    arguments: &[NAME, Arg::string("token")],
    handler: Some(release),
    ..CommandSpec::BASE
};

pub const EXTEND: CommandSpec = CommandSpec {
    name: "lock.extend",
    group: Group::Lock,
    summary: "Sets the TTL of a lock its token holds.",
    since: "0.1.0",
    complexity: "O(1)",
    arity: 4,
    flags: flag::WRITE | flag::FAST,
    acl: acl::STRING,
    lock: LockPlan::LockAndFence,
    key_specs: &[KeySpec::single(1, keyflag::RW | keyflag::UPDATE)],
    arguments: &[NAME, Arg::string("token"), Arg::integer("ttl-ms")],
    handler: Some(extend),
    ..CommandSpec::BASE
};

pub const INFO: CommandSpec = CommandSpec {
    name: "lock.info",
    group: Group::Lock,
    summary: "Returns a lock's holder, fencing token, TTL and waiters.",
    since: "0.1.0",
    complexity: "O(N) where N is the number of waiters.",
    arity: 2,
    flags: flag::READONLY | flag::FAST,
    acl: acl::STRING,
    lock: LockPlan::LockAndFence,
    key_specs: &[KeySpec::single(1, keyflag::RO | keyflag::ACCESS)],
    arguments: &[NAME],
    handler: Some(info),
    ..CommandSpec::BASE
};

pub const LIST: CommandSpec = CommandSpec {
    name: "lock.list",
    group: Group::Lock,
    summary: "Lists the locks held or waited for whose names match a pattern: mode, \
              holders, TTL and waiters of each.",
    since: "0.1.0",
    complexity: "O(N) with N the number of keys in the database.",
    arity: -1,
    flags: flag::READONLY,
    acl: acl::KEYSPACE | acl::DANGEROUS,
    lock: LockPlan::All,
    arguments: &[Arg::new("pattern", ArgType::Pattern).optional()],
    handler: Some(list),
    ..CommandSpec::BASE
};

/// The key of a lock's fencing counter, `{name}:fence` (in the same cluster slot as the
/// lock: the braces make `name` its hash tag).
pub fn fence_key(name: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(name.len() + 8);
    key.push(b'{');
    key.extend_from_slice(name);
    key.extend_from_slice(b"}:fence");
    key
}

const BAD_FENCE: &[u8] = b"ERR the lock's fencing counter does not hold an integer";

/// A TTL argument: a positive number of milliseconds a deadline can hold.
fn parse_ttl(ctx: &mut Ctx<'_, '_>, arg: &[u8], command: &str) -> Option<(i64, Deadline)> {
    let Some(ms) = parse_i64(arg) else {
        ctx.reply.error(err::NOT_INTEGER);
        return None;
    };
    let deadline = if ms > 0 {
        Deadline::after(ctx.now(), ms)
    } else {
        None
    };
    match deadline {
        Some(deadline) => Some((ms, deadline)),
        None => {
            ctx.reply
                .error(format!("ERR invalid expire time in '{command}' command").as_bytes());
            None
        }
    }
}

/// What holds the lock now: nothing, a token (with its TTL left, -1 for none), the
/// leases of a shared lock or semaphore, or a value of another type.
enum Holder {
    Free,
    Token(Vec<u8>, i64),
    Shared(Vec<shared::Lease>),
    OtherType,
}

/// The lock's holders; `purge`: drop shared leases that ran out (a write: not for reads).
fn holder(ctx: &mut Ctx<'_, '_>, name: &Bytes, purge: bool) -> Holder {
    let db = ctx.db();
    let now = ctx.now();
    match ctx.keys.get_slot(db, name) {
        None => return Holder::Free,
        Some(slot) => {
            let ttl = slot.deadline().map_or(-1, |d| d.remaining_ms(now).max(0));
            match slot.value() {
                Value::Str(token) => return Holder::Token(token.clone(), ttl),
                Value::ZSet(_) => {}
                _ => return Holder::OtherType,
            }
        }
    }
    let leases = shared::leases(ctx, name, purge);
    if leases.is_empty() {
        Holder::Free
    } else {
        Holder::Shared(leases)
    }
}

/// How many may hold the lock at once: one (exclusive), or `n` (SHARED: no limit).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Exclusive,
    Permits(i64),
}

/// The waiters for lock `name`, first in line first (other clients blocked on the key,
/// BLPOP on a string, are not in its line).
fn lock_waiters(ctx: &mut Ctx<'_, '_>, name: &[u8]) -> Vec<(LockWait, Arc<dyn KeyWaiter>)> {
    let db = ctx.db();
    ctx.keys
        .waiters(db, name)
        .into_iter()
        .filter_map(|queued| {
            let waiter = queued.as_any().downcast_ref::<Waiter>()?;
            let lock = waiter.lock?;
            Some((lock, queued.clone()))
        })
        .collect()
}

/// The first lock waiter in line for `name`, found without walking the rest of the line.
fn first_lock_waiter(ctx: &mut Ctx<'_, '_>, name: &[u8]) -> Option<Arc<dyn KeyWaiter>> {
    let db = ctx.db();
    ctx.keys.first_waiter(db, name, &mut |queued| {
        queued
            .as_any()
            .downcast_ref::<Waiter>()
            .is_some_and(|waiter| waiter.lock.is_some())
    })
}

/// Whether this client may take a free lock: nobody waits for it, or this client is the
/// first lock waiter in line.
fn my_turn(ctx: &mut Ctx<'_, '_>, name: &[u8]) -> bool {
    let mine = ctx
        .client
        .blocked
        .as_ref()
        .map(|block| block.waiter.clone());
    let first = first_lock_waiter(ctx, name);
    match (first, mine) {
        (None, _) => true,
        (Some(first), Some(mine)) => std::ptr::eq(
            Arc::as_ptr(&first).cast::<()>(),
            Arc::as_ptr(&mine).cast::<()>(),
        ),
        (Some(_), None) => false,
    }
}

/// The wall clock in microseconds: the floor of every fencing token.
fn clock_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_micros() as i64)
}

/// The next fencing token of `name`: the counter plus one, never below the clock in
/// microseconds. Stores it. None (after the error) when the counter is not an integer.
fn next_fence(ctx: &mut Ctx<'_, '_>, name: &[u8]) -> Option<i64> {
    let db = ctx.db();
    let key = fence_key(name);
    let current = match ctx.keys.get(db, &key) {
        None => 0,
        Some(Value::Str(text)) => match parse_i64(text) {
            Some(n) => n,
            None => {
                ctx.reply.error(BAD_FENCE);
                return None;
            }
        },
        Some(_) => {
            ctx.reply.error(err::WRONGTYPE);
            return None;
        }
    };
    let fence = current.saturating_add(1).max(clock_us());
    let text = fence.to_string();
    ctx.keys
        .set(db, &key, Value::Str(text.clone().into_bytes()), None);
    ctx.keys.signal_modified(db, &key);
    ctx.notify(notify::STRING, "set", &key);
    ctx.propagate_with(|| {
        vec![
            Bytes::from_static(b"SET"),
            Bytes::from(key),
            Bytes::from(text),
        ]
    });
    Some(fence)
}

/// The fencing counter as it stands (0 when there is none).
fn current_fence(ctx: &mut Ctx<'_, '_>, name: &[u8]) -> i64 {
    let db = ctx.db();
    match ctx.keys.get(db, &fence_key(name)) {
        Some(Value::Str(text)) => parse_i64(text).unwrap_or(0),
        _ => 0,
    }
}

/// Sets the lock key to `token` until `deadline`, and logs it with the absolute time.
fn grant(ctx: &mut Ctx<'_, '_>, name: &Bytes, token: &Bytes, deadline: Deadline, now: Now) {
    let db = ctx.db();
    ctx.keys
        .set(db, name, Value::Str(token.to_vec()), Some(deadline));
    ctx.keys.signal_modified(db, name);
    ctx.notify(notify::STRING, "set", name);
    ctx.notify(notify::GENERIC, "expire", name);
    let at_ms = deadline.unix_ms(now);
    ctx.propagate_with(|| {
        vec![
            Bytes::from_static(b"SET"),
            name.clone(),
            token.clone(),
            Bytes::from_static(b"PXAT"),
            Bytes::from(at_ms.to_string()),
        ]
    });
}

/// LOCK.ACQUIRE's options after the TTL: `WAIT timeout-ms` (`Some(None)`: without limit)
/// and `NOTIFY`.
struct AcquireOptions {
    wait: Option<Option<Duration>>,
    notify: bool,
    mode: Mode,
}

/// Parses the options; `Err` after the error reply.
fn parse_options(ctx: &mut Ctx<'_, '_>, rest: &[Bytes]) -> Result<AcquireOptions, ()> {
    let mut options = AcquireOptions {
        wait: None,
        notify: false,
        mode: Mode::Exclusive,
    };
    let mut i = 0;
    while i < rest.len() {
        let word = &rest[i];
        if is(word, "NOTIFY") {
            options.notify = true;
            i += 1;
            continue;
        }
        if is(word, "SHARED") && options.mode == Mode::Exclusive {
            options.mode = Mode::Permits(i64::MAX);
            i += 1;
            continue;
        }
        if is(word, "PERMITS") && options.mode == Mode::Exclusive && i + 1 < rest.len() {
            match parse_i64(&rest[i + 1]) {
                Some(n) if n > 0 => options.mode = Mode::Permits(n),
                _ => {
                    ctx.reply.error(b"ERR PERMITS must be a positive integer");
                    return Err(());
                }
            }
            i += 2;
            continue;
        }
        if !is(word, "WAIT") || i + 1 >= rest.len() {
            ctx.reply.error(err::SYNTAX);
            return Err(());
        }
        options.wait = match parse_i64(&rest[i + 1]) {
            Some(ms) if ms >= 0 => Some((ms > 0).then(|| Duration::from_millis(ms as u64))),
            Some(_) => {
                ctx.reply.error(b"ERR timeout is negative");
                return Err(());
            }
            None => {
                ctx.reply
                    .error(b"ERR timeout is not an integer or out of range");
                return Err(());
            }
        };
        i += 2;
    }
    if options.notify && ctx.reply.resp() != latch_protocol::Resp::V3 {
        ctx.reply
            .error(b"ERR NOTIFY needs the RESP3 protocol (HELLO 3): it answers with a push");
        return Err(());
    }
    Ok(options)
}

/// Tells the holder when its lock runs out (NOTIFY).
fn watch(ctx: &mut Ctx<'_, '_>, name: &[u8], token: &[u8]) {
    let Some(server) = ctx.server.arc() else {
        return;
    };
    let holder = std::sync::Arc::clone(&ctx.client.shared);
    let db = ctx.client.db;
    let observer = ctx
        .server
        .lock_watches
        .start(&server, holder, db, name, token);
    ctx.keys.observe(db, name, &observer);
}

fn acquire(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let (name, token) = (&args[1], &args[2]);
    let Ok(AcquireOptions { wait, notify, mode }) = parse_options(ctx, &args[4..]) else {
        return;
    };
    let Some((ttl_ms, deadline)) = parse_ttl(ctx, &args[3], "lock.acquire") else {
        return;
    };
    let now = ctx.now();
    let db = ctx.db();
    let ttl = Duration::from_millis(ttl_ms as u64);
    let holders = holder(ctx, name, true);
    // What this request may do: renew its own grant, take the lock, or wait.
    let (renew, free) = match (&holders, mode) {
        (Holder::OtherType, _) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
        (Holder::Token(held, _), Mode::Exclusive) => (held[..] == token[..], false),
        (Holder::Shared(leases), Mode::Permits(n)) => (
            leases.iter().any(|(held, _)| held[..] == token[..]),
            (leases.len() as i64) < n,
        ),
        (Holder::Free, _) => (false, true),
        _ => (false, false),
    };
    if renew {
        // The holder asking again: the same grant, renewed.
        ctx.server.lock_stats.extended(db, name, ttl);
        match mode {
            Mode::Exclusive => grant(ctx, name, token, deadline, now),
            Mode::Permits(_) => shared::grant(ctx, name, token, ttl_ms),
        }
        ctx.server.lock_watches.extended(db, name, token);
        if notify {
            watch(ctx, name, token);
        }
        let fence = current_fence(ctx, name);
        answer_grant(ctx, fence, ttl_ms);
        return;
    }
    if free && my_turn(ctx, name) {
        let Some(fence) = next_fence(ctx, name) else {
            return;
        };
        match mode {
            Mode::Exclusive => grant(ctx, name, token, deadline, now),
            Mode::Permits(_) => shared::grant(ctx, name, token, ttl_ms),
        }
        let waited_since = ctx
            .client
            .blocked
            .as_ref()
            .and_then(|block| block.waiter.lock)
            .map(|lock| lock.since);
        ctx.server.lock_stats.granted(Grant {
            db,
            name,
            token,
            ttl,
            waited_since,
            exclusive: mode == Mode::Exclusive,
        });
        if notify {
            watch(ctx, name, token);
        }
        answer_grant(ctx, fence, ttl_ms);
        return;
    }
    let Some(timeout) = wait else {
        ctx.reply.null_array();
        return;
    };
    if ctx.client.blocked.is_none() {
        gate::block_for_lock(ctx, args, name, timeout);
    }
    // Waiting: the first in line retries the moment a lease runs out (the holder's, or the
    // first of the shared ones), so the lock passes on at that deadline.
    let first_out = match &holders {
        Holder::Token(..) => ctx.keys.get_slot(db, name).and_then(|slot| slot.deadline()),
        Holder::Shared(_) => match ctx.keys.get(db, name) {
            Some(Value::ZSet(set)) => set.nth(0).map(|(_, until)| Deadline::at_wall(until as i64)),
            _ => None,
        },
        _ => None,
    };
    let recheck = match first_out {
        Some(deadline) if my_turn(ctx, name) => {
            // Never at once: a retry that finds the lease still running waits again.
            let left = ctx.server.keyspace.clock().until_passed(deadline);
            Some(tokio::time::Instant::now() + left.max(Duration::from_micros(100)))
        }
        _ => None,
    };
    if let Some(block) = ctx.client.blocked.as_mut() {
        block.recheck_at = recheck;
    }
}

fn answer_grant(ctx: &mut Ctx<'_, '_>, fence: i64, ttl_ms: i64) {
    ctx.reply.array(2);
    ctx.reply.integer(fence);
    ctx.reply.integer(ttl_ms);
}

fn release(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let (name, token) = (&args[1], &args[2]);
    let db = ctx.db();
    let held = match holder(ctx, name, true) {
        Holder::OtherType => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
        Holder::Token(held, _) if held[..] == token[..] => Some(true),
        Holder::Shared(leases) if leases.iter().any(|(held, _)| held[..] == token[..]) => {
            Some(false)
        }
        _ => None,
    };
    let Some(exclusive) = held else {
        ctx.reply.integer(0);
        return;
    };
    let waiters = first_lock_waiter(ctx, name).is_some();
    ctx.server.lock_stats.released(db, name, token, waiters);
    ctx.server.lock_watches.released(db, name, token);
    if exclusive {
        ctx.keys.remove(db, name);
        ctx.keys.signal_modified(db, name);
        ctx.notify(notify::GENERIC, "del", name);
        ctx.propagate_with(|| vec![Bytes::from_static(b"DEL"), name.clone()]);
    } else {
        shared::release(ctx, name, token);
    }
    ctx.reply.integer(1);
}

fn extend(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let (name, token) = (&args[1], &args[2]);
    let Some((ttl_ms, deadline)) = parse_ttl(ctx, &args[3], "lock.extend") else {
        return;
    };
    let now = ctx.now();
    let db = ctx.db();
    let ttl = Duration::from_millis(ttl_ms as u64);
    match holder(ctx, name, true) {
        Holder::OtherType => ctx.reply.error(err::WRONGTYPE),
        Holder::Token(held, _) if held[..] == token[..] => {
            ctx.server.lock_stats.extended(db, name, ttl);
            ctx.keys.set_deadline(db, name, Some(deadline));
            ctx.server.lock_watches.extended(db, name, token);
            ctx.keys.signal_modified(db, name);
            ctx.notify(notify::GENERIC, "expire", name);
            let at_ms = deadline.unix_ms(now);
            ctx.propagate_with(|| {
                vec![
                    Bytes::from_static(b"PEXPIREAT"),
                    name.clone(),
                    Bytes::from(at_ms.to_string()),
                ]
            });
            ctx.reply.integer(1);
        }
        Holder::Shared(leases) if leases.iter().any(|(held, _)| held[..] == token[..]) => {
            shared::grant(ctx, name, token, ttl_ms);
            ctx.server.lock_watches.extended(db, name, token);
            ctx.reply.integer(1);
        }
        _ => ctx.reply.integer(0),
    }
}

fn info(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let name = &args[1];
    let (mode, leases): (&[u8], Vec<shared::Lease>) = match holder(ctx, name, false) {
        Holder::OtherType => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
        Holder::Free => (b"free", Vec::new()),
        Holder::Token(token, ttl) => (b"exclusive", vec![(token, ttl)]),
        Holder::Shared(leases) => (b"shared", leases),
    };
    let fence = current_fence(ctx, name);
    let waiters = lock_waiters(ctx, name);
    let reply = &mut *ctx.reply;
    reply.map(6);
    reply.bulk(b"mode");
    reply.bulk(mode);
    reply.bulk(b"holder");
    match (mode, leases.first()) {
        (b"exclusive", Some((token, _))) => reply.bulk(token),
        _ => reply.null(),
    }
    reply.bulk(b"holders");
    reply.array(leases.len());
    for (token, left) in &leases {
        reply.array(2);
        reply.bulk(token);
        reply.integer(*left);
    }
    reply.bulk(b"fencing-token");
    reply.integer(fence);
    reply.bulk(b"ttl-ms");
    // The longest lease: how long the lock stays taken without a renewal.
    reply.integer(leases.iter().map(|(_, left)| *left).max().unwrap_or(-2));
    reply.bulk(b"waiters");
    reply.array(waiters.len());
    for (lock, _) in &waiters {
        reply.array(2);
        reply.integer(lock.client_id as i64);
        reply.integer(lock.since.elapsed().as_millis() as i64);
    }
}

/// LOCK.LIST [pattern]: the locks that keep a fencing counter (every lock LOCK.ACQUIRE or
/// latch-lock granted) and are held or waited for now, by name.
fn list(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let pattern = args.get(1).map_or(&b"*"[..], |p| &p[..]);
    let db = ctx.db();
    let mut names: Vec<Bytes> = Vec::new();
    ctx.keys.for_each_key(db, &mut |slot| {
        let key = slot.key();
        if let Some(name) = key
            .strip_prefix(b"{")
            .and_then(|rest| rest.strip_suffix(b"}:fence"))
        {
            if latch_keyspace::glob::glob_match(pattern, name, false) {
                names.push(Bytes::copy_from_slice(name));
            }
        }
    });
    names.sort();
    let mut rows = Vec::new();
    for name in names {
        let (mode, holders, ttl): (&[u8], usize, i64) = match holder(ctx, &name, false) {
            Holder::Free => (b"free", 0, -2),
            Holder::Token(_, ttl) => (b"exclusive", 1, ttl),
            Holder::Shared(leases) => (
                b"shared",
                leases.len(),
                leases.iter().map(|(_, left)| *left).max().unwrap_or(-2),
            ),
            Holder::OtherType => continue,
        };
        let waiters = lock_waiters(ctx, &name).len();
        if holders == 0 && waiters == 0 {
            continue;
        }
        rows.push((name, mode, holders, ttl, waiters));
    }
    let reply = &mut *ctx.reply;
    reply.array(rows.len());
    for (name, mode, holders, ttl, waiters) in rows {
        reply.map(5);
        reply.bulk(b"name");
        reply.bulk(&name);
        reply.bulk(b"mode");
        reply.bulk(mode);
        reply.bulk(b"holders");
        reply.integer(holders as i64);
        reply.bulk(b"ttl-ms");
        reply.integer(ttl);
        reply.bulk(b"waiters");
        reply.integer(waiters as i64);
    }
}
