//! INFO: the server's state and statistics, by section, in Redis 7's `field:value` text.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bytes::Bytes;
use latch_keyspace::Locked;
use parking_lot::Mutex;

use super::connection::REDIS_VERSION;
use super::Ctx;
use crate::server::Server;
use crate::spec::{acl, flag, Arg, CommandSpec, Group};
use crate::table::table;

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "info",
    group: Group::Server,
    summary: "Reports information and statistics about the server, by section.",
    since: "1.0.0",
    complexity: "O(1)",
    arity: -1,
    flags: flag::LOADING | flag::STALE,
    acl: acl::DANGEROUS,
    arguments: &[Arg::string("section").optional().multiple()],
    history: &[("7.0.0", "Several sections may be asked for at once.")],
    tips: &[
        "nondeterministic_output",
        "request_policy:all_shards",
        "response_policy:special",
    ],
    handler: Some(info),
    ..CommandSpec::BASE
}];

/// Sections in the order Redis prints them, and whether `default` includes them.
const SECTIONS: &[(&str, bool)] = &[
    ("server", true),
    ("clients", true),
    ("memory", true),
    ("persistence", true),
    ("stats", true),
    ("replication", true),
    ("cpu", true),
    ("modules", true),
    ("commandstats", false),
    ("errorstats", true),
    ("latencystats", false),
    ("cluster", true),
    ("keyspace", true),
    // Latch's own: the native locks (LOCK.*).
    ("locks", false),
];

/// Which sections a list of INFO arguments asks for (lower-cased names).
fn wanted_sections(args: &[Bytes]) -> BTreeSet<&'static str> {
    let defaults = || {
        SECTIONS
            .iter()
            .filter(|(_, default)| *default)
            .map(|(name, _)| *name)
    };
    if args.is_empty() {
        return defaults().collect();
    }
    let mut wanted = BTreeSet::new();
    for arg in args {
        let name = String::from_utf8_lossy(arg).to_ascii_lowercase();
        match name.as_str() {
            "default" => wanted.extend(defaults()),
            "all" | "everything" => wanted.extend(SECTIONS.iter().map(|(name, _)| *name)),
            // Redis calls the module list section both ways.
            "module_list" => {
                wanted.insert("modules");
            }
            other => {
                if let Some((known, _)) = SECTIONS.iter().find(|(known, _)| *known == other) {
                    wanted.insert(known);
                }
            }
        }
    }
    wanted
}

fn info(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let wanted = wanted_sections(&args[1..]);
    let text = info_text(ctx, &wanted);
    ctx.reply.verbatim(b"txt", text.as_bytes());
}

