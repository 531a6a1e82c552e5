//! The sorted set value: members with scores, ordered by (score, member), in one of the
//! two forms Redis 7.0 uses:
//!
//! - **listpack** (small sets): one [`Pack`] of member, score, member, score... in
//!   (score, member) order. Scores that are integers (and exactly a double) are stored as
//!   pack integers, others as doubles, so they read back bit for bit. Lookups scan it; it
//!   stays small (`zset-max-listpack-entries` / `-value`, [`compact`]).
//! - **skiplist** (the rest; Redis' name, kept for `OBJECT ENCODING`): [`large::Large`],
//!   each member stored once, with O(log N) rank operations.
//!
//! A set starts as a listpack and turns large when an insertion would pass a threshold;
//! it never turns back by itself ([`SortedSet::compact_if_fits`] is for the commands that
//! build a whole set, and for loading, as in Redis).

mod large;
#[cfg(test)]
mod tests;

use std::cmp::Ordering;
use std::fmt;
use std::ops::Deref;

use crate::compact;
use crate::pack::{Elem, Pack};
use large::{Large, LargeIter};

/// A score with the order sorted sets use. Scores are never NaN, so `<` is a total order;
/// as in Redis, -0 and 0 compare equal (members then order them).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Score(pub f64);

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.partial_cmp(&other.0).unwrap_or(Ordering::Equal)
    }
}

/// One end of a score interval (`ZRANGEBYSCORE`'s `1.5` or `(1.5`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreBound {
    pub score: f64,
    pub exclusive: bool,
}

impl ScoreBound {
    /// Whether `score` lies below the interval this bound starts.
    fn below_min(self, score: f64) -> bool {
        if self.exclusive {
            score <= self.score
        } else {
            score < self.score
        }
    }

    /// Whether `score` lies inside the interval this bound ends.
    fn within_max(self, score: f64) -> bool {
        if self.exclusive {
            score < self.score
        } else {
            score <= self.score
        }
    }
}

/// A member as read from a set: borrowed bytes, or the decimal text of a member the
/// listpack keeps as an integer. Dereferences to the bytes a client sees.
#[derive(Clone, Copy)]
pub enum Member<'a> {
    Bytes(&'a [u8]),
    Int { digits: [u8; 20], len: u8 },
}

impl<'a> Member<'a> {
    fn of(elem: Elem<'a>) -> Member<'a> {
        match elem {
            Elem::Bytes(bytes) => Member::Bytes(bytes),
            Elem::Int(n) => {
                let mut digits = [0u8; 20];
                let mut len = 0usize;
                let mut magnitude = n.unsigned_abs();
                loop {
                    len += 1;
                    digits[20 - len] = b'0' + (magnitude % 10) as u8;
                    magnitude /= 10;
                    if magnitude == 0 {
                        break;
                    }
                }
                if n < 0 {
                    len += 1;
                    digits[20 - len] = b'-';
                }
                Member::Int {
                    digits,
                    len: len as u8,
                }
            }
            Elem::Float(_) => unreachable!("sorted set members are never doubles"),
        }
    }
}

impl<'a> Member<'a> {
    /// The bytes as borrowed from the set, when they are (always, in the large form).
    pub fn borrowed(self) -> Option<&'a [u8]> {
        match self {
            Member::Bytes(bytes) => Some(bytes),
            Member::Int { .. } => None,
        }
    }
}

impl Deref for Member<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Member::Bytes(bytes) => bytes,
            Member::Int { digits, len } => &digits[20 - *len as usize..],
        }
    }
}

impl AsRef<[u8]> for Member<'_> {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl fmt::Debug for Member<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

impl PartialEq for Member<'_> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl PartialEq<[u8]> for Member<'_> {
    fn eq(&self, other: &[u8]) -> bool {
        **self == *other
    }
}

