//! The gatekeeper: the one path every command takes, from a client's arguments to its reply.
//!
//! In order: find the command (and subcommand), check arity, check authentication, decide
//! which shards to lock from the key specs, run the handler with one frozen `now`, then
//! account for it (stats, slow log, MONITOR). A later `MULTI` queue and scripts' `redis.call`
//! enter here too, so there is one place to read and one place to fix.

use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::Bytes;
use latch_keyspace::Locked;
use latch_protocol::Reply;

use crate::client::{Client, ReplyMode};
use crate::commands::{arity_error, err, Ctx};
use crate::server::Server;
use crate::spec::{flag, key_positions, LockPlan};
use crate::stats::{slowlog_args, SlowEntry};
use crate::table::{table, Command};

/// Runs one command from a client and writes its reply (unless replies are off).
pub fn execute(server: &Server, client: &mut Client, reply: &mut Reply, args: &[Bytes]) {
    if args.is_empty() {
        return;
    }
    let mark = reply.len();
    let suppress = matches!(client.reply_mode, ReplyMode::Off | ReplyMode::Skip);
    if client.reply_mode == ReplyMode::Skip {
        client.reply_mode = ReplyMode::On;
    }
    let errors_before = reply.error_count();
    dispatch(server, client, reply, args);
    record_errors(server, reply, mark, errors_before);
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
    // Errors are rare: scan the written bytes for top-level `-` lines.
    let written = reply.buffer()[mark..].to_vec();
    for line in written.split(|&b| b == b'\n') {
        if let Some(message) = line.strip_prefix(b"-") {
            let message = message.strip_suffix(b"\r").unwrap_or(message);
            server.stats.record_error(message);
        }
    }
}

