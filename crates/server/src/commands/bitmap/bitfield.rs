//! BITFIELD and BITFIELD_RO: signed and unsigned integers of 1 to 64 bits stored at any bit
//! offset of a string.

use bytes::Bytes;
use latch_protocol::Reply;

use super::{bit_offset_arg, string_of, write_bits};
use crate::commands::{err, is, parse_i64, Ctx};
use crate::pubsub::notify;
use crate::spec::{acl, flag, keyflag, Arg, CommandSpec, Group, KeySpec};

const ENCODING_OFFSET: &[Arg] = &[Arg::string("encoding"), Arg::integer("offset")];

pub const BITFIELD: CommandSpec = CommandSpec {
    name: "bitfield",
    group: Group::Bitmap,
    summary: "Reads, writes and increments integers of any width up to 64 bits at arbitrary bit offsets of the string at a key.",
    since: "3.2.0",
    complexity: "O(1) for each subcommand specified",
    arity: -2,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::BITMAP,
    key_specs: &[KeySpec {
        notes: Some("This command allows both access and modification of the key"),
        ..KeySpec::single(
            1,
            keyflag::RW | keyflag::UPDATE | keyflag::ACCESS | keyflag::VARIABLE_FLAGS,
        )
    }],
    arguments: &[
        Arg::key("key", 0),
        Arg::oneof(
            "operation",
            &[
                Arg::block("encoding_offset", ENCODING_OFFSET).with_token("GET"),
                Arg::block(
                    "write",
                    &[
                        Arg::oneof(
                            "wrap_sat_fail",
                            &[
                                Arg::token("wrap", "WRAP"),
                                Arg::token("sat", "SAT"),
                                Arg::token("fail", "FAIL"),
                            ],
                        )
                        .with_token("OVERFLOW")
                        .optional(),
                        Arg::oneof(
                            "write_operation",
                            &[
                                Arg::block(
                                    "encoding_offset_value",
                                    &[
                                        Arg::string("encoding"),
                                        Arg::integer("offset"),
                                        Arg::integer("value"),
                                    ],
                                )
                                .with_token("SET"),
                                Arg::block(
                                    "encoding_offset_increment",
                                    &[
                                        Arg::string("encoding"),
                                        Arg::integer("offset"),
                                        Arg::integer("increment"),
                                    ],
                                )
                                .with_token("INCRBY"),
                            ],
                        ),
                    ],
                ),
            ],
        )
        .multiple()
        .optional(),
    ],
    handler: Some(bitfield),
    ..CommandSpec::BASE
};

pub const BITFIELD_RO: CommandSpec = CommandSpec {
    name: "bitfield_ro",
    group: Group::Bitmap,
    summary: "Reads integers of any width up to 64 bits at arbitrary bit offsets of the string at a key; the read-only form of BITFIELD.",
    since: "6.0.0",
    complexity: "O(1) for each subcommand specified",
    arity: -2,
    flags: flag::READONLY | flag::FAST,
    acl: acl::BITMAP,
    key_specs: &[KeySpec::single(1, keyflag::RO | keyflag::ACCESS)],
    arguments: &[
        Arg::key("key", 0),
        Arg::block("encoding_offset", ENCODING_OFFSET)
            .with_token("GET")
            .optional()
            .multiple()
            .multiple_token(),
    ],
    handler: Some(bitfield_ro),
    ..CommandSpec::BASE
};

#[derive(Clone, Copy, PartialEq, Eq)]
enum OpKind {
    Get,
    Set,
    Incrby,
}

/// What a SET or INCRBY does when the result does not fit the field.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Overflow {
    /// Keep the low bits (two's complement for signed fields).
    Wrap,
    /// Clamp to the field's minimum or maximum.
    Sat,
    /// Leave the field alone and answer a null.
    Fail,
}

#[derive(Clone, Copy)]
struct FieldOp {
    kind: OpKind,
    signed: bool,
    /// Width, 1..=64 (1..=63 unsigned).
    bits: u32,
    /// Offset of the field's first (most significant) bit.
    offset: u64,
    /// SET's value or INCRBY's increment.
    operand: i64,
    overflow: Overflow,
}

const TYPE_ERROR: &[u8] =
    b"ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

/// Parses a field type, `i<bits>` (1 to 64) or `u<bits>` (1 to 63: a u64 could not be
/// returned as a RESP integer): `(signed, bits)`.
fn field_type(arg: &[u8]) -> Option<(bool, u32)> {
    let (signed, max_bits) = match arg.first() {
        Some(b'i') => (true, 64),
        Some(b'u') => (false, 63),
        _ => return None,
    };
    let bits = parse_i64(&arg[1..])?;
    (1..=max_bits)
        .contains(&bits)
        .then_some((signed, bits as u32))
}

