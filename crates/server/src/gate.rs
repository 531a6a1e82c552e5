//! The gatekeeper: the one path every command takes, from a client's arguments to its reply.
//!
//! In order: find the command (and subcommand), check arity, check authentication, decide
//! which shards to lock from the key specs, run the handler with one frozen `now`, then
//! account for it (stats, slow log, MONITOR). Inside MULTI, admitted commands are queued
//! here instead; EXEC runs the queue through the same `run` and `account` under one lock
//! (`run_transaction`). Scripts' `redis.call` will enter here too.
//!
//! Blocking commands (BLPOP & co): a handler that finds nothing calls [`block`], which queues
//! the client on its keys in the keyspace (under the keys' locks, so no write is missed) and
//! answers nothing; the connection (net.rs) then waits. A write that leaves a queued key
//! holding something wakes the first client in that key's queue; the connection runs the same
//! arguments here again (a *retry*). A retry that answers leaves the queues and wakes the next
//! client of each key that still holds something; one that finds nothing keeps its place and
//! lets the next client try. So clients are served first come, first served per key, one at a
//! time, as in Redis; and the writer waits for the retries it caused before its next command,
//! so chains (BLMOVE into a list another client waits on) finish before it goes on.
//! Differences from Redis: a client blocked on several keys is served from the first of its
//! keys (in argument order) that holds something, where Redis serves it from the key that
//! became ready; and a writer waits for the retries at most a second.

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use latch_keyspace::{Effects, KeyWaiter, Locked, Tick};
use latch_protocol::Reply;

use crate::client::{BlockRequest, Client, Queued, ReplyMode, Waiter};
use crate::commands::{arity_error, err, Ctx};
use crate::pause::PauseMode;
use crate::server::Server;
use crate::spec::{flag, key_positions, CommandSpec, LockPlan};
use crate::stats::{slowlog_args, SlowEntry};
use crate::table::{table, Command};

/// What became of a command handed to [`execute`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It ran (or was refused) and its reply is written.
    Done,
    /// A script holds the server: nothing was done or written. The connection waits
    /// (`scripting::wait`, passing `until_end`) and hands the same command in again.
    Deferred { until_end: bool },
    /// CLIENT PAUSE holds the command: nothing was done or written. The connection waits
    /// for the pause to end (`Pause::released`; `Client::held_since` tells which) and
    /// hands the same command in again.
    Paused,
}

/// Prefetches the keys of a batch of commands a connection is about to run, so that their
/// cache misses overlap instead of coming one after another: first every key's slots, then
/// (they have had time to arrive) each key's bytes and string value. Keys as the key specs
/// find them, at most [`PREFETCH_KEYS`] per batch.
///
/// `found` gets each command's table entry, so that running it does not look its name up
/// again (an entry left `None` is looked up then).
pub fn prefetch(
    server: &Server,
    client: &Client,
    batch: &[Vec<Bytes>],
    found: &mut [Option<&'static Command>],
) {
    let mut hashes = [0u64; PREFETCH_KEYS];
    let mut keys: [&[u8]; PREFETCH_KEYS] = [&[]; PREFETCH_KEYS];
    let mut count = 0;
    let table = table();
    // A pipeline mostly repeats one command: a name spelled as the one before is that
    // command again, without a probe of the name table (40 KB, mostly out of L1).
    let mut last: Option<(&[u8], &'static Command)> = None;
    for (args, found) in batch.iter().zip(found.iter_mut()) {
        if count == PREFETCH_KEYS {
            break;
        }
        if args.is_empty() {
            continue;
        }
        let command = match last {
            Some((name, command)) if name == &args[0][..] => command,
            _ => {
                let Some(command) = table.lookup_called(&args[0]) else {
                    continue;
                };
                last = Some((&args[0], command));
                command
            }
        };
        *found = Some(command);
        if args.len() < 2 {
            continue;
        }
        if command.spec.lock != LockPlan::Keys {
            continue;
        }
        let _ = command.visit_keys(args, |at, _| {
            // A pipeline to one key (a queue's pushes and pops, a counter) names the key
            // the command before named: it is in cache already, and each prefetch step
            // costs a try-lock of its shard.
            // (The last bytes first: random keys mostly differ there, and cheaply.)
            let repeated = count > 0 && {
                let (before, key) = (keys[count - 1], &args[at][..]);
                before.len() == key.len() && before.last() == key.last() && before == key
            };
            if count < PREFETCH_KEYS && !repeated {
                hashes[count] = server.keyspace.prefetch(client.db, &args[at]);
                keys[count] = &args[at];
                count += 1;
            }
        });
    }
    // Each step reads what the one before started loading: bucket, slot, string value.
    for hash in &hashes[..count] {
        server.keyspace.prefetch_contents(client.db, *hash);
    }
    for (hash, key) in hashes[..count].iter().zip(&keys[..count]) {
        server.keyspace.prefetch_value(client.db, *hash, key);
    }
}

/// Most keys one batch prefetches (more would evict what the first ones brought in).
const PREFETCH_KEYS: usize = 64;

/// Runs one command from a client and writes its reply (unless replies are off). `found`:
/// the top-level command `args[0]` names, when [`prefetch`] looked it up already.
/// `reading`: a clock reading the command may take as its start, made just now (the end of
/// the command before it, left in [`Client::reading`]); `None` reads the clock.
pub fn execute(
    server: &Server,
    client: &mut Client,
    reply: &mut Reply,
    args: &[Bytes],
    found: Option<&'static Command>,
    reading: Option<Tick>,
) -> Outcome {
    client.reading = reading;
    if args.is_empty() {
        return Outcome::Done;
    }
    let mark = reply.len();
    let suppress = matches!(client.reply_mode, ReplyMode::Off | ReplyMode::Skip);
    // SKIP holds while the command runs (pushes such as subscribe confirmations still go
    // out), and is used up once it ran, unless the command changed the mode itself.
    let skipping = client.reply_mode == ReplyMode::Skip;
    let errors_before = reply.error_count();
    let outcome = dispatch(server, client, reply, args, found);
    if outcome != Outcome::Done {
        // The command will come back (after a script, or a pause), still skipped.
        return outcome;
    }
    if skipping && client.reply_mode == ReplyMode::Skip {
        client.reply_mode = ReplyMode::On;
    }
    record_errors(server, reply, mark, errors_before);
    crate::tracking::command_done(client, args);
    // CLIENT REPLY answers only when it turns replies on; anything else follows the mode it
    // started under.
    let drop_reply = if is_client_reply(args) {
        client.reply_mode != ReplyMode::On
    } else {
        suppress
    };
    if drop_reply {
        reply.truncate(mark);
    }
    if client.reply_mode == ReplyMode::SkipNext {
        client.reply_mode = ReplyMode::Skip;
    }
    Outcome::Done
}

fn is_client_reply(args: &[Bytes]) -> bool {
    args.len() >= 3
        && args[0].eq_ignore_ascii_case(b"client")
        && args[1].eq_ignore_ascii_case(b"reply")
}

/// Feeds error replies written since `mark` into INFO errorstats.
fn record_errors(server: &Server, reply: &mut Reply, mark: usize, errors_before: u64) {
    if reply.error_count() == errors_before {
        return;
    }
    let skip = reply.take_counted_elsewhere();
    // Errors are rare: scan the written bytes for top-level `-` lines.
    let written = reply.buffer()[mark..].to_vec();
    let mut at = mark;
    for line in written.split(|&b| b == b'\n') {
        let start = at;
        at += line.len() + 1;
        if skip.contains(&start) {
            continue;
        }
        if let Some(message) = line.strip_prefix(b"-") {
            let message = message.strip_suffix(b"\r").unwrap_or(message);
            server.stats.record_error(message);
        }
    }
}

/// Finds the command; writes the rejection when there is none or its arity is wrong.
pub fn resolve<'t>(args: &[Bytes], reply: &mut Reply) -> Option<&'t Command> {
    match lookup(args) {
        Ok(command) => Some(command),
        Err(message) => {
            reply.error(&message);
            None
        }
    }
}

/// Finds the command (and subcommand) and checks its arity; the error text otherwise.
fn lookup<'t>(args: &[Bytes]) -> Result<&'t Command, Vec<u8>> {
    lookup_from(args, None)
}

/// [`lookup`], starting from the top-level command when the caller found it already.
fn lookup_from<'t>(args: &[Bytes], found: Option<&'t Command>) -> Result<&'t Command, Vec<u8>> {
    let table = table();
    let Some(command) = found.or_else(|| table.lookup_called(&args[0])) else {
        return Err(unknown_command(args));
    };
    let command = if command.spec.subcommands.is_empty() {
        command
    } else if args.len() < 2 && command.spec.handler.is_some() {
        // A container that also runs on its own (`COMMAND`).
        command
    } else {
        if args.len() < 2 {
            return Err(arity_error(&command.full_name));
        }
        match table.subcommand(command, &args[1]) {
            Some(sub) => sub,
            None => {
                let message = format!(
                    "ERR unknown subcommand '{}'. Try {} HELP.",
                    truncated(&args[1], 128),
                    String::from_utf8_lossy(&args[0]).to_uppercase()
                );
                return Err(message.into_bytes());
            }
        }
    };
    if !command.spec.arity_ok(args.len()) {
        return Err(arity_error(&command.full_name));
    }
    Ok(command)
}

