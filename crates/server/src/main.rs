//! `latch-server [config-file] [--option value ...]`, like redis-server.

/// jemalloc, as in Redis: size classes without a per-block header keep small keys and
/// values compact, and its statistics give INFO memory its figures.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-v" || a == "--version") {
        // redis-server's fields, so tools that read `v=` find the Redis version Latch
        // implements; Latch's own version beside it.
        println!(
            "Latch server v={} latch={} sha=00000000:0 malloc=jemalloc bits=64 build=0",
            latch_server::commands::connection::REDIS_VERSION,
            env!("CARGO_PKG_VERSION")
        );
        return;
    }
    let no_config = args.is_empty();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!(
            "Usage: latch-server [/path/to/latch.conf] [--option value ...]\n       latch-server -v | --version\n       latch-server -h | --help\n\nOptions have redis-server's names and syntax, e.g.\n       latch-server --port 7777 --dir ./data\n       latch-server --port 0 --unixsocket /tmp/latch.sock\nWith no arguments it listens on port 6379 of every address, as redis-server: with\nprotected-mode on, clients from other hosts are refused until a password is set."
        );
        return;
    }
    let config = match latch_server::config::Config::from_args(args) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(1);
        }
    };
    let _log_guard = latch_server::log::init(&config);
    latch_server::crash::set_enabled(config.get_bool("crash-log-enabled"));
    latch_server::persistence::aof::set_timestamps(config.get_bool("aof-timestamp-enabled"));
    tracing::warn!("Latch is starting");
    tracing::warn!(
        "Latch version={}, Redis version={}, bits=64, pid={}, just started",
        env!("CARGO_PKG_VERSION"),
        latch_server::commands::connection::REDIS_VERSION,
        std::process::id()
    );
    if no_config {
        tracing::warn!("Warning: no config file specified, using the default config. In order to specify a config file use latch-server /path/to/latch.conf");
    } else {
        tracing::warn!("Configuration loaded");
    }
    config.warn_inert_options();
    if let Err(why) = latch_server::oom_score::apply(&config, config.replicaof().is_some()) {
        tracing::warn!("{why}");
    }
    // As redis-server (which also writes one when it daemonizes, which Latch does not):
    // the pid file is written when `pidfile` is set, a failure only logged, and removed at
    // exit (from where it was written, even if CONFIG SET dir moved the server since).
    let pidfile = match config.write_pidfile() {
        Ok(()) => config
            .pidfile()
            .and_then(|path| std::path::absolute(path).ok()),
        Err(error) => {
            tracing::warn!("Failed to write PID file: {error}");
            None
        }
    };
    let remove_pidfile = || {
        if let Some(path) = &pidfile {
            let _ = std::fs::remove_file(path);
        }
    };
    // `io-threads` runtime workers, 1 by default as in Redis (whose io-threads default is
    // its one thread). Every worker runs commands, so more workers serve more clients in
    // parallel; but a worker that shares its core with another busy thread (a second worker,
    // or clients on the same machine) takes turns with it in the kernel's time slices, which
    // costs throughput and milliseconds of p99 (bench/compare.sh, unpinned on 2 cores: one
    // worker beat two on every row with 50 clients). Set it to the cores the server can
    // have to itself. A long script hands its worker's place to another thread at its first
    // hook tick (`server::step_aside_from_runtime`), so BUSY and SCRIPT KILL are still
    // answered with one worker. No LIFO slot: connections woken by one poll run in the
    // order their input arrived (with it, the last woken runs first, so a command sent
    // later by another client could overtake one sent earlier).
    let threads = config.io_threads();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads > cores {
        tracing::warn!(
            io_threads = threads,
            cores,
            "more io-threads than cores: workers will take turns on a core"
        );
    }
    latch_server::jemalloc::register_thread();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .on_thread_start(latch_server::jemalloc::register_thread)
        .disable_lifo_slot()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("could not start the runtime: {error}");
            remove_pidfile();
            std::process::exit(1);
        }
    };
    let result = runtime.block_on(latch_server::run(config));
    remove_pidfile();
    if let Err(error) = result {
        tracing::error!("{error:#}");
        eprintln!("{error:#}");
        std::process::exit(1);
    }
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
}
