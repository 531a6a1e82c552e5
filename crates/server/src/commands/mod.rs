//! Command implementations, one file per command family. Each family exports `COMMANDS`,
//! its entries of the command table (spec and handler side by side); `crate::table`
//! gathers them.
//!
//! A handler gets a [`Ctx`] (the server, the calling client, the reply being written, and
//! the keyspace view holding the shards the gatekeeper locked) and the arguments.

pub mod acl;
pub mod bitmap;
pub mod client;
pub mod cluster;
pub mod command;
pub mod config;
pub mod connection;
pub mod databases;
pub mod dataset_digest;
pub mod debug;
pub mod function;
pub mod geo;
pub mod hash;
pub mod hyperloglog;
pub mod info;
pub mod keys;
pub mod list;
pub mod locks;
pub mod lolwut;
pub mod module;
pub mod persistence;
pub mod pubsub;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod set;
pub mod sort;
pub mod stream;
pub mod string;
pub mod transaction;
pub mod zset;

use bytes::Bytes;
use latch_keyspace::{Locked, Now};
use latch_protocol::Reply;

use crate::client::Client;
use crate::server::Server;

/// Everything a handler may touch.
pub struct Ctx<'c, 'k> {
    pub server: &'c Server,
    pub client: &'c mut Client,
    pub reply: &'c mut Reply,
    pub keys: &'c mut Locked<'k>,
}

impl Ctx<'_, '_> {
    /// The client's selected database.
    pub fn db(&self) -> usize {
        self.client.db
    }

    /// The frozen time of this command (or of the whole transaction or script).
    pub fn now(&self) -> Now {
        self.keys.now()
    }

    /// Logs this command (to the AOF) as `args` instead of as it was received: relative
    /// times made absolute, random choices made explicit, blocking forms made plain. Call
    /// it once per command to log; the received command is then not logged. Cheap when
    /// nothing is logged.
    pub fn propagate(&mut self, args: Vec<Bytes>) {
        self.client.propagation_replaced = true;
        if self.server.persistence.is_logging() {
            self.client.propagated.push(crate::client::Propagated {
                db: self.client.db,
                args,
                replicas_only: false,
                aof_only: false,
            });
        }
    }

    /// Sends this command to the replicas but not to the AOF, as Redis does with PUBLISH
    /// (a replica's subscribers hear what the primary's hear). Adds to what the command
    /// logs: the command still logs itself if it is a write that changed something.
    pub fn propagate_to_replicas(&mut self, args: &[Bytes]) {
        if self.server.persistence.feeds_replicas() {
            self.client.propagated.push(crate::client::Propagated {
                db: self.client.db,
                args: args.to_vec(),
                replicas_only: true,
                aof_only: false,
            });
        }
    }

    /// Like [`propagate`](Self::propagate), building the arguments only when logging.
    pub fn propagate_with(&mut self, args: impl FnOnce() -> Vec<Bytes>) {
        self.client.propagation_replaced = true;
        if self.server.persistence.is_logging() {
            let args = args();
            self.client.propagated.push(crate::client::Propagated {
                db: self.client.db,
                args,
                replicas_only: false,
                aof_only: false,
            });
        }
    }

    /// Reports `event` (of notification `class`, a [`crate::pubsub::notify`] constant) about
    /// `key` in the client's database. Call it where the change is signalled, in the order
    /// Redis does. One relaxed load when the class is not published.
    #[inline]
    pub fn notify(&mut self, class: u32, event: &'static str, key: &[u8]) {
        let db = self.client.db;
        self.notify_db(class, event, key, db);
    }

    /// [`notify`](Self::notify) for a key of database `db` (MOVE, COPY ... DB).
    #[inline]
    pub fn notify_db(&mut self, class: u32, event: &'static str, key: &[u8], db: usize) {
        if self.server.pubsub.notify_flags() & class == 0 {
            return;
        }
        self.publish_event(event, key, db);
    }

    #[cold]
    #[inline(never)]
    fn publish_event(&mut self, event: &'static str, key: &[u8], db: usize) {
        // What the keyspace recorded before this change happened before it.
        crate::pubsub::notify::flush(self.server, self.keys);
        let flags = self.server.pubsub.notify_flags();
        crate::pubsub::notify::publish(self.server, flags, event, key, db);
    }

    /// Whether the key lookups that follow are reads (Redis' `lookupKeyRead`, which sends
    /// `keymiss` on a miss) or writes (`lookupKeyWrite`, which does not). Each command
    /// starts with reads if it is read-only, writes otherwise; a command that mixes them
    /// says which comes next.
    #[inline]
    pub fn lookups_read(&mut self, reads: bool) {
        let flags = self.server.pubsub.notify_flags();
        if flags != 0 {
            self.keys.record = crate::pubsub::notify::record_bits(flags, reads);
        }
    }