fn truncated(arg: &[u8], max: usize) -> String {
    String::from_utf8_lossy(&arg[..arg.len().min(max)]).into_owned()
}

/// `ERR unknown command 'x', with args beginning with: 'a' 'b' `, as Redis words it.
fn unknown_command(args: &[Bytes]) -> Vec<u8> {
    let mut listed = String::new();
    for arg in &args[1..] {
        if listed.len() >= 128 {
            break;
        }
        let room = 128 - listed.len();
        listed.push('\'');
        listed.push_str(&truncated(arg, room));
        listed.push_str("' ");
    }
    format!(
        "ERR unknown command '{}', with args beginning with: {}",
        truncated(&args[0], 128),
        listed
    )
    .into_bytes()
}

/// Table ids of the commands the gatekeeper treats specially.
struct Special {
    exec: usize,
    reset: usize,
    /// Commands that run at once even inside MULTI (Redis' processCommand list).
    not_queued: [usize; 6],
    /// What a client in MULTI may still send over `maxmemory`.
    oom_exempt_in_multi: [usize; 4],
    /// What a RESP2 client may send while it subscribes to something.
    in_subscribed_mode: [usize; 9],
}

fn special() -> &'static Special {
    static SPECIAL: OnceLock<Special> = OnceLock::new();
    SPECIAL.get_or_init(|| {
        let id = |name: &str| {
            table()
                .lookup(name.as_bytes())
                .map_or(usize::MAX, |command| command.id)
        };
        Special {
            exec: id("exec"),
            reset: id("reset"),
            not_queued: [
                id("exec"),
                id("discard"),
                id("multi"),
                id("watch"),
                id("quit"),
                id("reset"),
            ],
            oom_exempt_in_multi: [id("exec"), id("discard"), id("quit"), id("reset")],
            in_subscribed_mode: [
                id("ping"),
                id("subscribe"),
                id("ssubscribe"),
                id("unsubscribe"),
                id("sunsubscribe"),
                id("psubscribe"),
                id("punsubscribe"),
                id("quit"),
                id("reset"),
            ],
        }
    })
}

fn dispatch(
    server: &Server,
    client: &mut Client,
    reply: &mut Reply,
    args: &[Bytes],
    found: Option<&'static Command>,
) -> Outcome {
    let command = match lookup_from(args, found) {
        Ok(command) => command,
        Err(message) => {
            let known = table().lookup_called(&args[0]);
            reject(server, client, reply, known, args, &message);
            return Outcome::Done;
        }
    };
    // Redis records the command as soon as it is found (before running, refusing or queueing
    // it), so CLIENT LIST shows itself.
    client
        .shared
        .last_command
        .store(command.id + 1, Ordering::Relaxed);
    let spec = command.spec;
    if spec.has_flag(flag::PROTECTED) {
        if let Some(message) = protected_refusal(server, client, command) {
            reject(
                server,
                client,
                reply,
                Some(command),
                args,
                message.as_bytes(),
            );
            return Outcome::Done;
        }
    }
    if !client.authenticated && !spec.has_flag(flag::NO_AUTH) {
        reject(server, client, reply, Some(command), args, err::NOAUTH);
        return Outcome::Done;
    }
    if let Some(denied) = client.user.check(command, args) {
        let context = if client.multi.is_some() {
            crate::acl_log::Context::Multi
        } else {
            crate::acl_log::Context::TopLevel
        };
        crate::acl_log::log_denied(server, client, denied, context, command, args);
        let message = format!("NOPERM {}", denied.reason(command));
        reject(
            server,
            client,
            reply,
            Some(command),
            args,
            message.as_bytes(),
        );
        return Outcome::Done;
    }
    // The primary's stream is applied whatever limits this replica's own clients meet.
    let link = client.must_obey();
    if !link
        && client.blocked.is_none()
        && !server.scripting.run.is_busy()
        && refused_for_memory(server, client, command)
    {
        reject(server, client, reply, Some(command), args, err::OOM);
        return Outcome::Done;
    }
    // After eviction, Redis brings the tracking table under `tracking-table-max-keys`
    // (the cron does it too), so a lowered limit acts on the next command, queued or not.
    if server.tracking.client_count() > 0 {
        server.tracking.limit_table(server);
    }
    if client.shared.outbox.queued() > 0
        && !matches!(client.reply_mode, ReplyMode::Off | ReplyMode::Skip)
    {
        // What eviction or the table's limit just told this client (it tracked a key that
        // went) goes before the reply, as in Redis, which does both before the command.
        client.shared.outbox.take_into(reply.buffer());
    }
    if !link && !server.enough_replicas() && writes(server, client, command) {
        reject(server, client, reply, Some(command), args, err::NOREPLICAS);
        return Outcome::Done;
    }
    if !link && read_only_replica(server, client) && writes(server, client, command) {
        reject(server, client, reply, Some(command), args, err::READONLY);
        return Outcome::Done;
    }
    let delay_ms = if link {
        0
    } else {
        server.persistence.restart_delay_left_ms(server)
    };
    if delay_ms > 0 && writes(server, client, command) {
        let message = restart_delay_error(delay_ms);
        reject(
            server,
            client,
            reply,
            Some(command),
            args,
            message.as_bytes(),
        );
        return Outcome::Done;
    }
    if client.subscriptions.any()
        && reply.resp() == latch_protocol::Resp::V2
        && !special().in_subscribed_mode.contains(&command.id)
    {
        let message = format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            command.full_name
        );
        reject(
            server,
            client,
            reply,
            Some(command),
            args,
            message.as_bytes(),
        );
        return Outcome::Done;
    }
    // EXEC is refused when a queued command would be (Redis folds the queue's flags in).
    let denied_when_stale = !spec.has_flag(flag::STALE)
        || (command.id == special().exec && queue_has(client, |spec| !spec.has_flag(flag::STALE)));
    if !link && denied_when_stale && server.replication.is_replica() && stale_data_refused(server) {
        let message =
            b"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";
        reject(server, client, reply, Some(command), args, message);
        return Outcome::Done;
    }
    // While a data set loads (DEBUG RELOAD / LOADAOF, a replica's sync), only commands
    // flagged `loading` run; Redis checks this before a busy script (one the load runs).
    if !link && crate::persistence::is_loading() {
        let refused = !spec.has_flag(flag::LOADING)
            || (command.id == special().exec
                && queue_has(client, |spec| !spec.has_flag(flag::LOADING)));
        if refused {
            let message = b"LOADING Redis is loading the dataset in memory";
            reject(server, client, reply, Some(command), args, message);
            return Outcome::Done;
        }
    }
    // A script holds the server (Redis reads no input then, until the busy threshold).
    if server.scripting.run.is_running()
        && !server.scripting.wait_out_short_script(SHORT_SCRIPT_SPIN)
    {
        if client.blocked.is_some() {
            return Outcome::Deferred { until_end: true };
        }
        if !spec.has_flag(flag::ALLOW_BUSY) {
            if server.scripting.run.is_busy() {
                let message: &[u8] = if server.scripting.run.is_eval() {
                    b"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
                } else {
                    b"BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
                };
                reject(server, client, reply, Some(command), args, message);
                return Outcome::Done;
            }
            return Outcome::Deferred { until_end: false };
        }
    }
    if client.multi.is_some() && spec.has_flag(flag::NO_MULTI) {
        let message = b"ERR Command not allowed inside a transaction";
        reject(server, client, reply, Some(command), args, message);
        return Outcome::Done;
    }
    // CLIENT PAUSE holds what it pauses before it is queued or run, as Redis does (so a
    // write sent inside MULTI waits too). A blocked client's retry is never held: only a
    // write wakes it, and Redis serves it then, pause or not.
    if server.pause.may_be_paused() && client.blocked.is_none() {
        if let Some(outcome) = held_by_pause(server, client, command, args) {
            return outcome;
        }
    }
    if client.multi.is_some() && !special().not_queued.contains(&command.id) {
        queue(client, command, args);
        reply.simple(b"QUEUED");
        return Outcome::Done;
    }
    if command.id == special().reset {
        // RESET leaves any transaction and unwatches, before taking its (empty) lock.
        crate::commands::transaction::discard_transaction(server, client);
    }
    // Scripts (and what touches the VM) run one at a time: take the claim first.
    let _claim = if needs_claim(command, client) {
        match Claim::take(server) {
            Some(claim) => Some(claim),
            None => return Outcome::Deferred { until_end: false },
        }
    } else {
        None
    };
    // A blocked client's command runs again when one of its keys may serve it.
    let retry = client.blocked.is_some();
    let first_run_us = client
        .blocked
        .as_ref()
        .map_or(0, |block| block.first_run_us);
    let mark = reply.len();
    let ran = {
        let mut keys = lock_for(server, command, args, client.reading.take());
        if client.is_primary_link {
            sees_passed_keys(&mut keys);
        }
        if let Some(block) = &client.blocked {
            block.waiter.begin_retry();
        }
        let ran = run_command(server, client, reply, command, args, &mut keys);
        if retry {
            settle_retry(server, client, reply.len() > mark, &mut keys);
        }
        // Logged while the locks are held, so the log's order is the order of effect.
        if !client.propagated.is_empty() {
            let atomic = command.id == special().exec
                || matches!(command.spec.lock, LockPlan::Script | LockPlan::LockAndFence);
            server.persistence.commit(client, atomic);
        }
        if !keys.woken.is_empty() {
            client.woken.append(&mut keys.woken);
        }
        ran
    };
    if retry {
        if client.blocked.is_none() {
            account_unblocked(server, client, command, args, first_run_us, ran);
        } else if ran.failed {
            server.stats.commands[command.id]
                .failed_calls
                .fetch_add(1, Ordering::Relaxed);
        }
    } else if let Some(block) = client.blocked.as_mut() {
        // It blocked: the slow log and the latency histogram wait for the run that
        // answers, as in Redis.
        block.first_run_us = ran.elapsed_us;
        account_as(server, client, command, args, ran, false);
    } else {
        account(server, client, command, args, ran);
    }
    Outcome::Done
}

