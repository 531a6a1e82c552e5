//! One database's share of one shard: an extendible hash table.
//!
//! Keys live in segments (each a small `hashbrown` table). A segment that grows past
//! [`SEGMENT_SPLIT_LEN`] splits in two by the next bit of the hash, so no resize ever
//! rehashes more than one segment. Segments cover contiguous ranges of hash values, which
//! gives `SCAN` its guarantee cheaply: the cursor is a hash value, keys are visited in hash
//! order, and a split never moves a key to a range the cursor has already passed.

use hashbrown::HashTable;

use crate::clock::{Deadline, Now};
use crate::value::{Entry, Value};

/// A full segment splits before it takes one more key. This is exactly what a table of
/// 2048 buckets holds (hashbrown fills 7/8 of its buckets), so a segment never grows into
/// 4096 buckets, and the two halves of a split start at 2048 buckets and 44% full: the load
/// stays between 44% and 87.5%, which keeps memory per key down.
pub const SEGMENT_SPLIT_LEN: usize = 1792;
/// Directory depth cap; past it segments just grow (only reachable with colliding hashes).
const MAX_DEPTH: u32 = 24;

/// A hint to load `at`'s cache line; never faults, never waits.
#[inline(always)]
#[allow(unsafe_code)]
fn prefetch_read<T: ?Sized>(at: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing architecturally; `at` is a valid reference anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (at as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// The hash a segment's `hashbrown` table files a key under. The key's own hash picks the
/// shard from its top bits and the segment from the bits after them, so within one segment
/// those bits are all the same; hashbrown takes its 7-bit tag from the top bits, and would
/// then match every bucket it probes. Multiplying by an odd constant carries the varying
/// low bits into the top ones.
#[inline]
fn bucket_hash(hash: u64) -> u64 {
    hash.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// A key with its value, stored with its hash so that splits and resizes never rehash.
#[derive(Debug, Clone)]
pub struct Slot {
    pub hash: u64,
    pub key: Box<[u8]>,
    pub entry: Entry,
}

#[derive(Debug, Default, Clone)]
struct Segment {
    local_depth: u32,
    /// Slots inline: boxing them made an empty bucket cost a pointer rather than a slot (141
    /// instead of 213 bytes per key for 1M small strings) but cost about a fifth of SET
    /// throughput at pipeline 16 (one more cache miss per lookup); speed won.
    table: HashTable<Slot>,
    expires: usize,
}

/// What a lookup found.
pub enum Found<'a> {
    Live(&'a mut Slot),
    /// The key was there but its deadline had passed: it has been removed.
    Expired,
    Missing,
}

#[derive(Debug, Clone)]
pub struct Table {
    /// Bits of the hash already used to pick the shard; the directory uses the bits after.
    shard_bits: u32,
    global_depth: u32,
    directory: Vec<u32>,
    segments: Vec<Segment>,
    len: usize,
    expires: usize,
    /// Round-robin position of the active expiry sweep, in `segments`.
    sweep_position: usize,
}

impl Table {
    pub fn new(shard_bits: u32) -> Table {
        Table {
            shard_bits,
            global_depth: 0,
            directory: vec![0],
            segments: vec![Segment::default()],
            len: 0,
            expires: 0,
            sweep_position: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn shard_bits(&self) -> u32 {
        self.shard_bits
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many keys carry a deadline.
    pub fn expires(&self) -> usize {
        self.expires
    }

    /// The hash bits after the shard bits, left-aligned.
    fn sub_hash(&self, hash: u64) -> u64 {
        if self.shard_bits == 0 {
            hash
        } else {
            hash << self.shard_bits
        }
    }

    fn directory_index(&self, hash: u64) -> usize {
        if self.global_depth == 0 {
            0
        } else {
            (self.sub_hash(hash) >> (64 - self.global_depth)) as usize
        }
    }

    fn segment_of(&self, hash: u64) -> usize {
        self.directory[self.directory_index(hash)] as usize
    }

    pub fn get(&self, hash: u64, key: &[u8]) -> Option<&Slot> {
        let segment = &self.segments[self.segment_of(hash)];
        segment.table.find(bucket_hash(hash), |slot| {
            slot.hash == hash && *slot.key == *key
        })
    }

    /// Starts loading, without waiting, the slots a lookup of `hash` will compare: a batch of
    /// commands prefetches all its keys first so their cache misses overlap.
    pub fn prefetch(&self, hash: u64) {
        let segment = &self.segments[self.segment_of(hash)];
        segment.table.find(bucket_hash(hash), |slot| {
            prefetch_read(slot);
            false
        });
    }

    /// The second step after [`Table::prefetch`] (once the slots have arrived): starts
    /// loading the key and string value of the slot filed under `hash`.
    pub fn prefetch_contents(&self, hash: u64) {
        let segment = &self.segments[self.segment_of(hash)];
        segment.table.find(bucket_hash(hash), |slot| {
            if slot.hash == hash {
                prefetch_read(&*slot.key);
                if let Value::Str(bytes) = &slot.entry.value {
                    prefetch_read(bytes.as_slice());
                }
            }
            false
        });
    }

    /// Finds a key, removing it first if its deadline has passed at `now`.
    pub fn lookup(&mut self, hash: u64, key: &[u8], now: Now) -> Found<'_> {
        let index = self.segment_of(hash);
        let segment = &mut self.segments[index];
        let Ok(occupied) = segment.table.find_entry(bucket_hash(hash), |slot| {
            slot.hash == hash && *slot.key == *key
        }) else {
            return Found::Missing;
        };
        if occupied
            .get()
            .entry
            .deadline
            .is_some_and(|d| d.is_passed(now))
        {
            occupied.remove();
            segment.expires -= 1;
            self.expires -= 1;
            self.len -= 1;
            return Found::Expired;
        }
        Found::Live(occupied.into_mut())
    }

    /// Removes the key if it is present and past its deadline at `now`; true if it did.
    pub fn remove_if_passed(&mut self, hash: u64, key: &[u8], now: Now) -> bool {
        let passed = self
            .get(hash, key)
            .is_some_and(|slot| slot.entry.deadline.is_some_and(|d| d.is_passed(now)));
        if passed {
            self.remove(hash, key);
        }
        passed
    }

    /// Inserts or replaces a key; returns the entry it replaced.
    pub fn insert(&mut self, hash: u64, key: &[u8], entry: Entry) -> Option<Entry> {
        let index = self.segment_of(hash);
        let segment = &mut self.segments[index];
        let new_expires = entry.deadline.is_some() as usize;
        if let Some(slot) = segment.table.find_mut(bucket_hash(hash), |slot| {
            slot.hash == hash && *slot.key == *key
        }) {
            let old = std::mem::replace(&mut slot.entry, entry);
            let old_expires = old.deadline.is_some() as usize;
            segment.expires = segment.expires + new_expires - old_expires;
            self.expires = self.expires + new_expires - old_expires;
            return Some(old);
        }
        let index = if segment.table.len() >= SEGMENT_SPLIT_LEN && segment.local_depth < MAX_DEPTH {
            self.split(index);
            self.segment_of(hash)
        } else {
            index
        };
        let segment = &mut self.segments[index];
        segment.table.insert_unique(
            bucket_hash(hash),
            Slot {
                hash,
                key: key.into(),
                entry,
            },
            |slot| bucket_hash(slot.hash),
        );
        segment.expires += new_expires;
        self.expires += new_expires;
        self.len += 1;
        None
    }

    pub fn remove(&mut self, hash: u64, key: &[u8]) -> Option<Slot> {
        let index = self.segment_of(hash);
        let segment = &mut self.segments[index];
        let occupied = segment
            .table
            .find_entry(bucket_hash(hash), |slot| {
                slot.hash == hash && *slot.key == *key
            })
            .ok()?;
        let (slot, _) = occupied.remove();
        if slot.entry.deadline.is_some() {
            segment.expires -= 1;
            self.expires -= 1;
        }
        self.len -= 1;
        Some(slot)
    }

    /// Sets or clears a key's deadline; false when the key is absent.
    pub fn set_deadline(&mut self, hash: u64, key: &[u8], deadline: Option<Deadline>) -> bool {
        let index = self.segment_of(hash);
        let segment = &mut self.segments[index];
        let Some(slot) = segment.table.find_mut(bucket_hash(hash), |slot| {
            slot.hash == hash && *slot.key == *key
        }) else {
            return false;
        };
        let before = slot.entry.deadline.is_some() as usize;
        let after = deadline.is_some() as usize;
        slot.entry.deadline = deadline;
        segment.expires = segment.expires + after - before;
        self.expires = self.expires + after - before;
        true
    }

    fn split(&mut self, index: usize) {
        let depth = self.segments[index].local_depth;
        if depth == self.global_depth {
            let doubled: Vec<u32> = self.directory.iter().flat_map(|&s| [s, s]).collect();
            self.directory = doubled;
            self.global_depth += 1;
        }
        let new_index = self.segments.len() as u32;
        let bit = 1u64 << (63 - depth);
        let shard_bits = self.shard_bits;
        let sub = |hash: u64| {
            if shard_bits == 0 {
                hash
            } else {
                hash << shard_bits
            }
        };
        let old = &mut self.segments[index];
        old.local_depth = depth + 1;
        let mut moved = Segment {
            local_depth: depth + 1,
            table: HashTable::with_capacity(SEGMENT_SPLIT_LEN),
            expires: 0,
        };
        for slot in old.table.extract_if(|slot| sub(slot.hash) & bit != 0) {
            if slot.entry.deadline.is_some() {
                moved.expires += 1;
            }
            moved
                .table
                .insert_unique(bucket_hash(slot.hash), slot, |s| bucket_hash(s.hash));
        }
        old.expires -= moved.expires;
        // The old half keeps its buckets (room for SEGMENT_SPLIT_LEN), like the new one.
        old.table
            .shrink_to(SEGMENT_SPLIT_LEN, |s| bucket_hash(s.hash));
        self.segments.push(moved);
        // Directory entries of the old segment whose bit number `depth` is set now point to
        // the new one.
        let shift = self.global_depth - depth - 1;
        for (position, target) in self.directory.iter_mut().enumerate() {
            if *target as usize == index && (position >> shift) & 1 == 1 {
                *target = new_index;
            }
        }
    }

    /// Visits keys in hash order from `cursor` (a full hash value) on. Returns the next cursor
    /// (`None` when this table is exhausted). Stops after at least `count` keys, never in the
    /// middle of a run of equal hashes.
    pub fn scan(&self, cursor: u64, count: usize, visit: &mut dyn FnMut(&Slot)) -> Option<u64> {
        let mut position = cursor;
        let mut visited = 0usize;
        let shard_prefix = if self.shard_bits == 0 {
            0
        } else {
            cursor >> (64 - self.shard_bits)
        };
        loop {
            let index = self.segment_of(position);
            let segment = &self.segments[index];
            // The segment covers hashes that share the first `local_depth` sub-hash bits.
            let depth = segment.local_depth + self.shard_bits;
            let (start, end) = prefix_range(position, depth);
            let mut slots: Vec<&Slot> = segment
                .table
                .iter()
                .filter(|slot| slot.hash >= position)
                .collect();
            slots.sort_unstable_by_key(|slot| slot.hash);
            let mut taken = 0;
            while taken < slots.len() && visited < count {
                let hash = slots[taken].hash;
                while taken < slots.len() && slots[taken].hash == hash {
                    visit(slots[taken]);
                    taken += 1;
                    visited += 1;
                }
            }
            if taken < slots.len() {
                return Some(slots[taken].hash);
            }
            debug_assert!(start <= position);
            match end {
                Some(next)
                    if (self.shard_bits == 0 || next >> (64 - self.shard_bits) == shard_prefix) =>
                {
                    position = next;
                    if visited >= count {
                        return Some(position);
                    }
                }
                _ => return None,
            }
        }
    }

    /// A uniformly chosen segment's random key, or `None` when empty.
    pub fn random(&self, mut pick: impl FnMut(usize) -> usize) -> Option<&Slot> {
        if self.len == 0 {
            return None;
        }
        for _ in 0..8 {
            let segment = &self.segments[self.directory[pick(self.directory.len())] as usize];
            if !segment.table.is_empty() {
                return segment.table.iter().nth(pick(segment.table.len()));
            }
        }
        let nth = pick(self.len);
        self.segments.iter().flat_map(|s| s.table.iter()).nth(nth)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Slot> {
        self.segments.iter().flat_map(|s| s.table.iter())
    }

    /// Active expiry: removes passed keys from up to `max_segments` segments that hold
    /// deadlines, continuing where the last sweep stopped. Returns the removed keys.
    pub fn sweep_expired(&mut self, now: Now, max_segments: usize, removed: &mut Vec<Box<[u8]>>) {
        if self.expires == 0 {
            return;
        }
        let total = self.segments.len();
        let mut visited = 0;
        let mut examined = 0;
        while visited < total && examined < max_segments {
            let index = self.sweep_position % total;
            self.sweep_position = (index + 1) % total;
            visited += 1;
            let segment = &mut self.segments[index];
            if segment.expires == 0 {
                continue;
            }
            examined += 1;
            let before = removed.len();
            for slot in segment
                .table
                .extract_if(|slot| slot.entry.deadline.is_some_and(|d| d.is_passed(now)))
            {
                removed.push(slot.key);
            }
            let count = removed.len() - before;
            segment.expires -= count;
            self.expires -= count;
            self.len -= count;
        }
    }

    /// Bytes of memory this table holds besides keys and values (for `INFO memory`).
    pub fn overhead_bytes(&self) -> usize {
        self.directory.len() * 4
            + self
                .segments
                .iter()
                .map(|s| s.table.allocation_size() + std::mem::size_of::<Segment>())
                .sum::<usize>()
    }
}

/// The range of full hashes sharing the first `depth` bits of `hash`: its start, and the
/// start of the next range (`None` past the top).
fn prefix_range(hash: u64, depth: u32) -> (u64, Option<u64>) {
    if depth == 0 {
        return (0, None);
    }
    let size_bits = 64 - depth;
    let start = (hash >> size_bits) << size_bits;
    (start, start.checked_add(1u64 << size_bits))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn now() -> Now {
        Now {
            mono_ms: 1000,
            wall_ms: 1_700_000_000_000,
            loading: false,
        }
    }

    fn hash_of(key: &[u8]) -> u64 {
        // A deterministic spread for tests; the keyspace uses a seeded hasher.
        let mut h: u64 = 0xcbf29ce484222325;
        for &b in key {
            h ^= b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
        h ^ (h >> 29)
    }

    fn filled(shard_bits: u32, n: usize) -> Table {
        let mut t = Table::new(shard_bits);
        for i in 0..n {
            let key = format!("key:{i}");
            let mut h = hash_of(key.as_bytes());
            if shard_bits > 0 {
                // Every key of this table lives in shard 3.
                h = (h >> shard_bits) | (3u64 << (64 - shard_bits));
            }
            t.insert(h, key.as_bytes(), Entry::new(Value::Str(vec![1])));
        }
        t
    }

    #[test]
    fn splits_keep_every_key_findable() {
        let t = filled(0, 20_000);
        assert_eq!(t.len(), 20_000);
        assert!(t.segments.len() > 8);
        for i in 0..20_000 {
            let key = format!("key:{i}");
            assert!(t.get(hash_of(key.as_bytes()), key.as_bytes()).is_some());
        }
    }

    #[test]
    fn segments_split_before_their_buckets_double() {
        let t = filled(0, 20_000);
        for segment in &t.segments {
            // 1792 keys fill 2048 buckets; a segment that grew to 4096 would have room
            // for 3584.
            assert!(segment.table.len() <= SEGMENT_SPLIT_LEN);
            assert!(segment.table.capacity() < 2 * SEGMENT_SPLIT_LEN);
        }
    }

    #[test]
    fn bucket_tags_differ_within_a_segment() {
        // Keys of one segment share their top hash bits; the hash hashbrown sees must not.
        let hashes: Vec<u64> = (0..64u64).map(|i| (0xAB << 56) | i).collect();
        let tags: std::collections::HashSet<u64> =
            hashes.iter().map(|&h| bucket_hash(h) >> 57).collect();
        assert!(tags.len() > 16, "{} distinct tags", tags.len());
    }

    #[test]
    fn scan_visits_every_key_once_across_splits() {
        for shard_bits in [0, 5] {
            let mut t = filled(shard_bits, 3000);
            let start = if shard_bits == 0 {
                0
            } else {
                3u64 << (64 - shard_bits)
            };
            let mut cursor = start;
            let mut seen = HashSet::new();
            let mut extra = 0;
            loop {
                let mut batch = Vec::new();
                let next = t.scan(cursor, 10, &mut |s| batch.push(s.key.clone()));
                for k in batch {
                    assert!(seen.insert(k), "key returned twice");
                }
                // Writes during the scan force splits.
                for _ in 0..5 {
                    let key = format!("new:{extra}");
                    extra += 1;
                    let mut h = hash_of(key.as_bytes());
                    if shard_bits > 0 {
                        h = (h >> shard_bits) | (3u64 << (64 - shard_bits));
                    }
                    t.insert(h, key.as_bytes(), Entry::new(Value::Str(vec![])));
                }
                match next {
                    Some(c) => {
                        assert!(c > cursor);
                        cursor = c
                    }
                    None => break,
                }
            }
            for i in 0..3000 {
                assert!(
                    seen.contains(format!("key:{i}").as_bytes()),
                    "missed key:{i}"
                );
            }
        }
    }

    #[test]
    fn lookup_removes_passed_keys() {
        let mut t = Table::new(0);
        let n = now();
        let mut e = Entry::new(Value::Str(b"v".to_vec()));
        e.deadline = Deadline::after(n, 10);
        t.insert(1, b"k", e);
        assert_eq!(t.expires(), 1);
        assert!(matches!(t.lookup(1, b"k", n), Found::Live(_)));
        let later = Now {
            mono_ms: n.mono_ms + 11,
            ..n
        };
        assert!(matches!(t.lookup(1, b"k", later), Found::Expired));
        assert_eq!(t.len(), 0);
        assert_eq!(t.expires(), 0);
    }

    #[test]
    fn sweep_removes_only_passed_keys() {
        let mut t = filled(0, 5000);
        let n = now();
        for i in (0..5000).step_by(2) {
            let key = format!("key:{i}");
            t.set_deadline(
                hash_of(key.as_bytes()),
                key.as_bytes(),
                Deadline::after(n, 5),
            );
        }
        assert_eq!(t.expires(), 2500);
        let mut removed = Vec::new();
        t.sweep_expired(
            Now {
                mono_ms: n.mono_ms + 6,
                ..n
            },
            usize::MAX,
            &mut removed,
        );
        assert_eq!(removed.len(), 2500);
        assert_eq!(t.len(), 2500);
        assert_eq!(t.expires(), 0);
    }
}
