//! MIGRATE: moves (or, with COPY, copies) keys to another Redis-compatible server by sending
//! it RESTORE commands carrying DUMP payloads, then deletes the keys the target accepted.
//!
//! Like Redis, the transfer is a blocking exchange with a timeout, run while the command holds
//! the whole keyspace (its keys sit where only its own parser finds them, so it locks every
//! shard). Connections to targets are kept for reuse and closed after ten idle seconds, as
//! Redis' `migrate_cached_sockets` are.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use latch_keyspace::lazyfree::{self, Cause};
use latch_persist::rdb::dump_payload;

use crate::commands::{err, is, parse_i64, Ctx};
use crate::pubsub::notify;
use crate::spec::{acl, flag, keyflag, Arg, BeginSearch, CommandSpec, FindKeys, KeySpec, LockPlan};

pub(super) const MIGRATE: CommandSpec = CommandSpec {
    name: "migrate",
    summary: "Moves keys to another server (DUMP here, RESTORE there, then DEL here).",
    since: "2.6.0",
    complexity: "A DUMP and DEL of each key here and a RESTORE there (see those commands), plus sending the payloads over the network.",
    arity: -6,
    flags: flag::WRITE,
    acl: acl::KEYSPACE | acl::DANGEROUS,
    key_specs: &[
        KeySpec::single(3, keyflag::RW | keyflag::ACCESS | keyflag::DELETE),
        KeySpec {
            flags: keyflag::RW | keyflag::ACCESS | keyflag::DELETE | keyflag::INCOMPLETE,
            begin: BeginSearch::Keyword {
                keyword: "KEYS",
                start_from: -2,
            },
            find: FindKeys::Range {
                last_key: -1,
                key_step: 1,
                limit: 0,
            },
            notes: None,
        },
    ],
    arguments: &[
        Arg::string("host"),
        Arg::integer("port"),
        Arg::oneof(
            "key_or_empty_string",
            &[Arg::key("key", 0), Arg::token("empty_string", "\"\"")],
        ),
        Arg::integer("destination-db"),
        Arg::integer("timeout"),
        Arg::token("copy", "COPY").optional().since("3.0.0"),
        Arg::token("replace", "REPLACE").optional().since("3.0.0"),
        Arg::oneof(
            "authentication",
            &[
                Arg::string("password")
                    .with_token("AUTH")
                    .optional()
                    .since("4.0.7"),
                Arg::block(
                    "username_password",
                    &[Arg::string("username"), Arg::string("password")],
                )
                .with_token("AUTH2")
                .optional()
                .since("6.0.0"),
            ],
        )
        .optional(),
        Arg::key("key", 1)
            .with_token("KEYS")
            .optional()
            .multiple()
            .since("3.0.6"),
    ],
    history: &[
        ("3.0.0", "Gained the `COPY` and `REPLACE` options."),
        ("3.0.6", "Gained the `KEYS` option."),
        ("4.0.7", "Gained the `AUTH` option."),
        ("6.0.0", "Gained the `AUTH2` option."),
    ],
    tips: &["nondeterministic_output"],
    handler: Some(migrate),
    lock: LockPlan::All,
    ..CommandSpec::BASE
};

/// How long an unused connection to a target stays open.
const IDLE_CLOSE: Duration = Duration::from_secs(10);
/// At most this many targets keep a connection (Redis' MIGRATE_SOCKET_CACHE_ITEMS).
const MAX_CACHED: usize = 64;

/// One connection to a target, with the database it last selected there.
struct Target {
    reader: BufReader<TcpStream>,
    db: Option<i64>,
    last_used: Instant,
}

/// Connections to MIGRATE targets, by `host:port`.
#[derive(Default)]
pub struct MigrateSockets {
    open: Mutex<HashMap<String, Target>>,
}

impl MigrateSockets {
    /// How many connections are open (INFO stats `migrate_cached_sockets`).
    pub fn count(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Closes connections unused for ten seconds (called by the server's cron).
    pub fn close_idle(&self) {
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, target| target.last_used.elapsed() <= IDLE_CLOSE);
    }

    /// Takes the open connection to `name` out of the cache (it goes back after a clean use).
    fn take(&self, name: &str) -> Option<Target> {
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name)
    }

    fn put_back(&self, name: String, mut target: Target) {
        target.last_used = Instant::now();
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.len() >= MAX_CACHED {
            if let Some(any) = open.keys().next().cloned() {
                open.remove(&any);
            }
        }
        open.insert(name, target);
    }
}

/// The positions of MIGRATE's keys, found as its own parser finds them (the KEYS key spec
/// is incomplete: a key named "keys" would mislead a search from the end).
pub fn keys_of(command: &str, args: &[Bytes]) -> Option<Vec<(usize, u16)>> {
    if command != "migrate" {
        return None;
    }
    let flags = keyflag::RW | keyflag::ACCESS | keyflag::DELETE;
    let mut at = 6;
    while at < args.len() {
        if is(&args[at], "AUTH") {
            at += 1;
        } else if is(&args[at], "AUTH2") {
            at += 2;
        } else if is(&args[at], "KEYS") {
            return Some((at + 1..args.len()).map(|p| (p, flags)).collect());
        }
        at += 1;
    }
    Some(vec![(3, flags)])
}