/// The refusal of a protected command (DEBUG and MODULE's loading subcommands, each
/// behind its own option) when its option does not allow this client; `None` to go on.
#[cold]
#[inline(never)]
fn protected_refusal(server: &Server, client: &Client, command: &Command) -> Option<String> {
    let (name, option) = if command.full_name.starts_with("module|") {
        ("MODULE".to_string(), "enable-module-command")
    } else {
        (command.full_name.to_uppercase(), "enable-debug-command")
    };
    if server
        .config
        .protected_command_allowed(option, client.shared.is_local())
    {
        return None;
    }
    Some(format!(
        "ERR {name} command not allowed. If the {option} option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server."
    ))
}

/// What a pause in force does to `command`: `Paused` when it holds it, `Deferred` when
/// that depends on a script's flags and a script holds the VM, `None` to go on.
#[cold]
#[inline(never)]
fn held_by_pause(
    server: &Server,
    client: &mut Client,
    command: &Command,
    args: &[Bytes],
) -> Option<Outcome> {
    let (mode, ended) = server.pause.in_force_since(&server.keyspace);
    let held = match mode {
        PauseMode::Off => false,
        PauseMode::All => true,
        PauseMode::Write => match may_replicate(server, client, command, args) {
            Some(may) => may,
            None => return Some(Outcome::Deferred { until_end: false }),
        },
    };
    held.then(|| {
        client.held_since = ended;
        Outcome::Paused
    })
}

/// Whether a command may write or be replicated, what `CLIENT PAUSE WRITE` holds (Redis'
/// `write` and `may_replicate` flags): for EXEC, whether any queued command may; for
/// EVAL & co, what the script declares in its shebang (or its function's flags), when
/// it declares anything. `None` when that takes the VM and a script holds it.
fn may_replicate(
    server: &Server,
    client: &Client,
    command: &Command,
    args: &[Bytes],
) -> Option<bool> {
    if command.id != special().exec {
        return command_may_replicate(server, command, args);
    }
    let table = table();
    let Some(transaction) = client.multi.as_ref() else {
        return Some(false);
    };
    for entry in &transaction.queued {
        if command_may_replicate(server, table.get(entry.id), &entry.args)? {
            return Some(true);
        }
    }
    Some(false)
}

/// [`may_replicate`] for one command (not EXEC).
fn command_may_replicate(server: &Server, command: &Command, args: &[Bytes]) -> Option<bool> {
    let declared = command.spec.flags & (flag::WRITE | flag::MAY_REPLICATE) != 0;
    writes_as_declared(server, command, args, declared)
}

/// Whether a command writes: `declared` (from its own flags), unless it is a script
/// command whose script declares flags: a script that declares them may write unless it
/// says `no-writes`; one that declares none (no shebang), or is not known yet, goes by
/// `declared`. `None` when finding out takes the VM and a script holds it.
fn writes_as_declared(
    server: &Server,
    command: &Command,
    args: &[Bytes],
    declared: bool,
) -> Option<bool> {
    if command.spec.lock != LockPlan::Script {
        return Some(declared);
    }
    Some(match script_flags(server, command, args)? {
        Some(flags) if !flags.compat => !flags.no_writes,
        _ => declared,
    })
}

/// What the script of a script command (EVAL & co, FCALL & co) declares: its shebang, or
/// its function's flags; `Some(None)` when it is not known (an EVALSHA not cached), `None`
/// when finding out takes the VM and a script holds it.
fn script_flags(
    server: &Server,
    command: &Command,
    args: &[Bytes],
) -> Option<Option<crate::scripting::engine::ScriptFlags>> {
    Some(match command.spec.name {
        "eval" | "eval_ro" => crate::scripting::engine::parse_shebang(&args[1])
            .ok()
            .map(|(flags, _)| flags),
        "evalsha" | "evalsha_ro" if args[1].len() == 40 => {
            let _claim = Claim::take(server)?;
            server
                .scripting
                .with_engine(|engine| engine.cached_flags(&args[1]))
        }
        "fcall" | "fcall_ro" => {
            let _claim = Claim::take(server)?;
            server
                .scripting
                .with_function_engine(|engine| engine.function_flags(&args[1]))
        }
        _ => None,
    })
}

