//! The bytes of a HyperLogLog, laid out exactly as Redis lays them out, so that a value
//! moves between Latch and redis-server (GET/SET, DUMP/RESTORE, RDB, AOF) unchanged.
//!
//! A HyperLogLog is a plain string value:
//!
//! - a 16-byte header: the magic `HYLL`, one encoding byte (0 dense, 1 sparse), three
//!   unused bytes, and the last computed cardinality as a little-endian `u64` whose top bit
//!   (bit 7 of byte 15) set means "stale, recompute";
//! - then the registers.
//!
//! **Dense**: 16384 registers of 6 bits, packed from the least significant bit of each
//! byte upwards: register `i` starts at bit `6 * i` of the register bytes (12288 bytes, so
//! a dense value is always [`DENSE_LEN`] bytes).
//!
//! **Sparse**: a run-length code over the registers in order, three opcodes:
//!
//! | bits | opcode | meaning |
//! |---|---|---|
//! | `00nnnnnn` | ZERO | `n + 1` registers (1..=64) at zero |
//! | `01nnnnnn nnnnnnnn` | XZERO | `n + 1` registers (1..=16384) at zero, `n` big-endian |
//! | `1vvvvvnn` | VAL | `n + 1` registers (1..=4) at value `v + 1` (1..=32) |
//!
//! A new HyperLogLog is sparse (one XZERO of 16384). It turns dense for good when a register
//! needs a value above 32, or when growing the sparse code would take the whole value past
//! `hll-sparse-max-bytes`.
//!
//! Redis edits the sparse code in place; Latch follows the same edits (which opcode is
//! split into which, which neighbours are merged afterwards), since a different but
//! equivalent code would make the bytes differ. Redis' strings always carry a zero byte
//! after their end, and a truncated two-byte opcode at the very end reads it: the readers
//! here read a zero past the end too, so that even corrupted values decode as Redis
//! decodes them.

use super::estimate::{Histogram, HISTOGRAM_LEN, REGISTERS};

pub const HEADER_LEN: usize = 16;
const REGISTER_BITS: usize = 6;
const REGISTER_MASK: u16 = (1 << REGISTER_BITS) - 1;
/// Bytes of a dense value: the header and 16384 registers of 6 bits.
pub const DENSE_LEN: usize = HEADER_LEN + (REGISTERS * REGISTER_BITS).div_ceil(8);

pub const DENSE: u8 = 0;
pub const SPARSE: u8 = 1;

const MAGIC: &[u8; 4] = b"HYLL";
const ENCODING_AT: usize = 4;
const CARD_AT: usize = 8;
/// Byte 15, bit 7: the cached cardinality is stale.
const STALE_AT: usize = CARD_AT + 7;
const STALE_BIT: u8 = 0x80;

/// The highest value a VAL opcode can hold, and the longest run it covers.
const VAL_MAX: u8 = 32;
const VAL_MAX_RUN: usize = 4;
const ZERO_MAX_RUN: usize = 64;
const XZERO_MAX_RUN: usize = 16384;

/// The value does not decode to exactly 16384 registers (or a register update cannot find
/// its place): Redis' "INVALIDOBJ Corrupted HLL object detected".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt;

// ---------------------------------------------------------------------------------------
// The header.
// ---------------------------------------------------------------------------------------

/// A new, empty HyperLogLog: sparse, every register zero, cached cardinality 0.
pub fn new_sparse() -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER_LEN + 8);
    bytes.extend_from_slice(MAGIC);
    bytes.push(SPARSE);
    bytes.extend_from_slice(&[0; 3 + 8]);
    let mut left = REGISTERS;
    while left > 0 {
        let run = left.min(XZERO_MAX_RUN);
        bytes.extend_from_slice(&xzero_op(run));
        left -= run;
    }
    bytes
}

/// Whether a string passes Redis' check for a HyperLogLog: long enough for the header, the
/// magic, a known encoding, and the exact length when dense. The sparse code itself is
/// checked only when read.
pub fn looks_valid(bytes: &[u8]) -> bool {
    bytes.len() >= HEADER_LEN
        && bytes[..4] == *MAGIC
        && bytes[ENCODING_AT] <= SPARSE
        && (bytes[ENCODING_AT] != DENSE || bytes.len() == DENSE_LEN)
}

