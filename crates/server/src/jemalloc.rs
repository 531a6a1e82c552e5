//! The jemalloc call tikv-jemalloc-ctl does not wrap.
//!
//! Latch's `used_memory` is jemalloc's `stats.allocated`, which still counts the blocks a
//! thread freed into its own cache (the tcache: up to 32 KiB a block by default). After a
//! big value is freed (an eviction, the lazyfree thread), the freeing thread hands its
//! cache back, so that eviction sees the memory it freed and stops there.

#![allow(unsafe_code)]

use std::ptr;

/// Returns the calling thread's cached free blocks to their arenas.
pub fn flush_thread_cache() {
    // SAFETY: "thread.tcache.flush" takes no input and gives no output, as the null
    // pointers and zero length say; the name is a C string. An error (no tcache) is
    // harmless and ignored.
    unsafe {
        tikv_jemalloc_sys::mallctl(
            c"thread.tcache.flush".as_ptr(),
            ptr::null_mut(),
            ptr::null_mut(),
            ptr::null_mut(),
            0,
        );
    }
}
