//! Just enough of the x86 80-bit `long double` for INCRBYFLOAT to answer exactly as Redis.
//!
//! Redis parses both numbers with `strtold`, adds them in long double (64-bit significand,
//! binary exponent down to -16445 with gradual underflow) and prints the sum with
//! `%.17Lf`. An f64 would answer differently whenever the extra 11 bits show in the 17
//! printed decimals (Redis says "1000.19999999999999996" for 1000.1 + 0.1 and "0.3" for
//! 0.1 + 0.2), so this module does the same three steps exactly in software: correctly
//! rounded parsing (round to nearest, ties to even, as glibc), one correctly rounded
//! addition, and an exact decimal expansion rounded half-to-even at the 17th decimal (as
//! glibc's printf).

use std::cmp::Ordering;

/// Weight of the lowest significand bit of the smallest (subnormal) long double.
const MIN_LSB_EXP: i32 = -16445;
/// Largest binary exponent of a long double's leading bit.
const MAX_TOP_EXP: i32 = 16383;

/// A finite long double: `(-1)^negative * significand * 2^exp`. Normal values keep the top
/// bit of `significand` set; subnormal ones have `exp == MIN_LSB_EXP`; zero has
/// `significand == 0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LongDouble {
    negative: bool,
    significand: u64,
    exp: i32,
}

/// A parsed number: finite, or an infinity (`strtold` accepts "inf" and "infinity").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Number {
    Finite(LongDouble),
    Infinite,
}

impl LongDouble {
    pub const ZERO: LongDouble = LongDouble {
        negative: false,
        significand: 0,
        exp: 0,
    };

    /// Parses `text` as Redis' `string2ld` does: `strtold` must consume all of it, no
    /// leading space, not NaN, and no overflow or underflow to zero (those are `None`).
    pub fn parse(text: &[u8]) -> Option<Number> {
        let (negative, unsigned) = match text.first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        if unsigned.eq_ignore_ascii_case(b"inf") || unsigned.eq_ignore_ascii_case(b"infinity") {
            return Some(Number::Infinite);
        }
        let is_hex = unsigned.len() > 2 && unsigned[0] == b'0' && (unsigned[1] | 0x20) == b'x';
        let value = if is_hex {
            parse_hex(&unsigned[2..])?
        } else {
            parse_decimal(unsigned)?
        };
        Some(Number::Finite(LongDouble { negative, ..value }))
    }

    /// The sum, rounded once; `None` when it overflows (Redis then refuses the result).
    pub fn add(self, other: LongDouble) -> Option<LongDouble> {
        if other.significand == 0 {
            // x + 0 is x, except that -0 + +0 is +0.
            return Some(if self.significand == 0 {
                LongDouble {
                    negative: self.negative && other.negative,
                    ..LongDouble::ZERO
                }
            } else {
                self
            });
        }
        if self.significand == 0 {
            return Some(other);
        }
        // `big` has the larger (or equal) exponent; since normal values have their top bit
        // set and subnormals the smallest exponent, it is at least as large in magnitude
        // unless the exponents are equal.
        let (big, small) = if self.exp >= other.exp {
            (self, other)
        } else {
            (other, self)
        };
        // Put both on a common scale with 63 bits of headroom below `big`'s lowest bit.
        let base = big.exp - 63;
        let big_scaled = (big.significand as u128) << 63;
        let shift = small.exp - base; // <= 63
        let (small_scaled, sticky) = if shift >= 0 {
            ((small.significand as u128) << shift, false)
        } else if shift > -128 {
            let dropped = (-shift) as u32;
            let kept = (small.significand as u128) >> dropped;
            (
                kept,
                (small.significand as u128) & ((1u128 << dropped) - 1) != 0,
            )
        } else {
            (0, true)
        };
        if big.negative == small.negative {
            // Both below 2^127, so the sum fits.
            return round(big.negative, big_scaled + small_scaled, sticky, base);
        }
        match big_scaled.cmp(&small_scaled) {
            Ordering::Equal if !sticky => Some(LongDouble::ZERO),
            Ordering::Less => {
                // Only possible with equal exponents (no sticky bits then).
                round(small.negative, small_scaled - big_scaled, false, base)
            }
            _ => {
                // The true difference is big - (small + fraction): borrow one unit and keep
                // the sticky fraction.
                let difference = big_scaled - small_scaled - u128::from(sticky);
                round(big.negative, difference, sticky, base)
            }
        }
    }