/// The encoding byte of a value that [`looks_valid`].
pub fn encoding(bytes: &[u8]) -> u8 {
    bytes[ENCODING_AT]
}

/// The cached cardinality, unless it is marked stale.
pub fn cached_count(bytes: &[u8]) -> Option<u64> {
    if bytes[STALE_AT] & STALE_BIT != 0 {
        return None;
    }
    let card: [u8; 8] = bytes[CARD_AT..CARD_AT + 8].try_into().expect("8 bytes");
    Some(u64::from_le_bytes(card))
}

pub fn store_count(bytes: &mut [u8], count: u64) {
    bytes[CARD_AT..CARD_AT + 8].copy_from_slice(&count.to_le_bytes());
}

/// Marks the cached cardinality stale (the rest of its bytes stay as they were).
pub fn mark_stale(bytes: &mut [u8]) {
    bytes[STALE_AT] |= STALE_BIT;
}

// ---------------------------------------------------------------------------------------
// Dense registers. `regs` is the part after the header.
// ---------------------------------------------------------------------------------------

/// Register `index` of dense register bytes.
pub fn get_register(regs: &[u8], index: usize) -> u8 {
    let bit = index * REGISTER_BITS;
    let (byte, shift) = (bit / 8, bit % 8);
    let low = u16::from(regs[byte]) >> shift;
    let high = u16::from(regs.get(byte + 1).copied().unwrap_or(0)) << (8 - shift);
    ((low | high) & REGISTER_MASK) as u8
}

/// Sets register `index` of dense register bytes to `value` (at most 63).
pub fn set_register(regs: &mut [u8], index: usize, value: u8) {
    let bit = index * REGISTER_BITS;
    let (byte, shift) = (bit / 8, bit % 8);
    let value = u16::from(value) & REGISTER_MASK;
    let keep = !(REGISTER_MASK << shift);
    regs[byte] = (u16::from(regs[byte]) & keep | value << shift) as u8;
    // The bits that spill into the next byte (none when the register fits in this one).
    let spill = shift + REGISTER_BITS;
    if spill > 8 {
        let next = &mut regs[byte + 1];
        let keep = !(REGISTER_MASK >> (8 - shift));
        *next = (u16::from(*next) & keep | value >> (8 - shift)) as u8;
    }
}

/// Raises register `index` to `value` if it holds less; whether it changed.
pub fn raise_register(regs: &mut [u8], index: usize, value: u8) -> bool {
    if get_register(regs, index) < value {
        set_register(regs, index, value);
        true
    } else {
        false
    }
}

/// Calls `visit` with each dense register's value, in order: four registers in every three
/// bytes, unpacked together (PFCOUNT and PFMERGE read all 16384).
fn for_each_register(regs: &[u8], mut visit: impl FnMut(u8)) {
    for group in regs[..REGISTERS * REGISTER_BITS / 8].chunks_exact(3) {
        let word = u32::from(group[0]) | u32::from(group[1]) << 8 | u32::from(group[2]) << 16;
        for k in 0..4 {
            visit(((word >> (REGISTER_BITS * k)) & 63) as u8);
        }
    }
}

// ---------------------------------------------------------------------------------------
// The sparse code.
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Zero(usize),
    XZero(usize),
    Val(u8, usize),
}

impl Op {
    /// Registers covered.
    fn run(self) -> usize {
        match self {
            Op::Zero(run) | Op::XZero(run) | Op::Val(_, run) => run,
        }
    }

    /// Bytes taken.
    fn width(self) -> usize {
        match self {
            Op::XZero(_) => 2,
            _ => 1,
        }
    }
}

fn is_xzero(byte: u8) -> bool {
    byte & 0xc0 == 0x40
}

fn is_zero(byte: u8) -> bool {
    byte & 0xc0 == 0
}

fn is_val(byte: u8) -> bool {
    byte & 0x80 != 0
}

fn val_value(byte: u8) -> u8 {
    ((byte >> 2) & 0x1f) + 1
}

