//! Snapshots: SAVE, BGSAVE and AOF base files from a consistent cut of the keyspace, and
//! loading RDB files.
//!
//! A cut (`Locked::cut_snapshot`, under every shard lock for a moment) marks each shard;
//! whoever locks a marked shard first copies it, so the snapshot is exactly the state at
//! the cut while clients go on writing. The writer thread then takes the shards' copies
//! one at a time and serializes them, so at most a few shard copies live at once unless
//! writers race ahead of it.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;
use latch_keyspace::lfu;
use latch_keyspace::{Deadline, Snapshot};
use latch_persist::rdb::{Access, Item, Reader, Writer};
use tracing::{info, warn};

use super::path_in_dir;
use crate::server::Server;

/// What a cut captured besides the keys.
pub struct Cut {
    pub snapshot: Arc<Snapshot>,
    pub libraries: Vec<Bytes>,
    /// Where the replication stream was at the cut, if it is fed.
    pub repl: Option<ReplAux>,
}

/// Marks a consistent cut. `with_cut` runs under every shard lock too (the AOF rotation
/// of a rewrite happens there, at the same point of the command stream).
pub fn cut(server: &Server, with_cut: impl FnOnce()) -> Cut {
    let mut view = server.keyspace.lock_all();
    with_cut();
    let snapshot = view.cut_snapshot();
    let libraries = server.scripting.library_codes.lock().clone();
    let repl = ReplAux::at_cut(server);
    drop(view);
    Cut {
        snapshot,
        libraries,
        repl,
    }
}

/// [`cut`] for a background job (BGSAVE, an AOF rewrite, a replica's full sync): Latch's
/// counterpart of Redis' fork, counted in INFO's `total_forks`, with the time the cut took
/// (every shard lock held) as `latest_fork_usec`.
pub fn cut_for_job(server: &Server, with_cut: impl FnOnce()) -> Cut {
    let started = std::time::Instant::now();
    let cut = cut(server, with_cut);
    let persistence = &server.persistence;
    persistence.forks.fetch_add(1, Ordering::Relaxed);
    persistence
        .latest_fork_us
        .store(started.elapsed().as_micros() as u64, Ordering::Relaxed);
    cut
}

/// Writes the cut as an RDB file at `path` (written to a temporary name beside it, synced,
/// then renamed over, so a crash never leaves half a file under the real name). `aof_base`:
/// the file is an AOF base (the `aof-base` aux field). Returns the file's size.
pub fn write_rdb(server: &Server, cut: &Cut, path: &Path, aof_base: bool) -> anyhow::Result<u64> {
    // The dump file's temporary name is Redis' (`temp-<pid>.rdb`: snapshots of it are
    // taken one at a time); an AOF base's has a random part.
    let temp = if aof_base {
        path.with_file_name(format!("temp-{}-{}.rdb", std::process::id(), rand_suffix()))
    } else {
        path.with_file_name(temp_rdb_name())
    };
    replace_via(&temp, path, write_rdb_to(server, cut, &temp, aof_base))
}

/// Renames a file just written (`written`: its size) at `temp` over `path` and syncs the
/// directory; removes `temp` when the write or the rename failed.
fn replace_via(temp: &Path, path: &Path, written: anyhow::Result<u64>) -> anyhow::Result<u64> {
    let renamed = written.and_then(|size| {
        std::fs::rename(temp, path)
            .with_context(|| format!("renaming {} to {}", temp.display(), path.display()))?;
        Ok(size)
    });
    match renamed {
        Ok(size) => {
            sync_dir(path);
            Ok(size)
        }
        Err(error) => {
            let _ = std::fs::remove_file(temp);
            Err(error)
        }
    }
}

/// Writes the cut as an AOF base at `path`: an RDB, or with `aof-use-rdb-preamble no`
/// the commands that rebuild it (`aof_base.rs`), by way of a temporary file as
/// [`write_rdb`] does. Returns the file's size.
pub fn write_aof_base(server: &Server, cut: &Cut, path: &Path) -> anyhow::Result<u64> {
    if rdb_preamble(server) {
        return write_rdb(server, cut, path, true);
    }
    let temp = path.with_file_name(format!(
        "temp-rewriteaof-{}-{}.aof",
        std::process::id(),
        rand_suffix()
    ));
    let written = write_synced(&temp, |out| {
        super::aof_base::write_commands_into(server, cut, out)
    });
    replace_via(&temp, path, written)
}

