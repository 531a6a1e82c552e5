//! Connection commands: PING, ECHO, SELECT, QUIT, HELLO, AUTH, RESET.

use bytes::Bytes;

use std::sync::atomic::Ordering;

use latch_protocol::Resp;

use super::{err, is, parse_i64, Ctx};
use crate::client::ReplyMode;
use crate::spec::{acl, flag, Arg, CommandSpec, Group};

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "ping",
        group: Group::Connection,
        summary: "Answers PONG, or echoes the message given: a liveness check.",
        arity: -1,
        flags: flag::FAST,
        acl: acl::CONNECTION,
        arguments: &[Arg::string("message").optional()],
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        handler: Some(ping),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "echo",
        group: Group::Connection,
        summary: "Replies with the message it was sent.",
        arity: 2,
        flags: flag::LOADING | flag::STALE | flag::FAST,
        acl: acl::CONNECTION,
        arguments: &[Arg::string("message")],
        handler: Some(echo),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "select",
        group: Group::Connection,
        summary: "Switches the connection to another numbered database.",
        since: "1.0.0",
        arity: 2,
        flags: flag::LOADING | flag::STALE | flag::FAST,
        acl: acl::CONNECTION,
        arguments: &[Arg::integer("index")],
        handler: Some(select),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "quit",
        group: Group::Connection,
        summary: "Asks the server to close this connection after replying OK.",
        arity: -1,
        flags: flag::ALLOW_BUSY | flag::NOSCRIPT | flag::LOADING | flag::STALE | flag::FAST | flag::NO_AUTH,
        acl: acl::CONNECTION,
        doc_flags: crate::spec::docflag::DEPRECATED,
        deprecated_since: Some("7.2.0"),
        replaced_by: Some("just closing the connection"),
        handler: Some(quit),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "hello",
        group: Group::Connection,
        summary: "Negotiates the protocol version, optionally authenticating and naming the connection, and describes the server.",
        since: "6.0.0",
        complexity: "O(1)",
        arity: -1,
        flags: flag::NOSCRIPT | flag::LOADING | flag::STALE | flag::FAST | flag::NO_AUTH | flag::ALLOW_BUSY,
        acl: acl::CONNECTION,
        arguments: &[
            Arg::block("arguments", &[
                Arg::integer("protover"),
                Arg::block("username_password", &[
                    Arg::string("username"),
                    Arg::string("password"),
                ]).with_token("AUTH").optional(),
                Arg::string("clientname").with_token("SETNAME").optional(),
            ]).optional(),
        ],
        history: &[("6.2.0", "The protocol version became optional; without it the reply describes the current connection.")],
        handler: Some(hello),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "auth",
        group: Group::Connection,
        summary: "Authenticates the connection with a password (or a user name and password).",
        since: "1.0.0",
        complexity: "O(N) where N is the number of passwords defined for the user",
        arity: -2,
        flags: flag::NOSCRIPT | flag::LOADING | flag::STALE | flag::FAST | flag::NO_AUTH | flag::ALLOW_BUSY,
        acl: acl::CONNECTION,
        arguments: &[
            Arg::string("username").optional().since("6.0.0"),
            Arg::string("password"),
        ],
        history: &[("6.0.0", "Accepts a user name before the password, ACL style.")],
        handler: Some(auth),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "reset",
        group: Group::Connection,
        summary: "Returns the connection to its initial state, as if it had just connected.",
        since: "6.2.0",
        complexity: "O(1)",
        arity: 1,
        flags: flag::NOSCRIPT | flag::LOADING | flag::STALE | flag::FAST | flag::NO_AUTH | flag::ALLOW_BUSY,
        acl: acl::CONNECTION,
        handler: Some(reset),
        ..CommandSpec::BASE
    },
];

fn ping(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if args.len() <= 2 && ctx.client.subscriptions.any() && ctx.reply.resp() == Resp::V2 {
        // A RESP2 subscriber tells a reply from a message by its shape: PING answers in
        // the shape of a message.
        ctx.reply.array(2);
        ctx.reply.bulk(b"pong");
        ctx.reply
            .bulk(args.get(1).map_or(&b""[..], |message| &message[..]));
        return;
    }
    match args.len() {
        1 => ctx.reply.simple(b"PONG"),
        2 => ctx.reply.bulk(&args[1]),
        _ => ctx.reply.error(&super::arity_error("ping")),
    }
}

fn echo(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    ctx.reply.bulk(&args[1]);
}

fn select(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(index) = parse_i64(&args[1]) else {
        ctx.reply.error(err::NOT_INTEGER);
        return;
    };
    if index < 0 || index as usize >= ctx.server.keyspace.num_dbs() {
        ctx.reply.error(err::DB_INDEX);
        return;
    }
    ctx.client.db = index as usize;
    ctx.client
        .shared
        .db
        .store(index as usize, std::sync::atomic::Ordering::Relaxed);
    ctx.reply.ok();
}

fn quit(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    ctx.reply.ok();
    ctx.client.close_after_reply = true;
}

/// The version HELLO and INFO report. Clients (redis-py, redis-cli, the Tcl suite) gate
/// features on it, and Latch implements Redis 7.0's command set, so it says 7.0.15.
pub const REDIS_VERSION: &str = "7.0.15";

const NOPROTO: &[u8] = b"NOPROTO unsupported protocol version";
const WRONGPASS: &[u8] = b"WRONGPASS invalid username-password pair or user is disabled.";
const AUTH_WITHOUT_PASSWORD: &[u8] = b"ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?";
const HELLO_NOAUTH: &[u8] = b"NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time";
pub const BAD_CLIENT_NAME: &[u8] =
    b"ERR Client names cannot contain spaces, newlines or special characters.";