fn val_run(byte: u8) -> usize {
    usize::from(byte & 0x3) + 1
}

/// The opcode at `at` (< `bytes.len()`); the second byte of an XZERO cut off by the end
/// reads as `past_end`.
fn op_at(bytes: &[u8], at: usize, past_end: u8) -> Op {
    let byte = bytes[at];
    if is_zero(byte) {
        Op::Zero(usize::from(byte & 0x3f) + 1)
    } else if is_xzero(byte) {
        let low = bytes.get(at + 1).copied().unwrap_or(past_end);
        Op::XZero((usize::from(byte & 0x3f) << 8 | usize::from(low)) + 1)
    } else {
        Op::Val(val_value(byte), val_run(byte))
    }
}

fn val_op(value: u8, run: usize) -> u8 {
    0x80 | (value - 1) << 2 | (run - 1) as u8
}

fn zero_op(run: usize) -> u8 {
    (run - 1) as u8
}

fn xzero_op(run: usize) -> [u8; 2] {
    let n = run - 1;
    [0x40 | (n >> 8) as u8, (n & 0xff) as u8]
}

/// A run of zero registers as ZERO when it fits, else XZERO; appended to `seq`.
fn push_zeros(seq: &mut Vec<u8>, run: usize) {
    if run > ZERO_MAX_RUN {
        seq.extend_from_slice(&xzero_op(run));
    } else {
        seq.push(zero_op(run));
    }
}

/// Walks the opcodes of the sparse code in `bytes[HEADER_LEN..]`.
fn ops(bytes: &[u8], past_end: u8) -> impl Iterator<Item = Op> + '_ {
    let mut at = HEADER_LEN;
    std::iter::from_fn(move || {
        if at >= bytes.len() {
            return None;
        }
        let op = op_at(bytes, at, past_end);
        at += op.width();
        Some(op)
    })
}

/// Walks the opcodes of a sparse code with the first register each covers, checking that
/// they cover exactly the 16384 registers: `visit` sees only opcodes that fit, and any that
/// would run past the last register, or a code that ends short of it, is `Err`.
///
/// Redis 7.0.15 as released let a run of zeros go past the end unchecked (an overflow that
/// could be made to write out of bounds, CVE-2025-32023); the fix, which Debian's 7.0.15
/// carries, checks every opcode, and so does this.
fn walk(hll: &[u8], past_end: u8, mut visit: impl FnMut(usize, Op)) -> Result<(), Corrupt> {
    let mut index = 0usize;
    for op in ops(hll, past_end) {
        if index + op.run() > REGISTERS {
            return Err(Corrupt);
        }
        visit(index, op);
        index += op.run();
    }
    if index == REGISTERS {
        Ok(())
    } else {
        Err(Corrupt)
    }
}

/// Converts a sparse value to dense in place (a dense one is left as it is). The header is
/// kept (cached cardinality included) but for the encoding byte. `Err` when the code does
/// not cover exactly 16384 registers; the value is untouched then.
pub fn to_dense(hll: &mut Vec<u8>) -> Result<(), Corrupt> {
    to_dense_past(hll, 0)
}

/// [`to_dense`] of a value whose byte past the end is `past_end`.
fn to_dense_past(hll: &mut Vec<u8>, past_end: u8) -> Result<(), Corrupt> {
    if hll[ENCODING_AT] == DENSE {
        return Ok(());
    }
    let mut dense = vec![0u8; DENSE_LEN];
    dense[..HEADER_LEN].copy_from_slice(&hll[..HEADER_LEN]);
    dense[ENCODING_AT] = DENSE;
    let regs = &mut dense[HEADER_LEN..];
    walk(hll, past_end, |first, op| {
        if let Op::Val(value, run) = op {
            for index in first..first + run {
                set_register(regs, index, value);
            }
        }
    })?;
    *hll = dense;
    Ok(())
}

