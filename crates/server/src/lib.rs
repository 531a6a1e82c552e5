//! latch-server: a Redis-compatible server.
//!
//! - [`config`]: the option table, the config file and command-line parsing, CONFIG GET/SET.
//! - [`spec`]: the shape of a command table entry (flags, key specs, arguments).
//! - [`table`]: the command table, gathered from the command families.
//! - [`commands`]: the command implementations, one file per family.
//! - [`gate`]: the gatekeeper every command passes through.
//! - [`client`]: per-connection state and the client registry.
//! - [`server`]: the state every connection shares.
//! - [`stats`]: counters for INFO, and the slow log.
//! - [`net`]: listeners, the connection loop, and background work.
//! - [`busy_poll`]: polling a little before the runtime sleeps (`busy-poll-us`).
//! - [`persistence`]: the AOF and RDB snapshots (formats in `latch-persist`).
//! - [`pubsub`]: channels, patterns and their subscribers; how messages reach them.
//! - [`tracking`]: client-side caching (CLIENT TRACKING) and its invalidations.
//! - [`log`]: the log, in redis-server's line format or tracing's.

pub mod acl;
pub mod acl_log;
pub mod busy_poll;
pub mod client;
pub mod commands;
pub mod config;
pub mod crash;
pub mod evict;
pub mod gate;
pub mod jemalloc;
pub mod latency_histogram;
pub mod lock_stats;
pub mod lock_watch;
pub mod log;
pub mod net;
pub mod oom_score;
pub mod pause;
pub mod persistence;
pub mod pubsub;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod shutdown;
pub mod spec;
pub mod stats;
pub mod table;
pub mod tracking;

/// Runs a server with the given options until it is shut down.
pub async fn run(config: config::Config) -> anyhow::Result<()> {
    let server = server::Server::new(config).into_arc();
    acl::file::load_at_startup(&server.acl, &server.config).map_err(|why| anyhow::anyhow!(why))?;
    table::install_renames(server.config.renames()).map_err(|why| anyhow::anyhow!(why))?;
    let (tcp, unix) = net::bind(&server).await?;
    log::banner(&server.config);
    tracing::warn!("Server initialized");
    // Clients are served while the data set loads, as by redis-server: commands without
    // the `loading` flag get LOADING until it is in (`persistence::start`).
    let places = net::listening_places(&tcp, &unix, &server);
    // LOADING from the first command on (`persistence::start` holds its own guard).
    let loading = persistence::Loading::start();
    persistence::begin_starting();
    net::serve(server.clone(), tcp, unix).await;
    {
        let starting = server.clone();
        let started = tokio::task::spawn_blocking(move || persistence::start(&starting)).await?;
        if let Err(error) = started {
            if let Some(rdb) = error.downcast_ref::<latch_persist::rdb::RdbError>() {
                // The lines operators (and Redis' tests) look for when a file is corrupt.
                tracing::warn!("{}", rdb.log_line());
                tracing::warn!("Terminating server after rdb file reading failure.");
            }
            return Err(error);
        }
    }
    drop(loading);
    persistence::end_starting();
    net::start_duties(&server);
    net::log_ready(&places);
    tokio::spawn(net::cron(server.clone()));
    tokio::spawn(pause::keeper(server.clone()));
    tokio::spawn(evict::background(server.clone()));
    let signalled = server.clone();
    tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            return;
        };
        loop {
            let sigint = tokio::select! {
                _ = term.recv() => false,
                _ = int.recv() => true,
            };
            shutdown::on_signal(&signalled, sigint);
        }
    });
    while !server.is_shutting_down() {
        let notified = server.shutdown.notified();
        if server.is_shutting_down() {
            break;
        }
        notified.await;
    }
    {
        let stopping = server.clone();
        tokio::task::spawn_blocking(move || persistence::shut_down(&stopping)).await?;
    }
    if let Some(path) = server.config.unixsocket() {
        let _ = std::fs::remove_file(path);
    }
    tracing::warn!("Latch is now ready to exit, bye bye...");
    Ok(())
}
