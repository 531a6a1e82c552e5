//! The sharded keyspace and the locked view commands run against.
//!
//! Keys are spread over a fixed number of shards by the top bits of their hash; each shard is
//! one mutex over that shard's slice of every database. A command locks the shards of the
//! keys it names (in ascending order, so two commands can never deadlock), runs, and unlocks:
//! commands on different keys run in parallel. A command that needs the whole keyspace
//! (FLUSHALL, KEYS, a transaction, a script) locks every shard, which makes it atomic.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};

use crate::clock::{Clock, Deadline, Now, Tick};
use crate::slot::Slot;
use crate::table::{Found, Swept, Table};
use crate::value::{Entry, Value};

/// One shard: its part of every database.
#[derive(Debug)]
pub struct Shard {
    dbs: Box<[Table]>,
    /// Writes ever made in this shard (Redis' `dirty`, but never reset), summed over shards
    /// when asked.
    dirty: u64,
    /// WATCHed keys of this shard (every database) and who watches them. Kept here rather
    /// than in each `Table` because FLUSHDB replaces a table and SWAPDB moves tables, while a
    /// watch stays with its database number. Writers look here only when it is non-empty.
    watches: HashMap<Box<[u8]>, WatchedBy>,
    /// Clients blocked (BLPOP & co) on keys of this shard, per key in the order they
    /// blocked. Writers look here only when it is non-empty.
    blocked: HashMap<Box<[u8]>, Vec<BlockedOn>>,
    /// A snapshot cut that has not copied this shard yet: whoever locks the shard next
    /// copies it first (see [`Snapshot`]).
    snapshot: Option<Arc<Snapshot>>,
}

/// A point-in-time copy of the whole keyspace, taken without stopping it: the cut
/// ([`Locked::cut_snapshot`], under every shard lock) only marks each shard; the first
/// lock of a marked shard afterwards, by a command or by the snapshot's reader, copies
/// that shard's tables before anything can change them. A command therefore waits for at
/// most one shard's copy, and the copy is exactly the state at the cut.
#[derive(Debug)]
pub struct Snapshot {
    copies: Box<[Mutex<Option<ShardCopy>>]>,
    /// The time of the cut: what deadlines are converted against.
    pub now: Now,
    /// Keys and keys with a deadline per database at the cut (RDB's RESIZEDB hints).
    pub sizes: Vec<(usize, usize)>,
    /// The change counter at the cut: a save makes the changes up to here durable.
    pub dirty: u64,
}

/// One shard's tables (every database) as a snapshot copied them.
pub type ShardCopy = Box<[Table]>;

/// Keys removed by expiry, as `(db, key)`.
pub type RemovedKeys = [(usize, Box<[u8]>)];
/// The pairs one sweep removed, and what it read.
pub type SweptShard = (Vec<(usize, Box<[u8]>)>, Swept);

/// A shard just locked, by whatever path: if a snapshot cut marked it, it is copied first,
/// before anyone changes it.
fn just_taken(mut guard: MutexGuard<'_, Shard>, index: usize) -> MutexGuard<'_, Shard> {
    if guard.snapshot.is_some() {
        copy_for_snapshot(&mut guard, index);
    }
    guard
}

/// Copies a shard marked by a snapshot cut, and clears the mark.
fn copy_for_snapshot(shard: &mut Shard, index: usize) {
    if let Some(snapshot) = shard.snapshot.take() {
        *snapshot.copies[index].lock() = Some(shard.dbs.clone());
    }
}

/// A client blocked until a key can serve it (BLPOP, BZPOPMIN...). The keyspace holds only
/// weak references and calls [`wake`](KeyWaiter::wake) under the key's shard lock.
pub trait KeyWaiter: Send + Sync + std::fmt::Debug {
    /// Asks the client to run its command again. Returns a token the waker may use to wait
    /// for that retry to finish (the server's business; the keyspace only passes it on).
    fn wake(&self) -> u64;
    fn as_any(&self) -> &dyn std::any::Any;
}

/// A waiter this view woke, for the caller to wait on if it cares about ordering.
#[derive(Debug, Clone)]
pub struct Woken {
    pub waiter: Arc<dyn KeyWaiter>,
    pub token: u64,
}

/// One client blocked on one key of a database, or an observer of the key (told of
/// every change, never in line: see [`Locked::observe`]).
#[derive(Debug)]
struct BlockedOn {
    db: usize,
    waiter: Weak<dyn KeyWaiter>,
    observer: bool,
}

impl BlockedOn {
    fn is(&self, waiter: &Arc<dyn KeyWaiter>) -> bool {
        std::ptr::eq(
            self.waiter.as_ptr().cast::<()>(),
            Arc::as_ptr(waiter).cast::<()>(),
        )
    }
}

/// The clients watching one key (of any database) of a shard.
#[derive(Debug)]
struct WatchedBy {
    hash: u64,
    watchers: Vec<Watcher>,
}

#[derive(Debug)]
struct Watcher {
    db: usize,
    /// The watching client's flag; dead once the client is gone (pruned lazily).
    flag: Weak<AtomicBool>,
    /// The key was present but past its deadline when watched (Redis' `expired` watch):
    /// its removal is no logical change, so it does not fail the transaction.
    stale: bool,
}

/// The keys one client WATCHes and the flag that writers of those keys raise. The keyspace
/// holds only weak references to the flag, so a client that goes away without UNWATCH leaves
/// dead entries behind; dropping `Watches` marks their shards so the next sweep prunes them.
#[derive(Debug, Default)]
pub struct Watches {
    flag: Arc<AtomicBool>,
    keys: Vec<WatchedKey>,
    /// The bytes of the watched keys' names, held twice (here and in the shard's table).
    key_bytes: usize,
    /// The keyspace's per-shard "has dead watchers" marks, known once something is watched.
    orphans: Option<Arc<[AtomicBool]>>,
}

#[derive(Debug)]
struct WatchedKey {
    db: usize,
    key: Box<[u8]>,
    shard: usize,
}

impl Watches {
    /// Whether a watched key changed since it was watched (Redis' `CLIENT_DIRTY_CAS`).
    pub fn is_dirty(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// What watching costs this client in memory: its list, the keys' names and its entry
    /// in each key's table of watchers (counted by `maxmemory-clients`, as Redis counts a
    /// client's watched keys).
    pub fn memory(&self) -> usize {
        self.keys.capacity() * std::mem::size_of::<WatchedKey>()
            + self.keys.len() * std::mem::size_of::<Watcher>()
            + 2 * self.key_bytes
    }

    /// The watched keys (of any database), for locking their shards.
    pub fn keys(&self) -> Vec<&[u8]> {
        self.keys.iter().map(|k| &k.key[..]).collect()
    }

    fn is_mine(&self, watcher: &Watcher) -> bool {
        std::ptr::eq(watcher.flag.as_ptr(), Arc::as_ptr(&self.flag))
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        let Some(orphans) = self.orphans.take() else {
            return;
        };
        // Release the flag first, so that a sweep seeing the mark also sees a dead watcher.
        drop(std::mem::take(&mut self.flag));
        for key in &self.keys {
            orphans[key.shard].store(true, Ordering::Release);
        }
    }
}

thread_local! {
    /// Views holding shard locks on this thread. Taking a second one would wait on a lock this
    /// thread holds (a hang of every client touching those shards): refuse loudly instead.
    static HELD_VIEWS: Cell<u32> = const { Cell::new(0) };
}

/// Counters a command leaves behind, folded into the server's stats afterwards.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Effects {
    /// Keys removed because a lookup found them past their deadline.
    pub expired: u64,
    /// Keys found by lookups, and keys looked up but absent.
    pub hits: u64,
    pub misses: u64,
}

/// A change that clients caching keys (CLIENT TRACKING) must hear of, recorded by a view
/// only while [`Keyspace::set_tracking`] is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tracked {
    /// `key` of `db` changed (Redis' `signalModifiedKey`); `expired`: it was removed for
    /// having passed its deadline, which no client did.
    Key {
        db: usize,
        key: Box<[u8]>,
        expired: bool,
    },
    /// FLUSHDB or FLUSHALL emptied databases (once per command however many).
    Flush,
}

/// The changes a view recorded for clients that cache keys ([`Locked::tracked`]): one
/// pointer in the view, nothing allocated until something is recorded, so that views
/// (made and dropped by every command) cost no more while nobody tracks.
#[derive(Debug, Default)]
// Boxed on purpose: every command makes and drops a view, and a thin pointer is one word
// to set and test there, where a `Vec` is three (callgrind: 4 instructions a command).
#[allow(clippy::box_collection)]
pub struct TrackedChanges(Option<Box<Vec<Tracked>>>);

impl TrackedChanges {
    pub fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|changes| changes.is_empty())
    }

    pub fn as_slice(&self) -> &[Tracked] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }

    /// Everything recorded so far, in order; the list is left empty.
    pub fn take(&mut self) -> Vec<Tracked> {
        self.0.take().map(|changes| *changes).unwrap_or_default()
    }

    #[cold]
    #[inline(never)]
    fn key(&mut self, db: usize, key: &[u8], expired: bool) {
        self.0
            .get_or_insert_with(Default::default)
            .push(Tracked::Key {
                db,
                key: key.into(),
                expired,
            });
    }

    /// A flush, once per run of flushes.
    #[cold]
    fn flush(&mut self) {
        let changes = self.0.get_or_insert_with(Default::default);
        if changes.last() != Some(&Tracked::Flush) {
            changes.push(Tracked::Flush);
        }
    }
}

/// What a lookup or an insertion did that keyspace notifications report: Redis emits these
/// from inside its lookups (`expired`, `keymiss`) and `dbAdd` (`new`), not from the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyEvent {
    /// A lookup found the key past its deadline and removed it.
    Expired,
    /// A lookup found nothing (recorded only while [`Locked::record`] asks for misses).
    Miss,
    /// An insertion created the key.
    New,
}

/// What a view recorded: `(event, db, key)` in order.
pub type KeyEvents = Vec<(KeyEvent, usize, Box<[u8]>)>;

/// Which [`KeyEvent`]s a view records into [`Locked::key_events`]: bits of
/// [`Locked::record`]. Zero (the default) records nothing and costs one test per lookup.
pub mod record {
    pub const EXPIRED: u8 = 1 << 0;
    pub const MISS: u8 = 1 << 1;
    pub const NEW: u8 = 1 << 2;
}

/// A key eviction may remove ([`Keyspace::eviction_sample`]).
#[derive(Debug, Clone)]
pub struct EvictionCandidate {
    pub db: usize,
    pub key: Box<[u8]>,
    /// Last access, in seconds on the keyspace clock ([`Slot::access_s`]), or under an LFU
    /// policy the key's counter ([`crate::lfu`]).
    pub access_s: u32,
    pub deadline: Option<Deadline>,
}

/// Cache-line padding keeps two shards' locks off one line.
#[derive(Debug)]
#[repr(align(128))]
struct Padded(Mutex<Shard>);