/// `aof-use-rdb-preamble`: whether an AOF base is an RDB (else commands).
pub fn rdb_preamble(server: &Server) -> bool {
    server.config.get_bool("aof-use-rdb-preamble")
}

/// Set by FLUSHALL while a BGSAVE runs: the save stops (as Redis kills its child) and
/// counts as neither a save nor a failure.
static BGSAVE_ABORT: AtomicBool = AtomicBool::new(false);

/// Set by CONFIG SET appendonly no while an AOF rewrite runs: it stops, as Redis kills
/// its child.
pub(crate) static REWRITE_ABORT: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The flag that stops this thread's snapshot, for a BGSAVE or an AOF rewrite.
    static ABORT: std::cell::Cell<Option<&'static AtomicBool>> = const { std::cell::Cell::new(None) };
}

/// Makes the snapshots this thread writes stop when `flag` is set.
pub(crate) fn stop_when(flag: &'static AtomicBool) {
    ABORT.set(Some(flag));
}

fn stopped() -> bool {
    ABORT.get().is_some_and(|flag| flag.load(Ordering::Relaxed))
}

/// The error of a snapshot stopped on purpose (a BGSAVE by FLUSHALL, a rewrite by
/// `appendonly no`).
#[derive(Debug)]
struct Aborted;

impl std::fmt::Display for Aborted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stopped")
    }
}

impl std::error::Error for Aborted {}

/// Whether `error` is a snapshot's that was stopped on purpose.
pub fn was_stopped(error: &anyhow::Error) -> bool {
    error.downcast_ref::<Aborted>().is_some()
}

/// FLUSHALL: stops the BGSAVE under way, if any.
pub fn abort_bgsave(server: &Server) {
    if server
        .persistence
        .bgsave_in_progress
        .load(Ordering::Acquire)
    {
        BGSAVE_ABORT.store(true, Ordering::Release);
    }
}

fn temp_rdb_name() -> String {
    format!("temp-{}.rdb", std::process::id())
}

/// Removes the dump being written, if any (an exit in the middle of a snapshot).
pub fn remove_temp_rdb() {
    let _ = std::fs::remove_file(path_in_dir(&temp_rdb_name()));
}

fn rand_suffix() -> u32 {
    rand::random::<u32>()
}

fn write_rdb_to(server: &Server, cut: &Cut, temp: &Path, aof_base: bool) -> anyhow::Result<u64> {
    write_synced(temp, |out| {
        write_rdb_into(
            server,
            cut,
            out,
            aof_base,
            // An AOF's base carries no replication fields, as in Redis.
            cut.repl.as_ref().filter(|_| !aof_base),
        )
    })
}

/// Creates `path`, lets `write` fill it through a buffer, syncs it; returns its size.
fn write_synced(
    path: &Path,
    write: impl FnOnce(BufWriter<File>) -> anyhow::Result<BufWriter<File>>,
) -> anyhow::Result<u64> {
    let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let buffered = write(BufWriter::with_capacity(256 * 1024, file))?;
    let file = buffered
        .into_inner()
        .map_err(|error| anyhow::anyhow!("writing {}: {}", path.display(), error.error()))?;
    file.sync_all()?;
    Ok(file.metadata()?.len())
}

/// What an RDB says of the replication stream it is a cut of (Redis' `repl-id`,
/// `repl-offset` and `repl-stream-db` aux fields): the history, the offset of the last
/// byte it holds, and the database the stream after it is in. A replica's full sync gets
/// one; so does a file saved while the stream is fed, so that a restarted replica can
/// continue from its file with a partial resync, and a restarted primary can continue
/// its replicas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplAux {
    pub replid: String,
    pub offset: u64,
    pub db: usize,
}