/// Parses every operation before anything runs, as Redis does, so that a bad argument
/// anywhere changes nothing. Writes the error and returns `None` on failure.
fn parse_ops(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) -> Option<Vec<FieldOp>> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut i = 2;
    while i < args.len() {
        let word = &args[i][..];
        let remaining = args.len() - i - 1;
        let kind = if is(word, "GET") && remaining >= 2 {
            OpKind::Get
        } else if is(word, "SET") && remaining >= 3 {
            OpKind::Set
        } else if is(word, "INCRBY") && remaining >= 3 {
            OpKind::Incrby
        } else if is(word, "OVERFLOW") && remaining >= 1 {
            let mode = &args[i + 1][..];
            overflow = if is(mode, "WRAP") {
                Overflow::Wrap
            } else if is(mode, "SAT") {
                Overflow::Sat
            } else if is(mode, "FAIL") {
                Overflow::Fail
            } else {
                ctx.reply.error(b"ERR Invalid OVERFLOW type specified");
                return None;
            };
            i += 2;
            continue;
        } else {
            ctx.reply.error(err::SYNTAX);
            return None;
        };
        let Some((signed, bits)) = field_type(&args[i + 1]) else {
            ctx.reply.error(TYPE_ERROR);
            return None;
        };
        let offset = bit_offset_arg(ctx, &args[i + 2], Some(bits))?;
        let operand = if kind == OpKind::Get {
            0
        } else {
            let Some(operand) = parse_i64(&args[i + 3]) else {
                ctx.reply.error(err::NOT_INTEGER);
                return None;
            };
            operand
        };
        ops.push(FieldOp {
            kind,
            signed,
            bits,
            offset,
            operand,
            overflow,
        });
        i += if kind == OpKind::Get { 3 } else { 4 };
    }
    Some(ops)
}

/// Reads the `bits`-wide unsigned field at bit `offset`; bits past the end read as 0.
fn read_field(bytes: &[u8], offset: u64, bits: u32) -> u64 {
    let mut value = 0u64;
    for bit in offset..offset + bits as u64 {
        let byte = usize::try_from(bit >> 3)
            .ok()
            .and_then(|i| bytes.get(i))
            .copied()
            .unwrap_or(0);
        value = (value << 1) | ((byte >> (7 - (bit & 7))) & 1) as u64;
    }
    value
}

/// Writes the low `bits` bits of `value` at bit `offset` (the string was grown to hold them).
fn write_field(bytes: &mut [u8], offset: u64, bits: u32, value: u64) {
    for (k, bit) in (offset..offset + bits as u64).enumerate() {
        let on = (value >> (bits as usize - 1 - k)) & 1 == 1;
        let mask = 0x80u8 >> (bit & 7);
        if let Some(byte) = usize::try_from(bit >> 3)
            .ok()
            .and_then(|i| bytes.get_mut(i))
        {
            if on {
                *byte |= mask;
            } else {
                *byte &= !mask;
            }
        }
    }
}

/// The field's value as a number: sign-extended for signed fields.
fn field_value(raw: u64, signed: bool, bits: u32) -> i128 {
    if signed && bits < 64 && raw & (1 << (bits - 1)) != 0 {
        (raw | (u64::MAX << bits)) as i64 as i128
    } else if signed {
        raw as i64 as i128
    } else {
        raw as i128
    }
}

/// The smallest and largest values a field holds.
fn field_limits(signed: bool, bits: u32) -> (i128, i128) {
    if signed {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    }
}

fn read_op(bytes: &[u8], op: &FieldOp) -> i64 {
    field_value(read_field(bytes, op.offset, op.bits), op.signed, op.bits) as i64
}

/// Runs one SET or INCRBY: its reply (`None` when OVERFLOW FAIL refused it) and whether
/// the field's value changed.
fn write_op(bytes: &mut [u8], op: &FieldOp) -> (Option<i64>, bool) {
    let old = field_value(read_field(bytes, op.offset, op.bits), op.signed, op.bits);
    let wanted = match op.kind {
        OpKind::Incrby => old + op.operand as i128,
        // An unsigned field takes the value's 64-bit pattern, so a negative value is a huge
        // one (SAT clamps it to the maximum, as Redis does).
        _ if op.signed => op.operand as i128,
        _ => op.operand as u64 as i128,
    };
    let (min, max) = field_limits(op.signed, op.bits);
    let new = if (min..=max).contains(&wanted) {
        wanted
    } else {
        match op.overflow {
            Overflow::Wrap => {
                let modulus = 1i128 << op.bits;
                let low = wanted.rem_euclid(modulus);
                if low > max {
                    low - modulus
                } else {
                    low
                }
            }
            Overflow::Sat => {
                if wanted > max {
                    max
                } else {
                    min
                }
            }
            Overflow::Fail => return (None, false),
        }
    };
    write_field(bytes, op.offset, op.bits, new as u64);
    let reply = if op.kind == OpKind::Incrby { new } else { old };
    (Some(reply as i64), new != old)
}

fn reply_results(reply: &mut Reply, results: &[Option<i64>]) {
    reply.array(results.len());
    for result in results {
        match result {
            Some(value) => reply.integer(*value),
            None => reply.null(),
        }
    }
}

fn bitfield(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    bitfield_generic(ctx, args, false);
}

fn bitfield_ro(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    bitfield_generic(ctx, args, true);
}

