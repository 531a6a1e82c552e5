//! The hash value, in the two forms Redis 7.0 keeps one in.
//!
//! - **Compact** (`OBJECT ENCODING` "listpack"): one [`Pack`] of field, value, field,
//!   value... in insertion order. A new field goes at the end; a new value for a field
//!   keeps its place. Lookups scan, which is what the thresholds keep cheap.
//! - **Large** ("hashtable"): a hash table of pairs, each a field and its value in one
//!   allocation behind a thin pointer (9 bytes a bucket with its control byte, where a
//!   `HashMap<Vec<u8>, Vec<u8>>` takes 49 and two more allocations), resized a step at a
//!   time as Redis rehashes ([`IncrementalTable`]).
//!
//! A hash starts compact and turns large, for good, when a write passes a threshold
//! (`hash-max-listpack-entries`, `hash-max-listpack-value`, or 1 GiB of pack), exactly where
//! Redis' `t_hash.c` converts: before storing a field or value longer than the value limit,
//! after a write leaves more entries than the entry limit. Loading decides afresh, as Redis'
//! `rdbLoadObject` does ([`Hash::load`]).

use std::fmt;
use std::sync::LazyLock;

use rand::seq::index::sample;
use rand::Rng;

use crate::compact;
use crate::incremental::{self, IncrementalTable};
use crate::pack::{self, Elem, Pack};
use crate::thin::{get_varint, put_varint, ThinBytes};
use crate::value::parse_i64_strict;

/// Redis' `LISTPACK_MAX_SAFETY_SIZE`: a compact hash that would grow past this many bytes
/// turns large instead.
const MAX_COMPACT_BYTES: usize = 1 << 30;

/// A large hash shrinks its table when fewer than one bucket in this many holds a pair, so
/// that a random bucket is a pair often enough ([`Hash::random_pair`]). Redis resizes its
/// dicts below 10% full.
const MIN_FILL_RATIO: usize = 8;

/// The process's seed for hashing fields (one per process, so a client cannot aim
/// collisions at a server it does not know).
static FIELD_HASHER: LazyLock<ahash::RandomState> = LazyLock::new(ahash::RandomState::new);

fn field_hash(field: &[u8]) -> u64 {
    FIELD_HASHER.hash_one(field)
}

/// A field and its value in one allocation: the field's length as a varint, the field, the
/// value.
#[derive(Clone)]
struct Pair(ThinBytes);

impl Pair {
    fn new(field: &[u8], value: &[u8]) -> Pair {
        let mut prefix = [0u8; 10];
        let prefix_len = put_varint(&mut prefix, field.len());
        Pair(ThinBytes::concat(&[&prefix[..prefix_len], field, value]))
    }

    fn parts(&self) -> (&[u8], &[u8]) {
        let bytes = self.0.as_bytes();
        let (field_len, at) = get_varint(bytes);
        bytes[at..].split_at(field_len)
    }

    fn field(&self) -> &[u8] {
        self.parts().0
    }

    fn elems(&self) -> (Elem<'_>, Elem<'_>) {
        let (field, value) = self.parts();
        (Elem::Bytes(field), Elem::Bytes(value))
    }
}

type Table = IncrementalTable<Pair>;

#[derive(Clone)]
enum Repr {
    Compact(Pack),
    Large(Box<Table>),
}

/// A hash: fields and their values. See the module documentation.
#[derive(Clone)]
pub struct Hash {
    repr: Repr,
}

/// A load found the same field twice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DuplicateField;

/// A field as stored in a pack, for ordering: canonical integers are always stored as
/// integers, so two fields are the same exactly when their keys are.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum FieldKey<'a> {
    Int(i64),
    Bytes(&'a [u8]),
}

