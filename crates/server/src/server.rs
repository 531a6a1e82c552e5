//! The state every connection shares: keyspace, configuration, clients, statistics.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use bytes::Bytes;
use latch_keyspace::Keyspace;
use parking_lot::Mutex;
use tokio::sync::{broadcast, Notify};

use crate::client::Registry;
use crate::config::Config;
use crate::scripting::Scripting;
use crate::stats::{SlowLog, Stats};
use crate::table::table;

/// Lines a MONITOR client may fall behind before it misses some.
const MONITOR_BACKLOG: usize = 4096;

pub struct Server {
    pub keyspace: Keyspace,
    pub config: Config,
    pub clients: Registry,
    pub stats: Stats,
    pub slowlog: Mutex<SlowLog>,
    pub latency: Mutex<crate::commands::server::LatencyMonitor>,
    /// A random 40-character id for this run (INFO server run_id).
    pub run_id: String,
    pub started: Instant,
    pub started_unix_s: i64,
    pub active_expire: AtomicBool,
    /// DEBUG SET-SKIP-CHECKSUM-VALIDATION: RESTORE does not check payloads' CRC.
    pub skip_checksum_validation: AtomicBool,
    /// DEBUG SET-DISABLE-DENY-SCRIPTS: scripts may call commands flagged `noscript`.
    pub script_disable_deny_script: AtomicBool,
    /// Last time the stats were reset, for INFO.
    pub monitor_feed: broadcast::Sender<Bytes>,
    /// Pub/sub channels and patterns and their subscribers.
    pub pubsub: crate::pubsub::Hub,
    /// Client-side caching: tracking clients, the keys they hold, BCAST prefixes.
    pub tracking: crate::tracking::Tracking,
    pub shutdown_requested: AtomicBool,
    /// A signal's shutdown waiting for the cron (`shutdown::on_signal`), 0 for none.
    pub shutdown_asap: std::sync::atomic::AtomicU8,
    /// DEBUG PAUSE-CRON: the cron does nothing while set.
    pub cron_paused: AtomicBool,
    /// The TCP accept loops (replaced by CONFIG SET port / bind).
    pub listeners: crate::net::Listeners,
    pub shutdown: Notify,
    /// The Lua VM, the script cache and the state of the running script.
    pub scripting: Scripting,
    /// CLIENT PAUSE: whether commands are held, and the connections waiting for its end.
    pub pause: crate::pause::Pause,
    /// Users and their permissions.
    pub acl: crate::acl::Acl,
    /// ACL LOG: recent refusals and failed logins.
    pub acl_log: crate::acl_log::AclLog,
    /// The AOF and RDB snapshots (and the replication stream, fed beside the AOF).
    pub persistence: crate::persistence::Persistence,
    /// Replicas attached to this server, and its own primary when it is a replica.
    pub replication: crate::replication::Replication,
    /// What INFO locks reports of the native locks.
    pub lock_stats: crate::lock_stats::LockStats,
    /// Holders told when their lock runs out (LOCK.ACQUIRE ... NOTIFY).
    pub lock_watches: crate::lock_watch::LockWatches,
    /// Eviction that goes on between commands once a call ran out of time.
    pub evictor: crate::evict::Evictor,
    /// Open connections to MIGRATE's targets.
    pub migrate_sockets: crate::commands::keys::migrate::MigrateSockets,
    /// This server's own `Arc`, for background work started by a command (BGSAVE...).
    self_ref: std::sync::OnceLock<std::sync::Weak<Server>>,
}

impl Server {
    /// Evicts as the policy allows (`crate::evict`) and says whether the server is still
    /// over `maxmemory` with nothing it may evict: commands that may grow memory get OOM.
    pub fn out_of_memory(&self) -> bool {
        crate::evict::perform(self) == crate::evict::Outcome::Failed
    }

    /// Whether writes may go ahead under `min-replicas-to-write`: enough replicas
    /// acknowledged within `min-replicas-max-lag` seconds (a replica never refuses its
    /// primary's stream this way; the gatekeeper lets the primary's link through).
    pub fn enough_replicas(&self) -> bool {
        let (to_write, max_lag) = self.config.min_replicas();
        to_write == 0
            || max_lag == 0
            || self.replication.is_replica()
            || self.replication.good_replicas(max_lag) >= to_write
    }

    /// CONFIG REWRITE: the options in force, and the users unless an ACL file holds them.
    pub fn rewrite_config(&self, force_all: bool) -> Result<(), String> {
        let acl_file = self.config.get("aclfile").unwrap_or_default();
        let users = acl_file
            .is_empty()
            .then(|| crate::acl::file::user_lines(&self.acl));
        self.config.rewrite(force_all, users)
    }

