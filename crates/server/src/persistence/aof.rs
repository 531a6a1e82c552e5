//! The append-only log while the server runs: a buffer commands are appended to (under
//! their shard locks, so the log's order agrees with the order writes took effect), a file
//! the buffer is drained into, and an fsync thread.
//!
//! - **Append** (`append`): encodes the commands into the buffer, with a `SELECT` when the
//!   database changes, and returns the log offset just past them.
//! - **Write** (`write_through`): before a connection sends replies, it drains the buffer
//!   into the file itself if nobody has yet (one `write` for every command appended so far:
//!   whoever comes first writes for everyone). As in Redis, a write is in the file (the
//!   page cache) before it is acknowledged, whatever `appendfsync` says, so a killed process
//!   loses nothing it acknowledged.
//! - **Fsync**: with `always`, a connection's writes are on disk before it replies, and one
//!   sync covers everything written so far, so writers of one round share it (group
//!   commit). With a single worker the connection syncs on it (`sync_through`), as Redis
//!   syncs before it writes a round's replies; with several it waits (without holding its
//!   worker) for the fsync thread (`wait_synced`). With `everysec` the thread syncs once a
//!   second, with `no` never.
//! - **Rotation** (`rotate`): a rewrite switches the log to a new file at one point of the
//!   command stream (under every shard lock), so the new base snapshot plus the new file are
//!   exactly the data.

use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};
use tokio::sync::watch;
use tracing::warn;

use crate::client::Propagated;

/// DEBUG AOF-FLUSH-SLEEP's wait before each write of the buffer, in microseconds.
static FLUSH_SLEEP_US: AtomicU64 = AtomicU64::new(0);
/// `appendfsync`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Fsync {
    Always = 0,
    EverySec = 1,
    No = 2,
}

impl Fsync {
    pub fn from_name(name: &str) -> Fsync {
        match name {
            "always" => Fsync::Always,
            "no" => Fsync::No,
            _ => Fsync::EverySec,
        }
    }

    fn from_u8(value: u8) -> Fsync {
        match value {
            0 => Fsync::Always,
            2 => Fsync::No,
            _ => Fsync::EverySec,
        }
    }
}

/// `aof-timestamp-enabled`: a `#TS:<unix seconds>` line goes before the first command of
/// each second (process-wide, as the option is; CONFIG SET changes it at once).
static TIMESTAMPS: AtomicBool = AtomicBool::new(false);

pub fn set_timestamps(on: bool) {
    TIMESTAMPS.store(on, Ordering::Relaxed);
}

pub fn timestamps_enabled() -> bool {
    TIMESTAMPS.load(Ordering::Relaxed)
}

/// The annotation Redis writes (and `redis-check-aof --truncate-to-timestamp` reads).
pub fn timestamp_line(unix_s: u64) -> String {
    format!("#TS:{unix_s}\r\n")
}

pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

/// Commands appended but not yet written.
struct Pending {
    buffer: Vec<u8>,
    /// The database the log's last `SELECT` chose (none yet in this file).
    db: Option<usize>,
    /// Bytes ever appended (over every file): the log offset.
    appended: u64,
    /// The second of the last `#TS:` annotation (kept across files, as Redis keeps it).
    annotated_s: u64,
}

/// The file being appended to.
struct Current {
    file: File,
    /// A second handle on the same file, for the fsync thread (which must not hold the
    /// lock while it syncs).
    sync_handle: Arc<File>,
    /// Bytes in this file.
    size: u64,
}

pub struct AofLog {
    pending: Mutex<Pending>,
    current: Mutex<Current>,
    /// Log offset written to the file (page cache).
    written: AtomicU64,
    /// Log offset known to be on disk.
    synced: watch::Sender<u64>,
    /// Held while a sync runs: one at a time, and the next finds what it covered.
    sync_turn: Mutex<()>,
    policy: AtomicU8,
    /// Wakes the fsync thread.
    sync_wanted: Mutex<bool>,
    sync_wake: Condvar,
    stopped: AtomicBool,
    /// False after a failed write or fsync (INFO `aof_last_write_status`).
    pub write_ok: AtomicBool,
    /// Size of the incremental file when it was opened plus the base's, for
    /// `auto-aof-rewrite-percentage`.
    pub base_size: AtomicU64,
}