/// Whether `value` may be a client name or library attribute: printable ASCII, no spaces
/// (CLIENT LIST lines are split on spaces).
pub fn valid_client_attr(value: &[u8]) -> bool {
    value.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

/// Sets (or, with an empty name, clears) the client's name; false when the name is invalid.
pub fn set_client_name(ctx: &mut Ctx<'_, '_>, name: &Bytes) -> bool {
    if !valid_client_attr(name) {
        return false;
    }
    *ctx.client.shared.name.lock() = if name.is_empty() {
        None
    } else {
        Some(name.clone())
    };
    true
}

/// Logs the connection in as `user` if it exists, is on and the password matches
/// (any password for a `nopass` user). False otherwise, changing nothing.
/// Logs in as `user`; a failure goes to ACL LOG (its object: `command`, as typed).
fn log_in(ctx: &mut Ctx<'_, '_>, command: &[u8], user: &[u8], password: &[u8]) -> bool {
    let name = String::from_utf8_lossy(user);
    let found = ctx.server.acl.get(&name);
    let Some(found) = found.filter(|found| found.is_enabled() && found.password_matches(password))
    else {
        let context = if ctx.client.multi.is_some() {
            crate::acl_log::Context::Multi
        } else {
            crate::acl_log::Context::TopLevel
        };
        let reason = crate::acl_log::Reason::Auth;
        crate::acl_log::log(
            ctx.server,
            ctx.client,
            &name,
            reason,
            context,
            command.to_vec(),
        );
        return false;
    };
    ctx.client.authenticated = true;
    *ctx.client.shared.user.lock() = found.clone();
    ctx.client.user = found;
    true
}

fn hello(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let mut version = None;
    let mut next = 1;
    if args.len() >= 2 {
        let Some(requested) = parse_i64(&args[1]) else {
            ctx.reply
                .error(b"ERR Protocol version is not an integer or out of range");
            return;
        };
        if !(2..=3).contains(&requested) {
            ctx.reply.error(NOPROTO);
            return;
        }
        version = Some(requested);
        next = 2;
    }
    while next < args.len() {
        let more = args.len() - 1 - next;
        if is(&args[next], "AUTH") && more >= 2 {
            if !log_in(ctx, &args[0], &args[next + 1], &args[next + 2]) {
                ctx.reply.error(WRONGPASS);
                return;
            }
            next += 3;
        } else if is(&args[next], "SETNAME") && more >= 1 {
            if !set_client_name(ctx, &args[next + 1]) {
                ctx.reply.error(BAD_CLIENT_NAME);
                return;
            }
            next += 2;
        } else {
            let message = format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(&args[next])
            );
            ctx.reply.error(message.as_bytes());
            return;
        }
    }
    if !ctx.client.authenticated {
        ctx.reply.error(HELLO_NOAUTH);
        return;
    }
    if let Some(version) = version {
        ctx.reply
            .set_resp(if version == 3 { Resp::V3 } else { Resp::V2 });
        ctx.client
            .shared
            .resp
            .store(version as u8, Ordering::Relaxed);
    }
    let proto = ctx.client.shared.resp.load(Ordering::Relaxed);
    ctx.reply.map(7);
    ctx.reply.bulk(b"server");
    ctx.reply.bulk(b"redis");
    ctx.reply.bulk(b"version");
    ctx.reply.bulk(REDIS_VERSION.as_bytes());
    ctx.reply.bulk(b"proto");
    ctx.reply.integer(proto as i64);
    ctx.reply.bulk(b"id");
    ctx.reply.integer(ctx.client.id as i64);
    ctx.reply.bulk(b"mode");
    ctx.reply.bulk(b"standalone");
    ctx.reply.bulk(b"role");
    ctx.reply.bulk(b"master");
    ctx.reply.bulk(b"modules");
    ctx.reply.array(0);
}

fn auth(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if args.len() > 3 {
        ctx.reply.error(err::SYNTAX);
        return;
    }
    let (user, password): (&[u8], &[u8]) = if args.len() == 2 {
        if ctx.server.acl.default_user().logs_in_without_password() {
            ctx.reply.error(AUTH_WITHOUT_PASSWORD);
            return;
        }
        (b"default", &args[1])
    } else {
        (&args[1], &args[2])
    };
    if log_in(ctx, &args[0], user, password) {
        ctx.reply.ok();
    } else {
        ctx.reply.error(WRONGPASS);
    }
}

/// RESET: database 0, RESP2, no name, replies on, not a monitor, and authenticated only
/// if the default user needs no password, subscribed to nothing. (The gatekeeper ended any
/// transaction before.)
fn reset(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    let shared = ctx.client.shared.clone();
    if shared.monitor.swap(false, Ordering::Relaxed) {
        ctx.server.clients.monitors.fetch_sub(1, Ordering::Relaxed);
    }
    crate::pubsub::leave_all(ctx.server, &shared, &mut ctx.client.subscriptions);
    ctx.server.tracking.disable(ctx.server, ctx.client);
    ctx.client.db = 0;
    shared.db.store(0, Ordering::Relaxed);
    ctx.reply.set_resp(Resp::V2);
    shared.resp.store(2, Ordering::Relaxed);
    let default = ctx.server.acl.default_user();
    ctx.client.authenticated = default.logs_in_without_password();
    *shared.user.lock() = default.clone();
    ctx.client.user = default;
    *shared.name.lock() = None;
    ctx.client.reply_mode = ReplyMode::On;
    shared.no_evict.store(false, Ordering::Relaxed);
    shared.no_touch.store(false, Ordering::Relaxed);
    ctx.reply.simple(b"RESET");
}
