//! Geo commands (Redis' "geo" group). Positions live in ordinary sorted sets, each
//! member's score being its 52-bit geohash, so every sorted-set command works on them too.
//!
//! - [`hash`]: the geohash arithmetic (encoding, cells, neighbours, distances).
//! - [`points`]: GEOADD, GEOPOS, GEODIST, GEOHASH.
//! - [`search`]: GEORADIUS, GEORADIUSBYMEMBER (and their _RO forms), GEOSEARCH,
//!   GEOSEARCHSTORE.
//! - [`specs`]: the command-table entries.
//!
//! Shared here: finding a key's sorted set, Redis' number and unit parsing for these
//! commands, and the two number formats geo replies use.

mod hash;
mod points;
mod search;
mod specs;

use latch_keyspace::{Locked, SortedSet, Value};
use latch_protocol::{Reply, Resp};

pub use specs::COMMANDS;

/// The key holds something other than a sorted set (the caller answers WRONGTYPE).
struct WrongType;

/// The sorted set under `key`: `Ok(None)` when there is no key.
fn zset_at<'a>(
    keys: &'a mut Locked<'_>,
    db: usize,
    key: &[u8],
) -> Result<Option<&'a mut SortedSet>, WrongType> {
    match keys.get(db, key) {
        None => Ok(None),
        Some(Value::ZSet(set)) => Ok(Some(set)),
        Some(
            Value::Str(_) | Value::List(_) | Value::Set(_) | Value::Hash(_) | Value::Stream(_),
        ) => Err(WrongType),
    }
}

/// Parses a number as Redis' `getDoubleFromObject`: the whole argument, no leading space,
/// `inf` spelled out is fine, but overflow to infinity, underflow to zero and NaN are not.
fn parse_double(arg: &[u8]) -> Option<f64> {
    let value = super::parse_f64(arg)?;
    let unsigned = arg
        .strip_prefix(b"-")
        .or_else(|| arg.strip_prefix(b"+"))
        .unwrap_or(arg);
    let spelled_infinite =
        unsigned.eq_ignore_ascii_case(b"inf") || unsigned.eq_ignore_ascii_case(b"infinity");
    if value.is_infinite() && !spelled_infinite {
        return None;
    }
    let mantissa = unsigned
        .split(|&b| b == b'e' || b == b'E')
        .next()
        .unwrap_or_default();
    if value == 0.0 && mantissa.iter().any(|b| matches!(b, b'1'..=b'9')) {
        return None;
    }
    Some(value)
}

/// A longitude/latitude pair from two arguments, or Redis' error text.
fn parse_lon_lat(longitude: &[u8], latitude: &[u8]) -> Result<[f64; 2], Vec<u8>> {
    let (Some(x), Some(y)) = (parse_double(longitude), parse_double(latitude)) else {
        return Err(super::err::NOT_FLOAT.to_vec());
    };
    if !(hash::LONG_MIN..=hash::LONG_MAX).contains(&x)
        || !(hash::LAT_MIN..=hash::LAT_MAX).contains(&y)
    {
        return Err(format!("ERR invalid longitude,latitude pair {x:.6},{y:.6}").into_bytes());
    }
    Ok([x, y])
}

/// Metres per unit, or Redis' error text.
fn parse_unit(unit: &[u8]) -> Result<f64, &'static [u8]> {
    const UNITS: &[(&str, f64)] = &[("m", 1.0), ("km", 1000.0), ("ft", 0.3048), ("mi", 1609.34)];
    UNITS
        .iter()
        .find(|(name, _)| unit.eq_ignore_ascii_case(name.as_bytes()))
        .map(|(_, metres)| *metres)
        .ok_or(&b"ERR unsupported unit provided. please use M, KM, FT, MI"[..])
}

/// A distance as geo replies show it: rounded (half to even) to four decimals, always with
/// all four (`0.0000`, `166.2742`).
fn format_distance(distance: f64) -> String {
    if distance == 0.0 {
        return "0.0000".to_string();
    }
    let scaled = (distance * 10000.0).round_ties_even();
    // Distances are bounded by half the Earth's circumference (in the smallest unit, feet),
    // far inside i64; saturation only guards nonsense.
    let units = scaled as i64;
    let sign = if units < 0 { "-" } else { "" };
    let magnitude = units.unsigned_abs();
    format!("{sign}{}.{:04}", magnitude / 10000, magnitude % 10000)
}