/// The refusal of a write during `restart-delay`.
pub fn restart_delay_error(left_ms: u64) -> String {
    format!(
        "RESTARTDELAY writes are refused for another {left_ms} ms: the server restarted after an unclean shutdown (restart-delay)"
    )
}

/// A replica whose link to its primary is down, with `replica-serve-stale-data no`: it
/// serves only commands flagged `stale` (Redis' `running_stale`).
pub(crate) fn running_stale(server: &Server) -> bool {
    server.replication.is_replica() && stale_data_refused(server)
}

/// A replica whose link to its primary is down, with `replica-serve-stale-data no`.
#[cold]
fn stale_data_refused(server: &Server) -> bool {
    server.replication.link.status.load(Ordering::Relaxed) != crate::replication::link::CONNECTED
        && !server.config.get_bool("replica-serve-stale-data")
}

/// A replica with `replica-read-only` on refuses its own clients' writes.
pub(crate) fn read_only_replica(server: &Server, client: &Client) -> bool {
    !client.must_obey()
        && server.replication.is_replica()
        && server.config.get_bool("replica-read-only")
}

/// A write command, or an EXEC whose transaction holds one.
/// For EXEC, a queued script counts by what it declares, as Redis folds each queued
/// command's flags (a script's from its shebang) into the transaction's: an EVAL of a
/// `#!lua` script without `no-writes` makes EXEC a write.
fn writes(server: &Server, client: &Client, command: &Command) -> bool {
    if command.id == special().exec {
        let table = table();
        return client.multi.as_ref().is_some_and(|transaction| {
            transaction.queued.iter().any(|entry| {
                let queued = table.get(entry.id);
                let declared = queued.spec.has_flag(flag::WRITE);
                // With the VM held by a running script, the command's own flags decide.
                writes_as_declared(server, queued, &entry.args, declared).unwrap_or(declared)
            })
        });
    }
    command.spec.has_flag(flag::WRITE)
}

/// Whether the client's MULTI queue holds a command whose spec passes `test` (what Redis
/// folds into the transaction's flags for EXEC's checks).
fn queue_has(client: &Client, test: impl Fn(&CommandSpec) -> bool) -> bool {
    let table = table();
    client.multi.as_ref().is_some_and(|transaction| {
        transaction
            .queued
            .iter()
            .any(|entry| test(table.get(entry.id).spec))
    })
}

/// Evicts before every command while over `maxmemory`, as Redis does (memory can grow
/// without a write: clients' buffers), and refuses, when nothing more could be evicted,
/// commands that may grow memory (`denyoom`, an EXEC that holds one) and, inside MULTI,
/// anything but EXEC, DISCARD, QUIT and RESET: a queue can grow without bound.
fn refused_for_memory(server: &Server, client: &Client, command: &Command) -> bool {
    if server.config.maxmemory() == 0 {
        return false;
    }
    let special = special();
    let grows = if command.id == special.exec {
        queue_has(client, |spec| spec.has_flag(flag::DENYOOM))
    } else {
        command.spec.has_flag(flag::DENYOOM)
            || (client.multi.is_some() && !special.oom_exempt_in_multi.contains(&command.id))
    };
    // Clients over maxmemory-clients go before keys (their buffers may be what grew), as
    // in Redis.
    let clients_limit = crate::net::clients_memory_limit(server);
    if clients_limit > 0 && server.clients.memory() >= clients_limit {
        server.clients.evict_over(clients_limit);
    }
    crate::evict::perform(server) == crate::evict::Outcome::Failed && grows
}

/// How long a command waits on its thread (spinning and yielding) for a script running on
/// another one to end before it defers (its connection then sleeps until the script ends).
/// A deferred command is woken with every other deferred one and often loses the claim
/// again: 30 µs instead of 10 halved the release's p99 in the unpinned benchmark.
const SHORT_SCRIPT_SPIN: Duration = Duration::from_micros(30);

/// The right to run scripts, held from before the shards are locked until after they are
/// released; given back when dropped, even if the command panics.
struct Claim<'s>(&'s Server);

