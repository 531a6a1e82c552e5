//! FAILOVER: a primary hands its role to one of its replicas without losing a write, as
//! Redis 6.2+ does.
//!
//! 1. Writes are paused (`CLIENT PAUSE WRITE` with no end) and the failover waits for a
//!    replica (the one named by `TO host port`, or any) to acknowledge the primary's
//!    whole stream. Nothing is fed meanwhile (no PING, no GETACK: they would move the
//!    offset), so the replicas' once-a-second ACKs get there.
//! 2. This server then becomes that replica's replica, sending `PSYNC <id> <offset>
//!    FAILOVER`: the target promotes itself (REPLICAOF NO ONE) and answers `+CONTINUE`,
//!    since its previous history is this server's.
//! 3. The pause ends when the PSYNC is answered, or when the failover is aborted (FAILOVER
//!    ABORT, the timeout without FORCE, the target refusing): a server already turned
//!    replica becomes a primary again.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{info, warn};

use super::{state, PrimaryAddr};
use crate::pause::PauseMode;
use crate::server::Server;

/// Where a failover stands (INFO `master_failover_state`).
#[derive(Clone, Debug, Default)]
pub struct Failover {
    pub stage: Stage,
    pub target: Option<PrimaryAddr>,
    pub deadline: Option<Instant>,
    pub force: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stage {
    #[default]
    None,
    WaitForSync,
    InProgress,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::None => "no-failover",
            Stage::WaitForSync => "waiting-for-sync",
            Stage::InProgress => "failover-in-progress",
        }
    }
}

/// Starts a failover the command checked (`commands::replication::failover`).
pub fn begin(server: &Arc<Server>, target: Option<PrimaryAddr>, timeout_ms: u64, force: bool) {
    {
        let mut failover = server.replication.failover.lock();
        *failover = Failover {
            stage: Stage::WaitForSync,
            target: target.clone(),
            deadline: (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms)),
            force,
        };
    }
    match &target {
        Some(target) => info!("FAILOVER requested to {}:{}.", target.host, target.port),
        None => info!("FAILOVER requested to any replica."),
    }
    // No end: the failover ends the pause itself.
    let far = latch_keyspace::Tick::from_nanos(
        latch_keyspace::Tick::now().as_nanos() + 100 * 365 * 24 * 3_600 * 1_000_000_000,
    );
    server
        .pause
        .pause(&server.keyspace, PauseMode::Write, Some(far));
    let server = Arc::clone(server);
    tokio::spawn(async move { watch(server).await });
}

/// Checks every 10 ms whether a replica caught up (or the time is up).
async fn watch(server: Arc<Server>) {
    loop {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let failover = server.replication.failover.lock().clone();
        if failover.stage != Stage::WaitForSync {
            return;
        }
        if failover
            .deadline
            .is_some_and(|deadline| Instant::now() >= deadline)
        {
            match (&failover.target, failover.force) {
                (Some(target), true) => {
                    info!(
                        "FAILOVER to {}:{} time out exceeded, failing over.",
                        target.host, target.port
                    );
                    hand_over(&server, target.clone());
                }
                _ => {
                    abort(&server, "Replica never caught up before timeout");
                }
            }
            return;
        }
        if let Some(target) = caught_up(&server, failover.target.as_ref()) {
            info!(
                "Failover target {}:{} is synced, failing over.",
                target.host, target.port
            );
            hand_over(&server, target);
            return;
        }
    }
}

/// The replica (the target, or any) that acknowledged the whole stream.
fn caught_up(server: &Server, target: Option<&PrimaryAddr>) -> Option<PrimaryAddr> {
    let end = server.persistence.feed.end();
    server
        .replication
        .attached
        .lock()
        .iter()
        .filter(|replica| replica.state.load(Ordering::Relaxed) == state::ONLINE)
        .map(|replica| {
            (
                PrimaryAddr {
                    host: replica.ip.clone(),
                    port: replica.listening_port.load(Ordering::Relaxed),
                },
                replica.ack_offset.load(Ordering::Relaxed),
            )
        })
        .find(|(addr, acked)| *acked == end && target.is_none_or(|target| target == addr))
        .map(|(addr, _)| addr)
}

fn hand_over(server: &Arc<Server>, target: PrimaryAddr) {
    {
        let mut failover = server.replication.failover.lock();
        failover.stage = Stage::InProgress;
        failover.target = Some(target.clone());
    }
    super::replica::start(server, target);
}

/// The link's PSYNC was answered: the failover is over.
pub fn finished(server: &Server) {
    let mut failover = server.replication.failover.lock();
    if failover.stage == Stage::InProgress {
        *failover = Failover::default();
        server.pause.unpause(&server.keyspace);
        info!("FAILOVER completed: this server is a replica now");
    }
}

/// Ends a failover that could not complete; a server already turned replica becomes a
/// primary again. False when none was under way.
pub fn abort(server: &Arc<Server>, why: &str) -> bool {
    let stage = {
        let mut failover = server.replication.failover.lock();
        let stage = failover.stage;
        *failover = Failover::default();
        stage
    };
    if stage == Stage::None {
        return false;
    }
    warn!("FAILOVER aborted: {why}");
    if stage == Stage::InProgress {
        super::replica::stop(server);
    }
    server.pause.unpause(&server.keyspace);
    true
}

/// Whether the link to `primary` asks it to take over (`PSYNC ... FAILOVER`).
pub fn in_progress_to(server: &Server, primary: &PrimaryAddr) -> bool {
    let failover = server.replication.failover.lock();
    failover.stage == Stage::InProgress && failover.target.as_ref() == Some(primary)
}
