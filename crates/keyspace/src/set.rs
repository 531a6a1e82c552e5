//! The set value, in Redis 7.0's two forms.
//!
//! - **intset**: every member a canonical integer (Redis' `string2ll` rules) and at most
//!   `set-max-intset-entries` of them: the integers sorted, all of one width (2, 4 or 8
//!   bytes, widened when a bigger one arrives), in one exact-size allocation that holds
//!   Redis' own intset bytes (`[u32 width][u32 count][values]`, little-endian), so the RDB
//!   encoder writes it as it is. Ten small integers take 28 bytes. Lookups are a binary
//!   search; members list in ascending order.
//! - **hashtable**: the members in a [`ChunkedVec`] (short ones inline, 16 bytes each; it
//!   grows a chunk at a time, never copying) and a hash table of their indexes that
//!   resizes a step at a time ([`IncrementalTable`]). A removal moves the last member into
//!   the hole, so the vector stays dense and a random member is a random index: SPOP and
//!   SRANDMEMBER cost O(1) a pick.
//!
//! A set turns into a hashtable when a member that is not an integer arrives or the count
//! passes the threshold, and never back: only a new set (a STORE result, SPOP's rebuilt
//! set, an RDB load) starts as an intset again, as in Redis' `t_set.c`.

use std::fmt;
use std::sync::OnceLock;

use rand::Rng;

use crate::chunked::ChunkedVec;
use crate::compact::set_max_intset_entries;
use crate::incremental::IncrementalTable;
use crate::pack::Elem;
use crate::thin::ThinBytes;
use crate::value::parse_i64_strict;

/// Redis caps an intset at 2^30 entries whatever `set-max-intset-entries` says.
const INTSET_HARD_MAX: usize = 1 << 30;

/// The number of integers an intset may hold under the current configuration.
fn intset_limit() -> usize {
    set_max_intset_entries().min(INTSET_HARD_MAX)
}

/// A member as an integer, when it is a canonical one.
fn as_int(member: &[u8]) -> Option<i64> {
    if member.len() > 20 {
        return None;
    }
    parse_i64_strict(member)
}

// ---------------------------------------------------------------------------------------
// The intset form.

const INTSET_HEADER: usize = 8;

/// The narrowest width (in bytes) that holds `value`.
fn width_of(value: i64) -> usize {
    if i16::try_from(value).is_ok() {
        2
    } else if i32::try_from(value).is_ok() {
        4
    } else {
        8
    }
}

/// Sorted distinct integers of one width, as Redis lays out an intset.
#[derive(Clone, PartialEq, Eq)]
pub struct IntSet {
    bytes: Box<[u8]>,
}

impl IntSet {
    fn new() -> IntSet {
        IntSet::with_width(2, 0)
    }

    fn with_width(width: usize, count: usize) -> IntSet {
        let mut bytes = vec![0u8; INTSET_HEADER + width * count].into_boxed_slice();
        bytes[0..4].copy_from_slice(&(width as u32).to_le_bytes());
        bytes[4..8].copy_from_slice(&(count as u32).to_le_bytes());
        IntSet { bytes }
    }