/// Adds each register's value to `histogram`; for a sparse code, whether it covers exactly
/// 16384 registers.
pub fn histogram(hll: &[u8], histogram: &mut Histogram) -> Result<(), Corrupt> {
    if hll[ENCODING_AT] == DENSE {
        for_each_register(&hll[HEADER_LEN..], |value| {
            histogram[usize::from(value)] += 1
        });
        return Ok(());
    }
    walk(hll, 0, |_, op| match op {
        Op::Zero(run) | Op::XZero(run) => histogram[0] += run as u64,
        Op::Val(value, run) => histogram[usize::from(value)] += run as u64,
    })
}

/// Raises each of `max`'s registers to the value's register where that is higher: the
/// registers of the union.
pub fn merge_into(max: &mut [u8; REGISTERS], hll: &[u8]) -> Result<(), Corrupt> {
    if hll[ENCODING_AT] == DENSE {
        let mut slots = max.iter_mut();
        for_each_register(&hll[HEADER_LEN..], |value| {
            if let Some(slot) = slots.next() {
                *slot = (*slot).max(value);
            }
        });
        return Ok(());
    }
    walk(hll, 0, |first, op| {
        if let Op::Val(value, run) = op {
            for slot in &mut max[first..first + run] {
                *slot = (*slot).max(value);
            }
        }
    })
}

/// A histogram of plain one-byte registers (the union PFCOUNT builds over several keys).
pub fn raw_histogram(max: &[u8; REGISTERS]) -> Histogram {
    let mut histogram = [0; HISTOGRAM_LEN];
    for value in max {
        histogram[usize::from(*value & 63)] += 1;
    }
    histogram
}

/// PFDEBUG DECODE's text: `z:N` for ZERO, `Z:N` for XZERO, `v:VALUE,N` for VAL, separated by
/// spaces.
pub fn decode(hll: &[u8]) -> String {
    let mut out = String::new();
    for op in ops(hll, 0) {
        if !out.is_empty() {
            out.push(' ');
        }
        let text = match op {
            Op::Zero(run) => format!("z:{run}"),
            Op::XZero(run) => format!("Z:{run}"),
            Op::Val(value, run) => format!("v:{value},{run}"),
        };
        out.push_str(&text);
    }
    out
}

/// What a register update of the sparse code came to.
enum Edit {
    /// The register already held as much.
    Unchanged,
    /// Rewritten in place; the code is now this many bytes long (header included).
    Changed(usize),
    /// The sparse code cannot take it: convert to dense, then set the register.
    Promote,
}

/// Bytes past the end of a value kept while the sparse code is edited: an XZERO rewritten
/// into five bytes grows the value by three, and the byte just past the end is read by a
/// two-byte opcode cut off by the end (see [`Writer`]).
const EDIT_ROOM: usize = 4;

/// Raises registers of one value, in either encoding, turning it dense when the sparse code
/// cannot hold the result within `hll-sparse-max-bytes` (or at all).
///
/// Redis' strings carry one byte after their end, normally zero, and a corrupt sparse code
/// that ends with the first byte of an XZERO reads it as the XZERO's second byte. An edit of
/// such an XZERO writes its replacement over that byte, which then holds the replacement's
/// last byte until the string is edited again. The writer keeps that byte for the edits of
/// one command, so that a command does to a corrupt value what Redis does; between commands
/// Latch keeps no such byte (it reads as zero again).
pub struct Writer {
    max_bytes: u64,
    past_end: u8,
}

impl Writer {
    /// A writer for one value, with `hll-sparse-max-bytes`.
    pub fn new(max_bytes: u64) -> Writer {
        Writer {
            max_bytes,
            past_end: 0,
        }
    }

    /// Adds an element: raises its register to its run. Whether a register changed (the
    /// value may have turned dense on the way); `Err` for a corrupt sparse code.
    pub fn add(&mut self, hll: &mut Vec<u8>, element: &[u8]) -> Result<bool, Corrupt> {
        let (index, run) = super::estimate::locate(element);
        self.raise(hll, index, run)
    }

