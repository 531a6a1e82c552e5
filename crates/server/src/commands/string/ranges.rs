//! Strings as byte arrays: APPEND, STRLEN, GETRANGE, SUBSTR, SETRANGE.

use bytes::Bytes;
use latch_keyspace::Value;
use latch_protocol::Reply;

use super::{check_string_length, string_mut, string_of};
use crate::commands::{err, int_arg, Ctx};
use crate::pubsub::notify;
use crate::spec::{acl, docflag, flag, keyflag, Arg, CommandSpec, Group, KeySpec};

pub const APPEND: CommandSpec = CommandSpec {
    name: "append",
    group: Group::String,
    summary: "Adds bytes to the end of the string at a key (creating it when missing); returns the new length.",
    since: "2.0.0",
    complexity: "O(1). The amortized time complexity is O(1) assuming the appended value is small and the already present value is of any size, since the dynamic string library used by Redis will double the free space available on every reallocation.",
    arity: 3,
    flags: flag::WRITE | flag::DENYOOM | flag::FAST,
    acl: acl::STRING,
    key_specs: &[KeySpec::single(1, keyflag::RW | keyflag::INSERT)],
    arguments: &[Arg::key("key", 0), Arg::string("value")],
    handler: Some(append),
    ..CommandSpec::BASE
};

pub const STRLEN: CommandSpec = CommandSpec {
    name: "strlen",
    group: Group::String,
    summary: "Returns the length in bytes of the string at a key (0 when the key is missing).",
    since: "2.2.0",
    complexity: "O(1)",
    arity: 2,
    flags: flag::READONLY | flag::FAST,
    acl: acl::STRING,
    key_specs: &[KeySpec::single(1, keyflag::RO)],
    arguments: &[Arg::key("key", 0)],
    handler: Some(strlen),
    ..CommandSpec::BASE
};

const RANGE_COMPLEXITY: &str = "O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings.";

pub const GETRANGE: CommandSpec = CommandSpec {
    name: "getrange",
    group: Group::String,
    summary: "Returns the bytes of the string at a key between two offsets (inclusive; negative offsets count from the end).",
    since: "2.4.0",
    complexity: RANGE_COMPLEXITY,
    arity: 4,
    flags: flag::READONLY,
    acl: acl::STRING,
    key_specs: &[KeySpec::single(1, keyflag::RO | keyflag::ACCESS)],
    arguments: &[Arg::key("key", 0), Arg::integer("start"), Arg::integer("end")],
    handler: Some(getrange),
    ..CommandSpec::BASE
};

pub const SUBSTR: CommandSpec = CommandSpec {
    name: "substr",
    summary:
        "Returns the bytes of the string at a key between two offsets; the old name of GETRANGE.",
    since: "1.0.0",
    doc_flags: docflag::DEPRECATED,
    deprecated_since: Some("2.0.0"),
    replaced_by: Some("`GETRANGE`"),
    ..GETRANGE
};

pub const SETRANGE: CommandSpec = CommandSpec {
    name: "setrange",
    group: Group::String,
    summary: "Overwrites part of the string at a key from an offset on, padding with zero bytes; returns the new length.",
    since: "2.2.0",
    complexity: "O(1), not counting the time taken to copy the new string in place. Usually, this string is very small so the amortized complexity is O(1). Otherwise, complexity is O(M) with M being the length of the value argument.",
    arity: 4,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::STRING,
    key_specs: &[KeySpec::single(1, keyflag::RW | keyflag::UPDATE)],
    arguments: &[Arg::key("key", 0), Arg::integer("offset"), Arg::string("value")],
    handler: Some(setrange),
    ..CommandSpec::BASE
};

fn append(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let key = &args[1][..];
    let addition = &args[2][..];
    let max_len = ctx.server.config.proto_max_bulk_len();
    let new_len = match ctx.keys.get_slot(db, key) {
        None => {
            ctx.keys.set(db, key, Value::Str(addition.to_vec()), None);
            addition.len()
        }
        Some(slot) => {
            let Some(bytes) = string_mut(slot.value_mut()) else {
                ctx.reply.error(err::WRONGTYPE);
                return;
            };
            if !check_string_length(
                ctx.reply,
                max_len,
                bytes.len() as u64,
                addition.len() as u64,
            ) {
                return;
            }
            bytes.extend_from_slice(addition);
            let len = bytes.len();
            // Redis appends to its own copy of the string: a plain sds from now on.
            slot.set_raw_string(true);
            len
        }
    };
    // Redis counts even an empty append to an existing key as a change (WATCH sees it).
    ctx.keys.signal_modified(db, key);
    ctx.notify(notify::STRING, "append", key);
    ctx.reply.integer(new_len as i64);
}

