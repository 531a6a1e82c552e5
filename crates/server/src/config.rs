//! Configuration: the option table, the config file and command-line parsing (as
//! redis-server does them), and the runtime store behind CONFIG GET / SET / REWRITE.
//!
//! Every option is one [`OptionDef`] entry in [`OPTIONS`]: its name and alias, its kind
//! (bool, number with bounds and unit, enum, string, or one of the special multi-value
//! kinds), its default as it would be written in a config file, flags saying whether it may
//! change at runtime, and an [`Effect`] marker telling whether Latch acts on it or merely
//! accepts, reports and rewrites it the way Redis 7.0 does (so clients and test suites that
//! set it keep working).
//!
//! Values live in one `RwLock`ed vector indexed like the table; every successful CONFIG SET
//! bumps [`Config::epoch`] so connections can cheaply notice when to re-read hot values.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use parking_lot::RwLock;

/// The version named in start-up error banners.
const VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{0}")]
    Invalid(String),
}

/// Option flags (Redis' `*_CONFIG` flags).
pub mod o {
    /// Only settable at start-up.
    pub const IMMUTABLE: u16 = 1 << 0;
    /// Holds a secret (redacted from logs by whoever logs commands).
    pub const SENSITIVE: u16 = 1 << 1;
    /// Useful when debugging (what `DEBUG CONFIG-REWRITE-FORCE-ALL`-like dumps show).
    pub const DEBUG: u16 = 1 << 2;
    /// Takes several arguments (`save 900 1 300 10`).
    pub const MULTI_ARG: u16 = 1 << 3;
    /// Left out of pattern matches in CONFIG GET; an exact name still finds it.
    pub const HIDDEN: u16 = 1 << 4;
    /// Settable at runtime only when `enable-protected-configs` allows it.
    pub const PROTECTED: u16 = 1 << 5;
    /// Refused while a data set is loading.
    pub const DENY_LOADING: u16 = 1 << 6;
}

/// Whether Latch does something with an option: every entry of [`OPTIONS`] says which.
/// An inert option is still accepted, validated, shown by CONFIG GET and rewritten as Redis
/// does (so clients and test suites that set it keep working), but setting it to anything
/// but its default logs a warning, and the README lists it (`tests/inert_options.rs` keeps
/// the table, its own list and the README's in step).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Latch reads the value and behaves accordingly, which includes refusing at start-up a
    /// value it cannot honour (`daemonize yes`, `replicaof`).
    Acts,
    /// Accepted, validated, reported and rewritten as Redis does; no behaviour behind it yet.
    Inert,
}

/// How a number is written and read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A plain integer.
    Plain,
    /// Bytes, with optional units: `100`, `1k` (1000), `1kb` (1024), `5mb`, `2gb`...
    Memory,
    /// Bytes, or a percentage `N%` (stored negative, as Redis does).
    MemoryOrPercent,
    /// Octal digits (`unixsocketperm 700`).
    Octal,
}

/// Options whose values are not a single scalar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Special {
    Dir,
    Save,
    ClientOutputBufferLimit,
    OomScoreAdjValues,
    NotifyKeyspaceEvents,
    Bind,
    ReplicaOf,
    LatencyPercentiles,
}

/// A validation for string options: `Err(message)` refuses the value.
pub type TextCheck = fn(&str) -> Result<(), &'static str>;

#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// `yes` / `no`.
    Bool,
    /// An integer within inclusive bounds. `unsigned` checks bounds as Redis' unsigned
    /// types do (a negative value is out of range rather than a parse error).
    Number {
        min: i128,
        max: i128,
        unsigned: bool,
        format: Format,
    },
    /// One of the names; a `MULTI_ARG` enum is a set of flags (`nosave now`).
    Enum(&'static [(&'static str, i64)]),
    /// A string; `empty_is_null` options are "unset" when empty (and are then left out of a
    /// rewritten config file).
    Text {
        empty_is_null: bool,
        check: Option<TextCheck>,
    },
    Special(Special),
}

/// One entry of the option table.
#[derive(Clone, Copy, Debug)]
pub struct OptionDef {
    pub name: &'static str,
    pub alias: Option<&'static str>,
    pub flags: u16,
    pub kind: Kind,
    /// The default, written as in a config file.
    pub default: &'static str,
    pub effect: Effect,
}

impl OptionDef {
    pub fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }
}

const fn opt(
    name: &'static str,
    alias: Option<&'static str>,
    flags: u16,
    kind: Kind,
    default: &'static str,
    effect: Effect,
) -> OptionDef {
    OptionDef {
        name,
        alias,
        flags,
        kind,
        default,
        effect,
    }
}

const I32_MAX: i128 = i32::MAX as i128;
const I32_MIN: i128 = i32::MIN as i128;
const U32_MAX: i128 = u32::MAX as i128;
const I64_MAX: i128 = i64::MAX as i128;
const U64_MAX: i128 = u64::MAX as i128;

const SUPERVISED: &[(&str, i64)] = &[("upstart", 1), ("systemd", 2), ("auto", 3), ("no", 0)];
pub const SYSLOG_FACILITY: &[(&str, i64)] = &[
    ("user", 8),
    ("local0", 128),
    ("local1", 136),
    ("local2", 144),
    ("local3", 152),
    ("local4", 160),
    ("local5", 168),
    ("local6", 176),
    ("local7", 184),
];
const REPL_DISKLESS_LOAD: &[(&str, i64)] = &[("disabled", 0), ("on-empty-db", 1), ("swapdb", 2)];
/// `nothing` comes from Redis 7.2; the others are 7.0's.
const LOG_FORMAT: &[(&str, i64)] = &[("redis", 0), ("structured", 1)];
pub const LOGLEVEL: &[(&str, i64)] = &[
    ("debug", 0),
    ("verbose", 1),
    ("notice", 2),
    ("warning", 3),
    ("nothing", 4),
];
pub const MAXMEMORY_POLICY: &[(&str, i64)] = &[
    ("volatile-lru", 1),
    ("volatile-lfu", 258),
    ("volatile-random", 768),
    ("volatile-ttl", 512),
    ("allkeys-lru", 1029),
    ("allkeys-lfu", 1286),
    ("allkeys-random", 1540),
    ("noeviction", 1792),
];
const APPENDFSYNC: &[(&str, i64)] = &[("everysec", 2), ("always", 1), ("no", 0)];
const OOM_SCORE_ADJ: &[(&str, i64)] = &[("no", 0), ("yes", 1), ("relative", 1), ("absolute", 2)];
const ACL_PUBSUB_DEFAULT: &[(&str, i64)] = &[("allchannels", 1), ("resetchannels", 0)];
const SANITIZE_DUMP_PAYLOAD: &[(&str, i64)] = &[("no", 0), ("yes", 1), ("clients", 2)];
const PROTECTED_ACTION: &[(&str, i64)] = &[("no", 0), ("yes", 1), ("local", 2)];
const CLUSTER_ENDPOINT_TYPE: &[(&str, i64)] =
    &[("ip", 0), ("hostname", 1), ("unknown-endpoint", 2)];
const PROPAGATION_ERROR_BEHAVIOR: &[(&str, i64)] =
    &[("ignore", 0), ("panic", 1), ("panic-on-replicas", 2)];
/// Flags: SAVE 1, NOSAVE 2, NOW 4, FORCE 8.
const SHUTDOWN_ON_SIG: &[(&str, i64)] = &[
    ("default", 0),
    ("save", 1),
    ("nosave", 2),
    ("now", 4),
    ("force", 8),
];