impl<'a> FieldKey<'a> {
    fn of(elem: Elem<'a>) -> FieldKey<'a> {
        match elem {
            Elem::Int(n) => FieldKey::Int(n),
            Elem::Bytes(bytes) => match (bytes.len() <= 20).then(|| parse_i64_strict(bytes)) {
                Some(Some(n)) => FieldKey::Int(n),
                _ => FieldKey::Bytes(bytes),
            },
            Elem::Float(_) => unreachable!("hashes hold no doubles"),
        }
    }

    fn matches(self, elem: Elem<'_>) -> bool {
        match (self, elem) {
            (FieldKey::Int(a), Elem::Int(b)) => a == b,
            // Fields of one hash often share a prefix and a length (field1, field2...):
            // the last byte tells most of them apart without a call to memcmp.
            (FieldKey::Bytes(a), Elem::Bytes(b)) => {
                a.len() == b.len() && a.last() == b.last() && a == b
            }
            _ => false,
        }
    }
}

/// Where a field of a compact hash and its value start, in bytes.
fn find(pack: &Pack, field: &[u8]) -> Option<(usize, usize)> {
    let key = FieldKey::of(Elem::Bytes(field));
    let mut elems = pack.iter_offsets();
    while let Some((field_at, elem)) = elems.next() {
        let (value_at, _) = elems.next().expect("a compact hash holds whole pairs");
        if key.matches(elem) {
            return Some((field_at, value_at));
        }
    }
    None
}

/// The text of a field or value (integers, which a compact hash keeps as numbers, in
/// decimal, written into `buf`).
pub fn text<'a>(elem: Elem<'a>, buf: &'a mut itoa::Buffer) -> &'a [u8] {
    match elem {
        Elem::Bytes(bytes) => bytes,
        Elem::Int(n) => buf.format(n).as_bytes(),
        Elem::Float(_) => unreachable!("hashes hold no doubles"),
    }
}

/// Whether two elements read as the same text.
fn same_text(a: Elem<'_>, b: Elem<'_>) -> bool {
    match (a, b) {
        (Elem::Bytes(a), b) => b.eq_bytes(a),
        (a, Elem::Bytes(b)) => a.eq_bytes(b),
        (Elem::Int(a), Elem::Int(b)) => a == b,
        _ => false,
    }
}

fn insert_large(table: &mut Table, field: &[u8], value: &[u8]) -> bool {
    let hash = field_hash(field);
    if let Some(pair) = table.find_mut(hash, |pair| pair.field() == field) {
        *pair = Pair::new(field, value);
        return false;
    }
    table.insert_unique(hash, Pair::new(field, value), |pair| {
        field_hash(pair.field())
    });
    true
}

impl Hash {
    /// An empty compact hash (the caller adds a field before anyone sees it).
    pub fn new() -> Hash {
        Hash {
            repr: Repr::Compact(Pack::new()),
        }
    }

    /// An empty large hash with room for `capacity` fields.
    fn large(capacity: usize) -> Hash {
        Hash {
            repr: Repr::Large(Box::new(Table::with_capacity(capacity))),
        }
    }