fn strlen(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    match ctx.keys.get(db, &args[1]) {
        None => ctx.reply.integer(0),
        Some(entry) => match string_of(entry) {
            Some(bytes) => ctx.reply.integer(bytes.len() as i64),
            None => ctx.reply.error(err::WRONGTYPE),
        },
    }
}

fn getrange(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(start) = int_arg(ctx, &args[2]) else {
        return;
    };
    let Some(end) = int_arg(ctx, &args[3]) else {
        return;
    };
    let db = ctx.db();
    let Some(entry) = ctx.keys.get(db, &args[1]) else {
        ctx.reply.bulk(b"");
        return;
    };
    let Some(bytes) = string_of(entry) else {
        ctx.reply.error(err::WRONGTYPE);
        return;
    };
    match byte_range(bytes.len(), start, end) {
        Some((first, last)) => ctx.reply.bulk(&bytes[first..=last]),
        None => ctx.reply.bulk(b""),
    }
}

/// Redis' GETRANGE arithmetic: the inclusive byte range `start..=end` of a string of `len`
/// bytes, negative offsets counting from the end, clamped to the string; `None` when empty.
fn byte_range(len: usize, start: i64, end: i64) -> Option<(usize, usize)> {
    if start < 0 && end < 0 && start > end {
        return None;
    }
    let len = i64::try_from(len).ok()?;
    let from_end = |offset: i64| {
        if offset < 0 {
            len.saturating_add(offset)
        } else {
            offset
        }
    };
    let start = from_end(start).max(0);
    let end = from_end(end).max(0).min(len - 1);
    if len == 0 || start > end {
        return None;
    }
    Some((start as usize, end as usize))
}

fn setrange(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(offset) = int_arg(ctx, &args[2]) else {
        return;
    };
    if offset < 0 {
        ctx.reply.error(b"ERR offset is out of range");
        return;
    }
    let offset_u64 = offset as u64;
    let db = ctx.db();
    let key = &args[1][..];
    let patch = &args[3][..];
    let max_len = ctx.server.config.proto_max_bulk_len();
    let new_len = match ctx.keys.get_slot(db, key) {
        None => {
            // Writing nothing to a missing key creates nothing.
            if patch.is_empty() {
                ctx.reply.integer(0);
                return;
            }
            if !check_string_length(ctx.reply, max_len, offset_u64, patch.len() as u64) {
                return;
            }
            let mut bytes = Vec::new();
            if !write_at(ctx.reply, &mut bytes, offset_u64, patch) {
                return;
            }
            let new_len = bytes.len();
            ctx.keys.set(db, key, Value::Str(bytes), None);
            ctx.keys.set_raw_string(db, key, true);
            new_len
        }
        Some(slot) => {
            let Some(bytes) = string_mut(slot.value_mut()) else {
                ctx.reply.error(err::WRONGTYPE);
                return;
            };
            if patch.is_empty() {
                ctx.reply.integer(bytes.len() as i64);
                return;
            }
            if !check_string_length(ctx.reply, max_len, offset_u64, patch.len() as u64) {
                return;
            }
            if !write_at(ctx.reply, bytes, offset_u64, patch) {
                return;
            }
            let len = bytes.len();
            slot.set_raw_string(true);
            len
        }
    };
    ctx.keys.signal_modified(db, key);
    ctx.notify(notify::STRING, "setrange", key);
    ctx.reply.integer(new_len as i64);
}

/// Copies `patch` into `bytes` at `offset`, growing it with zero bytes as needed. The
/// length was checked against proto-max-bulk-len; an allocation that still fails gets
/// Redis' out-of-memory error instead of aborting the server.
fn write_at(reply: &mut Reply, bytes: &mut Vec<u8>, offset: u64, patch: &[u8]) -> bool {
    let (Ok(offset), Some(end)) = (
        usize::try_from(offset),
        (offset as usize).checked_add(patch.len()),
    ) else {
        reply.error(b"ERR string exceeds maximum allowed size (proto-max-bulk-len)");
        return false;
    };
    if end > bytes.len() {
        if bytes.try_reserve_exact(end - bytes.len()).is_err() {
            reply.error(b"OOM command not allowed when used memory > 'maxmemory'.");
            return false;
        }
        bytes.resize(end, 0);
    }
    bytes[offset..end].copy_from_slice(patch);
    true
}