#[derive(Debug)]
pub struct Keyspace {
    shards: Box<[Padded]>,
    shard_bits: u32,
    num_dbs: usize,
    hasher: ahash::RandomState,
    clock: Clock,
    /// Per shard: a client that watched keys there went away without UNWATCH.
    orphans: Arc<[AtomicBool]>,
    /// Set while an exclusive view (a script) holds, or is taking, every shard.
    exclusive: AtomicBool,
    /// How to wait for a shard an exclusive view holds; see [`LongWait`].
    long_wait: OnceLock<LongWait>,
    /// What expiry may do, in one word so that a view reads it with one load:
    /// [`EXPIRY_LOADING`] while the server loads its data (views get a `now` under which
    /// nothing expires), and in the other bits the [`Tick`] (nanoseconds) up to which
    /// passed keys are kept (`CLIENT PAUSE`; 0: none), see [`Keyspace::hold_expiry`].
    expiry: AtomicU64,
    /// Set while some client tracks keys: views record what they change in
    /// [`Locked::tracked`]. Read (relaxed) only when a key changes.
    tracking: AtomicBool,
    /// Set under an LFU eviction policy: keys' access fields hold LFU counters
    /// ([`crate::lfu`]) instead of access times.
    lfu: crate::lfu::Settings,
}

/// The bit of `Keyspace::expiry` set while loading; the others hold the hold's end.
const EXPIRY_LOADING: u64 = 1 << 63;
/// The bit set while the server is a replica: passed keys are kept (reported missing) for
/// good, until the primary's `DEL` removes them, and nothing is swept.
const EXPIRY_REPLICA: u64 = 1 << 62;
/// The bits that are not the hold's end.
const EXPIRY_FLAGS: u64 = EXPIRY_LOADING | EXPIRY_REPLICA;

/// Runs a wait that may last as long as a script does. A server on an async runtime hands
/// the thread's other work elsewhere first (tokio's `block_in_place`), so that clients of
/// that thread are not stuck behind the script. Without one, the wait simply blocks.
pub type LongWait = fn(&mut dyn FnMut());

/// How long one timed attempt at a contended shard lasts before the exclusive flag is
/// looked at again.
const SHARD_RETRY: Duration = Duration::from_micros(200);