impl<'s> Claim<'s> {
    fn take(server: &'s Server) -> Option<Claim<'s>> {
        // Lazily: a `Claim` built for a failed attempt would release the holder's claim
        // when dropped.
        let taken = server.scripting.try_claim()
            || (server.scripting.wait_out_short_script(SHORT_SCRIPT_SPIN)
                && server.scripting.try_claim());
        taken.then(|| Claim(server))
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.0.scripting.release();
    }
}

/// Whether the command runs scripts or touches the VM: EVAL & co, SCRIPT, FUNCTION, and an
/// EXEC whose transaction holds one of those.
fn needs_claim(command: &Command, client: &Client) -> bool {
    if uses_engine(command.spec.lock) {
        return true;
    }
    command.id == special().exec && queue_has(client, |spec| uses_engine(spec.lock))
}

fn uses_engine(plan: LockPlan) -> bool {
    matches!(plan, LockPlan::Script | LockPlan::Engine)
}

/// After a blocked client's retry, under its keys' locks: when it answered, it leaves the
/// queues of its keys (the next client blocked on each gets its turn); otherwise it keeps
/// its place and lets the client after it try.
fn settle_retry(server: &Server, client: &mut Client, answered: bool, keys: &mut Locked<'_>) {
    let Some(block) = client.blocked.as_ref() else {
        return;
    };
    let waiter: Arc<dyn KeyWaiter> = block.waiter.clone();
    if answered {
        for key in &block.keys {
            keys.unblock_from(block.db, key, &waiter);
        }
        client.blocked = None;
        server.clients.mark_unblocked(&client.shared);
    } else if block.passes_turn {
        for key in &block.keys {
            keys.pass_on(block.db, key, &waiter);
        }
    }
}

/// Redis' `getTimeoutFromObjectOrReply` for seconds: a float (as `strtold` reads it) turned
/// into whole milliseconds, rounding up. `Some(None)`: wait forever (0). Answers the error
/// and returns `None` otherwise.
pub fn block_timeout(reply: &mut Reply, arg: &[u8]) -> Option<Option<Duration>> {
    use crate::commands::string::long_double::{LongDouble, Number};
    const NOT_FLOAT: &[u8] = b"ERR timeout is not a float or out of range";
    const NEGATIVE: &[u8] = b"ERR timeout is negative";
    // Longest number text `string2ld` accepts (a 5 KiB buffer with its NUL).
    if arg.is_empty() || arg.len() >= 5 * 1024 {
        reply.error(NOT_FLOAT);
        return None;
    }
    let seconds = match LongDouble::parse(arg) {
        None => {
            reply.error(NOT_FLOAT);
            return None;
        }
        // ceil(inf) does not fit a long long: x86 turns it into LLONG_MIN, "negative".
        Some(Number::Infinite) => f64::INFINITY,
        Some(Number::Finite(value)) => {
            let text = if arg.iter().any(|b| b.eq_ignore_ascii_case(&b'x')) {
                value.to_human()
            } else {
                arg.to_vec()
            };
            std::str::from_utf8(&text)
                .ok()
                .and_then(|t| t.parse::<f64>().ok())
                .unwrap_or(f64::INFINITY)
        }
    };
    let ms = (seconds * 1000.0).ceil();
    // Out of a long long's range converts to LLONG_MIN on x86, which Redis calls negative.
    if !(ms >= 0.0 && ms < i64::MAX as f64) {
        reply.error(NEGATIVE);
        return None;
    }
    Some((ms > 0.0).then(|| Duration::from_millis(ms as u64)))
}

/// For a blocking command's handler that found nothing to serve it. A first run queues the
/// client on `keys` (under their locks, so no write can slip in unseen) and answers nothing:
/// the connection waits. A retry stays queued where it was. Where blocking is not allowed
/// (inside EXEC, scripts) it answers at once: `null_bulk` for BLMOVE/BRPOPLPUSH, a null
/// array for the others, as Redis does.
pub fn block(
    ctx: &mut Ctx<'_, '_>,
    args: &[Bytes],
    keys: &[Bytes],
    timeout: Option<Duration>,
    null_bulk: bool,
) {
    block_as(ctx, args, keys, timeout, null_bulk, Waiter::new());
}

/// [`block`] for a lock waiter: it keeps its place in line without passing its turn on,
/// and LOCK.INFO lists it.
pub fn block_for_lock(
    ctx: &mut Ctx<'_, '_>,
    args: &[Bytes],
    key: &Bytes,
    timeout: Option<Duration>,
) {
    let wait = crate::client::LockWait {
        client_id: ctx.client.id,
        since: std::time::Instant::now(),
    };
    block_as(
        ctx,
        args,
        std::slice::from_ref(key),
        timeout,
        false,
        Waiter::with_lock(
            Some(wait),
            Some(crate::lock_stats::WaitingCount::new(
                &ctx.server.lock_stats.waiting,
            )),
        ),
    );
    if let Some(block) = ctx.client.blocked.as_mut() {
        block.passes_turn = false;
    }
}

fn block_as(
    ctx: &mut Ctx<'_, '_>,
    args: &[Bytes],
    keys: &[Bytes],
    timeout: Option<Duration>,
    null_bulk: bool,
    waiter: Arc<Waiter>,
) {
    if ctx.client.blocked.is_some() {
        return;
    }
    if ctx.client.deny_blocking {
        if null_bulk {
            ctx.reply.null();
        } else {
            ctx.reply.null_array();
        }
        return;
    }
    let db = ctx.client.db;
    let queued: Arc<dyn KeyWaiter> = waiter.clone();
    for key in keys {
        ctx.keys.block_on(db, key, &queued);
    }
    ctx.client.blocked = Some(BlockRequest {
        args: args.to_vec(),
        keys: keys.to_vec(),
        db,
        deadline: timeout.and_then(|t| tokio::time::Instant::now().checked_add(t)),
        waiter,
        passes_turn: true,
        recheck_at: None,
        first_run_us: 0,
    });
    ctx.server.clients.mark_blocked(&ctx.client.shared);
}

/// Whether this run is a blocked client's retry: a key of another type then counts as
/// empty (Redis serves only clients blocked for that type), rather than WRONGTYPE.
pub fn is_retry(ctx: &Ctx<'_, '_>) -> bool {
    ctx.client.blocked.is_some()
}

/// Ends a blocked client's wait without a retry (timeout, CLIENT UNBLOCK, disconnect): takes
/// it off its keys' queues (passing its turn on) and off the blocked count. The caller holds
/// no shard.
pub fn end_block(server: &Server, client: &mut Client) {
    let Some(block) = client.blocked.take() else {
        return;
    };
    let waiter: Arc<dyn KeyWaiter> = block.waiter.clone();
    {
        let mut keys = server.keyspace.lock_keys(&block.keys);
        for key in &block.keys {
            keys.unblock_from(block.db, key, &waiter);
        }
    }
    block.waiter.finish();
    server.clients.mark_unblocked(&client.shared);
}

/// [`end_block`] for a blocked command answered with an error (CLIENT UNBLOCK ... ERROR, a
/// role change): the command counts as failed, as Redis counts it.
pub fn end_block_failed(server: &Server, client: &mut Client) {
    if let Some(command) = client
        .blocked
        .as_ref()
        .and_then(|block| block.args.first())
        .and_then(|name| table().lookup_called(name))
    {
        server.stats.commands[command.id]
            .failed_calls
            .fetch_add(1, Ordering::Relaxed);
    }
    end_block(server, client);
}

/// Refuses a command before it runs: counts it, aborts a transaction being queued, and
/// answers `message` (for EXEC: EXECABORT with the reason, leaving the transaction).
fn reject(
    server: &Server,
    client: &mut Client,
    reply: &mut Reply,
    known: Option<&Command>,
    args: &[Bytes],
    message: &[u8],
) {
    if let Some(known) = known {
        server.stats.commands[known.id]
            .rejected_calls
            .fetch_add(1, Ordering::Relaxed);
    }
    if let Some(transaction) = client.multi.as_mut() {
        transaction.aborted = true;
    }
    if known.is_some_and(|known| known.id == special().exec) {
        crate::commands::transaction::discard_transaction(server, client);
        // Redis' own texts here lack the "ERR " prefix (e.g. the arity error).
        let reason = message.strip_prefix(b"ERR ").unwrap_or(message);
        let mut abort = b"EXECABORT Transaction discarded because of: ".to_vec();
        abort.extend_from_slice(reason);
        reply.error(&abort);
        // As Redis does, MONITOR sees the EXEC that ended the transaction.
        if server.clients.monitors.load(Ordering::Relaxed) > 0 {
            feed_monitors(server, client, args);
        }
        return;
    }
    reply.error(message);
}

/// The command a script's `redis.call` names, checked as Redis' `scriptCall` does; the
/// error text (for the script's error table) otherwise.
pub fn command_for_script<'t>(args: &[Bytes]) -> Result<&'t Command, Vec<u8>> {
    const UNKNOWN: &[u8] = b"Unknown Redis command called from script";
    const ARITY: &[u8] = b"Wrong number of args calling Redis command from script";
    let table = table();
    let Some(command) = table.lookup_called(&args[0]) else {
        return Err(UNKNOWN.to_vec());
    };
    let command = if command.spec.subcommands.is_empty() || args.len() < 2 {
        command
    } else {
        table
            .subcommand(command, &args[1])
            .ok_or_else(|| UNKNOWN.to_vec())?
    };
    if !command.spec.arity_ok(args.len()) {
        return Err(ARITY.to_vec());
    }
    Ok(command)
}

/// Runs a command for a script (`redis.call`), against the script's view (every shard),
/// with the script's protocol. Its reply comes back as written; a refusal (the script's
/// checks) as the error text.
pub fn script_call(
    ctx: &mut Ctx<'_, '_>,
    args: &[Bytes],
    resp: u8,
    rules: crate::scripting::engine::CallRules,
    run: &crate::scripting::RunState,
) -> Result<Reply, Vec<u8>> {
    let server = ctx.server;
    let refuse = |command: Option<&Command>, message: &[u8]| {
        if let Some(command) = command {
            server.stats.commands[command.id]
                .rejected_calls
                .fetch_add(1, Ordering::Relaxed);
        }
        server
            .stats
            .record_error(&crate::scripting::sandbox::error_text(message));
        Err(message.to_vec())
    };
    let command = match command_for_script(args) {
        Ok(command) => command,
        Err(message) => return refuse(None, &message),
    };
    if let Some(message) = script_refusal(server, ctx.client, command, args, rules, run) {
        if let Some(denied) = ctx.client.user.check(command, args) {
            let context = crate::acl_log::Context::Lua;
            crate::acl_log::log_denied(server, ctx.client, denied, context, command, args);
        }
        return refuse(Some(command), &message);
    }
    Ok(run_for_script(ctx, command, args, resp, run))
}

/// Whether none of the script checks would refuse `command` (what `redis.call(args)`
/// finds, arity checked) now. Counts nothing and runs nothing: for a caller that must know
/// before it starts (`scripting::idiom`).
pub fn script_admits(
    ctx: &Ctx<'_, '_>,
    command: &Command,
    args: &[Bytes],
    rules: crate::scripting::engine::CallRules,
    run: &crate::scripting::RunState,
) -> bool {
    script_refusal(ctx.server, ctx.client, command, args, rules, run).is_none()
}

/// Why a script may not run `command` now (Redis' checks in `scriptCall`, in its order),
/// or `None`. Pure: the caller counts the refusal.
fn script_refusal(
    server: &Server,
    client: &Client,
    command: &Command,
    args: &[Bytes],
    rules: crate::scripting::engine::CallRules,
    run: &crate::scripting::RunState,
) -> Option<Vec<u8>> {
    let spec = command.spec;
    if spec.has_flag(flag::NOSCRIPT)
        && !server
            .script_disable_deny_script
            .load(std::sync::atomic::Ordering::Relaxed)
    {
        return Some(b"This Redis command is not allowed from script".to_vec());
    }
    if let Some(denied) = client.user.check(command, args) {
        let message = format!("The user executing the script {}", denied.short_reason());
        return Some(message.into_bytes());
    }
    // Only a script flagged `allow-stale` runs on a stale replica; its commands must be too.
    if !spec.has_flag(flag::STALE) && !client.must_obey() && running_stale(server) {
        return Some(b"Can not execute the command on a stale replica".to_vec());
    }
    if rules.read_only && spec.flags & (flag::WRITE | flag::MAY_REPLICATE) != 0 {
        return Some(b"Write commands are not allowed from read-only scripts.".to_vec());
    }
    // Once the script has written, the server's state can no longer refuse its writes: it
    // would stop half done (Redis' SCRIPT_WRITE_DIRTY). A replica dropping out meanwhile
    // (min-replicas-to-write) lets it finish.
    if spec.has_flag(flag::WRITE) && !run.wrote() {
        let delay_ms = server.persistence.restart_delay_left_ms(server);
        if delay_ms > 0 {
            return Some(format!("-{}", restart_delay_error(delay_ms)).into_bytes());
        }
        if !server.enough_replicas() {
            return Some(b"-NOREPLICAS Not enough good replicas to write.".to_vec());
        }
        if read_only_replica(server, client) {
            return Some(format!("-{}", String::from_utf8_lossy(err::READONLY)).into_bytes());
        }
    }
    // Over maxmemory when the script started: its first write that may grow memory is
    // refused (a later one must run, or the script would stop half done).
    if rules.deny_oom && !run.wrote() && spec.has_flag(flag::DENYOOM) {
        // With its own code: the script's error reads "OOM ...", not "ERR OOM ...".
        return Some(b"-OOM command not allowed when used memory > 'maxmemory'.".to_vec());
    }
    None
}

/// Runs, for a script, a command its checks admitted ([`script_call`], or
/// [`script_admits`] just before): the reply in the script's protocol.
pub fn run_for_script(
    ctx: &mut Ctx<'_, '_>,
    command: &Command,
    args: &[Bytes],
    resp: u8,
    run: &crate::scripting::RunState,
) -> Reply {
    let server = ctx.server;
    if command.spec.has_flag(flag::WRITE) {
        run.note_write();
    }
    let resp = if resp == 3 {
        latch_protocol::Resp::V3
    } else {
        latch_protocol::Resp::V2
    };
    let mut inner = Reply::new(resp);
    let outer_mark = ctx.client.errors_mark;
    let ran = run_command(server, ctx.client, &mut inner, command, args, ctx.keys);
    ctx.client.errors_mark = outer_mark;
    account(server, ctx.client, command, args, ran);
    record_errors(server, &mut inner, 0, 0);
    inner
}

/// Queues a command of a transaction (nothing is kept once the transaction is doomed).
fn queue(client: &mut Client, command: &Command, args: &[Bytes]) {
    let doomed = client.watches.is_dirty();
    let Some(transaction) = client.multi.as_mut() else {
        return;
    };
    if !transaction.aborted && !doomed {
        transaction.bytes += args.iter().map(|arg| arg.len()).sum::<usize>();
        transaction.arguments += args.len();
        // Copied: the arguments are slices of the input buffer, and a queue holding them
        // would keep every buffer they came in alive, not just their bytes.
        transaction.queued.push(Queued {
            id: command.id,
            args: args.iter().map(|arg| Bytes::copy_from_slice(arg)).collect(),
        });
    }
    client
        .shared
        .multi
        .store(transaction.queued.len() as i64, Ordering::Relaxed);
    client
        .shared
        .memory
        .multi
        .store(transaction.bytes, Ordering::Relaxed);
}

/// What running a command left for [`account`].
struct Ran {
    elapsed_us: u64,
    elapsed_ns: u64,
    failed: bool,
}

/// Runs a resolved, admitted command against shards already locked: the one code path for
/// commands on their own and inside EXEC.
fn run_command(
    server: &Server,
    client: &mut Client,
    reply: &mut Reply,
    command: &Command,
    args: &[Bytes],
    keys: &mut Locked<'_>,
) -> Ran {
    let spec = command.spec;
    let started = keys.read_at.take().unwrap_or_else(Tick::now);
    client.command_started = started;
    client.errors_mark = reply.error_count();
    keys.touch = !client.shared.no_touch.load(Ordering::Relaxed);
    keys.effects = Effects::default();
    crate::pubsub::notify::set_record(server, spec, keys);
    let logged_from = client.propagated.len();
    let changes_before = keys.changes;
    client.propagation_replaced = false;
    {
        let mut ctx = Ctx {
            server,
            client: &mut *client,
            reply: &mut *reply,
            keys: &mut *keys,
        };
        if let Some(handler) = spec.handler {
            handler(&mut ctx, args);
        }
    }
    // Expiries, misses and new keys the handler did not report an event after: before the
    // reply, whether or not anything is logged.
    if keys.has_key_events() {
        crate::pubsub::notify::flush(server, keys);
    }
    if !keys.expired_keys.is_empty()
        || client.propagation_replaced
        || keys.changes != changes_before
    {
        log_effects(
            server,
            client,
            command,
            args,
            keys,
            logged_from,
            changes_before,
        );
    }
    crate::tracking::after_command(server, client, command, args, keys);
    // Taken, not read: a command run inside this one (a script's redis.call, EXEC's queue)
    // leaves its effects here after counting them, and the command around it must not
    // count them again.
    let effects = std::mem::take(&mut keys.effects);
    if effects.expired > 0 {
        server
            .stats
            .expired_keys
            .fetch_add(effects.expired, Ordering::Relaxed);
    }
    if spec.has_flag(flag::READONLY) {
        server
            .stats
            .keyspace_hits
            .fetch_add(effects.hits, Ordering::Relaxed);
        server
            .stats
            .keyspace_misses
            .fetch_add(effects.misses, Ordering::Relaxed);
    }
    // Errors since the mark: for EXEC, only those after its last queued command (each of
    // those moved the mark), as Redis counts them.
    let failed = reply.error_count() != client.errors_mark;
    client.errors_mark = reply.error_count();
    let ended = Tick::now();
    client.reading = Some(ended);
    let elapsed_ns = ended.nanos_since(started);
    Ran {
        elapsed_us: elapsed_ns / 1000,
        elapsed_ns,
        failed,
    }
}

/// What a command that ran leaves to log: a `DEL` for each key its lookups found expired
/// (first: they happened first), then the command itself when it is a write that changed
/// something, unless its handler said what to log instead.
#[cold]
fn log_effects(
    server: &Server,
    client: &mut Client,
    command: &Command,
    args: &[Bytes],
    keys: &mut Locked<'_>,
    logged_from: usize,
    changes_before: u64,
) {
    let replaced = std::mem::take(&mut client.propagation_replaced);
    if !server.persistence.is_logging() {
        keys.expired_keys.clear();
        return;
    }
    if !keys.expired_keys.is_empty() {
        let dels: Vec<crate::client::Propagated> = keys
            .expired_keys
            .drain(..)
            .map(|(db, key)| crate::client::Propagated {
                db,
                args: vec![Bytes::from_static(b"DEL"), Bytes::from(key.into_vec())],
                replicas_only: false,
                aof_only: false,
            })
            .collect();
        let at = logged_from.min(client.propagated.len());
        client.propagated.splice(at..at, dels);
    }
    if !replaced && keys.changes != changes_before && command.spec.has_flag(flag::WRITE) {
        client.propagated.push(crate::client::Propagated {
            db: client.db,
            args: args.to_vec(),
            replicas_only: false,
            aof_only: false,
        });
    }
}

/// Statistics, slow log and MONITOR for a command that ran.
fn account(server: &Server, client: &Client, command: &Command, args: &[Bytes], ran: Ran) {
    account_as(server, client, command, args, ran, true);
}

/// [`account`]; without `finished` (the command blocked), no slow log entry and no
/// latency sample yet: [`account_unblocked`] makes them when it answers.
fn account_as(
    server: &Server,
    client: &Client,
    command: &Command,
    args: &[Bytes],
    ran: Ran,
    finished: bool,
) {
    let stats = &server.stats.commands[command.id];
    stats.calls.fetch_add(1, Ordering::Relaxed);
    stats.usec.fetch_add(ran.elapsed_us, Ordering::Relaxed);
    if finished && server.config.latency_tracking() {
        stats.latency.record(ran.elapsed_ns);
    }
    if ran.failed {
        stats.failed_calls.fetch_add(1, Ordering::Relaxed);
    }
    server
        .stats
        .total_commands_processed
        .fetch_add(1, Ordering::Relaxed);
    after_call(server, client, command, args, ran.elapsed_us, finished);
}

/// A blocked command's retry answered: as Redis' `updateStatsOnUnblock`, its time is the
/// run that blocked plus this one, added to the command's time (the call was counted when
/// it blocked), its latency histogram and the slow log.
#[cold]
fn account_unblocked(
    server: &Server,
    client: &Client,
    command: &Command,
    args: &[Bytes],
    first_run_us: u64,
    ran: Ran,
) {
    let stats = &server.stats.commands[command.id];
    let total_us = first_run_us + ran.elapsed_us;
    stats.usec.fetch_add(total_us, Ordering::Relaxed);
    if ran.failed {
        stats.failed_calls.fetch_add(1, Ordering::Relaxed);
    }
    if server.config.latency_tracking() {
        stats.latency.record(total_us.saturating_mul(1000));
    }
    push_slowlog(server, client, command, args, total_us);
    crate::commands::server::record_latency(server, "command-unblocking", ran.elapsed_us / 1000);
}

/// EXEC: locks, once, every shard the queued commands (and the watched keys) need, checks
/// the watches, and runs the queue in order under that one view (one frozen `now`). The
/// caller holds no shard and has taken the client out of MULTI.
pub fn run_transaction(server: &Server, client: &mut Client, reply: &mut Reply, queued: &[Queued]) {
    let table = table();
    let mut keys = lock_transaction(server, client, queued);
    if client.is_primary_link {
        sees_passed_keys(&mut keys);
    }
    // Under the locks of the watched keys' shards: no writer can slip in after this check.
    let watch_failed = client.watches.is_dirty() || keys.watched_key_expired(&client.watches);
    keys.unwatch_all(&mut client.watches);
    if watch_failed {
        reply.null_array();
        return;
    }
    reply.array(queued.len());
    client.deny_blocking = true;
    client.in_exec = true;
    for entry in queued {
        let command = table.get(entry.id);
        // The rules may have changed since the command was queued (as Redis checks).
        if let Some(denied) = client.user.check(command, &entry.args) {
            let context = crate::acl_log::Context::Multi;
            crate::acl_log::log_denied(server, client, denied, context, command, &entry.args);
            reply.error(exec_denial(denied).as_bytes());
            continue;
        }
        let ran = run_command(server, client, reply, command, &entry.args, &mut keys);
        account(server, client, command, &entry.args, ran);
    }
    client.deny_blocking = false;
    client.in_exec = false;
    client.woken.append(&mut keys.woken);
}

/// The error of a queued command the ACL rules refuse at EXEC (Redis' words).
#[cold]
fn exec_denial(denied: crate::acl::Denied) -> String {
    let reason = match denied {
        crate::acl::Denied::Command => "no permission to execute the command or subcommand",
        crate::acl::Denied::Key => "no permission to touch the specified keys",
        crate::acl::Denied::Channel => {
            "no permission to access one of the channels used as arguments"
        }
    };
    format!(
        "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}"
    )
}

/// A replica applies its primary's stream as the primary sees its keys: one past its
/// deadline here is still there until the primary's `DEL` comes (the clocks may differ),
/// as Redis' `expireIfNeeded` answers "not expired" to the primary's link.
#[cold]
fn sees_passed_keys(keys: &mut Locked<'_>) {
    keys.see_passed_keys();
}

/// The union of the shards of the queued commands' keys and the watched keys, or every
/// shard when a command needs the whole keyspace, names keys its specs cannot resolve, or
/// names no keys and is not `fast`: such a command (INFO, DEBUG...) may read the whole
/// keyspace or lock on its own, which a partial view would turn into a deadlock.
fn lock_transaction<'s>(server: &'s Server, client: &Client, queued: &[Queued]) -> Locked<'s> {
    let table = table();
    if queued
        .iter()
        .any(|entry| uses_engine(table.get(entry.id).spec.lock))
    {
        // A script inside: the dispatcher took the claim for this EXEC. The view takes the
        // shards of whatever the queue touches as it goes.
        return server.keyspace.lock_exclusive(&client.watches.keys());
    }
    let mut keys: Vec<&[u8]> = client.watches.keys();
    let mut positions = Vec::new();
    for entry in queued {
        let spec = table.get(entry.id).spec;
        let needs_all = match spec.lock {
            LockPlan::All | LockPlan::Script | LockPlan::LockAndFence => true,
            LockPlan::Engine => false,
            LockPlan::Keys if spec.key_specs.is_empty() => !spec.has_flag(flag::FAST),
            LockPlan::Keys => match key_positions(spec, &entry.args, &mut positions) {
                Ok(()) => {
                    keys.extend(positions.iter().map(|&i| &entry.args[i][..]));
                    false
                }
                Err(_) => true,
            },
        };
        if needs_all {
            return server.keyspace.lock_all();
        }
    }
    server.keyspace.lock_keys(&keys)
}