/// How a score is kept in a listpack: as an integer when it is one that a double holds
/// exactly (so it reads back bit for bit), else as the double. -0 becomes 0, as in Redis'
/// listpacks.
fn score_elem(score: f64) -> Elem<'static> {
    // 2^53: every integer below it is exactly a double, and converts back unchanged.
    const EXACT: f64 = 9_007_199_254_740_992.0;
    if score.fract() == 0.0 && score.abs() < EXACT {
        Elem::Int(score as i64)
    } else {
        Elem::Float(score)
    }
}

fn elem_score(elem: Elem<'_>) -> f64 {
    elem.as_f64().expect("a listpack score is a number")
}

/// Compares a listpack member with `other`, byte-wise as Redis does.
fn member_cmp(elem: Elem<'_>, other: &[u8]) -> Ordering {
    match elem {
        Elem::Bytes(bytes) => bytes.cmp(other),
        _ => (*Member::of(elem)).cmp(other),
    }
}

/// Whether the listpack entry (`score`, `member`) sorts before (`key_score`, `key`).
fn entry_before(score: f64, member: Elem<'_>, key_score: f64, key: &[u8]) -> bool {
    match Score(score).cmp(&Score(key_score)) {
        Ordering::Less => true,
        Ordering::Greater => false,
        Ordering::Equal => member_cmp(member, key) == Ordering::Less,
    }
}

/// One listpack entry: where it starts, its member and score.
struct PackEntry<'a> {
    at: usize,
    member: Elem<'a>,
    score: f64,
}

/// The entries of a listpack-form set, from the front.
struct PackEntries<'a> {
    pack: &'a Pack,
    data: &'a [u8],
    at: usize,
}

impl<'a> PackEntries<'a> {
    /// The element at byte `at` and its size. The two forms short members and small
    /// integer scores take (see the table in `pack.rs`) are read here, inline: ZRANGE and
    /// ZSCORE of small sets spent a tenth of their time in the general decoder.
    #[inline]
    fn elem_at(&self, at: usize) -> (Elem<'a>, usize) {
        let first = self.data[at];
        match first {
            0x00..=0x7f => (Elem::Int(first as i64), 1),
            0x80..=0xbf => {
                let len = (first & 0x3f) as usize;
                (Elem::Bytes(&self.data[at + 1..at + 1 + len]), 1 + len)
            }
            _ => self.pack.at(at),
        }
    }
}

impl<'a> Iterator for PackEntries<'a> {
    type Item = PackEntry<'a>;

    #[inline]
    fn next(&mut self) -> Option<PackEntry<'a>> {
        let at = self.at;
        if at >= self.data.len() {
            return None;
        }
        let (member, member_len) = self.elem_at(at);
        let (score, score_len) = self.elem_at(at + member_len);
        self.at = at + member_len + score_len;
        Some(PackEntry {
            at,
            member,
            score: elem_score(score),
        })
    }
}

/// The rank, byte offset and score of `member` in a listpack-form set: a plain scan
/// that compares a short member's length before its bytes and decodes nothing else.
fn find_in_pack(pack: &Pack, member: &[u8]) -> Option<(usize, usize, f64)> {
    let walk = entries(pack);
    let data = walk.data;
    let mut at = 0;
    let mut rank = 0;
    while at < data.len() {
        let first = data[at];
        let (matched, member_len) = if (0x80..=0xbf).contains(&first) {
            let len = (first & 0x3f) as usize;
            (
                len == member.len() && &data[at + 1..at + 1 + len] == member,
                1 + len,
            )
        } else {
            let (elem, size) = pack.at(at);
            (elem.eq_bytes(member), size)
        };
        let (score, score_len) = walk.elem_at(at + member_len);
        if matched {
            return Some((rank, at, elem_score(score)));
        }
        at += member_len + score_len;
        rank += 1;
    }
    None
}

fn entries(pack: &Pack) -> PackEntries<'_> {
    PackEntries {
        pack,
        data: pack.data(),
        at: 0,
    }
}

#[derive(Clone)]
enum Repr {
    Pack(Pack),
    Large(Box<Large>),
}