    /// The value as C's `printf("%.17Lf")` prints it, then with trailing zeros (and a bare
    /// point) removed and "-0" made "0": Redis' `ld2string(..., LD_STR_HUMAN)`.
    pub fn to_human(self) -> Vec<u8> {
        let mut text = Vec::new();
        if self.negative {
            text.push(b'-');
        }
        if self.exp >= 0 {
            // An integer: shift into a big number and print it.
            let mut big = Big::from_u64(self.significand);
            big.shl(self.exp as u32);
            text.extend_from_slice(&big.to_decimal());
        } else {
            let k = (-self.exp) as u32;
            let significand = self.significand as u128;
            let mut integer = if k < 64 { significand >> k } else { 0 };
            let fraction = if k < 64 {
                significand & ((1u128 << k) - 1)
            } else {
                significand
            };
            // fraction * 10^17 < 2^121, so this is exact in u128.
            let scaled = fraction * 100_000_000_000_000_000u128;
            let mut decimals = if k < 128 {
                let quotient = scaled >> k;
                let remainder = scaled & ((1u128 << k) - 1);
                let half = 1u128 << (k - 1);
                let round_up = remainder > half || (remainder == half && quotient & 1 == 1);
                quotient + u128::from(round_up)
            } else {
                // Below 2^-127 * 2^121: less than half a unit of the 17th decimal.
                0
            };
            if decimals == 100_000_000_000_000_000 {
                integer += 1;
                decimals = 0;
            }
            text.extend_from_slice(integer.to_string().as_bytes());
            text.extend_from_slice(format!(".{decimals:017}").as_bytes());
            while text.last() == Some(&b'0') {
                text.pop();
            }
            if text.last() == Some(&b'.') {
                text.pop();
            }
        }
        if text == b"-0" {
            text = b"0".to_vec();
        }
        text
    }
}

/// Rounds `(q + f) * 2^exp2` (with `0 < f < 1` when `sticky`) to a long double, to
/// nearest with ties to even. `None` on overflow; zero results are returned as zero.
fn round(negative: bool, q: u128, sticky: bool, exp2: i32) -> Option<LongDouble> {
    if q == 0 {
        return Some(LongDouble {
            negative,
            ..LongDouble::ZERO
        });
    }
    let bits = 128 - q.leading_zeros() as i32;
    let top = bits - 1 + exp2;
    let lsb_exp = (top - 63).max(MIN_LSB_EXP);
    let drop = lsb_exp - exp2;
    let (mut significand, mut lsb_exp) = if drop <= 0 {
        // Exact: at most 64 significant bits.
        (q << (-drop) as u32, lsb_exp)
    } else {
        let (kept, remainder, half) = if drop < 128 {
            let drop = drop as u32;
            (q >> drop, q & ((1u128 << drop) - 1), 1u128 << (drop - 1))
        } else if drop == 128 {
            (0, q, 1u128 << 127)
        } else {
            // Less than half of the lowest unit.
            (0, 0, 1)
        };
        let round_up = remainder > half || (remainder == half && (sticky || kept & 1 == 1));
        (kept + u128::from(round_up), lsb_exp)
    };
    if significand == 1u128 << 64 {
        significand >>= 1;
        lsb_exp += 1;
    }
    let significand = significand as u64;
    if significand == 0 {
        return Some(LongDouble {
            negative,
            ..LongDouble::ZERO
        });
    }
    let top = lsb_exp + 63 - significand.leading_zeros() as i32;
    if top > MAX_TOP_EXP {
        return None;
    }
    Some(LongDouble {
        negative,
        significand,
        exp: lsb_exp,
    })
}

