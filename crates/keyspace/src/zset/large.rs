//! The large form of a sorted set (Redis' "skiplist" encoding): each member stored once.
//!
//! - `slots`: every member's bytes and score, by a `u32` id (freed ids are reused).
//! - `index`: a hash table of ids, keyed by the member bytes it finds through `slots`
//!   (4 bytes a member, no second copy of the bytes), resized a step at a time
//!   ([`IncrementalTable`]).
//! - `chunks`: the (score, id) pairs in (score, member) order, cut into sorted runs of at
//!   most [`CHUNK_MAX`]; `counts`, a Fenwick tree over the runs' lengths, turns a rank into
//!   a run and back in O(log N).
//!
//! Every operation is a hash lookup plus O(log N) steps plus a move of at most
//! `CHUNK_MAX` entries inside one run. A run that fills splits in two; one that shrinks
//! below a quarter merges with a neighbour when they fit together.

use std::cmp::Ordering;
use std::sync::OnceLock;

use crate::incremental::IncrementalTable;

use super::Score;

/// Most entries a run holds.
const CHUNK_MAX: usize = if cfg!(test) { 8 } else { 512 };
/// A run this short merges with a neighbour that leaves room.
const CHUNK_MIN: usize = CHUNK_MAX / 4;

fn hasher() -> &'static ahash::RandomState {
    static HASHER: OnceLock<ahash::RandomState> = OnceLock::new();
    HASHER.get_or_init(ahash::RandomState::new)
}

fn hash(member: &[u8]) -> u64 {
    hasher().hash_one(member)
}

#[derive(Clone, Debug)]
struct Slot {
    member: Box<[u8]>,
    score: f64,
}

/// One sorted run: scores and ids side by side (12 bytes an entry).
#[derive(Clone, Debug, Default)]
struct Chunk {
    scores: Vec<f64>,
    ids: Vec<u32>,
}

impl Chunk {
    fn len(&self) -> usize {
        self.ids.len()
    }
}

/// Sums of run lengths, for rank <-> run lookups.
#[derive(Clone, Debug, Default)]
struct Fenwick {
    tree: Vec<u32>,
}

impl Fenwick {
    fn build(chunks: &[Chunk]) -> Fenwick {
        let n = chunks.len();
        let mut tree = vec![0u32; n + 1];
        for (i, chunk) in chunks.iter().enumerate() {
            let at = i + 1;
            tree[at] += chunk.len() as u32;
            let parent = at + (at & at.wrapping_neg());
            if parent <= n {
                tree[parent] += tree[at];
            }
        }
        Fenwick { tree }
    }

    fn add(&mut self, chunk: usize, delta: i32) {
        let mut at = chunk + 1;
        while at < self.tree.len() {
            self.tree[at] = self.tree[at].wrapping_add_signed(delta);
            at += at & at.wrapping_neg();
        }
    }

    /// Entries in the runs before `chunk`.
    fn prefix(&self, chunk: usize) -> usize {
        let mut sum = 0usize;
        let mut at = chunk;
        while at > 0 {
            sum += self.tree[at] as usize;
            at &= at - 1;
        }
        sum
    }

    /// The run holding rank `rank` and the rank's position in it (`rank` < the total).
    fn find(&self, mut rank: usize) -> (usize, usize) {
        let n = self.tree.len() - 1;
        let mut at = 0;
        let mut step = if n == 0 {
            0
        } else {
            1 << (usize::BITS - 1 - n.leading_zeros())
        };
        while step > 0 {
            let next = at + step;
            if next <= n && (self.tree[next] as usize) <= rank {
                at = next;
                rank -= self.tree[next] as usize;
            }
            step >>= 1;
        }
        (at, rank)
    }
}