/// Locks what the command's lock plan and key specs ask for. `reading`: the clock reading
/// the view takes as its time, when the command before left one ([`Client::reading`]).
/// Kept out of line: inlined into `execute` (as the pause check made the compiler do), a
/// pipelined GET cost about 10 instructions more (callgrind).
#[inline(never)]
fn lock_for<'s>(
    server: &'s Server,
    command: &Command,
    args: &[Bytes],
    reading: Option<Tick>,
) -> Locked<'s> {
    let keyspace = &server.keyspace;
    match command.spec.lock {
        LockPlan::All => keyspace.lock_all_at(reading),
        LockPlan::Script => {
            // The declared keys' shards now; any other the script touches when it does.
            let mut keys = KeyList::new();
            match keys.gather(command.spec, args) {
                Ok(()) => keyspace.lock_exclusive_at(keys.as_slice(), reading),
                Err(_) => keyspace.lock_exclusive_at::<&[u8]>(&[], reading),
            }
        }
        LockPlan::Engine => keyspace.lock_none_at(reading),
        LockPlan::LockAndFence => match args.get(1) {
            Some(name) => {
                let fence = crate::commands::locks::fence_key(name);
                keyspace.lock_keys_at(&[&name[..], &fence[..]], reading)
            }
            None => keyspace.lock_keys_at::<&[u8]>(&[], reading),
        },
        LockPlan::Keys if command.spec.key_specs.is_empty() => keyspace.lock_none_at(reading),
        LockPlan::Keys => match command.only_key_at {
            Some(at) => match args.get(at) {
                Some(key) => keyspace.lock_keys_at(&[&key[..]], reading),
                None => keyspace.lock_keys_at::<&[u8]>(&[], reading),
            },
            None => {
                let mut keys = KeyList::new();
                match keys.gather(command.spec, args) {
                    Ok(()) => keyspace.lock_keys_at(keys.as_slice(), reading),
                    // Arguments that contradict the key specs: the handler will refuse
                    // them; holding everything is always safe.
                    Err(_) => keyspace.lock_all_at(reading),
                }
            }
        },
    }
}