/// Finds the command; writes the rejection when there is none or its arity is wrong.
pub fn resolve<'t>(args: &[Bytes], reply: &mut Reply) -> Option<&'t Command> {
    let table = table();
    let Some(command) = table.lookup(&args[0]) else {
        reply.error(&unknown_command(args));
        return None;
    };
    let command = if command.spec.subcommands.is_empty() {
        command
    } else if args.len() < 2 && command.spec.handler.is_some() {
        // A container that also runs on its own (`COMMAND`).
        command
    } else {
        if args.len() < 2 {
            reply.error(&arity_error(&command.full_name));
            return None;
        }
        match table.subcommand(command, &args[1]) {
            Some(sub) => sub,
            None => {
                let message = format!(
                    "ERR unknown subcommand '{}'. Try {} HELP.",
                    truncated(&args[1], 128),
                    String::from_utf8_lossy(&args[0]).to_uppercase()
                );
                reply.error(message.as_bytes());
                return None;
            }
        }
    };
    if !command.spec.arity_ok(args.len()) {
        reply.error(&arity_error(&command.full_name));
        return None;
    }
    Some(command)
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

fn dispatch(server: &Server, client: &mut Client, reply: &mut Reply, args: &[Bytes]) {
    let Some(command) = resolve(args, reply) else {
        if let Some(known) = table().lookup(&args[0]) {
            server.stats.commands[known.id]
                .rejected_calls
                .fetch_add(1, Ordering::Relaxed);
        }
        return;
    };
    let spec = command.spec;
    if spec.has_flag(flag::PROTECTED)
        && !server
            .config
            .debug_command_allowed(client.shared.is_local())
    {
        server.stats.commands[command.id]
            .rejected_calls
            .fetch_add(1, Ordering::Relaxed);
        let message = format!(
            "ERR {} command not allowed. If the {} option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.",
            command.full_name.to_uppercase(),
            "enable-debug-command"
        );
        reply.error(message.as_bytes());
        return;
    }
    if !client.authenticated && !spec.has_flag(flag::NO_AUTH) {
        server.stats.commands[command.id]
            .rejected_calls
            .fetch_add(1, Ordering::Relaxed);
        reply.error(err::NOAUTH);
        return;
    }
    // Redis records the command before running it, so CLIENT LIST shows itself.
    client
        .shared
        .last_command
        .store(command.id + 1, Ordering::Relaxed);
    let started = Instant::now();
    let errors_before = reply.error_count();
    {
        let mut keys = lock_for(server, command, args);
        keys.touch = !client.shared.no_touch.load(Ordering::Relaxed);
        let mut ctx = Ctx {
            server,
            client: &mut *client,
            reply: &mut *reply,
            keys: &mut keys,
        };
        if let Some(handler) = spec.handler {
            handler(&mut ctx, args);
        }
        let effects = keys.effects;
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
    }
    let elapsed_us = started.elapsed().as_micros() as u64;
    let stats = &server.stats.commands[command.id];
    stats.calls.fetch_add(1, Ordering::Relaxed);
    stats.usec.fetch_add(elapsed_us, Ordering::Relaxed);
    if reply.error_count() != errors_before {
        stats.failed_calls.fetch_add(1, Ordering::Relaxed);
    }
    server
        .stats
        .total_commands_processed
        .fetch_add(1, Ordering::Relaxed);
    after_call(server, client, command, args, elapsed_us);
}

/// Locks what the command's lock plan and key specs ask for.
fn lock_for<'s>(server: &'s Server, command: &Command, args: &[Bytes]) -> Locked<'s> {
    let keyspace = &server.keyspace;
    match command.spec.lock {
        LockPlan::All => keyspace.lock_all(),
        LockPlan::Keys if command.spec.key_specs.is_empty() => keyspace.lock_none(),
        LockPlan::Keys => {
            let mut positions = Vec::new();
            match key_positions(command.spec, args, &mut positions) {
                Ok(()) => {
                    let keys: Vec<&[u8]> = positions.iter().map(|&i| &args[i][..]).collect();
                    keyspace.lock_keys(&keys)
                }
                // Arguments that contradict the key specs: the handler will refuse them;
                // holding everything is always safe.
                Err(_) => keyspace.lock_all(),
            }
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
) {
    let spec = command.spec;
    crate::commands::server::note_command_latency(server, spec, elapsed_us);
    let threshold = server.config.get_i64("slowlog-log-slower-than");
    if threshold >= 0 && elapsed_us as i64 >= threshold && !spec.has_flag(flag::SKIP_SLOWLOG) {
        let max_len = server.config.get_i64("slowlog-max-len").max(0) as usize;
        let entry = SlowEntry {
            id: 0,
            unix_s: server.keyspace.clock().now().wall_s(),
            duration_us: elapsed_us,
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
    if server.clients.monitors.load(Ordering::Relaxed) > 0
        && !spec.has_flag(flag::SKIP_MONITOR)
        && !spec.has_flag(flag::ADMIN)
    {
        feed_monitors(server, client, &redacted(args));
    }
}

/// The arguments as the slow log and MONITOR show them: passwords replaced, as Redis does.
fn redacted(args: &[Bytes]) -> std::borrow::Cow<'_, [Bytes]> {
    const HIDDEN: &[u8] = b"(redacted)";
    if args[0].eq_ignore_ascii_case(b"auth") {
        let mut shown = args.to_vec();
        shown[1..]
            .iter_mut()
            .for_each(|a| *a = Bytes::from_static(HIDDEN));
        return shown.into();
    }
    if args[0].eq_ignore_ascii_case(b"hello") {
        if let Some(at) = args.iter().position(|a| a.eq_ignore_ascii_case(b"auth")) {
            let mut shown = args.to_vec();
            shown[at + 1..(at + 3).min(args.len())]
                .iter_mut()
                .for_each(|a| *a = Bytes::from_static(HIDDEN));
            return shown.into();
        }
    }
    args.into()
}

fn feed_monitors(server: &Server, client: &Client, args: &[Bytes]) {
    let now = server.keyspace.clock().now();
    let micros = now.wall_ms.rem_euclid(1000) * 1000;
    let origin = if client.shared.unix {
        format!("unix:{}", client.shared.laddr)
    } else {
        client.shared.addr.clone()
    };
    let mut line = format!("+{}.{:06} [{} {}]", now.wall_s(), micros, client.db, origin);
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
