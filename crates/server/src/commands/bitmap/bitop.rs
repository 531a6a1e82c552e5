//! BITOP: bitwise AND, OR, XOR and NOT of strings into a destination key.

use bytes::Bytes;
use latch_keyspace::Value;

use super::string_of;
use crate::commands::{err, is, Ctx};
use crate::pubsub::notify;
use crate::spec::{acl, flag, keyflag, Arg, CommandSpec, Group, KeySpec};

pub const BITOP: CommandSpec = CommandSpec {
    name: "bitop",
    group: Group::Bitmap,
    summary: "Combines strings bit by bit (AND, OR, XOR, or NOT of one string) and stores the result at a destination key; returns its length.",
    since: "2.6.0",
    complexity: "O(N)",
    arity: -4,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::BITMAP,
    key_specs: &[
        KeySpec::single(2, keyflag::OW | keyflag::UPDATE),
        KeySpec::to_end(3, 1, keyflag::RO | keyflag::ACCESS),
    ],
    arguments: &[
        Arg::string("operation"),
        Arg::key("destkey", 0),
        Arg::key("key", 1).multiple(),
    ],
    handler: Some(bitop),
    ..CommandSpec::BASE
};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Operation {
    And,
    Or,
    Xor,
    Not,
}

fn bitop(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let operation = match &args[1][..] {
        word if is(word, "AND") => Operation::And,
        word if is(word, "OR") => Operation::Or,
        word if is(word, "XOR") => Operation::Xor,
        word if is(word, "NOT") => Operation::Not,
        _ => {
            ctx.reply.error(err::SYNTAX);
            return;
        }
    };
    if operation == Operation::Not && args.len() != 4 {
        ctx.reply
            .error(b"ERR BITOP NOT must be called with a single source key.");
        return;
    }
    let db = ctx.db();
    // The sources are read (a miss is reported).
    ctx.lookups_read(true);
    // Sources are folded into the result one at a time; a missing key (or the part of a
    // source past its end) counts as zero bytes.
    let mut result: Vec<u8> = Vec::new();
    for (index, key) in args[3..].iter().enumerate() {
        let source: &[u8] = match ctx.keys.get(db, key) {
            None => &[],
            Some(entry) => match string_of(entry) {
                Some(bytes) => bytes,
                None => {
                    ctx.reply.error(err::WRONGTYPE);
                    return;
                }
            },
        };
        if index == 0 {
            if result.try_reserve_exact(source.len()).is_err() {
                ctx.reply.error(super::OOM);
                return;
            }
            result.extend_from_slice(source);
            if operation == Operation::Not {
                result.iter_mut().for_each(|byte| *byte = !*byte);
            }
            continue;
        }
        if source.len() > result.len() {
            if result
                .try_reserve_exact(source.len() - result.len())
                .is_err()
            {
                ctx.reply.error(super::OOM);
                return;
            }
            result.resize(source.len(), 0);
        }
        match operation {
            Operation::And => {
                let common = source.len();
                result[..common]
                    .iter_mut()
                    .zip(source)
                    .for_each(|(out, byte)| *out &= byte);
                result[common..].fill(0);
            }
            Operation::Or => result
                .iter_mut()
                .zip(source)
                .for_each(|(out, byte)| *out |= byte),
            Operation::Xor => result
                .iter_mut()
                .zip(source)
                .for_each(|(out, byte)| *out ^= byte),
            Operation::Not => {}
        }
    }
    let dest = &args[2][..];
    let len = result.len();
    ctx.lookups_read(false);
    if len == 0 {
        // An empty result deletes the destination rather than storing an empty string.
        if ctx.keys.remove_stored(db, dest) {
            ctx.keys.signal_modified(db, dest);
            ctx.notify(notify::GENERIC, "del", dest);
        }
    } else {
        ctx.keys.set(db, dest, Value::Str(result), None);
        // Redis stores the result as a plain sds, whatever its length.
        ctx.keys.set_raw_string(db, dest, true);
        ctx.keys.signal_modified(db, dest);
        ctx.notify(notify::STRING, "set", dest);
    }
    ctx.reply.integer(len as i64);
}
