//! The sharded keyspace and the locked view commands run against.
//!
//! Keys are spread over a fixed number of shards by the top bits of their hash; each shard is
//! one mutex over that shard's slice of every database. A command locks the shards of the
//! keys it names (in ascending order, so two commands can never deadlock), runs, and unlocks:
//! commands on different keys run in parallel. A command that needs the whole keyspace
//! (FLUSHALL, KEYS, a transaction, a script) locks every shard, which makes it atomic.

use parking_lot::{Mutex, MutexGuard};

use crate::clock::{Clock, Deadline, Now};
use crate::table::{Found, Slot, Table};
use crate::value::{Entry, Value};

/// One shard: its part of every database.
#[derive(Debug)]
pub struct Shard {
    dbs: Box<[Table]>,
    /// Writes since the last snapshot (Redis' `dirty`), summed over shards when asked.
    dirty: u64,
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
}

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
}

impl Keyspace {
    /// `shard_count` is rounded up to a power of two (at least 1).
    pub fn new(num_dbs: usize, shard_count: usize) -> Keyspace {
        let shard_count = shard_count.max(1).next_power_of_two();
        let shard_bits = shard_count.trailing_zeros();
        let shards = (0..shard_count)
            .map(|_| {
                Padded(Mutex::new(Shard {
                    dbs: (0..num_dbs).map(|_| Table::new(shard_bits)).collect(),
                    dirty: 0,
                }))
            })
            .collect();
        Keyspace {
            shards,
            shard_bits,
            num_dbs,
            hasher: ahash::RandomState::new(),
            clock: Clock::new(),
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

    /// Locks the shards holding `keys` (any order, duplicates allowed).
    pub fn lock_keys<'a, K: AsRef<[u8]>>(&'a self, keys: &[K]) -> Locked<'a> {
        let guards = match keys {
            [] => Guards::None,
            [key] => {
                let shard = self.shard_of_key(key.as_ref());
                Guards::One(shard, self.shards[shard].0.lock())
            }
            _ => {
                let mut shards: Vec<usize> =
                    keys.iter().map(|k| self.shard_of_key(k.as_ref())).collect();
                shards.sort_unstable();
                shards.dedup();
                if shards.len() == 1 {
                    Guards::One(shards[0], self.shards[shards[0]].0.lock())
                } else {
                    Guards::Some(
                        shards
                            .into_iter()
                            .map(|s| (s, self.shards[s].0.lock()))
                            .collect(),
                    )
                }
            }
        };
        self.view(guards)
    }

    /// Locks every shard: the caller runs alone.
    pub fn lock_all(&self) -> Locked<'_> {
        self.view(Guards::All(
            self.shards.iter().map(|s| s.0.lock()).collect(),
        ))
    }

    /// A view that holds nothing, for commands that touch no key.
    pub fn lock_none(&self) -> Locked<'_> {
        self.view(Guards::None)
    }

    fn view<'a>(&'a self, guards: Guards<'a>) -> Locked<'a> {
        Locked {
            keyspace: self,
            guards,
            now: self.clock.now(),
            touch: true,
            effects: Effects::default(),
        }
    }

    /// Active expiry for one shard: removes passed keys from up to `max_segments` segments of
    /// each database. Returns `(db, key)` pairs removed.
    pub fn sweep_shard(&self, shard: usize, max_segments: usize) -> Vec<(usize, Box<[u8]>)> {
        let now = self.clock.now();
        let mut guard = self.shards[shard].0.lock();
        let mut removed = Vec::new();
        let mut keys = Vec::new();
        for (db, table) in guard.dbs.iter_mut().enumerate() {
            table.sweep_expired(now, max_segments, &mut keys);
            removed.extend(keys.drain(..).map(|k| (db, k)));
        }
        removed
    }

    /// Writes since the last snapshot, over all shards (locks them one at a time).
    pub fn dirty(&self) -> u64 {
        self.shards.iter().map(|s| s.0.lock().dirty).sum()
    }

    pub fn reset_dirty(&self) {
        for s in self.shards.iter() {
            s.0.lock().dirty = 0;
        }
    }
}

impl<'a> Locked<'a> {
    pub fn now(&self) -> Now {
        self.now
    }