/// Runs `visit` with every shard held: the command's own view when it already holds them all
/// (inside a transaction), else a fresh lock of the whole keyspace.
pub fn with_whole_keyspace<R>(
    ctx: &mut Ctx<'_, '_>,
    visit: impl FnOnce(&mut Locked<'_>) -> R,
) -> R {
    if ctx.keys.holds_all() {
        visit(ctx.keys)
    } else {
        let mut all = ctx.server.keyspace.lock_all();
        visit(&mut all)
    }
}

/// The last change count read, for when the shards cannot be read (the caller holds them).
static LAST_DIRTY: AtomicU64 = AtomicU64::new(0);

fn changes_since_save(ctx: &mut Ctx<'_, '_>) -> u64 {
    if ctx.keys.holds_all() {
        return LAST_DIRTY.load(Ordering::Relaxed);
    }
    let dirty = ctx.server.persistence.changes_since_save(ctx.server);
    LAST_DIRTY.store(dirty, Ordering::Relaxed);
    dirty
}

fn info_text(ctx: &mut Ctx<'_, '_>, wanted: &BTreeSet<&str>) -> String {
    let mut out = String::new();
    for (section, _) in SECTIONS {
        if !wanted.contains(section) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        match *section {
            "server" => server_section(ctx.server, &mut out),
            "clients" => clients_section(ctx.server, &mut out),
            "memory" => memory_section(ctx.server, &mut out),
            "persistence" => {
                let dirty = changes_since_save(ctx);
                persistence_section(ctx.server, dirty, &mut out)
            }
            "stats" => stats_section(ctx.server, &mut out),
            "replication" => crate::replication::info_section(ctx.server, &mut out),
            "locks" => ctx.server.lock_stats.info(&mut out),
            "cpu" => cpu_section(&mut out),
            "modules" => out.push_str("# Modules\r\n"),
            "commandstats" => commandstats_section(ctx.server, &mut out),
            "errorstats" => errorstats_section(ctx.server, &mut out),
            "latencystats" => latencystats_section(ctx.server, &mut out),
            "cluster" => out.push_str("# Cluster\r\ncluster_enabled:0\r\n"),
            "keyspace" => {
                let lines = with_whole_keyspace(ctx, keyspace_lines);
                out.push_str("# Keyspace\r\n");
                out.push_str(&lines);
            }
            _ => {}
        }
    }
    out
}

/// Appends `name:value\r\n`.
fn field(out: &mut String, name: &str, value: impl std::fmt::Display) {
    let _ = write!(out, "{name}:{value}\r\n");
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn server_section(server: &Server, out: &mut String) {
    out.push_str("# Server\r\n");
    field(out, "redis_version", REDIS_VERSION);
    field(out, "redis_git_sha1", "00000000");
    field(out, "redis_git_dirty", 0);
    field(out, "redis_build_id", "0");
    field(out, "redis_mode", "standalone");
    let os = format!(
        "{} {} {}",
        read_trimmed("/proc/sys/kernel/ostype"),
        read_trimmed("/proc/sys/kernel/osrelease"),
        std::env::consts::ARCH
    );
    field(out, "os", os);
    field(out, "arch_bits", usize::BITS);
    field(out, "monotonic_clock", "POSIX clock_gettime");
    field(out, "multiplexing_api", "epoll");
    field(out, "atomicvar_api", "c11-builtin");
    field(out, "gcc_version", "0.0.0");
    field(out, "process_id", std::process::id());
    field(out, "process_supervised", "no");
    field(out, "run_id", &server.run_id);
    field(out, "tcp_port", server.config.port());
    let now = server.keyspace.clock().now();
    field(out, "server_time_usec", now.wall_ms.saturating_mul(1000));
    let uptime_s = server.uptime_s();
    field(out, "uptime_in_seconds", uptime_s);
    field(out, "uptime_in_days", uptime_s / 86_400);
    field(out, "hz", server.config.hz());
    field(out, "configured_hz", server.config.hz());
    // Redis' LRU clock: seconds, 24 bits.
    field(out, "lru_clock", (now.wall_s() as u64) & ((1 << 24) - 1));
    let executable = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    field(out, "executable", executable);
    let config_file = server
        .config
        .config_file()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    field(out, "config_file", config_file);
    field(out, "io_threads_active", 0);
    if server.is_shutting_down() {
        field(out, "shutdown_in_milliseconds", 0);
    }
}

fn clients_section(server: &Server, out: &mut String) {
    let clients = server.clients.list();
    let max_input = clients
        .iter()
        .map(|c| c.query_buffer.load(Ordering::Relaxed))
        .max()
        .unwrap_or(0);
    out.push_str("# Clients\r\n");
    field(out, "connected_clients", clients.len());
    field(out, "cluster_connections", 0);
    field(out, "maxclients", server.config.maxclients());
    field(out, "client_recent_max_input_buffer", max_input);
    let max_output = clients
        .iter()
        .map(|c| c.memory.output.load(Ordering::Relaxed))
        .max()
        .unwrap_or(0);
    field(out, "client_recent_max_output_buffer", max_output);
    field(
        out,
        "blocked_clients",
        server.clients.blocked.load(Ordering::Relaxed),
    );
    field(out, "tracking_clients", server.tracking.client_count());
    field(out, "clients_in_timeout_table", 0);
}

/// The allocator latch-server is built with (main.rs), as INFO names it.
pub const MEM_ALLOCATOR: &str = "jemalloc-5.3.0";

/// Memory figures of the process: jemalloc's statistics (the server's allocator) and the
/// resident set from /proc.
pub struct MemoryFigures {
    /// Resident set size in bytes.
    pub rss_bytes: u64,
    /// Bytes allocated and not freed (jemalloc's `stats.allocated`), as Redis' `used_memory`;
    /// the resident set where jemalloc is not the allocator (unit tests).
    pub used_bytes: u64,
    /// Bytes in pages jemalloc holds for live allocations (`stats.active`).
    pub active_bytes: u64,
    /// Bytes jemalloc has resident (`stats.resident`).
    pub allocator_resident_bytes: u64,
    pub peak_bytes: u64,
    pub total_system_bytes: u64,
}

static PEAK_BYTES: AtomicU64 = AtomicU64::new(0);

/// A `Key:   1234 kB` line of a /proc file, in bytes.
fn proc_kb(path: &str, key: &str) -> u64 {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|rest| {
            rest.trim_start_matches(':')
                .split_whitespace()
                .next()
                .map(str::to_string)
        })
        .and_then(|kb| kb.parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

pub fn memory_figures() -> MemoryFigures {
    use tikv_jemalloc_ctl::stats;
    let rss_bytes = proc_kb("/proc/self/status", "VmRSS");
    // calibrate advances jemalloc's statistics epoch, refreshing the others too.
    let allocated = crate::jemalloc::calibrate();
    let active_bytes = stats::active::read().unwrap_or(0) as u64;
    let allocator_resident_bytes = stats::resident::read().unwrap_or(0) as u64;
    let used_bytes = allocated.unwrap_or_else(|| rss_bytes.max(1));
    let peak_bytes = PEAK_BYTES
        .fetch_max(used_bytes, Ordering::Relaxed)
        .max(used_bytes);
    MemoryFigures {
        rss_bytes,
        used_bytes,
        active_bytes: active_bytes.max(used_bytes),
        allocator_resident_bytes: allocator_resident_bytes.max(used_bytes),
        peak_bytes,
        total_system_bytes: proc_kb("/proc/meminfo", "MemTotal"),
    }
}

/// `used_memory` read now, cheaply enough for the maxmemory check before every command
/// while a limit is set: the threads' counts (`crate::jemalloc::live_bytes`), or jemalloc's
/// merged statistics when there are none.
pub fn used_memory_now() -> u64 {
    match crate::jemalloc::live_bytes().or_else(crate::jemalloc::allocated_bytes) {
        Some(allocated) => allocated,
        None => memory_figures().used_bytes,
    }
}

/// Bytes as Redis' INFO shows them for humans: `967.43K`, `6.67M`, `512B`.
pub fn bytes_to_human(n: u64) -> String {
    const UNITS: &[(u64, &str)] = &[
        (1 << 50, "P"),
        (1 << 40, "T"),
        (1 << 30, "G"),
        (1 << 20, "M"),
        (1 << 10, "K"),
    ];
    for (size, unit) in UNITS {
        if n >= *size {
            return format!("{:.2}{unit}", n as f64 / *size as f64);
        }
    }
    format!("{n}B")
}

fn memory_section(server: &Server, out: &mut String) {
    let memory = memory_figures();
    let maxmemory = server.config.maxmemory();
    let policy = server.config.maxmemory_policy();
    out.push_str("# Memory\r\n");
    field(out, "used_memory", memory.used_bytes);
    field(out, "used_memory_human", bytes_to_human(memory.used_bytes));
    field(out, "used_memory_rss", memory.rss_bytes);
    field(
        out,
        "used_memory_rss_human",
        bytes_to_human(memory.rss_bytes),
    );
    field(out, "used_memory_peak", memory.peak_bytes);
    field(
        out,
        "used_memory_peak_human",
        bytes_to_human(memory.peak_bytes),
    );
    field(
        out,
        "used_memory_peak_perc",
        format!(
            "{:.2}%",
            memory.used_bytes as f64 * 100.0 / memory.peak_bytes as f64
        ),
    );
    field(out, "used_memory_overhead", 0);
    field(out, "used_memory_startup", 0);
    field(out, "used_memory_dataset", memory.used_bytes);
    field(out, "used_memory_dataset_perc", "100.00%");
    field(out, "allocator_allocated", memory.used_bytes);
    field(out, "allocator_active", memory.active_bytes);
    field(out, "allocator_resident", memory.allocator_resident_bytes);
    field(out, "total_system_memory", memory.total_system_bytes);
    field(
        out,
        "total_system_memory_human",
        bytes_to_human(memory.total_system_bytes),
    );
    let run = &server.scripting.run;
    let vm = run.vm_bytes.load(Ordering::Relaxed) as u64;
    let functions_vm = run.functions_vm_bytes.load(Ordering::Relaxed) as u64;
    let scripts = run.cached_scripts_bytes.load(Ordering::Relaxed) as u64;
    field(out, "used_memory_lua", vm);
    field(out, "used_memory_vm_eval", vm);
    field(out, "used_memory_lua_human", bytes_to_human(vm));
    field(out, "used_memory_scripts_eval", scripts);
    field(
        out,
        "number_of_cached_scripts",
        run.cached_scripts.load(Ordering::Relaxed),
    );
    field(
        out,
        "number_of_functions",
        run.function_count.load(Ordering::Relaxed),
    );
    field(
        out,
        "number_of_libraries",
        run.library_count.load(Ordering::Relaxed),
    );
    field(out, "used_memory_vm_functions", functions_vm);
    field(out, "used_memory_vm_total", vm + functions_vm);
    field(
        out,
        "used_memory_vm_total_human",
        bytes_to_human(vm + functions_vm),
    );
    field(out, "used_memory_functions", 0);
    field(out, "used_memory_scripts", scripts);
    field(out, "used_memory_scripts_human", bytes_to_human(scripts));
    field(out, "maxmemory", maxmemory);
    field(out, "maxmemory_human", bytes_to_human(maxmemory));
    field(out, "maxmemory_policy", policy);
    // Redis' three layers: allocated → active pages (fragmentation inside jemalloc) →
    // jemalloc's resident pages → the process's resident set.
    let layers = [
        ("allocator_frag", memory.active_bytes, memory.used_bytes),
        (
            "allocator_rss",
            memory.allocator_resident_bytes,
            memory.active_bytes,
        ),
        (
            "rss_overhead",
            memory.rss_bytes,
            memory.allocator_resident_bytes,
        ),
    ];
    for (name, outer, inner) in layers {
        field(
            out,
            &format!("{name}_ratio"),
            format!("{:.2}", outer as f64 / inner.max(1) as f64),
        );
        field(out, &format!("{name}_bytes"), outer as i64 - inner as i64);
    }
    field(
        out,
        "mem_fragmentation_ratio",
        format!("{:.2}", memory.rss_bytes as f64 / memory.used_bytes as f64),
    );
    field(
        out,
        "mem_fragmentation_bytes",
        memory.rss_bytes.saturating_sub(memory.used_bytes),
    );
    let replication = server.persistence.feed.memory();
    field(out, "mem_not_counted_for_evict", replication.beyond_backlog);
    field(out, "mem_replication_backlog", replication.backlog);
    field(out, "mem_total_replication_buffers", replication.total);
    field(out, "mem_clients_slaves", replication.beyond_backlog);
    field(out, "mem_clients_normal", server.clients.memory());
    for name in ["mem_cluster_links", "mem_aof_buffer"] {
        field(out, name, 0);
    }
    field(out, "mem_allocator", MEM_ALLOCATOR);
    field(out, "active_defrag_running", 0);
    field(
        out,
        "lazyfree_pending_objects",
        latch_keyspace::lazyfree::pending(),
    );
    field(out, "lazyfreed_objects", latch_keyspace::lazyfree::freed());
}

fn persistence_section(server: &Server, dirty: u64, out: &mut String) {
    out.push_str("# Persistence\r\n");
    field(out, "loading", u8::from(crate::persistence::is_loading()));
    for name in [
        "async_loading",
        "current_cow_peak",
        "current_cow_size",
        "current_cow_size_age",
    ] {
        field(out, name, 0);
    }
    field(out, "current_fork_perc", "0.00");
    field(out, "current_save_keys_processed", 0);
    field(out, "current_save_keys_total", 0);
    field(out, "rdb_changes_since_last_save", dirty);
    let persistence = &server.persistence;
    let flag = |value: &std::sync::atomic::AtomicBool| i64::from(value.load(Ordering::Relaxed));
    let status = |ok: bool| if ok { "ok" } else { "err" };
    field(
        out,
        "rdb_bgsave_in_progress",
        flag(&persistence.bgsave_in_progress),
    );
    field(
        out,
        "rdb_last_save_time",
        persistence.last_save_unix_s.load(Ordering::Relaxed),
    );
    field(
        out,
        "rdb_last_bgsave_status",
        status(persistence.last_bgsave_ok.load(Ordering::Relaxed)),
    );
    field(
        out,
        "rdb_last_bgsave_time_sec",
        persistence.last_bgsave_time_s.load(Ordering::Relaxed),
    );
    field(out, "rdb_current_bgsave_time_sec", -1);
    field(out, "rdb_saves", persistence.saves.load(Ordering::Relaxed));
    field(out, "rdb_last_cow_size", 0);
    field(
        out,
        "rdb_last_load_keys_expired",
        persistence.load_expired_keys.load(Ordering::Relaxed),
    );
    field(
        out,
        "rdb_last_load_keys_loaded",
        persistence.loaded_keys.load(Ordering::Relaxed),
    );
    let log = persistence.aof();
    field(out, "aof_enabled", i64::from(log.is_some()));
    field(
        out,
        "aof_rewrite_in_progress",
        flag(&persistence.rewrite_in_progress),
    );
    field(
        out,
        "aof_rewrite_scheduled",
        flag(&persistence.rewrite_scheduled),
    );
    field(
        out,
        "aof_last_rewrite_time_sec",
        persistence.last_rewrite_time_s.load(Ordering::Relaxed),
    );
    field(out, "aof_current_rewrite_time_sec", -1);
    field(
        out,
        "aof_last_bgrewrite_status",
        status(persistence.last_rewrite_ok.load(Ordering::Relaxed)),
    );
    field(
        out,
        "aof_rewrites",
        persistence.rewrites.load(Ordering::Relaxed),
    );
    field(out, "aof_rewrites_consecutive_failures", 0);
    let write_ok = log
        .as_ref()
        .is_none_or(|log| log.write_ok.load(Ordering::Relaxed));
    field(out, "aof_last_write_status", status(write_ok));
    field(out, "aof_last_cow_size", 0);
    field(out, "module_fork_in_progress", 0);
    field(out, "module_fork_last_cow_size", 0);
    if let Some(log) = &log {
        field(
            out,
            "aof_current_size",
            log.current_size() + log.base_size.load(Ordering::Relaxed),
        );
        field(out, "aof_base_size", log.base_size.load(Ordering::Relaxed));
        field(out, "aof_buffer_length", 0);
    }
    // Latch's own: the write refusal after an unclean shutdown (`restart-delay`).
    field(out, "unclean_start", flag(&persistence.unclean_start));
    field(
        out,
        "restart_delay_remaining_ms",
        persistence.restart_delay_left_ms(server),
    );
}

/// Operations per second between the last two INFO calls at least 100 ms apart.
struct OpsSampler {
    at: Option<Instant>,
    commands: u64,
    input_bytes: u64,
    output_bytes: u64,
    rates: (f64, f64, f64),
}

static OPS_SAMPLER: Mutex<OpsSampler> = Mutex::new(OpsSampler {
    at: None,
    commands: 0,
    input_bytes: 0,
    output_bytes: 0,
    rates: (0.0, 0.0, 0.0),
});

/// (commands per second, input KB/s, output KB/s).
fn sample_rates(server: &Server) -> (f64, f64, f64) {
    let stats = &server.stats;
    let commands = stats.total_commands_processed.load(Ordering::Relaxed);
    let input_bytes = stats.net_input_bytes.load(Ordering::Relaxed);
    let output_bytes = stats.net_output_bytes.load(Ordering::Relaxed);
    let mut sampler = OPS_SAMPLER.lock();
    let now = Instant::now();
    let (since, earlier) = match sampler.at {
        Some(at) => (
            now.duration_since(at).as_secs_f64(),
            (sampler.commands, sampler.input_bytes, sampler.output_bytes),
        ),
        None => (server.started.elapsed().as_secs_f64(), (0, 0, 0)),
    };
    if since >= 0.1 {
        sampler.rates = (
            commands.saturating_sub(earlier.0) as f64 / since,
            input_bytes.saturating_sub(earlier.1) as f64 / since / 1024.0,
            output_bytes.saturating_sub(earlier.2) as f64 / since / 1024.0,
        );
        sampler.at = Some(now);
        sampler.commands = commands;
        sampler.input_bytes = input_bytes;
        sampler.output_bytes = output_bytes;
    }
    sampler.rates
}

fn stats_section(server: &Server, out: &mut String) {
    let stats = &server.stats;
    let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    let (ops, input_kbps, output_kbps) = sample_rates(server);
    out.push_str("# Stats\r\n");
    field(
        out,
        "total_connections_received",
        load(&stats.total_connections_received),
    );
    field(
        out,
        "total_commands_processed",
        load(&stats.total_commands_processed),
    );
    field(out, "instantaneous_ops_per_sec", ops.round() as u64);
    field(out, "total_net_input_bytes", load(&stats.net_input_bytes));
    field(out, "total_net_output_bytes", load(&stats.net_output_bytes));
    field(
        out,
        "total_net_repl_input_bytes",
        load(&stats.net_repl_input_bytes),
    );
    field(
        out,
        "total_net_repl_output_bytes",
        load(&stats.net_repl_output_bytes),
    );
    field(out, "instantaneous_input_kbps", format!("{input_kbps:.2}"));
    field(
        out,
        "instantaneous_output_kbps",
        format!("{output_kbps:.2}"),
    );
    field(out, "instantaneous_input_repl_kbps", "0.00");
    field(out, "instantaneous_output_repl_kbps", "0.00");
    field(
        out,
        "rejected_connections",
        load(&stats.rejected_connections),
    );
    let replication = &server.replication;
    field(out, "sync_full", load(&replication.sync_full));
    field(out, "sync_partial_ok", load(&replication.sync_partial_ok));
    field(out, "sync_partial_err", load(&replication.sync_partial_err));
    field(out, "expired_keys", load(&stats.expired_keys));
    field(out, "expired_stale_perc", "0.00");
    field(out, "expired_time_cap_reached_count", 0);
    field(out, "expire_cycle_cpu_milliseconds", 0);
    field(out, "evicted_keys", load(&stats.evicted_keys));
    field(
        out,
        "evicted_clients",
        server.clients.evicted.load(Ordering::Relaxed),
    );
    let (total_exceeded_ms, current_exceeded_ms) = server.evictor.exceeded_ms();
    field(out, "total_eviction_exceeded_time", total_exceeded_ms);
    field(out, "current_eviction_exceeded_time", current_exceeded_ms);
    field(out, "keyspace_hits", load(&stats.keyspace_hits));
    field(out, "keyspace_misses", load(&stats.keyspace_misses));
    let pubsub = &server.pubsub;
    field(
        out,
        "pubsub_channels",
        pubsub.channel_count(crate::pubsub::Kind::Channel),
    );
    field(out, "pubsub_patterns", pubsub.pattern_count());
    field(
        out,
        "pubsubshard_channels",
        pubsub.channel_count(crate::pubsub::Kind::Shard),
    );
    // A background job's cut stands for Redis' fork (snapshot::cut_for_job).
    field(
        out,
        "latest_fork_usec",
        server.persistence.latest_fork_us.load(Ordering::Relaxed),
    );
    field(
        out,
        "total_forks",
        server.persistence.forks.load(Ordering::Relaxed),
    );
    field(
        out,
        "migrate_cached_sockets",
        server.migrate_sockets.count(),
    );
    for name in [
        "slave_expires_tracked_keys",
        "active_defrag_hits",
        "active_defrag_misses",
        "active_defrag_key_hits",
        "active_defrag_key_misses",
        "total_active_defrag_time",
        "current_active_defrag_time",
    ] {
        field(out, name, 0);
    }
    field(out, "tracking_total_keys", server.tracking.key_count());
    field(out, "tracking_total_items", server.tracking.item_count());
    field(
        out,
        "tracking_total_prefixes",
        server.tracking.prefix_count(),
    );
    field(out, "unexpected_error_replies", 0);
    field(out, "total_error_replies", load(&stats.total_error_replies));
    field(out, "dump_payload_sanitizations", 0);
    field(
        out,
        "total_reads_processed",
        load(&stats.total_commands_processed),
    );
    field(
        out,
        "total_writes_processed",
        load(&stats.total_commands_processed),
    );
    field(out, "io_threaded_reads_processed", 0);
    field(out, "io_threaded_writes_processed", 0);
    field(
        out,
        "client_query_buffer_limit_disconnections",
        load(&stats.client_query_buffer_limit_disconnections),
    );
    field(
        out,
        "client_output_buffer_limit_disconnections",
        load(&stats.client_output_buffer_limit_disconnections),
    );
    field(out, "reply_buffer_shrinks", 0);
    field(out, "reply_buffer_expands", 0);
    // Latch's own: EVAL/EVALSHA runs of a script recognized as the lock release and run
    // without the Lua VM (`scripting::idiom`).
    field(
        out,
        "scripts_run_without_vm",
        server.scripting.run.runs_without_vm.load(Ordering::Relaxed),
    );
    // Latch's own: how long the server now polls after input before it sleeps (adapted to
    // the gaps between requests, at most busy-poll-us; `busy_poll`).
    field(out, "busy_poll_window_us", crate::busy_poll::window_us());
}

/// CPU seconds (user, system, children's user, children's system) from /proc/self/stat,
/// whose times are in clock ticks of 1/100 s on Linux.
fn cpu_seconds() -> (f64, f64, f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The command name (field 2) may hold spaces; fields after its closing parenthesis are plain.
    let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |index: usize| {
        fields
            .get(index)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 100.0
    };
    // After the name: state is index 0, so utime (field 14) is index 11.
    (ticks(11), ticks(12), ticks(13), ticks(14))
}

fn cpu_section(out: &mut String) {
    let (user, system, children_user, children_system) = cpu_seconds();
    out.push_str("# CPU\r\n");
    field(out, "used_cpu_sys", format!("{system:.6}"));
    field(out, "used_cpu_user", format!("{user:.6}"));
    field(
        out,
        "used_cpu_sys_children",
        format!("{children_system:.6}"),
    );
    field(out, "used_cpu_user_children", format!("{children_user:.6}"));
    field(out, "used_cpu_sys_main_thread", format!("{system:.6}"));
    field(out, "used_cpu_user_main_thread", format!("{user:.6}"));
}

fn commandstats_section(server: &Server, out: &mut String) {
    out.push_str("# Commandstats\r\n");
    for command in table().all() {
        let stats = &server.stats.commands[command.id];
        let calls = stats.calls.load(Ordering::Relaxed);
        let rejected = stats.rejected_calls.load(Ordering::Relaxed);
        let failed = stats.failed_calls.load(Ordering::Relaxed);
        if calls == 0 && rejected == 0 && failed == 0 {
            continue;
        }
        let usec = stats.usec.load(Ordering::Relaxed);
        let per_call = if calls == 0 {
            0.0
        } else {
            usec as f64 / calls as f64
        };
        let _ = write!(
            out,
            "cmdstat_{}:calls={calls},usec={usec},usec_per_call={per_call:.2},rejected_calls={rejected},failed_calls={failed}\r\n",
            command.full_name
        );
    }
}

fn errorstats_section(server: &Server, out: &mut String) {
    out.push_str("# Errorstats\r\n");
    for (prefix, count) in server.stats.errors.lock().iter() {
        let _ = write!(out, "errorstat_{prefix}:count={count}\r\n");
    }
}

/// Each command's latency percentiles (`latency-tracking-info-percentiles`), in
/// microseconds, from its histogram (crate::latency_histogram).
fn latencystats_section(server: &Server, out: &mut String) {
    out.push_str("# Latencystats\r\n");
    let percentiles = server.config.latency_percentiles();
    for command in table().all() {
        let stats = &server.stats.commands[command.id];
        let Some((_, values)) = stats.latency.percentiles(&percentiles) else {
            continue;
        };
        let _ = write!(out, "latency_percentiles_usec_{}:", command.full_name);
        for (i, (p, ns)) in percentiles.iter().zip(values).enumerate() {
            let comma = if i > 0 { "," } else { "" };
            let _ = write!(out, "{comma}p{p}={:.3}", ns as f64 / 1000.0);
        }
        out.push_str("\r\n");
    }
}

/// Keys sampled per database for the average TTL estimate (Redis estimates it too).
const AVG_TTL_SAMPLE: usize = 1000;

fn keyspace_lines(keys: &mut Locked<'_>) -> String {
    let mut out = String::new();
    let now = keys.now();
    for db in 0..keys.keyspace().num_dbs() {
        let count = keys.db_len(db);
        if count == 0 {
            continue;
        }
        let expires = keys.db_expires(db);
        let mut ttl_sum: i128 = 0;
        let mut ttl_count: i128 = 0;
        if expires > 0 {
            keys.scan(db, 0, AVG_TTL_SAMPLE, &mut |slot| {
                if let Some(deadline) = slot.deadline() {
                    ttl_sum += deadline.remaining_ms(now).max(0) as i128;
                    ttl_count += 1;
                }
            });
        }
        let avg_ttl = if ttl_count == 0 {
            0
        } else {
            ttl_sum / ttl_count
        };
        let _ = write!(
            out,
            "db{db}:keys={count},expires={expires},avg_ttl={avg_ttl}\r\n"
        );
    }
    out
}