/// Every option Redis 7.0 knows (TLS options aside), in Redis' table order. One line each:
/// name, alias, flags, kind, default (as written in a config file), whether Latch acts on it.
#[rustfmt::skip]
pub static OPTIONS: &[OptionDef] = &[
    opt("rdbchecksum", None, o::IMMUTABLE, Kind::Bool, "yes", Effect::Inert),
    opt("daemonize", None, o::IMMUTABLE, Kind::Bool, "no", Effect::Acts),
    opt("io-threads-do-reads", None, o::DEBUG | o::IMMUTABLE, Kind::Bool, "no", Effect::Inert),
    opt("always-show-logo", None, o::IMMUTABLE, Kind::Bool, "no", Effect::Acts),
    opt("protected-mode", None, 0, Kind::Bool, "yes", Effect::Acts),
    opt("rdbcompression", None, 0, Kind::Bool, "yes", Effect::Inert),
    opt("rdb-del-sync-files", None, 0, Kind::Bool, "no", Effect::Inert),
    opt("activerehashing", None, 0, Kind::Bool, "yes", Effect::Inert),
    opt("stop-writes-on-bgsave-error", None, 0, Kind::Bool, "yes", Effect::Inert),
    opt("set-proc-title", None, o::IMMUTABLE, Kind::Bool, "yes", Effect::Inert),
    opt("dynamic-hz", None, 0, Kind::Bool, "yes", Effect::Inert),
    opt("lazyfree-lazy-eviction", None, o::DEBUG, Kind::Bool, "no", Effect::Acts),
    opt("lazyfree-lazy-expire", None, o::DEBUG, Kind::Bool, "no", Effect::Acts),
    opt("lazyfree-lazy-server-del", None, o::DEBUG, Kind::Bool, "no", Effect::Acts),
    opt("lazyfree-lazy-user-del", None, o::DEBUG, Kind::Bool, "no", Effect::Acts),
    opt("lazyfree-lazy-user-flush", None, o::DEBUG, Kind::Bool, "no", Effect::Acts),
    opt("repl-disable-tcp-nodelay", None, 0, Kind::Bool, "no", Effect::Inert),
    opt("repl-diskless-sync", None, o::DEBUG, Kind::Bool, "yes", Effect::Acts),
    opt("aof-rewrite-incremental-fsync", None, 0, Kind::Bool, "yes", Effect::Inert),
    opt("no-appendfsync-on-rewrite", None, 0, Kind::Bool, "no", Effect::Inert),
    opt("cluster-require-full-coverage", None, 0, Kind::Bool, "yes", Effect::Inert),
    opt("rdb-save-incremental-fsync", None, 0, Kind::Bool, "yes", Effect::Inert),
    opt("aof-load-truncated", None, 0, Kind::Bool, "yes", Effect::Acts),
    opt("aof-use-rdb-preamble", None, 0, Kind::Bool, "yes", Effect::Acts),
    opt("aof-timestamp-enabled", None, 0, Kind::Bool, "no", Effect::Acts),
    opt("cluster-replica-no-failover", Some("cluster-slave-no-failover"), 0, Kind::Bool, "no", Effect::Inert),
    opt("replica-lazy-flush", Some("slave-lazy-flush"), 0, Kind::Bool, "no", Effect::Inert),
    opt("replica-serve-stale-data", Some("slave-serve-stale-data"), 0, Kind::Bool, "yes", Effect::Acts),
    opt("replica-read-only", Some("slave-read-only"), o::DEBUG, Kind::Bool, "yes", Effect::Acts),
    opt("replica-ignore-maxmemory", Some("slave-ignore-maxmemory"), 0, Kind::Bool, "yes", Effect::Acts),
    opt("jemalloc-bg-thread", None, 0, Kind::Bool, "yes", Effect::Acts),
    opt("activedefrag", None, o::DEBUG, Kind::Bool, "no", Effect::Inert),
    opt("syslog-enabled", None, o::IMMUTABLE, Kind::Bool, "no", Effect::Acts),
    opt("cluster-enabled", None, o::IMMUTABLE, Kind::Bool, "no", Effect::Inert),
    opt("appendonly", None, o::DENY_LOADING, Kind::Bool, "no", Effect::Acts),
    opt("cluster-allow-reads-when-down", None, 0, Kind::Bool, "no", Effect::Inert),
    opt("cluster-allow-pubsubshard-when-down", None, 0, Kind::Bool, "yes", Effect::Inert),
    opt("crash-log-enabled", None, 0, Kind::Bool, "yes", Effect::Acts),
    opt("crash-memcheck-enabled", None, 0, Kind::Bool, "yes", Effect::Inert),
    opt("use-exit-on-panic", None, o::HIDDEN, Kind::Bool, "no", Effect::Inert),
    opt("disable-thp", None, o::IMMUTABLE, Kind::Bool, "yes", Effect::Inert),
    opt("cluster-allow-replica-migration", None, 0, Kind::Bool, "yes", Effect::Inert),
    opt("replica-announced", None, 0, Kind::Bool, "yes", Effect::Acts),
    opt("latency-tracking", None, 0, Kind::Bool, "yes", Effect::Acts),
    opt("aof-disable-auto-gc", None, 0, Kind::Bool, "no", Effect::Inert),
    opt("replica-ignore-disk-write-errors", None, 0, Kind::Bool, "no", Effect::Inert),
    opt("aclfile", None, o::IMMUTABLE, Kind::Text { empty_is_null: false, check: None }, "", Effect::Acts),
    opt("unixsocket", None, o::IMMUTABLE, Kind::Text { empty_is_null: true, check: None }, "", Effect::Acts),
    opt("pidfile", None, o::IMMUTABLE, Kind::Text { empty_is_null: true, check: None }, "", Effect::Acts),
    opt("replica-announce-ip", Some("slave-announce-ip"), 0, Kind::Text { empty_is_null: true, check: None }, "", Effect::Acts),
    opt("masteruser", None, o::SENSITIVE, Kind::Text { empty_is_null: true, check: None }, "", Effect::Acts),
    opt("cluster-announce-ip", None, 0, Kind::Text { empty_is_null: true, check: None }, "", Effect::Inert),
    opt("cluster-config-file", None, o::IMMUTABLE, Kind::Text { empty_is_null: false, check: None }, "nodes.conf", Effect::Inert),
    opt("cluster-announce-hostname", None, 0, Kind::Text { empty_is_null: true, check: Some(check_hostname) }, "", Effect::Inert),
    opt("syslog-ident", None, o::IMMUTABLE, Kind::Text { empty_is_null: false, check: None }, "redis", Effect::Acts),
    opt("dbfilename", None, o::PROTECTED, Kind::Text { empty_is_null: false, check: Some(check_dbfilename) }, "dump.rdb", Effect::Acts),
    opt("appendfilename", None, o::IMMUTABLE, Kind::Text { empty_is_null: false, check: Some(check_appendfilename) }, "appendonly.aof", Effect::Acts),
    opt("appenddirname", None, o::IMMUTABLE, Kind::Text { empty_is_null: false, check: Some(check_appenddirname) }, "appendonlydir", Effect::Acts),
    opt("server_cpulist", None, o::IMMUTABLE, Kind::Text { empty_is_null: true, check: None }, "", Effect::Inert),
    opt("bio_cpulist", None, o::IMMUTABLE, Kind::Text { empty_is_null: true, check: None }, "", Effect::Inert),
    opt("aof_rewrite_cpulist", None, o::IMMUTABLE, Kind::Text { empty_is_null: true, check: None }, "", Effect::Inert),
    opt("bgsave_cpulist", None, o::IMMUTABLE, Kind::Text { empty_is_null: true, check: None }, "", Effect::Inert),
    opt("ignore-warnings", None, 0, Kind::Text { empty_is_null: false, check: None }, "", Effect::Inert),
    opt("proc-title-template", None, 0, Kind::Text { empty_is_null: false, check: Some(check_proc_title) }, "{title} {listen-addr} {server-mode}", Effect::Inert),
    opt("bind-source-addr", None, 0, Kind::Text { empty_is_null: true, check: None }, "", Effect::Acts),
    opt("logfile", None, o::IMMUTABLE, Kind::Text { empty_is_null: false, check: None }, "", Effect::Acts),
    opt("masterauth", None, o::SENSITIVE, Kind::Text { empty_is_null: true, check: None }, "", Effect::Acts),
    opt("requirepass", None, o::SENSITIVE, Kind::Text { empty_is_null: true, check: None }, "", Effect::Acts),
    opt("supervised", None, o::IMMUTABLE, Kind::Enum(SUPERVISED), "no", Effect::Inert),
    opt("syslog-facility", None, o::IMMUTABLE, Kind::Enum(SYSLOG_FACILITY), "local0", Effect::Acts),
    opt("repl-diskless-load", None, o::DEBUG | o::DENY_LOADING, Kind::Enum(REPL_DISKLESS_LOAD), "disabled", Effect::Inert),
    opt("loglevel", None, 0, Kind::Enum(LOGLEVEL), "notice", Effect::Acts),
    // Latch's own: `redis` writes redis-server's log lines, `structured` tracing's (log.rs).
    opt("log-format", None, 0, Kind::Enum(LOG_FORMAT), "redis", Effect::Acts),
    opt("maxmemory-policy", None, 0, Kind::Enum(MAXMEMORY_POLICY), "noeviction", Effect::Acts),
    opt("appendfsync", None, 0, Kind::Enum(APPENDFSYNC), "everysec", Effect::Acts),
    opt("oom-score-adj", None, 0, Kind::Enum(OOM_SCORE_ADJ), "no", Effect::Acts),
    opt("acl-pubsub-default", None, 0, Kind::Enum(ACL_PUBSUB_DEFAULT), "resetchannels", Effect::Acts),
    opt("sanitize-dump-payload", None, o::DEBUG, Kind::Enum(SANITIZE_DUMP_PAYLOAD), "no", Effect::Inert),
    opt("enable-protected-configs", None, o::IMMUTABLE, Kind::Enum(PROTECTED_ACTION), "no", Effect::Acts),
    opt("enable-debug-command", None, o::IMMUTABLE, Kind::Enum(PROTECTED_ACTION), "no", Effect::Acts),
    opt("enable-module-command", None, o::IMMUTABLE, Kind::Enum(PROTECTED_ACTION), "no", Effect::Acts),
    opt("cluster-preferred-endpoint-type", None, 0, Kind::Enum(CLUSTER_ENDPOINT_TYPE), "ip", Effect::Inert),
    opt("propagation-error-behavior", None, 0, Kind::Enum(PROPAGATION_ERROR_BEHAVIOR), "ignore", Effect::Inert),
    opt("shutdown-on-sigint", None, o::MULTI_ARG, Kind::Enum(SHUTDOWN_ON_SIG), "default", Effect::Acts),
    opt("shutdown-on-sigterm", None, o::MULTI_ARG, Kind::Enum(SHUTDOWN_ON_SIG), "default", Effect::Acts),
    opt("databases", None, o::IMMUTABLE, Kind::Number { min: 1, max: I32_MAX, unsigned: false, format: Format::Plain }, "16", Effect::Acts),
    opt("port", None, 0, Kind::Number { min: 0, max: 65535, unsigned: false, format: Format::Plain }, "6379", Effect::Acts),
    opt("io-threads", None, o::DEBUG | o::IMMUTABLE, Kind::Number { min: 1, max: 128, unsigned: false, format: Format::Plain }, "1", Effect::Acts),
    opt("auto-aof-rewrite-percentage", None, 0, Kind::Number { min: 0, max: I32_MAX, unsigned: false, format: Format::Plain }, "100", Effect::Acts),
    opt("cluster-replica-validity-factor", Some("cluster-slave-validity-factor"), 0, Kind::Number { min: 0, max: I32_MAX, unsigned: false, format: Format::Plain }, "10", Effect::Inert),
    opt("list-max-listpack-size", Some("list-max-ziplist-size"), 0, Kind::Number { min: I32_MIN, max: I32_MAX, unsigned: false, format: Format::Plain }, "-2", Effect::Acts),
    opt("tcp-keepalive", None, 0, Kind::Number { min: 0, max: I32_MAX, unsigned: false, format: Format::Plain }, "300", Effect::Acts),
    opt("cluster-migration-barrier", None, 0, Kind::Number { min: 0, max: I32_MAX, unsigned: false, format: Format::Plain }, "1", Effect::Inert),
    opt("active-defrag-cycle-min", None, 0, Kind::Number { min: 1, max: 99, unsigned: false, format: Format::Plain }, "1", Effect::Inert),
    opt("active-defrag-cycle-max", None, 0, Kind::Number { min: 1, max: 99, unsigned: false, format: Format::Plain }, "25", Effect::Inert),
    opt("active-defrag-threshold-lower", None, 0, Kind::Number { min: 0, max: 1000, unsigned: false, format: Format::Plain }, "10", Effect::Inert),
    opt("active-defrag-threshold-upper", None, 0, Kind::Number { min: 0, max: 1000, unsigned: false, format: Format::Plain }, "100", Effect::Inert),
    opt("lfu-log-factor", None, 0, Kind::Number { min: 0, max: I32_MAX, unsigned: false, format: Format::Plain }, "10", Effect::Acts),
    opt("lfu-decay-time", None, 0, Kind::Number { min: 0, max: I32_MAX, unsigned: false, format: Format::Plain }, "1", Effect::Acts),
    opt("replica-priority", Some("slave-priority"), 0, Kind::Number { min: 0, max: I32_MAX, unsigned: false, format: Format::Plain }, "100", Effect::Acts),
    opt("repl-diskless-sync-delay", None, 0, Kind::Number { min: 0, max: I32_MAX, unsigned: false, format: Format::Plain }, "5", Effect::Acts),
    opt("maxmemory-samples", None, 0, Kind::Number { min: 1, max: I32_MAX, unsigned: false, format: Format::Plain }, "5", Effect::Acts),
    opt("maxmemory-eviction-tenacity", None, 0, Kind::Number { min: 0, max: 100, unsigned: false, format: Format::Plain }, "10", Effect::Acts),
    opt("timeout", None, 0, Kind::Number { min: 0, max: I32_MAX, unsigned: false, format: Format::Plain }, "0", Effect::Acts),
    opt("replica-announce-port", Some("slave-announce-port"), 0, Kind::Number { min: 0, max: 65535, unsigned: false, format: Format::Plain }, "0", Effect::Acts),
    opt("tcp-backlog", None, o::IMMUTABLE, Kind::Number { min: 0, max: I32_MAX, unsigned: false, format: Format::Plain }, "511", Effect::Inert),
    opt("cluster-port", None, o::IMMUTABLE, Kind::Number { min: 0, max: 65535, unsigned: false, format: Format::Plain }, "0", Effect::Inert),
    opt("cluster-announce-bus-port", None, 0, Kind::Number { min: 0, max: 65535, unsigned: false, format: Format::Plain }, "0", Effect::Inert),
    opt("cluster-announce-port", None, 0, Kind::Number { min: 0, max: 65535, unsigned: false, format: Format::Plain }, "0", Effect::Inert),
    opt("cluster-announce-tls-port", None, 0, Kind::Number { min: 0, max: 65535, unsigned: false, format: Format::Plain }, "0", Effect::Inert),
    opt("repl-timeout", None, 0, Kind::Number { min: 1, max: I32_MAX, unsigned: false, format: Format::Plain }, "60", Effect::Acts),
    opt("repl-ping-replica-period", Some("repl-ping-slave-period"), 0, Kind::Number { min: 1, max: I32_MAX, unsigned: false, format: Format::Plain }, "10", Effect::Acts),
    opt("list-compress-depth", None, o::DEBUG, Kind::Number { min: 0, max: I32_MAX, unsigned: false, format: Format::Plain }, "0", Effect::Acts),
    opt("rdb-key-save-delay", None, o::HIDDEN, Kind::Number { min: I32_MIN, max: I32_MAX, unsigned: false, format: Format::Plain }, "0", Effect::Acts),
    opt("key-load-delay", None, o::HIDDEN, Kind::Number { min: I32_MIN, max: I32_MAX, unsigned: false, format: Format::Plain }, "0", Effect::Acts),
    opt("active-expire-effort", None, 0, Kind::Number { min: 1, max: 10, unsigned: false, format: Format::Plain }, "1", Effect::Inert),
    opt("hz", None, 0, Kind::Number { min: 0, max: I32_MAX, unsigned: false, format: Format::Plain }, "10", Effect::Acts),
    opt("min-replicas-to-write", Some("min-slaves-to-write"), 0, Kind::Number { min: 0, max: I32_MAX, unsigned: false, format: Format::Plain }, "0", Effect::Acts),
    opt("min-replicas-max-lag", Some("min-slaves-max-lag"), 0, Kind::Number { min: 0, max: I32_MAX, unsigned: false, format: Format::Plain }, "10", Effect::Acts),
    opt("watchdog-period", None, o::HIDDEN, Kind::Number { min: 0, max: I32_MAX, unsigned: false, format: Format::Plain }, "0", Effect::Inert),
    opt("shutdown-timeout", None, 0, Kind::Number { min: 0, max: I32_MAX, unsigned: false, format: Format::Plain }, "10", Effect::Inert),
    opt("repl-diskless-sync-max-replicas", None, 0, Kind::Number { min: 0, max: I32_MAX, unsigned: false, format: Format::Plain }, "0", Effect::Acts),
    opt("maxclients", None, 0, Kind::Number { min: 1, max: U32_MAX, unsigned: true, format: Format::Plain }, "10000", Effect::Acts),
    opt("unixsocketperm", None, o::IMMUTABLE, Kind::Number { min: 0, max: 0o777, unsigned: true, format: Format::Octal }, "0", Effect::Acts),
    opt("socket-mark-id", None, o::IMMUTABLE, Kind::Number { min: 0, max: U32_MAX, unsigned: true, format: Format::Plain }, "0", Effect::Inert),
    opt("active-defrag-max-scan-fields", None, 0, Kind::Number { min: 1, max: I64_MAX, unsigned: true, format: Format::Plain }, "1000", Effect::Inert),
    opt("slowlog-max-len", None, 0, Kind::Number { min: 0, max: I64_MAX, unsigned: true, format: Format::Plain }, "128", Effect::Acts),
    opt("acllog-max-len", None, 0, Kind::Number { min: 0, max: I64_MAX, unsigned: true, format: Format::Plain }, "128", Effect::Acts),
    opt("busy-reply-threshold", Some("lua-time-limit"), 0, Kind::Number { min: 0, max: I64_MAX, unsigned: false, format: Format::Plain }, "5000", Effect::Acts),
    // Latch's own: after an unclean shutdown, refuse writes this many milliseconds (the
    // Redlock page's "delayed restart"), 0 to never.
    opt("restart-delay", None, 0, Kind::Number { min: 0, max: I64_MAX, unsigned: false, format: Format::Plain }, "0", Effect::Acts),
    // Latch's own: microseconds the runtime keeps polling its sockets after a request
    // before it sleeps (busy_poll.rs), 0 to never.
    opt("busy-poll-us", None, 0, Kind::Number { min: 0, max: 1_000_000, unsigned: false, format: Format::Plain }, "50", Effect::Acts),
    opt("cluster-node-timeout", None, 0, Kind::Number { min: 0, max: I64_MAX, unsigned: false, format: Format::Plain }, "15000", Effect::Inert),
    opt("slowlog-log-slower-than", None, 0, Kind::Number { min: -1, max: I64_MAX, unsigned: false, format: Format::Plain }, "10000", Effect::Acts),
    opt("latency-monitor-threshold", None, 0, Kind::Number { min: 0, max: I64_MAX, unsigned: false, format: Format::Plain }, "0", Effect::Acts),
    opt("proto-max-bulk-len", None, o::DEBUG, Kind::Number { min: 1048576, max: I64_MAX, unsigned: false, format: Format::Memory }, "536870912", Effect::Acts),
    opt("stream-node-max-entries", None, 0, Kind::Number { min: 0, max: I64_MAX, unsigned: false, format: Format::Plain }, "100", Effect::Acts),
    opt("repl-backlog-size", None, 0, Kind::Number { min: 1, max: I64_MAX, unsigned: false, format: Format::Memory }, "1048576", Effect::Acts),
    opt("maxmemory", None, 0, Kind::Number { min: 0, max: U64_MAX, unsigned: true, format: Format::Memory }, "0", Effect::Acts),
    opt("cluster-link-sendbuf-limit", None, 0, Kind::Number { min: 0, max: U64_MAX, unsigned: true, format: Format::Memory }, "0", Effect::Inert),
    opt("hash-max-listpack-entries", Some("hash-max-ziplist-entries"), 0, Kind::Number { min: 0, max: I64_MAX, unsigned: true, format: Format::Plain }, "512", Effect::Acts),
    opt("set-max-intset-entries", None, 0, Kind::Number { min: 0, max: I64_MAX, unsigned: true, format: Format::Plain }, "512", Effect::Acts),
    opt("zset-max-listpack-entries", Some("zset-max-ziplist-entries"), 0, Kind::Number { min: 0, max: I64_MAX, unsigned: true, format: Format::Plain }, "128", Effect::Acts),
    opt("active-defrag-ignore-bytes", None, 0, Kind::Number { min: 1, max: I64_MAX, unsigned: true, format: Format::Memory }, "104857600", Effect::Inert),
    opt("hash-max-listpack-value", Some("hash-max-ziplist-value"), 0, Kind::Number { min: 0, max: I64_MAX, unsigned: true, format: Format::Memory }, "64", Effect::Acts),
    opt("stream-node-max-bytes", None, 0, Kind::Number { min: 0, max: I64_MAX, unsigned: true, format: Format::Memory }, "4096", Effect::Acts),
    opt("zset-max-listpack-value", Some("zset-max-ziplist-value"), 0, Kind::Number { min: 0, max: I64_MAX, unsigned: true, format: Format::Memory }, "64", Effect::Acts),
    opt("hll-sparse-max-bytes", None, 0, Kind::Number { min: 0, max: I64_MAX, unsigned: true, format: Format::Memory }, "3000", Effect::Acts),
    opt("tracking-table-max-keys", None, 0, Kind::Number { min: 0, max: I64_MAX, unsigned: true, format: Format::Plain }, "1000000", Effect::Acts),
    opt("client-query-buffer-limit", None, o::DEBUG, Kind::Number { min: 1048576, max: I64_MAX, unsigned: true, format: Format::Memory }, "1073741824", Effect::Acts),
    opt("maxmemory-clients", None, 0, Kind::Number { min: -100, max: I64_MAX, unsigned: false, format: Format::MemoryOrPercent }, "0", Effect::Acts),
    opt("repl-backlog-ttl", None, 0, Kind::Number { min: 0, max: I64_MAX, unsigned: false, format: Format::Plain }, "3600", Effect::Acts),
    opt("auto-aof-rewrite-min-size", None, 0, Kind::Number { min: 0, max: I64_MAX, unsigned: false, format: Format::Memory }, "67108864", Effect::Acts),
    opt("loading-process-events-interval-bytes", None, o::HIDDEN, Kind::Number { min: 1024, max: I32_MAX, unsigned: false, format: Format::Plain }, "2097152", Effect::Acts),
    opt("dir", None, o::PROTECTED | o::DENY_LOADING, Kind::Special(Special::Dir), "", Effect::Acts),
    opt("save", None, o::MULTI_ARG, Kind::Special(Special::Save), "3600 1 300 100 60 10000", Effect::Acts),
    opt("client-output-buffer-limit", None, o::MULTI_ARG, Kind::Special(Special::ClientOutputBufferLimit), "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60", Effect::Acts),
    opt("oom-score-adj-values", None, o::MULTI_ARG, Kind::Special(Special::OomScoreAdjValues), "0 200 800", Effect::Acts),
    opt("notify-keyspace-events", None, 0, Kind::Special(Special::NotifyKeyspaceEvents), "", Effect::Acts),
    opt("bind", None, o::MULTI_ARG, Kind::Special(Special::Bind), "* -::*", Effect::Acts),
    opt("replicaof", Some("slaveof"), o::IMMUTABLE | o::MULTI_ARG, Kind::Special(Special::ReplicaOf), "", Effect::Acts),
    opt("latency-tracking-info-percentiles", None, o::MULTI_ARG, Kind::Special(Special::LatencyPercentiles), "50 99 99.9", Effect::Acts),
];

