//! Bitmap commands (Redis' "bitmap" group): strings seen as arrays of bits, bit 0 being the
//! most significant bit of the first byte.
//!
//! - [`bits`]: SETBIT, GETBIT, BITCOUNT and BITPOS.
//! - [`bitop`]: BITOP, the bitwise AND, OR, XOR and NOT of strings.
//! - [`bitfield`]: BITFIELD and BITFIELD_RO.
//!
//! Shared here: reading a key as a string, parsing bit offsets, and growing a string so
//! that a bit can be written.

mod bitfield;
mod bitop;
mod bits;

use latch_keyspace::Value;
use latch_protocol::Reply;

use super::{err, parse_i64, Ctx};
use crate::spec::CommandSpec;

pub static COMMANDS: &[CommandSpec] = &[
    bits::SETBIT,
    bits::GETBIT,
    bits::BITCOUNT,
    bits::BITPOS,
    bitop::BITOP,
    bitfield::BITFIELD,
    bitfield::BITFIELD_RO,
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

const BIT_OFFSET_ERROR: &[u8] = b"ERR bit offset is not an integer or out of range";

/// Parses a bit offset as Redis' `getBitOffsetFromArgument` does: a strict non-negative
/// integer whose byte (offset / 8) lies below `proto-max-bulk-len`. With `field_bits`
/// (BITFIELD), `#N` means the N-th field of that width, i.e. bit N * width. Writes the
/// error and returns `None` when the offset is refused.
fn bit_offset_arg(ctx: &mut Ctx<'_, '_>, arg: &[u8], field_bits: Option<u32>) -> Option<u64> {
    let (digits, multiplier) = match (arg.first(), field_bits) {
        (Some(b'#'), Some(bits)) => (&arg[1..], bits as i64),
        _ => (arg, 1),
    };
    // Redis multiplies in a C `long long`; wrapping keeps the same outcome for huge inputs.
    let offset = parse_i64(digits).map(|n| n.wrapping_mul(multiplier));
    let max_len = ctx.server.config.proto_max_bulk_len();
    match offset {
        Some(offset) if offset >= 0 && ((offset as u64) >> 3) < max_len => Some(offset as u64),
        _ => {
            ctx.reply.error(BIT_OFFSET_ERROR);
            None
        }
    }
}

/// Makes `bytes` at least `len` bytes long by appending zero bytes. Returns whether it grew,
/// or `Err` (with the error written) when the memory cannot be had, so that a huge offset
/// answers an error instead of aborting the server.
fn grow_zeroed(reply: &mut Reply, bytes: &mut Vec<u8>, len: u64) -> Result<bool, ()> {
    let Ok(len) = usize::try_from(len) else {
        reply.error(OOM);
        return Err(());
    };
    if len <= bytes.len() {
        return Ok(false);
    }
    if bytes.try_reserve_exact(len - bytes.len()).is_err() {
        reply.error(OOM);
        return Err(());
    }
    bytes.resize(len, 0);
    Ok(true)
}

const OOM: &[u8] = b"OOM command not allowed when used memory > 'maxmemory'.";

/// Redis' `lookupStringForBitCommand`: finds the string at `key` (creating an empty one when
/// missing), grows it with zero bytes so that bit `max_bit` exists, and runs `write` on it.
/// `write` gets the bytes and whether the key was created or grew (a change in itself).
/// Returns `None` after writing WRONGTYPE or an allocation error; the key is left untouched
/// then. Signalling the change is the caller's business.
fn write_bits<R>(
    ctx: &mut Ctx<'_, '_>,
    key: &[u8],
    max_bit: u64,
    write: impl FnOnce(&mut Vec<u8>, bool) -> R,
) -> Option<R> {
    let db = ctx.db();
    let needed_len = (max_bit >> 3) + 1;
    match ctx.keys.get_slot(db, key) {
        Some(slot) => {
            let Some(bytes) = string_mut(slot.value_mut()) else {
                ctx.reply.error(err::WRONGTYPE);
                return None;
            };
            let grew = grow_zeroed(ctx.reply, bytes, needed_len).ok()?;
            let result = write(bytes, grew);
            // Redis writes bits into its own copy of the string: a plain sds.
            slot.set_raw_string(true);
            Some(result)
        }
        None => {
            let mut bytes = Vec::new();
            grow_zeroed(ctx.reply, &mut bytes, needed_len).ok()?;
            let result = write(&mut bytes, true);
            ctx.keys.set(db, key, Value::Str(bytes), None);
            ctx.keys.set_raw_string(db, key, true);
            Some(result)
        }
    }
}