/// A sorted set, in its listpack or its large form (see the module documentation).
/// 16 bytes: a [`Value`](crate::Value) holds it without a box.
#[derive(Clone)]
pub struct SortedSet {
    repr: Repr,
}

const _: () = assert!(std::mem::size_of::<SortedSet>() == 16);

impl Default for SortedSet {
    fn default() -> SortedSet {
        SortedSet::new()
    }
}

impl SortedSet {
    /// An empty set, in the listpack form.
    pub fn new() -> SortedSet {
        SortedSet {
            repr: Repr::Pack(Pack::new()),
        }
    }

    /// The encoding `OBJECT ENCODING` reports: "listpack" or "skiplist".
    pub fn encoding(&self) -> &'static str {
        match self.repr {
            Repr::Pack(_) => "listpack",
            Repr::Large(_) => "skiplist",
        }
    }

    /// The listpack (member, score, member, score... ascending), in the compact form.
    pub fn pack(&self) -> Option<&Pack> {
        match &self.repr {
            Repr::Pack(pack) => Some(pack),
            Repr::Large(_) => None,
        }
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Pack(pack) => pack.len() / 2,
            Repr::Large(large) => large.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match &self.repr {
            Repr::Pack(pack) => find_in_pack(pack, member).map(|(_, _, score)| score),
            Repr::Large(large) => large.score(member),
        }
    }

    /// Adds or updates a member; returns its previous score. A listpack stores a score of
    /// -0 as 0 (Redis' keeps integral scores as integers); the large form keeps the sign,
    /// as Redis' skiplist does. A new member that would take the set past
    /// `zset-max-listpack-entries` or is longer than `zset-max-listpack-value` turns a
    /// listpack into the large form first, as Redis' `zsetAdd` does.
    pub fn insert(&mut self, member: &[u8], score: f64) -> Option<f64> {
        debug_assert!(!score.is_nan());
        let pack = match &mut self.repr {
            Repr::Large(large) => return large.insert(member, score),
            Repr::Pack(pack) => pack,
        };
        let packed = if score == 0.0 { 0.0 } else { score };
        let found = find_in_pack(pack, member).map(|(_, at, score)| (at, score));
        if let Some((at, old)) = found {
            if old.to_bits() != packed.to_bits() {
                pack.remove_at(at, 2);
                pack_insert(pack, member, packed);
            }
            return Some(old);
        }
        if pack.len() / 2 >= compact::zset_max_entries() || member.len() > compact::zset_max_value()
        {
            // The large form keeps the sign of -0, so it gets the score as given.
            self.convert_to_large();
            return self.insert(member, score);
        }
        pack_insert(pack, member, packed);
        None
    }

    /// Adds or updates a member without looking at the thresholds: a listpack stays one.
    /// For loading a listpack Redis wrote, which stays one whatever its members' lengths
    /// as long as it has no more entries than `zset-max-listpack-entries`.
    pub fn insert_keep_form(&mut self, member: &[u8], score: f64) -> Option<f64> {
        debug_assert!(!score.is_nan());
        let pack = match &mut self.repr {
            Repr::Large(large) => return large.insert(member, score),
            Repr::Pack(pack) => pack,
        };
        let score = if score == 0.0 { 0.0 } else { score };
        let found = find_in_pack(pack, member).map(|(_, at, score)| (at, score));
        if let Some((at, _)) = found {
            pack.remove_at(at, 2);
        }
        pack_insert(pack, member, score);
        found.map(|(_, old)| old)
    }

    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        match &mut self.repr {
            Repr::Pack(pack) => {
                let (_, at, score) = find_in_pack(pack, member)?;
                pack.remove_at(at, 2);
                Some(score)
            }
            Repr::Large(large) => large.remove(member),
        }
    }

    /// Members in ascending (score, member) order.
    pub fn iter(&self) -> Iter<'_> {
        self.range_by_rank(0, self.len())
    }

    /// The members with 0-based ascending ranks in `start..end` (clamped to the set).
    pub fn range_by_rank(&self, start: usize, end: usize) -> Iter<'_> {
        let end = end.min(self.len());
        let start = start.min(end);
        let inner = match &self.repr {
            Repr::Pack(pack) => {
                let mut forward = entries(pack);
                if start > 0 {
                    forward.nth(start - 1);
                }
                IterRepr::Pack {
                    pack,
                    forward,
                    remaining: end - start,
                    offsets: Vec::new(),
                    taken: 0,
                }
            }
            Repr::Large(large) => IterRepr::Large(large.range(start, end)),
        };
        Iter { inner }
    }

    /// 0-based rank of a member in ascending order (O(log N) in the large form).
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        match &self.repr {
            Repr::Pack(pack) => find_in_pack(pack, member).map(|(rank, _, _)| rank),
            Repr::Large(large) => large.rank(member),
        }
    }

    /// The ranks `start..end` of the members whose score lies between `min` and `max`.
    pub fn score_ranks(&self, min: ScoreBound, max: ScoreBound) -> (usize, usize) {
        let (start, end) = match &self.repr {
            Repr::Pack(pack) => {
                let (mut start, mut end) = (0, 0);
                for e in entries(pack) {
                    if !max.within_max(e.score) {
                        break;
                    }
                    end += 1;
                    if min.below_min(e.score) {
                        start += 1;
                    }
                }
                (start, end)
            }
            Repr::Large(large) => (
                large.count_before(|s, _| min.below_min(s)),
                large.count_before(|s, _| max.within_max(s)),
            ),
        };
        (start, end.max(start))
    }

    /// Members whose score lies between `min` and `max`, ascending (reverse it for descending).
    pub fn range_by_score(&self, min: ScoreBound, max: ScoreBound) -> Iter<'_> {
        let (start, end) = self.score_ranks(min, max);
        self.range_by_rank(start, end)
    }

    /// Removes the member at 0-based ascending rank `rank`.
    pub fn remove_rank(&mut self, rank: usize) -> Option<(Vec<u8>, f64)> {
        match &mut self.repr {
            Repr::Pack(pack) => {
                let e = entries(pack).nth(rank)?;
                let (at, member, score) = (e.at, e.member.to_vec(), e.score);
                pack.remove_at(at, 2);
                Some((member, score))
            }
            Repr::Large(large) => large.remove_rank(rank),
        }
    }

    /// The member with the lowest (score, member), removed.
    pub fn pop_min(&mut self) -> Option<(Vec<u8>, f64)> {
        self.remove_rank(0)
    }

    /// The member with the highest (score, member), removed.
    pub fn pop_max(&mut self) -> Option<(Vec<u8>, f64)> {
        self.remove_rank(self.len().checked_sub(1)?)
    }

    /// The member at 0-based ascending rank `index`, with its score.
    pub fn nth(&self, index: usize) -> Option<(Member<'_>, f64)> {
        self.range_by_rank(index, index.saturating_add(1)).next()
    }

    /// Turns a large set back into a listpack when it fits the thresholds in force, as
    /// Redis does for the sets ZUNIONSTORE & co. build and for sets it loads.
    pub fn compact_if_fits(&mut self) {
        let Repr::Large(large) = &self.repr else {
            return;
        };
        let max_value = compact::zset_max_value();
        let fits = large.len() <= compact::zset_max_entries()
            && large
                .range(0, large.len())
                .all(|(m, _)| m.len() <= max_value);
        if fits {
            let mut pack = Pack::new();
            for (member, score) in large.range(0, large.len()) {
                pack.push_back(Elem::Bytes(member));
                pack.push_back(score_elem(score));
            }
            self.repr = Repr::Pack(pack);
        }
    }

    fn convert_to_large(&mut self) {
        let Repr::Pack(pack) = &self.repr else {
            return;
        };
        let mut large = Large::new();
        for e in entries(pack) {
            large.insert(&Member::of(e.member), e.score);
        }
        self.repr = Repr::Large(Box::new(large));
    }

    /// Heap bytes: the listpack's allocation, or the large form's parts (roughly).
    pub fn heap_bytes(&self) -> usize {
        match &self.repr {
            Repr::Pack(pack) => pack.heap_bytes(),
            Repr::Large(large) => std::mem::size_of::<Large>() + large.heap_bytes(),
        }
    }

    #[cfg(test)]
    fn check(&self) {
        if let Repr::Large(large) = &self.repr {
            large.check();
        }
        let all: Vec<(Vec<u8>, f64)> = self.iter().map(|(m, s)| (m.to_vec(), s)).collect();
        for pair in all.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            assert_eq!(
                (Score(a.1), &a.0).cmp(&(Score(b.1), &b.0)),
                Ordering::Less,
                "out of order"
            );
        }
    }
}