/// Rounds the exact value `numerator / denominator * 2^exp2` to a long double. `None`
/// when it overflows or underflows to zero (`strtold`'s ERANGE cases Redis refuses).
fn round_ratio(mut numerator: Big, mut denominator: Big, exp2: i32) -> Option<LongDouble> {
    // Scale so that the quotient has 66 or 67 bits: 64 kept, a rounding bit, and more.
    let scale = 66 + denominator.bit_len() as i64 - numerator.bit_len() as i64;
    if scale >= 0 {
        numerator.shl(scale as u32);
    } else {
        denominator.shl((-scale) as u32);
    }
    let mut quotient: u128 = 0;
    for bit in (0..68u32).rev() {
        let mut shifted = denominator.clone();
        shifted.shl(bit);
        if numerator.cmp(&shifted) != Ordering::Less {
            numerator.sub_assign(&shifted);
            quotient |= 1u128 << bit;
        }
    }
    let sticky = !numerator.is_zero();
    let exp2 = i64::from(exp2) - scale;
    let exp2 = i32::try_from(exp2).ok()?;
    let value = round(false, quotient, sticky, exp2)?;
    if value.significand == 0 {
        return None;
    }
    Some(value)
}

/// Decimal digits with an optional point and exponent, e.g. `12.5e-3`, `.5`, `1.`.
fn parse_decimal(text: &[u8]) -> Option<LongDouble> {
    let mut digits: Vec<u8> = Vec::new();
    let mut exp10: i64 = 0;
    let mut i = 0;
    let mut seen_digit = false;
    while i < text.len() && text[i].is_ascii_digit() {
        digits.push(text[i] - b'0');
        seen_digit = true;
        i += 1;
    }
    if i < text.len() && text[i] == b'.' {
        i += 1;
        while i < text.len() && text[i].is_ascii_digit() {
            digits.push(text[i] - b'0');
            exp10 -= 1;
            seen_digit = true;
            i += 1;
        }
    }
    if !seen_digit {
        return None;
    }
    if i < text.len() && (text[i] | 0x20) == b'e' {
        exp10 = exp10.saturating_add(parse_exponent(&text[i + 1..])?);
        i = text.len();
    }
    if i != text.len() {
        return None;
    }
    // Leading zeros say nothing; trailing ones become exponent.
    let first = digits.iter().position(|&d| d != 0);
    let Some(first) = first else {
        return Some(LongDouble::ZERO);
    };
    let mut digits = &digits[first..];
    while let Some((&0, rest)) = digits.split_last() {
        digits = rest;
        exp10 = exp10.saturating_add(1);
    }
    // Far outside the range: overflow (~1.19e4932 is the largest) or underflow to zero
    // (~3.6e-4951 is the smallest).
    let leading_exp10 = exp10.saturating_add(digits.len() as i64 - 1);
    if leading_exp10 > 4933 {
        return None;
    }
    if leading_exp10 < -4952 {
        return None;
    }
    let mut numerator = Big::from_u64(0);
    for &d in digits {
        numerator.mul_add_small(10, u32::from(d));
    }
    let mut denominator = Big::from_u64(1);
    let (scale_up, power) = if exp10 >= 0 {
        (true, exp10)
    } else {
        (false, -exp10)
    };
    let target = if scale_up {
        &mut numerator
    } else {
        &mut denominator
    };
    let mut remaining = power;
    while remaining > 0 {
        let step = remaining.min(9) as u32;
        target.mul_add_small(10u32.pow(step), 0);
        remaining -= i64::from(step);
    }
    round_ratio(numerator, denominator, 0)
}