    /// A hash loaded from a file or a DUMP payload, fields in their order: compact when
    /// the entry threshold allows (and, with `check_lengths`, every field and value is
    /// within the value threshold), large otherwise. Redis checks lengths when it loads
    /// separate strings (`RDB_TYPE_HASH`, zipmaps) but not when it loads a listpack or a
    /// ziplist whole.
    pub fn load<'a>(
        pairs: &[(Elem<'a>, Elem<'a>)],
        check_lengths: bool,
    ) -> Result<Hash, DuplicateField> {
        let max_value = compact::hash_max_value();
        let text_len = |elem: Elem<'_>| match elem {
            Elem::Bytes(bytes) => bytes.len(),
            // Integers are at most 20 characters; the limit is never that small in practice,
            // but measure them as Redis' sdslen would.
            other => text(other, &mut itoa::Buffer::new()).len(),
        };
        let compact_fits = pairs.len() <= compact::hash_max_entries()
            && (!check_lengths
                || pairs
                    .iter()
                    .all(|&(f, v)| text_len(f) <= max_value && text_len(v) <= max_value));
        if compact_fits {
            let mut keys: Vec<FieldKey<'_>> = pairs.iter().map(|&(f, _)| FieldKey::of(f)).collect();
            keys.sort_unstable();
            if keys.windows(2).any(|w| w[0] == w[1]) {
                return Err(DuplicateField);
            }
            let pack = Pack::from_elems(pairs.iter().flat_map(|&(f, v)| [f, v]));
            return Ok(Hash {
                repr: Repr::Compact(pack),
            });
        }
        let mut hash = Hash::large(pairs.len());
        let Repr::Large(table) = &mut hash.repr else {
            unreachable!("made large above")
        };
        let (mut field_buf, mut value_buf) = (itoa::Buffer::new(), itoa::Buffer::new());
        for &(field, value) in pairs {
            if !insert_large(
                table,
                text(field, &mut field_buf),
                text(value, &mut value_buf),
            ) {
                return Err(DuplicateField);
            }
        }
        Ok(hash)
    }

    /// An empty hash for a load of `len` pairs that [`Hash::push_loaded`] adds one at a
    /// time: large from the start when `len` passes the entry threshold (Redis'
    /// `rdbLoadObject` for `RDB_TYPE_HASH`); the caller uses [`Hash::load`] otherwise.
    pub fn for_large_load(len: usize) -> Hash {
        Hash::large(len)
    }

    /// Adds a loaded pair to a hash from [`Hash::for_large_load`]; refuses a field it has.
    pub fn push_loaded(&mut self, field: &[u8], value: &[u8]) -> Result<(), DuplicateField> {
        if self.insert(field, value) {
            Ok(())
        } else {
            Err(DuplicateField)
        }
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Compact(pack) => pack.len() / 2,
            Repr::Large(table) => table.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the hash is in its compact form.
    pub fn is_compact(&self) -> bool {
        matches!(self.repr, Repr::Compact(_))
    }

    /// What `OBJECT ENCODING` answers: the form the hash is really in.
    pub fn encoding(&self) -> &'static str {
        match self.repr {
            Repr::Compact(_) => "listpack",
            Repr::Large(_) => "hashtable",
        }
    }

    /// The pack of a compact hash (field, value, field, value...), for writers that copy
    /// it whole.
    pub fn as_pack(&self) -> Option<&Pack> {
        match &self.repr {
            Repr::Compact(pack) => Some(pack),
            Repr::Large(_) => None,
        }
    }

    pub fn get(&self, field: &[u8]) -> Option<Elem<'_>> {
        match &self.repr {
            Repr::Compact(pack) => find(pack, field).map(|(_, value_at)| pack.at(value_at).0),
            Repr::Large(table) => table
                .find(field_hash(field), |pair| pair.field() == field)
                .map(|pair| Elem::Bytes(pair.parts().1)),
        }
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Sets a field, converting to the large form where Redis would; `true` when the field
    /// is new.
    pub fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        if let Repr::Compact(pack) = &self.repr {
            let max_value = compact::hash_max_value();
            if field.len() > max_value
                || value.len() > max_value
                || pack.data_len() + field.len() + value.len() > MAX_COMPACT_BYTES
            {
                self.convert();
            }
        }
        match &mut self.repr {
            Repr::Compact(pack) => {
                let created = match find(pack, field) {
                    Some((_, value_at)) => {
                        pack.replace_at(value_at, Elem::Bytes(value));
                        false
                    }
                    None => {
                        pack.insert_at(pack.data_len(), &[Elem::Bytes(field), Elem::Bytes(value)]);
                        true
                    }
                };
                if pack.len() / 2 > compact::hash_max_entries() {
                    self.convert();
                }
                created
            }
            Repr::Large(table) => insert_large(table, field, value),
        }
    }

    /// Removes a field; `true` when it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Compact(pack) => match find(pack, field) {
                Some((field_at, _)) => {
                    pack.remove_at(field_at, 2);
                    true
                }
                None => false,
            },
            Repr::Large(table) => {
                let rehash = |pair: &Pair| field_hash(pair.field());
                if table
                    .remove(field_hash(field), |pair| pair.field() == field, rehash)
                    .is_none()
                {
                    return false;
                }
                if table.len() * MIN_FILL_RATIO < table.num_buckets() {
                    table.shrink_to(table.len(), rehash);
                }
                true
            }
        }
    }

    /// Turns a compact hash into a large one (Redis' `hashTypeConvert`).
    fn convert(&mut self) {
        let Repr::Compact(pack) = &self.repr else {
            return;
        };
        let mut table = Table::with_capacity(pack.len() / 2);
        let (mut field_buf, mut value_buf) = (itoa::Buffer::new(), itoa::Buffer::new());
        let mut elems = pack.iter();
        while let (Some(field), Some(value)) = (elems.next(), elems.next()) {
            let created = insert_large(
                &mut table,
                text(field, &mut field_buf),
                text(value, &mut value_buf),
            );
            assert!(created, "a compact hash holds each field once");
        }
        self.repr = Repr::Large(Box::new(table));
    }

    /// Every field with its value: a compact hash in insertion order, a large one in table
    /// order.
    pub fn iter(&self) -> Iter<'_> {
        Iter(match &self.repr {
            Repr::Compact(pack) => IterRepr::Compact(pack.iter()),
            Repr::Large(table) => IterRepr::Large(table.iter()),
        })
    }

    /// Bytes of heap this hash uses (before the allocator's rounding): the pack, or the
    /// table's buckets and each pair.
    pub fn heap_bytes(&self) -> usize {
        match &self.repr {
            Repr::Compact(pack) => pack.heap_bytes(),
            Repr::Large(table) => {
                std::mem::size_of::<Table>()
                    + table.allocation_size()
                    + table.iter().map(|pair| pair.0.heap_bytes()).sum::<usize>()
            }
        }
    }

    /// One pair picked uniformly, `None` when empty. A compact hash walks to it (as Redis'
    /// `lpRandomPair` does); a large one tries random buckets until one holds a pair, which
    /// takes at most [`MIN_FILL_RATIO`] tries on average: O(1), as Redis'
    /// `dictGetFairRandomKey`.
    pub fn random_pair(&self, rng: &mut impl Rng) -> Option<(Elem<'_>, Elem<'_>)> {
        if self.is_empty() {
            return None;
        }
        match &self.repr {
            Repr::Compact(_) => {
                let index = rng.gen_range(0..self.len());
                self.iter().nth(index)
            }
            Repr::Large(table) => Some(random_bucket(table, rng).1.elems()),
        }
    }

    /// `count` pairs, each picked uniformly on its own (repeats allowed), in pick order.
    pub fn random_pairs(&self, count: usize, rng: &mut impl Rng) -> Vec<(Elem<'_>, Elem<'_>)> {
        if self.is_empty() {
            return Vec::new();
        }
        match &self.repr {
            Repr::Compact(_) => {
                let all: Vec<_> = self.iter().collect();
                (0..count)
                    .map(|_| all[rng.gen_range(0..all.len())])
                    .collect()
            }
            Repr::Large(table) => (0..count)
                .map(|_| random_bucket(table, rng).1.elems())
                .collect(),
        }
    }

    /// `count` different pairs picked uniformly (every subset of that size equally
    /// likely), in no particular order; the whole hash when `count` is not below its length.
    /// A large hash much bigger than `count` draws random buckets until it has enough
    /// (Redis' "case 4"), so the work follows `count`, not the hash's size.
    pub fn distinct_random_pairs(
        &self,
        count: usize,
        rng: &mut impl Rng,
    ) -> Vec<(Elem<'_>, Elem<'_>)> {
        let len = self.len();
        if count >= len {
            return self.iter().collect();
        }
        match &self.repr {
            Repr::Large(table) if count.saturating_mul(3) <= len => {
                let mut seen = hashbrown::HashSet::with_capacity(count);
                let mut chosen = Vec::with_capacity(count);
                while chosen.len() < count {
                    let (bucket, pair) = random_bucket(table, rng);
                    if seen.insert(bucket) {
                        chosen.push(pair.elems());
                    }
                }
                chosen
            }
            _ => {
                let all: Vec<_> = self.iter().collect();
                sample(rng, len, count)
                    .into_iter()
                    .map(|i| all[i])
                    .collect()
            }
        }
    }
}