/// Which shards a view holds.
enum Guards<'a> {
    None,
    One(usize, MutexGuard<'a, Shard>),
    Some(Vec<(usize, MutexGuard<'a, Shard>)>),
    All(Vec<MutexGuard<'a, Shard>>),
}

/// The shards one command (or one transaction or script) holds, with its frozen `now`.
pub struct Locked<'a> {
    keyspace: &'a Keyspace,
    guards: Guards<'a>,
    now: Now,
    /// When false, lookups leave the access time alone (`CLIENT NO-TOUCH`, `OBJECT`).
    pub touch: bool,
    pub effects: Effects,
    /// Blocked clients this view woke (their keys became servable), in wake order.
    pub woken: Vec<Woken>,
    /// Taken by [`Keyspace::lock_exclusive`].
    exclusive: bool,
    /// Changes made through this view (what the shards' `dirty` counters gained): a
    /// command that changed nothing is not logged to the AOF.
    pub changes: u64,
    /// Keys lookups found past their deadline and removed, as `(db, key)`, in order: the
    /// server logs a `DEL` for each before the command that found it.
    pub expired_keys: Vec<(usize, Box<[u8]>)>,
    /// Which events to record in [`key_events`](Self::key_events) ([`record`] bits); the
    /// server sets it per command from the notifications it has to send.
    pub record: u8,
    /// Expiries, misses and new keys, in the order they happened, as `(event, db, key)`:
    /// the server turns them into keyspace notifications ([`Locked::take_key_events`]).
    /// Boxed: the view is moved by value on every command, and is rarely asked to record.
    key_events: Option<Box<KeyEvents>>,
    /// When `now` was read: the first command run under the view takes it as its start
    /// time, so timing it costs no second clock read.
    pub read_at: Option<Tick>,
    /// What changed through this view, in order, while some client tracks keys (see
    /// [`Keyspace::set_tracking`]); the server takes it after each command, before the
    /// view lets go of its shards. Always empty otherwise.
    pub tracked: TrackedChanges,
}

impl Keyspace {
    /// `shard_count` is rounded up to a power of two (at least 1).
    pub fn new(num_dbs: usize, shard_count: usize) -> Keyspace {
        let shard_count = shard_count.max(1).next_power_of_two();
        let shard_bits = shard_count.trailing_zeros();
        let hasher = ahash::RandomState::new();
        let shards = (0..shard_count)
            .map(|_| {
                Padded(Mutex::new(Shard {
                    dbs: (0..num_dbs)
                        .map(|_| Table::new(shard_bits, hasher.clone()))
                        .collect(),
                    dirty: 0,
                    watches: HashMap::new(),
                    blocked: HashMap::new(),
                    snapshot: None,
                }))
            })
            .collect();
        let orphans = (0..shard_count).map(|_| AtomicBool::new(false)).collect();
        Keyspace {
            shards,
            shard_bits,
            num_dbs,
            hasher,
            clock: Clock::new(),
            orphans,
            exclusive: AtomicBool::new(false),
            long_wait: OnceLock::new(),
            expiry: AtomicU64::new(0),
            tracking: AtomicBool::new(false),
            lfu: crate::lfu::Settings::default(),
        }
    }

    /// Keys count accesses for an LFU policy (`Some`), or keep their last access time.
    pub fn set_lfu(&self, params: Option<crate::lfu::Params>) {
        self.lfu.set(params);
    }

    /// The LFU settings while keys count accesses.
    pub fn lfu(&self) -> Option<crate::lfu::Params> {
        self.lfu.get()
    }

    /// Whether views record their changes in [`Locked::tracked`] (some client caches keys).
    /// A view that has locked a key's shard sees every change of this flag made before
    /// the shard's previous holder let go of it.
    pub fn set_tracking(&self, on: bool) {
        self.tracking.store(on, Ordering::Relaxed);
    }

    pub fn is_tracking(&self) -> bool {
        self.tracking.load(Ordering::Relaxed)
    }

    /// While set, nothing expires (Redis does not expire keys while loading).
    pub fn set_loading(&self, loading: bool) {
        if loading {
            self.expiry.fetch_or(EXPIRY_LOADING, Ordering::Release);
        } else {
            self.expiry.fetch_and(!EXPIRY_LOADING, Ordering::Release);
        }
    }

    /// While set, the keyspace is a replica's: a key past its deadline is reported missing
    /// but kept (its primary expires it and sends a `DEL`), and the active expiry sweeps
    /// nothing, as a Redis replica does.
    pub fn set_replica(&self, replica: bool) {
        if replica {
            self.expiry.fetch_or(EXPIRY_REPLICA, Ordering::Release);
        } else {
            self.expiry.fetch_and(!EXPIRY_REPLICA, Ordering::Release);
        }
    }

    /// Until `until` (a clock reading, inclusive; `None` ends a hold at once), keys past
    /// their deadline are kept: lookups report them missing without removing them (nor
    /// logging a `DEL` or counting an expiry), and [`Keyspace::sweep_shard`] does nothing.
    /// `CLIENT PAUSE` holds the dataset still this way, as Redis does.
    pub fn hold_expiry(&self, until: Option<Tick>) {
        // Never 0 (which means no hold) and clear of the loading bit.
        let held = until.map_or(0, |tick| tick.as_nanos().clamp(1, !EXPIRY_FLAGS));
        let _ = self
            .expiry
            .fetch_update(Ordering::Release, Ordering::Relaxed, |word| {
                Some((word & EXPIRY_FLAGS) | held)
            });
    }

    /// Whether passed keys are kept at `at` ([`Keyspace::hold_expiry`]).
    pub fn expiry_held_at(&self, at: Tick) -> bool {
        held_at(self.expiry.load(Ordering::Relaxed), at)
    }

    /// The copy of `shard` a snapshot cut took (copying it now if nobody has yet). Each
    /// shard's copy can be taken once.
    pub fn snapshot_shard(&self, snapshot: &Snapshot, shard: usize) -> Option<ShardCopy> {
        drop(self.lock_shard(shard));
        snapshot.copies[shard].lock().take()
    }

    /// Sets how waits for an exclusive view's shards are run (once; later calls are ignored).
    pub fn set_long_wait(&self, wait: LongWait) {
        let _ = self.long_wait.set(wait);
    }

    /// Locks one shard. Uncontended, one compare-and-swap. Contended by ordinary commands, a
    /// short wait. Held by an exclusive view (a script may run for seconds), the wait goes
    /// through [`LongWait`].
    fn lock_shard(&self, shard: usize) -> MutexGuard<'_, Shard> {
        just_taken(self.lock_shard_raw(shard), shard)
    }

    fn lock_shard_raw(&self, shard: usize) -> MutexGuard<'_, Shard> {
        let mutex = &self.shards[shard].0;
        if let Some(guard) = try_lock_spinning(mutex) {
            return guard;
        }
        loop {
            if self.exclusive.load(Ordering::Acquire) {
                let mut guard = None;
                match self.long_wait.get() {
                    Some(wait) => wait(&mut || guard = Some(mutex.lock())),
                    None => guard = Some(mutex.lock()),
                }
                if let Some(guard) = guard {
                    return guard;
                }
                continue;
            }
            if let Some(guard) = mutex.try_lock_for(SHARD_RETRY) {
                return guard;
            }
        }
    }

    pub fn num_dbs(&self) -> usize {
        self.num_dbs
    }

    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    pub fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    pub fn shard_of_hash(&self, hash: u64) -> usize {
        if self.shard_bits == 0 {
            0
        } else {
            (hash >> (64 - self.shard_bits)) as usize
        }
    }

    pub fn shard_of_key(&self, key: &[u8]) -> usize {
        self.shard_of_hash(self.hash(key))
    }

    /// Starts loading the buckets a lookup of `key` in `db` will compare, unless its shard
    /// is busy (a hint: correctness never depends on it), without waiting for any of them.
    /// Returns the key's hash, for [`Keyspace::prefetch_contents`] once the buckets have had
    /// time to arrive.
    pub fn prefetch(&self, db: usize, key: &[u8]) -> u64 {
        let hash = self.hash(key);
        self.with_free_table(db, hash, |table| table.prefetch(hash));
        hash
    }

    /// The second prefetch step: the slots (entry and key bytes) the buckets point to.
    pub fn prefetch_contents(&self, db: usize, hash: u64) {
        self.with_free_table(db, hash, |table| table.prefetch_contents(hash));
    }

    /// The third prefetch step: the string value of `key` (its hash as `prefetch` gave it).
    pub fn prefetch_value(&self, db: usize, hash: u64, key: &[u8]) {
        self.with_free_table(db, hash, |table| table.prefetch_value(hash, key));
    }

    /// Runs `f` on the table of `db` that `hash` falls in, if its shard is free right now.
    fn with_free_table(&self, db: usize, hash: u64, f: impl FnOnce(&Table)) {
        if let Some(shard) = self.shards[self.shard_of_hash(hash)].0.try_lock() {
            if let Some(table) = shard.dbs.get(db) {
                f(table);
            }
        }
    }

    /// Locks the shards holding `keys` (any order, duplicates allowed).
    pub fn lock_keys<'a, K: AsRef<[u8]>>(&'a self, keys: &[K]) -> Locked<'a> {
        self.lock_keys_at(keys, None)
    }

    /// [`Keyspace::lock_keys`], with the view's time taken from `reading` when given: a
    /// monotonic reading made just before (the end of the command before it in the same
    /// batch), so that the view costs no clock read of its own.
    ///
    /// Inlined, so that a caller locking one key (most commands) compiles to that case
    /// alone; several keys take [`Keyspace::lock_several_at`].
    #[inline]
    pub fn lock_keys_at<'a, K: AsRef<[u8]>>(
        &'a self,
        keys: &[K],
        reading: Option<Tick>,
    ) -> Locked<'a> {
        match keys {
            [] => self.view(Guards::None, reading),
            [key] => {
                enter_locking();
                let shard = self.shard_of_key(key.as_ref());
                self.view(Guards::One(shard, self.lock_shard(shard)), reading)
            }
            _ => self.lock_several_at(keys, reading),
        }
    }

    fn lock_several_at<'a, K: AsRef<[u8]>>(
        &'a self,
        keys: &[K],
        reading: Option<Tick>,
    ) -> Locked<'a> {
        enter_locking();
        let mut shards: Vec<usize> = keys.iter().map(|k| self.shard_of_key(k.as_ref())).collect();
        shards.sort_unstable();
        shards.dedup();
        let guards = if shards.len() == 1 {
            Guards::One(shards[0], self.lock_shard(shards[0]))
        } else {
            Guards::Some(self.lock_ordered(&shards))
        };
        self.view(guards, reading)
    }

    /// Locks every shard: the caller runs alone.
    pub fn lock_all(&self) -> Locked<'_> {
        self.lock_all_at(None)
    }

    /// [`Keyspace::lock_all`], with the view's time from `reading` as in
    /// [`Keyspace::lock_keys_at`].
    pub fn lock_all_at(&self, reading: Option<Tick>) -> Locked<'_> {
        enter_locking();
        let shards: Vec<usize> = (0..self.shards.len()).collect();
        let guards = Guards::All(
            self.lock_ordered(&shards)
                .into_iter()
                .map(|(_, guard)| guard)
                .collect(),
        );
        self.view(guards, reading)
    }

    /// Locks `shards` (ascending, no duplicates). Whoever holds a shard never blocks on one
    /// an exclusive view (a script) holds, since that view may take more shards as it
    /// goes: it lets go of everything, waits for that shard holding nothing, and starts over.
    fn lock_ordered(&self, shards: &[usize]) -> Vec<(usize, MutexGuard<'_, Shard>)> {
        'again: loop {
            let mut held = Vec::with_capacity(shards.len());
            for &shard in shards {
                if held.is_empty() {
                    held.push((shard, self.lock_shard(shard)));
                    continue;
                }
                match self.lock_shard_unless_exclusive(shard) {
                    Some(guard) => held.push((shard, guard)),
                    None => {
                        drop(held);
                        drop(self.lock_shard(shard));
                        continue 'again;
                    }
                }
            }
            return held;
        }
    }

    /// Like [`Keyspace::lock_shard`], but gives up (`None`) when the shard is taken while an
    /// exclusive view exists.
    fn lock_shard_unless_exclusive(&self, shard: usize) -> Option<MutexGuard<'_, Shard>> {
        let mutex = &self.shards[shard].0;
        let guard = match try_lock_spinning(mutex) {
            Some(guard) => guard,
            None => loop {
                if self.exclusive.load(Ordering::Acquire) {
                    return None;
                }
                if let Some(guard) = mutex.try_lock_for(SHARD_RETRY) {
                    break guard;
                }
            },
        };
        Some(just_taken(guard, shard))
    }

    /// The view of a script: it locks the shards of the keys the script declared, and takes
    /// any other shard the first time the script touches it (every shard for a
    /// whole-keyspace command). Scripts run one at a time under the scripting claim, which
    /// ordinary commands check before they lock anything; until the view is dropped, those
    /// already past that check that find a shard taken wait through [`LongWait`], and never
    /// while holding another shard ([`Keyspace::lock_ordered`]), so the script's late locks
    /// cannot deadlock. Exclusive views must not overlap.
    pub fn lock_exclusive<K: AsRef<[u8]>>(&self, keys: &[K]) -> Locked<'_> {
        self.lock_exclusive_at(keys, None)
    }

    /// [`Keyspace::lock_exclusive`], with the view's time from `reading` as in
    /// [`Keyspace::lock_keys_at`].
    pub fn lock_exclusive_at<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        reading: Option<Tick>,
    ) -> Locked<'_> {
        enter_locking();
        let was = self.exclusive.swap(true, Ordering::AcqRel);
        debug_assert!(!was, "two exclusive views at once");
        let mut shards: Vec<usize> = keys.iter().map(|k| self.shard_of_key(k.as_ref())).collect();
        shards.sort_unstable();
        shards.dedup();
        let guards = shards
            .into_iter()
            .map(|shard| (shard, self.lock_for_exclusive(shard)))
            .collect();
        let mut view = self.view(Guards::Some(guards), reading);
        view.exclusive = true;
        view
    }

    /// A shard for the exclusive view: whoever holds it now is a command that will finish
    /// or let go (see [`Keyspace::lock_ordered`]), so a plain wait.
    fn lock_for_exclusive(&self, shard: usize) -> MutexGuard<'_, Shard> {
        just_taken(self.shards[shard].0.lock(), shard)
    }

    /// A view that holds nothing, for commands that touch no key.
    pub fn lock_none(&self) -> Locked<'_> {
        self.lock_none_at(None)
    }

    /// [`Keyspace::lock_none`], with the view's time from `reading` as in
    /// [`Keyspace::lock_keys_at`].
    pub fn lock_none_at(&self, reading: Option<Tick>) -> Locked<'_> {
        self.view(Guards::None, reading)
    }

    #[inline]
    fn view<'a>(&'a self, guards: Guards<'a>, reading: Option<Tick>) -> Locked<'a> {
        let (mut now, read_at) = match reading {
            Some(at) => (self.clock.now_from(at), at),
            None => self.clock.now_at(),
        };
        // One load; the common case (neither loading nor held) is one test of it.
        let expiry = self.expiry.load(Ordering::Relaxed);
        if expiry != 0 {
            (now.loading, now.keep_passed) = unusual_expiry(expiry, read_at);
        }
        Locked {
            keyspace: self,
            guards,
            now,
            read_at: Some(read_at),
            touch: true,
            effects: Effects::default(),
            woken: Vec::new(),
            exclusive: false,
            changes: 0,
            expired_keys: Vec::new(),
            tracked: TrackedChanges::default(),
            record: 0,
            key_events: None,
        }
    }

    /// Active expiry for one shard: reads up to `budget` keys of each database that has
    /// deadlines there ([`Table::sweep_expired`]) and removes the passed ones. Returns the
    /// `(db, key)` pairs removed and what the sweep read; `on_removed` sees the pairs first,
    /// while the shard is still locked (so that a `DEL` it logs precedes any later write
    /// there).
    pub fn sweep_shard(
        &self,
        shard: usize,
        budget: usize,
        on_removed: &mut dyn FnMut(&RemovedKeys),
    ) -> SweptShard {
        let expiry = self.expiry.load(Ordering::Relaxed);
        if expiry & EXPIRY_REPLICA != 0
            || (expiry & !EXPIRY_FLAGS != 0 && held_at(expiry, Tick::now()))
        {
            return (Vec::new(), Swept::default());
        }
        let mut now = self.clock.now();
        now.loading = expiry & EXPIRY_LOADING != 0;
        let mut guard = self.lock_shard_raw(shard);
        if let Some(snapshot) = &guard.snapshot {
            // A snapshot's writer will copy this shard: the sweep does not do it for it.
            // A tick goes round many shards, and copying them all on a worker thread held
            // it for tens of milliseconds (bench/replication.py's full sync of 200k keys:
            // the primary's slowest PING 55 ms). Passed keys here wait a tick.
            if Arc::strong_count(snapshot) > 1 {
                return (Vec::new(), Swept::default());
            }
            // Nobody will take the copy (its job ended): drop the mark.
            guard.snapshot = None;
        }
        if self.orphans[shard].swap(false, Ordering::Acquire) {
            prune_watches(&mut guard);
        }
        let mut removed = Vec::new();
        let mut keys = Vec::new();
        let mut swept = Swept::default();
        for (db, table) in guard.dbs.iter_mut().enumerate() {
            swept += table.sweep_expired(now, budget, &mut keys);
            removed.extend(keys.drain(..).map(|k| (db, k)));
        }
        if !guard.watches.is_empty() {
            for (db, key) in &removed {
                touch_watchers(&mut guard, *db, self.hash(key), key, now);
            }
        }
        if !removed.is_empty() {
            on_removed(&removed);
        }
        (removed, swept)
    }

    /// Keys eviction may choose from: keys of `shard` drawn at random, database by
    /// database (only keys with a deadline when `volatile`, and none past it), appended to
    /// `out` until it holds `count`. Locks the shard for the draw only.
    pub fn eviction_sample(
        &self,
        shard: usize,
        count: usize,
        volatile: bool,
        out: &mut Vec<EvictionCandidate>,
    ) {
        use rand::Rng;
        let now = self.clock.now();
        let guard = self.lock_shard(shard);
        let mut rng = rand::thread_rng();
        for (db, table) in guard.dbs.iter().enumerate() {
            if table.is_empty() || (volatile && table.expires() == 0) {
                continue;
            }
            // Keys with a deadline may be few: a volatile draw tries harder.
            let wanted = count.saturating_sub(out.len());
            let tries = if volatile { wanted * 8 } else { wanted };
            for _ in 0..tries {
                if out.len() >= count {
                    return;
                }
                let Some(slot) = table.random(|n| rng.gen_range(0..n)) else {
                    break;
                };
                if (volatile && slot.deadline().is_none()) || slot.is_passed(now) {
                    continue;
                }
                if out.iter().any(|c| c.db == db && *c.key == *slot.key()) {
                    continue;
                }
                out.push(EvictionCandidate {
                    db,
                    key: slot.key().into(),
                    access_s: slot.access_s(),
                    deadline: slot.deadline(),
                });
            }
        }
    }

    /// Whether this thread holds a view with shard locks (it may take no other).
    pub fn thread_holds_shards() -> bool {
        HELD_VIEWS.with(|held| held.get() > 0)
    }

    /// UNWATCH for a client that holds no shard: locks its watched keys' shards and forgets
    /// them.
    pub fn unwatch(&self, watches: &mut Watches) {
        if watches.keys.is_empty() {
            watches.flag.store(false, Ordering::Release);
            return;
        }
        let mut view = self.lock_keys(&watches.keys());
        view.unwatch_all(watches);
    }

    /// Writes ever made, over all shards (locks them one at a time). Never reset, unlike
    /// Redis' `dirty`: a save records the count its snapshot was cut at, and the changes
    /// since the last save are the difference (a reset would race with a snapshot being
    /// cut while writes go on).
    pub fn dirty(&self) -> u64 {
        // A read of counters: a shard marked by a snapshot cut is not copied for it (the
        // persistence cron asks every tick, and copying every marked shard on a worker
        // thread held it for tens of milliseconds during a replica's full sync).
        (0..self.shards.len())
            .map(|s| self.lock_shard_raw(s).dirty)
            .sum()
    }
}

