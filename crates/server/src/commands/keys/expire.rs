//! Time to live: EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, TTL, PTTL, EXPIRETIME, PEXPIRETIME,
//! PERSIST.
//!
//! Relative TTLs become deadlines on the monotonic clock, absolute ones on the wall clock;
//! comparisons (NX/XX/GT/LT) and reports are made in unix milliseconds either way, as Redis
//! does with its single wall clock.

use bytes::Bytes;
use latch_keyspace::lazyfree::{self, Cause};
use latch_keyspace::Deadline;

use crate::commands::{err, is, parse_i64, Ctx};
use crate::pubsub::notify;
use crate::spec::{acl, flag, keyflag, Arg, ArgType, CommandSpec, KeySpec};

const CONDITION: Arg = Arg::oneof(
    "condition",
    &[
        Arg::token("nx", "NX"),
        Arg::token("xx", "XX"),
        Arg::token("gt", "GT"),
        Arg::token("lt", "LT"),
    ],
)
.optional()
.since("7.0.0");

const CONDITION_HISTORY: &[(&str, &str)] =
    &[("7.0.0", "The `NX`, `XX`, `GT` and `LT` options were added.")];

const UPDATE_KEY: &[KeySpec] = &[KeySpec::single(1, keyflag::RW | keyflag::UPDATE)];
const READ_KEY: &[KeySpec] = &[KeySpec::single(1, keyflag::RO | keyflag::ACCESS)];

pub(super) const EXPIRE: CommandSpec = CommandSpec {
    name: "expire",
    summary: "Gives a key a time to live, in seconds.",
    arity: -3,
    flags: flag::WRITE | flag::FAST,
    acl: acl::KEYSPACE,
    key_specs: UPDATE_KEY,
    arguments: &[Arg::key("key", 0), Arg::integer("seconds"), CONDITION],
    history: CONDITION_HISTORY,
    handler: Some(expire),
    ..CommandSpec::BASE
};

pub(super) const PEXPIRE: CommandSpec = CommandSpec {
    name: "pexpire",
    summary: "Gives a key a time to live, in milliseconds.",
    since: "2.6.0",
    arity: -3,
    flags: flag::WRITE | flag::FAST,
    acl: acl::KEYSPACE,
    key_specs: UPDATE_KEY,
    arguments: &[Arg::key("key", 0), Arg::integer("milliseconds"), CONDITION],
    history: CONDITION_HISTORY,
    handler: Some(pexpire),
    ..CommandSpec::BASE
};

pub(super) const EXPIREAT: CommandSpec = CommandSpec {
    name: "expireat",
    summary: "Makes a key expire at a unix time, in seconds.",
    since: "1.2.0",
    arity: -3,
    flags: flag::WRITE | flag::FAST,
    acl: acl::KEYSPACE,
    key_specs: UPDATE_KEY,
    arguments: &[
        Arg::key("key", 0),
        Arg::new("unix-time-seconds", ArgType::UnixTime),
        CONDITION,
    ],
    history: CONDITION_HISTORY,
    handler: Some(expireat),
    ..CommandSpec::BASE
};

pub(super) const PEXPIREAT: CommandSpec = CommandSpec {
    name: "pexpireat",
    summary: "Makes a key expire at a unix time, in milliseconds.",
    since: "2.6.0",
    arity: -3,
    flags: flag::WRITE | flag::FAST,
    acl: acl::KEYSPACE,
    key_specs: UPDATE_KEY,
    arguments: &[
        Arg::key("key", 0),
        Arg::new("unix-time-milliseconds", ArgType::UnixTime),
        CONDITION,
    ],
    history: CONDITION_HISTORY,
    handler: Some(pexpireat),
    ..CommandSpec::BASE
};

const TTL_HISTORY: &[(&str, &str)] = &[("2.8.0", "A missing key is reported as -2.")];

pub(super) const TTL: CommandSpec = CommandSpec {
    name: "ttl",
    summary: "Reports the seconds a key has left to live.",
    arity: 2,
    flags: flag::READONLY | flag::FAST,
    acl: acl::KEYSPACE,
    key_specs: READ_KEY,
    arguments: &[Arg::key("key", 0)],
    history: TTL_HISTORY,
    tips: &["nondeterministic_output"],
    handler: Some(ttl),
    ..CommandSpec::BASE
};

pub(super) const PTTL: CommandSpec = CommandSpec {
    name: "pttl",
    summary: "Reports the milliseconds a key has left to live.",
    since: "2.6.0",
    arity: 2,
    flags: flag::READONLY | flag::FAST,
    acl: acl::KEYSPACE,
    key_specs: READ_KEY,
    arguments: &[Arg::key("key", 0)],
    history: TTL_HISTORY,
    tips: &["nondeterministic_output"],
    handler: Some(pttl),
    ..CommandSpec::BASE
};