/// The keys a command names, as its key specs find them. Up to [`KeyList::INLINE`] are
/// kept on the stack: every keyed command gathers its keys before it runs, and most name
/// one or a few. (Filled in place: moving it would copy the whole array.)
struct KeyList<'a> {
    inline: [&'a [u8]; KeyList::INLINE],
    count: usize,
    /// Every key, once there are more than fit inline.
    spilled: Vec<&'a [u8]>,
}

impl<'a> KeyList<'a> {
    const INLINE: usize = 16;

    fn new() -> KeyList<'a> {
        KeyList {
            inline: [&[]; KeyList::INLINE],
            count: 0,
            spilled: Vec::new(),
        }
    }

    fn gather(
        &mut self,
        spec: &CommandSpec,
        args: &'a [Bytes],
    ) -> Result<(), crate::spec::KeysError> {
        let list = self;
        crate::spec::visit_keys(spec, args, |at, _| {
            let key = &args[at][..];
            if list.count < KeyList::INLINE {
                list.inline[list.count] = key;
            } else {
                if list.spilled.is_empty() {
                    list.spilled.extend_from_slice(&list.inline);
                }
                list.spilled.push(key);
            }
            list.count += 1;
        })
    }

    fn as_slice(&self) -> &[&'a [u8]] {
        if self.count <= KeyList::INLINE {
            &self.inline[..self.count]
        } else {
            &self.spilled
        }
    }
}