/// For a view's `now` when the expiry word is not 0: whether the server is loading, and
/// whether passed keys are kept at `at`. (Returned, not written through a reference: that
/// would keep the caller's `now` out of registers.)
#[cold]
#[inline(never)]
fn unusual_expiry(expiry: u64, at: Tick) -> (bool, bool) {
    (
        expiry & EXPIRY_LOADING != 0,
        expiry & EXPIRY_REPLICA != 0 || held_at(expiry, at),
    )
}

/// Whether the expiry word `expiry` keeps passed keys at `at`.
#[inline]
fn held_at(expiry: u64, at: Tick) -> bool {
    let until = expiry & !EXPIRY_FLAGS;
    until != 0 && at.as_nanos() <= until
}

/// Records what a lookup that found no live key did: removed an expired key, then missed.
#[cold]
fn note_lookup_events(
    record: u8,
    key_events: &mut Option<Box<KeyEvents>>,
    db: usize,
    key: &[u8],
    expired: bool,
) {
    if expired && record & record::EXPIRED != 0 {
        push_key_event(key_events, KeyEvent::Expired, db, key);
    }
    if record & record::MISS != 0 {
        push_key_event(key_events, KeyEvent::Miss, db, key);
    }
}

#[cold]
fn push_key_event(key_events: &mut Option<Box<KeyEvents>>, event: KeyEvent, db: usize, key: &[u8]) {
    key_events
        .get_or_insert_with(Default::default)
        .push((event, db, key.into()));
}

/// Counts a view about to take shard locks on this thread; see [`HELD_VIEWS`].
fn enter_locking() {
    HELD_VIEWS.with(|held| {
        assert!(
            held.get() == 0,
            "a second keyspace view on a thread that already holds shard locks would deadlock"
        );
        held.set(held.get() + 1);
    });
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        if self.exclusive {
            self.keyspace.exclusive.store(false, Ordering::Release);
        }
        if !matches!(self.guards, Guards::None) {
            HELD_VIEWS.with(|held| held.set(held.get().saturating_sub(1)));
        }
    }
}

impl<'a> Locked<'a> {
    pub fn now(&self) -> Now {
        self.now
    }

    /// Keys past their deadline are still there for this view (nothing expires): a
    /// replica applying its primary's stream sees the keys as the primary does.
    pub fn see_passed_keys(&mut self) {
        self.now.loading = true;
        self.now.keep_passed = false;
    }

