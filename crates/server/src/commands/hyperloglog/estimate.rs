//! Where an element lands and what the registers say: the hash that picks an element's
//! register and the length of its run of zero bits, and the cardinality estimate computed
//! from a histogram of register values.
//!
//! Both must agree with Redis to the bit: a value written by one server is counted by the
//! other, and the cached count in the header is trusted by both.
//!
//! - The hash is MurmurHash2's 64-bit variant (MurmurHash64A), reading its input as
//!   little-endian words whatever the machine, with Redis' seed `0xadc83b19`.
//! - The low [`INDEX_BITS`] bits of the hash choose one of [`REGISTERS`] registers; the run
//!   counted is the number of trailing zero bits of the remaining [`RUN_BITS`] bits, plus one
//!   (a bit above them is forced to one, so the run is at most `RUN_BITS + 1`).
//! - The estimate is Otmar Ertl's "improved" estimator ("New cardinality estimation
//!   algorithms for HyperLogLog sketches", arXiv:1702.01284), which Redis 7.0 uses: no
//!   small- or large-range corrections, just the two series `sigma` and `tau` applied to
//!   the fractions of registers at zero and at the maximum run.

/// Bits of the hash that choose the register.
pub const INDEX_BITS: u32 = 14;
/// Registers in every HyperLogLog.
pub const REGISTERS: usize = 1 << INDEX_BITS;
/// Bits of the hash left after the register index; runs are counted in them.
pub const RUN_BITS: usize = 64 - INDEX_BITS as usize;
/// Register values are 0..=63 (6 bits); a histogram has a slot for each.
pub const HISTOGRAM_LEN: usize = 64;

/// How many registers hold each value: `histogram[v]` counts registers equal to `v`.
pub type Histogram = [u64; HISTOGRAM_LEN];

const HASH_SEED: u64 = 0xadc8_3b19;
const MURMUR_MUL: u64 = 0xc6a4_a793_5bd1_e995;
const MURMUR_SHIFT: u32 = 47;

/// 0.5 / ln 2, the limit of the HyperLogLog bias constant as the register count grows.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// MurmurHash64A of `data` with `seed`, reading 8-byte words as little-endian.
pub fn murmur64a(data: &[u8], seed: u64) -> u64 {
    let mut h = seed ^ (data.len() as u64).wrapping_mul(MURMUR_MUL);
    let mut words = data.chunks_exact(8);
    for word in &mut words {
        let mut k = u64::from_le_bytes(word.try_into().expect("8-byte chunk"));
        k = k.wrapping_mul(MURMUR_MUL);
        k ^= k >> MURMUR_SHIFT;
        k = k.wrapping_mul(MURMUR_MUL);
        h ^= k;
        h = h.wrapping_mul(MURMUR_MUL);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, byte) in tail.iter().enumerate() {
            h ^= u64::from(*byte) << (8 * i);
        }
        h = h.wrapping_mul(MURMUR_MUL);
    }
    h ^= h >> MURMUR_SHIFT;
    h = h.wrapping_mul(MURMUR_MUL);
    h ^= h >> MURMUR_SHIFT;
    h
}

/// The register `element` belongs to and the run it observed (1..=51): what adding it
/// raises that register to, if the register holds less.
pub fn locate(element: &[u8]) -> (usize, u8) {
    let hash = murmur64a(element, HASH_SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> INDEX_BITS) | (1u64 << RUN_BITS);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Ertl's sigma(x) = x + sum over k >= 1 of x^(2^k) * 2^(k-1), summed until adding a term
/// no longer changes the double.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut weight = 1.0;
    let mut sum = x;
    loop {
        x *= x;
        let before = sum;
        sum += x * weight;
        weight += weight;
        if sum == before {
            return sum;
        }
    }
}

/// Ertl's tau(x) = (1 - x - sum over k >= 1 of (1 - x^(2^-k))^2 * 2^-k) / 3, summed until
/// a term no longer changes the double.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut weight = 1.0;
    let mut sum = 1.0 - x;
    loop {
        x = x.sqrt();
        let before = sum;
        weight *= 0.5;
        let gap = 1.0 - x;
        sum -= gap * gap * weight;
        if sum == before {
            return sum / 3.0;
        }
    }
}

/// The estimated cardinality of a HyperLogLog whose registers have `histogram`.
///
/// Only the counts of values 0..=51 take part (a register above the longest possible run
/// can only come from a hand-made value; it is ignored, as Redis ignores it). The result
/// is rounded half away from zero; when it does not fit a signed 64-bit integer (only
/// hand-made registers get there) it is 2^63, which is what the conversion in Redis gives
/// on x86-64.
pub fn estimate(histogram: &Histogram) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - histogram[RUN_BITS + 1] as f64) / m);
    for value in (1..=RUN_BITS).rev() {
        z += histogram[value] as f64;
        z *= 0.5;
    }
    z += m * sigma(histogram[0] as f64 / m);
    let rounded = (ALPHA_INF * m * m / z).round();
    // i64::MAX as f64 is 2^63, itself out of range.
    if rounded.is_finite() && rounded < 9_223_372_036_854_775_808.0 {
        rounded as i64 as u64
    } else {
        1u64 << 63
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur_matches_reference_values() {
        // Redis' MurmurHash64A with its HyperLogLog seed, over every tail length.
        let expected: [u64; 17] = [
            0xd8dfea6585bc9732,
            0xc5064924982a33a9,
            0x41f41cd92bc3e7fd,
            0x835c985c13304b3a,
            0x270e11c0772a74b7,
            0x0e6e0cb83e3eb7a3,
            0x59960027c4c33775,
            0x559c262a7f7060f4,
            0x4f529b651cb08252,
            0x1ec0e7008dc11df3,
            0xfc02e73798aa83fd,
            0xd4c4ad5ba30cf4e7,
            0xf3c9a89477e1aae9,
            0x9bbd5df10295e1b0,
            0xb53b149c485fac1e,
            0x3fe8c8f51a1e3d6d,
            0x9f8565428eaa573d,
        ];
        let data = b"0123456789abcdef";
        for (len, want) in expected.iter().enumerate() {
            assert_eq!(murmur64a(&data[..len], HASH_SEED), *want, "length {len}");
        }
        assert_eq!(murmur64a(b"hello", HASH_SEED), 0x0f656f01eecfe400);
    }

    #[test]
    fn runs_are_bounded() {
        for i in 0..10_000u32 {
            let (index, run) = locate(&i.to_le_bytes());
            assert!(index < REGISTERS);
            assert!((1..=RUN_BITS as u8 + 1).contains(&run));
        }
    }

    #[test]
    fn empty_histogram_estimates_zero() {
        let mut histogram = [0; HISTOGRAM_LEN];
        histogram[0] = REGISTERS as u64;
        assert_eq!(estimate(&histogram), 0);
    }

    #[test]
    fn one_register_set_estimates_one() {
        let mut histogram = [0; HISTOGRAM_LEN];
        histogram[0] = REGISTERS as u64 - 1;
        histogram[1] = 1;
        assert_eq!(estimate(&histogram), 1);
    }

    #[test]
    fn registers_at_the_maximum_overflow_as_redis_does() {
        let mut histogram = [0; HISTOGRAM_LEN];
        histogram[RUN_BITS + 1] = REGISTERS as u64;
        assert_eq!(estimate(&histogram), 1 << 63);
    }
}