/// Names longer than this are never options (lookups skip them).
const MAX_NAME_LEN: usize = 64;
/// Most addresses `bind` accepts, as Redis.
const BIND_MAX: usize = 16;
/// `include` nesting deeper than this is refused (a file including itself would loop).
const INCLUDE_MAX_DEPTH: usize = 16;
const REWRITE_SIGNATURE: &str = "# Generated by CONFIG REWRITE";

/// Name (lower-case) → (table index, is the alias).
fn registry() -> &'static HashMap<&'static str, (usize, bool)> {
    static REGISTRY: OnceLock<HashMap<&'static str, (usize, bool)>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut map = HashMap::new();
        for (index, def) in OPTIONS.iter().enumerate() {
            map.insert(def.name, (index, false));
            if let Some(alias) = def.alias {
                map.insert(alias, (index, true));
            }
        }
        map
    })
}

/// Finds an option by name or alias, any case: (table index, the entry's own name).
pub fn lookup(name: &str) -> Option<(usize, &'static str)> {
    if name.len() > MAX_NAME_LEN {
        return None;
    }
    let lower = name.to_ascii_lowercase();
    let &(index, is_alias) = registry().get(lower.as_str())?;
    let def = &OPTIONS[index];
    Some((
        index,
        if is_alias {
            def.alias.unwrap_or(def.name)
        } else {
            def.name
        },
    ))
}

/// The definition of an option by name or alias.
pub fn option(name: &str) -> Option<&'static OptionDef> {
    lookup(name).map(|(index, _)| &OPTIONS[index])
}

/// One client class of `client-output-buffer-limit`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BufferLimit {
    pub hard_bytes: u64,
    pub soft_bytes: u64,
    pub soft_seconds: i64,
}

/// Client classes in Redis' order: normal, replica (written `slave`), pubsub.
const CLIENT_CLASSES: [&str; 3] = ["normal", "slave", "pubsub"];

/// An option's current value.
#[derive(Clone, Debug, PartialEq)]
enum Value {
    /// Bools (0/1), numbers, enums (flags for multi-arg ones).
    Int(i128),
    /// Strings; `None` is unset.
    Text(Option<String>),
    /// `save`: (seconds, changes) pairs.
    Save(Vec<(i64, i64)>),
    Buffers([BufferLimit; 3]),
    /// `oom-score-adj-values`.
    Ints(Vec<i64>),
    /// `bind`.
    Words(Vec<String>),
    /// `replicaof`: host and port, or none.
    Master(Option<(String, i64)>),
    /// `latency-tracking-info-percentiles`.
    Floats(Vec<f64>),
    /// `dir`: the process' working directory is the value.
    Dir,
}

impl Value {
    fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(n) => Some((*n).clamp(i64::MIN as i128, i64::MAX as i128) as i64),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Text helpers shared with redis-server's formats.
// ---------------------------------------------------------------------------------------

/// Splits a config line into arguments with Redis' quoting rules (`sdssplitargs`: the same
/// rules as inline commands, so the protocol crate's splitter serves both). `None` on
/// unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut words = Vec::new();
    latch_protocol::request::split_args(&bytes::Bytes::copy_from_slice(line), &mut words)
        .then(|| words.into_iter().map(|w| w.to_vec()).collect())
}

fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// Quotes a string the way Redis' `sdscatrepr` does, so [`split_args`] reads it back.
pub fn repr(text: &[u8]) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for &c in text {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            7 => out.push_str("\\a"),
            8 => out.push_str("\\b"),
            c if (0x20..0x7f).contains(&c) => out.push(c as char),
            c => out.push_str(&format!("\\x{c:02x}")),
        }
    }
    out.push('"');
    out
}

/// Bytes with an optional unit (b, k, kb, m, mb, g, gb; any case), as Redis' `memtoull`.
pub fn parse_memory(text: &str) -> Option<u64> {
    if text.starts_with('-') {
        return None;
    }
    let digits_end = text
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(digits_end);
    let multiplier: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    // Like strtoull on an empty digit run, no digits reads as 0.
    let value: u64 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    value.checked_mul(multiplier)
}

/// Redis' `rewriteConfigFormatMemory`: the largest of gb/mb/kb that divides the value.
fn format_memory(bytes: i128) -> String {
    const GB: i128 = 1024 * 1024 * 1024;
    const MB: i128 = 1024 * 1024;
    const KB: i128 = 1024;
    if bytes != 0 && bytes % GB == 0 {
        format!("{}gb", bytes / GB)
    } else if bytes != 0 && bytes % MB == 0 {
        format!("{}mb", bytes / MB)
    } else if bytes != 0 && bytes % KB == 0 {
        format!("{}kb", bytes / KB)
    } else {
        bytes.to_string()
    }
}

/// C's `strtoll(text, &end, base)` followed by a check that the whole text was consumed:
/// leading blanks and a sign are allowed, no digits reads as 0, overflow saturates.
fn c_strtoll_full(text: &str, base: u32) -> Option<i64> {
    let trimmed = text.trim_start_matches(|c: char| c.is_ascii() && is_c_space(c as u8));
    let (negative, digits) = match trimmed.as_bytes().first() {
        Some(b'-') => (true, &trimmed[1..]),
        Some(b'+') => (false, &trimmed[1..]),
        _ => (false, trimmed),
    };
    if digits.is_empty() {
        // strtoll consumed nothing: the end pointer is the start; only an empty text passes.
        return if text.is_empty() { Some(0) } else { None };
    }
    let mut value: i128 = 0;
    for c in digits.chars() {
        let digit = c.to_digit(base)? as i128;
        value = (value * base as i128 + digit).min(i64::MAX as i128 + 1);
    }
    let value = if negative { -value } else { value };
    Some(value.clamp(i64::MIN as i128, i64::MAX as i128) as i64)
}

/// A strict integer (Redis' `string2ll`): optional `-`, digits, no leading zeros or blanks.
fn parse_strict_i64(text: &str) -> Option<i64> {
    latch_keyspace::parse_i64_strict(text.as_bytes())
}

/// A strict float (Redis' `string2d`): no blanks, not NaN.
fn parse_strict_f64(text: &str) -> Option<f64> {
    if text.is_empty() || text.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let value: f64 = text.parse().ok()?;
    if value.is_nan() {
        None
    } else {
        Some(value)
    }
}

/// `%f` then trailing zeros (and a bare point) removed, as Redis' `trimDoubleString`.
fn format_percentile(value: f64) -> String {
    let text = format!("{value:.6}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// The OS error text without Rust's " (os error N)" suffix, as C's `strerror`.
pub(crate) fn strerror(error: &std::io::Error) -> String {
    let text = error.to_string();
    match text.find(" (os error") {
        Some(cut) => text[..cut].to_string(),
        None => text,
    }
}

// Keyspace event classes: the bits `crate::pubsub::notify` publishes by.
use crate::pubsub::notify;
const NOTIFY_KEYSPACE: i64 = notify::KEYSPACE as i64;
const NOTIFY_KEYEVENT: i64 = notify::KEYEVENT as i64;
const NOTIFY_GENERIC: i64 = notify::GENERIC as i64;
const NOTIFY_STRING: i64 = notify::STRING as i64;
const NOTIFY_LIST: i64 = notify::LIST as i64;
const NOTIFY_SET: i64 = notify::SET as i64;
const NOTIFY_HASH: i64 = notify::HASH as i64;
const NOTIFY_ZSET: i64 = notify::ZSET as i64;
const NOTIFY_EXPIRED: i64 = notify::EXPIRED as i64;
const NOTIFY_EVICTED: i64 = notify::EVICTED as i64;
const NOTIFY_STREAM: i64 = notify::STREAM as i64;
const NOTIFY_KEY_MISS: i64 = notify::KEY_MISS as i64;
const NOTIFY_MODULE: i64 = notify::MODULE as i64;
const NOTIFY_NEW: i64 = notify::NEW as i64;
const NOTIFY_ALL: i64 = NOTIFY_GENERIC
    | NOTIFY_STRING
    | NOTIFY_LIST
    | NOTIFY_SET
    | NOTIFY_HASH
    | NOTIFY_ZSET
    | NOTIFY_EXPIRED
    | NOTIFY_EVICTED
    | NOTIFY_STREAM
    | NOTIFY_MODULE;
/// The per-class letters, in the order Redis prints them.
const NOTIFY_CLASSES: &[(char, i64)] = &[
    ('g', NOTIFY_GENERIC),
    ('$', NOTIFY_STRING),
    ('l', NOTIFY_LIST),
    ('s', NOTIFY_SET),
    ('h', NOTIFY_HASH),
    ('z', NOTIFY_ZSET),
    ('x', NOTIFY_EXPIRED),
    ('e', NOTIFY_EVICTED),
    ('t', NOTIFY_STREAM),
    ('d', NOTIFY_MODULE),
    ('n', NOTIFY_NEW),
];

/// `notify-keyspace-events` letters to flags; `None` on an unknown letter.
pub fn notify_flags_from_str(classes: &str) -> Option<i64> {
    let mut flags = 0;
    for c in classes.chars() {
        flags |= match c {
            'A' => NOTIFY_ALL,
            'K' => NOTIFY_KEYSPACE,
            'E' => NOTIFY_KEYEVENT,
            'm' => NOTIFY_KEY_MISS,
            other => {
                NOTIFY_CLASSES
                    .iter()
                    .find(|(letter, _)| *letter == other)?
                    .1
            }
        };
    }
    Some(flags)
}

/// Flags back to the canonical letters (`A` when every class is on).
pub fn notify_flags_to_string(flags: i64) -> String {
    let mut out = String::new();
    if flags & NOTIFY_ALL == NOTIFY_ALL {
        // As Redis: `A` stands for the classes, and `n` is not shown next to it.
        out.push('A');
    } else {
        for &(letter, flag) in NOTIFY_CLASSES {
            if flags & flag != 0 {
                out.push(letter);
            }
        }
    }
    for (letter, flag) in [
        ('K', NOTIFY_KEYSPACE),
        ('E', NOTIFY_KEYEVENT),
        ('m', NOTIFY_KEY_MISS),
    ] {
        if flags & flag != 0 {
            out.push(letter);
        }
    }
    out
}

// String option validations, with Redis' messages.

fn is_base_name(path: &str) -> bool {
    !path.contains('/') && !path.contains('\\')
}

fn check_dbfilename(value: &str) -> Result<(), &'static str> {
    if is_base_name(value) {
        Ok(())
    } else {
        Err("dbfilename can't be a path, just a filename")
    }
}

fn check_appendfilename(value: &str) -> Result<(), &'static str> {
    if value.is_empty() {
        Err("appendfilename can't be empty")
    } else if !is_base_name(value) {
        Err("appendfilename can't be a path, just a filename")
    } else {
        Ok(())
    }
}