/// C's hexadecimal floats after the `0x`: hex digits, optional point, optional `p` exponent.
fn parse_hex(text: &[u8]) -> Option<LongDouble> {
    let mut numerator = Big::from_u64(0);
    let mut exp2: i64 = 0;
    let mut i = 0;
    let mut seen_digit = false;
    let mut significant = 0usize;
    let hex_value = |b: u8| (b as char).to_digit(16);
    while i < text.len() {
        let Some(d) = hex_value(text[i]) else { break };
        push_hex_digit(&mut numerator, d, &mut significant, &mut exp2, false);
        seen_digit = true;
        i += 1;
    }
    if i < text.len() && text[i] == b'.' {
        i += 1;
        while i < text.len() {
            let Some(d) = hex_value(text[i]) else { break };
            push_hex_digit(&mut numerator, d, &mut significant, &mut exp2, true);
            seen_digit = true;
            i += 1;
        }
    }
    if !seen_digit {
        return None;
    }
    if i < text.len() && (text[i] | 0x20) == b'p' {
        exp2 = exp2.saturating_add(parse_exponent(&text[i + 1..])?);
        i = text.len();
    }
    if i != text.len() {
        return None;
    }
    if numerator.is_zero() {
        return Some(LongDouble::ZERO);
    }
    let leading_exp2 = exp2.saturating_add(numerator.bit_len() as i64 - 1);
    // Far outside the range: overflow, or underflow to zero.
    if !(-16500..=16400).contains(&leading_exp2) {
        return None;
    }
    round_ratio(numerator, Big::from_u64(1), exp2 as i32)
}

/// Appends one hex digit. Digits past the 40th significant one only matter as sticky bits:
/// they are folded into the lowest bit so the number stays small.
fn push_hex_digit(
    numerator: &mut Big,
    digit: u32,
    significant: &mut usize,
    exp2: &mut i64,
    after_point: bool,
) {
    if numerator.is_zero() && digit == 0 {
        if after_point {
            *exp2 -= 4;
        }
        return;
    }
    if *significant < 40 {
        numerator.mul_add_small(16, digit);
        *significant += 1;
        if after_point {
            *exp2 -= 4;
        }
    } else {
        if digit != 0 {
            numerator.set_lowest_bit();
        }
        if !after_point {
            *exp2 += 4;
        }
    }
}

/// An exponent: optional sign and at least one digit, saturating far beyond any range.
fn parse_exponent(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut value: i64 = 0;
    for &d in digits {
        value = value
            .saturating_mul(10)
            .saturating_add(i64::from(d - b'0'))
            .min(1 << 40);
    }
    Some(if negative { -value } else { value })
}

/// A small unsigned big integer (little-endian 32-bit limbs), only what the above needs.
#[derive(Clone, Debug)]
struct Big(Vec<u32>);