/// A random full bucket of a table that is not empty: its index and pair.
fn random_bucket<'a>(table: &'a Table, rng: &mut impl Rng) -> (usize, &'a Pair) {
    debug_assert!(!table.is_empty());
    let buckets = table.num_buckets();
    loop {
        let bucket = rng.gen_range(0..buckets);
        if let Some(pair) = table.get_bucket(bucket) {
            return (bucket, pair);
        }
    }
}

impl Default for Hash {
    fn default() -> Hash {
        Hash::new()
    }
}

impl PartialEq for Hash {
    /// The same fields with the same values, whatever the form or order.
    fn eq(&self, other: &Hash) -> bool {
        self.len() == other.len()
            && self.iter().all(|(field, value)| {
                let mut buf = itoa::Buffer::new();
                other
                    .get(text(field, &mut buf))
                    .is_some_and(|theirs| same_text(value, theirs))
            })
    }
}

impl Eq for Hash {}

impl<F: AsRef<[u8]>, V: AsRef<[u8]>> FromIterator<(F, V)> for Hash {
    /// The hash HSET would make of these pairs, one at a time.
    fn from_iter<I: IntoIterator<Item = (F, V)>>(pairs: I) -> Hash {
        let mut hash = Hash::new();
        for (field, value) in pairs {
            hash.insert(field.as_ref(), value.as_ref());
        }
        hash
    }
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// The pairs of a hash, as [`Hash::iter`] lists them.
pub struct Iter<'a>(IterRepr<'a>);