    pub fn keyspace(&self) -> &'a Keyspace {
        self.keyspace
    }

    /// For a long load that holds every shard: hands each shard to whoever waits for it
    /// (a fair unlock), then takes them all back, so that the commands a load lets run
    /// (INFO...) are served between its steps, as Redis serves events while it loads.
    /// The view's time stays the one it was made with.
    pub fn let_others_in(&mut self) {
        let Guards::All(guards) = std::mem::replace(&mut self.guards, Guards::None) else {
            panic!("let_others_in needs every shard held");
        };
        for guard in guards {
            MutexGuard::unlock_fair(guard);
        }
        let shards: Vec<usize> = (0..self.keyspace.shards.len()).collect();
        self.guards = Guards::All(
            self.keyspace
                .lock_ordered(&shards)
                .into_iter()
                .map(|(_, guard)| guard)
                .collect(),
        );
    }

    /// Whether this view holds every shard; a script's view takes the ones it lacks first.
    pub fn holds_all(&mut self) -> bool {
        self.take_all_if_exclusive();
        matches!(self.guards, Guards::All(_))
    }

    /// A script's view about to read or change the whole keyspace: takes every shard.
    fn take_all_if_exclusive(&mut self) {
        if self.exclusive && !matches!(self.guards, Guards::All(_)) {
            take_all(self.keyspace, &mut self.guards);
        }
    }

    fn shard_mut(&mut self, shard: usize) -> &mut Shard {
        view_shard(self.keyspace, &mut self.guards, self.exclusive, shard)
    }

    fn table_mut(&mut self, db: usize, hash: u64) -> &mut Table {
        let shard = self.keyspace.shard_of_hash(hash);
        &mut self.shard_mut(shard).dbs[db]
    }

    /// What a key written now gets in its access field: the time, or under an LFU policy a
    /// new key's counter.
    fn access_stamp(&self) -> u32 {
        if self.keyspace.lfu.get().is_some() {
            return crate::lfu::pack(crate::lfu::minutes(self.now.wall_s()), crate::lfu::INIT);
        }
        self.now.access_s()
    }

    /// The live value under `key`, or `None`. A key past its deadline is removed on the way.
    /// Counts a hit or a miss and refreshes the access time unless `touch` is off.
    pub fn get(&mut self, db: usize, key: &[u8]) -> Option<&mut Value> {
        self.get_slot(db, key).map(Slot::value_mut)
    }

    /// The value stored under `key`, live or past its deadline, without removing, counting
    /// or touching anything: a look that leaves no trace (the commands that follow it
    /// count and expire as if it had not happened).
    pub fn peek(&mut self, db: usize, key: &[u8]) -> Option<&Value> {
        let hash = self.keyspace.hash(key);
        self.table_mut(db, hash).get(hash, key).map(Slot::value)
    }

    /// Whether `key` holds a string changed in place ([`Slot::is_raw_string`]); looks as
    /// [`peek`](Self::peek) does.
    pub fn is_raw_string(&mut self, db: usize, key: &[u8]) -> bool {
        let hash = self.keyspace.hash(key);
        self.table_mut(db, hash)
            .get(hash, key)
            .is_some_and(Slot::is_raw_string)
    }

    /// Marks the string under `key` as changed in place (`OBJECT ENCODING` "raw", see
    /// [`Slot::encoding`]), or with false as set whole; touches and counts nothing.
    pub fn set_raw_string(&mut self, db: usize, key: &[u8], raw: bool) {
        let hash = self.keyspace.hash(key);
        if let Some(slot) = self.table_mut(db, hash).get_mut(hash, key) {
            slot.set_raw_string(raw);
        }
    }

    /// Like [`get`](Self::get) (hit/miss counted, passed key removed) but never refreshes the
    /// access time: Redis' `LOOKUP_NOTOUCH`, used by TYPE, TTL, EXISTS and OBJECT.
    pub fn get_untouched(&mut self, db: usize, key: &[u8]) -> Option<&mut Value> {
        self.lookup_slot(db, key, false).map(Slot::value_mut)
    }

    /// The live key's whole slot (value, deadline, access time), looked up as
    /// [`get`](Self::get) does. Its deadline changes only through [`Locked::set_deadline`].
    pub fn get_slot(&mut self, db: usize, key: &[u8]) -> Option<&mut Slot> {
        let touch = self.touch;
        self.lookup_slot(db, key, touch)
    }

    fn lookup_slot(&mut self, db: usize, key: &[u8], touch: bool) -> Option<&mut Slot> {
        let hash = self.keyspace.hash(key);
        let now = self.now;
        let stamp = self.access_stamp();
        let shard = self.keyspace.shard_of_hash(hash);
        // Split borrows: effects and guards are separate fields.
        let effects = &mut self.effects;
        let expired_keys = &mut self.expired_keys;
        let tracked = &mut self.tracked;
        let keyspace = self.keyspace;
        let record = self.record;
        let key_events = &mut self.key_events;
        let shard = view_shard(self.keyspace, &mut self.guards, self.exclusive, shard);
        // Watchers must hear of a lazy expiry; checked apart so the common path (nobody
        // watching this shard) stays one probe.
        if !shard.watches.is_empty() && shard.dbs[db].remove_if_passed(hash, key, now) {
            touch_watchers(shard, db, hash, key, now);
            effects.expired += 1;
            effects.misses += 1;
            expired_keys.push((db, key.into()));
            track_expired(keyspace, tracked, db, key);
            if record != 0 {
                note_lookup_events(record, key_events, db, key, true);
            }
            return None;
        }
        match shard.dbs[db].lookup(hash, key, now) {
            Found::Live(slot) => {
                effects.hits += 1;
                if touch {
                    match keyspace.lfu.get() {
                        None => slot.set_access_s(stamp),
                        Some(params) => slot.set_access_s(crate::lfu::touched(
                            slot.access_s(),
                            crate::lfu::minutes(now.wall_s()),
                            params,
                            crate::lfu::random_unit(),
                        )),
                    }
                }
                Some(slot)
            }
            Found::Expired => {
                effects.expired += 1;
                effects.misses += 1;
                expired_keys.push((db, key.into()));
                track_expired(keyspace, tracked, db, key);
                if record != 0 {
                    note_lookup_events(record, key_events, db, key, true);
                }
                None
            }
            Found::Missing => {
                effects.misses += 1;
                if record & record::MISS != 0 {
                    note_lookup_events(record, key_events, db, key, false);
                }
                None
            }
        }
    }

    /// Whether a live key exists (removes it if its deadline passed), without counting a
    /// hit or miss or touching the access time.
    pub fn exists(&mut self, db: usize, key: &[u8]) -> bool {
        let saved = self.effects;
        let found = self.lookup_slot(db, key, false).is_some();
        let expired = self.effects.expired;
        self.effects = Effects { expired, ..saved };
        found
    }

    /// Stores `value` under `key`, replacing what was there; the key gets `deadline`.
    /// Returns whether it replaced an entry (live or not yet swept), which it frees as a
    /// server-side deletion (`lazyfree-lazy-server-del`).
    pub fn set(&mut self, db: usize, key: &[u8], value: Value, deadline: Option<Deadline>) -> bool {
        self.put_entry(db, key, Entry { value, deadline })
    }

    /// Inserts a whole entry (value and deadline as given), accessed now. A replaced key
    /// keeps its LFU counter, as in Redis.
    pub fn put_entry(&mut self, db: usize, key: &[u8], entry: Entry) -> bool {
        let stamp = self.access_stamp();
        let keep = self.keyspace.lfu.get().is_some();
        self.insert_entry(db, key, entry, stamp, keep)
    }

    /// Inserts a whole entry with `access_s` in its access field (seconds on the keyspace
    /// clock, as [`Slot::access_s`] reports, or an LFU counter, [`crate::lfu::pack`]):
    /// RESTORE ... IDLETIME or FREQ.
    pub fn put_entry_accessed(
        &mut self,
        db: usize,
        key: &[u8],
        entry: Entry,
        access_s: u32,
    ) -> bool {
        self.insert_entry(db, key, entry, access_s, false)
    }

    fn insert_entry(
        &mut self,
        db: usize,
        key: &[u8],
        entry: Entry,
        access_s: u32,
        keep_access: bool,
    ) -> bool {
        let hash = self.keyspace.hash(key);
        let replaced = self
            .table_mut(db, hash)
            .insert(hash, key, entry, access_s, keep_access);
        let had_deadline = replaced.as_ref().is_some_and(|old| old.deadline.is_some());
        if self.record != 0 || had_deadline {
            self.after_insert(db, hash, key, replaced.as_ref());
        }
        match replaced {
            Some(old) => {
                crate::lazyfree::free_for(crate::lazyfree::Cause::ServerDel, old.value);
                true
            }
            None => false,
        }
    }

    /// What an insertion reports beyond the insertion: a key created (`new`), or a
    /// replaced key that was past its deadline, which no lookup had removed yet: as if one
    /// had (Redis looks the key up for writing first), then created anew.
    #[cold]
    #[inline(never)]
    fn after_insert(&mut self, db: usize, hash: u64, key: &[u8], replaced: Option<&Entry>) {
        let now = self.now;
        match replaced {
            None => {}
            Some(old) if old.deadline.is_some_and(|d| d.is_passed(now)) => {
                let shard = self.shard_mut(self.keyspace.shard_of_hash(hash));
                touch_watchers(shard, db, hash, key, now);
                self.effects.expired += 1;
                self.expired_keys.push((db, key.into()));
                if self.record & record::EXPIRED != 0 {
                    push_key_event(&mut self.key_events, KeyEvent::Expired, db, key);
                }
            }
            Some(_) => return,
        }
        if self.record & record::NEW != 0 {
            push_key_event(&mut self.key_events, KeyEvent::New, db, key);
        }
    }

    /// Whether anything was recorded since the last [`take_key_events`](Self::take_key_events).
    #[inline]
    pub fn has_key_events(&self) -> bool {
        self.key_events.is_some()
    }

    /// What was recorded (see [`Locked::record`]), in order; the record starts anew.
    pub fn take_key_events(&mut self) -> KeyEvents {
        self.key_events
            .take()
            .map(|events| *events)
            .unwrap_or_default()
    }

    /// The live key's whole slot, looked up as [`get_untouched`](Self::get_untouched) does.
    pub fn get_slot_untouched(&mut self, db: usize, key: &[u8]) -> Option<&mut Slot> {
        self.lookup_slot(db, key, false)
    }

    /// Removes a key; returns its entry when it was live.
    pub fn remove(&mut self, db: usize, key: &[u8]) -> Option<Entry> {
        let hash = self.keyspace.hash(key);
        let now = self.now;
        let shard = self.shard_mut(self.keyspace.shard_of_hash(hash));
        if now.keep_passed
            && shard.dbs[db]
                .get(hash, key)
                .is_some_and(|slot| slot.is_passed(now))
        {
            // Held: the passed key stays (it already reads as missing).
            return None;
        }
        let slot = shard.dbs[db].remove(hash, key)?;
        if slot.is_passed(now) {
            crate::lazyfree::free_expired(slot);
            // Removed by expiry, as a lookup would have: watchers learn of it.
            touch_watchers(shard, db, hash, key, now);
            self.effects.expired += 1;
            self.expired_keys.push((db, key.into()));
            track_expired(self.keyspace, &mut self.tracked, db, key);
            if self.record & record::EXPIRED != 0 {
                push_key_event(&mut self.key_events, KeyEvent::Expired, db, key);
            }
            return None;
        }
        Some(slot.into_entry())
    }

    /// Removes whatever `key` holds, even past its deadline (Redis' `dbDelete`, which the
    /// STORE commands use on a destination they leave empty): no expiry is counted or
    /// recorded. Returns whether there was anything.
    pub fn remove_stored(&mut self, db: usize, key: &[u8]) -> bool {
        self.remove_stored_for(db, key, crate::lazyfree::Cause::ServerDel)
    }

    /// [`remove_stored`](Self::remove_stored), freeing the value as `cause` asks
    /// (eviction has its own `lazyfree-lazy-eviction`).
    pub fn remove_stored_for(
        &mut self,
        db: usize,
        key: &[u8],
        cause: crate::lazyfree::Cause,
    ) -> bool {
        let hash = self.keyspace.hash(key);
        match self.table_mut(db, hash).remove(hash, key) {
            Some(slot) => {
                crate::lazyfree::free_slot_for(cause, slot);
                true
            }
            None => false,
        }
    }

    /// Changes a live key's deadline; false when there is no live key.
    pub fn set_deadline(&mut self, db: usize, key: &[u8], deadline: Option<Deadline>) -> bool {
        if !self.exists(db, key) {
            return false;
        }
        let hash = self.keyspace.hash(key);
        self.table_mut(db, hash).set_deadline(hash, key, deadline)
    }

    /// Records a change to `key`: the snapshot change counter, clients WATCHing it, and
    /// (while some client tracks keys) [`Locked::tracked`]. Call after the change, and
    /// only when something really changed.
    pub fn signal_modified(&mut self, db: usize, key: &[u8]) {
        let hash = self.keyspace.hash(key);
        let now = self.now;
        let shard = view_shard(
            self.keyspace,
            &mut self.guards,
            self.exclusive,
            self.keyspace.shard_of_hash(hash),
        );
        shard.dirty += 1;
        self.changes += 1;
        touch_watchers(shard, db, hash, key, now);
        if !shard.blocked.is_empty() {
            wake_blocked(shard, db, hash, key, now, &mut self.woken);
        }
        if self.keyspace.tracking.load(Ordering::Relaxed) {
            self.tracked.key(db, key, false);
        }
    }

    /// Queues `waiter` on `key` of `db` (after those already blocked there; once, however
    /// often it is asked). Needs the key's shard.
    pub fn block_on(&mut self, db: usize, key: &[u8], waiter: &Arc<dyn KeyWaiter>) {
        let shard = self.shard_mut(self.keyspace.shard_of_key(key));
        let queue = shard.blocked.entry(key.into()).or_default();
        queue.retain(|b| b.waiter.strong_count() > 0);
        if !queue.iter().any(|b| b.db == db && b.is(waiter)) {
            queue.push(BlockedOn {
                db,
                waiter: Arc::downgrade(waiter),
                observer: false,
            });
        }
    }

    /// Wakes `observer` at every change of `key` of `db` (as blocked clients are woken),
    /// without a place in the line of blocked clients. It stays until [`Locked::unobserve`]
    /// or until it is dropped. Needs the key's shard.
    pub fn observe(&mut self, db: usize, key: &[u8], observer: &Arc<dyn KeyWaiter>) {
        let shard = self.shard_mut(self.keyspace.shard_of_key(key));
        let queue = shard.blocked.entry(key.into()).or_default();
        queue.retain(|b| b.waiter.strong_count() > 0);
        if !queue.iter().any(|b| b.db == db && b.is(observer)) {
            queue.push(BlockedOn {
                db,
                waiter: Arc::downgrade(observer),
                observer: true,
            });
        }
    }

    /// Ends [`Locked::observe`].
    pub fn unobserve(&mut self, db: usize, key: &[u8], observer: &Arc<dyn KeyWaiter>) {
        let shard = self.shard_mut(self.keyspace.shard_of_key(key));
        if let Some(queue) = shard.blocked.get_mut(key) {
            queue.retain(|b| b.waiter.strong_count() > 0 && !(b.db == db && b.is(observer)));
            if queue.is_empty() {
                shard.blocked.remove(key);
            }
        }
    }

    /// The clients blocked on `key` of `db`, in the order they blocked (those still alive).
    /// Needs the key's shard.
    pub fn waiters(&mut self, db: usize, key: &[u8]) -> Vec<Arc<dyn KeyWaiter>> {
        let shard = self.shard_mut(self.keyspace.shard_of_key(key));
        shard.blocked.get(key).map_or_else(Vec::new, |queue| {
            queue
                .iter()
                .filter(|b| b.db == db && !b.observer)
                .filter_map(|b| b.waiter.upgrade())
                .collect()
        })
    }

    /// The first client blocked on `key` of `db` (observers aside) that `test` accepts,
    /// looking no further than it: the lock commands ask for the first in line of a queue
    /// that can be thousands long on every grant.
    pub fn first_waiter(
        &mut self,
        db: usize,
        key: &[u8],
        test: &mut dyn FnMut(&dyn KeyWaiter) -> bool,
    ) -> Option<Arc<dyn KeyWaiter>> {
        let shard = self.shard_mut(self.keyspace.shard_of_key(key));
        let queue = shard.blocked.get(key)?;
        queue
            .iter()
            .filter(|b| b.db == db && !b.observer)
            .filter_map(|b| b.waiter.upgrade())
            .find(|waiter| test(waiter.as_ref()))
    }

    /// Takes `waiter` off `key` of `db`. When the key holds something, the next client
    /// blocked there is woken: whatever this one did not take may serve it.
    pub fn unblock_from(&mut self, db: usize, key: &[u8], waiter: &Arc<dyn KeyWaiter>) {
        self.pass_blocked(db, key, waiter, true);
    }

    /// `waiter` tried again and stays blocked: when the key holds something (that it could
    /// not use, e.g. another type), the client blocked after it there gets its turn.
    pub fn pass_on(&mut self, db: usize, key: &[u8], waiter: &Arc<dyn KeyWaiter>) {
        self.pass_blocked(db, key, waiter, false);
    }

    fn pass_blocked(&mut self, db: usize, key: &[u8], waiter: &Arc<dyn KeyWaiter>, leave: bool) {
        let hash = self.keyspace.hash(key);
        let now = self.now;
        let shard = view_shard(
            self.keyspace,
            &mut self.guards,
            self.exclusive,
            self.keyspace.shard_of_hash(hash),
        );
        let Some(queue) = shard.blocked.get_mut(key) else {
            return;
        };
        queue.retain(|b| b.waiter.strong_count() > 0);
        let position = queue.iter().position(|b| b.db == db && b.is(waiter));
        let next = match position {
            Some(at) if leave => {
                queue.remove(at);
                at
            }
            Some(at) => at + 1,
            None => 0,
        };
        if queue.is_empty() {
            shard.blocked.remove(key);
            return;
        }
        if is_live(&shard.dbs[db], hash, key, now) {
            if let Some(queue) = shard.blocked.get(key) {
                wake_first(queue, db, next, &mut self.woken);
            }
        }
    }

    /// Adds `key` of `db` to what `watches` watches (WATCH). Needs the key's shard.
    pub fn watch(&mut self, db: usize, key: &[u8], watches: &mut Watches) {
        if watches.keys.iter().any(|k| k.db == db && *k.key == *key) {
            return;
        }
        let hash = self.keyspace.hash(key);
        let shard_index = self.keyspace.shard_of_hash(hash);
        let now = self.now;
        let orphans = watches
            .orphans
            .get_or_insert_with(|| self.keyspace.orphans.clone())
            .clone();
        let shard = self.shard_mut(shard_index);
        if orphans[shard_index].swap(false, Ordering::Acquire) {
            prune_watches(shard);
        }
        let stale = shard.dbs[db]
            .get(hash, key)
            .is_some_and(|slot| slot.is_passed(now));
        let watcher = Watcher {
            db,
            flag: Arc::downgrade(&watches.flag),
            stale,
        };
        match shard.watches.get_mut(key) {
            Some(by) => by.watchers.push(watcher),
            None => {
                shard.watches.insert(
                    key.into(),
                    WatchedBy {
                        hash,
                        watchers: vec![watcher],
                    },
                );
            }
        }
        watches.keys.push(WatchedKey {
            db,
            key: key.into(),
            shard: shard_index,
        });
        watches.key_bytes += key.len();
    }

    /// Forgets every key `watches` watches and clears its flag. Needs the watched keys' shards.
    pub fn unwatch_all(&mut self, watches: &mut Watches) {
        watches.key_bytes = 0;
        for watched in std::mem::take(&mut watches.keys) {
            let shard = self.shard_mut(watched.shard);
            if let Some(by) = shard.watches.get_mut(&watched.key) {
                by.watchers
                    .retain(|w| !(w.db == watched.db && watches.is_mine(w)));
                if by.watchers.is_empty() {
                    shard.watches.remove(&watched.key);
                }
            }
        }
        watches.flag.store(false, Ordering::Release);
    }

    /// Whether a watched key that was live when watched is now past its deadline (not yet
    /// removed): Redis fails EXEC then. Needs the watched keys' shards.
    pub fn watched_key_expired(&mut self, watches: &Watches) -> bool {
        let now = self.now;
        for watched in &watches.keys {
            let shard = self.shard_mut(watched.shard);
            let Some(by) = shard.watches.get(&watched.key) else {
                continue;
            };
            let was_stale = by
                .watchers
                .iter()
                .any(|w| w.db == watched.db && watches.is_mine(w) && w.stale);
            if was_stale {
                continue;
            }
            let hash = by.hash;
            if shard.dbs[watched.db]
                .get(hash, &watched.key)
                .is_some_and(|slot| slot.is_passed(now))
            {
                return true;
            }
        }
        false
    }

    /// Adds `changes` to the write counter of the shard holding `key`.
    pub fn add_dirty(&mut self, _db: usize, key: &[u8], changes: u64) {
        let hash = self.keyspace.hash(key);
        let shard = self.keyspace.shard_of_hash(hash);
        self.shard_mut(shard).dirty += changes;
        self.changes += changes;
    }

    /// Counts a change that is not a key's (FUNCTION LOAD, ...): the command is logged.
    pub fn note_change(&mut self) {
        self.changes += 1;
    }

    /// Marks a snapshot cut: the state every shard has now is what the returned snapshot
    /// will hold (see [`Snapshot`]). Needs every shard.
    pub fn cut_snapshot(&mut self) -> Arc<Snapshot> {
        let now = self.now;
        let num_dbs = self.keyspace.num_dbs;
        let shards = self.keyspace.shards.len();
        let all = self.all();
        let sizes = (0..num_dbs)
            .map(|db| {
                all.iter().fold((0, 0), |(keys, expires), shard| {
                    (
                        keys + shard.dbs[db].len(),
                        expires + shard.dbs[db].expires(),
                    )
                })
            })
            .collect();
        let dirty = all.iter().map(|shard| shard.dirty).sum();
        let snapshot = Arc::new(Snapshot {
            copies: (0..shards).map(|_| Mutex::new(None)).collect(),
            now,
            sizes,
            dirty,
        });
        for (index, shard) in all.iter_mut().enumerate() {
            // A cut still pending from an abandoned snapshot is simply replaced.
            debug_assert!(index < shards);
            shard.snapshot = Some(Arc::clone(&snapshot));
        }
        snapshot
    }

    fn all(&mut self) -> &mut Vec<MutexGuard<'a, Shard>> {
        self.take_all_if_exclusive();
        match &mut self.guards {
            Guards::All(all) => all,
            _ => panic!("whole-keyspace operation without every shard locked"),
        }
    }

    /// Number of keys in `db` (keys past their deadline but not yet removed included, as in
    /// Redis). Needs every shard.
    pub fn db_len(&mut self, db: usize) -> usize {
        self.all().iter().map(|s| s.dbs[db].len()).sum()
    }

    /// Number of keys with a deadline in `db`. Needs every shard.
    pub fn db_expires(&mut self, db: usize) -> usize {
        self.all().iter().map(|s| s.dbs[db].expires()).sum()
    }

    /// Removes every key of `db`; returns how many there were. Needs every shard.
    pub fn flush_db(&mut self, db: usize) -> usize {
        self.flush_db_freeing(db, false)
    }

    /// [`Locked::flush_db`], the keys freed on the lazyfree thread when `lazily` (FLUSHDB
    /// and FLUSHALL ASYNC): the database is empty at once either way.
    pub fn flush_db_freeing(&mut self, db: usize, lazily: bool) -> usize {
        let mut removed = 0;
        self.take_all_if_exclusive();
        let now = self.now;
        let Guards::All(all) = &mut self.guards else {
            panic!("whole-keyspace operation without every shard locked");
        };
        for shard in all.iter_mut() {
            touch_all_watchers_in_db(shard, db, None, now);
            // Every key of the db vanishes: blocked clients re-check theirs.
            for queue in shard.blocked.values() {
                wake_first(queue, db, 0, &mut self.woken);
                wake_observers(queue, db);
            }
            let keys = shard.dbs[db].len();
            removed += keys;
            let emptied = shard.dbs[db].emptied();
            let old = std::mem::replace(&mut shard.dbs[db], emptied);
            if lazily && keys > 0 {
                crate::lazyfree::free_in_background(old, keys as u64);
            }
            shard.dirty += 1;
        }
        self.changes += 1;
        if self.keyspace.tracking.load(Ordering::Relaxed) {
            self.tracked.flush();
        }
        removed
    }

    /// Swaps two databases' contents. Needs every shard.
    pub fn swap_dbs(&mut self, a: usize, b: usize) {
        self.take_all_if_exclusive();
        let now = self.now;
        let Guards::All(all) = &mut self.guards else {
            panic!("whole-keyspace operation without every shard locked");
        };
        for shard in all.iter_mut() {
            touch_all_watchers_in_db(shard, a, Some(b), now);
            touch_all_watchers_in_db(shard, b, Some(a), now);
            shard.dbs.swap(a, b);
            shard.dirty += 1;
            self.changes += 1;
            // Clients blocked in either database may now find their key, or find it gone
            // (Redis wakes them in SWAPDB too).
            for queue in shard.blocked.values() {
                for db in [a, b] {
                    wake_first(queue, db, 0, &mut self.woken);
                    wake_observers(queue, db);
                }
            }
        }
    }

    /// Calls `visit` for every live key of `db` (in no particular order). Needs every shard.
    pub fn for_each_key(&mut self, db: usize, visit: &mut dyn FnMut(&Slot)) {
        let now = self.now;
        for shard in self.all().iter() {
            for slot in shard.dbs[db].iter() {
                if !slot.is_passed(now) {
                    visit(slot);
                }
            }
        }
    }

    /// The key's slot as stored, even past its deadline, without removing it or counting a
    /// hit (DEBUG OBJECT and DIGEST-VALUE look at logically expired keys, as in Redis).
    pub fn stored_slot(&mut self, db: usize, key: &[u8]) -> Option<&Slot> {
        let hash = self.keyspace.hash(key);
        let shard = self.keyspace.shard_of_hash(hash);
        let shard = view_shard(self.keyspace, &mut self.guards, self.exclusive, shard);
        shard.dbs[db].get(hash, key)
    }

    /// Calls `visit` for every key stored in `db`, live or past its deadline but not yet
    /// removed (DEBUG DIGEST counts those, as Redis does). Needs every shard.
    pub fn for_each_stored_key(&mut self, db: usize, visit: &mut dyn FnMut(&Slot)) {
        for shard in self.all().iter() {
            for slot in shard.dbs[db].iter() {
                visit(slot);
            }
        }
    }

    /// One step of `SCAN`: visits at least `count` keys (live ones are passed to `visit`)
    /// starting at `cursor`; returns the next cursor, 0 when done. Needs every shard.
    pub fn scan(
        &mut self,
        db: usize,
        cursor: u64,
        count: usize,
        visit: &mut dyn FnMut(&Slot),
    ) -> u64 {
        let now = self.now;
        self.scan_slots(db, cursor, count, &mut |slot| {
            if !slot.is_passed(now) {
                visit(slot);
            }
        })
    }

    /// [`scan`](Self::scan) that also hands back, in `passed`, the keys it met past their
    /// deadline (still stored): the SCAN command removes those it would have returned.
    pub fn scan_with_passed(
        &mut self,
        db: usize,
        cursor: u64,
        count: usize,
        visit: &mut dyn FnMut(&Slot),
        passed: &mut Vec<Box<[u8]>>,
    ) -> u64 {
        let now = self.now;
        self.scan_slots(db, cursor, count, &mut |slot| {
            if slot.is_passed(now) {
                passed.push(slot.key().into());
            } else {
                visit(slot);
            }
        })
    }

    /// Removes `key` if it is past its deadline, as a lookup would (the expiry counted,
    /// logged and recorded), without counting a hit or a miss. Returns whether it did.
    pub fn expire_if_passed(&mut self, db: usize, key: &[u8]) -> bool {
        let hash = self.keyspace.hash(key);
        let now = self.now;
        let shard = self.shard_mut(self.keyspace.shard_of_hash(hash));
        if !shard.dbs[db].remove_if_passed(hash, key, now) {
            return false;
        }
        touch_watchers(shard, db, hash, key, now);
        self.effects.expired += 1;
        self.expired_keys.push((db, key.into()));
        if self.record & record::EXPIRED != 0 {
            push_key_event(&mut self.key_events, KeyEvent::Expired, db, key);
        }
        true
    }

    fn scan_slots(
        &mut self,
        db: usize,
        cursor: u64,
        count: usize,
        visit: &mut dyn FnMut(&Slot),
    ) -> u64 {
        let keyspace = self.keyspace;
        let count = count.max(1);
        let mut position = cursor;
        let mut seen = 0usize;
        let all = self.all();
        loop {
            let shard = keyspace.shard_of_hash(position);
            let wanted = count.saturating_sub(seen);
            let mut counting = |slot: &Slot| {
                seen += 1;
                visit(slot);
            };
            let next = all[shard].dbs[db].scan(position, wanted, &mut counting);
            match next {
                Some(next) => return next,
                None => {
                    let next_shard = shard + 1;
                    if next_shard >= all.len() {
                        return 0;
                    }
                    position = (next_shard as u64) << (64 - keyspace.shard_bits);
                    if seen >= count {
                        return position;
                    }
                }
            }
        }
    }

    /// A random live key of `db`; picks past their deadline are removed on the way, as
    /// RANDOMKEY does. Needs every shard.
    pub fn random_key(&mut self, db: usize) -> Option<Vec<u8>> {
        let mut passed: Vec<Vec<u8>> = Vec::new();
        let found = self.random_live_key(db, &mut passed);
        for key in passed {
            self.expire_if_passed(db, &key);
        }
        found
    }

    fn random_live_key(&mut self, db: usize, passed: &mut Vec<Vec<u8>>) -> Option<Vec<u8>> {
        use rand::Rng;
        let now = self.now;
        let mut rng = rand::thread_rng();
        let all = self.all();
        let total: usize = all.iter().map(|s| s.dbs[db].len()).sum();
        if total == 0 {
            return None;
        }
        // Random picks first, a shard chosen in proportion to its keys (a uniform pick of
        // a shard mostly finds empty ones when few keys are left); every key drawn past its
        // deadline is expired, as Redis' RANDOMKEY does. If no live key turns up, a full
        // pass finds one, expiring the passed keys it meets before it.
        for _ in 0..100 {
            let mut nth = rng.gen_range(0..total);
            let Some(table) = all.iter().map(|s| &s.dbs[db]).find(|table| {
                let here = nth < table.len();
                if !here {
                    nth -= table.len();
                }
                here
            }) else {
                break;
            };
            if let Some(slot) = table.random(|n| rng.gen_range(0..n)) {
                if !slot.is_passed(now) {
                    return Some(slot.key().to_vec());
                }
                if !passed.iter().any(|k| k.as_slice() == slot.key()) {
                    passed.push(slot.key().to_vec());
                }
            }
        }
        // The pass meets each key once: only the (at most 100) drawn ones can repeat.
        let drawn = passed.len();
        for slot in all.iter().flat_map(|s| s.dbs[db].iter()) {
            if !slot.is_passed(now) {
                return Some(slot.key().to_vec());
            }
            if !passed[..drawn].iter().any(|k| k.as_slice() == slot.key()) {
                passed.push(slot.key().to_vec());
            }
        }
        None
    }

    /// Memory held by the tables themselves. Needs every shard.
    pub fn overhead_bytes(&mut self) -> usize {
        self.all()
            .iter()
            .flat_map(|s| s.dbs.iter())
            .map(|t| t.overhead_bytes())
            .sum()
    }
}

