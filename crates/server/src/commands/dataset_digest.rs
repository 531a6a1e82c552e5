//! DEBUG DIGEST and DEBUG DIGEST-VALUE: a SHA-1 based fingerprint of the data set or of
//! values, computed as redis-server computes it, so the same data gives the same hex
//! string on both servers (Redis' test suite compares a server's digest before and after
//! a reload, and a primary's with its replica's).
//!
//! The scheme (Redis' debug.c): `xor(d, data)` xors SHA1(data) into the 20-byte digest
//! `d`, so unordered parts (keys, set members, hash fields) may come in any order;
//! `mix(d, data)` sets `d = SHA1(d xor SHA1(data))`, so ordered parts (list elements,
//! stream entries) count in their order. A value's digest mixes its type number (4 bytes,
//! big-endian) and then its contents; a key with a TTL xors in `!!expire!!`. A key's digest
//! is `mix(key)` followed by its value's; the data set's digest mixes in each non-empty
//! database's number and then `xor`s in each key's digest; an empty data set is all zeros.

use latch_keyspace::stream::StreamId;
use latch_keyspace::{Elem, Slot, Value};

pub type Digest = [u8; 20];

fn sha1(data: &[u8]) -> Digest {
    sha1_smol::Sha1::from(data).digest().bytes()
}

fn xor(digest: &mut Digest, data: &[u8]) {
    for (d, h) in digest.iter_mut().zip(sha1(data)) {
        *d ^= h;
    }
}

fn mix(digest: &mut Digest, data: &[u8]) {
    xor(digest, data);
    *digest = sha1(&digest[..]);
}

/// An element as Redis' digest reads it: its text (integers in decimal).
fn elem_text(elem: Elem<'_>) -> Vec<u8> {
    elem.to_vec()
}

/// Redis' type numbers (OBJ_STRING ... OBJ_STREAM).
fn type_number(value: &Value) -> u32 {
    match value {
        Value::Str(_) => 0,
        Value::List(_) => 1,
        Value::Set(_) => 2,
        Value::ZSet(_) => 3,
        Value::Hash(_) => 4,
        Value::Stream(_) => 6,
    }
}

/// Mixes a value (and whether it has a TTL) into `digest`, as DEBUG DIGEST-VALUE does.
pub fn mix_value(digest: &mut Digest, value: &Value, has_ttl: bool) {
    mix(digest, &type_number(value).to_be_bytes());
    match value {
        Value::Str(bytes) => mix(digest, bytes),
        Value::List(list) => list.scan(0, |elem| {
            mix(digest, &elem_text(elem));
            true
        }),
        Value::Set(members) => {
            for member in members.iter() {
                xor(digest, &elem_text(member));
            }
        }
        Value::ZSet(set) => {
            let mut score_text = Vec::new();
            for (member, score) in set.iter() {
                let mut element = [0u8; 20];
                mix(&mut element, &member);
                score_text.clear();
                latch_protocol::format_double_g17(score, &mut score_text);
                mix(&mut element, &score_text);
                xor(digest, &element);
            }
        }
        Value::Hash(hash) => {
            for (field, value) in hash.iter() {
                let mut element = [0u8; 20];
                mix(&mut element, &elem_text(field));
                mix(&mut element, &elem_text(value));
                xor(digest, &element);
            }
        }
        Value::Stream(stream) => {
            for (id, fields) in stream.range(StreamId::MIN, StreamId::MAX) {
                mix(digest, format!("{}.{}", id.ms, id.seq).as_bytes());
                for part in fields {
                    mix(digest, part);
                }
            }
        }
    }
    if has_ttl {
        xor(digest, b"!!expire!!");
    }
}

/// The digest of one stored key: `mix(key)`, then its value's.
pub fn key_digest(slot: &Slot) -> Digest {
    let mut digest = [0u8; 20];
    mix(&mut digest, slot.key());
    mix_value(&mut digest, slot.value(), slot.deadline().is_some());
    digest
}

/// Folds one database's key digests into the data set's: the database number is mixed in
/// first (only for databases that hold keys), then every key's digest `xor`ed in.
pub fn fold_db(total: &mut Digest, db: usize, keys: &[Digest]) {
    if keys.is_empty() {
        return;
    }
    mix(total, &(db as u32).to_be_bytes());
    for key in keys {
        xor(total, key);
    }
}

/// Lower-case hex, as the reply shows a digest.
pub fn hex(digest: &Digest) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unordered_parts_do_not_depend_on_order_and_ordered_ones_do() {
        let (mut a, mut b) = ([0u8; 20], [0u8; 20]);
        xor(&mut a, b"x");
        xor(&mut a, b"y");
        xor(&mut b, b"y");
        xor(&mut b, b"x");
        assert_eq!(a, b);
        let (mut c, mut d) = ([0u8; 20], [0u8; 20]);
        mix(&mut c, b"x");
        mix(&mut c, b"y");
        mix(&mut d, b"y");
        mix(&mut d, b"x");
        assert_ne!(c, d);
    }

    #[test]
    fn an_empty_data_set_is_all_zeros() {
        let mut total = [0u8; 20];
        fold_db(&mut total, 0, &[]);
        assert_eq!(hex(&total), "0".repeat(40));
    }
}
