//! Persistence: the append-only file and RDB snapshots, in Redis 7.0's formats
//! (`latch-persist` holds the formats; this module decides when to write and fsync).
//!
//! - [`aof`]: the running log (append under the shard locks, write before replying, fsync
//!   by policy with group commit).
//! - [`aofdir`]: the AOF directory (manifest, base and incremental files): opening it at
//!   start, and rewriting it (BGREWRITEAOF) without stopping clients.
//! - [`snapshot`]: writing a snapshot (SAVE, BGSAVE, an AOF base) from a consistent cut,
//!   and loading an RDB file.
//! - [`replay`]: loading AOF command files through the gatekeeper.
//!
//! What a command logs: the gatekeeper collects, per keyspace view, the commands that
//! changed something (or what their handler said to log instead, `Ctx::propagate`), and
//! [`Persistence::commit`] appends them before the view's locks are released.

pub mod aof;
pub mod aof_base;
pub mod aofdir;
pub mod replay;
pub mod snapshot;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tracing::{info, warn};

use crate::client::Client;
use crate::server::Server;
use aof::{AofLog, Fsync};

/// Loads under way (an RDB file or payload, an AOF file): while there is one, clients'
/// commands without the `loading` flag get LOADING, as in Redis (INFO `loading:1`).
static LOADING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Whether a data set is being loaded.
pub fn is_loading() -> bool {
    LOADING.load(Ordering::Acquire) > 0
}

/// Set while the start-up load runs: the only load during which an RDB hands its shards
/// to waiting commands (`snapshot::load_rdb`). During a DEBUG LOADAOF or a replica's
/// sync, a command that passed the LOADING check just before the load began may be
/// waiting for a shard: it must run after the load, not in the middle of it.
static STARTING: AtomicBool = AtomicBool::new(false);

pub(crate) fn is_starting() -> bool {
    STARTING.load(Ordering::Acquire)
}

/// Marks the start-up load as begun (before the listeners start: see [`start_serves`]).
pub(crate) fn begin_starting() {
    STARTING.store(true, Ordering::Release);
}

/// Marks the start-up load as over, once nothing says LOADING any more.
pub(crate) fn end_starting() {
    STARTING.store(false, Ordering::Release);
}

/// Set once the start-up load first turns to the clients: after
/// `loading-process-events-interval-bytes` of an RDB, or 1,024 commands of an AOF, as
/// Redis first serves events while it loads. Until then clients' commands wait for it
/// (an empty or small data set loads before anyone sees LOADING, as with redis-server).
static START_SERVES: AtomicBool = AtomicBool::new(false);

pub(crate) fn start_serves() {
    START_SERVES.store(true, Ordering::Release);
}

/// Whether clients' commands must wait: the start-up load runs and has not yet turned to
/// the clients.
pub fn start_holds_clients() -> bool {
    STARTING.load(Ordering::Acquire) && !START_SERVES.load(Ordering::Acquire)
}

