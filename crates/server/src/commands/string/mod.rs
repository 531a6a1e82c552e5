//! String commands (Redis' "string" group), by theme:
//!
//! - [`get`]: GET, GETDEL, GETEX, MGET.
//! - [`set`]: SET, SETNX, SETEX, PSETEX, GETSET, MSET, MSETNX.
//! - [`counters`]: INCR, DECR, INCRBY, DECRBY, INCRBYFLOAT.
//! - [`ranges`]: APPEND, STRLEN, GETRANGE, SUBSTR, SETRANGE.
//! - [`lcs`]: LCS, the longest common subsequence of two strings.
//! - [`compare`]: DELEX, DELIFEQ, DIGEST, and SET's value conditions.
//!
//! Shared here: reading a key as a string (the one place that knows which value types are
//! strings), the option parser SET and GETEX share, and expiry arithmetic.

pub(crate) mod compare;
mod counters;
mod get;
mod lcs;
pub(crate) mod long_double;
mod ranges;
mod set;

use latch_keyspace::{Deadline, Now, Value};
use latch_protocol::Reply;

use super::{err, is, parse_i64};
use crate::spec::CommandSpec;

pub static COMMANDS: &[CommandSpec] = &[
    get::GET,
    get::GETDEL,
    get::GETEX,
    get::MGET,
    set::SET,
    set::SETNX,
    set::SETEX,
    set::PSETEX,
    set::GETSET,
    set::MSET,
    set::MSETNX,
    counters::INCR,
    counters::DECR,
    counters::INCRBY,
    counters::DECRBY,
    counters::INCRBYFLOAT,
    ranges::APPEND,
    ranges::STRLEN,
    ranges::GETRANGE,
    ranges::SUBSTR,
    ranges::SETRANGE,
    lcs::LCS,
    compare::DELEX,
    compare::DELIFEQ,
    compare::DIGEST,
];

/// The bytes of a string value, `None` for any other type (the caller answers WRONGTYPE).
/// Adding a value type means adding its arm here and in [`string_mut`].
fn string_of(value: &Value) -> Option<&Vec<u8>> {
    match value {
        Value::Str(bytes) => Some(bytes),
        _ => None,
    }
}

fn string_mut(value: &mut Value) -> Option<&mut Vec<u8>> {
    match value {
        Value::Str(bytes) => Some(bytes),
        _ => None,
    }
}

/// What GET answers for `value`: its bytes, a null when there is no key, or WRONGTYPE.
/// Returns false after WRONGTYPE (Redis' `getGenericCommand` failing).
fn reply_string(reply: &mut Reply, value: Option<&Value>) -> bool {
    match value {
        None => {
            reply.null();
            true
        }
        Some(value) => match string_of(value) {
            Some(bytes) => {
                reply.bulk(bytes);
                true
            }
            None => {
                reply.error(err::WRONGTYPE);
                false
            }
        },
    }
}

/// Redis' `checkStringLength`: whether a string of `existing + added` bytes stays within
/// `proto-max-bulk-len`; writes the error when it does not.
fn check_string_length(reply: &mut Reply, max_len: u64, existing: u64, added: u64) -> bool {
    match existing.checked_add(added) {
        Some(total) if total <= max_len => true,
        _ => {
            reply.error(b"ERR string exceeds maximum allowed size (proto-max-bulk-len)");
            false
        }
    }
}

/// Options of SET and GETEX, gathered in one flags value (as Redis does) so that each
/// option can check what it conflicts with.
pub(crate) mod opt {
    pub const NX: u16 = 1 << 0;
    pub const XX: u16 = 1 << 1;
    pub const EX: u16 = 1 << 2;
    pub const PX: u16 = 1 << 3;
    pub const KEEPTTL: u16 = 1 << 4;
    pub const GET: u16 = 1 << 5;
    pub const EXAT: u16 = 1 << 6;
    pub const PXAT: u16 = 1 << 7;
    pub const PERSIST: u16 = 1 << 8;
    pub const IFEQ: u16 = 1 << 9;
    pub const IFNE: u16 = 1 << 10;
    pub const IFDEQ: u16 = 1 << 11;
    pub const IFDNE: u16 = 1 << 12;

    /// SET's conditions on the key: at most one of them.
    pub const ANY_CONDITION: u16 = NX | XX | IFEQ | IFNE | IFDEQ | IFDNE;

    /// Every option that sets or clears the TTL.
    pub const ANY_EXPIRY: u16 = EX | PX | EXAT | PXAT | KEEPTTL | PERSIST;
    /// Options whose value is in seconds.
    pub const SECONDS: u16 = EX | EXAT;
    /// Options whose value is relative to now.
    pub const RELATIVE: u16 = EX | PX;
}

