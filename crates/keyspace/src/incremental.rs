//! A hash table that resizes a few buckets at a time, as Redis' dicts rehash.
//!
//! `hashbrown` resizes a table in one step: every element is hashed again and moved while
//! the write that found the table full waits, so the HSET that doubles a 2-million-field
//! hash held its worker for over 100 ms (`bench/pauses.py`). Here a resize starts a new
//! table beside the old one instead; each later write first moves the next
//! [`STEP_BUCKETS`] buckets of the old table into the new one, and new elements go to the
//! new table only. Lookups look in both while the move lasts. When the new table fills
//! before the move is over (it cannot while writes keep moving buckets, as it has room for
//! twice what the old one held), the rest is moved at once.
//!
//! The table stores only the elements; as with `hashbrown`, every call that may move one
//! takes the function that hashes it.

use std::fmt;

use hashbrown::HashTable;

/// Buckets of the old table moved by each write while a resize lasts (about 7 in 8 hold
/// an element when the move starts). Moving one costs a hash of it, often a cache miss:
/// a few microseconds a write for the length of the move.
pub const STEP_BUCKETS: usize = 4;

/// A table holding at most this many elements resizes at once (tens of microseconds):
/// two tables would only slow its lookups.
pub const AT_ONCE_UP_TO: usize = 1024;

/// The table a resize empties, and its next bucket to move.
#[derive(Clone)]
struct Moving<T> {
    from: HashTable<T>,
    next: usize,
}

#[derive(Clone)]
pub struct IncrementalTable<T> {
    table: HashTable<T>,
    moving: Option<Box<Moving<T>>>,
}

impl<T> Default for IncrementalTable<T> {
    fn default() -> Self {
        IncrementalTable {
            table: HashTable::new(),
            moving: None,
        }
    }
}

impl<T> fmt::Debug for IncrementalTable<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IncrementalTable")
            .field("len", &self.len())
            .field("moving", &self.is_moving())
            .finish()
    }
}

impl<T> IncrementalTable<T> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(capacity: usize) -> Self {
        IncrementalTable {
            table: HashTable::with_capacity(capacity),
            moving: None,
        }
    }

    pub fn len(&self) -> usize {
        self.table.len() + self.moving.as_ref().map_or(0, |m| m.from.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether a resize is under way (two tables).
    pub fn is_moving(&self) -> bool {
        self.moving.is_some()
    }

    /// Elements the tables hold room for, both of them while a resize lasts.
    pub fn capacity(&self) -> usize {
        self.table.capacity() + self.moving.as_ref().map_or(0, |m| m.from.capacity())
    }

    /// Bytes the tables' allocations take.
    pub fn allocation_size(&self) -> usize {
        self.table.allocation_size()
            + self.moving.as_ref().map_or(0, |m| {
                m.from.allocation_size() + std::mem::size_of::<Moving<T>>()
            })
    }

    pub fn find(&self, hash: u64, mut eq: impl FnMut(&T) -> bool) -> Option<&T> {
        if let Some(found) = self.table.find(hash, &mut eq) {
            return Some(found);
        }
        self.moving.as_ref()?.from.find(hash, eq)
    }

    pub fn find_mut(&mut self, hash: u64, mut eq: impl FnMut(&T) -> bool) -> Option<&mut T> {
        if let Some(found) = self.table.find_mut(hash, &mut eq) {
            return Some(found);
        }
        self.moving.as_mut()?.from.find_mut(hash, eq)
    }

    /// Takes out the element `eq` finds (after moving a step of a resize).
    pub fn remove(
        &mut self,
        hash: u64,
        mut eq: impl FnMut(&T) -> bool,
        hasher: impl Fn(&T) -> u64,
    ) -> Option<T> {
        self.step(&hasher);
        if let Ok(entry) = self.table.find_entry(hash, &mut eq) {
            return Some(entry.remove().0);
        }
        let moving = self.moving.as_mut()?;
        let (value, _) = moving.from.find_entry(hash, eq).ok()?.remove();
        self.finish_if_empty();
        Some(value)
    }

    /// Adds an element the caller knows is not there (after moving a step of a resize,
    /// and starting one when the table is full).
    pub fn insert_unique(&mut self, hash: u64, value: T, hasher: impl Fn(&T) -> u64) {
        self.step(&hasher);
        if self.table.len() == self.table.capacity() {
            if self.moving.is_some() {
                // Filled before the move ended: end it now, then grow as usual.
                self.finish(&hasher);
            }
            if self.table.len() == self.table.capacity() && self.table.len() > AT_ONCE_UP_TO {
                let capacity = self.table.len() * 2;
                self.start(capacity);
            }
        }
        self.table.insert_unique(hash, value, &hasher);
    }

    /// Starts moving everything into a table with room for `min_capacity` elements (at
    /// least the number held), when that is smaller than the table now and no resize is
    /// under way.
    pub fn shrink_to(&mut self, min_capacity: usize, hasher: impl Fn(&T) -> u64) {
        let small = self.len() <= AT_ONCE_UP_TO;
        if self.moving.is_some() {
            if !small {
                return;
            }
            // Few elements left in a big resize: finish it now, then shrink at once.
            self.finish(&hasher);
        }
        let capacity = min_capacity.max(self.table.len());
        if capacity >= self.table.capacity() {
            return;
        }
        if small {
            self.table.shrink_to(capacity, hasher);
            return;
        }
        self.start(capacity);
        self.step(&hasher);
    }

    /// Every element, the new table's first while a resize lasts.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter {
            first: self.table.iter(),
            second: self.moving.as_ref().map(|m| m.from.iter()),
        }
    }

    /// Buckets of both tables, numbered the new table's first (for [`Self::get_bucket`]).
    pub fn num_buckets(&self) -> usize {
        self.table.num_buckets() + self.moving.as_ref().map_or(0, |m| m.from.num_buckets())
    }

    /// The element in bucket `index` (of [`Self::num_buckets`]), if the bucket is full:
    /// a uniformly random full bucket is a uniformly random element.
    pub fn get_bucket(&self, index: usize) -> Option<&T> {
        let own = self.table.num_buckets();
        if index < own {
            return self.table.get_bucket(index);
        }
        self.moving.as_ref()?.from.get_bucket(index - own)
    }

    fn start(&mut self, capacity: usize) {
        debug_assert!(self.moving.is_none());
        let from = std::mem::replace(&mut self.table, HashTable::with_capacity(capacity));
        if !from.is_empty() {
            self.moving = Some(Box::new(Moving { from, next: 0 }));
        }
    }

    /// Moves the next buckets of a resize.
    fn step(&mut self, hasher: &impl Fn(&T) -> u64) {
        let Some(moving) = self.moving.as_mut() else {
            return;
        };
        let end = (moving.next + STEP_BUCKETS).min(moving.from.num_buckets());
        for index in moving.next..end {
            if let Ok(entry) = moving.from.get_bucket_entry(index) {
                let (value, _) = entry.remove();
                self.table.insert_unique(hasher(&value), value, hasher);
            }
        }
        moving.next = end;
        self.finish_if_empty();
    }

    /// Moves the rest of a resize at once.
    fn finish(&mut self, hasher: &impl Fn(&T) -> u64) {
        if let Some(moving) = self.moving.take() {
            self.table.reserve(moving.from.len(), hasher);
            for value in moving.from {
                self.table.insert_unique(hasher(&value), value, hasher);
            }
        }
    }

    fn finish_if_empty(&mut self) {
        if self.moving.as_ref().is_some_and(|m| m.from.is_empty()) {
            self.moving = None;
        }
    }
}