    /// This command is not logged even though it changed something (or is logged only
    /// through what it passed to [`propagate`](Self::propagate)).
    pub fn propagate_nothing(&mut self) {
        self.client.propagation_replaced = true;
    }
}

/// Redis' error replies, word for word.
pub mod err {
    pub const WRONGTYPE: &[u8] =
        b"WRONGTYPE Operation against a key holding the wrong kind of value";
    pub const NOT_INTEGER: &[u8] = b"ERR value is not an integer or out of range";
    pub const NOT_FLOAT: &[u8] = b"ERR value is not a valid float";
    pub const SYNTAX: &[u8] = b"ERR syntax error";
    pub const OVERFLOW: &[u8] = b"ERR increment or decrement would overflow";
    pub const DB_INDEX: &[u8] = b"ERR DB index is out of range";
    pub const NO_SUCH_KEY: &[u8] = b"ERR no such key";
    pub const SAME_OBJECT: &[u8] = b"ERR source and destination objects are the same";
    pub const INVALID_CURSOR: &[u8] = b"ERR invalid cursor";
    pub const NOAUTH: &[u8] = b"NOAUTH Authentication required.";
    pub const OOM: &[u8] = b"OOM command not allowed when used memory > 'maxmemory'.";
    pub const NOREPLICAS: &[u8] = b"NOREPLICAS Not enough good replicas to write.";
    pub const READONLY: &[u8] = b"READONLY You can't write against a read only replica.";
    pub const NOT_POSITIVE: &[u8] = b"ERR value is out of range, must be positive";
}

/// The keys of a command whose key specs cannot find them all for sure (SORT's BY/GET/STORE,
/// MIGRATE's KEYS), found by the command's own parser, with each key's spec flags; `None`
/// for every other command, whose key specs are exact. `name` is the full name.
pub fn parsed_keys(name: &str, args: &[Bytes]) -> Option<Vec<(usize, u16)>> {
    sort::keys_of(name, args).or_else(|| keys::migrate::keys_of(name, args))
}

/// Redis' `wrong number of arguments` error for a command's full name (`config|get`).
pub fn arity_error(full_name: &str) -> Vec<u8> {
    format!("ERR wrong number of arguments for '{full_name}' command").into_bytes()
}

/// Parses an integer argument as Redis' `getLongLongFromObject` does (strict).
pub fn parse_i64(arg: &[u8]) -> Option<i64> {
    latch_keyspace::parse_i64_strict(arg)
}

/// Parses an integer argument or writes Redis' "not an integer" error. Use as
/// `let Some(n) = int_arg(ctx, &args[2]) else { return };`.
pub fn int_arg(ctx: &mut Ctx<'_, '_>, arg: &[u8]) -> Option<i64> {
    let parsed = parse_i64(arg);
    if parsed.is_none() {
        ctx.reply.error(err::NOT_INTEGER);
    }
    parsed
}

/// Parses a float argument as Redis' `getLongDoubleFromObject` does: no leading space,
/// the whole argument consumed, not NaN. Infinity is allowed (callers refuse it where Redis does).
pub fn parse_f64(arg: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(arg).ok()?;
    if text.is_empty()
        || text.starts_with(|c: char| c.is_ascii_whitespace())
        || text.ends_with(|c: char| c.is_ascii_whitespace())
    {
        return None;
    }
    let lower = text.to_ascii_lowercase();
    let value = match lower.trim_start_matches(['+', '-']) {
        "inf" | "infinity" => {
            if lower.starts_with('-') {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }
        }
        _ => {
            // Rust accepts things C's strtold does not ("inf" spellings handled above) and
            // vice versa (hex floats); decimal forms agree.
            if lower.contains(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | 'e' | '+' | '-')))
            {
                return None;
            }
            text.parse::<f64>().ok()?
        }
    };
    if value.is_nan() {
        None
    } else {
        Some(value)
    }
}

/// Case-insensitive comparison of an argument with an upper-case keyword.
pub fn is(arg: &[u8], keyword: &str) -> bool {
    arg.eq_ignore_ascii_case(keyword.as_bytes())
}

/// The `[COUNT n]` that ends LMPOP / ZMPOP (and their blocking forms): 1 when absent.
/// Writes Redis' error and returns `None` on a bad one.
pub fn mpop_count(reply: &mut Reply, options: &[bytes::Bytes]) -> Option<usize> {
    let mut count = None;
    let mut index = 0;
    while index < options.len() {
        let has_value = index + 1 < options.len();
        if count.is_none() && is(&options[index], "COUNT") && has_value {
            match parse_i64(&options[index + 1]).filter(|n| *n > 0) {
                Some(n) => count = Some(usize::try_from(n).unwrap_or(usize::MAX)),
                None => {
                    reply.error(b"ERR count should be greater than 0");
                    return None;
                }
            }
            index += 2;
        } else {
            reply.error(err::SYNTAX);
            return None;
        }
    }
    Some(count.unwrap_or(1))
}
