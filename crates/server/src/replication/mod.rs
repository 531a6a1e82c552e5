//! Replication in Redis 7.0's protocol, both ways: Latch as a primary (PSYNC, full sync
//! from a snapshot cut, the backlog, WAIT) and as a replica of redis-server or Latch
//! (REPLICAOF, the handshake, loading the primary's RDB, applying its stream).
//!
//! - [`feed`]: the replication stream and its backlog, fed where the AOF is fed.
//! - [`primary`]: a connection that asked for PSYNC or SYNC becomes a replica's feeder.
//! - [`replica`]: the link to this server's primary.
//!
//! Ids and offsets follow Redis: `replid` names a history, `master_repl_offset` counts its
//! bytes; `replid2` and `second_repl_offset` remember the history this server followed
//! before (a promoted replica), so replicas of the old primary can continue with it.

pub mod failover;
pub mod feed;
pub mod primary;
pub mod replica;
pub mod sync_job;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU16, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use tokio::sync::Notify;

pub use feed::Feed;

use crate::server::Server;

/// A WAIT the connection carries out after the command (`commands::replication::wait`):
/// until `wanted` replicas acknowledged `offset`, or the timeout (0: none) passes.
#[derive(Debug, Clone, Copy)]
pub struct WaitRequest {
    pub offset: u64,
    pub wanted: u64,
    pub timeout_ms: u64,
}

/// Carries out a WAIT: asks the replicas for their offsets (`REPLCONF GETACK *` in the
/// stream, as Redis sends it before it sleeps) and counts those at `offset` or past it as
/// their acknowledgements come.
pub async fn wait_for_acks(server: &Server, request: WaitRequest) -> u64 {
    let replication = &server.replication;
    let feed = &server.persistence.feed;
    // Not while writes are paused (a FAILOVER waits for the offsets to meet).
    if feed.takes_commits() && !server.pause.may_be_paused() {
        feed.append_command(&[
            bytes::Bytes::from_static(b"REPLCONF"),
            bytes::Bytes::from_static(b"GETACK"),
            bytes::Bytes::from_static(b"*"),
        ]);
    }
    let deadline = (request.timeout_ms > 0).then(|| {
        tokio::time::Instant::now() + std::time::Duration::from_millis(request.timeout_ms)
    });
    loop {
        let acked = replication.notified_acks();
        tokio::pin!(acked);
        acked.as_mut().enable();
        let count = replication.acked_at_least(request.offset);
        if count >= request.wanted || server.is_shutting_down() {
            return count;
        }
        match deadline {
            Some(deadline) => {
                if tokio::time::timeout_at(deadline, acked).await.is_err() {
                    return replication.acked_at_least(request.offset);
                }
            }
            None => acked.await,
        }
    }
}

/// The history this server's data follows.
#[derive(Clone, Debug)]
pub struct Ids {
    pub replid: String,
    pub replid2: String,
    /// The first offset not in `replid2`'s history (-1: none).
    pub second_offset: i64,
}

/// A replica attached to this server (INFO's `slaveN` lines, ROLE, WAIT).
#[derive(Debug)]
pub struct Attached {
    pub client_id: u64,
    pub ip: String,
    pub listening_port: AtomicU16,
    /// [`state`]: waiting for the snapshot, receiving it, online.
    pub state: AtomicU8,
    /// The offset it last acknowledged.
    pub ack_offset: AtomicU64,
    /// When it last acknowledged (milliseconds since the server started).
    pub ack_ms: AtomicU64,
}

pub mod state {
    pub const WAIT_BGSAVE: u8 = 0;
    pub const SEND_BULK: u8 = 1;
    pub const ONLINE: u8 = 2;

    pub fn name(state: u8) -> &'static str {
        match state {
            WAIT_BGSAVE => "wait_bgsave",
            SEND_BULK => "send_bulk",
            _ => "online",
        }
    }
}

/// This server's primary, when it is a replica.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrimaryAddr {
    pub host: String,
    pub port: u16,
}

/// The replica side's link, as INFO shows it.
#[derive(Debug, Default)]
pub struct Link {
    /// 0 down, 1 connecting/handshake, 2 transfer, 3 connected.
    pub status: AtomicU8,
    /// Offset of the primary's stream processed (`slave_repl_offset`).
    pub processed: AtomicU64,
    /// Offset of the primary's stream read (`slave_read_repl_offset`).
    pub read: AtomicU64,
    /// Milliseconds since start of the last byte from the primary.
    pub last_io_ms: AtomicU64,
    /// Milliseconds since start when the link went down (0: never up).
    pub down_since_ms: AtomicU64,
    pub transfer_size: AtomicI64,
    pub transfer_read: AtomicU64,
}

