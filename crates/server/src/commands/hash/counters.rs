//! Numbers kept in hash fields: HINCRBY, HINCRBYFLOAT.

use bytes::Bytes;
use latch_keyspace::Elem;

use super::hash_for_write;
use crate::commands::string::long_double::{LongDouble, Number};
use crate::commands::{err, int_arg, parse_i64, Ctx};
use crate::pubsub::notify;
use crate::spec::{acl, flag, keyflag, Arg, ArgType, CommandSpec, Group, KeySpec};

pub(super) const HINCRBY: CommandSpec = CommandSpec {
    name: "hincrby",
    group: Group::Hash,
    summary:
        "Adds an integer to the number held in a hash field (0 when absent); replies the result.",
    since: "2.0.0",
    complexity: "O(1)",
    arity: 4,
    flags: flag::WRITE | flag::DENYOOM | flag::FAST,
    acl: acl::HASH,
    key_specs: &[KeySpec::single(
        1,
        keyflag::RW | keyflag::ACCESS | keyflag::UPDATE,
    )],
    arguments: &[
        Arg::key("key", 0),
        Arg::string("field"),
        Arg::integer("increment"),
    ],
    handler: Some(hincrby),
    ..CommandSpec::BASE
};

pub(super) const HINCRBYFLOAT: CommandSpec = CommandSpec {
    name: "hincrbyfloat",
    group: Group::Hash,
    summary: "Adds a decimal number to the number held in a hash field (0 when absent); replies the result.",
    since: "2.6.0",
    complexity: "O(1)",
    arity: 4,
    flags: flag::WRITE | flag::DENYOOM | flag::FAST,
    acl: acl::HASH,
    key_specs: &[KeySpec::single(
        1,
        keyflag::RW | keyflag::ACCESS | keyflag::UPDATE,
    )],
    arguments: &[
        Arg::key("key", 0),
        Arg::string("field"),
        Arg::new("increment", ArgType::Double),
    ],
    handler: Some(hincrbyfloat),
    ..CommandSpec::BASE
};

fn hincrby(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    // Order as in Redis: the increment, then the key's type, then the stored number.
    let Some(increment) = int_arg(ctx, &args[3]) else {
        return;
    };
    let db = ctx.db();
    let key = &args[1][..];
    let Some(hash) = hash_for_write(ctx.keys, db, key) else {
        ctx.reply.error(err::WRONGTYPE);
        return;
    };
    let current = match hash.get(&args[2]) {
        None => 0,
        Some(Elem::Int(n)) => n,
        Some(stored) => match stored.as_bytes().and_then(parse_i64) {
            Some(n) => n,
            None => {
                ctx.reply.error(b"ERR hash value is not an integer");
                return;
            }
        },
    };
    let Some(result) = current.checked_add(increment) else {
        ctx.reply.error(err::OVERFLOW);
        return;
    };
    hash.insert(&args[2], itoa::Buffer::new().format(result).as_bytes());
    ctx.keys.signal_modified(db, key);
    ctx.notify(notify::HASH, "hincrby", key);
    ctx.reply.integer(result);
}

/// Longest number text Redis' `string2ld` accepts (its buffer is 5 KiB with the NUL).
const MAX_LONG_DOUBLE_CHARS: usize = 5 * 1024;

/// Parses a number as Redis' `string2ld` does.
fn parse_number(text: &[u8]) -> Option<Number> {
    if text.is_empty() || text.len() >= MAX_LONG_DOUBLE_CHARS {
        return None;
    }
    LongDouble::parse(text)
}

fn hincrbyfloat(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    // Order as in Redis: the increment (a number, and finite), the key's type, the stored
    // number, the sum.
    let increment = match parse_number(&args[3]) {
        None => {
            ctx.reply.error(err::NOT_FLOAT);
            return;
        }
        Some(Number::Infinite) => {
            ctx.reply.error(b"ERR value is NaN or Infinity");
            return;
        }
        Some(Number::Finite(increment)) => increment,
    };
    let db = ctx.db();
    let key = &args[1][..];
    let Some(hash) = hash_for_write(ctx.keys, db, key) else {
        ctx.reply.error(err::WRONGTYPE);
        return;
    };
    let current = match hash.get(&args[2]) {
        None => Number::Finite(LongDouble::ZERO),
        Some(stored) => match parse_number(&stored.to_vec()) {
            Some(number) => number,
            None => {
                ctx.reply.error(b"ERR hash value is not a float");
                return;
            }
        },
    };
    let sum = match current {
        Number::Finite(current) => current.add(increment),
        // Infinity plus a finite number stays infinite.
        Number::Infinite => None,
    };
    let Some(sum) = sum else {
        ctx.reply
            .error(b"ERR increment would produce NaN or Infinity");
        return;
    };
    let text = sum.to_human();
    ctx.reply.bulk(&text);
    // Logged as the value it stored, as Redis does: a replay then cannot round or format
    // the sum differently.
    hash.insert(&args[2], &text);
    let logged = Bytes::from(text);
    ctx.keys.signal_modified(db, key);
    ctx.notify(notify::HASH, "hincrbyfloat", key);
    ctx.propagate(vec![
        Bytes::from_static(b"HSET"),
        args[1].clone(),
        args[2].clone(),
        logged,
    ]);
}