pub(super) const EXPIRETIME: CommandSpec = CommandSpec {
    name: "expiretime",
    summary: "Reports the unix time, in seconds, at which a key expires.",
    since: "7.0.0",
    arity: 2,
    flags: flag::READONLY | flag::FAST,
    acl: acl::KEYSPACE,
    key_specs: READ_KEY,
    arguments: &[Arg::key("key", 0)],
    handler: Some(expiretime),
    ..CommandSpec::BASE
};

pub(super) const PEXPIRETIME: CommandSpec = CommandSpec {
    name: "pexpiretime",
    summary: "Reports the unix time, in milliseconds, at which a key expires.",
    since: "7.0.0",
    arity: 2,
    flags: flag::READONLY | flag::FAST,
    acl: acl::KEYSPACE,
    key_specs: READ_KEY,
    arguments: &[Arg::key("key", 0)],
    handler: Some(pexpiretime),
    ..CommandSpec::BASE
};

pub(super) const PERSIST: CommandSpec = CommandSpec {
    name: "persist",
    summary: "Removes a key's time to live, so it never expires.",
    since: "2.2.0",
    arity: 2,
    flags: flag::WRITE | flag::FAST,
    acl: acl::KEYSPACE,
    key_specs: UPDATE_KEY,
    arguments: &[Arg::key("key", 0)],
    handler: Some(persist),
    ..CommandSpec::BASE
};

/// How the time argument is read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Base {
    /// From now (EXPIRE, PEXPIRE): a monotonic deadline.
    Relative,
    /// A unix time (EXPIREAT, PEXPIREAT): a wall deadline.
    Absolute,
}

