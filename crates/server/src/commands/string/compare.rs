//! Compare-and-act on strings, the commands the newest servers added so that a lock can be
//! released or extended without a script: Redis 8.4's DELEX and DIGEST (and SET's
//! IFEQ/IFNE/IFDEQ/IFDNE conditions, parsed in `mod.rs` and checked here), and Valkey
//! 9.0's DELIFEQ.
//!
//! A digest is XXH3's 64-bit hash of the value (seed 0), written as 16 lowercase hex
//! digits, as Redis' DIGEST answers. A digest given to IFDEQ/IFDNE is compared by value,
//! so upper-case digits match too; one that is not 16 hex digits is refused, rather than
//! never (IFDEQ) or always (IFDNE) matching.

use bytes::Bytes;
use latch_keyspace::Value;
use latch_protocol::Reply;

use super::{opt, string_of};
use crate::commands::{err, is, Ctx};
use crate::pubsub::notify;
use crate::spec::{acl, flag, keyflag, Arg, CommandSpec, Group, KeySpec};

pub const DELEX: CommandSpec = CommandSpec {
    name: "delex",
    group: Group::String,
    summary: "Deletes a key, or, with a condition, only when its string value (or the value's \
              digest) is or is not the one given.",
    since: "8.4.0",
    complexity: "O(1) for IFEQ/IFNE, O(N) for IFDEQ/IFDNE where N is the length of the string \
                 value.",
    arity: -2,
    flags: flag::WRITE | flag::FAST,
    acl: acl::STRING,
    key_specs: &[KeySpec::single(
        1,
        keyflag::RW | keyflag::DELETE | keyflag::VARIABLE_FLAGS,
    )],
    arguments: &[Arg::key("key", 0), CONDITION],
    handler: Some(delex),
    ..CommandSpec::BASE
};

/// The optional condition of DELEX (and of SET, beside NX and XX).
const CONDITION: Arg = Arg::oneof(
    "condition",
    &[
        Arg::string("ifeq-value").with_token("IFEQ"),
        Arg::string("ifne-value").with_token("IFNE"),
        Arg::string("ifdeq-digest").with_token("IFDEQ"),
        Arg::string("ifdne-digest").with_token("IFDNE"),
    ],
)
.optional();

pub const DELIFEQ: CommandSpec = CommandSpec {
    name: "delifeq",
    group: Group::String,
    summary: "Deletes a key only when it holds the string given (Valkey's lock release).",
    since: "9.0.0",
    complexity: "O(1)",
    arity: 3,
    flags: flag::WRITE | flag::FAST,
    acl: acl::STRING,
    key_specs: &[KeySpec::single(1, keyflag::RW | keyflag::DELETE)],
    arguments: &[Arg::key("key", 0), Arg::string("value")],
    handler: Some(delifeq),
    ..CommandSpec::BASE
};

pub const DIGEST: CommandSpec = CommandSpec {
    name: "digest",
    group: Group::String,
    summary: "Returns the XXH3 digest of the string stored at a key, as 16 hex digits.",
    since: "8.4.0",
    complexity: "O(N) where N is the length of the string value.",
    arity: 2,
    flags: flag::READONLY | flag::FAST,
    acl: acl::STRING,
    key_specs: &[KeySpec::single(1, keyflag::RO | keyflag::ACCESS)],
    arguments: &[Arg::key("key", 0)],
    handler: Some(digest),
    ..CommandSpec::BASE
};

/// The XXH3 64-bit digest of `value`, as DIGEST writes it.
pub fn digest_hex(value: &[u8]) -> [u8; 16] {
    let hash = xxhash_rust::xxh3::xxh3_64(value);
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        let nibble = (hash >> (60 - 4 * i)) & 0xf;
        *byte = b"0123456789abcdef"[nibble as usize];
    }
    out
}

/// A digest argument as a number: exactly 16 hex digits, either case.
fn parse_digest(arg: &[u8]) -> Option<u64> {
    if arg.len() != 16 || !arg.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let text = std::str::from_utf8(arg).ok()?;
    u64::from_str_radix(text, 16).ok()
}

pub const BAD_DIGEST: &[u8] = b"ERR the digest must be 16 hexadecimal digits";

/// A value condition: IFEQ, IFNE, IFDEQ or IFDNE and its argument.
#[derive(Clone, Copy, Debug)]
pub struct Condition<'a> {
    /// One of `opt::IFEQ`, `opt::IFNE`, `opt::IFDEQ`, `opt::IFDNE`.
    pub kind: u16,
    pub arg: &'a [u8],
}

impl<'a> Condition<'a> {
    /// The condition word at `word` (with its argument), if it is one.
    pub fn flag_of(word: &[u8]) -> Option<u16> {
        [
            ("IFEQ", opt::IFEQ),
            ("IFNE", opt::IFNE),
            ("IFDEQ", opt::IFDEQ),
            ("IFDNE", opt::IFDNE),
        ]
        .into_iter()
        .find(|(name, _)| is(word, name))
        .map(|(_, flag)| flag)
    }