/// Takes a shard if it is free or freed within a short spin. Commands hold a shard for a
/// microsecond or so: a sleeping wait (a futex, then a context switch to wake) costs more.
fn try_lock_spinning(mutex: &Mutex<Shard>) -> Option<MutexGuard<'_, Shard>> {
    for _ in 0..LOCK_SPINS {
        if let Some(guard) = mutex.try_lock() {
            return Some(guard);
        }
        std::hint::spin_loop();
    }
    mutex.try_lock()
}

/// Tries of [`try_lock_spinning`] (a pause each: a few microseconds in all).
const LOCK_SPINS: u32 = 64;

/// How many shards a script's view takes one by one before it takes them all (and finds
/// them by index rather than by a search).
const EXCLUSIVE_TAKE_ALL_AT: usize = 32;

/// The locked shard `shard` of a view; an exclusive (script) view takes it if it does not
/// hold it yet, others panic (a command whose key specs missed a key it touches).
fn view_shard<'g, 'a>(
    keyspace: &'a Keyspace,
    guards: &'g mut Guards<'a>,
    exclusive: bool,
    shard: usize,
) -> &'g mut Shard {
    if exclusive {
        if let Guards::Some(list) = guards {
            if !list.iter().any(|(s, _)| *s == shard) {
                if list.len() + 1 >= EXCLUSIVE_TAKE_ALL_AT {
                    take_all(keyspace, guards);
                } else {
                    list.push((shard, keyspace.lock_for_exclusive(shard)));
                }
            }
        }
    }
    shard_in(guards, shard)
}