    /// Builds an intset from Redis' bytes, checking them (width, size, strictly ascending).
    pub fn from_bytes(blob: &[u8]) -> Result<IntSet, &'static str> {
        if blob.len() < INTSET_HEADER {
            return Err("intset shorter than its header");
        }
        let width = u32::from_le_bytes(blob[0..4].try_into().unwrap()) as usize;
        let count = u32::from_le_bytes(blob[4..8].try_into().unwrap()) as usize;
        if !matches!(width, 2 | 4 | 8) {
            return Err("intset with unknown width");
        }
        if count.checked_mul(width).and_then(|n| n.checked_add(8)) != Some(blob.len()) {
            return Err("intset size does not match its count");
        }
        let set = IntSet { bytes: blob.into() };
        if (1..count).any(|i| set.get(i - 1) >= set.get(i)) {
            return Err("intset not strictly ascending");
        }
        Ok(set)
    }

    /// Redis' intset bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn width(&self) -> usize {
        u32::from_le_bytes(self.bytes[0..4].try_into().unwrap()) as usize
    }

    pub fn len(&self) -> usize {
        u32::from_le_bytes(self.bytes[4..8].try_into().unwrap()) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The integer at `index` (ascending order).
    pub fn get(&self, index: usize) -> i64 {
        let width = self.width();
        let at = INTSET_HEADER + index * width;
        let b = &self.bytes[at..at + width];
        match width {
            2 => i16::from_le_bytes([b[0], b[1]]) as i64,
            4 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
            _ => i64::from_le_bytes(b.try_into().unwrap()),
        }
    }

    fn put(&mut self, index: usize, value: i64) {
        let width = self.width();
        let at = INTSET_HEADER + index * width;
        self.bytes[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
    }

    /// Where `value` is (`Ok`) or would go (`Err`).
    fn search(&self, value: i64) -> Result<usize, usize> {
        let len = self.len();
        if len == 0 || width_of(value) > self.width() {
            // Wider than every member: past one end.
            return Err(if value < 0 { 0 } else { len });
        }
        let (mut low, mut high) = (0, len);
        while low < high {
            let mid = (low + high) / 2;
            match self.get(mid).cmp(&value) {
                std::cmp::Ordering::Less => low = mid + 1,
                std::cmp::Ordering::Greater => high = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(low)
    }

    pub fn contains(&self, value: i64) -> bool {
        self.search(value).is_ok()
    }

    /// Adds `value`; false when it was there.
    fn insert(&mut self, value: i64) -> bool {
        let at = match self.search(value) {
            Ok(_) => return false,
            Err(at) => at,
        };
        let len = self.len();
        let width = self.width().max(width_of(value));
        let mut grown = IntSet::with_width(width, len + 1);
        if width == self.width() {
            let split = INTSET_HEADER + at * width;
            grown.bytes[INTSET_HEADER..split].copy_from_slice(&self.bytes[INTSET_HEADER..split]);
            grown.bytes[split + width..].copy_from_slice(&self.bytes[split..]);
        } else {
            for i in 0..len {
                grown.put(if i < at { i } else { i + 1 }, self.get(i));
            }
        }
        grown.put(at, value);
        *self = grown;
        true
    }

    /// Removes the integer at `index`.
    fn remove_index(&mut self, index: usize) {
        let width = self.width();
        let len = self.len();
        let mut shrunk = IntSet::with_width(width, len - 1);
        let split = INTSET_HEADER + index * width;
        shrunk.bytes[INTSET_HEADER..split].copy_from_slice(&self.bytes[INTSET_HEADER..split]);
        shrunk.bytes[split..].copy_from_slice(&self.bytes[split + width..]);
        *self = shrunk;
    }

    fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
}

// ---------------------------------------------------------------------------------------
// The hashtable form.

/// Members up to this many bytes are stored inside the member's 16 bytes.
const INLINE_MAX: usize = 14;

/// One member of a large set: 16 bytes, the bytes inline when short, else behind a thin
/// pointer (one allocation).
#[derive(Clone)]
enum Member {
    Inline { len: u8, bytes: [u8; INLINE_MAX] },
    Heap(ThinBytes),
}

const _: () = assert!(std::mem::size_of::<Member>() == 16);

impl Member {
    fn new(bytes: &[u8]) -> Member {
        if bytes.len() <= INLINE_MAX {
            let mut inline = [0u8; INLINE_MAX];
            inline[..bytes.len()].copy_from_slice(bytes);
            Member::Inline {
                len: bytes.len() as u8,
                bytes: inline,
            }
        } else {
            Member::Heap(ThinBytes::new(bytes))
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            Member::Inline { len, bytes } => &bytes[..*len as usize],
            Member::Heap(bytes) => bytes.as_bytes(),
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Member::Inline { .. } => 0,
            Member::Heap(bytes) => bytes.heap_bytes(),
        }
    }
}

/// The hash every large set uses (seeded once per process).
fn hash_of(bytes: &[u8]) -> u64 {
    static HASHER: OnceLock<ahash::RandomState> = OnceLock::new();
    HASHER.get_or_init(ahash::RandomState::new).hash_one(bytes)
}

/// A set in its hashtable form. See the module documentation.
#[derive(Clone, Default)]
pub struct LargeSet {
    members: ChunkedVec<Member>,
    index: IncrementalTable<u32>,
}

impl LargeSet {
    fn with_capacity(capacity: usize) -> LargeSet {
        LargeSet {
            members: ChunkedVec::with_capacity(capacity),
            index: IncrementalTable::with_capacity(capacity),
        }
    }

    fn len(&self) -> usize {
        self.members.len()
    }

    fn find(&self, member: &[u8]) -> Option<usize> {
        let members = &self.members;
        self.index
            .find(hash_of(member), |&i| {
                members[i as usize].as_bytes() == member
            })
            .map(|&i| i as usize)
    }

    fn insert(&mut self, member: &[u8]) -> bool {
        let LargeSet { members, index } = self;
        assert!(
            members.len() < u32::MAX as usize,
            "a set holds under 2^32 members"
        );
        let hash = hash_of(member);
        if index
            .find(hash, |&i| members[i as usize].as_bytes() == member)
            .is_some()
        {
            return false;
        }
        members.push(Member::new(member));
        index.insert_unique(hash, (members.len() - 1) as u32, |&i| {
            hash_of(members[i as usize].as_bytes())
        });
        true
    }

    fn remove(&mut self, member: &[u8]) -> bool {
        let LargeSet { members, index } = self;
        let Some(at) = index.remove(
            hash_of(member),
            |&i| members[i as usize].as_bytes() == member,
            |&i| hash_of(members[i as usize].as_bytes()),
        ) else {
            return false;
        };
        self.close_hole(at as usize);
        true
    }

    /// Removes the member at `at` (index and all) and returns its bytes.
    fn take_index(&mut self, at: usize) -> Vec<u8> {
        let LargeSet { members, index } = self;
        let hash = hash_of(members[at].as_bytes());
        index
            .remove(
                hash,
                |&i| i as usize == at,
                |&i| hash_of(members[i as usize].as_bytes()),
            )
            .expect("every member is indexed");
        let bytes = self.members[at].as_bytes().to_vec();
        self.close_hole(at);
        bytes
    }

    /// Fills the hole at `at` (already unindexed) with the last member.
    fn close_hole(&mut self, at: usize) {
        let last = self.members.len() - 1;
        if at != last {
            let hash = hash_of(self.members[last].as_bytes());
            let slot = self
                .index
                .find_mut(hash, |&i| i as usize == last)
                .expect("every member is indexed");
            *slot = at as u32;
        }
        self.members.swap_remove(at);
        // Give memory back once the set has shrunk well below its capacity, as Redis
        // resizes a dict filled under a tenth.
        let len = self.members.len();
        if self.members.capacity() > 64 && len * 8 < self.members.capacity() {
            self.members.shrink_to(len * 2);
            let members = &self.members;
            self.index
                .shrink_to(len * 2, |&i| hash_of(members[i as usize].as_bytes()));
        }
    }

    fn heap_bytes(&self) -> usize {
        let members =
            self.members.heap_bytes() + self.members.iter().map(Member::heap_bytes).sum::<usize>();
        let buckets = (self.index.capacity() * 8 / 7).next_power_of_two();
        members + buckets * (std::mem::size_of::<u32>() + 1) + std::mem::size_of::<LargeSet>()
    }
}

// ---------------------------------------------------------------------------------------
// The set.

/// A set value: an intset or a hashtable (see the module documentation). 16 bytes.
#[derive(Clone)]
pub enum Set {
    Ints(IntSet),
    Large(Box<LargeSet>),
}

const _: () = assert!(std::mem::size_of::<Set>() == 16);

impl Default for Set {
    fn default() -> Set {
        Set::new()
    }
}

impl Set {
    /// An empty intset.
    pub fn new() -> Set {
        Set::Ints(IntSet::new())
    }

    /// An empty set of the form that can hold `member` (Redis' `setTypeCreate`).
    pub fn for_member(member: &[u8]) -> Set {
        if as_int(member).is_some() {
            Set::new()
        } else {
            Set::Large(Box::default())
        }
    }

    /// An empty hashtable set.
    pub fn new_large(capacity: usize) -> Set {
        Set::Large(Box::new(LargeSet::with_capacity(capacity)))
    }

    /// A set of these members (duplicates count once), an intset when they fit one, as
    /// Redis loads a set from an RDB file.
    pub fn from_members<'a>(members: impl IntoIterator<Item = &'a [u8]>) -> Set {
        let mut set = Set::new();
        for member in members {
            set.insert(member);
        }
        set
    }

    /// An intset from Redis' bytes (checked), turned into a hashtable when it is over the
    /// threshold, as Redis loads one.
    pub fn from_intset_bytes(blob: &[u8]) -> Result<Set, &'static str> {
        let ints = IntSet::from_bytes(blob)?;
        let mut set = Set::Ints(ints);
        if set.len() > intset_limit() {
            set.convert();
        }
        Ok(set)
    }

    pub fn len(&self) -> usize {
        match self {
            Set::Ints(ints) => ints.len(),
            Set::Large(large) => large.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the set is in its intset form.
    pub fn is_intset(&self) -> bool {
        matches!(self, Set::Ints(_))
    }

    /// Redis' intset bytes, when the set is an intset.
    pub fn intset_bytes(&self) -> Option<&[u8]> {
        match self {
            Set::Ints(ints) => Some(ints.as_bytes()),
            Set::Large(_) => None,
        }
    }

    /// What `OBJECT ENCODING` answers.
    pub fn encoding(&self) -> &'static str {
        match self {
            Set::Ints(_) => "intset",
            Set::Large(_) => "hashtable",
        }
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        match self {
            Set::Ints(ints) => as_int(member).is_some_and(|n| ints.contains(n)),
            Set::Large(large) => large.find(member).is_some(),
        }
    }

    /// Turns an intset into a hashtable.
    fn convert(&mut self) {
        if let Set::Ints(ints) = self {
            let mut large = LargeSet::with_capacity(ints.len() + 1);
            let mut text = itoa::Buffer::new();
            for n in ints.iter() {
                large.insert(text.format(n).as_bytes());
            }
            *self = Set::Large(Box::new(large));
        }
    }

    /// Adds `member`; false when it was there. An intset turns into a hashtable when the
    /// member is not an integer or the count passes `set-max-intset-entries`.
    pub fn insert(&mut self, member: &[u8]) -> bool {
        match self {
            Set::Ints(ints) => match as_int(member) {
                Some(n) => {
                    if !ints.insert(n) {
                        return false;
                    }
                    if ints.len() > intset_limit() {
                        self.convert();
                    }
                    true
                }
                None => {
                    self.convert();
                    self.insert(member)
                }
            },
            Set::Large(large) => large.insert(member),
        }
    }

    /// Removes `member`; false when it was not there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self {
            Set::Ints(ints) => match as_int(member).map(|n| ints.search(n)) {
                Some(Ok(at)) => {
                    ints.remove_index(at);
                    true
                }
                _ => false,
            },
            Set::Large(large) => large.remove(member),
        }
    }

    /// The member at `index` (`index < len()`): ascending for an intset, storage order
    /// for a hashtable. O(1).
    pub fn get(&self, index: usize) -> Elem<'_> {
        match self {
            Set::Ints(ints) => Elem::Int(ints.get(index)),
            Set::Large(large) => Elem::Bytes(large.members[index].as_bytes()),
        }
    }

    /// A member picked uniformly, `None` when empty.
    pub fn random(&self, rng: &mut impl Rng) -> Option<Elem<'_>> {
        (!self.is_empty()).then(|| self.get(rng.gen_range(0..self.len())))
    }

    /// Removes the member at `index` and returns its bytes.
    pub fn take_index(&mut self, index: usize) -> Vec<u8> {
        match self {
            Set::Ints(ints) => {
                let n = ints.get(index);
                ints.remove_index(index);
                itoa::Buffer::new().format(n).as_bytes().to_vec()
            }
            Set::Large(large) => large.take_index(index),
        }
    }

    /// Removes a member picked uniformly and returns it, `None` when empty.
    pub fn pop_random(&mut self, rng: &mut impl Rng) -> Option<Vec<u8>> {
        (!self.is_empty()).then(|| self.take_index(rng.gen_range(0..self.len())))
    }

    /// The members: ascending for an intset, storage order for a hashtable.
    pub fn iter(&self) -> impl Iterator<Item = Elem<'_>> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// One step of SSCAN over a hashtable: up to `count` members below the cursor and the
    /// cursor to go on from (0 at the end). The cursor is a position in the member vector,
    /// walked downwards: a removal only moves the last member (already returned, or past
    /// the end) into the hole, so a member present for the whole walk is returned, and
    /// at most once unless a removal moves it below the cursor. An intset comes back whole.
    pub fn scan(&self, cursor: u64, count: usize) -> (u64, Vec<Elem<'_>>) {
        let len = self.len() as u64;
        if self.is_intset() {
            return (0, self.iter().collect());
        }
        let end = if cursor == 0 { len } else { cursor.min(len) } as usize;
        let start = end.saturating_sub(count.max(1));
        let taken = (start..end).rev().map(|i| self.get(i)).collect();
        (start as u64, taken)
    }

    /// Bytes of heap memory the set uses, roughly (for `MEMORY USAGE`).
    pub fn heap_bytes(&self) -> usize {
        match self {
            Set::Ints(ints) => ints.as_bytes().len(),
            Set::Large(large) => large.heap_bytes(),
        }
    }
}

impl PartialEq for Set {
    /// Sets are equal when they hold the same members, whatever their forms.
    fn eq(&self, other: &Set) -> bool {
        match (self, other) {
            (Set::Ints(a), Set::Ints(b)) if a.width() == b.width() => a == b,
            _ => {
                let mut text = Vec::new();
                self.len() == other.len()
                    && self.iter().all(|m| {
                        text.clear();
                        m.append_to(&mut text);
                        other.contains(&text)
                    })
            }
        }
    }
}

impl Eq for Set {}

impl fmt::Debug for Set {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

#[cfg(test)]
#[path = "set_tests.rs"]
mod tests;