impl AofLog {
    /// Starts logging into `file` (opened for append, `size` bytes long already); log
    /// offsets continue from `start_offset`.
    pub fn start(
        file: File,
        size: u64,
        policy: Fsync,
        base_size: u64,
        start_offset: u64,
    ) -> std::io::Result<Arc<AofLog>> {
        let sync_handle = Arc::new(file.try_clone()?);
        let log = Arc::new(AofLog {
            pending: Mutex::new(Pending {
                buffer: Vec::with_capacity(64 * 1024),
                db: None,
                appended: start_offset,
                annotated_s: 0,
            }),
            current: Mutex::new(Current {
                file,
                sync_handle,
                size,
            }),
            written: AtomicU64::new(start_offset),
            synced: watch::channel(start_offset).0,
            sync_turn: Mutex::new(()),
            policy: AtomicU8::new(policy as u8),
            sync_wanted: Mutex::new(false),
            sync_wake: Condvar::new(),
            stopped: AtomicBool::new(false),
            write_ok: AtomicBool::new(true),
            base_size: AtomicU64::new(base_size),
        });
        let worker = Arc::clone(&log);
        std::thread::Builder::new()
            .name("aof-fsync".into())
            .spawn(move || worker.fsync_loop())?;
        Ok(log)
    }

    pub fn policy(&self) -> Fsync {
        Fsync::from_u8(self.policy.load(Ordering::Relaxed))
    }

    pub fn set_policy(&self, policy: Fsync) {
        self.policy.store(policy as u8, Ordering::Relaxed);
        self.request_sync();
    }

    /// Appends a commit's commands ([`encode_entries`]). Returns the offset just past
    /// them.
    pub fn append(&self, entries: &[Propagated], atomic: bool) -> u64 {
        let mut pending = self.pending.lock();
        let Pending {
            buffer,
            db,
            appended,
            annotated_s,
        } = &mut *pending;
        let start = buffer.len();
        if timestamps_enabled() {
            let now = unix_now();
            if now > *annotated_s {
                *annotated_s = now;
                buffer.extend_from_slice(timestamp_line(now).as_bytes());
            }
        }
        encode_entries(buffer, db, entries, atomic);
        *appended += (buffer.len() - start) as u64;
        *appended
    }

    /// The offset appended so far.
    pub fn appended(&self) -> u64 {
        self.pending.lock().appended
    }

    /// DEBUG AOF-FLUSH-SLEEP: microseconds every write of the buffer waits first (0: none),
    /// for tests of what happens meanwhile.
    pub fn set_flush_sleep_us(us: u64) {
        FLUSH_SLEEP_US.store(us, Ordering::Relaxed);
    }

    /// Makes sure everything up to `offset` is in the file (not necessarily on disk).
    pub fn write_through(&self, offset: u64) {
        if self.written.load(Ordering::Acquire) >= offset {
            return;
        }
        let mut current = self.current.lock();
        self.drain_into(&mut current);
    }

