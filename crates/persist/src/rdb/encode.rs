//! Writing values in RDB form, choosing the encodings Redis 7.0 itself would.
//!
//! Encoders write into a [`Sink`], which cannot fail: the file writer buffers and keeps the
//! first I/O error for later, so the encoders need no error paths.

use latch_keyspace::{parse_i64_strict, Elem, List, Value};

use super::{listpack, stream, types};
use crate::lzf;

/// Where encoded bytes go.
pub(crate) trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Redis' default `list-max-listpack-size -2`: list nodes of at most 8 KB.
const LIST_NODE_MAX_BYTES: usize = 8192;
/// Redis' estimate of a list element's overhead when deciding whether it fits a node.
const LIST_ELEMENT_OVERHEAD: usize = 8;
/// List elements this large get a node of their own, stored as-is ("plain").
const LIST_PLAIN_THRESHOLD: usize = 1 << 30;
/// Quicklist node containers.
pub(crate) const CONTAINER_PLAIN: u64 = 1;
pub(crate) const CONTAINER_PACKED: u64 = 2;

/// A length: 6 bits in one byte, 14 bits in two, then 32 or 64 bits big-endian after a
/// marker byte.
pub(crate) fn put_len(out: &mut impl Sink, len: u64) {
    if len < 1 << 6 {
        out.put(&[len as u8]);
    } else if len < 1 << 14 {
        out.put(&[0x40 | (len >> 8) as u8, len as u8]);
    } else if let Ok(len) = u32::try_from(len) {
        out.put(&[0x80]);
        out.put(&len.to_be_bytes());
    } else {
        out.put(&[0x81]);
        out.put(&len.to_be_bytes());
    }
}

/// A string: as a small integer when it is the canonical form of one that fits 32 bits,
/// LZF-compressed when longer than 20 bytes and compression saves at least 4 bytes (Redis'
/// rule), otherwise length and bytes.
pub(crate) fn put_string(out: &mut impl Sink, s: &[u8]) {
    if s.len() <= 11 {
        if let Some(v) = parse_i64_strict(s) {
            if let Ok(v8) = i8::try_from(v) {
                out.put(&[0xc0, v8 as u8]);
                return;
            }
            if let Ok(v16) = i16::try_from(v) {
                let b = v16.to_le_bytes();
                out.put(&[0xc1, b[0], b[1]]);
                return;
            }
            if let Ok(v32) = i32::try_from(v) {
                let b = v32.to_le_bytes();
                out.put(&[0xc2, b[0], b[1], b[2], b[3]]);
                return;
            }
        }
    }
    if s.len() > 20 {
        if let Some(packed) = lzf::compress(s).filter(|p| p.len() + 4 <= s.len()) {
            out.put(&[0xc3]);
            put_len(out, packed.len() as u64);
            put_len(out, s.len() as u64);
            out.put(&packed);
            return;
        }
    }
    put_len(out, s.len() as u64);
    out.put(s);
}

fn put_header(out: &mut impl Sink, kind: u8, key: Option<&[u8]>) {
    out.put(&[kind]);
    if let Some(key) = key {
        put_string(out, key);
    }
}

/// A Unix time in milliseconds, 8 bytes little-endian.
pub(crate) fn put_millis(out: &mut impl Sink, ms: i64) {
    out.put(&ms.to_le_bytes());
}

/// Whether Redis would refuse to load the value because it is empty (every type but
/// streams must hold something).
pub(crate) fn is_empty_collection(value: &Value) -> bool {
    match value {
        Value::Str(_) | Value::Stream(_) => false,
        Value::List(list) => list.is_empty(),
        Value::Set(members) => members.is_empty(),
        Value::Hash(hash) => hash.is_empty(),
        Value::ZSet(set) => set.is_empty(),
    }
}

