//! A vector that grows by adding fixed-size chunks instead of moving everything.
//!
//! A `Vec` that doubles copies all it holds into a new allocation (and touches that many
//! fresh pages): for the 2,000,000 members of a big set, one SADD paid 20 ms for it while
//! every other client of its worker waited (`bench/pauses.py`). Here the first [`CHUNK`]
//! elements live in an ordinary `Vec` (so small collections cost what they did), and the
//! rest in chunks of [`CHUNK`] elements allocated once at full size: growing never moves an
//! element. Indexing costs a shift and one more pointer.

use std::fmt;
use std::ops::{Index, IndexMut};

const CHUNK_SHIFT: u32 = 12;
/// Elements in a chunk (and in the first, growable part at most).
pub const CHUNK: usize = 1 << CHUNK_SHIFT;
const CHUNK_MASK: usize = CHUNK - 1;

#[derive(Clone)]
pub struct ChunkedVec<T> {
    /// Elements `0..CHUNK`.
    first: Vec<T>,
    /// Elements from `CHUNK` on, [`CHUNK`] a chunk: every chunk full but the last one
    /// holding anything, and at most one empty chunk after it, kept so that pushes and pops
    /// across a chunk's edge do not allocate and free each time.
    rest: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for ChunkedVec<T> {
    fn default() -> Self {
        ChunkedVec {
            first: Vec::new(),
            rest: Vec::new(),
            len: 0,
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for ChunkedVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T> ChunkedVec<T> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(capacity: usize) -> Self {
        ChunkedVec {
            first: Vec::with_capacity(capacity.min(CHUNK)),
            rest: Vec::new(),
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Elements the allocations hold room for.
    pub fn capacity(&self) -> usize {
        self.first.capacity() + self.rest.iter().map(Vec::capacity).sum::<usize>()
    }

    /// Bytes allocated, the chunks' list included.
    pub fn heap_bytes(&self) -> usize {
        self.capacity() * std::mem::size_of::<T>()
            + self.rest.capacity() * std::mem::size_of::<Vec<T>>()
    }

    pub fn push(&mut self, value: T) {
        if self.len < CHUNK {
            self.first.push(value);
        } else {
            let chunk = (self.len - CHUNK) >> CHUNK_SHIFT;
            if chunk == self.rest.len() {
                self.rest.push(Vec::with_capacity(CHUNK));
            }
            self.rest[chunk].push(value);
        }
        self.len += 1;
    }

    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        if self.len < CHUNK {
            // Anything after the first part is empty now: keep one spare chunk at most.
            self.rest.truncate(1);
            return self.first.pop();
        }
        let chunk = (self.len - CHUNK) >> CHUNK_SHIFT;
        let value = self.rest[chunk].pop();
        // One empty chunk kept at most: this one if it just emptied, else the next.
        let keep = if self.rest[chunk].is_empty() {
            chunk + 1
        } else {
            chunk + 2
        };
        self.rest.truncate(keep);
        value
    }

    /// Removes the element at `index`, putting the last one in its place. Panics when
    /// `index` is out of bounds.
    pub fn swap_remove(&mut self, index: usize) -> T {
        assert!(
            index < self.len,
            "swap_remove index {index} of {}",
            self.len
        );
        let last = self.pop().expect("not empty");
        if index == self.len {
            last
        } else {
            std::mem::replace(&mut self[index], last)
        }
    }

    /// Gives memory back when few elements are left: the chunks go, and the first part
    /// keeps room for `min_capacity` at least.
    pub fn shrink_to(&mut self, min_capacity: usize) {
        if self.len <= CHUNK {
            self.rest = Vec::new();
            self.first.shrink_to(min_capacity.min(CHUNK));
        } else {
            self.rest.truncate((self.len - CHUNK).div_ceil(CHUNK));
            self.rest.shrink_to_fit();
        }
    }

    pub fn get(&self, index: usize) -> Option<&T> {
        if index >= self.len {
            return None;
        }
        Some(&self[index])
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.first.iter().chain(self.rest.iter().flatten())
    }
}

impl<T> Index<usize> for ChunkedVec<T> {
    type Output = T;

    #[inline]
    fn index(&self, index: usize) -> &T {
        if index < CHUNK {
            &self.first[index]
        } else {
            // Past the end is past the last chunk or its length: the slices' checks panic.
            let at = index - CHUNK;
            &self.rest[at >> CHUNK_SHIFT][at & CHUNK_MASK]
        }
    }
}

impl<T> IndexMut<usize> for ChunkedVec<T> {
    #[inline]
    fn index_mut(&mut self, index: usize) -> &mut T {
        if index < CHUNK {
            &mut self.first[index]
        } else {
            let at = index - CHUNK;
            &mut self.rest[at >> CHUNK_SHIFT][at & CHUNK_MASK]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Push(u32),
        Pop,
        SwapRemove(usize),
        Set(usize, u32),
        Shrink,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => any::<u32>().prop_map(Op::Push),
            3 => Just(Op::Pop),
            3 => any::<usize>().prop_map(Op::SwapRemove),
            2 => (any::<usize>(), any::<u32>()).prop_map(|(i, v)| Op::Set(i, v)),
            1 => Just(Op::Shrink),
        ]
    }

    proptest! {
        /// Against `Vec`, across chunk edges (runs of pushes and pops around them).
        #[test]
        fn behaves_as_a_vec(
            start in 0usize..3 * CHUNK,
            ops in proptest::collection::vec(op(), 1..400),
        ) {
            let mut ours = ChunkedVec::new();
            let mut model = Vec::new();
            for v in 0..start as u32 {
                ours.push(v);
                model.push(v);
            }
            for op in ops {
                match op {
                    Op::Push(v) => {
                        ours.push(v);
                        model.push(v);
                    }
                    Op::Pop => prop_assert_eq!(ours.pop(), model.pop()),
                    Op::SwapRemove(i) if !model.is_empty() => {
                        let i = i % model.len();
                        prop_assert_eq!(ours.swap_remove(i), model.swap_remove(i));
                    }
                    Op::Set(i, v) if !model.is_empty() => {
                        let i = i % model.len();
                        ours[i] = v;
                        model[i] = v;
                    }
                    Op::Shrink => ours.shrink_to(model.len()),
                    _ => {}
                }
                prop_assert_eq!(ours.len(), model.len());
                prop_assert!(ours.rest.iter().filter(|c| c.is_empty()).count() <= 1);
            }
            prop_assert_eq!(ours.iter().copied().collect::<Vec<_>>(), model.clone());
            for (i, v) in model.iter().enumerate() {
                prop_assert_eq!(&ours[i], v);
                prop_assert_eq!(ours.get(i), Some(v));
            }
            prop_assert_eq!(ours.get(model.len()), None);
        }
    }

    #[test]
    fn growing_never_moves_an_element_once_the_first_part_is_full() {
        let mut chunked = ChunkedVec::new();
        for v in 0..=(CHUNK as u64) {
            chunked.push(v);
        }
        let first = &chunked[0] as *const u64;
        let past_first = &chunked[CHUNK] as *const u64;
        for v in 0..(20 * CHUNK as u64) {
            chunked.push(v);
        }
        assert_eq!(&chunked[0] as *const u64, first);
        assert_eq!(&chunked[CHUNK] as *const u64, past_first);
        assert_eq!(chunked.len(), 21 * CHUNK + 1);
    }
}