    /// Writes the whole buffer into the current file. The caller holds `current`, which
    /// keeps drains in order.
    fn drain_into(&self, current: &mut Current) {
        let sleep_us = FLUSH_SLEEP_US.load(Ordering::Relaxed);
        if sleep_us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(sleep_us));
        }
        let (data, upto) = {
            let mut pending = self.pending.lock();
            if pending.buffer.is_empty() {
                return;
            }
            let data = std::mem::replace(&mut pending.buffer, Vec::with_capacity(64 * 1024));
            (data, pending.appended)
        };
        match current.file.write_all(&data) {
            Ok(()) => {
                current.size += data.len() as u64;
                self.written.store(upto, Ordering::Release);
            }
            Err(error) => {
                // Redis stops accepting writes after a failed AOF write; the status shows it
                // and the data stays in memory. Latch logs and reports it the same way.
                warn!(%error, "error writing to the append only file");
                self.write_ok.store(false, Ordering::Relaxed);
                self.written.store(upto, Ordering::Release);
            }
        }
    }

    /// Under `always`, makes sure `offset` is on disk, syncing on this thread if nobody has
    /// synced past it yet. Blocking is what Redis does (it syncs before it sleeps): handing
    /// the sync to the fsync thread and waiting for its word cost two thread switches and
    /// a sync per handful of writers (measured, pinned SET at 50 clients: CPU per request
    /// 13.6 µs against redis-server's 7.85; syncing here: 7.4-8.0 against 7.5-8.0).
    pub fn sync_through(&self, offset: u64) {
        if self.policy() != Fsync::Always || *self.synced.borrow() >= offset {
            return;
        }
        let turn = self.sync_turn.lock();
        // Another thread's sync, waited for just now, may have covered this offset.
        if *self.synced.borrow() < offset {
            self.sync_with_turn(&turn);
        }
    }

    /// Under `always`, waits (without holding a worker thread) until the fsync thread has
    /// synced past `offset`: the choice where workers have other cores to run on while the
    /// fsync thread waits for the disk (see `Persistence::before_reply`).
    pub async fn wait_synced(&self, offset: u64) {
        if self.policy() != Fsync::Always || *self.synced.borrow() >= offset {
            return;
        }
        let mut receiver = self.synced.subscribe();
        self.request_sync();
        let _ = receiver.wait_for(|synced| *synced >= offset).await;
    }

    fn request_sync(&self) {
        *self.sync_wanted.lock() = true;
        self.sync_wake.notify_one();
    }

    fn fsync_loop(&self) {
        let mut last_sync = Instant::now();
        loop {
            {
                let mut wanted = self.sync_wanted.lock();
                if !*wanted && !self.stopped.load(Ordering::Acquire) {
                    self.sync_wake
                        .wait_for(&mut wanted, Duration::from_millis(100));
                }
                *wanted = false;
            }
            let stopped = self.stopped.load(Ordering::Acquire);
            let policy = self.policy();
            let due = match policy {
                Fsync::Always => true,
                Fsync::EverySec => last_sync.elapsed() >= Duration::from_secs(1),
                Fsync::No => false,
            };
            if due || stopped {
                self.sync_now();
                last_sync = Instant::now();
            }
            if stopped {
                return;
            }
        }
    }

    /// Syncs what has been written so far and publishes the offset.
    pub fn sync_now(&self) {
        let turn = self.sync_turn.lock();
        self.sync_with_turn(&turn);
    }

    fn sync_with_turn(&self, _turn: &parking_lot::MutexGuard<'_, ()>) {
        let (handle, upto) = {
            let current = self.current.lock();
            (
                Arc::clone(&current.sync_handle),
                self.written.load(Ordering::Acquire),
            )
        };
        if *self.synced.borrow() >= upto {
            return;
        }
        if let Err(error) = handle.sync_data() {
            warn!(%error, "error syncing the append only file");
            self.write_ok.store(false, Ordering::Relaxed);
        }
        self.synced.send_if_modified(|synced| {
            let changed = *synced < upto;
            *synced = (*synced).max(upto);
            changed
        });
    }

    /// Switches to `file` at this point of the command stream: everything appended so far
    /// goes to the old file, everything after to the new one. Called with every shard
    /// locked (no append can come in between). Returns the old file's sync handle, to be
    /// synced before the old file is given up.
    pub fn rotate(&self, file: File) -> std::io::Result<Arc<File>> {
        let sync_handle = Arc::new(file.try_clone()?);
        let mut current = self.current.lock();
        self.drain_into(&mut current);
        let old = std::mem::replace(
            &mut *current,
            Current {
                file,
                sync_handle,
                size: 0,
            },
        );
        // The new file starts without a SELECT.
        self.pending.lock().db = None;
        Ok(old.sync_handle)
    }

    /// Bytes in the current incremental file.
    pub fn current_size(&self) -> u64 {
        self.current.lock().size
    }

    /// Writes and syncs everything, then stops the fsync thread.
    pub fn stop(&self) {
        {
            let mut current = self.current.lock();
            self.drain_into(&mut current);
        }
        self.sync_now();
        self.stopped.store(true, Ordering::Release);
        self.request_sync();
    }
}

/// Encodes a commit's entries as the AOF and the replication stream carry them: a `SELECT`
/// whenever the database differs from `db` (the stream's last one), and several entries of
/// one transaction or script (`atomic`) wrapped in MULTI/EXEC, so a torn tail never replays
/// half of one.
pub fn encode_entries(
    out: &mut Vec<u8>,
    db: &mut Option<usize>,
    entries: &[Propagated],
    atomic: bool,
) {
    let wrap = atomic && entries.len() > 1;
    if wrap {
        if let Some(first) = entries.first() {
            select(out, db, first.db);
        }
        encode(out, &[Bytes::from_static(b"MULTI")]);
    }
    for entry in entries {
        select(out, db, entry.db);
        encode(out, &entry.args);
    }
    if wrap {
        encode(out, &[Bytes::from_static(b"EXEC")]);
    }
}

fn select(out: &mut Vec<u8>, current: &mut Option<usize>, db: usize) {
    if *current != Some(db) {
        let mut number = itoa::Buffer::new();
        let db_arg = Bytes::copy_from_slice(number.format(db).as_bytes());
        encode(out, &[Bytes::from_static(b"SELECT"), db_arg]);
        *current = Some(db);
    }
}

fn encode(out: &mut Vec<u8>, args: &[Bytes]) {
    latch_persist::aof::encode_command(out, args);
}