impl ReplAux {
    /// Read at a cut (under every shard lock): None when the stream is not fed.
    pub fn at_cut(server: &Server) -> Option<ReplAux> {
        let (offset, db) = server.persistence.feed.save_info()?;
        Some(ReplAux {
            replid: server.replication.ids().replid,
            offset,
            db,
        })
    }
}

/// The replication fields of a file being loaded, valid when all three came and none
/// is -1 (as Redis checks).
#[derive(Default)]
struct ReplFields {
    replid: Option<String>,
    offset: Option<i64>,
    db: Option<i64>,
}

impl ReplFields {
    fn take(&mut self, name: &[u8], value: &[u8]) {
        let number = || std::str::from_utf8(value).ok()?.parse::<i64>().ok();
        match name {
            b"repl-id" => self.replid = Some(String::from_utf8_lossy(value).into_owned()),
            b"repl-offset" => self.offset = number(),
            b"repl-stream-db" => self.db = number(),
            _ => {}
        }
    }

    fn valid(self) -> Option<ReplAux> {
        let replid = self.replid.filter(|id| id.len() == 40)?;
        let offset = u64::try_from(self.offset?).ok()?;
        let db = usize::try_from(self.db?).ok()?;
        Some(ReplAux { replid, offset, db })
    }
}

/// The auxiliary fields every RDB of Latch's starts with.
fn write_header<W: Write>(writer: &mut Writer<W>, now: latch_keyspace::Now) -> anyhow::Result<()> {
    let version = crate::commands::connection::REDIS_VERSION;
    writer.aux("redis-ver", version.as_bytes())?;
    writer.aux("redis-bits", b"64")?;
    writer.aux("ctime", now.wall_s().to_string().as_bytes())?;
    writer.aux(
        "used-mem",
        crate::commands::info::used_memory_now()
            .to_string()
            .as_bytes(),
    )?;
    Ok(())
}

/// An RDB without keys, holding the function libraries when `functions` (what a replica
/// that asked for `rdb-filter-only` gets).
pub fn filtered_rdb(server: &Server, functions: bool) -> anyhow::Result<Vec<u8>> {
    let mut writer = Writer::new(Vec::new())?;
    write_header(&mut writer, server.keyspace.clock().now())?;
    writer.aux("aof-base", b"0")?;
    if functions {
        for code in server.scripting.library_codes.lock().iter() {
            writer.function(code)?;
        }
    }
    Ok(writer.finish()?)
}

/// Serializes the cut as an RDB into `out`; returns `out` when done.
pub fn write_rdb_into<W: Write>(
    server: &Server,
    cut: &Cut,
    out: W,
    aof_base: bool,
    repl: Option<&ReplAux>,
) -> anyhow::Result<W> {
    let _held = crate::busy_poll::hold();
    let mut writer = Writer::new(out)?;
    let now = cut.snapshot.now;
    write_header(&mut writer, now)?;
    if let Some(repl) = repl {
        writer.aux("repl-stream-db", repl.db.to_string().as_bytes())?;
        writer.aux("repl-id", repl.replid.as_bytes())?;
        writer.aux("repl-offset", repl.offset.to_string().as_bytes())?;
    }
    writer.aux("aof-base", if aof_base { b"1" } else { b"0" })?;
    for code in &cut.libraries {
        writer.function(code)?;
    }
    let keeps = AccessKept::of(server);
    let mut selected = None;
    // Keys already past their deadline are written too, as Redis does: a primary that
    // loads the file drops them (INFO's rdb_last_load_keys_expired counts them), a
    // replica keeps them until its primary deletes them.
    each_key(server, cut, true, |db, slot, expire| {
        if selected != Some(db) {
            let (keys, expires) = cut.snapshot.sizes[db];
            writer.select_db(db as u64, keys as u64, expires as u64)?;
            selected = Some(db);
        }
        let access = keeps.access(slot.access_s(), now);
        writer.key_accessed(slot.key(), slot.value(), expire, access)?;
        Ok(())
    })?;
    Ok(writer.finish()?)
}

