//! [`ThinBytes`]: an immutable byte string behind one 8-byte pointer, its length stored in
//! front of the bytes in the same allocation. For large collections' members: a `Box<[u8]>`
//! is 16 bytes, and boxing it again to fit 8 costs a second allocation.
//!
//! This module is the only code that touches the allocation through raw pointers.

#![allow(unsafe_code)]

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::fmt;
use std::ptr::NonNull;

/// The length before the bytes.
const HEADER: usize = std::mem::size_of::<u32>();

/// An immutable byte string of at most 4 GiB in one allocation of `4 + len` bytes.
pub struct ThinBytes {
    ptr: NonNull<u8>,
}

// SAFETY: a ThinBytes owns its allocation outright and never mutates it after creation,
// like a Box<[u8]>.
unsafe impl Send for ThinBytes {}
// SAFETY: shared references only read the allocation.
unsafe impl Sync for ThinBytes {}

fn layout(len: usize) -> Layout {
    assert!(len <= u32::MAX as usize, "ThinBytes holds at most 4 GiB");
    Layout::from_size_align(HEADER + len, std::mem::align_of::<u32>()).expect("layout")
}

impl ThinBytes {
    pub fn new(bytes: &[u8]) -> ThinBytes {
        let layout = layout(bytes.len());
        // SAFETY: the layout has a non-zero size (the header).
        let raw = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        // SAFETY: the allocation holds HEADER + len bytes, aligned for a u32; the source
        // does not overlap a fresh allocation.
        unsafe {
            (ptr.as_ptr() as *mut u32).write(bytes.len() as u32);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.as_ptr().add(HEADER), bytes.len());
        }
        ThinBytes { ptr }
    }

    pub fn len(&self) -> usize {
        // SAFETY: the header was written at creation and never changes.
        unsafe { *(self.ptr.as_ptr() as *const u32) as usize }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: `len` initialised bytes follow the header, owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(HEADER), self.len()) }
    }

    /// The bytes the allocation takes (before the allocator's rounding).
    pub fn heap_bytes(&self) -> usize {
        HEADER + self.len()
    }
}

impl Drop for ThinBytes {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; nothing refers to it afterwards.
        unsafe { dealloc(self.ptr.as_ptr(), layout(self.len())) }
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

    #[test]
    fn holds_any_bytes() {
        for len in [0, 1, 3, 4, 15, 16, 100, 70_000] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let thin = ThinBytes::new(&bytes);
            assert_eq!(thin.len(), len);
            assert_eq!(thin.as_bytes(), &bytes[..]);
            let copy = thin.clone();
            drop(thin);
            assert_eq!(copy.as_bytes(), &bytes[..]);
        }
        assert_eq!(std::mem::size_of::<ThinBytes>(), 8);
        assert_eq!(std::mem::size_of::<Option<ThinBytes>>(), 8);
    }
}