pub mod link {
    pub const DOWN: u8 = 0;
    pub const CONNECTING: u8 = 1;
    pub const TRANSFER: u8 = 2;
    pub const CONNECTED: u8 = 3;
}

pub struct Replication {
    ids: Mutex<Ids>,
    /// A FAILOVER under way (`failover.rs`).
    pub failover: Mutex<failover::Failover>,
    /// The full-sync snapshot replicas may still join (`sync_job.rs`).
    pub sync_job: Mutex<Option<Arc<sync_job::SyncJob>>>,
    pub attached: Mutex<Vec<Arc<Attached>>>,
    /// Set while this server replicates another.
    primary: Mutex<Option<PrimaryAddr>>,
    is_replica: AtomicBool,
    /// Bumped by each REPLICAOF: a link task whose epoch is stale stops.
    pub epoch: AtomicU64,
    pub link: Link,
    /// Acknowledgements arrived (WAIT listens).
    pub acked: Notify,
    /// A WAIT wants replicas asked for their offsets (`REPLCONF GETACK`) before the next
    /// round ends.
    pub getack_wanted: AtomicBool,
    pub sync_full: AtomicU64,
    pub sync_partial_ok: AtomicU64,
    pub sync_partial_err: AtomicU64,
    pub started: Instant,
}

impl Default for Replication {
    fn default() -> Self {
        Self::new()
    }
}

impl Replication {
    pub fn new() -> Replication {
        Replication {
            ids: Mutex::new(Ids {
                replid: crate::server::random_hex(40),
                replid2: "0".repeat(40),
                second_offset: -1,
            }),
            failover: Mutex::new(failover::Failover::default()),
            sync_job: Mutex::new(None),
            attached: Mutex::new(Vec::new()),
            primary: Mutex::new(None),
            is_replica: AtomicBool::new(false),
            epoch: AtomicU64::new(0),
            link: Link::default(),
            acked: Notify::new(),
            getack_wanted: AtomicBool::new(false),
            sync_full: AtomicU64::new(0),
            sync_partial_ok: AtomicU64::new(0),
            sync_partial_err: AtomicU64::new(0),
            started: Instant::now(),
        }
    }

    /// Resolves at the next acknowledgement from any replica.
    pub fn notified_acks(&self) -> tokio::sync::futures::Notified<'_> {
        self.acked.notified()
    }

    pub fn ids(&self) -> Ids {
        self.ids.lock().clone()
    }

    /// A new history (DEBUG CHANGE-REPL-ID), forgetting the previous one.
    pub fn change_replid(&self) {
        let mut ids = self.ids.lock();
        ids.replid = crate::server::random_hex(40);
        ids.replid2 = "0".repeat(40);
        ids.second_offset = -1;
    }

    /// Starts a new history that continues `offset` bytes of the current one (a replica
    /// promoted, Redis' `shiftReplicationId`): replicas of the old history may still
    /// continue up to there.
    pub fn shift_replid(&self, offset: u64) {
        let mut ids = self.ids.lock();
        ids.replid2 = std::mem::replace(&mut ids.replid, crate::server::random_hex(40));
        ids.second_offset = offset as i64 + 1;
    }

    /// Takes on the primary's history (after a full sync).
    pub fn adopt_replid(&self, replid: &str) {
        let mut ids = self.ids.lock();
        ids.replid = replid.to_string();
        ids.replid2 = "0".repeat(40);
        ids.second_offset = -1;
    }

    /// The primary continued us under a new id (`+CONTINUE <new id>`): what we had up to
    /// `offset` is the old id's.
    pub fn continue_as(&self, replid: &str, offset: u64) {
        let mut ids = self.ids.lock();
        if ids.replid != replid {
            ids.replid2 = std::mem::replace(&mut ids.replid, replid.to_string());
            ids.second_offset = offset as i64 + 1;
        }
    }

    pub fn is_replica(&self) -> bool {
        self.is_replica.load(Ordering::Relaxed)
    }

    pub fn primary(&self) -> Option<PrimaryAddr> {
        self.primary.lock().clone()
    }

    /// Records the primary (or none); returns the new epoch, which the link task for it
    /// carries.
    pub fn set_primary(&self, primary: Option<PrimaryAddr>) -> u64 {
        let mut current = self.primary.lock();
        self.is_replica.store(primary.is_some(), Ordering::Relaxed);
        crate::log::set_replica(primary.is_some());
        *current = primary;
        self.epoch.fetch_add(1, Ordering::SeqCst) + 1
    }

    pub fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Replicas that acknowledged within `max_lag` seconds.
    pub fn good_replicas(&self, max_lag_s: u64) -> u64 {
        let now = self.now_ms();
        self.attached
            .lock()
            .iter()
            .filter(|replica| {
                replica.state.load(Ordering::Relaxed) == state::ONLINE
                    && now.saturating_sub(replica.ack_ms.load(Ordering::Relaxed))
                        <= max_lag_s * 1000
            })
            .count() as u64
    }

    /// Replicas that acknowledged `offset` or more.
    pub fn acked_at_least(&self, offset: u64) -> u64 {
        self.attached
            .lock()
            .iter()
            .filter(|replica| {
                replica.state.load(Ordering::Relaxed) == state::ONLINE
                    && replica.ack_offset.load(Ordering::Relaxed) >= offset
            })
            .count() as u64
    }
}