/// The argument positions MONITOR and the slow log must hide (AUTH and AUTH2 secrets).
pub fn secret_positions(args: &[Bytes]) -> Vec<usize> {
    let mut hidden = Vec::new();
    let mut at = 6;
    while at < args.len() {
        if is(&args[at], "AUTH") {
            hidden.push(at + 1);
            at += 1;
        } else if is(&args[at], "AUTH2") {
            hidden.extend([at + 1, at + 2]);
            at += 2;
        } else if is(&args[at], "KEYS") {
            break;
        }
        at += 1;
    }
    hidden.retain(|&p| p < args.len());
    hidden
}

struct Options<'a> {
    copy: bool,
    replace: bool,
    username: Option<&'a Bytes>,
    password: Option<&'a Bytes>,
    /// Where the keys are: `[3]`, or everything after KEYS.
    keys: &'a [Bytes],
}

fn parse_options<'a>(ctx: &mut Ctx<'_, '_>, args: &'a [Bytes]) -> Option<Options<'a>> {
    let mut options = Options {
        copy: false,
        replace: false,
        username: None,
        password: None,
        keys: &args[3..4],
    };
    let mut at = 6;
    while at < args.len() {
        let more = args.len() - 1 - at;
        if is(&args[at], "COPY") {
            options.copy = true;
        } else if is(&args[at], "REPLACE") {
            options.replace = true;
        } else if is(&args[at], "AUTH") && more >= 1 {
            options.password = Some(&args[at + 1]);
            at += 1;
        } else if is(&args[at], "AUTH2") && more >= 2 {
            options.username = Some(&args[at + 1]);
            options.password = Some(&args[at + 2]);
            at += 2;
        } else if is(&args[at], "KEYS") {
            if !args[3].is_empty() {
                ctx.reply.error(
                    b"ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                );
                return None;
            }
            options.keys = &args[at + 1..];
            break;
        } else {
            ctx.reply.error(err::SYNTAX);
            return None;
        }
        at += 1;
    }
    Some(options)
}

/// Appends one RESP command to `out`.
fn put_command(out: &mut Vec<u8>, parts: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", parts.len()).as_bytes());
    for part in parts {
        out.extend_from_slice(format!("${}\r\n", part.len()).as_bytes());
        out.extend_from_slice(part);
        out.extend_from_slice(b"\r\n");
    }
}

/// What went wrong talking to the target.
enum Failure {
    Write { timed_out: bool },
    Read { timed_out: bool },
}

fn timed_out(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
    )
}

fn connect(host: &[u8], port: &[u8], timeout: Duration) -> Option<Target> {
    let host = std::str::from_utf8(host).ok()?;
    let port: u16 = std::str::from_utf8(port).ok()?.parse().ok()?;
    let addrs = (host, port).to_socket_addrs().ok()?;
    for addr in addrs {
        if let Ok(stream) = TcpStream::connect_timeout(&addr, timeout) {
            let _ = stream.set_nodelay(true);
            return Some(Target {
                reader: BufReader::new(stream),
                db: None,
                last_used: Instant::now(),
            });
        }
    }
    None
}

