//! What a key holds.

use crate::clock::Deadline;
use crate::hash::Hash;
use crate::list::List;
use crate::set::Set;
use crate::stream::Stream;
use crate::zset::SortedSet;

/// The value stored under a key. Each data type joins this enum (and the persistence
/// format) in one place. Every variant but the string and the hash (16 bytes: a form and
/// one pointer) is boxed, so the enum (and with it every key's slot) is only as large as a
/// `Vec`: most keys hold strings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// A binary-safe string.
    Str(Vec<u8>),
    /// A list: one pack when small, else a boxed deque of packs (16 bytes either way).
    List(List),
    Set(Set),
    /// A hash: one pack when small, else a box of its table (16 bytes either way).
    Hash(Hash),
    /// Unboxed: a sorted set is 16 bytes (a listpack or a box of its large form).
    ZSet(SortedSet),
    Stream(Box<Stream>),
}

/// The kinds of value, as `TYPE` and `SCAN ... TYPE` name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    String,
    List,
    Set,
    Hash,
    ZSet,
    Stream,
}

const KINDS: &[(ValueKind, &str)] = &[
    (ValueKind::String, "string"),
    (ValueKind::List, "list"),
    (ValueKind::Set, "set"),
    (ValueKind::Hash, "hash"),
    (ValueKind::ZSet, "zset"),
    (ValueKind::Stream, "stream"),
];

impl ValueKind {
    pub fn name(self) -> &'static str {
        KINDS
            .iter()
            .find(|(k, _)| *k == self)
            .map(|(_, n)| *n)
            .unwrap_or("none")
    }

    pub fn from_name(name: &[u8]) -> Option<ValueKind> {
        KINDS
            .iter()
            .find(|(_, n)| name.eq_ignore_ascii_case(n.as_bytes()))
            .map(|(k, _)| *k)
    }
}

/// Redis keeps strings up to this length in one allocation with their header ("embstr").
const EMBSTR_MAX_LEN: usize = 44;

impl Value {
    pub fn kind(&self) -> ValueKind {
        match self {
            Value::Str(_) => ValueKind::String,
            Value::List(_) => ValueKind::List,
            Value::Set(_) => ValueKind::Set,
            Value::Hash(_) => ValueKind::Hash,
            Value::ZSet(_) => ValueKind::ZSet,
            Value::Stream(_) => ValueKind::Stream,
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
            // Redis 7.0 keeps every list in a quicklist.
            Value::List(_) => "quicklist",
            Value::Set(set) => set.encoding(),
            Value::Hash(hash) => hash.encoding(),
            Value::ZSet(set) => set.encoding(),
            Value::Stream(_) => "stream",
        }
    }

    /// Bytes of heap memory this value uses, roughly (for `MEMORY USAGE`).
    pub fn heap_bytes(&self) -> usize {
        match self {
            Value::Str(bytes) => bytes.capacity(),
            Value::List(list) => list.heap_bytes(),
            Value::Set(set) => set.heap_bytes(),
            Value::Hash(hash) => hash.heap_bytes(),
            Value::ZSet(set) => set.heap_bytes(),
            Value::Stream(stream) => stream.heap_bytes(),
        }
    }

    /// About how many allocations dropping this value walks (Redis' lazyfree effort): what
    /// decides whether [`crate::lazyfree`] frees it in the background.
    pub fn free_effort(&self) -> usize {
        match self {
            Value::Str(_) => 1,
            // As Redis counts: one allocation for a compact form, a node of a list.
            _ if matches!(self.encoding(), "listpack" | "intset") => 1,
            Value::List(list) => list.node_count(),
            Value::Set(set) => set.len(),
            Value::Hash(hash) => hash.len(),
            Value::ZSet(set) => set.len(),
            Value::Stream(stream) => stream.len(),
        }
    }
}

const _: () = assert!(std::mem::size_of::<Value>() == 24);

/// One key's value with its deadline (32 bytes). The access time (`OBJECT IDLETIME`) is kept
/// next to it in the key's [`Slot`](crate::Slot).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub value: Value,
    pub deadline: Option<Deadline>,
}

impl Entry {
    pub fn new(value: Value) -> Entry {
        Entry {
            value,
            deadline: None,
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