    /// Raises register `index` to `value` if it holds less. Whether it changed.
    pub fn raise(&mut self, hll: &mut Vec<u8>, index: usize, value: u8) -> Result<bool, Corrupt> {
        if hll[ENCODING_AT] == DENSE {
            return Ok(raise_register(&mut hll[HEADER_LEN..], index, value));
        }
        let len = hll.len();
        let edit = if value > VAL_MAX {
            Edit::Promote
        } else {
            hll.resize(len + EDIT_ROOM, 0);
            hll[len] = self.past_end;
            let edit = edit_sparse(hll, len, index, value, self.max_bytes);
            if let Ok(Edit::Changed(new_len)) = edit {
                self.past_end = hll[new_len];
                hll.truncate(new_len);
            } else {
                hll.truncate(len);
            }
            edit?
        };
        match edit {
            Edit::Unchanged => Ok(false),
            Edit::Changed(_) => {
                mark_stale(hll);
                Ok(true)
            }
            Edit::Promote => {
                to_dense_past(hll, self.past_end)?;
                self.past_end = 0;
                // The sparse code held less than `value` there, so this always raises it.
                raise_register(&mut hll[HEADER_LEN..], index, value);
                Ok(true)
            }
        }
    }
}

/// The in-place edit of [`Writer::raise`] on `buf`, whose first `len` bytes are the value,
/// followed by the byte past its end and room to grow. Every length change writes a zero
/// past the new end, as Redis' strings do, before the new bytes are copied in.
fn edit_sparse(
    buf: &mut [u8],
    len: usize,
    index: usize,
    value: u8,
    max_bytes: u64,
) -> Result<Edit, Corrupt> {
    let mut end = len;
    // Find the opcode covering the register: it starts at `at` and covers registers
    // `first..first + op.run()`; `prev` is the opcode before it.
    let mut at = HEADER_LEN;
    let mut first = 0usize;
    let mut prev = None;
    let mut found = None;
    while at < end {
        let op = op_at(buf, at, 0);
        if index < first + op.run() {
            found = Some(op);
            break;
        }
        prev = Some(at);
        at += op.width();
        first += op.run();
    }
    let Some(op) = found else {
        return Err(Corrupt);
    };
    let next = Some(at + op.width()).filter(|&next| next < end);

    match op {
        Op::Val(old, _) if old >= value => return Ok(Edit::Unchanged),
        // One register alone: its opcode becomes a VAL of the new value.
        Op::Val(_, 1) | Op::Zero(1) => buf[at] = val_op(value, 1),
        _ => {
            // Split the opcode: what precedes the register, the register, what follows.
            let last = first + op.run() - 1;
            let mut seq = Vec::with_capacity(5);
            match op {
                Op::Val(old, _) => {
                    if index != first {
                        seq.push(val_op(old, index - first));
                    }
                    seq.push(val_op(value, 1));
                    if index != last {
                        seq.push(val_op(old, last - index));
                    }
                }
                Op::Zero(_) | Op::XZero(_) => {
                    if index != first {
                        push_zeros(&mut seq, index - first);
                    }
                    seq.push(val_op(value, 1));
                    if index != last {
                        push_zeros(&mut seq, last - index);
                    }
                }
            }
            let grow = seq.len() as isize - op.width() as isize;
            if grow > 0 && (end as u64).saturating_add(grow as u64) > max_bytes {
                return Ok(Edit::Promote);
            }
            if grow != 0 {
                if let Some(next) = next {
                    buf.copy_within(next..end, next.wrapping_add_signed(grow));
                }
            }
            end = end.wrapping_add_signed(grow);
            buf[end] = 0;
            // An XZERO cut off by the end overwrites the byte past the new end here.
            buf[at..at + seq.len()].copy_from_slice(&seq);
        }
    }

    // Merge neighbouring VALs of one value whose runs fit one opcode, looking at a few
    // opcodes from the one before the change on.
    let mut at = prev.unwrap_or(HEADER_LEN);
    let mut budget = 5;
    while at < end && budget > 0 {
        budget -= 1;
        let byte = buf[at];
        if is_xzero(byte) {
            at += 2;
            continue;
        }
        if is_zero(byte) {
            at += 1;
            continue;
        }
        if at + 1 < end && is_val(buf[at + 1]) {
            let right = buf[at + 1];
            let run = val_run(byte) + val_run(right);
            if val_value(byte) == val_value(right) && run <= VAL_MAX_RUN {
                buf[at + 1] = val_op(val_value(byte), run);
                buf.copy_within(at + 1..end, at);
                end -= 1;
                buf[end] = 0;
                // Stay: the merged opcode may merge with the next one too.
                continue;
            }
        }
        at += 1;
    }
    Ok(Edit::Changed(end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registers(hll: &[u8]) -> Vec<u8> {
        let mut dense = hll.to_vec();
        to_dense(&mut dense).unwrap();
        (0..REGISTERS)
            .map(|i| get_register(&dense[HEADER_LEN..], i))
            .collect()
    }

    #[test]
    fn new_value_is_one_xzero() {
        let hll = new_sparse();
        assert_eq!(&hll[..], b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff");
        assert!(looks_valid(&hll));
        assert_eq!(decode(&hll), "Z:16384");
        assert_eq!(cached_count(&hll), Some(0));
    }

    #[test]
    fn dense_registers_do_not_disturb_neighbours() {
        let mut regs = vec![0u8; DENSE_LEN - HEADER_LEN];
        let mut expected = vec![0u8; REGISTERS];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..4 {
            for (i, slot) in expected.iter_mut().enumerate() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *slot = (x & 63) as u8;
                set_register(&mut regs, i, *slot);
            }
            for (i, want) in expected.iter().enumerate() {
                assert_eq!(get_register(&regs, i), *want, "register {i}");
            }
        }
    }

    #[test]
    fn sparse_edits_match_the_registers_set() {
        let mut sparse = new_sparse();
        let mut expected = vec![0u8; REGISTERS];
        let mut x = 12345u64;
        for _ in 0..400 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let index = (x as usize) % REGISTERS;
            let value = ((x >> 20) % 32) as u8 + 1;
            let changed = Writer::new(1 << 30)
                .raise(&mut sparse, index, value)
                .unwrap();
            assert_eq!(changed, expected[index] < value);
            expected[index] = expected[index].max(value);
            assert_eq!(encoding(&sparse), SPARSE);
        }
        assert_eq!(registers(&sparse), expected);
    }

    #[test]
    fn sparse_code_splits_and_merges_as_redis() {
        let mut hll = new_sparse();
        Writer::new(3000).raise(&mut hll, 1000, 2).unwrap();
        assert_eq!(decode(&hll), "Z:1000 v:2,1 Z:15383");
        Writer::new(3000).raise(&mut hll, 1020, 3).unwrap();
        Writer::new(3000).raise(&mut hll, 1021, 3).unwrap();
        assert_eq!(decode(&hll), "Z:1000 v:2,1 z:19 v:3,2 Z:15362");
        Writer::new(3000).raise(&mut hll, 1001, 2).unwrap();
        assert_eq!(decode(&hll), "Z:1000 v:2,2 z:18 v:3,2 Z:15362");
        assert_eq!(cached_count(&hll), None, "an edit marks the count stale");
    }

    #[test]
    fn big_values_and_long_codes_turn_dense() {
        let mut hll = new_sparse();
        Writer::new(3000).raise(&mut hll, 5, 33).unwrap();
        assert_eq!(encoding(&hll), DENSE);
        assert_eq!(hll.len(), DENSE_LEN);
        assert_eq!(get_register(&hll[HEADER_LEN..], 5), 33);

        let mut hll = new_sparse();
        Writer::new(20).raise(&mut hll, 100, 1).unwrap();
        assert_eq!(encoding(&hll), DENSE, "18 + 3 bytes is over 20");
    }

    #[test]
    fn corrupt_codes_are_refused() {
        let mut hll = new_sparse();
        hll.truncate(HEADER_LEN + 1);
        assert_eq!(Writer::new(3000).raise(&mut hll, 16383, 1), Err(Corrupt));
        let mut histogram = [0; HISTOGRAM_LEN];
        // One byte of XZERO 0x7f reads a zero after it: 0x7f00 + 1 registers.
        assert_eq!(super::histogram(&hll, &mut histogram), Err(Corrupt));
        assert_eq!(to_dense(&mut hll), Err(Corrupt));
        let mut max = [0; REGISTERS];
        assert_eq!(merge_into(&mut max, &hll), Err(Corrupt));
    }
}