/// Calls `f` with every key of the cut (its database, its slot and its deadline in unix
/// milliseconds), those already past their deadline at the cut only `with_passed`, shard
/// by shard, yielding the core now and then and honouring `rdb-key-save-delay` and a stop
/// (see [`stop_when`]).
pub(super) fn each_key(
    server: &Server,
    cut: &Cut,
    with_passed: bool,
    mut f: impl FnMut(usize, &latch_keyspace::Slot, Option<i64>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    if cut.snapshot.sizes.iter().all(|&(keys, _)| keys == 0) {
        // Nothing to copy: the shards are not asked for (FLUSHALL saves while it holds
        // them all).
        return Ok(());
    }
    let now = cut.snapshot.now;
    let keyspace = &server.keyspace;
    // `rdb-key-save-delay` (for tests): microseconds to wait after each key; a negative
    // -N waits one microsecond after one key in N, as Redis' debugDelay.
    let key_delay = server.config.get_i64("rdb-key-save-delay");
    let mut turns = Turns::default();
    for shard in 0..keyspace.shard_count() {
        let Some(tables) = keyspace.snapshot_shard(&cut.snapshot, shard) else {
            anyhow::bail!("the snapshot lost shard {shard}'s copy");
        };
        for (db, table) in tables.iter().enumerate() {
            if table.is_empty() {
                continue;
            }
            for slot in table.iter() {
                let expire = match slot.deadline() {
                    Some(deadline) if !with_passed && deadline.is_passed(now) => continue,
                    Some(deadline) => Some(deadline.unix_ms(now)),
                    None => None,
                };
                f(db, slot, expire)?;
                if key_delay != 0 {
                    delay_after_key(key_delay);
                }
                if stopped() {
                    return Err(Aborted.into());
                }
                turns.tick();
            }
        }
    }
    Ok(())
}

/// Waits `delay` after a key (see `rdb-key-save-delay`), in steps short enough for a stop
/// to be seen soon.
fn delay_after_key(delay: i64) {
    let micros = if delay > 0 {
        delay as u64
    } else {
        u64::from(rand::random::<u64>().is_multiple_of(delay.unsigned_abs()))
    };
    let until = std::time::Instant::now() + std::time::Duration::from_micros(micros);
    while !stopped() {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(std::time::Duration::from_millis(10)));
    }
}

/// What of keys' accesses an RDB file keeps, as Redis decides it: the idle time under an
/// LRU policy, the LFU counter under an LFU one, nothing otherwise. A file loaded under
/// the same kind of policy gives keys back what they had.
#[derive(Clone, Copy, Debug)]
enum AccessKept {
    Nothing,
    Idle,
    Frequency { decay_minutes: u32 },
}

impl AccessKept {
    fn of(server: &Server) -> AccessKept {
        if let Some(params) = server.keyspace.lfu() {
            AccessKept::Frequency {
                decay_minutes: params.decay_minutes,
            }
        } else if server.config.maxmemory_policy_name().ends_with("-lru") {
            AccessKept::Idle
        } else {
            AccessKept::Nothing
        }
    }

    /// What to write for a key whose access field holds `field` (at `now`).
    fn access(self, field: u32, now: latch_keyspace::Now) -> Option<Access> {
        match self {
            AccessKept::Nothing => None,
            AccessKept::Idle => Some(Access::IdleSeconds(u64::from(
                now.access_s().saturating_sub(field),
            ))),
            AccessKept::Frequency { decay_minutes } => Some(Access::Frequency(lfu::decayed(
                field,
                lfu::minutes(now.wall_s()),
                decay_minutes,
            ))),
        }
    }

    /// The access field for a key loaded with `access` (None: accessed now), under the
    /// policy in force.
    fn field(self, access: Option<Access>, now: latch_keyspace::Now) -> Option<u32> {
        match (self, access?) {
            (AccessKept::Frequency { .. }, Access::Frequency(counter)) => {
                Some(lfu::pack(lfu::minutes(now.wall_s()), counter))
            }
            (AccessKept::Idle | AccessKept::Nothing, Access::IdleSeconds(idle)) => Some(
                now.access_s()
                    .saturating_sub(u32::try_from(idle).unwrap_or(u32::MAX)),
            ),
            _ => None,
        }
    }
}

