//! LZF, the string compression RDB files use (liblzf's format).
//!
//! The compressed stream is a sequence of instructions, each starting with a control byte:
//!
//! - `000LLLLL` followed by L+1 literal bytes (1 to 32);
//! - `LLLooooo oooooooo`: copy L+2 bytes (L = 1..6) from `o+1` bytes back in the output;
//! - `111ooooo LLLLLLLL oooooooo`: the same with L+9 bytes (9 to 264).
//!
//! The decoder never trusts the input: every run is bounds-checked against both the input
//! and the promised output length. The encoder is our own greedy matcher over a hash of
//! three-byte prefixes; any valid instruction sequence decodes with liblzf, so its output
//! need not be byte-identical to liblzf's.

/// Longest literal run one control byte can announce.
const MAX_LITERAL: usize = 32;
/// Farthest back a copy may reach.
const MAX_DISTANCE: usize = 1 << 13;
/// Longest copy one instruction can express.
const MAX_MATCH: usize = 264;
/// Shortest copy worth an instruction (two bytes of instruction for three of data).
const MIN_MATCH: usize = 3;
/// Output bytes per input byte at most: a three-byte instruction copies 264 bytes.
const MAX_EXPANSION: usize = 88;

/// Compresses `input`; `None` when the result would not be smaller than the input.
pub fn compress(input: &[u8]) -> Option<Vec<u8>> {
    let n = input.len();
    if n < MIN_MATCH + 1 {
        return None;
    }
    // A table about as large as the input (at most 64 Ki slots): small strings, which
    // are the common case in snapshots, then cost little to set up.
    let bits = (usize::BITS - (n - 1).leading_zeros()).clamp(8, 16);
    let mut table = vec![0usize; 1 << bits];
    let slot = |i: usize| -> usize {
        let key = (input[i] as u32) << 16 | (input[i + 1] as u32) << 8 | input[i + 2] as u32;
        (key.wrapping_mul(2_654_435_761) >> (32 - bits)) as usize
    };

    let mut out = Vec::with_capacity(n);
    let mut literal_start = 0;
    let mut i = 0;
    while i + MIN_MATCH <= n {
        let h = slot(i);
        // Slots hold position + 1 so that zero can mean "empty".
        let candidate = table[h];
        table[h] = i + 1;
        if candidate > 0 {
            let from = candidate - 1;
            let distance = i - from;
            if distance <= MAX_DISTANCE && input[from..from + MIN_MATCH] == input[i..i + MIN_MATCH]
            {
                let limit = (n - i).min(MAX_MATCH);
                let mut len = MIN_MATCH;
                while len < limit && input[from + len] == input[i + len] {
                    len += 1;
                }
                push_literals(&mut out, &input[literal_start..i]);
                push_copy(&mut out, len, distance);
                // Index the positions the copy covered, so later data can refer to them.
                for j in i + 1..i + len {
                    if j + MIN_MATCH <= n {
                        let h = slot(j);
                        table[h] = j + 1;
                    }
                }
                i += len;
                literal_start = i;
                if out.len() >= n {
                    return None;
                }
                continue;
            }
        }
        i += 1;
    }
    push_literals(&mut out, &input[literal_start..]);
    if out.len() >= n {
        None
    } else {
        Some(out)
    }
}

fn push_literals(out: &mut Vec<u8>, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        let run = bytes.len().min(MAX_LITERAL);
        out.push((run - 1) as u8);
        out.extend_from_slice(&bytes[..run]);
        bytes = &bytes[run..];
    }
}

/// A copy of `len` (3..=264) bytes from `distance` (1..=8192) bytes back.
fn push_copy(out: &mut Vec<u8>, len: usize, distance: usize) {
    let offset = distance - 1;
    let short_len = len - 2;
    if short_len < 7 {
        out.push(((short_len << 5) | (offset >> 8)) as u8);
    } else {
        out.push(((7 << 5) | (offset >> 8)) as u8);
        out.push((short_len - 7) as u8);
    }
    out.push((offset & 0xff) as u8);
}