fn bitfield_generic(ctx: &mut Ctx<'_, '_>, args: &[Bytes], read_only_command: bool) {
    let Some(ops) = parse_ops(ctx, args) else {
        return;
    };
    let db = ctx.db();
    let key = &args[1][..];
    let highest_write_bit = ops
        .iter()
        .filter(|op| op.kind != OpKind::Get)
        .map(|op| op.offset + op.bits as u64 - 1)
        .max();
    let Some(max_bit) = highest_write_bit else {
        // Only reads: a missing key reads as zeros (and is reported as a miss).
        ctx.lookups_read(true);
        let results: Vec<Option<i64>> = match ctx.keys.get(db, key) {
            None => ops.iter().map(|op| Some(read_op(&[], op))).collect(),
            Some(entry) => match string_of(entry) {
                Some(bytes) => ops.iter().map(|op| Some(read_op(bytes, op))).collect(),
                None => {
                    ctx.reply.error(err::WRONGTYPE);
                    return;
                }
            },
        };
        reply_results(ctx.reply, &results);
        return;
    };
    if read_only_command {
        ctx.reply
            .error(b"ERR BITFIELD_RO only supports the GET subcommand");
        return;
    }
    let outcome = write_bits(ctx, key, max_bit, |bytes, grew| {
        let mut changes = 0u64;
        let results: Vec<Option<i64>> = ops
            .iter()
            .map(|op| {
                if op.kind == OpKind::Get {
                    return Some(read_op(bytes, op));
                }
                let (result, changed) = write_op(bytes, op);
                // Creating or growing the string counts as a change for every write that
                // was carried out.
                if result.is_some() && (changed || grew) {
                    changes += 1;
                }
                result
            })
            .collect();
        (results, changes, grew)
    });
    let Some((results, changes, grew)) = outcome else {
        return;
    };
    if changes > 0 || grew {
        ctx.keys.signal_modified(db, key);
        ctx.keys.add_dirty(db, key, changes.saturating_sub(1));
    }
    if changes > 0 {
        ctx.notify(notify::STRING, "setbit", key);
    }
    reply_results(ctx.reply, &results);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(kind: OpKind, signed: bool, bits: u32, operand: i64, overflow: Overflow) -> FieldOp {
        FieldOp {
            kind,
            signed,
            bits,
            offset: 3,
            operand,
            overflow,
        }
    }

    #[test]
    fn field_types() {
        assert_eq!(field_type(b"i64"), Some((true, 64)));
        assert_eq!(field_type(b"u63"), Some((false, 63)));
        assert_eq!(field_type(b"u64"), None);
        assert_eq!(field_type(b"i0"), None);
        assert_eq!(field_type(b"i"), None);
        assert_eq!(field_type(b"x8"), None);
        assert_eq!(field_type(b""), None);
        assert_eq!(field_type(b"i08"), None);
    }

    #[test]
    fn fields_round_trip_at_odd_offsets() {
        let mut bytes = vec![0u8; 10];
        write_field(&mut bytes, 7, 5, 23);
        assert_eq!(&bytes[..2], &[0b0000_0001, 0b0111_0000]);
        assert_eq!(read_field(&bytes, 7, 5), 23);
        write_field(&mut bytes, 5, 64, u64::MAX);
        assert_eq!(read_field(&bytes, 5, 64), u64::MAX);
        assert_eq!(field_value(read_field(&bytes, 5, 64), true, 64), -1);
        assert_eq!(read_field(&bytes, 75, 8), 0);
    }

    #[test]
    fn overflow_modes() {
        let mut bytes = vec![0u8; 10];
        let set_u8 = |v, o| op(OpKind::Set, false, 8, v, o);
        assert_eq!(
            write_op(&mut bytes, &set_u8(300, Overflow::Wrap)),
            (Some(0), true)
        );
        assert_eq!(read_op(&bytes, &set_u8(0, Overflow::Wrap)), 44);
        assert_eq!(
            write_op(&mut bytes, &set_u8(-1, Overflow::Sat)),
            (Some(44), true)
        );
        assert_eq!(read_op(&bytes, &set_u8(0, Overflow::Wrap)), 255);
        assert_eq!(
            write_op(&mut bytes, &set_u8(256, Overflow::Fail)),
            (None, false)
        );
        let incr_i8 = |v, o| op(OpKind::Incrby, true, 8, v, o);
        assert_eq!(
            write_op(&mut bytes, &incr_i8(0, Overflow::Wrap)),
            (Some(-1), false)
        );
        assert_eq!(
            write_op(&mut bytes, &incr_i8(-200, Overflow::Sat)),
            (Some(-128), true)
        );
        assert_eq!(
            write_op(&mut bytes, &incr_i8(-1, Overflow::Wrap)),
            (Some(127), true)
        );
        assert_eq!(
            write_op(&mut bytes, &incr_i8(1, Overflow::Fail)),
            (None, false)
        );
        let incr_i64 = |v, o| op(OpKind::Incrby, true, 64, v, o);
        bytes.fill(0);
        write_field(&mut bytes, 3, 64, i64::MAX as u64);
        assert_eq!(
            write_op(&mut bytes, &incr_i64(1, Overflow::Wrap)),
            (Some(i64::MIN), true)
        );
    }
}