    pub fn new(config: Config) -> Server {
        let acl = crate::acl::Acl::new(config.requirepass().as_deref());
        let databases = config.databases();
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let shards = (threads * 128).clamp(256, 1024);
        let keyspace = Keyspace::new(databases, shards);
        keyspace.set_long_wait(wait_beside_runtime);
        latch_keyspace::lazyfree::set_after_free(crate::jemalloc::flush_thread_cache);
        latch_keyspace::lazyfree::set_on_start(crate::jemalloc::register_thread);
        let now = keyspace.clock().now();
        let (monitor_feed, _) = broadcast::channel(MONITOR_BACKLOG);
        let pubsub = crate::pubsub::Hub::new();
        pubsub.set_notify_flags(config.notify_keyspace_events());
        Server {
            keyspace,
            config,
            clients: Registry::new(),
            stats: Stats::new(table().len()),
            slowlog: Mutex::new(SlowLog::default()),
            latency: Mutex::new(Default::default()),
            run_id: random_hex(40),
            started: Instant::now(),
            started_unix_s: now.wall_s(),
            active_expire: AtomicBool::new(true),
            skip_checksum_validation: AtomicBool::new(false),
            script_disable_deny_script: AtomicBool::new(false),
            monitor_feed,
            pubsub,
            tracking: crate::tracking::Tracking::new(),
            shutdown_requested: AtomicBool::new(false),
            shutdown_asap: std::sync::atomic::AtomicU8::new(0),
            cron_paused: AtomicBool::new(false),
            listeners: crate::net::Listeners::default(),
            shutdown: Notify::new(),
            scripting: Scripting::new(),
            pause: crate::pause::Pause::new(),
            acl,
            acl_log: Default::default(),
            persistence: crate::persistence::Persistence::new(),
            replication: crate::replication::Replication::new(),
            lock_stats: crate::lock_stats::LockStats::default(),
            lock_watches: crate::lock_watch::LockWatches::default(),
            evictor: Default::default(),
            migrate_sockets: Default::default(),
            self_ref: std::sync::OnceLock::new(),
        }
    }

    /// Wraps the server in its `Arc` and remembers it (see [`Server::arc`]).
    pub fn into_arc(self) -> std::sync::Arc<Server> {
        crate::evict::apply_policy(&self);
        let server = std::sync::Arc::new(self);
        let _ = server.self_ref.set(std::sync::Arc::downgrade(&server));
        server
    }

    /// The server's `Arc`, for work that outlives a command.
    pub fn arc(&self) -> Option<std::sync::Arc<Server>> {
        self.self_ref.get().and_then(std::sync::Weak::upgrade)
    }

    /// Asks the server to stop (SHUTDOWN, SIGTERM).
    pub fn request_shutdown(&self) {
        self.shutdown_requested.store(true, Ordering::SeqCst);
        self.listeners.refuse_connections();
        self.shutdown.notify_waiters();
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutdown_requested.load(Ordering::SeqCst)
    }

    pub fn uptime_s(&self) -> u64 {
        self.started.elapsed().as_secs()
    }
}

/// Runs work that may hold this thread for long (a script, or a wait for a shard a script
/// holds): on a runtime worker, tokio first hands the worker's queued connections (and the
/// accept loop, if it is among them) to another thread, so none of them is stuck behind it.
pub fn beside_runtime<R>(work: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

/// For work already under way on a runtime worker that turns out to be long (a script past
/// a hook tick): hands this worker's place in the runtime (its queued connections and the
/// I/O driver) to another thread, tokio's `block_in_place`, so that connections keep being
/// served, BUSY answered and SCRIPT KILL heard, even with a single worker. The thread goes
/// on with the script outside the pool.
///
/// `block_in_place` takes the place back when its closure returns if the new thread has not
/// taken it yet, and a thread woken from tokio's blocking pool needs tens of microseconds
/// (more on a loaded machine): a closure that returned at once kept the place nearly every
/// time, and a script calling `redis.call` in a loop (few hook ticks a second) went unkilled
/// for up to minutes. So the closure waits until a task spawned now has run, which with one
/// worker means the new thread has the place, for at most [`HANDOFF_WAIT`]. True when that
/// was seen (or there is no runtime to leave): the caller need not step aside again this
/// run. False when the wait ran out: the caller tries again at its next tick.
pub fn step_aside_from_runtime() -> bool {
    use tokio::runtime::{Handle, RuntimeFlavor};
    let handle = match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => handle,
        _ => return true,
    };
    tokio::task::block_in_place(|| {
        let (ran, heard) = std::sync::mpsc::sync_channel(1);
        handle.spawn(async move {
            let _ = ran.send(());
        });
        heard.recv_timeout(HANDOFF_WAIT).is_ok()
    })
}

/// The longest a script waits at one hook tick for its worker's place to be taken.
const HANDOFF_WAIT: std::time::Duration = std::time::Duration::from_millis(10);

/// The keyspace's `LongWait`.
fn wait_beside_runtime(wait: &mut dyn FnMut()) {
    beside_runtime(wait)
}

pub fn random_hex(len: usize) -> String {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    (0..len)
        .map(|_| char::from_digit(rng.gen_range(0..16), 16).unwrap_or('0'))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// With one worker, a task that steps aside and then spins (as a script does, never
    /// yielding) must leave the runtime running another task. Fresh runtimes each round:
    /// the first handoff needs a new thread, which is when a lost handoff was likeliest.
    #[test]
    fn a_task_that_steps_aside_leaves_the_runtime_running() {
        for _ in 0..20 {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .build()
                .unwrap();
            runtime.block_on(async {
                let spinner = tokio::spawn(async {
                    assert!(super::step_aside_from_runtime());
                    let other_ran = Arc::new(AtomicBool::new(false));
                    let flag = Arc::clone(&other_ran);
                    tokio::spawn(async move { flag.store(true, Ordering::Release) });
                    let started = Instant::now();
                    while !other_ran.load(Ordering::Acquire) {
                        assert!(
                            started.elapsed() < Duration::from_secs(5),
                            "the runtime stood still behind a spinning task"
                        );
                        std::hint::spin_loop();
                    }
                });
                spinner.await.unwrap();
            });
        }
    }
}