enum IterRepr<'a> {
    Compact(pack::Iter<'a>),
    Large(incremental::Iter<'a, Pair>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (Elem<'a>, Elem<'a>);

    fn next(&mut self) -> Option<(Elem<'a>, Elem<'a>)> {
        match &mut self.0 {
            IterRepr::Compact(elems) => Some((elems.next()?, elems.next()?)),
            IterRepr::Large(pairs) => pairs.next().map(Pair::elems),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn listed(hash: &Hash) -> Vec<(Vec<u8>, Vec<u8>)> {
        hash.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect()
    }

    #[test]
    fn a_compact_hash_keeps_insertion_order() {
        let mut hash = Hash::new();
        assert!(hash.insert(b"b", b"1"));
        assert!(hash.insert(b"a", b"2"));
        assert!(hash.insert(b"12", b"x"));
        assert!(!hash.insert(b"b", b"three"));
        assert!(hash.is_compact());
        assert_eq!(
            listed(&hash),
            vec![
                (b"b".to_vec(), b"three".to_vec()),
                (b"a".to_vec(), b"2".to_vec()),
                (b"12".to_vec(), b"x".to_vec()),
            ]
        );
        assert_eq!(hash.get(b"12").map(Elem::to_vec), Some(b"x".to_vec()));
        assert!(hash.get(b"012").is_none());
        assert!(hash.remove(b"a"));
        assert!(!hash.remove(b"a"));
        assert_eq!(hash.len(), 2);
        assert_eq!(hash.encoding(), "listpack");
    }

    #[test]
    fn a_long_value_makes_it_large() {
        let mut hash = Hash::new();
        hash.insert(b"f", b"v");
        hash.insert(b"g", &[b'x'; 65]);
        assert_eq!(hash.encoding(), "hashtable");
        assert_eq!(hash.get(b"g").map(Elem::to_vec), Some(vec![b'x'; 65]));
        assert_eq!(hash.get(b"f").map(Elem::to_vec), Some(b"v".to_vec()));
        // It stays large when the long value goes.
        hash.remove(b"g");
        assert!(!hash.is_compact());
    }

    #[test]
    fn many_entries_make_it_large() {
        let mut hash = Hash::new();
        for i in 0..=512 {
            hash.insert(format!("f{i}").as_bytes(), b"v");
            assert_eq!(hash.is_compact(), i < 512, "{i}");
        }
        assert_eq!(hash.len(), 513);
    }

    #[test]
    fn loads_keep_the_order_and_refuse_repeats() {
        let pairs = [
            (Elem::Bytes(b"z"), Elem::Int(1)),
            (Elem::Int(5), Elem::Bytes(b"five")),
        ];
        let hash = Hash::load(&pairs, true).unwrap();
        assert!(hash.is_compact());
        assert_eq!(
            listed(&hash),
            vec![
                (b"z".to_vec(), b"1".to_vec()),
                (b"5".to_vec(), b"five".to_vec())
            ]
        );
        let repeated = [
            (Elem::Int(5), Elem::Int(1)),
            (Elem::Bytes(b"5"), Elem::Int(2)),
        ];
        assert_eq!(Hash::load(&repeated, true), Err(DuplicateField));
        let long = [(Elem::Bytes(b"f"), Elem::Bytes(&[b'v'; 100]))];
        assert!(Hash::load(&long, false).unwrap().is_compact());
        assert!(!Hash::load(&long, true).unwrap().is_compact());
    }

    #[test]
    fn random_picks_cover_both_forms() {
        let mut rng = rand::thread_rng();
        let mut small = Hash::new();
        let mut large = Hash::new();
        for i in 0..600 {
            let field = format!("f{i}");
            if i < 10 {
                small.insert(field.as_bytes(), b"v");
            }
            large.insert(field.as_bytes(), b"v");
        }
        for hash in [&small, &large] {
            let len = hash.len();
            assert!(hash.random_pair(&mut rng).is_some());
            assert_eq!(hash.random_pairs(50, &mut rng).len(), 50);
            for count in [1, 2, len / 2, len - 1, len, len + 5] {
                let picked = hash.distinct_random_pairs(count, &mut rng);
                assert_eq!(picked.len(), count.min(len));
                let mut fields: Vec<Vec<u8>> = picked.iter().map(|(f, _)| f.to_vec()).collect();
                fields.sort();
                fields.dedup();
                assert_eq!(fields.len(), count.min(len));
            }
        }
    }

    #[test]
    fn a_large_hash_shrinks_as_it_empties() {
        let mut hash = Hash::new();
        for i in 0..10_000 {
            hash.insert(format!("f{i}").as_bytes(), b"v");
        }
        for i in 10..10_000 {
            hash.remove(format!("f{i}").as_bytes());
        }
        let Repr::Large(table) = &hash.repr else {
            panic!("large")
        };
        assert!(
            table.num_buckets() <= 10 * MIN_FILL_RATIO,
            "{}",
            table.num_buckets()
        );
        assert_eq!(hash.len(), 10);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Set(u8, Vec<u8>),
        Del(u8),
    }

    fn value() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            (0i64..1000).prop_map(|n| n.to_string().into_bytes()),
            proptest::collection::vec(any::<u8>(), 0..20),
            proptest::collection::vec(any::<u8>(), 60..70),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (any::<u8>(), value()).prop_map(|(f, v)| Op::Set(f, v)),
            1 => any::<u8>().prop_map(Op::Del),
        ]
    }

    fn field_name(n: u8) -> Vec<u8> {
        if n.is_multiple_of(2) {
            n.to_string().into_bytes()
        } else {
            format!("field:{n}").into_bytes()
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(100))]
        #[test]
        fn behaves_as_a_map_in_insertion_order(ops in proptest::collection::vec(op(), 1..300)) {
            let mut hash = Hash::new();
            let mut model: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            for op in ops {
                match op {
                    Op::Set(n, v) => {
                        let field = field_name(n);
                        let created = hash.insert(&field, &v);
                        match model.iter_mut().find(|(f, _)| *f == field) {
                            Some(pair) => { prop_assert!(!created); pair.1 = v; }
                            None => { prop_assert!(created); model.push((field, v)); }
                        }
                    }
                    Op::Del(n) => {
                        let field = field_name(n);
                        let was = model.iter().position(|(f, _)| *f == field);
                        prop_assert_eq!(hash.remove(&field), was.is_some());
                        if let Some(at) = was { model.remove(at); }
                    }
                }
                prop_assert_eq!(hash.len(), model.len());
            }
            if hash.is_compact() {
                prop_assert_eq!(listed(&hash), model.clone());
            } else {
                let mut listed = listed(&hash);
                listed.sort();
                let mut sorted = model.clone();
                sorted.sort();
                prop_assert_eq!(listed, sorted);
            }
            let map: HashMap<_, _> = model.iter().cloned().collect();
            for n in 0..=255u8 {
                let field = field_name(n);
                prop_assert_eq!(hash.get(&field).map(Elem::to_vec), map.get(&field).cloned());
            }
            let copy = hash.clone();
            prop_assert_eq!(&copy, &hash);
            let loaded = Hash::load(&hash.iter().collect::<Vec<_>>(), true).unwrap();
            prop_assert_eq!(&loaded, &hash);
        }
    }
}
