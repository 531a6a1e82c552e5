//! Shutting down as redis-server 7.0 does. SHUTDOWN and the signals (SIGTERM, SIGINT) run
//! one sequence: writes are held, the AOF is synced, a final snapshot is written when save
//! points are set (or SAVE asks; never with NOSAVE), and only then does the server stop.
//! A snapshot that fails stops nothing unless FORCE: writes resume, SHUTDOWN answers an
//! error, and the server goes on. A signal only asks: the cron runs the sequence at its
//! next tick (so `DEBUG PAUSE-CRON` and `SHUTDOWN ABORT` can hold or cancel it), and a
//! second SIGINT while one is pending exits at once, as Ctrl-C twice does in redis-server.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tracing::warn;

use latch_keyspace::Tick;

use crate::pause::PauseMode;
use crate::server::Server;

pub const SAVE: u8 = 1;
pub const NOSAVE: u8 = 2;
pub const NOW: u8 = 4;
pub const FORCE: u8 = 8;

/// A pause that lasts until the server is gone.
const YEAR_NS: u64 = 365 * 24 * 3600 * 1_000_000_000;

/// Set in `Server::shutdown_asap` while a signal's shutdown waits for the cron.
const PENDING: u8 = 0x80;

/// What a SIGTERM or SIGINT does: asks the cron to shut down with the flags
/// `shutdown-on-sigterm` / `shutdown-on-sigint` give; a second SIGINT exits now.
pub fn on_signal(server: &Server, sigint: bool) {
    if sigint && server.shutdown_asap.load(Ordering::SeqCst) != 0 {
        warn!("You insist... exiting now.");
        crate::persistence::snapshot::remove_temp_rdb();
        std::process::exit(1);
    }
    let (name, option) = if sigint {
        ("SIGINT", "shutdown-on-sigint")
    } else {
        ("SIGTERM", "shutdown-on-sigterm")
    };
    warn!("Received {name} scheduling shutdown...");
    let flags = server.config.get_i64(option) as u8 & (SAVE | NOSAVE | NOW | FORCE);
    server
        .shutdown_asap
        .store(PENDING | flags, Ordering::SeqCst);
}

/// The cron's part: runs a pending signal's shutdown. Returns when it is done (the
/// server is stopping) or failed (the request is dropped; the server goes on).
pub async fn run_pending(server: &Arc<Server>) {
    let pending = server.shutdown_asap.load(Ordering::SeqCst);
    if pending == 0 || server.is_shutting_down() {
        return;
    }
    let shutting = server.clone();
    let done = tokio::task::spawn_blocking(move || prepare(&shutting, pending & !PENDING))
        .await
        .unwrap_or(false);
    if !done {
        server.shutdown_asap.store(0, Ordering::SeqCst);
    }
}

/// SHUTDOWN ABORT: drops a signal's shutdown the cron has not run yet. False when there
/// is none.
pub fn abort(server: &Server) -> bool {
    if server.shutdown_asap.swap(0, Ordering::SeqCst) == 0 {
        return false;
    }
    warn!("Shutdown manually aborted.");
    true
}

/// Redis' `prepareForShutdown` and `finishShutdown`: on success the server is told to
/// stop (and this returns true); on failure everything goes on as before.
pub fn prepare(server: &Server, flags: u8) -> bool {
    warn!("User requested shutdown...");
    let force = flags & FORCE != 0;
    // Hold writes from here: the snapshot must be the last state clients saw.
    let paused_before = server.pause.in_force(&server.keyspace) != PauseMode::Off;
    if !paused_before {
        server.pause.pause(
            &server.keyspace,
            PauseMode::Write,
            Some(Tick::from_nanos(
                Tick::now().as_nanos().saturating_add(YEAR_NS),
            )),
        );
    }
    // As Redis kills its saving children: a BGSAVE or AOF rewrite under way stops (the
    // AOF's manifest names everything needed at every step of a rewrite).
    crate::persistence::snapshot::abort_bgsave(server);
    if server
        .persistence
        .rewrite_in_progress
        .load(Ordering::Acquire)
    {
        crate::persistence::snapshot::REWRITE_ABORT.store(true, Ordering::Release);
    }
    let save =
        flags & NOSAVE == 0 && (flags & SAVE != 0 || !server.config.save_params().is_empty());
    if save {
        warn!("Saving the final RDB snapshot before exiting.");
        match crate::persistence::snapshot::save(server) {
            Ok(()) => warn!("DB saved on disk"),
            Err(error) if force => {
                warn!("Error trying to save the DB. Exit anyway. ({error:#})")
            }
            Err(error) => {
                warn!("Error trying to save the DB, can't exit. ({error:#})");
                warn!(
                    "Errors trying to shut down the server. Check the logs for more information."
                );
                if !paused_before {
                    server.pause.unpause(&server.keyspace);
                }
                return false;
            }
        }
    }
    server.request_shutdown();
    true
}
