//! One database's share of one shard: an extendible hash table.
//!
//! Keys live in segments (each a small `hashbrown` table). A segment that grows past
//! [`SEGMENT_SPLIT_LEN`] splits in two by the next bit of the hash, so no resize ever
//! rehashes more than one segment. Segments cover contiguous ranges of hash values, which
//! gives `SCAN` its guarantee cheaply: the cursor is a hash value, keys are visited in hash
//! order, and a split never moves a key to a range the cursor has already passed.

use hashbrown::HashTable;

use crate::clock::{Deadline, Now};
use crate::slot::Slot;
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
pub(crate) fn prefetch_read<T: ?Sized>(at: &T) {
    prefetch_address((at as *const T).cast::<u8>());
}

/// A hint to load the cache line holding `address`, which need not be valid: a prefetch
/// reads nothing architecturally, never faults, never waits.
#[inline(always)]
#[allow(unsafe_code)]
pub(crate) fn prefetch_address(address: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` is a hint; it does not dereference the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(address.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
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

#[derive(Debug, Default)]
struct Segment {
    local_depth: u32,
    /// Buckets hold thin pointers ([`Slot`]: key, entry and access time in one allocation),
    /// so an empty bucket costs 9 bytes with its control byte.
    table: HashTable<Slot>,
    expires: usize,
    /// Where `table`'s control bytes start, as an address (0: unknown, or no allocation),
    /// so that [`Table::prefetch`] can compute which cache lines a lookup will read
    /// without reading any of them. See [`Segment::locate_buckets`].
    control: usize,
}

impl Clone for Segment {
    fn clone(&self) -> Segment {
        let mut copy = Segment {
            local_depth: self.local_depth,
            table: self.table.clone(),
            expires: self.expires,
            control: 0,
        };
        copy.locate_buckets();
        copy
    }
}

impl Segment {
    /// Finds where the table's control bytes start, after anything that may have moved
    /// them (an insert that grew the table, a shrink, a clone). hashbrown lays a table out
    /// as the buckets in reverse order, then the control bytes: bucket `i` ends where the
    /// control bytes start minus `i` buckets. That layout is hashbrown's to change; if it
    /// did, prefetches would load the wrong lines (a hint, never a read: nothing breaks),
    /// and the unit test `prefetch_addresses_are_the_ones_lookups_read` would fail.
    fn locate_buckets(&mut self) {
        self.control = self
            .table
            .iter_buckets()
            .next()
            .and_then(|index| Some(bucket_end(self.table.get_bucket(index)?, index)))
            .unwrap_or(0);
    }

    /// The addresses a lookup of `hash` (a [`bucket_hash`]) starts reading at: its first
    /// group of control bytes and the bucket of that group's first position.
    fn probe_start(&self, hash: u64) -> Option<(usize, usize)> {
        if self.control == 0 {
            return None;
        }
        // hashbrown starts probing at the hash modulo the (power of two) bucket count.
        let position = hash as usize & (self.table.num_buckets() - 1);
        Some((
            self.control + position,
            self.control - (position + 1) * size_of::<Slot>(),
        ))
    }
}

/// Where the control bytes of the table holding `slot` at bucket `index` start.
fn bucket_end(slot: &Slot, index: usize) -> usize {
    slot as *const Slot as usize + (index + 1) * size_of::<Slot>()
}

/// What a lookup found.
pub enum Found<'a> {
    Live(&'a mut Slot),
    /// The key was there but its deadline had passed: it has been removed.
    Expired,
    /// No such key (or one past its deadline, kept because `now.keep_passed`).
    Missing,
}

#[derive(Debug, Clone)]
pub struct Table {
    /// The keyspace's seeded hasher: slots do not store their hash, so growing, splitting
    /// and SCAN recompute it from the key.
    hasher: ahash::RandomState,
    /// Bits of the hash already used to pick the shard; the directory uses the bits after.
    shard_bits: u32,
    global_depth: u32,
    directory: Vec<u32>,
    segments: Vec<Segment>,
    len: usize,
    expires: usize,
    /// Where the active expiry sweep stopped: a segment, and a bucket of it.
    sweep_position: usize,
    sweep_bucket: usize,
}

/// What one active-expiry sweep of a table read and removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Keys whose slots it read.
    pub examined: usize,
    /// Of those, the ones past their deadline, now removed.
    pub expired: usize,
}

impl std::ops::AddAssign for Swept {
    fn add_assign(&mut self, other: Swept) {
        self.examined += other.examined;
        self.expired += other.expired;
    }
}

impl Table {
    pub fn new(shard_bits: u32, hasher: ahash::RandomState) -> Table {
        Table {
            hasher,
            shard_bits,
            global_depth: 0,
            directory: vec![0],
            segments: vec![Segment::default()],
            len: 0,
            expires: 0,
            sweep_position: 0,
            sweep_bucket: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn shard_bits(&self) -> u32 {
        self.shard_bits
    }

    /// A new empty table for the same shard (FLUSHDB).
    pub fn emptied(&self) -> Table {
        Table::new(self.shard_bits, self.hasher.clone())
    }

    /// The hash a key is filed under (the keyspace's hash of it).
    pub fn hash_of(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
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
        if self.global_depth == 0 {
            // One segment (most tables: a shard's share of a database is small), and no
            // load of the directory it would take to say so.
            return 0;
        }
        self.directory[self.directory_index(hash)] as usize
    }

    pub fn get(&self, hash: u64, key: &[u8]) -> Option<&Slot> {
        let segment = &self.segments[self.segment_of(hash)];
        segment
            .table
            .find(bucket_hash(hash), |slot| slot.key() == key)
    }

    /// Starts loading, without waiting, the control bytes and buckets a lookup of `hash`
    /// will read first. It computes their addresses and reads none of the table's memory,
    /// so it never waits on a cache miss: a batch of commands prefetches all its keys
    /// first so that their misses overlap.
    pub fn prefetch(&self, hash: u64) {
        let segment = &self.segments[self.segment_of(hash)];
        if let Some((control, bucket)) = segment.probe_start(bucket_hash(hash)) {
            // A group of control bytes is 16 wide and may straddle two cache lines.
            prefetch_address(control as *const u8);
            prefetch_address((control + 15) as *const u8);
            prefetch_address(bucket as *const u8);
        }
    }

    /// The second step after [`Table::prefetch`] (once the buckets have arrived): starts
    /// loading the allocations (entry and key) the buckets filed under `hash` point to.
    pub fn prefetch_contents(&self, hash: u64) {
        let segment = &self.segments[self.segment_of(hash)];
        segment.table.find(bucket_hash(hash), |slot| {
            slot.prefetch();
            false
        });
    }

    /// The third step (once the slot has arrived): starts loading the string value of `key`.
    pub fn prefetch_value(&self, hash: u64, key: &[u8]) {
        if let Some(slot) = self.get(hash, key) {
            if let Value::Str(bytes) = slot.value() {
                prefetch_read(bytes.as_slice());
            }
        }
    }

    /// Finds a key, removing it first if its deadline has passed at `now`.
    pub fn lookup(&mut self, hash: u64, key: &[u8], now: Now) -> Found<'_> {
        let index = self.segment_of(hash);
        let segment = &mut self.segments[index];
        let Ok(occupied) = segment
            .table
            .find_entry(bucket_hash(hash), |slot| slot.key() == key)
        else {
            return Found::Missing;
        };
        if occupied.get().is_passed(now) {
            if now.keep_passed {
                return Found::Missing;
            }
            let (slot, _) = occupied.remove();
            crate::lazyfree::free_expired(slot);
            segment.expires -= 1;
            self.expires -= 1;
            self.len -= 1;
            return Found::Expired;
        }
        Found::Live(occupied.into_mut())
    }

    /// Removes the key if it is present and past its deadline at `now` (unless `now` keeps
    /// passed keys); true if it did.
    pub fn remove_if_passed(&mut self, hash: u64, key: &[u8], now: Now) -> bool {
        let passed =
            !now.keep_passed && self.get(hash, key).is_some_and(|slot| slot.is_passed(now));
        if passed {
            if let Some(slot) = self.remove(hash, key) {
                crate::lazyfree::free_expired(slot);
            }
        }
        passed
    }

    /// Inserts or replaces a key, stamped with `access_s` (a replaced key keeps its own
    /// when `keep_access`); returns the entry it replaced.
    pub fn insert(
        &mut self,
        hash: u64,
        key: &[u8],
        entry: Entry,
        access_s: u32,
        keep_access: bool,
    ) -> Option<Entry> {
        let index = self.segment_of(hash);
        let segment = &mut self.segments[index];
        let new_expires = entry.deadline.is_some() as usize;
        if let Some(slot) = segment
            .table
            .find_mut(bucket_hash(hash), |slot| slot.key() == key)
        {
            if !keep_access {
                slot.set_access_s(access_s);
            }
            let old = slot.replace(entry);
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
        let hasher = &self.hasher;
        let segment = &mut self.segments[index];
        let inserted = segment.table.insert_unique(
            bucket_hash(hash),
            Slot::new(key, entry, access_s),
            |slot| bucket_hash(hasher.hash_one(slot.key())),
        );
        // The insert may have grown the table into a new allocation.
        segment.control = bucket_end(inserted.get(), inserted.bucket_index());
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
            .find_entry(bucket_hash(hash), |slot| slot.key() == key)
            .ok()?;
        let (slot, _) = occupied.remove();
        if slot.deadline().is_some() {
            segment.expires -= 1;
            self.expires -= 1;
        }
        self.len -= 1;
        Some(slot)
    }

    /// The key's slot to change in place, past its deadline or not, without counting or
    /// expiring anything.
    pub fn get_mut(&mut self, hash: u64, key: &[u8]) -> Option<&mut Slot> {
        let index = self.segment_of(hash);
        self.segments[index]
            .table
            .find_mut(bucket_hash(hash), |slot| slot.key() == key)
    }

    /// Sets or clears a key's deadline; false when the key is absent.
    pub fn set_deadline(&mut self, hash: u64, key: &[u8], deadline: Option<Deadline>) -> bool {
        let index = self.segment_of(hash);
        let segment = &mut self.segments[index];
        let Some(slot) = segment
            .table
            .find_mut(bucket_hash(hash), |slot| slot.key() == key)
        else {
            return false;
        };
        let before = slot.deadline().is_some() as usize;
        let after = deadline.is_some() as usize;
        slot.set_deadline(deadline);
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
        let hasher = &self.hasher;
        let rehash = |s: &Slot| bucket_hash(hasher.hash_one(s.key()));
        let old = &mut self.segments[index];
        old.local_depth = depth + 1;
        let mut moved = Segment {
            local_depth: depth + 1,
            table: HashTable::with_capacity(SEGMENT_SPLIT_LEN),
            expires: 0,
            control: 0,
        };
        for slot in old
            .table
            .extract_if(|slot| sub(hasher.hash_one(slot.key())) & bit != 0)
        {
            if slot.deadline().is_some() {
                moved.expires += 1;
            }
            moved.table.insert_unique(rehash(&slot), slot, rehash);
        }
        old.expires -= moved.expires;
        // The old half keeps its buckets (room for SEGMENT_SPLIT_LEN), like the new one.
        old.table.shrink_to(SEGMENT_SPLIT_LEN, rehash);
        old.locate_buckets();
        moved.locate_buckets();
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
            let mut slots: Vec<(u64, &Slot)> = segment
                .table
                .iter()
                .map(|slot| (self.hash_of(slot.key()), slot))
                .filter(|(hash, _)| *hash >= position)
                .collect();
            slots.sort_unstable_by_key(|(hash, _)| *hash);
            let mut taken = 0;
            while taken < slots.len() && visited < count {
                let hash = slots[taken].0;
                while taken < slots.len() && slots[taken].0 == hash {
                    visit(slots[taken].1);
                    taken += 1;
                    visited += 1;
                }
            }
            if taken < slots.len() {
                return Some(slots[taken].0);
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
            if segment.table.is_empty() {
                continue;
            }
            // A random bucket, then the next full one: a few probes at the table's load
            // (44-87.5%), where counting to a random nth key read half the segment.
            let buckets = segment.table.num_buckets();
            let start = pick(buckets);
            for step in 0..buckets {
                if let Some(slot) = segment.table.get_bucket((start + step) % buckets) {
                    return Some(slot);
                }
            }
        }
        let nth = pick(self.len);
        self.segments.iter().flat_map(|s| s.table.iter()).nth(nth)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Slot> {
        self.segments.iter().flat_map(|s| s.table.iter())
    }

    /// Active expiry: reads up to `budget` keys of the segments that hold deadlines, bucket by
    /// bucket from where the last sweep stopped, and removes those past their deadline
    /// (their keys go to `removed`). The work is bounded by the keys read, each a load of
    /// its slot: sweeping whole segments read every key with a deadline on every tick (a
    /// million keys with a TTL kept an idle server 18% busy and stalled it 20 ms a tick).
    /// A bucket index stays valid while the segment does not grow; a sweep that finds its
    /// segment changed under it only skips or rereads a few keys.
    pub fn sweep_expired(
        &mut self,
        now: Now,
        budget: usize,
        removed: &mut Vec<Box<[u8]>>,
    ) -> Swept {
        let mut swept = Swept::default();
        let total = self.segments.len();
        // Empty buckets cost a control byte each; they are bounded too. Past one whole lap
        // of the segments the sweep stops, whatever is left of its budget.
        let mut buckets_left = budget.saturating_mul(16).max(64);
        let mut segments_left = total;
        while swept.examined < budget && buckets_left > 0 && self.expires > 0 {
            let index = self.sweep_position % total;
            let segment = &mut self.segments[index];
            if segment.expires == 0 || self.sweep_bucket >= segment.table.num_buckets() {
                self.sweep_position = (index + 1) % total;
                self.sweep_bucket = 0;
                segments_left -= 1;
                if segments_left == 0 {
                    break;
                }
                continue;
            }
            let bucket = self.sweep_bucket;
            self.sweep_bucket += 1;
            buckets_left -= 1;
            let Some(slot) = segment.table.get_bucket(bucket) else {
                continue;
            };
            swept.examined += 1;
            if !slot.is_passed(now) {
                continue;
            }
            if let Ok(entry) = segment.table.get_bucket_entry(bucket) {
                let (slot, _) = entry.remove();
                removed.push(slot.key().into());
                crate::lazyfree::free_expired(slot);
                segment.expires -= 1;
                self.expires -= 1;
                self.len -= 1;
                swept.expired += 1;
            }
        }
        swept
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
            wall_offset_us: (1_700_000_000_000 - 1000) * 1000,
            loading: false,
            keep_passed: false,
        }
    }

    fn hasher() -> ahash::RandomState {
        ahash::RandomState::with_seeds(1, 2, 3, 4)
    }

    fn hash_of(key: &[u8]) -> u64 {
        hasher().hash_one(key)
    }

    /// Whether `key` belongs in shard 3 of a keyspace with `shard_bits` (every key of the
    /// test tables lives there, as in a real shard).
    fn in_shard_3(shard_bits: u32, key: &str) -> bool {
        shard_bits == 0 || hash_of(key.as_bytes()) >> (64 - shard_bits) == 3
    }

    /// `n` keys named `prefix:i` that fall in shard 3, from `i = from` on.
    fn keys_in_shard(shard_bits: u32, prefix: &str, from: usize, n: usize) -> Vec<String> {
        (from..)
            .map(|i| format!("{prefix}:{i}"))
            .filter(|k| in_shard_3(shard_bits, k))
            .take(n)
            .collect()
    }

    fn filled(shard_bits: u32, n: usize) -> (Table, Vec<String>) {
        let mut t = Table::new(shard_bits, hasher());
        let keys = keys_in_shard(shard_bits, "key", 0, n);
        for key in &keys {
            t.insert(
                hash_of(key.as_bytes()),
                key.as_bytes(),
                Entry::new(Value::Str(vec![1])),
                0,
                false,
            );
        }
        (t, keys)
    }

    #[test]
    fn splits_keep_every_key_findable() {
        let (t, _) = filled(0, 20_000);
        assert_eq!(t.len(), 20_000);
        assert!(t.segments.len() > 8);
        for i in 0..20_000 {
            let key = format!("key:{i}");
            assert!(t.get(hash_of(key.as_bytes()), key.as_bytes()).is_some());
        }
    }

    #[test]
    fn prefetch_addresses_are_the_ones_lookups_read() {
        // Inserts grow segments, splits shrink and move them, and clones copy them: after
        // each, the computed addresses must match where hashbrown put each key.
        let (t, keys) = filled(2, 9_000);
        let copy = t.clone();
        for table in [&t, &copy] {
            let mut in_first_group = 0;
            for key in &keys {
                let hash = hash_of(key.as_bytes());
                let segment = &table.segments[table.segment_of(hash)];
                let index = segment
                    .table
                    .find_bucket_index(bucket_hash(hash), |slot| slot.key() == key.as_bytes())
                    .unwrap();
                let slot = segment.table.get_bucket(index).unwrap();
                assert_eq!(bucket_end(slot, index), segment.control);
                let (control, bucket) = segment.probe_start(bucket_hash(hash)).unwrap();
                let position = control - segment.control;
                assert_eq!(bucket, segment.control - (position + 1) * size_of::<Slot>());
                // hashbrown's first probe covers 16 positions from the start one.
                if (index.wrapping_sub(position) & (segment.table.num_buckets() - 1)) < 16 {
                    in_first_group += 1;
                }
            }
            // Most keys sit in the first group their probe reads (the rest further on).
            assert!(in_first_group * 10 > keys.len() * 9, "{in_first_group}");
        }
    }

    #[test]
    fn segments_split_before_their_buckets_double() {
        let (t, _) = filled(0, 20_000);
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
            let (mut t, keys) = filled(shard_bits, 3000);
            let mut new_keys = keys_in_shard(shard_bits, "new", 0, 5_000).into_iter();
            let start = if shard_bits == 0 {
                0
            } else {
                3u64 << (64 - shard_bits)
            };
            let mut cursor = start;
            let mut seen = HashSet::new();
            loop {
                let mut batch = Vec::new();
                let next = t.scan(cursor, 10, &mut |s| batch.push(s.key().to_vec()));
                for k in batch {
                    assert!(seen.insert(k), "key returned twice");
                }
                // Writes during the scan force splits.
                for key in new_keys.by_ref().take(5) {
                    let h = hash_of(key.as_bytes());
                    t.insert(h, key.as_bytes(), Entry::new(Value::Str(vec![])), 0, false);
                }
                match next {
                    Some(c) => {
                        assert!(c > cursor);
                        cursor = c
                    }
                    None => break,
                }
            }
            for key in &keys {
                assert!(seen.contains(key.as_bytes()), "missed {key}");
            }
        }
    }

    #[test]
    fn lookup_removes_passed_keys() {
        let mut t = Table::new(0, hasher());
        let n = now();
        let mut e = Entry::new(Value::Str(b"v".to_vec()));
        e.deadline = Deadline::after(n, 10);
        let h = hash_of(b"k");
        t.insert(h, b"k", e, 0, false);
        assert_eq!(t.expires(), 1);
        assert!(matches!(t.lookup(h, b"k", n), Found::Live(_)));
        let later = Now {
            mono_ms: n.mono_ms + 11,
            ..n
        };
        assert!(matches!(t.lookup(h, b"k", later), Found::Expired));
        assert_eq!(t.len(), 0);
        assert_eq!(t.expires(), 0);
    }

    #[test]
    fn sweep_removes_only_passed_keys() {
        let (mut t, keys) = filled(0, 5000);
        let n = now();
        for key in keys.iter().step_by(2) {
            t.set_deadline(
                hash_of(key.as_bytes()),
                key.as_bytes(),
                Deadline::after(n, 5),
            );
        }
        assert_eq!(t.expires(), 2500);
        let later = Now {
            mono_ms: n.mono_ms + 6,
            ..n
        };
        // A budget reads that many keys, no more, and the next sweep goes on from there.
        let mut removed = Vec::new();
        let first = t.sweep_expired(later, 100, &mut removed);
        assert_eq!(first.examined, 100);
        assert_eq!(first.expired, removed.len());
        assert!((20..=80).contains(&first.expired), "{first:?}");
        let mut seen: std::collections::HashSet<Box<[u8]>> = removed.drain(..).collect();
        let mut rounds = 1;
        while t.expires() > 0 {
            let swept = t.sweep_expired(later, 100, &mut removed);
            assert!(swept.examined <= 100 && swept.expired <= swept.examined);
            for key in removed.drain(..) {
                assert!(seen.insert(key), "removed twice");
            }
            rounds += 1;
            assert!(rounds <= 60, "5000 keys in 100-key sweeps");
        }
        assert_eq!(seen.len(), 2500);
        assert_eq!(t.len(), 2500);
        for key in keys.iter().skip(1).step_by(2) {
            assert!(t.get(hash_of(key.as_bytes()), key.as_bytes()).is_some());
        }
        // Nothing left to expire: a sweep reads nothing.
        assert_eq!(t.sweep_expired(later, 100, &mut removed), Swept::default());
        // A budget larger than the table reads each key once and stops.
        let (mut small, few) = filled(0, 10);
        for key in &few {
            small.set_deadline(
                hash_of(key.as_bytes()),
                key.as_bytes(),
                Deadline::after(n, 50),
            );
        }
        let swept = small.sweep_expired(later, usize::MAX, &mut removed);
        assert_eq!(
            swept,
            Swept {
                examined: 10,
                expired: 0
            }
        );
    }

    mod model {
        use super::*;
        use proptest::prelude::*;
        use std::collections::HashMap;

        #[derive(Debug, Clone)]
        enum Op {
            Insert { key: usize, len: u8, timed: bool },
            Remove { key: usize },
            SetDeadline { key: usize, timed: bool },
            Get { key: usize },
        }

        fn op() -> impl Strategy<Value = Op> {
            // Keys from a pool larger than a segment, so runs of inserts split segments.
            let key = 0..4000usize;
            prop_oneof![
                4 => (key.clone(), any::<u8>(), any::<bool>())
                    .prop_map(|(key, len, timed)| Op::Insert { key, len, timed }),
                1 => key.clone().prop_map(|key| Op::Remove { key }),
                1 => (key.clone(), any::<bool>()).prop_map(|(key, timed)| Op::SetDeadline { key, timed }),
                1 => key.prop_map(|key| Op::Get { key }),
            ]
        }

        /// Key names of many lengths (0 to 69 bytes), so slots of several sizes are made.
        fn name(key: usize) -> Vec<u8> {
            let mut name = format!("{key}:").into_bytes();
            name.resize(name.len() + key % 67, b'k');
            name
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(24))]
            #[test]
            fn a_table_agrees_with_a_map(ops in proptest::collection::vec(op(), 5000..7000)) {
                let n = now();
                let later = Deadline::after(n, 1_000_000);
                let mut table = Table::new(3, hasher());
                let mut model: HashMap<Vec<u8>, (Value, Option<Deadline>)> = HashMap::new();
                for op in ops {
                    match op {
                        Op::Insert { key, len, timed } => {
                            let key = name(key);
                            let value = Value::Str(vec![len; len as usize]);
                            let deadline = if timed { later } else { None };
                            let entry = Entry { value: value.clone(), deadline };
                            let old = table.insert(hash_of(&key), &key, entry, 1, false);
                            let expected = model.insert(key, (value, deadline));
                            prop_assert_eq!(old.map(|e| (e.value, e.deadline)), expected);
                        }
                        Op::Remove { key } => {
                            let key = name(key);
                            let old = table.remove(hash_of(&key), &key).map(Slot::into_entry);
                            let expected = model.remove(&key);
                            prop_assert_eq!(old.map(|e| (e.value, e.deadline)), expected);
                        }
                        Op::SetDeadline { key, timed } => {
                            let key = name(key);
                            let deadline = if timed { later } else { None };
                            let found = table.set_deadline(hash_of(&key), &key, deadline);
                            let expected = match model.get_mut(&key) {
                                Some(stored) => {
                                    stored.1 = deadline;
                                    true
                                }
                                None => false,
                            };
                            prop_assert_eq!(found, expected);
                        }
                        Op::Get { key } => {
                            let key = name(key);
                            let got = table
                                .get(hash_of(&key), &key)
                                .map(|s| (s.key().to_vec(), s.value().clone(), s.deadline()));
                            let expected = model
                                .get(&key)
                                .map(|(v, d)| (key.clone(), v.clone(), *d));
                            prop_assert_eq!(got, expected);
                        }
                    }
                }
                prop_assert_eq!(table.len(), model.len());
                let timed = model.values().filter(|(_, d)| d.is_some()).count();
                prop_assert_eq!(table.expires(), timed);
                let mut seen = 0;
                for slot in table.iter() {
                    let (value, deadline) = &model[slot.key()];
                    prop_assert_eq!(slot.value(), value);
                    prop_assert_eq!(slot.deadline(), *deadline);
                    seen += 1;
                }
                prop_assert_eq!(seen, model.len());
                prop_assert!(table.segments.len() > 1, "no split happened");
                let copy = table.clone();
                prop_assert_eq!(copy.iter().count(), model.len());
            }
        }
    }
}