/// Inserts a new member into a listpack-form set, in order.
fn pack_insert(pack: &mut Pack, member: &[u8], score: f64) {
    let at = entries(pack)
        .find(|e| !entry_before(e.score, e.member, score, member))
        .map_or(pack.data_len(), |e| e.at);
    pack.insert_at(at, &[Elem::Bytes(member), score_elem(score)]);
}

impl PartialEq for SortedSet {
    fn eq(&self, other: &SortedSet) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .zip(other.iter())
                .all(|((m1, s1), (m2, s2))| *m1 == *m2 && s1 == s2)
    }
}

impl Eq for SortedSet {}

impl fmt::Debug for SortedSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

enum IterRepr<'a> {
    Pack {
        pack: &'a Pack,
        /// The entries from the front (until `offsets` is filled).
        forward: PackEntries<'a>,
        remaining: usize,
        /// The starts of the entries left when the walk from the back began.
        offsets: Vec<u32>,
        /// Entries taken from the front of `offsets`.
        taken: usize,
    },
    Large(LargeIter<'a>),
}

/// Members and scores of a sorted set, ascending; walks from either end.
pub struct Iter<'a> {
    inner: IterRepr<'a>,
}

fn pack_entry_at(pack: &Pack, at: usize) -> (Member<'_>, f64, usize) {
    let (member, member_len) = pack.at(at);
    let (score, score_len) = pack.at(at + member_len);
    (
        Member::of(member),
        elem_score(score),
        at + member_len + score_len,
    )
}