/// Lets a request waiting for the core go first, every [`Turns::EVERY`] of serializing.
///
/// The serializer shares the cores with the runtime's workers. A worker woken by a request
/// while the serializer holds its core waits until the scheduler takes the core back, up
/// to a tick (4 ms) or more: `bench/replication.py` saw the primary's slowest PING during a
/// full sync at 12-31 ms (pinned to one core; redis-server's forked child, 6-8 ms). A
/// yield at short intervals hands the core to a runnable worker at once and costs a system
/// call when none is waiting; the scheduler still keeps the serializer's fair share when
/// the workers are busy, so a snapshot under load is not starved.
#[derive(Default)]
struct Turns {
    keys: u32,
    since: Option<std::time::Instant>,
}

impl Turns {
    const EVERY: std::time::Duration = std::time::Duration::from_micros(200);

    #[inline]
    fn tick(&mut self) {
        self.keys += 1;
        if !self.keys.is_multiple_of(32) {
            return;
        }
        let now = std::time::Instant::now();
        match self.since {
            Some(since) if now.duration_since(since) < Self::EVERY => {}
            _ => {
                std::thread::yield_now();
                self.since = Some(std::time::Instant::now());
            }
        }
    }
}

/// Syncs the directory holding `path`, so that a rename in it is durable.
pub fn sync_dir(path: &Path) {
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    if let Ok(dir) = File::open(dir) {
        let _ = dir.sync_all();
    }
}

/// FLUSHALL with save points configured: the emptied data set written now by the caller,
/// which holds every shard (so an old file cannot bring the flushed keys back at the next
/// start); an empty cut is written without asking for the shards. A snapshot already
/// being written is left alone, and this save skipped.
pub fn save_held(server: &Server, view: &mut latch_keyspace::Locked<'_>) -> anyhow::Result<()> {
    let Some(_job) = server.persistence.snapshot_job.try_lock() else {
        warn!("FLUSHALL: a background save is running; the emptied data set is not saved");
        return Ok(());
    };
    let cut = Cut {
        snapshot: view.cut_snapshot(),
        libraries: server.scripting.library_codes.lock().clone(),
        repl: ReplAux::at_cut(server),
    };
    finish_save(server, &cut)
}

/// SAVE (and the save at shutdown): a snapshot written now, by the caller.
pub fn save(server: &Server) -> anyhow::Result<()> {
    let _job = server.persistence.snapshot_job.lock();
    let cut = cut(server, || {});
    finish_save(server, &cut)
}

fn finish_save(server: &Server, cut: &Cut) -> anyhow::Result<()> {
    let persistence = &server.persistence;
    let path = path_in_dir(&server.config.dbfilename());
    let started = std::time::Instant::now();
    let result = write_rdb(server, cut, &path, false);
    persistence
        .last_bgsave_time_s
        .store(started.elapsed().as_secs() as i64, Ordering::Relaxed);
    match result {
        Ok(_) => {
            persistence
                .dirty_at_save
                .fetch_max(cut.snapshot.dirty, Ordering::Relaxed);
            persistence
                .last_save_unix_s
                .store(cut.snapshot.now.wall_s(), Ordering::Relaxed);
            persistence.saves.fetch_add(1, Ordering::Relaxed);
            persistence.last_bgsave_ok.store(true, Ordering::Relaxed);
            Ok(())
        }
        Err(error) => {
            if !was_stopped(&error) {
                persistence.last_bgsave_ok.store(false, Ordering::Relaxed);
            }
            Err(error)
        }
    }
}

