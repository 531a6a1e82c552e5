//! What a key holds.

use crate::clock::Deadline;

/// The value stored under a key. Strings only for now; each data type joins this enum
/// (and the persistence format) in one place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// A binary-safe string.
    Str(Vec<u8>),
}

/// The kinds of value, as `TYPE` and `SCAN ... TYPE` name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    String,
}

impl ValueKind {
    pub fn name(self) -> &'static str {
        match self {
            ValueKind::String => "string",
        }
    }

    pub fn from_name(name: &[u8]) -> Option<ValueKind> {
        if name.eq_ignore_ascii_case(b"string") {
            Some(ValueKind::String)
        } else {
            None
        }
    }
}

/// Redis keeps strings up to this length in one allocation with their header ("embstr").
const EMBSTR_MAX_LEN: usize = 44;

impl Value {
    pub fn kind(&self) -> ValueKind {
        match self {
            Value::Str(_) => ValueKind::String,
        }
    }

    /// The encoding `OBJECT ENCODING` reports, derived the way Redis chooses it at `SET` time.
    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Str(bytes) => {
                if bytes.len() <= 20 && parse_i64_strict(bytes).is_some() {
                    "int"
                } else if bytes.len() <= EMBSTR_MAX_LEN {
                    "embstr"
                } else {
                    "raw"
                }
            }
        }
    }

    /// Bytes of heap memory this value uses, roughly (for `MEMORY USAGE`).
    pub fn heap_bytes(&self) -> usize {
        match self {
            Value::Str(bytes) => bytes.capacity(),
        }
    }
}

/// One key's value with its metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub value: Value,
    pub deadline: Option<Deadline>,
    /// Seconds on the keyspace clock when the key was last read or written (`OBJECT IDLETIME`).
    pub access_s: u32,
}

impl Entry {
    pub fn new(value: Value) -> Entry {
        Entry {
            value,
            deadline: None,
            access_s: 0,
        }
    }
}

/// Parses a decimal integer the way Redis' `string2ll` does: no spaces, no `+`, no leading
/// zeros (except "0"), no "-0", must fit in an i64.
pub fn parse_i64_strict(bytes: &[u8]) -> Option<i64> {
    let (negative, digits) = match bytes.split_first() {
        None => return None,
        Some((b'-', rest)) => (true, rest),
        Some(_) => (false, bytes),
    };
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    if digits[0] == b'0' {
        return if digits.len() == 1 && !negative {
            Some(0)
        } else {
            None
        };
    }
    let mut value: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let digit = (d - b'0') as i64;
        value = if negative {
            value.checked_mul(10)?.checked_sub(digit)?
        } else {
            value.checked_mul(10)?.checked_add(digit)?
        };
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_integers() {
        assert_eq!(parse_i64_strict(b"0"), Some(0));
        assert_eq!(parse_i64_strict(b"-1"), Some(-1));
        assert_eq!(parse_i64_strict(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64_strict(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"01",
            b"-0",
            b"+1",
            b" 1",
            b"1 ",
            b"9223372036854775808",
            b"1a",
        ] {
            assert_eq!(parse_i64_strict(bad), None, "{:?}", bad);
        }
    }

    #[test]
    fn encodings() {
        assert_eq!(Value::Str(b"12345".to_vec()).encoding(), "int");
        assert_eq!(Value::Str(b"hello".to_vec()).encoding(), "embstr");
        assert_eq!(Value::Str(vec![b'x'; 45]).encoding(), "raw");
    }
}