fn check_appenddirname(value: &str) -> Result<(), &'static str> {
    if value.is_empty() {
        Err("appenddirname can't be empty")
    } else if !is_base_name(value) {
        Err("appenddirname can't be a path, just a dirname")
    } else {
        Ok(())
    }
}

fn check_hostname(value: &str) -> Result<(), &'static str> {
    if value.len() >= 256 {
        return Err("Hostnames must be less than 256 characters");
    }
    if value
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.')
    {
        Ok(())
    } else {
        Err("Hostnames may only contain alphanumeric characters, hyphens or dots")
    }
}

fn check_proc_title(value: &str) -> Result<(), &'static str> {
    const VARIABLES: &[&str] = &[
        "{title}",
        "{listen-addr}",
        "{server-mode}",
        "{port}",
        "{tls-port}",
        "{unixsocket}",
        "{config-file}",
    ];
    let invalid = "template format is invalid or contains unknown variables";
    let mut rest = value;
    while let Some(open) = rest.find(['{', '}']) {
        if rest[open..].starts_with('}') {
            return Err(invalid);
        }
        let close = rest[open..].find('}').ok_or(invalid)? + open;
        if !VARIABLES.contains(&&rest[open..=close]) {
            return Err(invalid);
        }
        rest = &rest[close + 1..];
    }
    // An all-blank title would leave `ps` with nothing to show.
    if value.trim().is_empty() {
        return Err(invalid);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Parsing, showing and rewriting values.
// ---------------------------------------------------------------------------------------

/// Parses the arguments given for an option into a value. `current` is the value now in
/// force (client-output-buffer-limit only replaces the classes it names).
fn parse_value(def: &OptionDef, args: &[String], current: &Value) -> Result<Value, String> {
    let single = || -> Result<&str, String> {
        match args {
            [one] => Ok(one.as_str()),
            _ => Err("wrong number of arguments".to_string()),
        }
    };
    match def.kind {
        Kind::Bool => match single()?.to_ascii_lowercase().as_str() {
            "yes" => Ok(Value::Int(1)),
            "no" => Ok(Value::Int(0)),
            _ => Err("argument must be 'yes' or 'no'".to_string()),
        },
        Kind::Number {
            min,
            max,
            unsigned,
            format,
        } => {
            let text = single()?;
            let value = parse_number(text, format)?;
            let in_range = if unsigned {
                value >= 0 && value >= min && value <= max
            } else if format == Format::MemoryOrPercent && value < 0 {
                if value < min {
                    return Err(format!(
                        "percentage argument must be less or equal to {}",
                        -min
                    ));
                }
                true
            } else {
                value >= min && value <= max
            };
            if !in_range {
                return Err(if format == Format::Octal {
                    format!("argument must be between {min:o} and {max:o} inclusive")
                } else {
                    format!("argument must be between {min} and {max} inclusive")
                });
            }
            Ok(Value::Int(value))
        }
        Kind::Enum(names) => {
            let flags = def.has(o::MULTI_ARG);
            let mut value = 0i64;
            let mut matched_all = !args.is_empty() && (flags || args.len() == 1);
            for arg in args {
                match names
                    .iter()
                    .find(|(name, _)| name.eq_ignore_ascii_case(arg))
                {
                    Some((_, v)) => value |= v,
                    None => matched_all = false,
                }
            }
            if !matched_all {
                let list: Vec<&str> = names.iter().map(|(name, _)| *name).collect();
                return Err(format!(
                    "argument(s) must be one of the following: {}",
                    list.join(", ")
                ));
            }
            if def.name.starts_with("shutdown-on-sig") && value & 1 != 0 && value & 2 != 0 {
                return Err(
                    "shutdown options SAVE and NOSAVE can't be used simultaneously".to_string(),
                );
            }
            Ok(Value::Int(value as i128))
        }
        Kind::Text {
            empty_is_null,
            check,
        } => {
            let text = single()?;
            if let Some(check) = check {
                check(text).map_err(str::to_string)?;
            }
            Ok(Value::Text(if empty_is_null && text.is_empty() {
                None
            } else {
                Some(text.to_string())
            }))
        }
        Kind::Special(special) => parse_special(special, args, current),
    }
}

fn parse_number(text: &str, format: Format) -> Result<i128, String> {
    match format {
        Format::Plain => parse_strict_i64(text)
            .map(i128::from)
            .ok_or_else(|| "argument couldn't be parsed into an integer".to_string()),
        Format::Memory => parse_memory(text)
            .map(i128::from)
            .ok_or_else(|| "argument must be a memory value".to_string()),
        Format::MemoryOrPercent => {
            if let Some(bytes) = parse_memory(text) {
                return Ok(bytes as i128);
            }
            if let Some(number) = text
                .strip_suffix('%')
                .filter(|n| !n.is_empty())
                .and_then(parse_strict_i64)
            {
                if number >= 0 {
                    return Ok(-(number as i128));
                }
            }
            Err("argument must be a memory or percent value".to_string())
        }
        Format::Octal => c_strtoll_full(text, 8)
            .map(i128::from)
            .ok_or_else(|| "argument couldn't be parsed as an octal number".to_string()),
    }
}

fn parse_special(special: Special, args: &[String], current: &Value) -> Result<Value, String> {
    let empty_single = args.len() == 1 && args[0].is_empty();
    match special {
        Special::Dir => match args {
            [path] => Ok(Value::Text(Some(path.clone()))),
            _ => Err("wrong number of arguments".to_string()),
        },
        Special::Save => {
            let args = if empty_single { &args[..0] } else { args };
            let invalid = || "Invalid save parameters".to_string();
            if !args.len().is_multiple_of(2) {
                return Err(invalid());
            }
            let mut pairs = Vec::with_capacity(args.len() / 2);
            for pair in args.chunks(2) {
                let seconds = c_strtoll_full(&pair[0], 10).ok_or_else(invalid)?;
                let changes = c_strtoll_full(&pair[1], 10).ok_or_else(invalid)?;
                if seconds < 1 || changes < 0 {
                    return Err(invalid());
                }
                pairs.push((seconds, changes));
            }
            Ok(Value::Save(pairs))
        }
        Special::ClientOutputBufferLimit => {
            if !args.len().is_multiple_of(4) {
                return Err("Wrong number of arguments in buffer limit configuration.".to_string());
            }
            let mut limits = match current {
                Value::Buffers(limits) => *limits,
                _ => default_buffer_limits(),
            };
            // Check every class before changing any, so a bad one refuses the whole value.
            let mut updated = limits;
            for group in args.chunks(4) {
                let class = match group[0].to_ascii_lowercase().as_str() {
                    "normal" => 0,
                    "slave" | "replica" => 1,
                    "pubsub" => 2,
                    _ => {
                        return Err(
                            "Invalid client class specified in buffer limit configuration."
                                .to_string(),
                        )
                    }
                };
                let bad = || {
                    "Error in hard, soft or soft_seconds setting in buffer limit configuration."
                        .to_string()
                };
                let hard_bytes = parse_memory(&group[1]).ok_or_else(bad)?;
                let soft_bytes = parse_memory(&group[2]).ok_or_else(bad)?;
                let soft_seconds = c_strtoll_full(&group[3], 10)
                    .filter(|s| *s >= 0)
                    .ok_or_else(bad)?;
                updated[class] = BufferLimit {
                    hard_bytes,
                    soft_bytes,
                    soft_seconds,
                };
            }
            limits = updated;
            Ok(Value::Buffers(limits))
        }
        Special::OomScoreAdjValues => {
            if args.len() != 3 {
                return Err("wrong number of arguments".to_string());
            }
            let mut values = Vec::with_capacity(3);
            for arg in args {
                match c_strtoll_full(arg, 10) {
                    Some(v) if (-2000..=2000).contains(&v) => values.push(v),
                    _ => return Err(
                        "Invalid oom-score-adj-values, elements must be between -2000 and 2000."
                            .to_string(),
                    ),
                }
            }
            Ok(Value::Ints(values))
        }
        Special::NotifyKeyspaceEvents => match args {
            [classes] => notify_flags_from_str(classes)
                .map(|flags| Value::Int(flags as i128))
                .ok_or_else(|| "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".to_string()),
            _ => Err("wrong number of arguments".to_string()),
        },
        Special::Bind => {
            if args.len() > BIND_MAX {
                return Err("Too many bind addresses specified.".to_string());
            }
            Ok(Value::Words(if empty_single {
                Vec::new()
            } else {
                args.to_vec()
            }))
        }
        Special::ReplicaOf => {
            let [host, port] = args else {
                return Err("wrong number of arguments".to_string());
            };
            if host.eq_ignore_ascii_case("no") && port.eq_ignore_ascii_case("one") {
                return Ok(Value::Master(None));
            }
            match c_strtoll_full(port, 10) {
                Some(port) if (0..=65535).contains(&port) => {
                    Ok(Value::Master(Some((host.clone(), port))))
                }
                _ => Err("Invalid master port".to_string()),
            }
        }
        Special::LatencyPercentiles => {
            let args = if empty_single { &args[..0] } else { args };
            let mut values = Vec::with_capacity(args.len());
            for arg in args {
                let value = parse_strict_f64(arg).ok_or_else(|| {
                    "Invalid latency-tracking-info-percentiles parameters".to_string()
                })?;
                if !(0.0..=100.0).contains(&value) {
                    return Err("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]".to_string());
                }
                values.push(value);
            }
            Ok(Value::Floats(values))
        }
    }
}

fn default_buffer_limits() -> [BufferLimit; 3] {
    [
        BufferLimit {
            hard_bytes: 0,
            soft_bytes: 0,
            soft_seconds: 0,
        },
        BufferLimit {
            hard_bytes: 256 << 20,
            soft_bytes: 64 << 20,
            soft_seconds: 60,
        },
        BufferLimit {
            hard_bytes: 32 << 20,
            soft_bytes: 8 << 20,
            soft_seconds: 60,
        },
    ]
}

/// The default value of an option (its default text parsed like any value).
fn default_value(def: &OptionDef) -> Value {
    match def.kind {
        Kind::Special(Special::Dir) => return Value::Dir,
        Kind::Special(Special::ReplicaOf) => return Value::Master(None),
        _ => {}
    }
    let args: Vec<String> = if def.has(o::MULTI_ARG) {
        def.default
            .split(' ')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    } else {
        vec![def.default.to_string()]
    };
    let args = if args.is_empty() {
        vec![String::new()]
    } else {
        args
    };
    let start = match def.kind {
        Kind::Special(Special::ClientOutputBufferLimit) => Value::Buffers(default_buffer_limits()),
        _ => Value::Int(0),
    };
    parse_value(def, &args, &start).unwrap_or(start)
}

fn current_dir_text() -> String {
    std::env::current_dir()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The value as CONFIG GET shows it.
/// The warning an inert option holding `value` deserves: `None` when the option acts or
/// holds its default (as CONFIG GET would show either). A secret's value is not repeated.
fn inert_warning(def: &OptionDef, value: &Value) -> Option<String> {
    if def.effect != Effect::Inert {
        return None;
    }
    let shown = show_value(def, value);
    if shown == show_value(def, &default_value(def)) {
        return None;
    }
    let shown = if def.has(o::SENSITIVE) {
        "a value".to_string()
    } else {
        format!("'{shown}'")
    };
    Some(format!(
        "option '{}' set to {shown}: accepted for compatibility, but it has no effect in Latch yet",
        def.name
    ))
}

fn show_value(def: &OptionDef, value: &Value) -> String {
    match (def.kind, value) {
        (Kind::Bool, Value::Int(n)) => (if *n != 0 { "yes" } else { "no" }).to_string(),
        (Kind::Number { format, .. }, Value::Int(n)) => match format {
            Format::MemoryOrPercent if *n < 0 => format!("{}%", -n),
            Format::Octal => format!("{n:o}"),
            _ => n.to_string(),
        },
        (Kind::Enum(names), Value::Int(n)) => enum_name(names, *n as i64, def.has(o::MULTI_ARG)),
        (Kind::Special(Special::NotifyKeyspaceEvents), Value::Int(n)) => {
            notify_flags_to_string(*n as i64)
        }
        (_, Value::Int(n)) => n.to_string(),
        (_, Value::Text(text)) => text.clone().unwrap_or_default(),
        (_, Value::Save(pairs)) => pairs
            .iter()
            .map(|(s, c)| format!("{s} {c}"))
            .collect::<Vec<_>>()
            .join(" "),
        (_, Value::Buffers(limits)) => limits
            .iter()
            .zip(CLIENT_CLASSES)
            .map(|(l, class)| {
                format!(
                    "{class} {} {} {}",
                    l.hard_bytes, l.soft_bytes, l.soft_seconds
                )
            })
            .collect::<Vec<_>>()
            .join(" "),
        (_, Value::Ints(values)) => values
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(" "),
        (_, Value::Words(words)) => words.join(" "),
        (_, Value::Master(master)) => master
            .as_ref()
            .map(|(h, p)| format!("{h} {p}"))
            .unwrap_or_default(),
        (_, Value::Floats(values)) => values
            .iter()
            .map(|v| format_percentile(*v))
            .collect::<Vec<_>>()
            .join(" "),
        (_, Value::Dir) => current_dir_text(),
    }
}

/// Enum value to its name; for flag sets, the names of the flags in table order.
fn enum_name(names: &[(&str, i64)], value: i64, flags: bool) -> String {
    if let Some((name, _)) = names.iter().find(|(_, v)| *v == value) {
        return (*name).to_string();
    }
    if flags {
        let mut unmatched = value;
        let mut parts = Vec::new();
        for (name, v) in names {
            if *v != 0 && unmatched & v == *v {
                parts.push(*name);
                unmatched &= !v;
            }
        }
        if unmatched == 0 && !parts.is_empty() {
            return parts.join(" ");
        }
    }
    "unknown".to_string()
}

/// The config-file lines for an option's value, each with whether it must be written even
/// when the file did not mention the option (that is, the value is not the default). An
/// empty list means: write nothing, and drop the lines the file had.
fn rewrite_lines(def: &OptionDef, value: &Value) -> Vec<(String, bool)> {
    let name = def.name;
    let default = default_value(def);
    let differs = *value != default;
    match (def.kind, value) {
        (Kind::Bool, _) | (Kind::Enum(_), _) => {
            vec![(format!("{name} {}", show_value(def, value)), differs)]
        }
        (Kind::Number { format, .. }, Value::Int(n)) => {
            let text = match format {
                Format::MemoryOrPercent if *n < 0 => format!("{}%", -n),
                Format::Memory | Format::MemoryOrPercent => format_memory(*n),
                Format::Octal => format!("{n:o}"),
                Format::Plain => n.to_string(),
            };
            vec![(format!("{name} {text}"), differs)]
        }
        (Kind::Text { .. }, Value::Text(None)) => Vec::new(),
        (Kind::Text { empty_is_null, .. }, Value::Text(Some(text))) => {
            // An option whose default is unset is always written when set.
            let force = empty_is_null || differs;
            vec![(format!("{name} {}", repr(text.as_bytes())), force)]
        }
        (_, Value::Dir) => vec![(
            format!("{name} {}", repr(current_dir_text().as_bytes())),
            true,
        )],
        (_, Value::Save(pairs)) if pairs.is_empty() => vec![(format!("{name} \"\""), true)],
        (_, Value::Save(pairs)) => pairs
            .iter()
            .map(|(s, c)| (format!("{name} {s} {c}"), true))
            .collect(),
        (_, Value::Buffers(limits)) => limits
            .iter()
            .zip(default_buffer_limits())
            .zip(CLIENT_CLASSES)
            .map(|((limit, default), class)| {
                let class = if class == "slave" { "replica" } else { class };
                let line = format!(
                    "{name} {class} {} {} {}",
                    format_memory(limit.hard_bytes as i128),
                    format_memory(limit.soft_bytes as i128),
                    limit.soft_seconds
                );
                (line, *limit != default)
            })
            .collect(),
        (Kind::Special(Special::NotifyKeyspaceEvents), Value::Int(n)) => {
            vec![(
                format!(
                    "{name} {}",
                    repr(notify_flags_to_string(*n as i64).as_bytes())
                ),
                *n != 0,
            )]
        }
        (_, Value::Ints(values)) => vec![(
            format!("{name} {}", show_value(def, &Value::Ints(values.clone()))),
            differs,
        )],
        (_, Value::Words(_)) if !differs => Vec::new(),
        (_, Value::Words(words)) if words.is_empty() => vec![(format!("{name} \"\""), true)],
        (_, Value::Words(words)) => vec![(format!("{name} {}", words.join(" ")), true)],
        (_, Value::Master(None)) => Vec::new(),
        (_, Value::Master(Some((host, port)))) => vec![(format!("{name} {host} {port}"), true)],
        (_, Value::Floats(values)) if values.is_empty() => vec![(format!("{name} \"\""), true)],
        (_, Value::Floats(values)) => {
            let list: Vec<String> = values.iter().map(|v| format_percentile(*v)).collect();
            vec![(format!("{name} {}", list.join(" ")), true)]
        }
        _ => Vec::new(),
    }
}

// ---------------------------------------------------------------------------------------
// Start-up: command line and config files.
// ---------------------------------------------------------------------------------------

/// The fatal start-up error, laid out as redis-server prints it.
fn fatal(at: Option<(usize, &str)>, message: &str) -> ConfigError {
    let mut text = format!("\n*** FATAL CONFIG FILE ERROR (Latch {VERSION}) ***\n");
    if let Some((line_number, line)) = at {
        text.push_str(&format!(
            "Reading the configuration file, at line {line_number}\n>>> '{line}'\n"
        ));
    }
    text.push_str(message);
    ConfigError::Invalid(text)
}

/// Turns redis-server style arguments into config-file text, as redis-server does: each
/// `--name` starts a line, the arguments after it are quoted onto that line. Returns the
/// config file (first argument not starting with `-`), whether to read stdin, and the text.
fn options_from_args(args: &[String]) -> (Option<String>, bool, String) {
    let mut config_file = None;
    let mut index = 0;
    if let Some(first) = args.first() {
        if !first.starts_with('-') {
            config_file = Some(first.clone());
            index = 1;
        }
    }
    let mut from_stdin = false;
    let mut options = String::new();
    // False right after an option name given alone: whatever follows is its value, even
    // if it starts with `--`.
    let mut last_option_has_value = true;
    while index < args.len() {
        let arg = &args[index];
        let is_last = index + 1 == args.len();
        if arg == "-" && (index == 0 || is_last) {
            from_stdin = true;
        } else if last_option_has_value && arg.starts_with("--") {
            if !options.is_empty() {
                options.push('\n');
            }
            options.push_str(&arg[2..]);
            options.push(' ');
            let words = split_args(arg.as_bytes()).map(|w| w.len()).unwrap_or(0);
            if words == 1 {
                last_option_has_value = false;
                let next_is_option = !is_last && args[index + 1].starts_with("--");
                if arg.eq_ignore_ascii_case("--save") && (next_is_option || is_last) {
                    // `--save` with nothing after it means "no snapshots", as in redis-server.
                    options.push_str("\"\"");
                    last_option_has_value = next_is_option;
                }
            } else {
                last_option_has_value = true;
            }
        } else {
            options.push_str(&repr(arg.as_bytes()));
            options.push(' ');
            last_option_has_value = true;
        }
        index += 1;
    }
    (config_file, from_stdin, options)
}

fn absolute_path(path: &str) -> PathBuf {
    let path = Path::new(path);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|cwd| cwd.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    }
}

/// Reads a config file; a name with wildcards reads every matching file (none is fine).
fn read_config_files(name: &str) -> Result<String, ConfigError> {
    let cannot_open = |path: &str, e: &std::io::Error| {
        ConfigError::Invalid(format!(
            "Fatal error, can't open config file '{path}': {}",
            strerror(e)
        ))
    };
    if !name.contains(['*', '?', '[']) {
        let bytes = std::fs::read(name).map_err(|e| cannot_open(name, &e))?;
        return Ok(String::from_utf8_lossy(&bytes).into_owned());
    }
    // Wildcards in the last path component only, like the common `include conf.d/*.conf`.
    let path = Path::new(name);
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let pattern = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut matches: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .filter(|e| {
                latch_keyspace::glob::glob_match(
                    pattern.as_bytes(),
                    e.file_name().as_encoded_bytes(),
                    false,
                )
            })
            .map(|e| e.path())
            .collect(),
        Err(_) => Vec::new(),
    };
    matches.sort();
    let mut text = String::new();
    for file in matches {
        let bytes = std::fs::read(&file).map_err(|e| cannot_open(&file.to_string_lossy(), &e))?;
        text.push_str(&String::from_utf8_lossy(&bytes));
    }
    Ok(text)
}