/// BGSAVE: the cut is taken now (so the snapshot is the state when BGSAVE ran) and the
/// file is written by a thread. False when one is already running.
pub fn bgsave(server: &Arc<Server>) -> bool {
    let persistence = &server.persistence;
    if persistence.bgsave_in_progress.swap(true, Ordering::AcqRel) {
        return false;
    }
    BGSAVE_ABORT.store(false, Ordering::Release);
    let server = Arc::clone(server);
    let spawned = std::thread::Builder::new()
        .name("bgsave".into())
        .spawn(move || {
            stop_when(&BGSAVE_ABORT);
            let result = {
                let _job = server.persistence.snapshot_job.lock();
                let cut = cut_for_job(&server, || {});
                finish_save(&server, &cut)
            };
            match result {
                Ok(()) => info!("Background saving terminated with success"),
                Err(error) if was_stopped(&error) => {
                    warn!("Background saving stopped by FLUSHALL")
                }
                Err(error) => warn!("Background saving error: {error:#}"),
            }
            server
                .persistence
                .bgsave_in_progress
                .store(false, Ordering::Release);
        });
    if spawned.is_err() {
        persistence
            .bgsave_in_progress
            .store(false, Ordering::Release);
        persistence.last_bgsave_ok.store(false, Ordering::Relaxed);
        return false;
    }
    true
}

/// What loading an RDB found.
pub struct Loaded {
    /// Where the RDB ended in the data (an AOF preamble may be followed by commands).
    pub end: usize,
    pub keys: u64,
    /// Its replication fields, when it has valid ones.
    pub repl: Option<ReplAux>,
}

/// Loads an RDB file into the (empty) keyspace. Keys already expired are skipped, as a
/// Redis primary does.
pub fn load_rdb_file(server: &Server, path: &Path) -> anyhow::Result<Loaded> {
    let mut data = Vec::new();
    File::open(path)
        .and_then(|mut file| file.read_to_end(&mut data))
        .with_context(|| format!("reading {}", path.display()))?;
    load_rdb(server, &data, false)
        .with_context(|| format!("loading the RDB file {}", path.display()))
}

/// Loads RDB data; `keep_expired`: keys past their deadline are loaded too (a replica
/// loading its primary's data, which expires them itself and sends the `DEL`s).
pub fn load_rdb(server: &Server, data: &[u8], keep_expired: bool) -> anyhow::Result<Loaded> {
    let _loading = super::Loading::start();
    let mut view = server.keyspace.lock_all();
    let lets_others_in = super::is_starting();
    let (loaded, libraries) =
        load_rdb_locked(server, &mut view, data, keep_expired, true, lets_others_in)?;
    drop(view);
    load_libraries(server, &libraries, true)?;
    Ok(loaded)
}

/// DEBUG RELOAD: under one hold of every shard, empties the data set and its functions
/// (unless `flush` is false) and loads the RDB file `path`; `merge`: a key or library
/// the file has again replaces the one in memory, where otherwise it fails the load.
pub fn reload(server: &Server, path: &Path, flush: bool, merge: bool) -> anyhow::Result<Loaded> {
    let mut data = Vec::new();
    File::open(path)
        .and_then(|mut file| file.read_to_end(&mut data))
        .with_context(|| format!("reading {}", path.display()))?;
    if flush {
        crate::scripting::flush_functions(server);
    }
    let mut view = server.keyspace.lock_all();
    if flush {
        for db in 0..server.keyspace.num_dbs() {
            view.flush_db_freeing(db, true);
        }
    }
    let (loaded, libraries) = load_rdb_locked(server, &mut view, &data, false, merge, false)?;
    drop(view);
    load_libraries(server, &libraries, merge)?;
    Ok(loaded)
}