impl Big {
    fn from_u64(value: u64) -> Big {
        let mut big = Big(vec![value as u32, (value >> 32) as u32]);
        big.trim();
        big
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn bit_len(&self) -> u64 {
        match self.0.last() {
            None => 0,
            Some(&top) => (self.0.len() as u64 - 1) * 32 + u64::from(32 - top.leading_zeros()),
        }
    }

    fn mul_add_small(&mut self, factor: u32, addend: u32) {
        let mut carry = u64::from(addend);
        for limb in self.0.iter_mut() {
            let product = u64::from(*limb) * u64::from(factor) + carry;
            *limb = product as u32;
            carry = product >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
        self.trim();
    }

    fn set_lowest_bit(&mut self) {
        match self.0.first_mut() {
            Some(limb) => *limb |= 1,
            None => self.0.push(1),
        }
    }

    fn shl(&mut self, bits: u32) {
        if self.is_zero() {
            return;
        }
        let limbs = (bits / 32) as usize;
        let bits = bits % 32;
        if bits > 0 {
            let mut carry = 0u32;
            for limb in self.0.iter_mut() {
                let next = *limb >> (32 - bits);
                *limb = (*limb << bits) | carry;
                carry = next;
            }
            if carry != 0 {
                self.0.push(carry);
            }
        }
        if limbs > 0 {
            self.0.splice(0..0, std::iter::repeat_n(0, limbs));
        }
    }

    fn cmp(&self, other: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }

    /// `self -= other`; `self >= other` is the caller's promise.
    fn sub_assign(&mut self, other: &Big) {
        let mut borrow = 0i64;
        for (i, limb) in self.0.iter_mut().enumerate() {
            let subtrahend = i64::from(other.0.get(i).copied().unwrap_or(0)) + borrow;
            let mut value = i64::from(*limb) - subtrahend;
            borrow = 0;
            if value < 0 {
                value += 1 << 32;
                borrow = 1;
            }
            *limb = value as u32;
        }
        self.trim();
    }

    /// Divides by `divisor`, returning the remainder.
    fn div_small(&mut self, divisor: u32) -> u32 {
        let mut remainder = 0u64;
        for limb in self.0.iter_mut().rev() {
            let current = (remainder << 32) | u64::from(*limb);
            *limb = (current / u64::from(divisor)) as u32;
            remainder = current % u64::from(divisor);
        }
        self.trim();
        remainder as u32
    }

    fn to_decimal(&self) -> Vec<u8> {
        if self.is_zero() {
            return b"0".to_vec();
        }
        let mut value = self.clone();
        let mut chunks = Vec::new();
        while !value.is_zero() {
            chunks.push(value.div_small(1_000_000_000));
        }
        let mut text = chunks.last().map(|c| c.to_string()).unwrap_or_default();
        for chunk in chunks.iter().rev().skip(1) {
            text.push_str(&format!("{chunk:09}"));
        }
        text.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(a: &str, b: &str) -> String {
        let (Some(Number::Finite(a)), Some(Number::Finite(b))) = (
            LongDouble::parse(a.as_bytes()),
            LongDouble::parse(b.as_bytes()),
        ) else {
            panic!("not finite: {a} {b}");
        };
        String::from_utf8(a.add(b).expect("finite").to_human()).unwrap()
    }

    #[test]
    fn sums_as_redis_prints_them() {
        // Expected values are what redis-server 7.0.15 on x86-64 answers.
        assert_eq!(sum("10.5", "0.1"), "10.6");
        assert_eq!(sum("0.1", "0.2"), "0.3");
        assert_eq!(sum("1000.1", "0.1"), "1000.19999999999999996");
        assert_eq!(sum("123456.789", "0.001"), "123456.78999999999999915");
        assert_eq!(sum("1e10", "0.3"), "10000000000.29999999981373549");
        assert_eq!(sum("99999999.99", "0.01"), "100000000");
        assert_eq!(sum("3.0e3", "3.0e3"), "6000");
        assert_eq!(sum("17179869184", "1.5"), "17179869185.5");
        assert_eq!(sum("1", "-1.1"), "-0.1");
        assert_eq!(sum("0.000003814697265625", "0"), "0.00000381469726562");
        assert_eq!(sum("0x1.8p3", "0x10"), "28");
        assert_eq!(sum("1e-4950", "0"), "0");
        assert_eq!(sum("-0", "0"), "0");
        assert_eq!(sum("-1e-30", "0"), "0");
    }

    #[test]
    fn parsing_rules() {
        for bad in [
            "", " 1", "1 ", "1e", "e1", ".", "0x", "1.2.3", "nan", "1e-4952", "1e4933", "--1",
            "1\x002",
        ] {
            assert_eq!(LongDouble::parse(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(LongDouble::parse(b"+inf"), Some(Number::Infinite));
        assert_eq!(LongDouble::parse(b"-Infinity"), Some(Number::Infinite));
        assert!(LongDouble::parse(b"1.").is_some());
        assert!(LongDouble::parse(b".5").is_some());
        assert!(LongDouble::parse(b"1.1e4932").is_some());
    }

    #[test]
    fn overflow_is_refused() {
        let Some(Number::Finite(big)) = LongDouble::parse(b"1.1e4932") else {
            panic!()
        };
        assert!(big.add(big).is_none());
    }
}
