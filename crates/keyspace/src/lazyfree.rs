//! Freeing big values off the command path: UNLINK, FLUSHALL/FLUSHDB ASYNC and the
//! `lazyfree-lazy-*` options. A command removes the key at once (under its shard's lock,
//! as always) and hands the value to one background thread, which drops it; the client
//! and every other command on that shard wait for none of the freeing.
//!
//! As in Redis, only values worth it go there: freeing a string or a compact collection
//! is one deallocation, cheaper than the hand-over. A value goes to the thread when its
//! effort (`Value::free_effort`: the allocations a drop walks) is above
//! [`EFFORT_THRESHOLD`]; whole databases (FLUSH ... ASYNC) always go.
//!
//! INFO's `lazyfree_pending_objects` and `lazyfreed_objects` come from here.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Mutex, OnceLock};

use crate::slot::Slot;
use crate::value::Value;

/// Redis' LAZYFREE_THRESHOLD: a value whose drop walks more allocations than this is freed
/// in the background.
pub const EFFORT_THRESHOLD: usize = 64;

/// Something to drop on the background thread, and how many objects (INFO counts keys
/// and values) it holds.
type Garbage = (Box<dyn Send>, u64);

/// Objects handed over and not yet dropped.
static PENDING: AtomicU64 = AtomicU64::new(0);
/// Objects the thread has dropped since start (or CONFIG RESETSTAT).
static FREED: AtomicU64 = AtomicU64::new(0);

/// The five `lazyfree-lazy-*` options, kept current by CONFIG.
static USER_DEL: AtomicBool = AtomicBool::new(false);
static USER_FLUSH: AtomicBool = AtomicBool::new(false);
static EXPIRE: AtomicBool = AtomicBool::new(false);
static SERVER_DEL: AtomicBool = AtomicBool::new(false);
static EVICTION: AtomicBool = AtomicBool::new(false);

/// The options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    pub user_del: bool,
    pub user_flush: bool,
    pub expire: bool,
    pub server_del: bool,
    pub eviction: bool,
}

/// Puts new values of the options in force.
pub fn set_options(options: Options) {
    USER_DEL.store(options.user_del, Ordering::Relaxed);
    USER_FLUSH.store(options.user_flush, Ordering::Relaxed);
    EXPIRE.store(options.expire, Ordering::Relaxed);
    SERVER_DEL.store(options.server_del, Ordering::Relaxed);
    EVICTION.store(options.eviction, Ordering::Relaxed);
}

/// Why a key's value is being freed: each cause has its `lazyfree-lazy-*` option, as in
/// Redis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// DEL, GETDEL (`lazyfree-lazy-user-del`).
    UserDel,
    /// A deadline passed, or EXPIRE/GETEX set one in the past (`lazyfree-lazy-expire`).
    Expire,
    /// A command's own deletion: a value overwritten, RENAME's or a STORE's destination,
    /// RESTORE REPLACE, MIGRATE's source (`lazyfree-lazy-server-del`).
    ServerDel,
    /// Evicted under maxmemory (`lazyfree-lazy-eviction`).
    Eviction,
}

impl Cause {
    fn lazy(self) -> bool {
        let option = match self {
            Cause::UserDel => &USER_DEL,
            Cause::Expire => &EXPIRE,
            Cause::ServerDel => &SERVER_DEL,
            Cause::Eviction => &EVICTION,
        };
        option.load(Ordering::Relaxed)
    }
}

/// Frees a value removed for `cause`: in the background when the cause's option is on and
/// the value is big, here otherwise.
pub fn free_for(cause: Cause, value: Value) {
    if cause.lazy() && value.free_effort() > EFFORT_THRESHOLD {
        free_in_background(value, 1);
    }
}

/// [`free_for`], for a whole removed key.
pub fn free_slot_for(cause: Cause, slot: Slot) {
    if cause.lazy() && slot.value().free_effort() > EFFORT_THRESHOLD {
        free_in_background(slot, 1);
    }
}

