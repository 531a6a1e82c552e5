//! Single bits and bit ranges: SETBIT, GETBIT, BITCOUNT, BITPOS.

use bytes::Bytes;
use latch_protocol::Reply;

use super::{bit_offset_arg, string_of, write_bits};
use crate::commands::{err, int_arg, is, parse_i64, Ctx};
use crate::pubsub::notify;
use crate::spec::{acl, flag, keyflag, Arg, CommandSpec, Group, KeySpec};

pub const SETBIT: CommandSpec = CommandSpec {
    name: "setbit",
    group: Group::Bitmap,
    summary: "Sets or clears one bit of the string at a key (growing it with zero bytes as needed); returns the bit's previous value.",
    since: "2.2.0",
    complexity: "O(1)",
    arity: 4,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::BITMAP,
    key_specs: &[KeySpec::single(
        1,
        keyflag::RW | keyflag::ACCESS | keyflag::UPDATE,
    )],
    arguments: &[
        Arg::key("key", 0),
        Arg::integer("offset"),
        Arg::integer("value"),
    ],
    handler: Some(setbit),
    ..CommandSpec::BASE
};

pub const GETBIT: CommandSpec = CommandSpec {
    name: "getbit",
    group: Group::Bitmap,
    summary:
        "Returns one bit of the string at a key (0 beyond its end or when the key is missing).",
    since: "2.2.0",
    complexity: "O(1)",
    arity: 3,
    flags: flag::READONLY | flag::FAST,
    acl: acl::BITMAP,
    key_specs: &[KeySpec::single(1, keyflag::RO | keyflag::ACCESS)],
    arguments: &[Arg::key("key", 0), Arg::integer("offset")],
    handler: Some(getbit),
    ..CommandSpec::BASE
};

const INDEX_UNIT: Arg = Arg::oneof(
    "index_unit",
    &[Arg::token("byte", "BYTE"), Arg::token("bit", "BIT")],
)
.optional()
.since("7.0.0");

const UNIT_HISTORY: &[(&str, &str)] = &[(
    "7.0.0",
    "The range may be given in bits with the `BIT` unit (`BYTE` is the default).",
)];

pub const BITCOUNT: CommandSpec = CommandSpec {
    name: "bitcount",
    group: Group::Bitmap,
    summary:
        "Counts the bits set to 1 in the string at a key, optionally within a byte or bit range.",
    since: "2.6.0",
    complexity: "O(N)",
    arity: -2,
    flags: flag::READONLY,
    acl: acl::BITMAP,
    key_specs: &[KeySpec::single(1, keyflag::RO | keyflag::ACCESS)],
    arguments: &[
        Arg::key("key", 0),
        Arg::block(
            "index",
            &[Arg::integer("start"), Arg::integer("end"), INDEX_UNIT],
        )
        .optional(),
    ],
    history: UNIT_HISTORY,
    handler: Some(bitcount),
    ..CommandSpec::BASE
};

pub const BITPOS: CommandSpec = CommandSpec {
    name: "bitpos",
    group: Group::Bitmap,
    summary: "Returns the position of the first bit set to 1 (or 0) in the string at a key, optionally within a byte or bit range.",
    since: "2.8.7",
    complexity: "O(N)",
    arity: -3,
    flags: flag::READONLY,
    acl: acl::BITMAP,
    key_specs: &[KeySpec::single(1, keyflag::RO | keyflag::ACCESS)],
    arguments: &[
        Arg::key("key", 0),
        Arg::integer("bit"),
        Arg::block(
            "index",
            &[
                Arg::integer("start"),
                Arg::block("end_index", &[Arg::integer("end"), INDEX_UNIT]).optional(),
            ],
        )
        .optional(),
    ],
    history: UNIT_HISTORY,
    handler: Some(bitpos),
    ..CommandSpec::BASE
};

const BIT_VALUE_ERROR: &[u8] = b"ERR bit is not an integer or out of range";

/// The mask selecting bit `offset` within its byte (bit 0 is the most significant).
fn bit_mask(offset: u64) -> u8 {
    0x80 >> (offset & 7)
}

fn setbit(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(offset) = bit_offset_arg(ctx, &args[2], None) else {
        return;
    };
    let on = match parse_i64(&args[3]) {
        Some(value @ (0 | 1)) => value == 1,
        _ => {
            ctx.reply.error(BIT_VALUE_ERROR);
            return;
        }
    };
    let key = &args[1][..];
    let outcome = write_bits(ctx, key, offset, |bytes, grew| {
        let mask = bit_mask(offset);
        let Some(byte) = usize::try_from(offset >> 3)
            .ok()
            .and_then(|i| bytes.get_mut(i))
        else {
            return (false, grew);
        };
        let was_on = *byte & mask != 0;
        if on {
            *byte |= mask;
        } else {
            *byte &= !mask;
        }
        (was_on, grew || was_on != on)
    });
    let Some((was_on, changed)) = outcome else {
        return;
    };
    if changed {
        let db = ctx.db();
        ctx.keys.signal_modified(db, key);
        ctx.notify(notify::STRING, "setbit", key);
    }
    ctx.reply.integer(was_on as i64);
}