/// Applies config-file text to a set of values.
struct Loader {
    values: Vec<Value>,
    /// `user` lines: the name, then the rules.
    users: Vec<Vec<String>>,
    /// `rename-command` lines: old name, new name ("" removes the command).
    renames: Vec<(String, String)>,
    /// The first `save` line replaces the default; later ones add to it.
    save_loaded: bool,
    depth: usize,
}

impl Loader {
    fn new() -> Loader {
        Loader {
            values: OPTIONS.iter().map(default_value).collect(),
            users: Vec::new(),
            renames: Vec::new(),
            save_loaded: false,
            depth: 0,
        }
    }

    fn load_text(&mut self, text: &str) -> Result<(), ConfigError> {
        for (line_index, raw) in text.split('\n').enumerate() {
            let line = raw.trim_matches([' ', '\t', '\r', '\n']);
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = Some((line_index + 1, line));
            let Some(argv) = split_args(line.as_bytes()) else {
                return Err(fatal(at, "Unbalanced quotes in configuration line"));
            };
            if argv.is_empty() {
                continue;
            }
            let argv: Vec<String> = argv
                .iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            let name = argv[0].to_ascii_lowercase();
            if let Some((index, _)) = lookup(&name) {
                let def = &OPTIONS[index];
                if !def.has(o::MULTI_ARG) && argv.len() != 2 {
                    return Err(fatal(at, "wrong number of arguments"));
                }
                let args: Vec<String> = if def.has(o::MULTI_ARG)
                    && argv.len() == 2
                    && !argv[1].is_empty()
                {
                    // `--save "900 1 300 10"`: one argument holding several.
                    match split_args(argv[1].as_bytes()) {
                        Some(words) => words
                            .iter()
                            .map(|w| String::from_utf8_lossy(w).into_owned())
                            .collect(),
                        None => return Err(fatal(at, "Unbalanced quotes in configuration line")),
                    }
                } else {
                    argv[1..].to_vec()
                };
                self.apply(index, &args)
                    .map_err(|message| fatal(at, &message))?;
                continue;
            }
            let argc = argv.len();
            let deprecated = [
                "list-max-ziplist-entries",
                "list-max-ziplist-value",
                "lua-replicate-commands",
            ];
            if deprecated.contains(&name.as_str()) && argc == 2 {
                continue;
            }
            let refusal = match name.as_str() {
                "include" if argc == 2 => {
                    if self.depth >= INCLUDE_MAX_DEPTH {
                        return Err(fatal(
                            at,
                            "include nested too deeply (does a file include itself?)",
                        ));
                    }
                    let included = read_config_files(&argv[1])?;
                    self.depth += 1;
                    self.load_text(&included)?;
                    self.depth -= 1;
                    continue;
                }
                "rename-command" if argc == 3 => {
                    self.renames.push((argv[1].clone(), argv[2].clone()));
                    crate::table::resolve_renames(&self.renames)
                        .map_err(|message| fatal(at, &message))?;
                    continue;
                }
                "user" if argc >= 2 => {
                    crate::acl::file::check_config_user(&argv, &self.users)
                        .map_err(|message| fatal(at, &message))?;
                    self.users.push(argv[1..].to_vec());
                    continue;
                }
                "loadmodule" if argc >= 2 => "Latch does not load modules",
                "sentinel" => "Latch has no sentinel mode",
                _ if name.contains('.') && argc < 2 => "Module config specified without value",
                _ if name.contains('.') => {
                    "Latch does not load modules, so it has no module configs"
                }
                _ => "Bad directive or wrong number of arguments",
            };
            return Err(fatal(at, refusal));
        }
        Ok(())
    }

    fn apply(&mut self, index: usize, args: &[String]) -> Result<(), String> {
        let def = &OPTIONS[index];
        let value = parse_value(def, args, &self.values[index])?;
        let value = match (def.kind, value) {
            (Kind::Special(Special::Save), Value::Save(pairs)) => {
                let clears = args.len() == 1 && args[0].is_empty();
                let mut current = match &self.values[index] {
                    Value::Save(current) if self.save_loaded && !clears => current.clone(),
                    _ => Vec::new(),
                };
                self.save_loaded = true;
                current.extend(pairs);
                Value::Save(current)
            }
            (Kind::Special(Special::Dir), Value::Text(Some(path))) => {
                // As redis-server: the working directory changes at once, so relative paths
                // later in the file (logfile...) are relative to it. Unlike redis-server, a
                // missing directory is created at start-up, so that a fresh checkout's
                // `latch.conf` (dir ./data) just works.
                if !std::path::Path::new(&path).exists() {
                    std::fs::create_dir_all(&path).map_err(|e| strerror(&e))?;
                }
                std::env::set_current_dir(&path).map_err(|e| strerror(&e))?;
                Value::Dir
            }
            (_, value) => value,
        };
        self.values[index] = value;
        Ok(())
    }