    pub fn keyspace(&self) -> &'a Keyspace {
        self.keyspace
    }

    /// Whether this view holds every shard.
    pub fn holds_all(&self) -> bool {
        matches!(self.guards, Guards::All(_))
    }

    fn shard_mut(&mut self, shard: usize) -> &mut Shard {
        match &mut self.guards {
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

    fn table_mut(&mut self, db: usize, hash: u64) -> &mut Table {
        let shard = self.keyspace.shard_of_hash(hash);
        &mut self.shard_mut(shard).dbs[db]
    }

    fn access_stamp(&self) -> u32 {
        (self.now.mono_ms / 1000) as u32
    }

    /// The live entry under `key`, or `None`. A key past its deadline is removed on the way.
    /// Counts a hit or a miss and refreshes the access time unless `touch` is off.
    pub fn get(&mut self, db: usize, key: &[u8]) -> Option<&mut Entry> {
        let touch = self.touch;
        self.lookup(db, key, touch)
    }

    /// Like [`get`](Self::get) (hit/miss counted, passed key removed) but never refreshes the
    /// access time: Redis' `LOOKUP_NOTOUCH`, used by TYPE, TTL, EXISTS and OBJECT.
    pub fn get_untouched(&mut self, db: usize, key: &[u8]) -> Option<&mut Entry> {
        self.lookup(db, key, false)
    }

    fn lookup(&mut self, db: usize, key: &[u8], touch: bool) -> Option<&mut Entry> {
        let hash = self.keyspace.hash(key);
        let now = self.now;
        let stamp = self.access_stamp();
        let shard = self.keyspace.shard_of_hash(hash);
        // Split borrows: effects and guards are separate fields.
        let effects = &mut self.effects;
        let table = match &mut self.guards {
            Guards::All(all) => &mut all[shard].dbs[db],
            Guards::One(s, guard) if *s == shard => &mut guard.dbs[db],
            Guards::Some(list) => {
                let position = list
                    .iter()
                    .position(|(s, _)| *s == shard)
                    .expect("command touched a key whose shard it did not lock");
                &mut list[position].1.dbs[db]
            }
            _ => panic!("command touched a key whose shard it did not lock"),
        };
        match table.lookup(hash, key, now) {
            Found::Live(slot) => {
                effects.hits += 1;
                if touch {
                    slot.entry.access_s = stamp;
                }
                Some(&mut slot.entry)
            }
            Found::Expired => {
                effects.expired += 1;
                effects.misses += 1;
                None
            }
            Found::Missing => {
                effects.misses += 1;
                None
            }
        }
    }

    /// Whether a live key exists (removes it if its deadline passed), without counting a
    /// hit or miss or touching the access time.
    pub fn exists(&mut self, db: usize, key: &[u8]) -> bool {
        let saved = self.effects;
        let found = self.lookup(db, key, false).is_some();
        let expired = self.effects.expired;
        self.effects = Effects { expired, ..saved };
        found
    }

    /// Stores `value` under `key`, replacing what was there; the key gets `deadline`.
    /// Returns the entry it replaced (live or not yet swept).
    pub fn set(
        &mut self,
        db: usize,
        key: &[u8],
        value: Value,
        deadline: Option<Deadline>,
    ) -> Option<Entry> {
        let hash = self.keyspace.hash(key);
        let stamp = self.access_stamp();
        let table = self.table_mut(db, hash);
        table.insert(
            hash,
            key,
            Entry {
                value,
                deadline,
                access_s: stamp,
            },
        )
    }

    /// Inserts a whole entry (value, deadline and access time as given).
    pub fn put_entry(&mut self, db: usize, key: &[u8], entry: Entry) -> Option<Entry> {
        let hash = self.keyspace.hash(key);
        self.table_mut(db, hash).insert(hash, key, entry)
    }

    /// Removes a key; returns its entry when it was live.
    pub fn remove(&mut self, db: usize, key: &[u8]) -> Option<Entry> {
        let hash = self.keyspace.hash(key);
        let now = self.now;
        let slot = self.table_mut(db, hash).remove(hash, key)?;
        if slot.entry.deadline.is_some_and(|d| d.is_passed(now)) {
            self.effects.expired += 1;
            return None;
        }
        Some(slot.entry)
    }

    /// Changes a live key's deadline; false when there is no live key.
    pub fn set_deadline(&mut self, db: usize, key: &[u8], deadline: Option<Deadline>) -> bool {
        if !self.exists(db, key) {
            return false;
        }
        let hash = self.keyspace.hash(key);
        self.table_mut(db, hash).set_deadline(hash, key, deadline)
    }

    /// Records a change to `key` (for snapshots' change counter; later WATCH and notifications).
    pub fn signal_modified(&mut self, db: usize, key: &[u8]) {
        self.add_dirty(db, key, 1);
    }

    /// Adds `changes` to the write counter of the shard holding `key`.
    pub fn add_dirty(&mut self, _db: usize, key: &[u8], changes: u64) {
        let hash = self.keyspace.hash(key);
        let shard = self.keyspace.shard_of_hash(hash);
        self.shard_mut(shard).dirty += changes;
    }

    fn all(&mut self) -> &mut Vec<MutexGuard<'a, Shard>> {
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
        let mut removed = 0;
        for shard in self.all().iter_mut() {
            removed += shard.dbs[db].len();
            let shard_bits = shard_bits_of(shard);
            shard.dbs[db] = Table::new(shard_bits);
            shard.dirty += 1;
        }
        removed
    }

    /// Swaps two databases' contents. Needs every shard.
    pub fn swap_dbs(&mut self, a: usize, b: usize) {
        for shard in self.all().iter_mut() {
            shard.dbs.swap(a, b);
            shard.dirty += 1;
        }
    }

    /// Calls `visit` for every live key of `db` (in no particular order). Needs every shard.
    pub fn for_each_key(&mut self, db: usize, visit: &mut dyn FnMut(&Slot)) {
        let now = self.now;
        for shard in self.all().iter() {
            for slot in shard.dbs[db].iter() {
                if !slot.entry.deadline.is_some_and(|d| d.is_passed(now)) {
                    visit(slot);
                }
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
                if !slot.entry.deadline.is_some_and(|d| d.is_passed(now)) {
                    visit(slot);
                }
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

    /// A random live key of `db`. Needs every shard.
    pub fn random_key(&mut self, db: usize) -> Option<Vec<u8>> {
        use rand::Rng;
        let now = self.now;
        let mut rng = rand::thread_rng();
        let all = self.all();
        let total: usize = all.iter().map(|s| s.dbs[db].len()).sum();
        if total == 0 {
            return None;
        }
        // Try random picks first; if every key is past its deadline fall back to a full pass.
        for _ in 0..100 {
            let shard = rng.gen_range(0..all.len());
            let table = &all[shard].dbs[db];
            if table.is_empty() {
                continue;
            }
            if let Some(slot) = table.random(|n| rng.gen_range(0..n)) {
                if !slot.entry.deadline.is_some_and(|d| d.is_passed(now)) {
                    return Some(slot.key.to_vec());
                }
            }
        }
        all.iter()
            .flat_map(|s| s.dbs[db].iter())
            .find(|slot| !slot.entry.deadline.is_some_and(|d| d.is_passed(now)))
            .map(|slot| slot.key.to_vec())
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

fn shard_bits_of(shard: &Shard) -> u32 {
    // Every table of a shard was made with the keyspace's shard bits; a fresh one copies it.
    shard.dbs.first().map(|t| t.shard_bits()).unwrap_or(0)
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
        assert_eq!(
            view.get(0, b"k150").map(|e| e.value.clone()),
            Some(s("k150"))
        );
        assert!(view.remove(0, b"k1").is_some());
        assert!(view.get(0, b"k1").is_none());
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
                seen.insert(slot.key.to_vec());
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
        let stamp = view.get_untouched(0, b"k").map(|e| e.access_s);
        assert_eq!(stamp, Some(0));
        assert!(view.get_untouched(0, b"missing").is_none());
        assert_eq!((view.effects.hits, view.effects.misses), (1, 1));
        assert_eq!(view.get(0, b"k").map(|e| e.access_s), Some(5));
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
}