/// Decompresses `input`, which must produce exactly `expected_len` bytes; `None` when it is
/// malformed or produces any other length.
pub fn decompress(input: &[u8], expected_len: usize) -> Option<Vec<u8>> {
    // Refuse impossible claims before allocating for them.
    if expected_len > input.len().saturating_mul(MAX_EXPANSION) {
        return None;
    }
    let mut out: Vec<u8> = Vec::with_capacity(expected_len);
    let mut i = 0;
    while i < input.len() {
        let control = input[i] as usize;
        i += 1;
        if control < 32 {
            let run = control + 1;
            if out.len() + run > expected_len || i + run > input.len() {
                return None;
            }
            out.extend_from_slice(&input[i..i + run]);
            i += run;
            continue;
        }
        let mut len = control >> 5;
        if len == 7 {
            len += *input.get(i)? as usize;
            i += 1;
        }
        let distance = ((control & 0x1f) << 8) + *input.get(i)? as usize + 1;
        i += 1;
        let len = len + 2;
        if out.len() + len > expected_len || distance > out.len() {
            return None;
        }
        let start = out.len() - distance;
        if distance >= len {
            out.extend_from_within(start..start + len);
        } else {
            // The copy overlaps what it produces (a repeating pattern): byte by byte.
            for k in 0..len {
                let byte = out[start + k];
                out.push(byte);
            }
        }
    }
    (out.len() == expected_len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn repetitive_text_shrinks_and_round_trips() {
        let text = b"hello hello hello hello hello hello hello world".repeat(20);
        let packed = compress(&text).expect("compressible");
        assert!(packed.len() < text.len() / 4);
        assert_eq!(decompress(&packed, text.len()).as_deref(), Some(&text[..]));
    }

    #[test]
    fn long_runs_use_long_copies() {
        let zeros = vec![0u8; 100_000];
        let packed = compress(&zeros).expect("compressible");
        assert!(packed.len() < 1200, "{}", packed.len());
        assert_eq!(decompress(&packed, zeros.len()), Some(zeros));
    }

    #[test]
    fn incompressible_is_none() {
        assert_eq!(compress(b"abc"), None);
        assert_eq!(compress(b"abcdefghijklmnopqrstuvwxyz"), None);
    }

    #[test]
    fn known_liblzf_stream() {
        // "aaaaaaaaaa" as liblzf encodes it: one literal, then a copy of 9 from 1 back.
        let packed = [0x00, b'a', 0xe0, 0x00, 0x00];
        assert_eq!(decompress(&packed, 10).as_deref(), Some(&b"aaaaaaaaaa"[..]));
    }

    #[test]
    fn malformed_inputs() {
        assert_eq!(decompress(&[], 0), Some(Vec::new()));
        assert_eq!(decompress(&[], 1), None);
        // Literal run longer than the input.
        assert_eq!(decompress(&[5, b'a'], 6), None);
        // Copy reaching before the start.
        assert_eq!(decompress(&[0, b'a', 0x20, 0x05], 4), None);
        // Truncated copy instruction.
        assert_eq!(decompress(&[0, b'a', 0xe0], 10), None);
        // Output longer than promised.
        assert_eq!(decompress(&[1, b'a', b'b'], 1), None);
        // Output shorter than promised.
        assert_eq!(decompress(&[1, b'a', b'b'], 3), None);
        // Absurd promised lengths are refused without allocating.
        assert_eq!(decompress(&[0, b'a'], usize::MAX), None);
    }

    proptest! {
        #[test]
        fn round_trip(
            // Few distinct bytes, in runs of varying length, so that matches of every length
            // and distance occur.
            runs in proptest::collection::vec((0u8..4, 1usize..300), 0..40),
            noise in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut data: Vec<u8> = runs
                .iter()
                .flat_map(|&(byte, len)| (0..len).map(move |i| b'a' + byte + (i % 3 == 0) as u8))
                .collect();
            data.extend_from_slice(&noise);
            if let Some(packed) = compress(&data) {
                prop_assert!(packed.len() < data.len());
                prop_assert_eq!(decompress(&packed, data.len()), Some(data));
            }
        }

        #[test]
        fn decompress_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200), len in 0usize..5000) {
            if let Some(out) = decompress(&data, len) {
                prop_assert_eq!(out.len(), len);
            }
        }
    }
}
