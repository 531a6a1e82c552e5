//! When a collection keeps its compact form: Redis 7.0's thresholds, read by every write
//! that may grow a collection, set by CONFIG (the server's `refresh_hot`).
//!
//! They are process-wide (one server per process), relaxed atomics: a write reads the
//! values in force when it runs; a change applies to collections as they are next
//! written, as in Redis.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

/// `hash-max-listpack-entries` (default 512).
static HASH_MAX_ENTRIES: AtomicUsize = AtomicUsize::new(512);
/// `hash-max-listpack-value` (default 64).
static HASH_MAX_VALUE: AtomicUsize = AtomicUsize::new(64);
/// `set-max-intset-entries` (default 512).
static SET_MAX_INTSET_ENTRIES: AtomicUsize = AtomicUsize::new(512);
/// `zset-max-listpack-entries` (default 128).
static ZSET_MAX_ENTRIES: AtomicUsize = AtomicUsize::new(128);
/// `zset-max-listpack-value` (default 64).
static ZSET_MAX_VALUE: AtomicUsize = AtomicUsize::new(64);
/// `list-max-listpack-size` (default -2: 8 KiB per node; positive: entries per node).
static LIST_MAX_SIZE: AtomicI64 = AtomicI64::new(-2);
/// `list-compress-depth` (default 0: no node is compressed).
static LIST_COMPRESS_DEPTH: AtomicUsize = AtomicUsize::new(0);

/// The values CONFIG holds, all at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thresholds {
    pub hash_max_entries: usize,
    pub hash_max_value: usize,
    pub set_max_intset_entries: usize,
    pub zset_max_entries: usize,
    pub zset_max_value: usize,
    pub list_max_size: i64,
    pub list_compress_depth: usize,
}

impl Default for Thresholds {
    /// Redis 7.0's defaults.
    fn default() -> Thresholds {
        Thresholds {
            hash_max_entries: 512,
            hash_max_value: 64,
            set_max_intset_entries: 512,
            zset_max_entries: 128,
            zset_max_value: 64,
            list_max_size: -2,
            list_compress_depth: 0,
        }
    }
}

/// Puts new thresholds in force.
pub fn set(t: Thresholds) {
    HASH_MAX_ENTRIES.store(t.hash_max_entries, Ordering::Relaxed);
    HASH_MAX_VALUE.store(t.hash_max_value, Ordering::Relaxed);
    SET_MAX_INTSET_ENTRIES.store(t.set_max_intset_entries, Ordering::Relaxed);
    ZSET_MAX_ENTRIES.store(t.zset_max_entries, Ordering::Relaxed);
    ZSET_MAX_VALUE.store(t.zset_max_value, Ordering::Relaxed);
    LIST_MAX_SIZE.store(t.list_max_size, Ordering::Relaxed);
    LIST_COMPRESS_DEPTH.store(t.list_compress_depth, Ordering::Relaxed);
}

/// The thresholds in force.
pub fn get() -> Thresholds {
    Thresholds {
        hash_max_entries: hash_max_entries(),
        hash_max_value: hash_max_value(),
        set_max_intset_entries: set_max_intset_entries(),
        zset_max_entries: zset_max_entries(),
        zset_max_value: zset_max_value(),
        list_max_size: list_max_size(),
        list_compress_depth: list_compress_depth(),
    }
}

pub fn hash_max_entries() -> usize {
    HASH_MAX_ENTRIES.load(Ordering::Relaxed)
}

pub fn hash_max_value() -> usize {
    HASH_MAX_VALUE.load(Ordering::Relaxed)
}

pub fn set_max_intset_entries() -> usize {
    SET_MAX_INTSET_ENTRIES.load(Ordering::Relaxed)
}

pub fn zset_max_entries() -> usize {
    ZSET_MAX_ENTRIES.load(Ordering::Relaxed)
}

pub fn zset_max_value() -> usize {
    ZSET_MAX_VALUE.load(Ordering::Relaxed)
}

pub fn list_max_size() -> i64 {
    LIST_MAX_SIZE.load(Ordering::Relaxed)
}

/// `list-compress-depth`: how many nodes at each end of a list stay uncompressed (0: all).
pub fn list_compress_depth() -> usize {
    LIST_COMPRESS_DEPTH.load(Ordering::Relaxed)
}

/// `list-max-listpack-size` as a limit on one node: `(max entries, max bytes)`. Positive
/// values count entries; -1..-5 mean 4, 8, 16, 32 and 64 KiB (lower values clamp to -5).
pub fn list_node_limit(size: i64) -> (usize, usize) {
    if size > 0 {
        (size as usize, usize::MAX)
    } else {
        let step = size.unsigned_abs().clamp(1, 5) as u32;
        (usize::MAX, 4096 << (step - 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_sizes_read_as_redis_does() {
        assert_eq!(list_node_limit(-2), (usize::MAX, 8192));
        assert_eq!(list_node_limit(-1), (usize::MAX, 4096));
        assert_eq!(list_node_limit(-5), (usize::MAX, 65536));
        assert_eq!(list_node_limit(-9), (usize::MAX, 65536));
        assert_eq!(list_node_limit(0), (usize::MAX, 4096));
        assert_eq!(list_node_limit(128), (128, usize::MAX));
    }
}