/// Reads RDB data into the held keyspace; the function libraries it holds are returned,
/// to be loaded once the shards are let go (a running script may wait for one of them).
/// `lets_others_in`: every `loading-process-events-interval-bytes` of the data, the shards
/// are handed to the commands waiting for them (a load on a thread of its own).
fn load_rdb_locked(
    server: &Server,
    view: &mut latch_keyspace::Locked<'_>,
    data: &[u8],
    keep_expired: bool,
    replace: bool,
    lets_others_in: bool,
) -> anyhow::Result<(Loaded, Vec<Bytes>)> {
    let mut reader = Reader::new(data)?;
    // `key-load-delay` (for tests): as `rdb-key-save-delay`, after each key read.
    let key_delay = server.config.get_i64("key-load-delay");
    let interval = server
        .config
        .get_i64("loading-process-events-interval-bytes")
        .max(1024) as u64;
    let mut next_turn = interval;
    let now = view.now();
    let keeps = AccessKept::of(server);
    let mut db = 0usize;
    let mut loaded = 0u64;
    let mut expired = 0u64;
    let mut empty_skipped = 0u64;
    let mut libraries = Vec::new();
    let mut repl = ReplFields::default();
    while let Some(item) = reader.next()? {
        if lets_others_in && reader.offset() >= next_turn {
            super::start_serves();
            view.let_others_in();
            next_turn = reader.offset() + interval;
        }
        if key_delay != 0 && matches!(item, Item::Key { .. }) {
            delay_after_key(key_delay);
        }
        match item {
            Item::SelectDb(number) => {
                db = usize::try_from(number).unwrap_or(usize::MAX);
                if db >= server.keyspace.num_dbs() {
                    anyhow::bail!(
                        "the file selects database {number}, but only {} are configured",
                        server.keyspace.num_dbs()
                    );
                }
            }
            Item::Key {
                key,
                value,
                expire_unix_ms,
                access,
            } => {
                let deadline = expire_unix_ms.map(Deadline::at_wall);
                if !keep_expired
                    && deadline.is_some_and(|d| {
                        d.is_passed(latch_keyspace::Now {
                            loading: false,
                            keep_passed: false,
                            ..now
                        })
                    })
                {
                    expired += 1;
                    continue;
                }
                if !replace && view.exists(db, &key) {
                    anyhow::bail!("Duplicate key '{}'", String::from_utf8_lossy(&key));
                }
                match keeps.field(access, now) {
                    Some(field) => {
                        let entry = latch_keyspace::Entry { value, deadline };
                        view.put_entry_accessed(db, &key, entry, field);
                    }
                    None => {
                        view.set(db, &key, value, deadline);
                    }
                }
                loaded += 1;
            }
            Item::Function(code) => libraries.push(Bytes::from(code)),
            Item::Aux { name, value } => repl.take(&name, &value),
            Item::ResizeDb { .. } => {}
            Item::EmptyKey(key) => {
                // As Redis: the first ten are named, all counted.
                if empty_skipped < 10 {
                    warn!(
                        "rdbLoadObject skipping empty key: {}",
                        String::from_utf8_lossy(&key)
                    );
                }
                empty_skipped += 1;
            }
        }
    }
    if empty_skipped > 0 {
        warn!("Done loading RDB, keys loaded: {loaded}, keys expired: {expired}, empty keys skipped: {empty_skipped}.");
    } else {
        info!("Done loading RDB, keys loaded: {loaded}, keys expired: {expired}.");
    }
    let end = reader.offset() as usize;
    let persistence = &server.persistence;
    // The last load's counts, as Redis' rdb_last_load_keys_loaded/expired.
    persistence.loaded_keys.store(loaded, Ordering::Relaxed);
    persistence
        .load_expired_keys
        .store(expired, Ordering::Relaxed);
    let loaded = Loaded {
        end,
        keys: loaded,
        repl: repl.valid(),
    };
    Ok((loaded, libraries))
}

/// Loads function libraries; `replace`: one of the same name as a loaded one replaces it
/// (otherwise that is an error).
fn load_libraries(server: &Server, libraries: &[Bytes], replace: bool) -> anyhow::Result<()> {
    if libraries.is_empty() {
        return Ok(());
    }
    let scripting = &server.scripting;
    while !scripting.try_claim() {
        std::thread::yield_now();
    }
    let result = scripting.with_function_engine(|engine| {
        for code in libraries {
            engine.load_library(code, replace).map_err(|message| {
                anyhow::anyhow!(String::from_utf8_lossy(&message).into_owned())
            })?;
        }
        let codes: Vec<Bytes> = engine
            .functions
            .libraries
            .values()
            .map(|library| library.code.clone())
            .collect();
        Ok::<_, anyhow::Error>((codes, engine.functions.function_count()))
    });
    scripting.release();
    let (codes, functions) = result?;
    let run = &scripting.run;
    run.library_count.store(codes.len(), Ordering::Relaxed);
    run.function_count.store(functions, Ordering::Relaxed);
    *scripting.library_codes.lock() = codes;
    Ok(())
}