/// Reads one reply line, without its CRLF.
fn read_line(target: &mut Target) -> Result<Vec<u8>, std::io::Error> {
    let mut line = Vec::new();
    let read = target.reader.read_until(b'\n', &mut line)?;
    if read == 0 || !line.ends_with(b"\n") {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    while line.last().is_some_and(|&b| b == b'\n' || b == b'\r') {
        line.pop();
    }
    Ok(line)
}

/// What the target answered: the keys it accepted (by index) and its first error.
struct Outcome {
    accepted: Vec<usize>,
    error: Option<Vec<u8>>,
    /// Set when the connection failed part way; `accepted` then holds the replies read.
    failure: Option<Failure>,
    /// How many RESTORE replies were read.
    replies: usize,
}

/// Sends AUTH, SELECT and one RESTORE per key, and reads the answers.
fn exchange(
    target: &mut Target,
    options: &Options<'_>,
    db: i64,
    restores: &[(Bytes, i64, Vec<u8>)],
    timeout: Duration,
) -> Outcome {
    let stream = target.reader.get_ref();
    let _ = stream.set_read_timeout(Some(timeout));
    let _ = stream.set_write_timeout(Some(timeout));
    let mut out = Vec::new();
    if let Some(password) = options.password {
        match options.username {
            Some(username) => put_command(&mut out, &[b"AUTH", username, password]),
            None => put_command(&mut out, &[b"AUTH", password]),
        }
    }
    let select = target.db != Some(db);
    if select {
        put_command(&mut out, &[b"SELECT", db.to_string().as_bytes()]);
    }
    for (key, ttl_ms, payload) in restores {
        let ttl = ttl_ms.to_string();
        let mut parts: Vec<&[u8]> = vec![b"RESTORE", key, ttl.as_bytes(), payload];
        if options.replace {
            parts.push(b"REPLACE");
        }
        put_command(&mut out, &parts);
    }
    let mut outcome = Outcome {
        accepted: Vec::new(),
        error: None,
        failure: None,
        replies: 0,
    };
    if let Err(e) = target.reader.get_mut().write_all(&out) {
        outcome.failure = Some(Failure::Write {
            timed_out: timed_out(&e),
        });
        return outcome;
    }
    let read_failure = |e: std::io::Error| Failure::Read {
        timed_out: timed_out(&e),
    };
    let mut refused = None;
    for wanted in [options.password.is_some(), select] {
        if !wanted {
            continue;
        }
        match read_line(target) {
            Ok(line) if line.first() == Some(&b'-') => {
                refused.get_or_insert(line);
            }
            Ok(_) => {}
            Err(e) => {
                outcome.failure = Some(read_failure(e));
                return outcome;
            }
        }
    }
    for index in 0..restores.len() {
        let line = match read_line(target) {
            Ok(line) => line,
            Err(e) => {
                outcome.failure = Some(read_failure(e));
                break;
            }
        };
        outcome.replies += 1;
        // An AUTH or SELECT refusal spoils every key, as in Redis.
        let error = refused
            .clone()
            .or_else(|| (line.first() == Some(&b'-')).then_some(line));
        match error {
            Some(error) => {
                outcome.error.get_or_insert(error);
            }
            None => outcome.accepted.push(index),
        }
    }
    outcome
}

fn migrate(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(options) = parse_options(ctx, args) else {
        return;
    };
    let (Some(timeout_ms), Some(dest_db)) = (parse_i64(&args[5]), parse_i64(&args[4])) else {
        ctx.reply.error(err::NOT_INTEGER);
        return;
    };
    let timeout = Duration::from_millis(if timeout_ms <= 0 {
        1000
    } else {
        timeout_ms as u64
    });

    // DUMP each key that exists, with what is left of its TTL (0: none).
    let db = ctx.db();
    let now = ctx.now();
    let mut restores: Vec<(Bytes, i64, Vec<u8>)> = Vec::new();
    // Redis reads the keys (a miss is reported).
    ctx.lookups_read(true);
    for key in options.keys {
        if let Some(slot) = ctx.keys.get_slot(db, key) {
            let ttl_ms = slot
                .deadline()
                .map_or(0, |deadline| deadline.remaining_ms(now).max(1));
            restores.push((key.clone(), ttl_ms, dump_payload(slot.value())));
        }
    }
    if restores.is_empty() {
        ctx.propagate_nothing();
        ctx.reply.simple(b"NOKEY");
        return;
    }

    let sockets = &ctx.server.migrate_sockets;
    let name = format!(
        "{}:{}",
        String::from_utf8_lossy(&args[1]),
        String::from_utf8_lossy(&args[2])
    );
    // A cached connection the target has since closed fails at once: like Redis, try once
    // more on a fresh one unless the failure was a timeout or some key was answered.
    let mut may_retry = true;
    let outcome = loop {
        let mut target = match sockets.take(&name) {
            Some(target) => target,
            None => match connect(&args[1], &args[2], timeout) {
                Some(target) => target,
                None => {
                    ctx.propagate_nothing();
                    ctx.reply
                        .error(b"IOERR error or timeout connecting to the client");
                    return;
                }
            },
        };
        let outcome = exchange(&mut target, &options, dest_db, &restores, timeout);
        let retry = match &outcome.failure {
            None => {
                target.db = if outcome.error.is_none() {
                    Some(dest_db)
                } else {
                    None
                };
                sockets.put_back(name.clone(), target);
                false
            }
            Some(Failure::Write { timed_out } | Failure::Read { timed_out }) => {
                may_retry && !timed_out && outcome.replies == 0 && outcome.error.is_none()
            }
        };
        if !retry {
            break outcome;
        }
        may_retry = false;
    };

    // Keys the target accepted leave this server (unless COPY), logged as a DEL.
    let mut deleted = vec![Bytes::from_static(b"DEL")];
    if !options.copy {
        for &index in &outcome.accepted {
            let key = &restores[index].0;
            if let Some(old) = ctx.keys.remove(db, key) {
                lazyfree::free_for(Cause::ServerDel, old.value);
                ctx.keys.signal_modified(db, key);
                ctx.notify(notify::GENERIC, "del", key);
                deleted.push(key.clone());
            }
        }
    }
    if deleted.len() > 1 {
        ctx.propagate(deleted);
    } else {
        ctx.propagate_nothing();
    }

    if let Some(error) = outcome.error {
        let mut message = b"ERR Target instance replied with error: ".to_vec();
        message.extend_from_slice(&error[1..]);
        ctx.reply.error(&message);
    } else if let Some(failure) = outcome.failure {
        let verb: &[u8] = match failure {
            Failure::Write { .. } => b"writing",
            _ => b"reading",
        };
        let mut message = b"IOERR error or timeout ".to_vec();
        message.extend_from_slice(verb);
        message.extend_from_slice(b" to target instance");
        ctx.reply.error(&message);
    } else {
        ctx.reply.ok();
    }
}