/// Turns an exclusive view's shards into all of them, taking those it lacks.
fn take_all<'a>(keyspace: &'a Keyspace, guards: &mut Guards<'a>) {
    let Guards::Some(list) = std::mem::replace(guards, Guards::None) else {
        unreachable!("an exclusive view holds Some or All");
    };
    let mut slots: Vec<Option<MutexGuard<'a, Shard>>> =
        (0..keyspace.shards.len()).map(|_| None).collect();
    for (shard, guard) in list {
        slots[shard] = Some(guard);
    }
    *guards = Guards::All(
        slots
            .into_iter()
            .enumerate()
            .map(|(shard, guard)| guard.unwrap_or_else(|| keyspace.lock_for_exclusive(shard)))
            .collect(),
    );
}

/// The locked shard `shard` of a view's guards; panics when the view does not hold it (a
/// command whose key specs missed a key it touches).
fn shard_in<'g>(guards: &'g mut Guards<'_>, shard: usize) -> &'g mut Shard {
    match guards {
        Guards::All(all) => &mut all[shard],
        Guards::One(s, guard) if *s == shard => guard,
        Guards::Some(list) => {
            let position = list
                .iter()
                .position(|(s, _)| *s == shard)
                .expect("command touched a key whose shard it did not lock");
            &mut list[position].1
        }
        _ => panic!("command touched a key whose shard it did not lock"),
    }
}

fn raise(watcher: &Watcher) {
    if let Some(flag) = watcher.flag.upgrade() {
        flag.store(true, Ordering::Release);
    }
}

/// Redis' `touchWatchedKey`, called after `key` of `db` changed or was removed by expiry.
fn touch_watchers(shard: &mut Shard, db: usize, hash: u64, key: &[u8], now: Now) {
    if shard.watches.is_empty() {
        return;
    }
    let Some(by) = shard.watches.get_mut(key) else {
        return;
    };
    let slot = shard.dbs[db].get(hash, key);
    let present = slot.is_some();
    let live = slot.is_some_and(|slot| !slot.is_passed(now));
    for watcher in by.watchers.iter_mut().filter(|w| w.db == db) {
        if watcher.stale && !live {
            // Watched while already expired and still logically absent: no change. Once
            // the key is really gone, this is an ordinary watch of a missing key.
            watcher.stale = present;
            continue;
        }
        raise(watcher);
    }
}

/// Redis' `touchAllWatchedKeysInDb` for one shard: `emptied` is being flushed, or swapped
/// with `replaced_with`. Only keys that exist in either database (expired or not) count.
fn touch_all_watchers_in_db(
    shard: &mut Shard,
    emptied: usize,
    replaced_with: Option<usize>,
    now: Now,
) {
    if shard.watches.is_empty() {
        return;
    }
    for (key, by) in shard.watches.iter_mut() {
        let in_emptied = shard.dbs[emptied].get(by.hash, key).is_some();
        let replacement = replaced_with.and_then(|r| shard.dbs[r].get(by.hash, key));
        if !in_emptied && replacement.is_none() {
            continue;
        }
        let replacement_expired = replacement.is_some_and(|slot| slot.is_passed(now));
        for watcher in by.watchers.iter_mut().filter(|w| w.db == emptied) {
            if watcher.stale {
                if replacement.is_none() {
                    // The expired key is deleted: no logical change.
                    watcher.stale = false;
                    continue;
                }
                if replacement_expired {
                    continue;
                }
            } else if !in_emptied && replacement_expired {
                // A missing key replaced by an expired one: still logically missing.
                watcher.stale = true;
                continue;
            }
            raise(watcher);
        }
    }
}

fn is_live(table: &Table, hash: u64, key: &[u8], now: Now) -> bool {
    table
        .get(hash, key)
        .is_some_and(|slot| !slot.is_passed(now))
}

/// After `key` of `db` changed, wakes the first client blocked on it (the others get their
/// turn as each one finishes, keeping Redis' FIFO). A change that removed the key wakes it
/// too: a blocked XREADGROUP must learn that its stream is gone (Redis answers UNBLOCKED),
/// while a list waiter simply finds nothing and keeps its place.
fn wake_blocked(
    shard: &mut Shard,
    db: usize,
    _hash: u64,
    key: &[u8],
    _now: Now,
    woken: &mut Vec<Woken>,
) {
    if let Some(queue) = shard.blocked.get(key) {
        wake_first(queue, db, 0, woken);
        wake_observers(queue, db);
    }
}

/// Tells every observer of the key in `db` that it changed.
fn wake_observers(queue: &[BlockedOn], db: usize) {
    for observer in queue.iter().filter(|b| b.observer && b.db == db) {
        if let Some(observer) = observer.waiter.upgrade() {
            observer.wake();
        }
    }
}

/// Wakes the first live waiter of `db` at or after `from` in `queue` (once per view).
fn wake_first(queue: &[BlockedOn], db: usize, from: usize, woken: &mut Vec<Woken>) {
    let next = queue
        .iter()
        .skip(from)
        .filter(|b| b.db == db && !b.observer)
        .find_map(|b| b.waiter.upgrade());
    let Some(waiter) = next else {
        return;
    };
    let already = woken.iter().any(|w| {
        std::ptr::eq(
            Arc::as_ptr(&w.waiter).cast::<()>(),
            Arc::as_ptr(&waiter).cast::<()>(),
        )
    });
    if !already {
        let token = waiter.wake();
        woken.push(Woken { waiter, token });
    }
}

/// Records a key removed for having passed its deadline, while some client tracks keys.
fn track_expired(keyspace: &Keyspace, tracked: &mut TrackedChanges, db: usize, key: &[u8]) {
    if keyspace.tracking.load(Ordering::Relaxed) {
        tracked.key(db, key, true);
    }
}