fn field(out: &mut String, name: &str, value: impl std::fmt::Display) {
    use std::fmt::Write;
    let _ = write!(out, "{name}:{value}\r\n");
}

/// INFO's `# Replication` section, with redis-server's fields in its order.
pub fn info_section(server: &Server, out: &mut String) {
    let replication = &server.replication;
    let feed = &server.persistence.feed;
    out.push_str("# Replication\r\n");
    let primary = replication.primary();
    field(
        out,
        "role",
        if primary.is_some() { "slave" } else { "master" },
    );
    let now_ms = replication.now_ms();
    if let Some(primary) = &primary {
        let link = &replication.link;
        let status = link.status.load(Ordering::Relaxed);
        field(out, "master_host", &primary.host);
        field(out, "master_port", primary.port);
        field(
            out,
            "master_link_status",
            if status == link::CONNECTED {
                "up"
            } else {
                "down"
            },
        );
        let last_io = if status == link::CONNECTED {
            (now_ms.saturating_sub(link.last_io_ms.load(Ordering::Relaxed)) / 1000) as i64
        } else {
            -1
        };
        field(out, "master_last_io_seconds_ago", last_io);
        field(
            out,
            "master_sync_in_progress",
            u8::from(status == link::TRANSFER),
        );
        field(
            out,
            "slave_read_repl_offset",
            link.read.load(Ordering::Relaxed),
        );
        field(
            out,
            "slave_repl_offset",
            link.processed.load(Ordering::Relaxed),
        );
        if status == link::TRANSFER {
            let size = link.transfer_size.load(Ordering::Relaxed);
            let read = link.transfer_read.load(Ordering::Relaxed) as i64;
            let perc = if size > 0 {
                read as f64 * 100.0 / size as f64
            } else {
                0.0
            };
            field(out, "master_sync_total_bytes", size);
            field(out, "master_sync_read_bytes", read);
            field(out, "master_sync_left_bytes", size - read);
            field(out, "master_sync_perc", format!("{perc:.2}"));
            field(
                out,
                "master_sync_last_io_seconds_ago",
                now_ms.saturating_sub(link.last_io_ms.load(Ordering::Relaxed)) / 1000,
            );
        }
        if status != link::CONNECTED {
            let since = link.down_since_ms.load(Ordering::Relaxed);
            let down = if since == 0 {
                -1
            } else {
                (now_ms.saturating_sub(since) / 1000) as i64
            };
            field(out, "master_link_down_since_seconds", down);
        }
        field(
            out,
            "slave_priority",
            server.config.get_i64("replica-priority"),
        );
        field(
            out,
            "slave_read_only",
            u8::from(server.config.get_bool("replica-read-only")),
        );
        field(
            out,
            "replica_announced",
            u8::from(server.config.get_bool("replica-announced")),
        );
    }
    let attached: Vec<Arc<Attached>> = replication.attached.lock().clone();
    field(out, "connected_slaves", attached.len());
    let (to_write, max_lag) = server.config.min_replicas();
    if to_write > 0 && max_lag > 0 {
        field(
            out,
            "min_slaves_good_slaves",
            replication.good_replicas(max_lag),
        );
    }
    for (index, replica) in attached.iter().enumerate() {
        let state = replica.state.load(Ordering::Relaxed);
        let lag = if state == state::ONLINE {
            now_ms.saturating_sub(replica.ack_ms.load(Ordering::Relaxed)) / 1000
        } else {
            0
        };
        field(
            out,
            &format!("slave{index}"),
            format_args!(
                "ip={},port={},state={},offset={},lag={}",
                replica.ip,
                replica.listening_port.load(Ordering::Relaxed),
                state::name(state),
                replica.ack_offset.load(Ordering::Relaxed),
                lag
            ),
        );
    }
    let ids = replication.ids();
    let active = feed.is_active();
    let (first, histlen) = if active { feed.backlog_range() } else { (0, 0) };
    field(
        out,
        "master_failover_state",
        replication.failover.lock().stage.name(),
    );
    field(out, "master_replid", &ids.replid);
    field(out, "master_replid2", &ids.replid2);
    field(out, "master_repl_offset", feed.end());
    field(out, "second_repl_offset", ids.second_offset);
    field(out, "repl_backlog_active", u8::from(active));
    field(
        out,
        "repl_backlog_size",
        server.config.get_i64("repl-backlog-size"),
    );
    field(out, "repl_backlog_first_byte_offset", first);
    field(out, "repl_backlog_histlen", histlen);
}

