//! A byte string behind one thin pointer: the entries of large collections.
//!
//! A [`ThinBytes`] is 8 bytes (a `Box<[u8]>` is 16, a `Vec<u8>` 24) pointing to one
//! exact-size allocation: the length as a varint (one byte below 128), then the bytes. A
//! hash table of them pays 9 bytes for a bucket with its control byte, so the buckets a
//! table keeps empty cost little. This module is the only code that touches the allocation
//! through raw pointers.

#![allow(unsafe_code)]

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::fmt;
use std::ptr::NonNull;

/// The most bytes a varint of a `usize` takes.
const MAX_VARINT: usize = 10;

/// Bytes the varint of `n` takes.
pub fn varint_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

/// Writes the varint of `n` (seven bits a byte, lowest first, the high bit on every byte
/// but the last) into `out`; returns the bytes written.
pub fn put_varint(out: &mut [u8], mut n: usize) -> usize {
    let mut at = 0;
    while n >= 0x80 {
        out[at] = (n as u8) | 0x80;
        n >>= 7;
        at += 1;
    }
    out[at] = n as u8;
    at + 1
}

/// Reads the varint at the start of `bytes`: the number and the bytes it took.
pub fn get_varint(bytes: &[u8]) -> (usize, usize) {
    let mut n = 0usize;
    for (at, &byte) in bytes.iter().enumerate().take(MAX_VARINT) {
        n |= ((byte & 0x7f) as usize) << (7 * at);
        if byte & 0x80 == 0 {
            return (n, at + 1);
        }
    }
    unreachable!("a varint this module wrote ends within {MAX_VARINT} bytes")
}

/// An owned byte string in one allocation behind a thin pointer. See the module
/// documentation.
pub struct ThinBytes {
    ptr: NonNull<u8>,
}

// SAFETY: a ThinBytes owns its allocation outright (no sharing, no interior mutability),
// like a Box<[u8]>.
unsafe impl Send for ThinBytes {}
// SAFETY: shared references only read the allocation.
unsafe impl Sync for ThinBytes {}

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, 1).expect("a string that exists has a layout")
}

impl ThinBytes {
    /// The concatenation of `parts`, in one allocation.
    pub fn concat(parts: &[&[u8]]) -> ThinBytes {
        let len: usize = parts.iter().map(|part| part.len()).sum();
        let mut prefix = [0u8; MAX_VARINT];
        let prefix_len = put_varint(&mut prefix, len);
        let layout = layout(prefix_len + len);
        // SAFETY: the layout's size is at least one byte (the varint).
        let raw = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        // SAFETY: the allocation has room for the varint and every part, which are
        // written one after another without overlapping; each source is a live slice
        // that cannot overlap a fresh allocation.
        unsafe {
            std::ptr::copy_nonoverlapping(prefix.as_ptr(), ptr.as_ptr(), prefix_len);
            let mut at = prefix_len;
            for part in parts {
                std::ptr::copy_nonoverlapping(part.as_ptr(), ptr.as_ptr().add(at), part.len());
                at += part.len();
            }
        }
        ThinBytes { ptr }
    }

    pub fn new(bytes: &[u8]) -> ThinBytes {
        ThinBytes::concat(&[bytes])
    }

    /// The length and the bytes its varint takes.
    fn header(&self) -> (usize, usize) {
        // SAFETY: the allocation starts with a complete varint; `get_varint` stops at its
        // last byte, so reading the bytes up to there one at a time stays inside it.
        let mut prefix = [0u8; MAX_VARINT];
        for (at, slot) in prefix.iter_mut().enumerate() {
            *slot = unsafe { *self.ptr.as_ptr().add(at) };
            if *slot & 0x80 == 0 {
                break;
            }
        }
        get_varint(&prefix)
    }

    pub fn as_bytes(&self) -> &[u8] {
        let (len, prefix_len) = self.header();
        // SAFETY: `len` initialised bytes follow the varint in the allocation this owns.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(prefix_len), len) }
    }

    pub fn len(&self) -> usize {
        self.header().0
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes the allocation takes (before the allocator's rounding).
    pub fn heap_bytes(&self) -> usize {
        let (len, prefix_len) = self.header();
        prefix_len + len
    }
}

impl Drop for ThinBytes {
    fn drop(&mut self) {
        let size = self.heap_bytes();
        // SAFETY: allocated with this layout; nothing refers to it after the drop.
        unsafe { dealloc(self.ptr.as_ptr(), layout(size)) }
    }
}

impl Clone for ThinBytes {
    fn clone(&self) -> ThinBytes {
        ThinBytes::new(self.as_bytes())
    }
}

impl PartialEq for ThinBytes {
    fn eq(&self, other: &ThinBytes) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for ThinBytes {}

impl fmt::Debug for ThinBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn varints_round_trip() {
        for n in [
            0,
            1,
            127,
            128,
            16_383,
            16_384,
            u32::MAX as usize,
            usize::MAX,
        ] {
            let mut buf = [0u8; MAX_VARINT];
            let len = put_varint(&mut buf, n);
            assert_eq!(len, varint_len(n), "{n}");
            assert_eq!(get_varint(&buf[..len]), (n, len), "{n}");
        }
        assert_eq!(varint_len(127), 1);
        assert_eq!(varint_len(128), 2);
    }

    #[test]
    fn small_strings_take_one_byte_more() {
        let thin = ThinBytes::concat(&[b"field", b"", b"value"]);
        assert_eq!(thin.as_bytes(), b"fieldvalue");
        assert_eq!(thin.heap_bytes(), 11);
        assert_eq!(ThinBytes::new(b"").heap_bytes(), 1);
        assert_eq!(std::mem::size_of::<ThinBytes>(), 8);
        assert_eq!(std::mem::size_of::<Option<ThinBytes>>(), 8);
    }

    proptest! {
        #[test]
        fn holds_what_it_was_given(bytes in proptest::collection::vec(any::<u8>(), 0..40_000)) {
            let thin = ThinBytes::new(&bytes);
            prop_assert_eq!(thin.as_bytes(), &bytes[..]);
            prop_assert_eq!(thin.len(), bytes.len());
            prop_assert_eq!(thin.heap_bytes(), varint_len(bytes.len()) + bytes.len());
            let copy = thin.clone();
            prop_assert_eq!(copy, thin);
        }
    }
}
