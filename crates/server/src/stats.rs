//! Counters behind INFO stats, INFO commandstats and INFO errorstats, and the slow log.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Per-command counters (one per table entry).
#[derive(Debug, Default)]
pub struct CommandStats {
    pub calls: AtomicU64,
    pub usec: AtomicU64,
    pub rejected_calls: AtomicU64,
    pub failed_calls: AtomicU64,
    /// Call latencies while `latency-tracking` is on (INFO latencystats, LATENCY HISTOGRAM).
    pub latency: crate::latency_histogram::Histogram,
}

#[derive(Debug, Default)]
pub struct Stats {
    pub commands: Box<[CommandStats]>,
    pub total_connections_received: AtomicU64,
    pub total_commands_processed: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub expired_keys: AtomicU64,
    /// Keys removed for `maxmemory` (`crate::evict`).
    pub evicted_keys: AtomicU64,
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    /// Bytes of the replication stream (and snapshots) received from a primary / sent to
    /// replicas.
    pub net_repl_input_bytes: AtomicU64,
    pub net_repl_output_bytes: AtomicU64,
    pub total_error_replies: AtomicU64,
    /// Clients closed for passing `client-query-buffer-limit` / an output buffer limit
    /// (Redis 7.2's INFO fields of these names).
    pub client_query_buffer_limit_disconnections: AtomicU64,
    pub client_output_buffer_limit_disconnections: AtomicU64,
    /// Error replies by their first word (`ERR`, `WRONGTYPE`, ...).
    pub errors: Mutex<BTreeMap<String, u64>>,
}

impl Stats {
    pub fn new(commands: usize) -> Stats {
        Stats {
            commands: (0..commands).map(|_| CommandStats::default()).collect(),
            ..Stats::default()
        }
    }

    /// Counts one error reply by its prefix (the text up to the first space).
    pub fn record_error(&self, message: &[u8]) {
        self.total_error_replies.fetch_add(1, Ordering::Relaxed);
        let prefix = message.split(|&b| b == b' ').next().unwrap_or(b"ERR");
        let prefix = String::from_utf8_lossy(prefix).into_owned();
        let mut errors = self.errors.lock();
        // Redis stops tracking new prefixes past 128 kinds to bound memory.
        if errors.len() >= 128 && !errors.contains_key(&prefix) {
            return;
        }
        *errors.entry(prefix).or_insert(0) += 1;
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        latch_keyspace::lazyfree::reset_stats();
        for c in self.commands.iter() {
            c.calls.store(0, Ordering::Relaxed);
            c.usec.store(0, Ordering::Relaxed);
            c.rejected_calls.store(0, Ordering::Relaxed);
            c.failed_calls.store(0, Ordering::Relaxed);
            c.latency.reset();
        }
        for counter in [
            &self.total_connections_received,
            &self.total_commands_processed,
            &self.rejected_connections,
            &self.expired_keys,
            &self.evicted_keys,
            &self.keyspace_hits,
            &self.keyspace_misses,
            &self.net_input_bytes,
            &self.net_output_bytes,
            &self.net_repl_input_bytes,
            &self.net_repl_output_bytes,
            &self.total_error_replies,
            &self.client_query_buffer_limit_disconnections,
            &self.client_output_buffer_limit_disconnections,
        ] {
            counter.store(0, Ordering::Relaxed);
        }
        self.errors.lock().clear();
    }
}

/// One slow-log record.
#[derive(Debug, Clone)]
pub struct SlowEntry {
    pub id: u64,
    pub unix_s: i64,
    pub duration_us: u64,
    pub args: Vec<Vec<u8>>,
    pub peer: String,
    pub name: String,
}

/// The slow log: the most recent commands slower than `slowlog-log-slower-than`.
#[derive(Debug, Default)]
pub struct SlowLog {
    pub next_id: u64,
    pub entries: VecDeque<SlowEntry>,
}

/// Redis keeps at most this many arguments of a logged command, each cut to this many bytes.
pub const SLOWLOG_MAX_ARGS: usize = 32;
pub const SLOWLOG_MAX_ARG_LEN: usize = 128;

impl SlowLog {
    pub fn push(&mut self, mut entry: SlowEntry, max_len: usize) {
        entry.id = self.next_id;
        self.next_id += 1;
        self.entries.push_front(entry);
        while self.entries.len() > max_len {
            self.entries.pop_back();
        }
    }
}

/// The shape Redis gives a logged command's arguments: at most 32 (the last one saying how
/// many more there were), each at most 128 bytes (with how many more).
pub fn slowlog_args(args: &[bytes::Bytes]) -> Vec<Vec<u8>> {
    let shown = args.len().min(SLOWLOG_MAX_ARGS);
    let mut out = Vec::with_capacity(shown);
    for (i, arg) in args.iter().take(shown).enumerate() {
        if shown != args.len() && i == shown - 1 {
            out.push(format!("... ({} more arguments)", args.len() - shown + 1).into_bytes());
        } else if arg.len() > SLOWLOG_MAX_ARG_LEN {
            let mut cut = arg[..SLOWLOG_MAX_ARG_LEN].to_vec();
            cut.extend_from_slice(
                format!("... ({} more bytes)", arg.len() - SLOWLOG_MAX_ARG_LEN).as_bytes(),
            );
            out.push(cut);
        } else {
            out.push(arg.to_vec());
        }
    }
    out
}