/// Which command's options are being parsed: SET accepts NX, XX, GET and KEEPTTL; GETEX
/// accepts PERSIST; both accept EX, PX, EXAT and PXAT.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OptionsOf {
    Set,
    Getex,
}

/// Parsed options: the flags, the argument of EX/PX/EXAT/PXAT when one was given, and
/// SET's value condition (IFEQ & co) with its argument.
struct ExtendedOptions<'a> {
    flags: u16,
    expire: Option<&'a [u8]>,
    condition: Option<compare::Condition<'a>>,
}

/// Parses SET's or GETEX's options. `Err` means `ERR syntax error`: an unknown word, a
/// repeated-but-conflicting option (NX with XX, two different expiry forms, KEEPTTL or
/// PERSIST with an expiry) or an expiry keyword with no value after it. Repeating the same
/// option is allowed (the last value wins), as in Redis.
fn parse_extended<'a>(
    options: &'a [bytes::Bytes],
    of: OptionsOf,
) -> Result<ExtendedOptions<'a>, ()> {
    let mut flags = 0u16;
    let mut expire = None;
    let mut condition = None;
    let mut i = 0;
    while i < options.len() {
        let word = &options[i][..];
        let has_value = i + 1 < options.len();
        // Each expiry form conflicts with every other expiry form (itself excepted).
        let expiry_free_but = |own: u16| flags & (opt::ANY_EXPIRY & !own) == 0;
        let set = of == OptionsOf::Set;
        // Each condition conflicts with every other condition (itself excepted).
        let condition_free_but = |own: u16| flags & (opt::ANY_CONDITION & !own) == 0;
        let value_condition = if set {
            compare::Condition::flag_of(word)
        } else {
            None
        };
        let (flag, takes_value) = if set && is(word, "NX") && condition_free_but(opt::NX) {
            (opt::NX, false)
        } else if set && is(word, "XX") && condition_free_but(opt::XX) {
            (opt::XX, false)
        } else if let Some(kind) =
            value_condition.filter(|kind| condition_free_but(*kind) && has_value)
        {
            condition = Some(compare::Condition {
                kind,
                arg: &options[i + 1][..],
            });
            flags |= kind;
            i += 2;
            continue;
        } else if set && is(word, "GET") {
            (opt::GET, false)
        } else if set && is(word, "KEEPTTL") && expiry_free_but(opt::KEEPTTL) {
            (opt::KEEPTTL, false)
        } else if !set && is(word, "PERSIST") && expiry_free_but(opt::PERSIST) {
            (opt::PERSIST, false)
        } else if is(word, "EX") && expiry_free_but(opt::EX) && has_value {
            (opt::EX, true)
        } else if is(word, "PX") && expiry_free_but(opt::PX) && has_value {
            (opt::PX, true)
        } else if is(word, "EXAT") && expiry_free_but(opt::EXAT) && has_value {
            (opt::EXAT, true)
        } else if is(word, "PXAT") && expiry_free_but(opt::PXAT) && has_value {
            (opt::PXAT, true)
        } else {
            return Err(());
        };
        flags |= flag;
        if takes_value {
            expire = Some(&options[i + 1][..]);
            i += 1;
        }
        i += 1;
    }
    Ok(ExtendedOptions {
        flags,
        expire,
        condition,
    })
}

/// `ERR invalid expire time in '<command>' command`.
fn invalid_expire(reply: &mut Reply, command: &str) {
    reply.error(format!("ERR invalid expire time in '{command}' command").as_bytes());
}

/// Turns an expiry argument into a deadline, as Redis' `getExpireMillisecondsOrReply` does:
/// the value must be a positive integer; seconds must survive the conversion to
/// milliseconds; a relative TTL must not overflow when added to the current unix time in
/// milliseconds (Redis stores it that way; we keep it on the monotonic clock but refuse the
/// same inputs). `flags` holds exactly one of EX/PX/EXAT/PXAT. Writes the error and returns
/// `None` on failure.
fn expire_deadline(
    reply: &mut Reply,
    now: Now,
    flags: u16,
    arg: &[u8],
    command: &str,
) -> Option<Deadline> {
    let Some(value) = parse_i64(arg) else {
        reply.error(err::NOT_INTEGER);
        return None;
    };
    let in_seconds = flags & opt::SECONDS != 0;
    if value <= 0 || (in_seconds && value > i64::MAX / 1000) {
        invalid_expire(reply, command);
        return None;
    }
    let ms = if in_seconds { value * 1000 } else { value };
    let deadline = if flags & opt::RELATIVE != 0 {
        now.wall_ms
            .checked_add(ms)
            .and_then(|_| Deadline::after(now, ms))
    } else {
        Some(Deadline::at_wall(ms))
    };
    if deadline.is_none() {
        invalid_expire(reply, command);
    }
    deadline
}