/// Writes the value's type byte, then `key` when given (RDB files put the key between
/// the two), then the value.
pub(crate) fn put_typed_value(out: &mut impl Sink, key: Option<&[u8]>, value: &Value) {
    match value {
        Value::Str(s) => {
            put_header(out, types::STRING, key);
            put_string(out, s);
        }
        Value::List(list) => {
            put_header(out, types::LIST_QUICKLIST_2, key);
            put_list(out, list);
        }
        Value::Set(members) => match members.intset_bytes() {
            // The intset form holds Redis' intset bytes.
            Some(bytes) => {
                put_header(out, types::SET_INTSET, key);
                put_string(out, bytes);
            }
            None => {
                put_header(out, types::SET, key);
                put_len(out, members.len() as u64);
                let mut text = Vec::new();
                for member in members.iter() {
                    text.clear();
                    member.append_to(&mut text);
                    put_string(out, &text);
                }
            }
        },
        // A compact hash is a listpack in Redis too: its pack becomes one, element by
        // element, in its order.
        Value::Hash(hash) => match hash.as_pack() {
            Some(pack) => {
                put_header(out, types::HASH_LISTPACK, key);
                let mut lp = listpack::Builder::new();
                for elem in pack.iter() {
                    lp.push_elem(elem);
                }
                put_string(out, &lp.finish());
            }
            None => {
                put_header(out, types::HASH, key);
                put_len(out, hash.len() as u64);
                for (field, value) in hash.iter() {
                    put_elem(out, field);
                    put_elem(out, value);
                }
            }
        },
        Value::ZSet(set) => {
            if let Some(pack) = set.pack() {
                // Straight from the set's own listpack: members as they are, scores as the
                // text Redis would have stored (which its listpack keeps as an integer
                // when it reads as one).
                put_header(out, types::ZSET_LISTPACK, key);
                let mut lp = listpack::Builder::new();
                let mut elems = pack.iter();
                while let (Some(member), Some(score)) = (elems.next(), elems.next()) {
                    match member {
                        Elem::Int(n) => lp.push_int(n),
                        _ => lp.push(member.as_bytes().expect("a member is bytes or an integer")),
                    }
                    let score = score.as_f64().expect("a score is a number");
                    lp.push(score_text(score).as_bytes());
                }
                put_string(out, &lp.finish());
            } else {
                put_header(out, types::ZSET_2, key);
                put_len(out, set.len() as u64);
                // Highest first, as Redis writes them: loading then always inserts at the
                // head of its skiplist.
                for (member, score) in set.iter().rev() {
                    put_string(out, &member);
                    out.put(&score.to_le_bytes());
                }
            }
        }
        Value::Stream(s) => {
            put_header(out, types::STREAM_LISTPACKS_2, key);
            stream::put_stream(out, s);
        }
    }
}

/// An element of a collection as an RDB string (its text: integers in decimal).
fn put_elem(out: &mut impl Sink, elem: Elem<'_>) {
    match elem.as_bytes() {
        Some(bytes) => put_string(out, bytes),
        None => put_string(out, &elem.to_vec()),
    }
}

