//! Reading jemalloc's count of used memory, and the call tikv-jemalloc-ctl does not wrap.
//!
//! Latch's `used_memory` is jemalloc's `stats.allocated` less the bytes sitting free in the
//! threads' caches (the tcaches): a thread's first allocation of a size fills its cache
//! with a batch of blocks, and every worker thread has its own, so `stats.allocated` alone
//! jumps by tens of kilobytes on the first command of a kind (Redis, one thread, counts
//! only what it asked for). After a big value is freed (an eviction, the lazyfree thread),
//! the freeing thread also hands its cache back, so that the arenas' figures settle.

#![allow(unsafe_code)]

use std::ptr;

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::Mutex;
use tikv_jemalloc_ctl::{epoch, raw, stats};

/// Bytes allocated and not sitting free in a thread cache, read now (the statistics
/// epoch is advanced). `None` when jemalloc keeps no statistics.
pub fn allocated_bytes() -> Option<u64> {
    let _ = epoch::advance();
    let allocated = stats::allocated::read().ok().filter(|&n| n > 0)? as u64;
    // MALLCTL_ARENAS_ALL (4096): the sum over every arena.
    // SAFETY: the name is a NUL-terminated statistic of type size_t.
    let cached = unsafe { raw::read::<usize>(b"stats.arenas.4096.tcache_bytes\0") }.unwrap_or(0);
    Some(allocated.saturating_sub(cached as u64))
}

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

/// `used_memory` now, cheaply: what the registered threads allocated less what they freed
/// (jemalloc counts both for every thread, exactly, as a thread-local sum), plus an offset
/// taken from [`allocated_bytes`] at most every [`CALIBRATE_EVERY`] (for the threads that
/// are not registered, and for what a thread did after it left). Eviction reads it before
/// every command while over or near `maxmemory`, and after every key it evicts: a fresh
/// `allocated_bytes` merges every arena's statistics, which cost more than the eviction.
/// `None` when jemalloc keeps no per-thread counts.
pub fn live_bytes() -> Option<u64> {
    let stale = {
        let at = CALIBRATED_AT_US.load(Ordering::Relaxed);
        at == 0 || clock_us().saturating_sub(at) >= CALIBRATE_EVERY.as_micros() as u64
    };
    if stale {
        calibrate();
    }
    let net = threads_net()?;
    Some(net.saturating_add(OFFSET.load(Ordering::Relaxed)).max(0) as u64)
}

/// Takes the offset of [`live_bytes`] anew from jemalloc's merged statistics (when threads
/// are counted), and returns that reading ([`allocated_bytes`]).
pub fn calibrate() -> Option<u64> {
    let allocated = allocated_bytes()?;
    if let Some(net) = threads_net() {
        OFFSET.store(allocated as i64 - net, Ordering::Relaxed);
        CALIBRATED_AT_US.store(clock_us().max(1), Ordering::Relaxed);
    }
    Some(allocated)
}

/// How long an offset of [`live_bytes`] is trusted.
const CALIBRATE_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

static OFFSET: AtomicI64 = AtomicI64::new(0);
static CALIBRATED_AT_US: AtomicU64 = AtomicU64::new(0);

/// Microseconds on a monotonic clock that starts at the first reading (eviction's
/// time-over-limit figures use it too).
pub(crate) fn clock_us() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_micros() as u64
}

/// A registered thread's two jemalloc counters.
struct Counters {
    thread: u64,
    allocated: *const u64,
    deallocated: *const u64,
}

// SAFETY: the pointers are only read while the registry's lock is held, and a thread
// removes its entry (under that lock) before its counters go away.
unsafe impl Send for Counters {}

impl Counters {
    /// Bytes allocated less bytes freed by the thread so far (negative when it freed
    /// what others allocated).
    fn net(&self) -> i64 {
        // SAFETY: see `Send` above: the counters live as long as the entry. They are
        // written by their own thread only; an aligned 8-byte read sees either the old or
        // the new value.
        let (allocated, deallocated) = unsafe {
            (
                ptr::read_volatile(self.allocated),
                ptr::read_volatile(self.deallocated),
            )
        };
        allocated as i64 - deallocated as i64
    }
}

static REGISTRY: Mutex<Vec<Counters>> = Mutex::new(Vec::new());
/// What threads that left had allocated less freed.
static LEFT_NET: AtomicI64 = AtomicI64::new(0);
/// Set once a thread registered: the counters exist.
static COUNTING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// What the registered threads hold now (allocated less freed, without the offset that
/// makes it `used_memory`): the difference of two readings is what happened between them,
/// on those threads.
pub fn threads_net() -> Option<i64> {
    if !COUNTING.load(Ordering::Relaxed) {
        return None;
    }
    let registry = REGISTRY.lock();
    let net: i64 = registry.iter().map(Counters::net).sum();
    Some(net + LEFT_NET.load(Ordering::Relaxed))
}

/// What the calling thread allocated less what it freed so far (registering it if it was
/// not): the difference of two readings is what the thread did between them. `None` when
/// jemalloc keeps no per-thread counts.
pub fn this_thread_net() -> Option<i64> {
    register_thread();
    REGISTERED
        .try_with(|registered| {
            registered
                .get()
                .and_then(|r| r.counters.as_ref().map(Counters::net))
        })
        .ok()
        .flatten()
}

/// The calling thread's registration, removed when the thread ends.
struct Registration {
    id: u64,
    /// The thread's own counters (`None` when jemalloc has none).
    counters: Option<Counters>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut registry = REGISTRY.lock();
        if let Some(at) = registry.iter().position(|c| c.thread == self.id) {
            let left = registry.swap_remove(at);
            LEFT_NET.fetch_add(left.net(), Ordering::Relaxed);
        }
    }
}

thread_local! {
    static REGISTERED: std::cell::OnceCell<Registration> = const { std::cell::OnceCell::new() };
}

/// Counts the calling thread's allocations in [`live_bytes`] (the runtime's workers, the
/// lazyfree thread, the main thread). Calling it again does nothing.
pub fn register_thread() {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let _ = REGISTERED.try_with(|registered| {
        registered.get_or_init(|| {
            let thread = NEXT.fetch_add(1, Ordering::Relaxed);
            // SAFETY: both names are NUL-terminated and give a `uint64_t *` into the
            // calling thread's jemalloc state, valid while the thread lives.
            let pointers = unsafe {
                (
                    raw::read::<*mut u64>(b"thread.allocatedp\0"),
                    raw::read::<*mut u64>(b"thread.deallocatedp\0"),
                )
            };
            let counters = match pointers {
                (Ok(allocated), Ok(deallocated)) => {
                    REGISTRY.lock().push(Counters {
                        thread,
                        allocated,
                        deallocated,
                    });
                    COUNTING.store(true, Ordering::Relaxed);
                    Some(Counters {
                        thread,
                        allocated,
                        deallocated,
                    })
                }
                _ => None,
            };
            Registration {
                id: thread,
                counters,
            }
        });
    });
}