    /// Checks made once everything is read.
    fn finish(&mut self) -> Result<(), ConfigError> {
        let text = |name: &str| -> Option<String> {
            let (index, _) = lookup(name)?;
            match &self.values[index] {
                Value::Text(text) => text.clone(),
                _ => None,
            }
        };
        if let Some(logfile) = text("logfile").filter(|f| !f.is_empty()) {
            if let Err(e) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&logfile)
            {
                return Err(fatal(
                    None,
                    &format!("Can't open the log file: {}", strerror(&e)),
                ));
            }
        }
        let int = |name: &str| {
            lookup(name)
                .and_then(|(index, _)| self.values[index].as_i64())
                .unwrap_or(0)
        };
        if int("daemonize") != 0 {
            return Err(fatal(None, "Latch does not daemonize: run it in the foreground (daemonize no) under a supervisor"));
        }
        if let Some((index, _)) = lookup("hz") {
            if let Value::Int(hz) = self.values[index] {
                self.values[index] = Value::Int(hz.clamp(HZ_MIN, HZ_MAX));
            }
        }
        Ok(())
    }
}

/// `hz` is a hint: values outside this range are accepted and clamped, as Redis does.
const HZ_MIN: i128 = 1;
const HZ_MAX: i128 = 500;

// ---------------------------------------------------------------------------------------
// The runtime store.
// ---------------------------------------------------------------------------------------

/// See [`Config::refresh_hot`].
#[derive(Debug, Default)]
struct HotValues {
    slowlog_slower_than_us: AtomicI64,
    slowlog_max_len: AtomicUsize,
    latency_monitor_threshold_ms: AtomicU64,
    maxmemory: AtomicU64,
    min_replicas_to_write: AtomicU64,
    min_replicas_max_lag: AtomicU64,
    /// Read by every script run.
    busy_reply_threshold_ms: AtomicU64,
    /// Read by every XADD.
    stream_node_max_entries: AtomicU64,
    stream_node_max_bytes: AtomicU64,
    /// Read by every command (per-command latency histograms).
    latency_tracking: std::sync::atomic::AtomicBool,
    /// Read before every command under maxmemory, and by every eviction.
    maxmemory_clients: AtomicI64,
    maxmemory_policy: AtomicI64,
    maxmemory_samples: AtomicU64,
    maxmemory_eviction_tenacity: AtomicI64,
}

/// The server's options: shared, read often, changed by CONFIG SET.
#[derive(Debug)]
pub struct Config {
    values: RwLock<Vec<Value>>,
    epoch: AtomicU64,
    /// Values every command reads, kept apart so the hot path takes no lock.
    hot: HotValues,
    /// The config file given at start-up, absolute (CONFIG REWRITE writes it).
    config_file: Option<PathBuf>,
    /// The config file's `user` lines (name, then rules), created at start-up.
    users: Vec<Vec<String>>,
    /// The config file's `rename-command` lines, put in force at start-up.
    renames: Vec<(String, String)>,
}

impl Default for Config {
    /// Every option at its default, no config file.
    fn default() -> Config {
        let config = Config {
            values: RwLock::new(Loader::new().values),
            epoch: AtomicU64::new(0),
            hot: HotValues::default(),
            config_file: None,
            users: Vec::new(),
            renames: Vec::new(),
        };
        config.refresh_hot();
        config
    }
}

/// A CONFIG SET refusal, formatted by [`SetError::message`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetError {
    /// No such option (or an odd shape).
    Unknown(String),
    /// The option exists but the change was refused: (option, reason).
    Failed(String, String),
    /// An option that cannot change while a data set loads (`dir`, `appendonly`...).
    Loading,
}

impl SetError {
    /// The error reply's text, Redis' words.
    pub fn message(&self) -> String {
        match self {
            SetError::Unknown(name) => {
                format!("ERR Unknown option or number of arguments for CONFIG SET - '{name}'")
            }
            SetError::Failed(name, reason) => {
                format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {reason}")
            }
            SetError::Loading => "LOADING Redis is loading the dataset in memory".to_string(),
        }
    }
}