impl<'a> Iterator for Iter<'a> {
    type Item = (Member<'a>, f64);

    fn next(&mut self) -> Option<(Member<'a>, f64)> {
        match &mut self.inner {
            IterRepr::Pack {
                pack,
                forward,
                remaining,
                offsets,
                taken,
            } => {
                if *remaining == 0 {
                    return None;
                }
                *remaining -= 1;
                if offsets.is_empty() {
                    let e = forward.next()?;
                    return Some((Member::of(e.member), e.score));
                }
                *taken += 1;
                let (member, score, _) = pack_entry_at(pack, offsets[*taken - 1] as usize);
                Some((member, score))
            }
            IterRepr::Large(inner) => inner.next().map(|(m, s)| (Member::Bytes(m), s)),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let len = match &self.inner {
            IterRepr::Pack { remaining, .. } => *remaining,
            IterRepr::Large(inner) => inner.len(),
        };
        (len, Some(len))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match &mut self.inner {
            IterRepr::Pack {
                pack,
                forward,
                remaining,
                offsets,
                taken,
            } => {
                if *remaining == 0 {
                    return None;
                }
                if offsets.is_empty() {
                    offsets.extend(forward.take(*remaining).map(|e| e.at as u32));
                }
                *remaining -= 1;
                let (member, score, _) = pack_entry_at(pack, offsets[*taken + *remaining] as usize);
                Some((member, score))
            }
            IterRepr::Large(inner) => inner.next_back().map(|(m, s)| (Member::Bytes(m), s)),
        }
    }
}

impl ExactSizeIterator for Iter<'_> {}