fn getbit(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(offset) = bit_offset_arg(ctx, &args[2], None) else {
        return;
    };
    let db = ctx.db();
    let Some(entry) = ctx.keys.get(db, &args[1]) else {
        ctx.reply.integer(0);
        return;
    };
    let Some(bytes) = string_of(entry) else {
        ctx.reply.error(err::WRONGTYPE);
        return;
    };
    let on = usize::try_from(offset >> 3)
        .ok()
        .and_then(|i| bytes.get(i))
        .is_some_and(|byte| byte & bit_mask(offset) != 0);
    ctx.reply.integer(on as i64);
}

/// Parses the BIT|BYTE unit argument: whether indexes count bits. Writes a syntax error
/// for anything else.
fn unit_is_bit(reply: &mut Reply, arg: &[u8]) -> Option<bool> {
    if is(arg, "BIT") {
        Some(true)
    } else if is(arg, "BYTE") {
        Some(false)
    } else {
        reply.error(err::SYNTAX);
        None
    }
}

/// An integer argument, or `ERR value is not an integer` written to `reply`.
fn integer(reply: &mut Reply, arg: &[u8]) -> Option<i64> {
    let parsed = parse_i64(arg);
    if parsed.is_none() {
        reply.error(err::NOT_INTEGER);
    }
    parsed
}

/// Redis' index arithmetic for BITCOUNT and BITPOS over `total` units (bytes or bits):
/// negative indexes count from the end, then both are clamped into the string. Returns the
/// inclusive range of bits it covers, or `None` when it is empty.
fn bit_range(total_bytes: usize, start: i64, end: i64, in_bits: bool) -> Option<(u64, u64)> {
    let total_bytes = i64::try_from(total_bytes).ok()?;
    let total = if in_bits {
        total_bytes * 8
    } else {
        total_bytes
    };
    let from_end = |index: i64| if index < 0 { total + index } else { index };
    let start = from_end(start).max(0);
    let end = from_end(end).max(0).min(total - 1);
    if start > end {
        return None;
    }
    let (start, end) = (start as u64, end as u64);
    Some(if in_bits {
        (start, end)
    } else {
        (start * 8, end * 8 + 7)
    })
}

/// The bits of byte number `index` that lie within bits `first..=last`.
fn byte_mask(index: u64, first: u64, last: u64) -> u8 {
    let mut mask = 0xffu8;
    if index == first >> 3 {
        mask &= 0xff >> (first & 7);
    }
    if index == last >> 3 {
        mask &= 0xff << (7 - (last & 7));
    }
    mask
}

/// Number of bits set in `bytes`, eight bytes at a time.
fn popcount(bytes: &[u8]) -> u64 {
    let mut words = bytes.chunks_exact(8);
    let mut count: u64 = words
        .by_ref()
        .map(|word| {
            let mut buf = [0u8; 8];
            buf.copy_from_slice(word);
            u64::from_ne_bytes(buf).count_ones() as u64
        })
        .sum();
    count += words
        .remainder()
        .iter()
        .map(|b| b.count_ones() as u64)
        .sum::<u64>();
    count
}

/// Number of bits set among bits `first..=last` of `bytes` (which holds them all).
fn count_bits(bytes: &[u8], first: u64, last: u64) -> u64 {
    let (first_byte, last_byte) = (first >> 3, last >> 3);
    let Some(span) = bytes.get(first_byte as usize..=last_byte as usize) else {
        return 0;
    };
    let mut count = popcount(span);
    // Take back the bits of the edge bytes that fall outside the range.
    for index in [first_byte, last_byte] {
        let outside = span[(index - first_byte) as usize] & !byte_mask(index, first, last);
        count -= outside.count_ones() as u64;
        if first_byte == last_byte {
            break;
        }
    }
    count
}

/// The first bit among bits `first..=last` of `bytes` (which holds them all) equal to `bit`.
fn find_bit(bytes: &[u8], bit: bool, first: u64, last: u64) -> Option<u64> {
    let (first_byte, last_byte) = (first >> 3, last >> 3);
    let span = bytes.get(first_byte as usize..=last_byte as usize)?;
    // Bytes made of nothing but the other bit value are skipped whole.
    let skip = if bit { 0x00 } else { 0xff };
    let mut position = 0usize;
    while position < span.len() {
        let index = first_byte + position as u64;
        let interior = index != first_byte && index != last_byte;
        if interior {
            let interior_end = span.len() - 1;
            match span[position..interior_end].iter().position(|&b| b != skip) {
                Some(step) => position += step,
                None => {
                    position = interior_end;
                    continue;
                }
            }
        }
        let index = first_byte + position as u64;
        let byte = span[position];
        let wanted = if bit { byte } else { !byte } & byte_mask(index, first, last);
        if wanted != 0 {
            return Some(index * 8 + wanted.leading_zeros() as u64);
        }
        position += 1;
    }
    None
}