/// Drops watchers whose client is gone.
fn prune_watches(shard: &mut Shard) {
    shard.watches.retain(|_, by| {
        by.watchers.retain(|w| w.flag.strong_count() > 0);
        !by.watchers.is_empty()
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Value {
        Value::Str(v.as_bytes().to_vec())
    }

    #[test]
    fn set_get_remove_across_shards() {
        let ks = Keyspace::new(16, 8);
        let keys: Vec<String> = (0..200).map(|i| format!("k{i}")).collect();
        {
            let mut all = ks.lock_all();
            for k in &keys {
                all.set(0, k.as_bytes(), s(k), None);
            }
            assert_eq!(all.db_len(0), 200);
            assert_eq!(all.db_len(1), 0);
        }
        let mut view = ks.lock_keys(&["k1", "k2", "k150"]);
        assert_eq!(view.get(0, b"k150").map(|v| v.clone()), Some(s("k150")));
        assert!(view.remove(0, b"k1").is_some());
        assert!(view.get(0, b"k1").is_none());
    }

    /// A script's view locks its declared key's shard and takes others as it touches them,
    /// while other threads lock several shards at a time (and all of them): nobody
    /// deadlocks, and no increment is lost.
    #[test]
    fn exclusive_views_take_undeclared_shards_without_deadlock() {
        fn bump(view: &mut Locked<'_>, key: &[u8]) {
            let n = match view.get(0, key).map(|v| v.clone()) {
                Some(Value::Str(v)) => String::from_utf8(v).unwrap().parse::<u64>().unwrap(),
                _ => 0,
            };
            view.set(0, key, Value::Str((n + 1).to_string().into_bytes()), None);
        }
        const KEYS: usize = 40;
        const SCRIPTS: usize = 300;
        const ROUNDS: usize = 3000;
        let ks = Arc::new(Keyspace::new(1, 64));
        let key = |i: usize| format!("counter{i}").into_bytes();
        let (done, finished) = std::sync::mpsc::channel();
        let mut threads = Vec::new();
        for worker in 0..2usize {
            let ks = Arc::clone(&ks);
            let done = done.clone();
            threads.push(std::thread::spawn(move || {
                for round in 0..ROUNDS {
                    if round % 500 == 0 {
                        let mut all = ks.lock_all();
                        bump(&mut all, &key(0));
                        continue;
                    }
                    let picked = [
                        key((round * 7 + worker) % KEYS),
                        key((round * 13 + 5) % KEYS),
                    ];
                    let mut view = ks.lock_keys(&picked);
                    for k in &picked {
                        bump(&mut view, k);
                    }
                }
                done.send(()).unwrap();
            }));
        }
        {
            let ks = Arc::clone(&ks);
            threads.push(std::thread::spawn(move || {
                for run in 0..SCRIPTS {
                    let declared = key(run % KEYS);
                    let mut view = ks.lock_exclusive(&[&declared]);
                    for i in 0..KEYS {
                        bump(&mut view, &key((run + i) % KEYS));
                    }
                    if run % 50 == 0 {
                        assert!(view.holds_all());
                        assert!(view.db_len(0) <= KEYS);
                    }
                }
                done.send(()).unwrap();
            }));
        }
        for _ in 0..threads.len() {
            finished
                .recv_timeout(Duration::from_secs(60))
                .expect("a thread is stuck: the views deadlocked");
        }
        for thread in threads {
            thread.join().unwrap();
        }
        let mut all = ks.lock_all();
        let total: u64 = (0..KEYS)
            .map(|i| match all.get(0, &key(i)).map(|v| v.clone()) {
                Some(Value::Str(v)) => String::from_utf8(v).unwrap().parse::<u64>().unwrap(),
                _ => 0,
            })
            .sum();
        let plain_rounds = ROUNDS - ROUNDS.div_ceil(500);
        let expected = 2 * (plain_rounds * 2 + ROUNDS.div_ceil(500)) + SCRIPTS * KEYS;
        assert_eq!(total, expected as u64);
    }

    #[test]
    fn scan_covers_every_shard() {
        let ks = Keyspace::new(1, 16);
        let mut all = ks.lock_all();
        for i in 0..1000 {
            all.set(0, format!("key{i}").as_bytes(), s("v"), None);
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        loop {
            cursor = all.scan(0, cursor, 7, &mut |slot| {
                seen.insert(slot.key().to_vec());
            });
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(seen.len(), 1000);
    }

    #[test]
    fn swap_and_flush() {
        let ks = Keyspace::new(4, 4);
        let mut all = ks.lock_all();
        all.set(1, b"a", s("1"), None);
        all.swap_dbs(1, 2);
        assert!(all.get(1, b"a").is_none());
        assert!(all.get(2, b"a").is_some());
        assert_eq!(all.flush_db(2), 1);
        assert_eq!(all.db_len(2), 0);
    }

    #[test]
    fn get_untouched_keeps_access_time_but_counts() {
        let ks = Keyspace::new(1, 1);
        let mut view = ks.lock_all();
        view.set(0, b"k", s("v"), None);
        drop(view);
        ks.clock().advance(5_000);
        let mut view = ks.lock_all();
        assert!(view.get_untouched(0, b"k").is_some());
        assert!(view.get_untouched(0, b"missing").is_none());
        assert_eq!((view.effects.hits, view.effects.misses), (1, 1));
        // Stamps are on the access clock, which starts at 2^30 seconds.
        assert_eq!(
            view.get_slot_untouched(0, b"k").map(|s| s.access_s()),
            Some(1 << 30)
        );
        assert!(view.get(0, b"k").is_some());
        assert_eq!(
            view.get_slot_untouched(0, b"k").map(|s| s.access_s()),
            Some((1 << 30) + 5)
        );
    }

    fn registered_watchers(ks: &Keyspace) -> usize {
        ks.shards
            .iter()
            .map(|s| {
                s.0.lock()
                    .watches
                    .values()
                    .map(|by| by.watchers.len())
                    .sum::<usize>()
            })
            .sum()
    }

    #[test]
    fn watches_are_raised_unregistered_and_pruned() {
        let ks = Keyspace::new(2, 4);
        let mut watches = Watches::default();
        {
            let mut view = ks.lock_keys(&["a", "b"]);
            view.watch(0, b"a", &mut watches);
            view.watch(0, b"a", &mut watches);
            view.watch(1, b"b", &mut watches);
        }
        assert_eq!(watches.len(), 2);
        assert_eq!(registered_watchers(&ks), 2);
        {
            let mut view = ks.lock_keys(&["a"]);
            view.signal_modified(1, b"a");
            assert!(!watches.is_dirty(), "another database's key");
            view.signal_modified(0, b"a");
            assert!(watches.is_dirty());
        }
        ks.unwatch(&mut watches);
        assert!(!watches.is_dirty());
        assert!(watches.is_empty());
        assert_eq!(registered_watchers(&ks), 0);
        // A client that goes away without UNWATCH: the next sweep of its shards prunes it.
        let mut gone = Watches::default();
        {
            let mut view = ks.lock_keys(&["a", "b"]);
            view.watch(0, b"a", &mut gone);
            view.watch(0, b"b", &mut gone);
        }
        drop(gone);
        assert_eq!(registered_watchers(&ks), 2);
        for shard in 0..ks.shard_count() {
            let _ = ks.sweep_shard(shard, 1, &mut |_| {});
        }
        assert_eq!(registered_watchers(&ks), 0);
    }

    #[test]
    fn flush_touches_only_present_keys_of_its_db() {
        let ks = Keyspace::new(2, 4);
        let mut present = Watches::default();
        let mut missing = Watches::default();
        let mut all = ks.lock_all();
        all.set(0, b"p", s("v"), None);
        all.set(1, b"m", s("v"), None);
        all.watch(0, b"p", &mut present);
        all.watch(0, b"m", &mut missing);
        all.flush_db(0);
        assert!(present.is_dirty());
        assert!(!missing.is_dirty());
        all.swap_dbs(0, 1);
        assert!(missing.is_dirty(), "SWAPDB brought the key in");
        all.unwatch_all(&mut present);
        all.unwatch_all(&mut missing);
    }

    #[derive(Debug, Default)]
    struct CountingWaiter(std::sync::atomic::AtomicU64);

    impl KeyWaiter for CountingWaiter {
        fn wake(&self) -> u64 {
            self.0.fetch_add(1, Ordering::SeqCst)
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }

    fn wakes(waiter: &Arc<CountingWaiter>) -> u64 {
        waiter.0.load(Ordering::SeqCst)
    }

    #[test]
    fn blocked_clients_are_woken_first_come_first_served() {
        let ks = Keyspace::new(2, 4);
        let first = Arc::new(CountingWaiter::default());
        let second = Arc::new(CountingWaiter::default());
        let (a, b): (Arc<dyn KeyWaiter>, Arc<dyn KeyWaiter>) = (first.clone(), second.clone());
        let mut view = ks.lock_keys(&["k"]);
        view.block_on(0, b"k", &a);
        view.block_on(0, b"k", &a);
        view.block_on(0, b"k", &b);
        // A change in another database wakes nobody.
        view.set(1, b"k", s("v"), None);
        view.signal_modified(1, b"k");
        assert_eq!((wakes(&first), wakes(&second)), (0, 0));
        // A change of the key: only the first in line is woken, once per view.
        view.set(0, b"k", s("v"), None);
        view.signal_modified(0, b"k");
        view.signal_modified(0, b"k");
        assert_eq!((wakes(&first), wakes(&second)), (1, 0));
        assert_eq!(view.woken.len(), 1);
        // The first one could not use it: the next gets its turn; then it leaves.
        view.woken.clear();
        view.pass_on(0, b"k", &a);
        assert_eq!((wakes(&first), wakes(&second)), (1, 1));
        view.woken.clear();
        view.unblock_from(0, b"k", &a);
        assert_eq!(
            wakes(&second),
            2,
            "the new head is woken while the key holds something"
        );
        view.unblock_from(0, b"k", &b);
        drop(view);
        assert!(ks.shards.iter().all(|s| s.0.lock().blocked.is_empty()));
        // A waiter that went away is skipped.
        let mut view = ks.lock_keys(&["k"]);
        let gone: Arc<dyn KeyWaiter> = Arc::new(CountingWaiter::default());
        view.block_on(0, b"k", &gone);
        view.block_on(0, b"k", &b);
        drop(gone);
        view.signal_modified(0, b"k");
        assert_eq!(wakes(&second), 3);
    }

    #[test]
    fn changes_are_recorded_only_while_tracking() {
        let ks = Keyspace::new(2, 4);
        let mut view = ks.lock_all();
        view.set(0, b"k", s("v"), None);
        view.signal_modified(0, b"k");
        view.flush_db(1);
        assert!(view.tracked.is_empty(), "nobody tracks: nothing recorded");
        drop(view);
        ks.set_tracking(true);
        let mut view = ks.lock_all();
        view.set(1, b"k", s("v"), None);
        view.signal_modified(1, b"k");
        assert_eq!(
            view.tracked.as_slice(),
            [Tracked::Key {
                db: 1,
                key: b"k"[..].into(),
                expired: false
            }]
        );
        let deadline = Deadline::after(view.now(), 5);
        view.set(0, b"gone", s("v"), deadline);
        drop(view);
        ks.clock().advance(10);
        let mut view = ks.lock_all();
        assert!(view.get(0, b"gone").is_none());
        view.flush_db(0);
        view.flush_db(1);
        let key = |db: usize, key: &[u8], expired: bool| Tracked::Key {
            db,
            key: key.into(),
            expired,
        };
        assert_eq!(
            view.tracked.as_slice(),
            [key(0, b"gone", true), Tracked::Flush]
        );
        drop(view);
        ks.set_tracking(false);
    }

    #[test]
    #[should_panic(expected = "would deadlock")]
    fn a_second_view_on_one_thread_is_refused() {
        let ks = Keyspace::new(1, 4);
        let _held = ks.lock_keys(&["a"]);
        let _again = ks.lock_all();
    }

    #[test]
    fn expired_key_is_gone_at_lookup() {
        let ks = Keyspace::new(1, 1);
        let mut view = ks.lock_all();
        let deadline = Deadline::after(view.now(), 5);
        view.set(0, b"k", s("v"), deadline);
        drop(view);
        ks.clock().advance(10);
        let mut view = ks.lock_all();
        assert!(view.get(0, b"k").is_none());
        assert_eq!(view.effects.expired, 1);
        assert_eq!(view.db_len(0), 0);
    }

    #[test]
    fn a_hold_keeps_passed_keys_until_it_ends() {
        let ks = Keyspace::new(1, 1);
        let mut view = ks.lock_all();
        let deadline = Deadline::after(view.now(), 5);
        view.set(0, b"k", s("v"), deadline);
        view.set(0, b"gone", s("v"), deadline);
        drop(view);
        ks.clock().advance(10);
        let until = Tick::from_nanos(Tick::now().as_nanos() + 60_000_000_000);
        ks.hold_expiry(Some(until));
        ks.set_loading(true);
        ks.set_loading(false);
        assert!(
            ks.expiry_held_at(Tick::now()),
            "loading leaves the hold alone"
        );
        {
            let mut view = ks.lock_all();
            assert!(view.get(0, b"k").is_none(), "a passed key reads as missing");
            assert!(!view.exists(0, b"k"));
            assert!(view.remove(0, b"gone").is_none());
            assert_eq!(view.effects.expired, 0);
            assert_eq!(view.effects.misses, 1);
            assert!(view.expired_keys.is_empty());
            assert_eq!(view.db_len(0), 2, "both stay");
        }
        let (removed, swept) = ks.sweep_shard(0, 16, &mut |_| {});
        assert!(removed.is_empty());
        assert_eq!(swept.examined, 0, "the active expiry does nothing");
        ks.hold_expiry(None);
        let mut view = ks.lock_all();
        assert!(view.get(0, b"k").is_none());
        assert_eq!(view.effects.expired, 1);
        assert_eq!(view.db_len(0), 1);
    }
}