/// Slow log and MONITOR.
fn after_call(
    server: &Server,
    client: &Client,
    command: &Command,
    args: &[Bytes],
    elapsed_us: u64,
    slowlog: bool,
) {
    let spec = command.spec;
    crate::commands::server::note_command_latency(server, spec, elapsed_us);
    if slowlog {
        push_slowlog(server, client, command, args, elapsed_us);
    }
    if server.clients.monitors.load(Ordering::Relaxed) > 0
        && !spec.has_flag(flag::SKIP_MONITOR)
        && !spec.has_flag(flag::ADMIN)
    {
        feed_monitors(server, client, &redacted(args));
    }
}

/// A slow log entry for the command when it took `us` or longer.
fn push_slowlog(server: &Server, client: &Client, command: &Command, args: &[Bytes], us: u64) {
    let threshold = server.config.slowlog_log_slower_than_us();
    if threshold < 0 || (us as i64) < threshold || command.spec.has_flag(flag::SKIP_SLOWLOG) {
        return;
    }
    let max_len = server.config.slowlog_max_len();
    let entry = SlowEntry {
        id: 0,
        unix_s: server.keyspace.clock().now().wall_s(),
        duration_us: us,
        args: slowlog_args(&redacted(args)),
        peer: client.shared.addr.clone(),
        name: client
            .shared
            .name
            .lock()
            .as_ref()
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_default(),
    };
    server.slowlog.lock().push(entry, max_len);
}

/// The arguments as the slow log and MONITOR show them, with secrets replaced as Redis'
/// commands replace them (whether or not the command then succeeds): AUTH's password and
/// username, HELLO's AUTH pair, MIGRATE's AUTH/AUTH2, everything after ACL SETUSER, and
/// the values CONFIG SET gives sensitive options.
fn redacted(args: &[Bytes]) -> std::borrow::Cow<'_, [Bytes]> {
    let hidden = secret_positions(args);
    if hidden.is_empty() {
        return args.into();
    }
    let mut shown = args.to_vec();
    for at in hidden {
        shown[at] = Bytes::from_static(b"(redacted)");
    }
    shown.into()
}

/// Where `args` hold secrets, by Redis 7.0's rules: a command refused before it reads its
/// secrets (AUTH with too many arguments, HELLO with a bad version) keeps them.
fn secret_positions(args: &[Bytes]) -> Vec<usize> {
    let name = &args[0];
    let sub = |word: &[u8]| args.get(1).is_some_and(|a| a.eq_ignore_ascii_case(word));
    if name.eq_ignore_ascii_case(b"auth") {
        return match args.len() {
            2 => vec![1],
            3 => vec![1, 2],
            _ => Vec::new(),
        };
    }
    if name.eq_ignore_ascii_case(b"migrate") {
        return crate::commands::keys::migrate::secret_positions(args);
    }
    if name.eq_ignore_ascii_case(b"hello") {
        // The version as HELLO reads it: a refused one leaves the rest unread.
        let version_ok = args.len() < 2
            || crate::commands::parse_i64(&args[1]).is_some_and(|v| (2..=3).contains(&v));
        let mut out = Vec::new();
        let mut at = 2;
        while version_ok && at < args.len() {
            let more = args.len() - 1 - at;
            if args[at].eq_ignore_ascii_case(b"auth") && more >= 2 {
                out.extend([at + 1, at + 2]);
                at += 3;
            } else if args[at].eq_ignore_ascii_case(b"setname") && more >= 1 {
                at += 2;
            } else {
                break;
            }
        }
        return out;
    }
    if name.eq_ignore_ascii_case(b"acl") && sub(b"setuser") && args.len() >= 3 {
        return (2..args.len()).collect();
    }
    if name.eq_ignore_ascii_case(b"config") && sub(b"set") && args.len().is_multiple_of(2) {
        return (2..args.len())
            .step_by(2)
            .filter(|&at| {
                std::str::from_utf8(&args[at])
                    .ok()
                    .and_then(crate::config::option)
                    .is_some_and(|def| def.has(crate::config::o::SENSITIVE))
            })
            .map(|at| at + 1)
            .collect();
    }
    Vec::new()
}

/// EVAL, EVALSHA, FCALL and their `_RO` forms reach MONITOR as in Redis 7.0: when their
/// handler starts, before the script's own commands (which MONITOR shows from `lua`), and
/// whatever the handler then answers. Their `skip_monitor` flag keeps the usual line after
/// the command away.
pub fn monitor_script_command(ctx: &Ctx<'_, '_>, args: &[Bytes]) {
    if ctx.server.clients.monitors.load(Ordering::Relaxed) > 0 {
        feed_monitors(ctx.server, ctx.client, &redacted(args));
    }
}

fn feed_monitors(server: &Server, client: &Client, args: &[Bytes]) {
    let wall_us = server.keyspace.clock().wall_us();
    let origin = if client.in_script {
        // A script's commands, in the database the script has selected.
        "lua".to_string()
    } else if client.shared.unix {
        format!("unix:{}", client.shared.laddr)
    } else {
        client.shared.addr.clone()
    };
    let mut line = format!(
        "+{}.{:06} [{} {}]",
        wall_us.div_euclid(1_000_000),
        wall_us.rem_euclid(1_000_000),
        client.db,
        origin
    );
    for arg in args {
        line.push_str(" \"");
        for &b in arg.iter() {
            match b {
                b'\\' => line.push_str("\\\\"),
                b'"' => line.push_str("\\\""),
                b'\n' => line.push_str("\\n"),
                b'\r' => line.push_str("\\r"),
                b'\t' => line.push_str("\\t"),
                7 => line.push_str("\\a"),
                8 => line.push_str("\\b"),
                0x20..=0x7e => line.push(b as char),
                _ => line.push_str(&format!("\\x{b:02x}")),
            }
        }
        line.push('"');
    }
    line.push_str("\r\n");
    let _ = server.monitor_feed.send(Bytes::from(line));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_claim_leaves_the_holders_claim_alone() {
        let server = Server::new(crate::config::Config::default());
        let held = Claim::take(&server).expect("the first claim succeeds");
        assert!(Claim::take(&server).is_none(), "a second claim fails");
        assert!(
            server.scripting.run.is_running(),
            "the failed attempt gave back the holder's claim"
        );
        drop(held);
        assert!(!server.scripting.run.is_running());
        assert!(Claim::take(&server).is_some());
    }
}