/// Waits while [`start_holds_clients`].
pub async fn until_start_serves() {
    while start_holds_clients() {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
}

/// Marks a load for as long as it lives.
pub(crate) struct Loading(());

impl Loading {
    pub(crate) fn start() -> Loading {
        LOADING.fetch_add(1, Ordering::AcqRel);
        Loading(())
    }
}

impl Drop for Loading {
    fn drop(&mut self) {
        LOADING.fetch_sub(1, Ordering::AcqRel);
    }
}

pub struct Persistence {
    /// True while commands are logged: the AOF is on, or the replication stream is fed.
    logging: AtomicBool,
    aof: RwLock<Option<Arc<AofLog>>>,
    /// The replication stream and its backlog (`crate::replication`): fed at the same
    /// place as the AOF, under the same locks.
    pub feed: crate::replication::Feed,
    /// The AOF directory's state while the AOF is on.
    pub dir: Mutex<Option<aofdir::AofDir>>,
    /// The log offset where a restarted log continues, so that offsets never go back.
    next_offset: AtomicU64,
    /// One snapshot job at a time (a cut marks every shard; two would trip over each other).
    pub snapshot_job: Mutex<()>,
    pub bgsave_in_progress: AtomicBool,
    pub rewrite_in_progress: AtomicBool,
    pub rewrite_scheduled: AtomicBool,
    /// A BGSAVE asked for inside EXEC, started by the cron.
    pub bgsave_scheduled: AtomicBool,
    /// Background jobs' cuts (`total_forks`) and how long the last one took (µs).
    pub forks: AtomicU64,
    pub latest_fork_us: AtomicU64,
    pub last_bgsave_ok: AtomicBool,
    pub last_rewrite_ok: AtomicBool,
    pub last_bgsave_time_s: AtomicI64,
    pub last_rewrite_time_s: AtomicI64,
    pub saves: AtomicU64,
    pub rewrites: AtomicU64,
    /// The change counter covered by the last successful save.
    pub dirty_at_save: AtomicU64,
    /// Unix seconds the last save (or start-up) happened (LASTSAVE).
    pub last_save_unix_s: AtomicI64,
    /// Keys loaded, and keys found expired, by the last load.
    pub loaded_keys: AtomicU64,
    pub load_expired_keys: AtomicU64,
    /// Monotonic keyspace milliseconds until which writes are refused (`restart-delay`
    /// after an unclean shutdown); 0 for none.
    restart_delay_until_ms: AtomicU64,
    /// Whether this run found the previous one ended without a clean shutdown.
    pub unclean_start: AtomicBool,
}

/// Marks a running server in its `dir`: present at start means the last run did not shut
/// down cleanly (killed, crashed, power lost).
const RUNNING_MARKER: &str = "latch.running";

impl Default for Persistence {
    fn default() -> Self {
        Self::new()
    }
}

impl Persistence {
    pub fn new() -> Persistence {
        Persistence {
            logging: AtomicBool::new(false),
            aof: RwLock::new(None),
            feed: crate::replication::Feed::new(),
            dir: Mutex::new(None),
            next_offset: AtomicU64::new(1),
            snapshot_job: Mutex::new(()),
            bgsave_in_progress: AtomicBool::new(false),
            rewrite_in_progress: AtomicBool::new(false),
            rewrite_scheduled: AtomicBool::new(false),
            bgsave_scheduled: AtomicBool::new(false),
            forks: AtomicU64::new(0),
            latest_fork_us: AtomicU64::new(0),
            last_bgsave_ok: AtomicBool::new(true),
            last_rewrite_ok: AtomicBool::new(true),
            last_bgsave_time_s: AtomicI64::new(-1),
            last_rewrite_time_s: AtomicI64::new(-1),
            saves: AtomicU64::new(0),
            rewrites: AtomicU64::new(0),
            dirty_at_save: AtomicU64::new(0),
            last_save_unix_s: AtomicI64::new(0),
            loaded_keys: AtomicU64::new(0),
            load_expired_keys: AtomicU64::new(0),
            restart_delay_until_ms: AtomicU64::new(0),
            unclean_start: AtomicBool::new(false),
        }
    }

    /// Whether commands are being logged. One relaxed load: handlers ask it per write.
    pub fn is_logging(&self) -> bool {
        self.logging.load(Ordering::Relaxed)
    }

    /// Whether commits reach replicas (a primary with a backlog; a replica passes its
    /// primary's stream on instead).
    pub fn feeds_replicas(&self) -> bool {
        self.feed.takes_commits()
    }

    pub fn aof(&self) -> Option<Arc<AofLog>> {
        self.aof.read().clone()
    }

    /// Starts logging into an open log.
    pub(crate) fn attach(&self, log: Arc<AofLog>) {
        *self.aof.write() = Some(log);
        self.logging.store(true, Ordering::Release);
    }

    /// Stops feeding the replication stream and frees its backlog.
    pub fn stop_feed(&self) {
        self.feed.deactivate();
        self.logging
            .store(self.aof.read().is_some(), Ordering::Release);
    }

    /// Starts feeding the replication stream (a backlog of `backlog_size` bytes), if it
    /// is not fed yet.
    pub fn start_feed(&self, backlog_size: usize) {
        self.feed.activate(backlog_size);
        self.logging.store(true, Ordering::Release);
    }

    /// Stops logging: writes and syncs what is pending.
    pub(crate) fn detach(&self) {
        self.logging.store(self.feed.is_active(), Ordering::Release);
        let log = self.aof.write().take();
        if let Some(log) = log {
            log.stop();
            self.next_offset
                .store(log.appended() + 1, Ordering::Relaxed);
        }
    }

    pub(crate) fn next_offset(&self) -> u64 {
        self.next_offset.load(Ordering::Relaxed)
    }

    /// Appends what the client's commands under the current view changed, while the view
    /// still holds its locks. `atomic`: a transaction's or a script's effects, wrapped in
    /// MULTI/EXEC when there are several.
    pub fn commit(&self, client: &mut Client, atomic: bool) {
        if client.propagated.is_empty() {
            return;
        }
        if let Some(log) = self.aof.read().as_ref() {
            let offset = if client.propagated.iter().any(|entry| entry.replicas_only) {
                let for_aof: Vec<crate::client::Propagated> = client
                    .propagated
                    .iter()
                    .filter(|entry| !entry.replicas_only)
                    .cloned()
                    .collect();
                (!for_aof.is_empty()).then(|| log.append(&for_aof, atomic))
            } else {
                Some(log.append(&client.propagated, atomic))
            };
            if let Some(offset) = offset {
                client.durable_at = client.durable_at.max(offset);
            }
        }
        if self.feed.takes_commits() {
            client.repl_offset = if client.propagated.iter().any(|entry| entry.aof_only) {
                let for_replicas: Vec<crate::client::Propagated> = client
                    .propagated
                    .iter()
                    .filter(|entry| !entry.aof_only)
                    .cloned()
                    .collect();
                if for_replicas.is_empty() {
                    client.repl_offset
                } else {
                    self.feed.append(&for_replicas, atomic)
                }
            } else {
                self.feed.append(&client.propagated, atomic)
            };
        } else if let Some(bytes) = client.primary_bytes.take() {
            // A replica: its primary's bytes for this write, at the same point.
            self.feed.append_raw(&bytes, client.db);
        }
        client.propagated.clear();
    }

    /// Logs `DEL`s for keys the active expiry (or eviction) removed, in the AOF and the
    /// replication stream (called under their shard's lock).
    pub fn log_expired(&self, removed: &[(usize, Box<[u8]>)]) {
        if !self.is_logging() {
            return;
        }
        let entries: Vec<crate::client::Propagated> = removed
            .iter()
            .map(|(db, key)| crate::client::Propagated {
                db: *db,
                args: vec![
                    bytes::Bytes::from_static(b"DEL"),
                    bytes::Bytes::copy_from_slice(key),
                ],
                replicas_only: false,
                aof_only: false,
            })
            .collect();
        if let Some(log) = self.aof.read().as_ref() {
            log.append(&entries, false);
        }
        if self.feed.takes_commits() {
            self.feed.append(&entries, false);
        }
    }

    /// Before a connection sends replies: its logged writes are in the file, and with
    /// `appendfsync always` on disk. With one runtime worker the sync runs on it (there is
    /// no other core for the fsync thread to wait for the disk on; handing over costs two
    /// thread switches per sync); with several, the connection waits for the fsync thread
    /// while its worker serves others. Measured with `bench/compare.sh --persistence
    /// always`: pinned to one core, syncing on the worker took SET from 0.85x to about
    /// 1.0x redis-server and its CPU per request from 1.75x to 1.0x; unpinned, the fsync
    /// thread did better on most rows (SET 0.79-0.89x either way, SETNX 1.21x against
    /// 1.03-1.15x, MSET 1.36x against 0.94x).
    pub async fn before_reply(&self, client: &mut Client) {
        let offset = std::mem::take(&mut client.durable_at);
        if offset == 0 {
            return;
        }
        let Some(log) = self.aof() else {
            return;
        };
        let single_worker = on_single_worker();
        if single_worker && log.policy() == aof::Fsync::Always {
            // Every other connection with input this round runs (and appends) first, so
            // the first one back writes and syncs for all of them: one fsync per round, as
            // Redis syncs once before it sleeps. Without this each connection synced its
            // own command (pinned, 50 clients: 1.5-2.8x redis-server's p99 on the lock
            // rows).
            tokio::task::yield_now().await;
        }
        log.write_through(offset);
        if single_worker {
            log.sync_through(offset);
        } else {
            log.wait_synced(offset).await;
        }
    }

    pub fn set_fsync(&self, policy: &str) {
        if let Some(log) = self.aof() {
            log.set_policy(Fsync::from_name(policy));
        }
    }

    /// Milliseconds left of the `restart-delay` write refusal (0 once over).
    pub fn restart_delay_left_ms(&self, server: &Server) -> u64 {
        let until = self.restart_delay_until_ms.load(Ordering::Relaxed);
        if until == 0 {
            return 0;
        }
        let now = server.keyspace.clock().now().mono_ms;
        if now >= until {
            self.restart_delay_until_ms.store(0, Ordering::Relaxed);
            info!("restart-delay is over: writes are accepted");
            return 0;
        }
        until - now
    }

    /// Changes since the last successful save.
    pub fn changes_since_save(&self, server: &Server) -> u64 {
        server
            .keyspace
            .dirty()
            .saturating_sub(self.dirty_at_save.load(Ordering::Relaxed))
    }
}

/// Where a file of the server lives (`dir` is the process' working directory, as in Redis).
pub fn path_in_dir(name: &str) -> PathBuf {
    Path::new(name).to_path_buf()
}

/// Loads the data at start (the AOF when `appendonly yes`, else the RDB file), starts the
/// log, and arms `restart-delay` after an unclean shutdown.
pub fn start(server: &Arc<Server>) -> anyhow::Result<()> {
    let persistence = &server.persistence;
    let marker = path_in_dir(RUNNING_MARKER);
    let unclean = marker.exists();
    persistence.unclean_start.store(unclean, Ordering::Relaxed);
    let started = std::time::Instant::now();
    // One load from the clients' side, however many files it reads.
    let loading = Loading::start();
    STARTING.store(true, Ordering::Release);
    server.keyspace.set_loading(true);
    let loaded = if server.config.appendonly() {
        aofdir::open_at_start(server)
    } else {
        let rdb = path_in_dir(&server.config.dbfilename());
        if rdb.exists() {
            snapshot::load_rdb_file(server, &rdb).map(|loaded| {
                if let Some(repl) = loaded.repl {
                    crate::replication::continue_from_file(server, repl);
                }
            })
        } else {
            Ok(())
        }
    };
    server.keyspace.set_loading(false);
    drop(loading);
    loaded?;
    let keys = persistence.loaded_keys.load(Ordering::Relaxed);
    if keys > 0 {
        info!(
            "DB loaded from disk: {:.3} seconds ({keys} keys)",
            started.elapsed().as_secs_f64()
        );
    }
    persistence
        .dirty_at_save
        .store(server.keyspace.dirty(), Ordering::Relaxed);
    persistence
        .last_save_unix_s
        .store(server.keyspace.clock().now().wall_s(), Ordering::Relaxed);
    let delay_ms = server.config.restart_delay_ms();
    if unclean && delay_ms > 0 {
        let now = server.keyspace.clock().now().mono_ms;
        persistence
            .restart_delay_until_ms
            .store(now + delay_ms, Ordering::Relaxed);
        warn!(
            delay_ms,
            "the last run did not shut down cleanly: refusing writes for restart-delay"
        );
    }
    if let Err(error) = std::fs::write(&marker, std::process::id().to_string()) {
        warn!(%error, "could not write the running marker in dir");
    }
    Ok(())
}

/// Whether this thread is the only worker of its runtime (or not on a runtime at all).
fn on_single_worker() -> bool {
    crate::net::with_runtime(|handle| handle.metrics().num_workers() == 1).unwrap_or(true)
}

/// At exit (the final snapshot, if any, is written by `shutdown::prepare`): the log
/// written and synced, and the running marker removed.
pub fn shut_down(server: &Arc<Server>) {
    server.persistence.detach();
    let _ = std::fs::remove_file(path_in_dir(RUNNING_MARKER));
}

/// Background duties at `hz`: save points and automatic AOF rewrites.
pub fn cron(server: &Arc<Server>) {
    let persistence = &server.persistence;
    if server.is_shutting_down() {
        return;
    }
    let now_s = server.keyspace.clock().now().wall_s();
    if !persistence.bgsave_in_progress.load(Ordering::Relaxed)
        && !persistence.rewrite_in_progress.load(Ordering::Relaxed)
    {
        let changes = persistence.changes_since_save(server);
        let since_s = now_s - persistence.last_save_unix_s.load(Ordering::Relaxed);
        let due = server
            .config
            .save_params()
            .iter()
            .any(|&(seconds, min_changes)| changes >= min_changes as u64 && since_s >= seconds);
        if due && changes > 0 {
            info!("{changes} changes in {since_s} seconds. Saving...");
            snapshot::bgsave(server);
        }
    }
    if persistence.bgsave_scheduled.load(Ordering::Relaxed)
        && !persistence.bgsave_in_progress.load(Ordering::Relaxed)
    {
        persistence.bgsave_scheduled.store(false, Ordering::Relaxed);
        snapshot::bgsave(server);
    }
    if persistence.rewrite_scheduled.load(Ordering::Relaxed)
        && !persistence.rewrite_in_progress.load(Ordering::Relaxed)
        && !persistence.bgsave_in_progress.load(Ordering::Relaxed)
    {
        persistence
            .rewrite_scheduled
            .store(false, Ordering::Relaxed);
        aofdir::rewrite_in_background(server);
    }
    if let Some(log) = persistence.aof() {
        let percentage = server.config.get_i64("auto-aof-rewrite-percentage");
        let min_size = server.config.get_i64("auto-aof-rewrite-min-size").max(0) as u64;
        let base = log.base_size.load(Ordering::Relaxed).max(1);
        let size = log.current_size() + base;
        if percentage > 0
            && size >= min_size
            && (size - base) * 100 / base >= percentage as u64
            && !persistence.rewrite_in_progress.load(Ordering::Relaxed)
        {
            info!(size, "starting automatic rewriting of the AOF");
            aofdir::rewrite_in_background(server);
        }
    }
    persistence.restart_delay_left_ms(server);
}