impl Config {
    /// Parses redis-server style arguments: `[config-file | -] [--option value ...]`.
    /// Later settings win (file, then stdin, then arguments). Changes the working directory
    /// when `dir` is given, as redis-server does.
    pub fn from_args<I: IntoIterator<Item = String>>(args: I) -> Result<Config, ConfigError> {
        let args: Vec<String> = args.into_iter().collect();
        let (config_file, from_stdin, options) = options_from_args(&args);
        let config_file = config_file.map(|f| absolute_path(&f));
        let mut text = String::new();
        if let Some(path) = &config_file {
            text.push_str(&read_config_files(&path.to_string_lossy())?);
        }
        if from_stdin {
            let mut input = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut input).map_err(|e| {
                ConfigError::Invalid(format!("could not read the configuration from stdin: {e}"))
            })?;
            text.push_str(&input);
        }
        text.push('\n');
        text.push_str(&options);
        Config::from_text(&text, config_file)
    }

    /// Options from config-file text (for tests and embedding), as if read from `config_file`.
    pub fn from_text(text: &str, config_file: Option<PathBuf>) -> Result<Config, ConfigError> {
        let mut loader = Loader::new();
        loader.load_text(text)?;
        loader.finish()?;
        let config = Config {
            values: RwLock::new(loader.values),
            epoch: AtomicU64::new(0),
            hot: HotValues::default(),
            config_file,
            users: loader.users,
            renames: loader.renames,
        };
        config.refresh_hot();
        crate::log::set_level(&config.loglevel());
        Ok(config)
    }

    /// The config file's `rename-command` lines, in order.
    pub fn renames(&self) -> &[(String, String)] {
        &self.renames
    }

    /// The config file's `user` lines: each the name, then the rules.
    pub fn users(&self) -> &[Vec<String>] {
        &self.users
    }

    /// The config file given at start-up (absolute), if any.
    pub fn config_file(&self) -> Option<&Path> {
        self.config_file.as_deref()
    }

    /// Changes on every successful CONFIG SET: connections compare it to re-read hot values.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// An option's value as CONFIG GET shows it (aliases resolve); `None` if unknown.
    pub fn get(&self, name: &str) -> Option<String> {
        let (index, _) = lookup(name)?;
        let values = self.values.read();
        Some(show_value(&OPTIONS[index], &values[index]))
    }

    /// A numeric, bool (1/0) or enum option's value; 0 for unknown or non-numeric options.
    /// Percent values of `maxmemory-clients` read as negative, as Redis stores them.
    pub fn get_i64(&self, name: &str) -> i64 {
        self.int(name).unwrap_or(0)
    }

    /// A yes/no option's value; false for unknown options.
    pub fn get_bool(&self, name: &str) -> bool {
        self.get_i64(name) != 0
    }

    fn int(&self, name: &str) -> Option<i64> {
        let (index, _) = lookup(name)?;
        self.values.read()[index].as_i64()
    }

    pub fn text(&self, name: &str) -> Option<String> {
        let (index, _) = lookup(name)?;
        match &self.values.read()[index] {
            Value::Text(text) => text.clone(),
            _ => None,
        }
    }

    fn unsigned(&self, name: &str) -> u64 {
        self.get_i64(name).max(0) as u64
    }

    pub fn port(&self) -> u16 {
        self.get_i64("port").clamp(0, 65535) as u16
    }

    /// `replicaof`: the primary's host and port, or none.
    pub fn replicaof(&self) -> Option<(String, u16)> {
        let (index, _) = lookup("replicaof")?;
        match &self.values.read()[index] {
            Value::Master(Some((host, port))) => {
                Some((host.clone(), (*port).clamp(0, 65535) as u16))
            }
            _ => None,
        }
    }

    /// What REPLICAOF set, for CONFIG GET and CONFIG REWRITE.
    pub fn set_replicaof(&self, primary: Option<(String, u16)>) {
        if let Some((index, _)) = lookup("replicaof") {
            self.values.write()[index] =
                Value::Master(primary.map(|(host, port)| (host, i64::from(port))));
        }
    }

    /// The `bind` addresses as configured (`* -::*` by default, as redis-server).
    pub fn bind_config(&self) -> Vec<String> {
        match self.values.read()[lookup("bind").map(|(i, _)| i).unwrap_or(0)].clone() {
            Value::Words(words) => words,
            _ => Vec::new(),
        }
    }

    /// The addresses to listen on, derived from `bind`: `*` is every IPv4 address, `::*`
    /// every IPv6 one. An address marked optional keeps its leading `-`: the listener skips it
    /// when it cannot be bound (no IPv6 on the host), as Redis does. The default is
    /// redis-server's, every address, with `protected-mode` turning away clients from
    /// other hosts while the default user has no password; `latch.conf` binds 127.0.0.1.
    pub fn bind(&self) -> Vec<String> {
        self.bind_config()
            .iter()
            .map(|address| {
                let (mark, bare) = match address.strip_prefix('-') {
                    Some(bare) => ("-", bare),
                    None => ("", address.as_str()),
                };
                let bare = match bare {
                    "*" => "0.0.0.0",
                    "::*" => "::",
                    other => other,
                };
                format!("{mark}{bare}")
            })
            .collect()
    }

    pub fn unixsocket(&self) -> Option<String> {
        self.text("unixsocket")
    }

    /// Permissions for the unix socket (0: leave as created).
    pub fn unixsocketperm(&self) -> u32 {
        self.unsigned("unixsocketperm") as u32
    }

    /// The working directory (`dir` changes it, as in Redis).
    pub fn dir(&self) -> PathBuf {
        std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."))
    }

    /// How many runtime workers serve connections and run commands (Redis' `io-threads`,
    /// whose default, 1, is redis-server's one thread; see `main.rs`).
    pub fn io_threads(&self) -> usize {
        self.unsigned("io-threads").max(1) as usize
    }

    /// Microseconds to keep polling after a request before the runtime sleeps (0: never).
    pub fn busy_poll_us(&self) -> u64 {
        self.unsigned("busy-poll-us")
    }

    pub fn databases(&self) -> usize {
        self.unsigned("databases").max(1) as usize
    }

    /// The password every connection must give (AUTH) before running commands.
    pub fn requirepass(&self) -> Option<Vec<u8>> {
        self.text("requirepass").map(String::into_bytes)
    }

    pub fn maxclients(&self) -> usize {
        self.unsigned("maxclients") as usize
    }

    /// Idle seconds before a client is closed (0: never).
    pub fn timeout_s(&self) -> u64 {
        self.unsigned("timeout")
    }

    pub fn tcp_keepalive_s(&self) -> u64 {
        self.unsigned("tcp-keepalive")
    }

    pub fn loglevel(&self) -> String {
        self.get("loglevel").unwrap_or_else(|| "notice".to_string())
    }

    /// The log file ("" for standard output).
    pub fn logfile(&self) -> String {
        self.text("logfile").unwrap_or_default()
    }

    pub fn protected_mode(&self) -> bool {
        self.get_bool("protected-mode")
    }

    pub fn proto_max_bulk_len(&self) -> u64 {
        self.unsigned("proto-max-bulk-len")
    }

    /// The largest a sparse HyperLogLog may grow (header included) before it turns dense.
    pub fn hll_sparse_max_bytes(&self) -> u64 {
        self.unsigned("hll-sparse-max-bytes")
    }

    pub fn client_query_buffer_limit(&self) -> u64 {
        self.unsigned("client-query-buffer-limit")
    }

    /// Background task frequency, already clamped to 1..=500.
    pub fn hz(&self) -> u64 {
        self.unsigned("hz").clamp(HZ_MIN as u64, HZ_MAX as u64)
    }

    /// Microseconds; negative disables the slow log, 0 logs every command.
    pub fn slowlog_log_slower_than_us(&self) -> i64 {
        self.hot.slowlog_slower_than_us.load(Ordering::Relaxed)
    }

    /// `latency-tracking`: whether commands' latencies go into their histograms.
    pub fn latency_tracking(&self) -> bool {
        self.hot.latency_tracking.load(Ordering::Relaxed)
    }

    /// `latency-tracking-info-percentiles`.
    pub fn latency_percentiles(&self) -> Vec<f64> {
        let Some((index, _)) = lookup("latency-tracking-info-percentiles") else {
            return Vec::new();
        };
        match &self.values.read()[index] {
            Value::Floats(values) => values.clone(),
            _ => Vec::new(),
        }
    }

    pub fn slowlog_max_len(&self) -> usize {
        self.hot.slowlog_max_len.load(Ordering::Relaxed)
    }

    /// Milliseconds; 0 disables the latency monitor.
    pub fn latency_monitor_threshold_ms(&self) -> u64 {
        self.hot
            .latency_monitor_threshold_ms
            .load(Ordering::Relaxed)
    }

    /// Copies the values commands read on every call into their atomics; called wherever
    /// the option values are set.
    fn refresh_hot(&self) {
        let hot = &self.hot;
        hot.slowlog_slower_than_us
            .store(self.get_i64("slowlog-log-slower-than"), Ordering::Relaxed);
        hot.slowlog_max_len.store(
            self.get_i64("slowlog-max-len").max(0) as usize,
            Ordering::Relaxed,
        );
        hot.latency_monitor_threshold_ms.store(
            self.unsigned("latency-monitor-threshold"),
            Ordering::Relaxed,
        );
        hot.maxmemory
            .store(self.unsigned("maxmemory"), Ordering::Relaxed);
        hot.min_replicas_to_write.store(
            self.get_i64("min-replicas-to-write").max(0) as u64,
            Ordering::Relaxed,
        );
        hot.min_replicas_max_lag.store(
            self.get_i64("min-replicas-max-lag").max(0) as u64,
            Ordering::Relaxed,
        );
        hot.busy_reply_threshold_ms
            .store(self.unsigned("busy-reply-threshold"), Ordering::Relaxed);
        hot.stream_node_max_entries
            .store(self.unsigned("stream-node-max-entries"), Ordering::Relaxed);
        hot.stream_node_max_bytes
            .store(self.unsigned("stream-node-max-bytes"), Ordering::Relaxed);
        hot.latency_tracking
            .store(self.get_bool("latency-tracking"), Ordering::Relaxed);
        hot.maxmemory_clients
            .store(self.get_i64("maxmemory-clients"), Ordering::Relaxed);
        hot.maxmemory_policy
            .store(self.get_i64("maxmemory-policy"), Ordering::Relaxed);
        hot.maxmemory_samples.store(
            self.get_i64("maxmemory-samples").max(1) as u64,
            Ordering::Relaxed,
        );
        hot.maxmemory_eviction_tenacity.store(
            self.get_i64("maxmemory-eviction-tenacity"),
            Ordering::Relaxed,
        );
        // jemalloc's background threads return freed pages to the kernel (RSS follows
        // used_memory); as in Redis, on by default. Without jemalloc this fails: ignored.
        let _ = tikv_jemalloc_ctl::background_thread::write(self.get_bool("jemalloc-bg-thread"));
        latch_keyspace::lazyfree::set_options(latch_keyspace::lazyfree::Options {
            user_del: self.get_bool("lazyfree-lazy-user-del"),
            user_flush: self.get_bool("lazyfree-lazy-user-flush"),
            expire: self.get_bool("lazyfree-lazy-expire"),
            server_del: self.get_bool("lazyfree-lazy-server-del"),
            eviction: self.get_bool("lazyfree-lazy-eviction"),
        });
        let as_size = |name| usize::try_from(self.unsigned(name)).unwrap_or(usize::MAX);
        latch_keyspace::compact::set(latch_keyspace::compact::Thresholds {
            hash_max_entries: as_size("hash-max-listpack-entries"),
            hash_max_value: as_size("hash-max-listpack-value"),
            set_max_intset_entries: as_size("set-max-intset-entries"),
            zset_max_entries: as_size("zset-max-listpack-entries"),
            zset_max_value: as_size("zset-max-listpack-value"),
            list_max_size: self.get_i64("list-max-listpack-size"),
            list_compress_depth: as_size("list-compress-depth"),
        });
    }

    /// Milliseconds a script may run before others get BUSY replies.
    pub fn busy_reply_threshold_ms(&self) -> u64 {
        self.hot.busy_reply_threshold_ms.load(Ordering::Relaxed)
    }

    /// `stream-node-max-entries` and `stream-node-max-bytes` (0: no limit).
    pub fn stream_node_limits(&self) -> (u64, u64) {
        (
            self.hot.stream_node_max_entries.load(Ordering::Relaxed),
            self.hot.stream_node_max_bytes.load(Ordering::Relaxed),
        )
    }

    /// `restart-delay`: milliseconds of refused writes after an unclean shutdown.
    pub fn restart_delay_ms(&self) -> u64 {
        self.unsigned("restart-delay")
    }

    /// `min-replicas-to-write` and `min-replicas-max-lag` (read by every write).
    pub fn min_replicas(&self) -> (u64, u64) {
        (
            self.hot.min_replicas_to_write.load(Ordering::Relaxed),
            self.hot.min_replicas_max_lag.load(Ordering::Relaxed),
        )
    }

    /// Bytes; 0 means no limit. Read by every command, so without a lock.
    /// Keys the client-side caching table may hold (0: no limit).
    pub fn tracking_table_max_keys(&self) -> usize {
        self.unsigned("tracking-table-max-keys")
            .min(usize::MAX as u64) as usize
    }

    pub fn maxmemory(&self) -> u64 {
        self.hot.maxmemory.load(Ordering::Relaxed)
    }

    pub fn maxmemory_policy(&self) -> String {
        self.maxmemory_policy_name().to_string()
    }

    /// `maxmemory-policy`, without a lock or an allocation (eviction reads it often).
    pub fn maxmemory_policy_name(&self) -> &'static str {
        let code = self.hot.maxmemory_policy.load(Ordering::Relaxed);
        MAXMEMORY_POLICY
            .iter()
            .find(|(_, value)| *value == code)
            .map_or("noeviction", |(name, _)| name)
    }

    /// `maxmemory-clients` as set: bytes, or a percentage of maxmemory as a negative number.
    pub fn maxmemory_clients(&self) -> i64 {
        self.hot.maxmemory_clients.load(Ordering::Relaxed)
    }

    pub fn maxmemory_samples(&self) -> usize {
        self.hot.maxmemory_samples.load(Ordering::Relaxed) as usize
    }

    pub fn maxmemory_eviction_tenacity(&self) -> i64 {
        self.hot.maxmemory_eviction_tenacity.load(Ordering::Relaxed)
    }

    /// Snapshot points: (seconds, changes) pairs.
    pub fn save_params(&self) -> Vec<(i64, i64)> {
        match lookup("save").map(|(i, _)| self.values.read()[i].clone()) {
            Some(Value::Save(pairs)) => pairs,
            _ => Vec::new(),
        }
    }

    pub fn appendonly(&self) -> bool {
        self.get_bool("appendonly")
    }

    /// `always`, `everysec` or `no`.
    pub fn appendfsync(&self) -> String {
        self.get("appendfsync")
            .unwrap_or_else(|| "everysec".to_string())
    }

    pub fn appendfilename(&self) -> String {
        self.text("appendfilename").unwrap_or_default()
    }

    pub fn appenddirname(&self) -> String {
        self.text("appenddirname").unwrap_or_default()
    }

    pub fn dbfilename(&self) -> String {
        self.text("dbfilename").unwrap_or_default()
    }

    pub fn pidfile(&self) -> Option<String> {
        self.text("pidfile")
    }

    /// Writes the process id to `pidfile`, when one is configured (call once at start-up).
    pub fn write_pidfile(&self) -> std::io::Result<()> {
        match self.pidfile() {
            Some(path) => std::fs::write(path, format!("{}\n", std::process::id())),
            None => Ok(()),
        }
    }

    /// Logs a warning for each inert option the config file, standard input or command
    /// line set to something other than its default. Called once, when logging is up.
    pub fn warn_inert_options(&self) {
        let values = self.values.read();
        for (def, value) in OPTIONS.iter().zip(values.iter()) {
            if let Some(warning) = inert_warning(def, value) {
                tracing::warn!("{warning}");
            }
        }
    }

    /// The keyspace-notification classes as flags (see Redis' notify.c for the bits).
    pub fn notify_keyspace_events(&self) -> i64 {
        self.get_i64("notify-keyspace-events")
    }

    /// Limits per client class: normal, replica, pubsub.
    pub fn client_output_buffer_limits(&self) -> [BufferLimit; 3] {
        match lookup("client-output-buffer-limit").map(|(i, _)| self.values.read()[i].clone()) {
            Some(Value::Buffers(limits)) => limits,
            _ => default_buffer_limits(),
        }
    }

    /// Whether a client may change PROTECTED options (`dir`, `dbfilename`).
    pub fn protected_configs_allowed(&self, client_is_local: bool) -> bool {
        match self.get_i64("enable-protected-configs") {
            1 => true,
            2 => client_is_local,
            _ => false,
        }
    }

    /// Whether a protected command may run for a client, by its option
    /// (`enable-debug-command`, `enable-module-command`: no, yes or local).
    pub fn protected_command_allowed(&self, option: &str, client_is_local: bool) -> bool {
        match self.get_i64(option) {
            1 => true,
            2 => client_is_local,
            _ => false,
        }
    }

    /// CONFIG GET: every option matching any of the patterns (glob, any case) or named
    /// exactly, once each, as (name, value). An exact name answers under the name as given;
    /// hidden options answer only to their exact name.
    pub fn get_matching(&self, patterns: &[&[u8]]) -> Vec<(String, String)> {
        let values = self.values.read();
        let mut seen: HashSet<String> = HashSet::new();
        let mut out = Vec::new();
        for pattern in patterns {
            if !pattern.iter().any(|b| matches!(b, b'[' | b'*' | b'?')) {
                let name = String::from_utf8_lossy(pattern).into_owned();
                if seen.contains(&name.to_ascii_lowercase()) {
                    continue;
                }
                if let Some((index, _)) = lookup(&name) {
                    seen.insert(name.to_ascii_lowercase());
                    out.push((name, show_value(&OPTIONS[index], &values[index])));
                }
                continue;
            }
            for (index, def) in OPTIONS.iter().enumerate() {
                if def.has(o::HIDDEN) {
                    continue;
                }
                for name in std::iter::once(def.name).chain(def.alias) {
                    if seen.contains(name)
                        || !latch_keyspace::glob::glob_match(pattern, name.as_bytes(), true)
                    {
                        continue;
                    }
                    seen.insert(name.to_string());
                    out.push((name.to_string(), show_value(def, &values[index])));
                }
            }
        }
        out
    }

    /// CONFIG SET: all pairs or none. `protected_allowed` says whether this client may
    /// change PROTECTED options (see [`Config::protected_configs_allowed`]).
    pub fn set(&self, pairs: &[(&[u8], &[u8])], protected_allowed: bool) -> Result<(), SetError> {
        // First pass, in order: an unknown, immutable, protected or repeated option, or one
        // that cannot change while a data set loads (LOADING), refuses the whole command;
        // the first one found says why, as in Redis.
        let loading = crate::persistence::is_loading();
        let mut chosen: Vec<(usize, &'static str, String)> = Vec::with_capacity(pairs.len());
        let mut refused = None;
        for (name, value) in pairs {
            let name = String::from_utf8_lossy(name).into_owned();
            let Some((index, entry_name)) = lookup(&name) else {
                refused.get_or_insert(SetError::Unknown(name));
                continue;
            };
            let def = &OPTIONS[index];
            if def.has(o::IMMUTABLE) {
                refused.get_or_insert(SetError::Failed(
                    name,
                    "can't set immutable config".to_string(),
                ));
                continue;
            }
            if def.has(o::PROTECTED) && !protected_allowed {
                refused.get_or_insert(SetError::Failed(
                    name,
                    "can't set protected config".to_string(),
                ));
                continue;
            }
            if loading && def.has(o::DENY_LOADING) {
                refused.get_or_insert(SetError::Loading);
                continue;
            }
            if chosen.iter().any(|(seen, _, _)| *seen == index) {
                refused.get_or_insert(SetError::Failed(name, "duplicate parameter".to_string()));
                continue;
            }
            chosen.push((
                index,
                entry_name,
                String::from_utf8_lossy(value).into_owned(),
            ));
        }
        if let Some(error) = refused {
            return Err(error);
        }
        let mut values = self.values.write();
        let mut updated = values.clone();
        let mut changed = Vec::with_capacity(chosen.len());
        for (index, entry_name, text) in &chosen {
            let def = &OPTIONS[*index];
            let args: Vec<String> = if def.has(o::MULTI_ARG) {
                // CONFIG SET splits a multi-value option on single spaces, as Redis does.
                if text.is_empty() {
                    Vec::new()
                } else {
                    text.split(' ').map(str::to_string).collect()
                }
            } else {
                vec![text.clone()]
            };
            let mut value = parse_value(def, &args, &updated[*index])
                .map_err(|m| SetError::Failed(entry_name.to_string(), m))?;
            if def.name == "hz" {
                if let Value::Int(hz) = value {
                    value = Value::Int(hz.clamp(HZ_MIN, HZ_MAX));
                }
            }
            let is_dir = matches!(def.kind, Kind::Special(Special::Dir));
            if is_dir || value != updated[*index] {
                changed.push((*index, *entry_name));
            }
            updated[*index] = value;
        }
        // The directory change is the one step that can fail after checks; it goes last.
        for &(index, entry_name) in &changed {
            if let Value::Text(Some(path)) = &updated[index] {
                if matches!(OPTIONS[index].kind, Kind::Special(Special::Dir)) {
                    std::env::set_current_dir(path)
                        .map_err(|e| SetError::Failed(entry_name.to_string(), strerror(&e)))?;
                    updated[index] = Value::Dir;
                }
            }
        }
        let warnings: Vec<String> = chosen
            .iter()
            .filter_map(|(index, _, _)| inert_warning(&OPTIONS[*index], &updated[*index]))
            .collect();
        *values = updated;
        drop(values);
        for warning in warnings {
            tracing::warn!("{warning}");
        }
        if changed
            .iter()
            .any(|&(index, _)| matches!(OPTIONS[index].name, "loglevel" | "log-format"))
        {
            crate::log::set_level(&self.loglevel());
            crate::log::set_format(&self.get("log-format").unwrap_or_default());
        }
        self.refresh_hot();
        self.epoch.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// CONFIG REWRITE: rewrites the config file with the values in force, keeping comments,
    /// order and lines it does not understand; `force_all` writes every option.
    /// `users` are the `user` lines to write (Redis writes every user unless an ACL file
    /// holds them: then `None`, and the config file's user lines go).
    pub fn rewrite(&self, force_all: bool, users: Option<Vec<String>>) -> Result<(), String> {
        let Some(path) = &self.config_file else {
            return Err("ERR The server is running without a config file".to_string());
        };
        let failed = |e: std::io::Error| format!("ERR Rewriting config file: {}", strerror(&e));
        let mut state = RewriteState::read(path).map_err(failed)?;
        state.force_all = force_all;
        let values = self.values.read().clone();
        for (def, value) in OPTIONS.iter().zip(&values) {
            for (line, force) in rewrite_lines(def, value) {
                state.rewrite_line(def.name, line, force);
            }
            state.mark_processed(def.name);
        }
        for line in users.unwrap_or_default() {
            state.rewrite_line("user", line, true);
        }
        state.mark_processed("user");
        // Latch has no modules: lines loading them are dropped.
        state.mark_processed("loadmodule");
        state.remove_orphaned();
        overwrite_file(path, state.content().as_bytes()).map_err(failed)
    }
}

/// A config file being rewritten (Redis' rewriteConfigState).
struct RewriteState {
    lines: Vec<String>,
    /// Option → indexes of the lines that mention it, in file order.
    option_lines: HashMap<String, VecDeque<usize>>,
    processed: HashSet<String>,
    needs_signature: bool,
    force_all: bool,
}

impl RewriteState {
    fn read(path: &Path) -> std::io::Result<RewriteState> {
        let content = match std::fs::read(path) {
            Ok(content) => content,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        let mut state = RewriteState {
            lines: Vec::new(),
            option_lines: HashMap::new(),
            processed: HashSet::new(),
            needs_signature: true,
            force_all: false,
        };
        if content.is_empty() {
            return Ok(state);
        }
        let known_directives = [
            "include",
            "rename-command",
            "user",
            "loadmodule",
            "sentinel",
        ];
        for raw in content.split(|&b| b == b'\n') {
            let line = String::from_utf8_lossy(raw)
                .trim_matches(['\r', '\n', '\t', ' '])
                .to_string();
            if line.is_empty() || line.starts_with('#') {
                if state.needs_signature && line == REWRITE_SIGNATURE {
                    state.needs_signature = false;
                }
                state.lines.push(line);
                continue;
            }
            let name = split_args(line.as_bytes()).and_then(|argv| {
                argv.first()
                    .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
            });
            let option = match name {
                Some(name) => match option(&name) {
                    Some(def) => Some(def.name.to_string()),
                    None if known_directives.contains(&name.as_str()) => Some(name),
                    None => None,
                },
                None => None,
            };
            match option {
                Some(option) => {
                    state
                        .option_lines
                        .entry(option)
                        .or_default()
                        .push_back(state.lines.len());
                    state.lines.push(line);
                }
                // Unparsable or unknown: kept, as a comment.
                None => state.lines.push(format!("# ??? {line}")),
            }
        }
        Ok(state)
    }

    fn mark_processed(&mut self, option: &str) {
        self.processed.insert(option.to_string());
    }

    /// Puts `line` where the file had the option (its next unused line), or appends it when
    /// `force`d (the value is not the default) and the file had no line left for it.
    fn rewrite_line(&mut self, option: &str, line: String, force: bool) {
        self.mark_processed(option);
        let reuse = self
            .option_lines
            .get_mut(option)
            .and_then(VecDeque::pop_front);
        match reuse {
            Some(index) => self.lines[index] = line,
            None if force || self.force_all => {
                if self.needs_signature {
                    self.lines.push(REWRITE_SIGNATURE.to_string());
                    self.needs_signature = false;
                }
                self.lines.push(line);
            }
            None => {}
        }
    }

    /// Blanks the leftover lines of options that were rewritten (duplicates, old values).
    fn remove_orphaned(&mut self) {
        for (option, indexes) in &self.option_lines {
            if self.processed.contains(option) {
                for &index in indexes {
                    self.lines[index].clear();
                }
            }
        }
    }

    /// The file's new text, runs of blank lines squeezed to one.
    fn content(&self) -> String {
        let mut out = String::new();
        let mut was_empty = false;
        for line in &self.lines {
            if line.is_empty() {
                if was_empty {
                    continue;
                }
                was_empty = true;
            } else {
                was_empty = false;
            }
            out.push_str(line);
            out.push('\n');
        }
        out
    }
}

/// Replaces a file atomically: write a temporary file beside it, sync, rename over.
pub(crate) fn overwrite_file(path: &Path, content: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let suffix: String = crate::server::random_hex(6);
    let mut temp_name = path.as_os_str().to_owned();
    temp_name.push(format!(".{suffix}"));
    let temp = PathBuf::from(temp_name);
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        file.write_all(content)?;
        file.sync_all()?;
        file.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        std::fs::rename(&temp, path)?;
        if let Some(dir) = path.parent() {
            // Make the rename itself durable.
            if let Ok(dir) = std::fs::File::open(dir) {
                let _ = dir.sync_all();
            }
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Option<Vec<String>> {
        split_args(line.as_bytes()).map(|w| {
            w.iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
    }

    #[test]
    fn every_default_parses() {
        for def in OPTIONS {
            let args: Vec<String> = if def.has(o::MULTI_ARG) {
                def.default
                    .split(' ')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            } else {
                vec![def.default.to_string()]
            };
            let args = if args.is_empty() {
                vec![String::new()]
            } else {
                args
            };
            match def.kind {
                Kind::Special(Special::Dir) | Kind::Special(Special::ReplicaOf) => {}
                _ => {
                    let start = Value::Buffers(default_buffer_limits());
                    assert!(
                        parse_value(def, &args, &start).is_ok(),
                        "default of {} does not parse",
                        def.name
                    );
                }
            }
        }
    }

    #[test]
    fn names_are_unique_and_lower_case() {
        let mut seen = HashSet::new();
        for def in OPTIONS {
            for name in std::iter::once(def.name).chain(def.alias) {
                assert!(seen.insert(name), "{name} declared twice");
                assert_eq!(name, name.to_ascii_lowercase());
            }
        }
    }

    #[test]
    fn split_args_like_sdssplitargs() {
        assert_eq!(words("save 900 1").unwrap(), ["save", "900", "1"]);
        assert_eq!(words("  a   b  ").unwrap(), ["a", "b"]);
        assert_eq!(words(r#"x "a b" 'c d'"#).unwrap(), ["x", "a b", "c d"]);
        assert_eq!(words(r#""\x41\n" 'it\'s'"#).unwrap(), ["A\n", "it's"]);
        assert_eq!(words(r#"save """#).unwrap(), ["save", ""]);
        assert_eq!(words(r#"foo"bar""#).unwrap(), ["foobar"]);
        assert!(words(r#""unterminated"#).is_none());
        assert!(words(r#""a"b"#).is_none());
        assert!(words("'a'b").is_none());
        assert_eq!(words("").unwrap(), Vec::<String>::new());
    }

    #[test]
    fn repr_round_trips() {
        for text in [
            "plain",
            "a b",
            "q\"uote",
            "back\\slash",
            "\n\r\t\x07\x08",
            "\x01\x7f\u{e9}",
            "",
        ] {
            let quoted = repr(text.as_bytes());
            let back = split_args(quoted.as_bytes()).unwrap();
            assert_eq!(back, vec![text.as_bytes().to_vec()], "{quoted}");
        }
    }

    #[test]
    fn memory_units() {
        assert_eq!(parse_memory("100"), Some(100));
        assert_eq!(parse_memory("1k"), Some(1000));
        assert_eq!(parse_memory("1KB"), Some(1024));
        assert_eq!(parse_memory("512k"), Some(512_000));
        assert_eq!(parse_memory("100mb"), Some(100 << 20));
        assert_eq!(parse_memory("1Gb"), Some(1 << 30));
        assert_eq!(parse_memory("1g"), Some(1_000_000_000));
        assert_eq!(parse_memory("5b"), Some(5));
        assert_eq!(parse_memory("-1"), None);
        assert_eq!(parse_memory("1tb"), None);
        assert_eq!(parse_memory("1.5mb"), None);
        assert_eq!(parse_memory("99999999999999999999gb"), None);
        assert_eq!(format_memory(1 << 30), "1gb");
        assert_eq!(format_memory(3 << 20), "3mb");
        assert_eq!(format_memory(2048), "2kb");
        assert_eq!(format_memory(1000), "1000");
        assert_eq!(format_memory(0), "0");
    }

    #[test]
    fn notify_flags() {
        let flags = notify_flags_from_str("KEA").unwrap();
        assert_eq!(notify_flags_to_string(flags), "AKE");
        assert_eq!(
            notify_flags_to_string(notify_flags_from_str("Ex$").unwrap()),
            "$xE"
        );
        assert_eq!(
            notify_flags_to_string(notify_flags_from_str("").unwrap()),
            ""
        );
        assert!(notify_flags_from_str("KEQ").is_none());
    }

    #[test]
    fn options_from_args_like_redis_server() {
        let args = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (file, stdin, text) =
            options_from_args(&args(&["a.conf", "--port", "7000", "--save", "900", "1"]));
        assert_eq!(file.as_deref(), Some("a.conf"));
        assert!(!stdin);
        assert_eq!(text, "port \"7000\" \nsave \"900\" \"1\" ");
        let (_, _, text) = options_from_args(&args(&["--save", "--loglevel", "verbose"]));
        assert_eq!(text, "save \"\"\nloglevel \"verbose\" ");
        let (_, _, text) = options_from_args(&args(&["--loglevel", "verbose", "--save"]));
        assert_eq!(text, "loglevel \"verbose\" \nsave \"\"");
        let (_, _, text) = options_from_args(&args(&["--port", "--bla"]));
        assert_eq!(text, "port \"--bla\" ");
        let (_, _, text) = options_from_args(&args(&[
            "--maxmemory 700mb",
            "--maxmemory-policy volatile-lru",
        ]));
        assert_eq!(text, "maxmemory 700mb \nmaxmemory-policy volatile-lru ");
        let (file, stdin, _) = options_from_args(&args(&["-", "--port", "1"]));
        assert!(file.is_none() && stdin);
    }

    #[test]
    fn loading_values() {
        let config = Config::from_text(
            "# comment\nmaxmemory 1gb\nsave 900 1\nsave 300 10\nshutdown-on-sigint nosave force now\n\
             lua-time-limit 100\nnotify-keyspace-events KEA\nhz 9999\nunixsocketperm 700\n",
            None,
        )
        .unwrap();
        assert_eq!(config.get("maxmemory").unwrap(), "1073741824");
        assert_eq!(config.get("save").unwrap(), "900 1 300 10");
        assert_eq!(
            config.get("shutdown-on-sigint").unwrap(),
            "nosave now force"
        );
        assert_eq!(config.get("busy-reply-threshold").unwrap(), "100");
        assert_eq!(config.get("notify-keyspace-events").unwrap(), "AKE");
        assert_eq!(config.hz(), 500);
        assert_eq!(config.get("unixsocketperm").unwrap(), "700");
        assert_eq!(config.unixsocketperm(), 0o700);
        assert_eq!(config.save_params(), vec![(900, 1), (300, 10)]);
        let config = Config::from_text("save 900 1\nsave \"\"\n", None).unwrap();
        assert_eq!(config.get("save").unwrap(), "");
        let config = Config::default();
        assert_eq!(config.get("save").unwrap(), "3600 1 300 100 60 10000");
        // redis-server's default: every address (IPv6 optional).
        assert_eq!(
            config.bind(),
            vec!["0.0.0.0".to_string(), "-::".to_string()]
        );
        assert_eq!(
            config.get("client-output-buffer-limit").unwrap(),
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
    }

    #[test]
    fn include_reads_other_files() {
        let dir = std::env::temp_dir().join(format!("latch-config-include-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("conf.d")).unwrap();
        std::fs::write(dir.join("conf.d/a.conf"), "hz 33\n").unwrap();
        std::fs::write(dir.join("conf.d/b.conf"), "timeout 44\n").unwrap();
        std::fs::write(dir.join("base.conf"), "maxmemory 1mb\n").unwrap();
        let text = format!(
            "include {}\ninclude {}/conf.d/*.conf\ninclude {}/empty.d/*.conf\n",
            dir.join("base.conf").display(),
            dir.display(),
            dir.display()
        );
        let config = Config::from_text(&text, None).unwrap();
        assert_eq!(config.get("maxmemory").unwrap(), "1048576");
        assert_eq!(config.hz(), 33);
        assert_eq!(config.timeout_s(), 44);
        std::fs::write(
            dir.join("loop.conf"),
            format!("include {}\n", dir.join("loop.conf").display()),
        )
        .unwrap();
        let error = Config::from_text(
            &format!("include {}\n", dir.join("loop.conf").display()),
            None,
        )
        .unwrap_err();
        assert!(error.to_string().contains("nested too deeply"), "{error}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn load_errors_name_the_line() {
        let error = Config::from_text("port 1\nport abc\n", None)
            .unwrap_err()
            .to_string();
        assert!(
            error
                .contains("at line 2\n>>> 'port abc'\nargument couldn't be parsed into an integer"),
            "{error}"
        );
        let error = Config::from_text("nosuch 1\n", None)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(">>> 'nosuch 1'\nBad directive or wrong number of arguments"),
            "{error}"
        );
        let error = Config::from_text("maxmemory \"1\n", None)
            .unwrap_err()
            .to_string();
        assert!(
            error.ends_with("Unbalanced quotes in configuration line"),
            "{error}"
        );
    }

    #[test]
    fn set_is_all_or_nothing() {
        let config = Config::default();
        let before = config.epoch();
        let result = config.set(&[(b"maxmemory", b"10mb"), (b"hz", b"abc")], false);
        assert_eq!(
            result.unwrap_err().message(),
            "ERR CONFIG SET failed (possibly related to argument 'hz') - argument couldn't be parsed into an integer"
        );
        assert_eq!(config.get("maxmemory").unwrap(), "0");
        assert_eq!(config.epoch(), before);
        config
            .set(
                &[(b"maxmemory", b"10mb"), (b"SLAVE-READ-ONLY", b"no")],
                false,
            )
            .unwrap();
        assert_eq!(config.get("maxmemory").unwrap(), "10485760");
        assert_eq!(config.get("replica-read-only").unwrap(), "no");
        assert_ne!(config.epoch(), before);
    }
}