#[derive(Clone, Copy, Default)]
struct Conditions {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

/// Parses NX/XX/GT/LT from `args[3..]`; writes Redis' error when they are unknown or clash.
fn parse_conditions(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) -> Option<Conditions> {
    let mut conditions = Conditions::default();
    for option in args.iter().skip(3) {
        if is(option, "NX") {
            conditions.nx = true;
        } else if is(option, "XX") {
            conditions.xx = true;
        } else if is(option, "GT") {
            conditions.gt = true;
        } else if is(option, "LT") {
            conditions.lt = true;
        } else {
            let message = format!("ERR Unsupported option {}", String::from_utf8_lossy(option));
            ctx.reply.error(message.as_bytes());
            return None;
        }
    }
    if conditions.nx && (conditions.xx || conditions.gt || conditions.lt) {
        ctx.reply
            .error(b"ERR NX and XX, GT or LT options at the same time are not compatible");
        return None;
    }
    if conditions.gt && conditions.lt {
        ctx.reply
            .error(b"ERR GT and LT options at the same time are not compatible");
        return None;
    }
    Some(conditions)
}

impl Conditions {
    /// Whether a key whose current deadline is `current_ms` (unix ms; `None`: no TTL, which
    /// counts as infinite) may get the deadline `new_ms`.
    fn allow(self, current_ms: Option<i64>, new_ms: i64) -> bool {
        if self.nx && current_ms.is_some() {
            return false;
        }
        if self.xx && current_ms.is_none() {
            return false;
        }
        if self.gt && current_ms.is_none_or(|current| new_ms <= current) {
            return false;
        }
        if self.lt && current_ms.is_some_and(|current| new_ms >= current) {
            return false;
        }
        true
    }
}

fn expire(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    set_expiry(ctx, args, Base::Relative, 1000, "expire");
}

fn pexpire(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    set_expiry(ctx, args, Base::Relative, 1, "pexpire");
}

fn expireat(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    set_expiry(ctx, args, Base::Absolute, 1000, "expireat");
}

fn pexpireat(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    set_expiry(ctx, args, Base::Absolute, 1, "pexpireat");
}

/// The four EXPIRE variants: `unit_ms` is 1000 for seconds, 1 for milliseconds.
fn set_expiry(ctx: &mut Ctx<'_, '_>, args: &[Bytes], base: Base, unit_ms: i64, name: &str) {
    // Redis checks the options before the number.
    let Some(conditions) = parse_conditions(ctx, args) else {
        return;
    };
    let Some(amount) = parse_i64(&args[2]) else {
        ctx.reply.error(err::NOT_INTEGER);
        return;
    };
    let now = ctx.now();
    let invalid = format!("ERR invalid expire time in '{name}' command");
    let Some(amount_ms) = amount.checked_mul(unit_ms) else {
        ctx.reply.error(invalid.as_bytes());
        return;
    };
    // The deadline as unix milliseconds; for a relative TTL, Redis adds the wall time and
    // refuses what overflows, so we refuse the same.
    let when_ms = match base {
        Base::Absolute => amount_ms,
        Base::Relative => match amount_ms.checked_add(now.wall_ms) {
            Some(when) => when,
            None => {
                ctx.reply.error(invalid.as_bytes());
                return;
            }
        },
    };
    let db = ctx.db();
    let Some(current_ms) = ctx
        .keys
        .get_slot(db, &args[1])
        .map(|slot| slot.deadline().map(|deadline| deadline.unix_ms(now)))
    else {
        ctx.reply.integer(0);
        return;
    };
    if !conditions.allow(current_ms, when_ms) {
        ctx.reply.integer(0);
        return;
    }
    // A deadline already reached deletes the key (Redis: `when <= now`), logged as the DEL
    // it was. Not while loading: the key then gets its past deadline, as in Redis, and the
    // logged DEL that followed removes it.
    let passed = when_ms <= now.wall_ms;
    if passed && !now.loading {
        if let Some(old) = ctx.keys.remove(db, &args[1]) {
            lazyfree::free_for(Cause::Expire, old.value);
        }
        ctx.keys.signal_modified(db, &args[1]);
        ctx.notify(notify::GENERIC, "del", &args[1]);
        ctx.reply.integer(1);
        ctx.propagate_with(|| vec![Bytes::from_static(b"DEL"), args[1].clone()]);
        return;
    }
    let deadline = match base {
        Base::Absolute => Some(Deadline::at_wall(when_ms)),
        Base::Relative if passed => Some(Deadline::at_wall(when_ms)),
        Base::Relative => Deadline::after(now, amount_ms),
    };
    let Some(deadline) = deadline else {
        // Unreachable in practice: the monotonic clock is behind the wall clock.
        ctx.reply.error(invalid.as_bytes());
        return;
    };
    ctx.keys.set_deadline(db, &args[1], Some(deadline));
    ctx.keys.signal_modified(db, &args[1]);
    ctx.notify(notify::GENERIC, "expire", &args[1]);
    ctx.reply.integer(1);
    // Logged as PEXPIREAT with the absolute time (conditions kept), as Redis does: a replay
    // later must not move the deadline. PEXPIREAT itself is logged as it came.
    if !(base == Base::Absolute && unit_ms == 1) {
        // The deadline's own unix time: what PEXPIRETIME reports for it (a relative one
        // converts through the fixed offset between the clocks, which can differ by a
        // millisecond from `now.wall_ms + ttl`).
        let logged_ms = deadline.unix_ms(now);
        ctx.propagate_with(|| {
            let mut logged = vec![
                Bytes::from_static(b"PEXPIREAT"),
                args[1].clone(),
                Bytes::from(logged_ms.to_string()),
            ];
            logged.extend(args[3..].iter().cloned());
            logged
        });
    }
}

/// What the TTL family reports.
#[derive(Clone, Copy)]
enum Report {
    RemainingSeconds,
    RemainingMs,
    UnixSeconds,
    UnixMs,
}

fn ttl(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    report_ttl(ctx, args, Report::RemainingSeconds);
}

fn pttl(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    report_ttl(ctx, args, Report::RemainingMs);
}

fn expiretime(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    report_ttl(ctx, args, Report::UnixSeconds);
}

fn pexpiretime(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    report_ttl(ctx, args, Report::UnixMs);
}

/// -2 for a missing key, -1 for a key without TTL, else the time (never below 0), seconds
/// rounded to the nearest as Redis does.
fn report_ttl(ctx: &mut Ctx<'_, '_>, args: &[Bytes], report: Report) {
    let now = ctx.now();
    let db = ctx.db();
    let Some(slot) = ctx.keys.get_slot_untouched(db, &args[1]) else {
        ctx.reply.integer(-2);
        return;
    };
    let Some(deadline) = slot.deadline() else {
        ctx.reply.integer(-1);
        return;
    };
    let ms = match report {
        Report::RemainingSeconds | Report::RemainingMs => deadline.remaining_ms(now),
        Report::UnixSeconds | Report::UnixMs => deadline.unix_ms(now),
    }
    .max(0);
    let value = match report {
        Report::RemainingMs | Report::UnixMs => ms,
        Report::RemainingSeconds | Report::UnixSeconds => ms.saturating_add(500) / 1000,
    };
    ctx.reply.integer(value);
}

fn persist(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let had_deadline = ctx
        .keys
        .get_slot(db, &args[1])
        .is_some_and(|slot| slot.deadline().is_some());
    if !had_deadline {
        ctx.reply.integer(0);
        return;
    }
    ctx.keys.set_deadline(db, &args[1], None);
    ctx.keys.signal_modified(db, &args[1]);
    ctx.notify(notify::GENERIC, "persist", &args[1]);
    ctx.reply.integer(1);
}