/// The elements of an [`IncrementalTable`].
pub struct Iter<'a, T> {
    first: hashbrown::hash_table::Iter<'a, T>,
    second: Option<hashbrown::hash_table::Iter<'a, T>>,
}

impl<'a, T> Iterator for Iter<'a, T> {
    type Item = &'a T;

    fn next(&mut self) -> Option<&'a T> {
        if let Some(next) = self.first.next() {
            return Some(next);
        }
        self.second.as_mut()?.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let len = self.first.len() + self.second.as_ref().map_or(0, |s| s.len());
        (len, Some(len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    fn h(v: &u64) -> u64 {
        // A poor hash on purpose: many collisions in the low bits.
        v.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 7
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64),
        Remove(u64),
        Shrink,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u64..2000).prop_map(Op::Insert),
            3 => (0u64..2000).prop_map(Op::Remove),
            1 => Just(Op::Shrink),
        ]
    }

    proptest! {
        /// Against a model set: every element findable, counted, iterated and reachable
        /// through the buckets exactly once, through resizes both ways.
        #[test]
        fn behaves_as_a_set(ops in proptest::collection::vec(op(), 1..3000)) {
            let mut table = IncrementalTable::new();
            let mut model = HashSet::new();
            for op in ops {
                match op {
                    Op::Insert(v) => {
                        if model.insert(v) {
                            table.insert_unique(h(&v), v, h);
                        }
                    }
                    Op::Remove(v) => {
                        let removed = table.remove(h(&v), |&x| x == v, h);
                        prop_assert_eq!(removed.is_some(), model.remove(&v));
                    }
                    Op::Shrink => table.shrink_to(model.len() * 2, h),
                }
                prop_assert_eq!(table.len(), model.len());
            }
            for v in &model {
                prop_assert_eq!(table.find(h(v), |x| x == v), Some(v));
            }
            let iterated: Vec<u64> = table.iter().copied().collect();
            prop_assert_eq!(iterated.len(), model.len());
            prop_assert_eq!(iterated.into_iter().collect::<HashSet<_>>(), model.clone());
            let in_buckets: Vec<u64> = (0..table.num_buckets())
                .filter_map(|i| table.get_bucket(i).copied())
                .collect();
            prop_assert_eq!(in_buckets.len(), model.len());
        }
    }

    #[test]
    fn growth_moves_a_step_per_write_and_ends() {
        let mut table = IncrementalTable::new();
        let mut n = 0u64;
        // Fill to the brim, then one more starts a move.
        loop {
            table.insert_unique(h(&n), n, h);
            n += 1;
            if table.is_moving() {
                break;
            }
        }
        let held = table.len();
        assert!(held > 4);
        // The old table's buckets go STEP_BUCKETS a write; the move ends long before the
        // new table could fill.
        let mut writes = 0;
        while table.is_moving() {
            table.insert_unique(h(&n), n, h);
            n += 1;
            writes += 1;
        }
        assert!(
            writes <= held.div_ceil(STEP_BUCKETS) * 2 + 1,
            "{writes} writes for {held}"
        );
        for v in 0..n {
            assert_eq!(table.find(h(&v), |&x| x == v), Some(&v));
        }
    }

    #[test]
    fn a_big_resize_never_moves_everything_in_one_write() {
        const { assert!(AT_ONCE_UP_TO < 100_000) };
        let mut table = IncrementalTable::new();
        let mut biggest_move_start = 0;
        for v in 0..200_000u64 {
            let before = table.is_moving();
            table.insert_unique(h(&v), v, h);
            if !before && table.is_moving() {
                biggest_move_start = table.len();
            }
        }
        // The last growth started with over 100,000 elements and still moved a step at a
        // time: the table was left moving right after it.
        assert!(biggest_move_start > 100_000, "{biggest_move_start}");
        assert_eq!(table.len(), 200_000);
    }
}