fn bitcount(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let Some(entry) = ctx.keys.get(db, &args[1]) else {
        ctx.reply.integer(0);
        return;
    };
    let Some(bytes) = string_of(entry) else {
        ctx.reply.error(err::WRONGTYPE);
        return;
    };
    let reply = &mut *ctx.reply;
    let range = match args.len() {
        2 => bit_range(bytes.len(), 0, -1, false),
        4 | 5 => {
            let Some(start) = integer(reply, &args[2]) else {
                return;
            };
            let Some(end) = integer(reply, &args[3]) else {
                return;
            };
            // Both counted from the end and in the wrong order: empty whatever the unit.
            if start < 0 && end < 0 && start > end {
                reply.integer(0);
                return;
            }
            let in_bits = match args.get(4) {
                Some(unit) => match unit_is_bit(reply, unit) {
                    Some(in_bits) => in_bits,
                    None => return,
                },
                None => false,
            };
            bit_range(bytes.len(), start, end, in_bits)
        }
        _ => {
            reply.error(err::SYNTAX);
            return;
        }
    };
    let count = range.map_or(0, |(first, last)| count_bits(bytes, first, last));
    reply.integer(count as i64);
}

fn bitpos(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(bit) = int_arg(ctx, &args[2]) else {
        return;
    };
    if bit != 0 && bit != 1 {
        ctx.reply.error(b"ERR The bit argument must be 1 or 0.");
        return;
    }
    let bit = bit == 1;
    let db = ctx.db();
    // A missing key is an endless run of zero bits.
    let Some(entry) = ctx.keys.get(db, &args[1]) else {
        ctx.reply.integer(if bit { -1 } else { 0 });
        return;
    };
    let Some(bytes) = string_of(entry) else {
        ctx.reply.error(err::WRONGTYPE);
        return;
    };
    let reply = &mut *ctx.reply;
    let (range, end_given) = match args.len() {
        3 => (bit_range(bytes.len(), 0, -1, false), false),
        4..=6 => {
            let Some(start) = integer(reply, &args[3]) else {
                return;
            };
            // Redis checks the unit before parsing the end.
            let in_bits = match args.get(5) {
                Some(unit) => match unit_is_bit(reply, unit) {
                    Some(in_bits) => in_bits,
                    None => return,
                },
                None => false,
            };
            let end = match args.get(4) {
                Some(end) => match integer(reply, end) {
                    Some(end) => end,
                    None => return,
                },
                None => -1,
            };
            (bit_range(bytes.len(), start, end, in_bits), args.len() >= 5)
        }
        _ => {
            reply.error(err::SYNTAX);
            return;
        }
    };
    let Some((first, last)) = range else {
        // An empty range holds neither a 0 nor a 1.
        reply.integer(-1);
        return;
    };
    let position = match find_bit(bytes, bit, first, last) {
        Some(position) => position as i64,
        // Without an explicit end the string counts as padded with zeros on the right, so
        // the first clear bit is the one just past the range.
        None if !bit && !end_given => (last + 1) as i64,
        None => -1,
    };
    reply.integer(position);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_in_bytes_and_bits() {
        assert_eq!(bit_range(3, 0, -1, false), Some((0, 23)));
        assert_eq!(bit_range(3, 1, 1, false), Some((8, 15)));
        assert_eq!(bit_range(3, 5, 30, true), Some((5, 23)));
        assert_eq!(bit_range(3, -100, -1, true), Some((0, 23)));
        assert_eq!(bit_range(0, 0, -1, false), None);
        assert_eq!(bit_range(3, 2, 1, false), None);
        assert_eq!(bit_range(3, i64::MIN, i64::MAX, true), Some((0, 23)));
    }

    #[test]
    fn counting_and_finding_bits() {
        let bytes = [0b0001_0000u8, 0xff, 0x00, 0b1000_0001];
        assert_eq!(count_bits(&bytes, 0, 31), 11);
        assert_eq!(count_bits(&bytes, 3, 3), 1);
        assert_eq!(count_bits(&bytes, 4, 9), 2);
        assert_eq!(find_bit(&bytes, true, 0, 31), Some(3));
        assert_eq!(find_bit(&bytes, true, 4, 7), None);
        assert_eq!(find_bit(&bytes, true, 17, 31), Some(24));
        assert_eq!(find_bit(&bytes, false, 8, 15), None);
        assert_eq!(find_bit(&bytes, false, 8, 31), Some(16));
        assert_eq!(find_bit(&bytes, true, 25, 31), Some(31));
        let zeros = vec![0u8; 100];
        assert_eq!(find_bit(&zeros, true, 0, 799), None);
        assert_eq!(find_bit(&zeros, false, 13, 799), Some(13));
    }
}