/// `lazyfree-lazy-user-del`: DEL frees as UNLINK does.
pub fn user_del() -> bool {
    USER_DEL.load(Ordering::Relaxed)
}

/// `lazyfree-lazy-user-flush`: FLUSHALL/FLUSHDB without a mode are ASYNC.
pub fn user_flush() -> bool {
    USER_FLUSH.load(Ordering::Relaxed)
}

fn sender() -> &'static Mutex<Sender<Garbage>> {
    static SENDER: OnceLock<Mutex<Sender<Garbage>>> = OnceLock::new();
    SENDER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Garbage>();
        std::thread::Builder::new()
            .name("lazyfree".into())
            .spawn(move || {
                if let Some(on_start) = ON_START.get() {
                    on_start();
                }
                for (garbage, objects) in rx {
                    drop(garbage);
                    if let Some(after_free) = AFTER_FREE.get() {
                        after_free();
                    }
                    PENDING.fetch_sub(objects, Ordering::Relaxed);
                    FREED.fetch_add(objects, Ordering::Relaxed);
                }
            })
            .expect("the lazyfree thread starts");
        Mutex::new(tx)
    })
}

/// What the thread calls after each free (the server hands back the allocator's
/// thread cache, so that `used_memory` drops at once).
static AFTER_FREE: OnceLock<fn()> = OnceLock::new();
static ON_START: OnceLock<fn()> = OnceLock::new();

/// Sets what the lazyfree thread calls first (the server registers it with its memory
/// counters). Set before the first free is handed over; later calls are ignored.
pub fn set_on_start(f: fn()) {
    let _ = ON_START.set(f);
}

/// Sets what the thread calls after each free (once; later calls change nothing).
pub fn set_after_free(f: fn()) {
    let _ = AFTER_FREE.set(f);
}

/// Drops `garbage`, which holds `objects` keys or values, on the background thread.
pub fn free_in_background<T: Send + 'static>(garbage: T, objects: u64) {
    PENDING.fetch_add(objects, Ordering::Relaxed);
    let sent = sender()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .send((Box::new(garbage), objects));
    if let Err(returned) = sent {
        // The thread is gone (only at exit): free here.
        drop(returned.0);
        PENDING.fetch_sub(objects, Ordering::Relaxed);
    }
}

/// Frees a removed value: in the background when it is big, here otherwise.
pub fn free(value: Value) {
    if value.free_effort() > EFFORT_THRESHOLD {
        free_in_background(value, 1);
    }
}

/// Frees the key an expiry removed (lazily or by the active sweep): in the background when
/// `lazyfree-lazy-expire` is on and its value is big, here otherwise.
pub fn free_expired(slot: Slot) {
    free_slot_for(Cause::Expire, slot);
}

/// Objects handed to the thread and not yet freed (INFO `lazyfree_pending_objects`).
pub fn pending() -> u64 {
    PENDING.load(Ordering::Relaxed)
}

/// Objects the thread has freed (INFO `lazyfreed_objects`).
pub fn freed() -> u64 {
    FREED.load(Ordering::Relaxed)
}

/// CONFIG RESETSTAT.
pub fn reset_stats() {
    FREED.store(0, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn wait_for(what: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !what() {
            assert!(Instant::now() < deadline, "timed out");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The only test here that uses the thread, so the counts are its own.
    #[test]
    fn the_thread_frees_what_it_is_given_and_counts_it() {
        let before = freed();
        // One allocation: freed here, never counted.
        free(Value::Str(vec![b'x'; 1000]));
        assert_eq!(freed(), before);
        let big: Vec<Vec<u8>> = (0..1000).map(|i| format!("{i}").into_bytes()).collect();
        free_in_background(big, 1);
        free_in_background(vec![0u8; 1 << 20], 5);
        wait_for(|| freed() == before + 6);
        assert_eq!(pending(), 0);
    }
}