/// A coordinate as Redis prints it: C's `%.17f` of the exact value, then trailing zeros
/// (and a bare point) dropped, "-0" shown as "0".
fn format_coordinate(value: f64) -> String {
    if !value.is_finite() {
        return if value.is_nan() {
            "nan".into()
        } else if value > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    let bits = value.to_bits();
    let negative = bits >> 63 == 1;
    let exponent_field = ((bits >> 52) & 0x7ff) as i32;
    let fraction_field = bits & ((1u64 << 52) - 1);
    // value = significand * 2^exponent exactly.
    let (significand, exponent) = if exponent_field == 0 {
        (fraction_field, -1074)
    } else {
        (fraction_field | (1u64 << 52), exponent_field - 1075)
    };
    const SCALE: u128 = 100_000_000_000_000_000; // 10^17
    let mut text = String::new();
    if negative {
        text.push('-');
    }
    if exponent >= 0 {
        // An integer; Rust prints integral floats exactly.
        text.push_str(&format!("{:.0}", value.abs()));
    } else {
        let k = (-exponent) as u32;
        let significand = u128::from(significand);
        let (mut integer, fraction) = if k < 64 {
            (significand >> k, significand & ((1u128 << k) - 1))
        } else {
            (0, significand)
        };
        // fraction < 2^53 and 10^17 < 2^57: the product fits in u128.
        let scaled = fraction * SCALE;
        let mut decimals = if k < 127 {
            let quotient = scaled >> k;
            let remainder = scaled & ((1u128 << k) - 1);
            let half = 1u128 << (k - 1);
            let round_up = remainder > half || (remainder == half && quotient & 1 == 1);
            quotient + u128::from(round_up)
        } else {
            // Below 2^-74: under half a unit of the 17th decimal.
            0
        };
        if decimals == SCALE {
            integer += 1;
            decimals = 0;
        }
        text.push_str(&format!("{integer}.{decimals:017}"));
        while text.ends_with('0') {
            text.pop();
        }
        if text.ends_with('.') {
            text.pop();
        }
    }
    if text == "-0" {
        text = "0".into();
    }
    text
}

/// A coordinate reply: a bulk string in RESP2, a RESP3 double (`,13.36...`) otherwise.
fn reply_coordinate(reply: &mut Reply, value: f64) {
    let text = format_coordinate(value);
    match reply.resp() {
        Resp::V2 => reply.bulk(text.as_bytes()),
        _ => {
            let mut line = Vec::with_capacity(text.len() + 3);
            line.push(b',');
            line.extend_from_slice(text.as_bytes());
            line.extend_from_slice(b"\r\n");
            reply.raw(&line);
        }
    }
}

/// A `[longitude, latitude]` pair reply.
fn reply_position(reply: &mut Reply, position: [f64; 2]) {
    reply.array(2);
    reply_coordinate(reply, position[0]);
    reply_coordinate(reply, position[1]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(format_distance(0.0), "0.0000");
        assert_eq!(format_distance(0.775), "0.7750");
        assert_eq!(format_distance(166274.1516), "166274.1516");
        assert_eq!(format_distance(0.00004), "0.0000");
        assert_eq!(format_distance(0.00005), "0.0000"); // just below half in binary
        assert_eq!(format_distance(1.23456), "1.2346");
    }

    #[test]
    fn coordinates() {
        assert_eq!(
            format_coordinate(13.361389338970184),
            "13.36138933897018433"
        );
        assert_eq!(format_coordinate(38.1155563954963), "38.11555639549629859");
        assert_eq!(format_coordinate(10.0), "10");
        assert_eq!(format_coordinate(-0.0), "0");
        assert_eq!(format_coordinate(0.5), "0.5");
        assert_eq!(format_coordinate(-180.0), "-180");
        assert_eq!(format_coordinate(1e-30), "0");
        assert_eq!(format_coordinate(-1e-30), "0");
    }

    #[test]
    fn doubles() {
        assert_eq!(parse_double(b"1.5"), Some(1.5));
        assert_eq!(parse_double(b"inf"), Some(f64::INFINITY));
        assert_eq!(parse_double(b"1e400"), None);
        assert_eq!(parse_double(b"1e-400"), None);
        assert_eq!(parse_double(b" 1"), None);
        assert_eq!(parse_double(b"0"), Some(0.0));
    }
}
