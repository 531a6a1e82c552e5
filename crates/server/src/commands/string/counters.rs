//! Strings as numbers: INCR, DECR, INCRBY, DECRBY, INCRBYFLOAT.

use bytes::Bytes;
use latch_keyspace::Value;

use super::long_double::{LongDouble, Number};
use super::string_of;
use crate::commands::{err, int_arg, parse_i64, Ctx};
use crate::pubsub::notify;
use crate::spec::{acl, flag, keyflag, Arg, ArgType, CommandSpec, Group, KeySpec};

const COUNTER_KEY: &[KeySpec] = &[KeySpec::single(
    1,
    keyflag::RW | keyflag::ACCESS | keyflag::UPDATE,
)];

pub const INCR: CommandSpec = CommandSpec {
    name: "incr",
    group: Group::String,
    summary: "Adds one to the integer stored at a key (a missing key counts as 0).",
    since: "1.0.0",
    complexity: "O(1)",
    arity: 2,
    flags: flag::WRITE | flag::DENYOOM | flag::FAST,
    acl: acl::STRING,
    key_specs: COUNTER_KEY,
    arguments: &[Arg::key("key", 0)],
    handler: Some(incr),
    ..CommandSpec::BASE
};

pub const DECR: CommandSpec = CommandSpec {
    name: "decr",
    summary: "Subtracts one from the integer stored at a key (a missing key counts as 0).",
    handler: Some(decr),
    ..INCR
};

pub const INCRBY: CommandSpec = CommandSpec {
    name: "incrby",
    summary: "Adds an integer to the integer stored at a key (a missing key counts as 0).",
    arity: 3,
    arguments: &[Arg::key("key", 0), Arg::integer("increment")],
    handler: Some(incrby),
    ..INCR
};

pub const DECRBY: CommandSpec = CommandSpec {
    name: "decrby",
    summary: "Subtracts an integer from the integer stored at a key (a missing key counts as 0).",
    arity: 3,
    arguments: &[Arg::key("key", 0), Arg::integer("decrement")],
    handler: Some(decrby),
    ..INCR
};

pub const INCRBYFLOAT: CommandSpec = CommandSpec {
    name: "incrbyfloat",
    summary:
        "Adds a floating-point number to the number stored at a key (a missing key counts as 0).",
    since: "2.6.0",
    arity: 3,
    arguments: &[Arg::key("key", 0), Arg::new("increment", ArgType::Double)],
    handler: Some(incrbyfloat),
    ..INCR
};

fn incr(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    add_integer(ctx, &args[1], 1);
}

fn decr(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    add_integer(ctx, &args[1], -1);
}

fn incrby(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(increment) = int_arg(ctx, &args[2]) else {
        return;
    };
    add_integer(ctx, &args[1], increment);
}

fn decrby(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(decrement) = int_arg(ctx, &args[2]) else {
        return;
    };
    // -i64::MIN does not exist.
    let Some(increment) = decrement.checked_neg() else {
        ctx.reply.error(b"ERR decrement would overflow");
        return;
    };
    add_integer(ctx, &args[1], increment);
}

/// Adds `increment` to the integer at `key`, keeping its TTL; a missing key starts at 0.
fn add_integer(ctx: &mut Ctx<'_, '_>, key: &[u8], increment: i64) {
    let db = ctx.db();
    let result = match ctx.keys.get_slot(db, key) {
        None => {
            // A missing key counts as 0, and 0 + increment cannot overflow.
            let value = increment;
            ctx.keys.set(
                db,
                key,
                Value::Str(itoa::Buffer::new().format(value).as_bytes().to_vec()),
                None,
            );
            value
        }
        Some(slot) => {
            let Some(bytes) = super::string_mut(slot.value_mut()) else {
                ctx.reply.error(err::WRONGTYPE);
                return;
            };
            let Some(current) = parse_i64(bytes) else {
                ctx.reply.error(err::NOT_INTEGER);
                return;
            };
            let Some(value) = current.checked_add(increment) else {
                ctx.reply.error(err::OVERFLOW);
                return;
            };
            // Rewritten in place: the TTL and the entry stay; the encoding is the new
            // number's, as Redis makes a new integer object.
            bytes.clear();
            bytes.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
            slot.set_raw_string(false);
            value
        }
    };
    ctx.keys.signal_modified(db, key);
    ctx.notify(notify::STRING, "incrby", key);
    ctx.reply.integer(result);
}

fn incrbyfloat(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let key = &args[1][..];
    let entry = ctx.keys.get(db, key);
    // Order as in Redis: type, then the stored number, then the increment.
    let current = match &entry {
        None => Some(Number::Finite(LongDouble::ZERO)),
        Some(entry) => match string_of(entry) {
            None => {
                ctx.reply.error(err::WRONGTYPE);
                return;
            }
            Some(bytes) => parse_number(bytes),
        },
    };
    let (Some(current), Some(increment)) = (current, parse_number(&args[2])) else {
        ctx.reply.error(err::NOT_FLOAT);
        return;
    };
    let sum = match (current, increment) {
        (Number::Finite(a), Number::Finite(b)) => a.add(b),
        // Anything plus an infinity is infinite or NaN.
        _ => None,
    };
    let Some(sum) = sum else {
        ctx.reply
            .error(b"ERR increment would produce NaN or Infinity");
        return;
    };
    let text = sum.to_human();
    ctx.reply.bulk(&text);
    // Logged as the value it stored (keeping the TTL), as Redis does: a replay then cannot
    // round or format the sum differently.
    let logged = Bytes::from(text.clone());
    match entry {
        // Rewritten in place: the TTL stays, as with Redis' dbOverwrite.
        Some(value) => *value = Value::Str(text),
        None => {
            ctx.keys.set(db, key, Value::Str(text), None);
        }
    }
    ctx.keys.signal_modified(db, key);
    ctx.notify(notify::STRING, "incrbyfloat", key);
    ctx.propagate(vec![
        Bytes::from_static(b"SET"),
        args[1].clone(),
        logged,
        Bytes::from_static(b"KEEPTTL"),
    ]);
}

/// Longest number text Redis' `string2ld` accepts (its buffer is 5 KiB with the NUL).
const MAX_LONG_DOUBLE_CHARS: usize = 5 * 1024;

/// Parses a number as Redis' `string2ld` does (see [`LongDouble::parse`]).
fn parse_number(text: &[u8]) -> Option<Number> {
    if text.is_empty() || text.len() >= MAX_LONG_DOUBLE_CHARS {
        return None;
    }
    LongDouble::parse(text)
}