/// A score as text that reads back as exactly the same double: integers as integers (the
/// listpack then stores them as such, like Redis), otherwise the shortest round-trip form.
/// Redis parses at most 127 characters of it, so large magnitudes use an exponent.
pub(crate) fn score_text(score: f64) -> String {
    if score.is_nan() {
        return "nan".to_string();
    }
    if score.is_infinite() {
        return if score > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    // Redis' range for printing doubles as integers: half of i64 either way.
    const INT_LIMIT: f64 = (i64::MAX / 2) as f64;
    if score.fract() == 0.0 && score.abs() <= INT_LIMIT {
        if score == 0.0 && score.is_sign_negative() {
            return "-0".to_string();
        }
        return (score as i64).to_string();
    }
    let plain = score.to_string();
    let exponent = format!("{score:e}");
    if exponent.len() < plain.len() {
        exponent
    } else {
        plain
    }
}

/// A quicklist node as the encoder plans it: how many elements go in it.
enum ListNode {
    Packed(usize),
    Plain,
}

/// Bytes an element takes in a listpack, backlen included.
fn listpack_size(elem: Elem<'_>) -> usize {
    match elem {
        Elem::Bytes(item) => listpack::element_size(item),
        Elem::Int(n) => listpack::int_element_size(n),
        Elem::Float(x) => listpack::element_size(x.to_string().as_bytes()),
    }
}

/// Characters in the decimal form of `n`.
fn decimal_len(n: i64) -> usize {
    let digits = n
        .unsigned_abs()
        .checked_ilog10()
        .map_or(1, |d| d as usize + 1);
    digits + usize::from(n < 0)
}

/// A list as a quicklist of listpack nodes, read straight from the list's own nodes but
/// cut where Redis would cut them (8 KB listpacks; elements of 1 GiB or more as plain
/// nodes), so a server that loads the file holds the list as if it had been pushed there.
fn put_list(out: &mut impl Sink, list: &List) {
    // Plan the nodes first: the node count comes before the nodes.
    let mut nodes = Vec::new();
    let (mut count, mut bytes) = (0, 0);
    list.scan(0, |elem| {
        if elem
            .as_bytes()
            .is_some_and(|b| b.len() >= LIST_PLAIN_THRESHOLD)
        {
            if count > 0 {
                nodes.push(ListNode::Packed(count));
            }
            nodes.push(ListNode::Plain);
            count = 0;
            return true;
        }
        let size = listpack_size(elem);
        // Redis' estimate: the length of the string pushed plus 8 bytes.
        let estimate = match elem {
            Elem::Bytes(item) => item.len(),
            Elem::Int(n) => decimal_len(n),
            Elem::Float(_) => size,
        } + LIST_ELEMENT_OVERHEAD;
        if count > 0 && bytes + estimate > LIST_NODE_MAX_BYTES {
            nodes.push(ListNode::Packed(count));
            count = 0;
        }
        if count == 0 {
            bytes = listpack::Builder::new().bytes();
        }
        bytes += size;
        count += 1;
        true
    });
    if count > 0 {
        nodes.push(ListNode::Packed(count));
    }
    put_len(out, nodes.len() as u64);
    // Then the elements again, node by node as planned.
    let mut plan = nodes.into_iter();
    let mut building: Option<(listpack::Builder, usize)> = None;
    list.scan(0, |elem| {
        if building.is_none() {
            match plan.next() {
                Some(ListNode::Plain) => {
                    put_len(out, CONTAINER_PLAIN);
                    put_string(out, elem.as_bytes().unwrap_or_default());
                    return true;
                }
                Some(ListNode::Packed(count)) => {
                    building = Some((listpack::Builder::new(), count));
                }
                None => return false,
            }
        }
        let Some((lp, left)) = building.as_mut() else {
            return false;
        };
        match elem {
            // A pack keeps every canonical integer as one: bytes are never one.
            Elem::Bytes(item) => lp.push_str(item),
            Elem::Int(n) => lp.push_int(n),
            Elem::Float(x) => lp.push(x.to_string().as_bytes()),
        }
        *left -= 1;
        if *left == 0 {
            if let Some((lp, _)) = building.take() {
                put_len(out, CONTAINER_PACKED);
                put_string(out, &lp.finish());
            }
        }
        true
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(s: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        put_string(&mut out, s);
        out
    }

    #[test]
    fn lengths() {
        let cases: [(u64, &[u8]); 5] = [
            (5, &[0x05]),
            (300, &[0x41, 0x2c]),
            (70_000, &[0x80, 0, 1, 0x11, 0x70]),
            (u32::MAX as u64, &[0x80, 0xff, 0xff, 0xff, 0xff]),
            (1 << 32, &[0x81, 0, 0, 0, 1, 0, 0, 0, 0]),
        ];
        for (len, bytes) in cases {
            let mut out = Vec::new();
            put_len(&mut out, len);
            assert_eq!(out, bytes, "{len}");
        }
    }

    #[test]
    fn strings_as_redis_writes_them() {
        assert_eq!(encoded(b"12"), [0xc0, 12]);
        assert_eq!(encoded(b"-129"), [0xc1, 0x7f, 0xff]);
        assert_eq!(encoded(b"100000"), [0xc2, 0xa0, 0x86, 0x01, 0x00]);
        // Beyond 32 bits, or not canonical: plain text.
        assert_eq!(encoded(b"4294967296"), b"\x0a4294967296");
        assert_eq!(encoded(b"012"), b"\x03012");
        assert_eq!(encoded(b""), [0]);
        let long = vec![b'a'; 100];
        assert_eq!(encoded(&long)[0], 0xc3);
    }

    #[test]
    fn score_texts() {
        assert_eq!(score_text(1.0), "1");
        assert_eq!(score_text(-3.0), "-3");
        assert_eq!(score_text(1.5), "1.5");
        assert_eq!(score_text(f64::INFINITY), "inf");
        assert_eq!(score_text(f64::NEG_INFINITY), "-inf");
        assert_eq!(score_text(1e300), "1e300");
        for v in [
            0.1,
            1e-300,
            123456.789,
            f64::MAX,
            f64::MIN_POSITIVE,
            9.3e18,
            -4e-7,
        ] {
            let text = score_text(v);
            assert!(text.len() < 128);
            assert_eq!(text.parse::<f64>().unwrap(), v, "{text}");
        }
    }
}