/// The replica hard output limit (`client-output-buffer-limit replica`), in bytes.
/// At start, the RDB file said where the replication stream was when it was saved (Redis
/// restores the same at load). A replica (`replicaof` in its configuration) takes that
/// history and offset as its own, so its link asks for a partial resync from there
/// instead of a full one; a primary keeps the history as its previous one (`replid2`),
/// so its replicas can continue from it after its restart.
pub fn continue_from_file(server: &Server, repl: crate::persistence::snapshot::ReplAux) {
    let persistence = &server.persistence;
    let backlog_size = server.config.get_i64("repl-backlog-size").max(1) as usize;
    let replica = server.config.replicaof().is_some();
    {
        let mut ids = server.replication.ids.lock();
        if replica {
            ids.replid = repl.replid.clone();
            ids.replid2 = "0".repeat(40);
            ids.second_offset = -1;
        } else {
            ids.replid2 = repl.replid.clone();
            ids.second_offset = repl.offset as i64 + 1;
        }
    }
    persistence.start_feed(backlog_size);
    persistence.feed.set_proxy(replica);
    persistence.feed.reset_to(repl.offset);
    persistence.feed.set_proxy_db(repl.db);
    tracing::info!(
        replid = repl.replid,
        offset = repl.offset,
        "the RDB file holds the replication stream up to this offset"
    );
}

pub fn replica_hard_limit(server: &Server) -> u64 {
    server.config.client_output_buffer_limits()[1].hard_bytes
}

/// Once a second: a PING into the stream every `repl-ping-replica-period` seconds while
/// replicas are attached (it counts in the offsets, as Redis' does), so a replica can tell
/// a quiet primary from a lost one; and a primary's backlog freed after `repl-backlog-ttl`
/// seconds without replicas, with a new history id (as Redis does; a replica keeps its
/// backlog, which its promotion needs).
pub async fn cron(server: Arc<Server>) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    let mut since_ping = 0i64;
    let mut alone_s = 0i64;
    loop {
        tick.tick().await;
        if server.is_shutting_down() {
            return;
        }
        since_ping += 1;
        let feed = &server.persistence.feed;
        let replication = &server.replication;
        if feed.is_active() && !replication.is_replica() && replication.attached.lock().is_empty() {
            alone_s += 1;
            let ttl = server.config.get_i64("repl-backlog-ttl");
            if ttl > 0 && alone_s >= ttl {
                server.persistence.stop_feed();
                replication.change_replid();
                alone_s = 0;
                tracing::info!(
                    "replication backlog freed after {ttl} seconds without connected replicas"
                );
            }
        } else {
            alone_s = 0;
        }
        let period = server.config.get_i64("repl-ping-replica-period").max(1);
        if since_ping >= period
            && feed.takes_commits()
            && !server.pause.may_be_paused()
            && !server.replication.attached.lock().is_empty()
        {
            since_ping = 0;
            feed.append_command(&[bytes::Bytes::from_static(b"PING")]);
        }
    }
}