    /// Checks a digest argument; writes the error and returns false when it is malformed.
    pub fn validate(&self, reply: &mut Reply) -> bool {
        if self.kind & (opt::IFDEQ | opt::IFDNE) != 0 && parse_digest(self.arg).is_none() {
            reply.error(BAD_DIGEST);
            return false;
        }
        true
    }

    /// Whether a key holding the string `current` (None: no key) passes. IFEQ and IFDEQ
    /// need the key; IFNE and IFDNE pass without one.
    pub fn holds(&self, current: Option<&[u8]>) -> bool {
        let Some(current) = current else {
            return self.kind & (opt::IFNE | opt::IFDNE) != 0;
        };
        let equal = if self.kind & (opt::IFEQ | opt::IFNE) != 0 {
            current == self.arg
        } else {
            let given = parse_digest(self.arg);
            given == Some(xxhash_rust::xxh3::xxh3_64(current))
        };
        equal == (self.kind & (opt::IFEQ | opt::IFDEQ) != 0)
    }
}

fn delex(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let condition = match &args[2..] {
        [] => None,
        [word, arg] => match Condition::flag_of(word) {
            Some(kind) => Some(Condition { kind, arg }),
            None => {
                ctx.reply.error(err::SYNTAX);
                return;
            }
        },
        _ => {
            ctx.reply.error(err::SYNTAX);
            return;
        }
    };
    if let Some(condition) = &condition {
        if !condition.validate(ctx.reply) {
            return;
        }
    }
    delete_if(ctx, &args[1], condition);
}

fn delifeq(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let condition = Condition {
        kind: opt::IFEQ,
        arg: &args[2],
    };
    delete_if(ctx, &args[1], Some(condition));
}

/// Deletes `key` when `condition` (if any) holds for its string value; answers 1 or 0, or
/// WRONGTYPE when a condition meets a value that is not a string.
fn delete_if(ctx: &mut Ctx<'_, '_>, key: &Bytes, condition: Option<Condition<'_>>) {
    let db = ctx.db();
    let passes = match ctx.keys.get(db, key) {
        None => {
            ctx.reply.integer(0);
            return;
        }
        Some(value) => match condition {
            None => true,
            Some(condition) => match string_of(value) {
                Some(current) => condition.holds(Some(current)),
                None => {
                    ctx.reply.error(err::WRONGTYPE);
                    return;
                }
            },
        },
    };
    if !passes || ctx.keys.remove(db, key).is_none() {
        ctx.reply.integer(0);
        return;
    }
    ctx.keys.signal_modified(db, key);
    ctx.notify(notify::GENERIC, "del", key);
    // Replicas and the AOF see a plain DEL: the condition held here.
    ctx.propagate_with(|| vec![Bytes::from_static(b"DEL"), key.clone()]);
    ctx.reply.integer(1);
}

fn digest(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    match ctx.keys.get(db, &args[1]) {
        None => ctx.reply.null(),
        Some(value) => match &*value {
            Value::Str(bytes) => ctx.reply.bulk(&digest_hex(bytes)),
            _ => ctx.reply.error(err::WRONGTYPE),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_match_redis_and_xxh3_reference_values() {
        // DIGEST's example in Redis' documentation, and XXH3's own for "foo".
        assert_eq!(&digest_hex(b"Hello world"), b"b6acb9d84a38ff74");
        assert_eq!(&digest_hex(b"foo"), b"ab6e5f64077e7d8a");
    }

    #[test]
    fn conditions() {
        let eq = Condition {
            kind: opt::IFEQ,
            arg: b"a",
        };
        let ne = Condition {
            kind: opt::IFNE,
            arg: b"a",
        };
        assert!(eq.holds(Some(b"a")) && !eq.holds(Some(b"b")) && !eq.holds(None));
        assert!(!ne.holds(Some(b"a")) && ne.holds(Some(b"b")) && ne.holds(None));
        let upper = digest_hex(b"v").to_ascii_uppercase();
        let deq = Condition {
            kind: opt::IFDEQ,
            arg: &upper,
        };
        let dne = Condition {
            kind: opt::IFDNE,
            arg: &upper,
        };
        assert!(deq.holds(Some(b"v")) && !deq.holds(Some(b"w")) && !deq.holds(None));
        assert!(!dne.holds(Some(b"v")) && dne.holds(Some(b"w")) && dne.holds(None));
        assert!(parse_digest(b"0123456789abcdeg").is_none());
        assert!(parse_digest(b"0123456789abcde").is_none());
        assert!(parse_digest(b"+123456789abcdef").is_none());
    }
}