/// The large sorted set. See the module documentation.
#[derive(Clone, Debug, Default)]
pub(super) struct Large {
    /// A plain `Vec`: doubling it copies every slot (about 30 ms at 2,000,000 members),
    /// but a `ChunkedVec` here cost ZADD 9% (bench/ab.sh, pipeline 16), as every
    /// comparison in a lookup goes through it.
    slots: Vec<Slot>,
    free: Vec<u32>,
    index: IncrementalTable<u32>,
    chunks: Vec<Chunk>,
    counts: Fenwick,
}

impl Large {
    pub(super) fn new() -> Large {
        Large::default()
    }

    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    fn find_id(&self, member: &[u8]) -> Option<u32> {
        let slots = &self.slots;
        self.index
            .find(hash(member), |&id| &*slots[id as usize].member == member)
            .copied()
    }

    pub(super) fn score(&self, member: &[u8]) -> Option<f64> {
        self.find_id(member).map(|id| self.slots[id as usize].score)
    }

    /// The run and position of the first entry for which `before` is false (`before`
    /// must hold for a prefix of the order).
    fn locate(&self, before: impl Fn(f64, u32) -> bool) -> (usize, usize) {
        let chunk = self.chunks.partition_point(|c| {
            let last = c.len() - 1;
            before(c.scores[last], c.ids[last])
        });
        if chunk == self.chunks.len() {
            return match self.chunks.len() {
                0 => (0, 0),
                n => (n - 1, self.chunks[n - 1].len()),
            };
        }
        let c = &self.chunks[chunk];
        let (mut low, mut high) = (0, c.len());
        while low < high {
            let mid = (low + high) / 2;
            if before(c.scores[mid], c.ids[mid]) {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        (chunk, low)
    }

    /// How many entries satisfy `before` (a prefix of the order).
    pub(super) fn count_before(&self, before: impl Fn(f64, &[u8]) -> bool) -> usize {
        let slots = &self.slots;
        let (chunk, pos) = self.locate(|s, id| before(s, &slots[id as usize].member));
        self.counts.prefix(chunk) + pos
    }

    fn key_before(&self, score: f64, id: u32, key_score: f64, key_member: &[u8]) -> bool {
        match Score(score).cmp(&Score(key_score)) {
            Ordering::Less => true,
            Ordering::Greater => false,
            Ordering::Equal => &*self.slots[id as usize].member < key_member,
        }
    }

    fn position_of(&self, score: f64, member: &[u8]) -> (usize, usize) {
        self.locate(|s, id| self.key_before(s, id, score, member))
    }

    fn insert_entry(&mut self, score: f64, id: u32) {
        let member = &self.slots[id as usize].member;
        let (chunk, pos) = self.locate(|s, i| match Score(s).cmp(&Score(score)) {
            Ordering::Less => true,
            Ordering::Greater => false,
            Ordering::Equal => self.slots[i as usize].member < *member,
        });
        if self.chunks.is_empty() {
            self.chunks.push(Chunk::default());
            self.counts = Fenwick::build(&self.chunks);
        }
        let (chunk, pos) = if self.chunks[chunk].len() < CHUNK_MAX {
            (chunk, pos)
        } else {
            self.split(chunk, pos)
        };
        let c = &mut self.chunks[chunk];
        if c.len() == c.ids.capacity() {
            // Grow by doubling up to a full run, never past it (Vec would double again).
            let wanted = (c.len() * 2).clamp(4, CHUNK_MAX) - c.len();
            c.scores.reserve_exact(wanted);
            c.ids.reserve_exact(wanted);
        }
        c.scores.insert(pos, score);
        c.ids.insert(pos, id);
        self.counts.add(chunk, 1);
    }

    /// Makes room in the full run `chunk` for an entry at `pos`; returns where it goes
    /// now. Appending past the last run (or before the first) starts a new run, so sets
    /// filled in order keep full runs; anything else cuts the run in two.
    fn split(&mut self, chunk: usize, pos: usize) -> (usize, usize) {
        let len = self.chunks[chunk].len();
        if pos == 0 && chunk == 0 {
            self.chunks.insert(0, Chunk::default());
            self.counts = Fenwick::build(&self.chunks);
            return (0, 0);
        }
        let at = if pos == len && chunk + 1 == self.chunks.len() {
            len
        } else {
            len / 2
        };
        let c = &mut self.chunks[chunk];
        let tail = Chunk {
            scores: c.scores.split_off(at),
            ids: c.ids.split_off(at),
        };
        self.chunks.insert(chunk + 1, tail);
        self.counts = Fenwick::build(&self.chunks);
        if pos <= at && at != len {
            (chunk, pos)
        } else {
            (chunk + 1, pos - at)
        }
    }

    fn remove_entry_at(&mut self, chunk: usize, pos: usize) {
        let c = &mut self.chunks[chunk];
        c.scores.remove(pos);
        c.ids.remove(pos);
        let len = c.len();
        if len == 0 {
            self.chunks.remove(chunk);
            self.counts = Fenwick::build(&self.chunks);
            return;
        }
        if len < CHUNK_MIN {
            // Merge with the smaller neighbour when the two fit in half a run.
            let neighbour = [chunk.checked_sub(1), Some(chunk + 1)]
                .into_iter()
                .flatten()
                .filter(|&n| n < self.chunks.len())
                .min_by_key(|&n| self.chunks[n].len());
            if let Some(n) = neighbour {
                if self.chunks[n].len() + len <= CHUNK_MAX / 2 {
                    let (left, right) = (chunk.min(n), chunk.max(n));
                    let moved = self.chunks.remove(right);
                    let l = &mut self.chunks[left];
                    l.scores.extend_from_slice(&moved.scores);
                    l.ids.extend_from_slice(&moved.ids);
                    self.counts = Fenwick::build(&self.chunks);
                    return;
                }
            }
        }
        self.counts.add(chunk, -1);
    }

    fn remove_entry(&mut self, score: f64, id: u32) {
        let member = &self.slots[id as usize].member;
        let (chunk, pos) = self.position_of(score, member);
        debug_assert_eq!(self.chunks[chunk].ids[pos], id);
        self.remove_entry_at(chunk, pos);
    }

    /// Adds or updates a member; returns its previous score.
    pub(super) fn insert(&mut self, member: &[u8], score: f64) -> Option<f64> {
        if let Some(id) = self.find_id(member) {
            let old = self.slots[id as usize].score;
            if old.to_bits() != score.to_bits() {
                self.remove_entry(old, id);
                self.slots[id as usize].score = score;
                self.insert_entry(score, id);
            }
            return Some(old);
        }
        let slot = Slot {
            member: member.into(),
            score,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = slot;
                id
            }
            None => {
                assert!(self.slots.len() < u32::MAX as usize, "sorted set too large");
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        let slots = &self.slots;
        self.index
            .insert_unique(hash(member), id, |&i| hash(&slots[i as usize].member));
        self.insert_entry(score, id);
        None
    }

    /// Forgets slot `id` (already out of the runs): its member and score.
    fn release(&mut self, id: u32) -> (Vec<u8>, f64) {
        let slot = &mut self.slots[id as usize];
        let member = std::mem::take(&mut slot.member).into_vec();
        let score = slot.score;
        self.free.push(id);
        if self.index.is_empty() {
            // Nothing left: give the memory back.
            *self = Large::new();
        }
        (member, score)
    }

    fn unindex(&mut self, member: &[u8]) -> Option<u32> {
        let slots = &self.slots;
        self.index.remove(
            hash(member),
            |&id| &*slots[id as usize].member == member,
            |&i| hash(&slots[i as usize].member),
        )
    }

    pub(super) fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let id = self.unindex(member)?;
        let score = self.slots[id as usize].score;
        self.remove_entry(score, id);
        Some(self.release(id).1)
    }

    /// Removes the member at `rank`.
    pub(super) fn remove_rank(&mut self, rank: usize) -> Option<(Vec<u8>, f64)> {
        if rank >= self.len() {
            return None;
        }
        let (chunk, pos) = self.counts.find(rank);
        let id = self.chunks[chunk].ids[pos];
        let slots = &self.slots;
        self.index
            .remove(
                hash(&slots[id as usize].member),
                |&other| other == id,
                |&i| hash(&slots[i as usize].member),
            )
            .expect("every member is indexed");
        self.remove_entry_at(chunk, pos);
        Some(self.release(id))
    }

    pub(super) fn rank(&self, member: &[u8]) -> Option<usize> {
        let id = self.find_id(member)?;
        let score = self.slots[id as usize].score;
        let (chunk, pos) = self.position_of(score, member);
        Some(self.counts.prefix(chunk) + pos)
    }

    /// The entries with ranks in `start..end`.
    pub(super) fn range(&self, start: usize, end: usize) -> LargeIter<'_> {
        let end = end.min(self.len());
        let start = start.min(end);
        let front = if start < self.len() {
            self.counts.find(start)
        } else {
            (self.chunks.len(), 0)
        };
        let back = if end == 0 {
            (0, 0)
        } else {
            let (c, p) = self.counts.find(end - 1);
            (c, p + 1)
        };
        LargeIter {
            set: self,
            front,
            back,
            remaining: end - start,
        }
    }

    /// Bytes of heap memory, counting what the allocator rounds to (roughly).
    pub(super) fn heap_bytes(&self) -> usize {
        let members: usize = self
            .slots
            .iter()
            .map(|s| match s.member.len() {
                0 => 0,
                1..=8 => 8,
                n => n.next_multiple_of(16),
            })
            .sum();
        let runs: usize = self
            .chunks
            .iter()
            .map(|c| c.scores.capacity() * 8 + c.ids.capacity() * 4)
            .sum();
        self.slots.capacity() * std::mem::size_of::<Slot>()
            + members
            + self.free.capacity() * 4
            + self.index.capacity() * 5
            + runs
            + self.chunks.capacity() * std::mem::size_of::<Chunk>()
            + self.counts.tree.capacity() * 4
    }

    #[cfg(test)]
    pub(super) fn check(&self) {
        let total: usize = self.chunks.iter().map(Chunk::len).sum();
        assert_eq!(total, self.len());
        for (i, c) in self.chunks.iter().enumerate() {
            assert!(c.len() > 0 && c.len() <= CHUNK_MAX);
            assert_eq!(self.counts.prefix(i + 1) - self.counts.prefix(i), c.len());
        }
    }
}

/// Entries of a [`Large`] set between two ranks, either way.
pub(super) struct LargeIter<'a> {
    set: &'a Large,
    /// The next entry from the front.
    front: (usize, usize),
    /// One past the next entry from the back.
    back: (usize, usize),
    remaining: usize,
}

impl LargeIter<'_> {
    pub(super) fn len(&self) -> usize {
        self.remaining
    }
}

impl<'a> Iterator for LargeIter<'a> {
    type Item = (&'a [u8], f64);

    fn next(&mut self) -> Option<(&'a [u8], f64)> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let (chunk, pos) = self.front;
        let c = &self.set.chunks[chunk];
        self.front = if pos + 1 == c.len() {
            (chunk + 1, 0)
        } else {
            (chunk, pos + 1)
        };
        let id = c.ids[pos] as usize;
        Some((&self.set.slots[id].member, c.scores[pos]))
    }
}

impl DoubleEndedIterator for LargeIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let (mut chunk, mut pos) = self.back;
        if pos == 0 {
            chunk -= 1;
            pos = self.set.chunks[chunk].len();
        }
        pos -= 1;
        self.back = (chunk, pos);
        let c = &self.set.chunks[chunk];
        let id = c.ids[pos] as usize;
        Some((&self.set.slots[id].member, c.scores[pos]))
    }
}
