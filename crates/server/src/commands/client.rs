//! CLIENT: inspecting and managing connections (ID, NAME, LIST, INFO, KILL, REPLY, ...).

use std::sync::atomic::Ordering;

use bytes::Bytes;
use latch_keyspace::Tick;
use latch_protocol::Reply;

use super::connection::{set_client_name, valid_client_attr, BAD_CLIENT_NAME};
use super::{err, is, parse_i64, Ctx};
use crate::client::{ClientShared, ReplyMode};
use crate::pause::PauseMode;
use crate::spec::{acl, flag, Arg, CommandSpec, Group};
use crate::tracking::flags as tracking_flags;

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "client",
    group: Group::Connection,
    summary: "Groups the subcommands that inspect and manage client connections.",
    since: "2.4.0",
    complexity: "Depends on subcommand.",
    arity: -2,
    subcommands: CLIENT_SUBCOMMANDS,
    ..CommandSpec::BASE
}];

static CLIENT_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "caching",
        group: Group::Connection,
        summary: "Says whether the next command's keys are tracked, in OPTIN or OPTOUT mode.",
        since: "6.0.0",
        complexity: "O(1)",
        arity: 3,
        flags: flag::NOSCRIPT | flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        arguments: &[
            Arg::oneof("mode", &[
                Arg::token("yes", "YES"),
                Arg::token("no", "NO"),
            ]),
        ],
        handler: Some(client_caching),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "getname",
        group: Group::Connection,
        summary: "Returns the name given to this connection, if any.",
        since: "2.6.9",
        complexity: "O(1)",
        arity: 2,
        flags: flag::NOSCRIPT | flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        handler: Some(client_getname),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "getredir",
        group: Group::Connection,
        summary: "Returns the id of the client receiving this connection's tracking notifications.",
        since: "6.0.0",
        complexity: "O(1)",
        arity: 2,
        flags: flag::NOSCRIPT | flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        handler: Some(client_getredir),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "help",
        group: Group::Connection,
        summary: "Lists the CLIENT subcommands with a short description of each.",
        since: "5.0.0",
        complexity: "O(1)",
        arity: 2,
        flags: flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        handler: Some(client_help),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "id",
        group: Group::Connection,
        summary: "Returns the unique id of this connection.",
        since: "5.0.0",
        complexity: "O(1)",
        arity: 2,
        flags: flag::NOSCRIPT | flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        handler: Some(client_id),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "info",
        group: Group::Connection,
        summary: "Describes this connection in the same format as CLIENT LIST.",
        since: "6.2.0",
        complexity: "O(1)",
        arity: 2,
        flags: flag::NOSCRIPT | flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        tips: &["nondeterministic_output"],
        handler: Some(client_info),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "kill",
        group: Group::Connection,
        summary: "Closes one or more client connections chosen by address or by filters.",
        since: "2.4.0",
        complexity: "O(N) where N is the number of client connections",
        arity: -3,
        flags: flag::ADMIN | flag::NOSCRIPT | flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        arguments: &[
            Arg::oneof("filter", &[
                Arg { deprecated_since: Some("2.8.12"), ..Arg::string("ip:port") },
                Arg::oneof("new-format", &[
                    Arg::integer("client-id").with_token("ID").optional().since("2.8.12"),
                    Arg::oneof("normal_master_slave_pubsub", &[
                        Arg::token("normal", "NORMAL"),
                        Arg::token("master", "MASTER").since("3.2.0"),
                        Arg::token("slave", "SLAVE"),
                        Arg::token("replica", "REPLICA").since("5.0.0"),
                        Arg::token("pubsub", "PUBSUB"),
                    ]).with_token("TYPE").optional().since("2.8.12"),
                    Arg::string("username").with_token("USER").optional(),
                    Arg::string("ip:port").with_token("ADDR").optional(),
                    Arg::string("ip:port").with_token("LADDR").optional().since("6.2.0"),
                    Arg::string("yes/no").with_token("SKIPME").optional(),
                ]).multiple(),
            ]),
        ],
        history: &[("2.8.12", "A filter syntax was introduced."), ("2.8.12", "Filtering by client id was introduced."), ("3.2.0", "The `master` type joined the TYPE filter."), ("5.0.0", "The TYPE filter calls replicas `replica`; `slave` is still understood."), ("6.2.0", "Filtering by local address (LADDR) was introduced.")],
        handler: Some(client_kill),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "list",
        group: Group::Connection,
        summary: "Lists the connected clients, one line of fields per connection.",
        since: "2.4.0",
        complexity: "O(N) where N is the number of client connections",
        arity: -2,
        flags: flag::ADMIN | flag::NOSCRIPT | flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        arguments: &[
            Arg::oneof("normal_master_replica_pubsub", &[
                Arg::token("normal", "NORMAL"),
                Arg::token("master", "MASTER"),
                Arg::token("replica", "REPLICA"),
                Arg::token("pubsub", "PUBSUB"),
            ]).with_token("TYPE").optional().since("5.0.0"),
            Arg::block("id", &[
                Arg::integer("client-id").multiple(),
            ]).with_token("ID").optional().since("6.2.0"),
        ],
        history: &[("2.8.12", "Each line shows the client `id`."), ("5.0.0", "A TYPE filter was introduced."), ("6.0.0", "Each line shows the `user`."), ("6.2.0", "Lines show `argv-mem`, `tot-mem`, `laddr` and `redir`; an ID filter was introduced."), ("7.0.0", "Lines show `resp`, `multi-mem`, `rbs` and `rbp`."), ("7.0.3", "Lines show `ssub`.")],
        tips: &["nondeterministic_output"],
        handler: Some(client_list),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "no-evict",
        group: Group::Connection,
        summary: "Exempts this connection from client eviction, or makes it eligible again.",
        since: "7.0.0",
        complexity: "O(1)",
        arity: 3,
        flags: flag::ADMIN | flag::NOSCRIPT | flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        arguments: &[
            Arg::oneof("enabled", &[
                Arg::token("on", "ON"),
                Arg::token("off", "OFF"),
            ]),
        ],
        handler: Some(client_no_evict),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "no-touch",
        group: Group::Connection,
        summary: "Stops (or resumes) this connection's commands updating the keys' last access time.",
        since: "7.2.0",
        complexity: "O(1)",
        arity: 3,
        flags: flag::NOSCRIPT | flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        arguments: &[
            Arg::oneof("enabled", &[
                Arg::token("on", "ON"),
                Arg::token("off", "OFF"),
            ]),
        ],
        handler: Some(client_no_touch),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "pause",
        group: Group::Connection,
        summary: "Holds clients' commands (all, or only those that may write) for a while.",
        since: "2.9.50",
        complexity: "O(1)",
        arity: -3,
        flags: flag::ADMIN | flag::NOSCRIPT | flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        arguments: &[
            Arg::integer("timeout"),
            Arg::oneof("mode", &[
                Arg::token("write", "WRITE"),
                Arg::token("all", "ALL"),
            ]).optional().since("6.2.0"),
        ],
        history: &[("6.2.0", "The WRITE mode (pause only what may write) and the `mode` argument were introduced.")],
        handler: Some(client_pause),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "reply",
        group: Group::Connection,
        summary: "Turns the server's replies to this connection on or off, or skips the next one.",
        since: "3.2.0",
        complexity: "O(1)",
        arity: 3,
        flags: flag::NOSCRIPT | flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        arguments: &[
            Arg::oneof("on_off_skip", &[
                Arg::token("on", "ON"),
                Arg::token("off", "OFF"),
                Arg::token("skip", "SKIP"),
            ]),
        ],
        handler: Some(client_reply),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "setinfo",
        group: Group::Connection,
        summary: "Records the client library's name or version for this connection.",
        since: "7.2.0",
        complexity: "O(1)",
        arity: 4,
        flags: flag::NOSCRIPT | flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        arguments: &[
            Arg::oneof("attr", &[
                Arg::string("libname").with_token("LIB-NAME"),
                Arg::string("libver").with_token("LIB-VER"),
            ]),
        ],
        tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
        handler: Some(client_setinfo),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "setname",
        group: Group::Connection,
        summary: "Gives this connection a name, shown by CLIENT LIST.",
        since: "2.6.9",
        complexity: "O(1)",
        arity: 3,
        flags: flag::NOSCRIPT | flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        arguments: &[
            Arg::string("connection-name"),
        ],
        handler: Some(client_setname),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "tracking",
        group: Group::Connection,
        summary: "Turns client-side caching support (key tracking and invalidations) on or off.",
        since: "6.0.0",
        complexity: "O(1). Some options may introduce additional complexity.",
        arity: -3,
        flags: flag::NOSCRIPT | flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        arguments: &[
            Arg::oneof("status", &[
                Arg::token("on", "ON"),
                Arg::token("off", "OFF"),
            ]),
            Arg::integer("client-id").with_token("REDIRECT").optional(),
            Arg::string("prefix").with_token("PREFIX").optional().multiple().multiple_token(),
            Arg::token("BCAST", "BCAST").optional(),
            Arg::token("OPTIN", "OPTIN").optional(),
            Arg::token("OPTOUT", "OPTOUT").optional(),
            Arg::token("NOLOOP", "NOLOOP").optional(),
        ],
        handler: Some(client_tracking),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "trackinginfo",
        group: Group::Connection,
        summary: "Describes this connection's client-side caching (tracking) state.",
        since: "6.2.0",
        complexity: "O(1)",
        arity: 2,
        flags: flag::NOSCRIPT | flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        handler: Some(client_trackinginfo),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "unpause",
        group: Group::Connection,
        summary: "Ends a CLIENT PAUSE: the clients it held go on.",
        since: "6.2.0",
        complexity: "O(N) Where N is the number of paused clients",
        arity: 2,
        flags: flag::ADMIN | flag::NOSCRIPT | flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        handler: Some(client_unpause),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "unblock",
        group: Group::Connection,
        summary: "Unblocks a client waiting in a blocking command.",
        since: "5.0.0",
        complexity: "O(log N) where N is the number of client connections",
        arity: -3,
        flags: flag::ADMIN | flag::NOSCRIPT | flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        arguments: &[
            Arg::integer("client-id"),
            Arg::oneof("timeout_error", &[
                Arg::token("timeout", "TIMEOUT"),
                Arg::token("error", "ERROR"),
            ]).optional(),
        ],
        handler: Some(client_unblock),
        ..CommandSpec::BASE
    },
];

/// Writes a HELP reply the way every Redis container does: a header naming the command,
/// the given lines, and a closing entry for HELP itself.
pub(crate) fn help_reply(reply: &mut Reply, command: &str, lines: &[&str]) {
    reply.array(lines.len() + 3);
    let header = format!(
        "{} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        command.to_uppercase()
    );
    reply.simple(header.as_bytes());
    for line in lines {
        reply.simple(line.as_bytes());
    }
    reply.simple(b"HELP");
    reply.simple(b"    Print this help.");
}

fn client_help(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    help_reply(
        ctx.reply,
        "client",
        &[
            "CACHING (YES|NO)",
            "    In OPTIN (OPTOUT) tracking mode, track (do not track) the keys of the next",
            "    command or transaction.",
            "GETNAME",
            "    Reply with this connection's name, or null when it has none.",
            "GETREDIR",
            "    Reply with the id tracking notifications are redirected to (-1: none).",
            "ID",
            "    Reply with this connection's id.",
            "INFO",
            "    Describe this connection, in the format of CLIENT LIST.",
            "KILL <ip:port>",
            "    Close the connection coming from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Close every connection matching all the filters given:",
            "    * ID <client-id>",
            "    * ADDR (<ip:port>|<unixsocket>:0): where the connection comes from",
            "    * LADDR (<ip:port>|<unixsocket>:0): where the connection was accepted",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "    * USER <username>",
            "    * SKIPME (YES|NO): leave this connection alone (the default: yes)",
            "LIST [TYPE (NORMAL|MASTER|REPLICA|PUBSUB)] [ID <client-id> [...]]",
            "    Describe the connected clients, one line each.",
            "NO-EVICT (ON|OFF)",
            "    Exempt this connection from client eviction, or not.",
            "NO-TOUCH (ON|OFF)",
            "    Keep this connection's commands from updating keys' access times, or not.",
            "PAUSE <timeout> [WRITE|ALL]",
            "    Hold every client's commands (or, with WRITE, those that may write) for",
            "    <timeout> milliseconds.",
            "REPLY (ON|OFF|SKIP)",
            "    Send replies, stop sending them, or drop only the next one.",
            "SETINFO <LIB-NAME|LIB-VER> <value>",
            "    Record the client library's name or version.",
            "SETNAME <name>",
            "    Name this connection (an empty name removes it).",
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Turn client-side caching support (key tracking, invalidations) on or off.",
            "TRACKINGINFO",
            "    Describe this connection's client-side caching state.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Wake a client blocked in a blocking command.",
            "UNPAUSE",
            "    End a CLIENT PAUSE: the clients it held go on.",
        ],
    );
}

fn client_id(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    ctx.reply.integer(ctx.client.id as i64);
}

fn client_getname(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    let name = ctx.client.shared.name.lock().clone();
    match name {
        Some(name) => ctx.reply.bulk(&name),
        None => ctx.reply.null(),
    }
}

fn client_setname(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if set_client_name(ctx, &args[2]) {
        ctx.reply.ok();
    } else {
        ctx.reply.error(BAD_CLIENT_NAME);
    }
}

fn client_setinfo(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let attribute = &args[2];
    let slot = if is(attribute, "LIB-NAME") {
        &ctx.client.shared.lib_name
    } else if is(attribute, "LIB-VER") {
        &ctx.client.shared.lib_ver
    } else {
        let message = format!(
            "ERR Unrecognized option '{}'",
            String::from_utf8_lossy(attribute)
        );
        ctx.reply.error(message.as_bytes());
        return;
    };
    let value = &args[3];
    if !valid_client_attr(value) {
        let message = format!(
            "ERR {} cannot contain spaces, newlines or special characters.",
            String::from_utf8_lossy(attribute)
        );
        ctx.reply.error(message.as_bytes());
        return;
    }
    *slot.lock() = if value.is_empty() {
        None
    } else {
        Some(value.clone())
    };
    ctx.reply.ok();
}

/// Client types as CLIENT LIST TYPE and CLIENT KILL TYPE name them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ClientType {
    Normal,
    Replica,
    Master,
    Pubsub,
}

fn client_type_by_name(name: &[u8]) -> Option<ClientType> {
    if is(name, "normal") {
        Some(ClientType::Normal)
    } else if is(name, "slave") || is(name, "replica") {
        Some(ClientType::Replica)
    } else if is(name, "master") {
        Some(ClientType::Master)
    } else if is(name, "pubsub") {
        Some(ClientType::Pubsub)
    } else {
        None
    }
}

/// Redis' order: a replica or the primary's link first, then a subscriber, else normal.
fn client_type_of(client: &ClientShared) -> ClientType {
    match client.role.load(std::sync::atomic::Ordering::Relaxed) {
        crate::client::role::REPLICA => ClientType::Replica,
        crate::client::role::PRIMARY => ClientType::Master,
        _ if client.is_pubsub() => ClientType::Pubsub,
        _ => ClientType::Normal,
    }
}

fn unknown_type(ctx: &mut Ctx<'_, '_>, name: &[u8]) {
    let message = format!(
        "ERR Unknown client type '{}'",
        String::from_utf8_lossy(name)
    );
    ctx.reply.error(message.as_bytes());
}

fn client_info(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let mut line = ctx.client.shared.describe_running(args);
    line.push('\n');
    ctx.reply.verbatim(b"txt", line.as_bytes());
}

/// A client's CLIENT LIST line; the caller's own counts the command it is running.
fn describe(ctx: &Ctx<'_, '_>, client: &crate::client::ClientShared, args: &[Bytes]) -> String {
    if client.id == ctx.client.id {
        client.describe_running(args)
    } else {
        client.describe()
    }
}

fn client_list(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let mut wanted_type = None;
    let mut wanted_ids: Option<Vec<u64>> = None;
    if args.len() == 4 && is(&args[2], "TYPE") {
        match client_type_by_name(&args[3]) {
            Some(kind) => wanted_type = Some(kind),
            None => return unknown_type(ctx, &args[3]),
        }
    } else if args.len() > 3 && is(&args[2], "ID") {
        let mut ids = Vec::with_capacity(args.len() - 3);
        for arg in &args[3..] {
            match parse_i64(arg) {
                Some(id) => ids.push(id as u64),
                None => {
                    ctx.reply.error(b"ERR Invalid client ID");
                    return;
                }
            }
        }
        wanted_ids = Some(ids);
    } else if args.len() != 2 {
        ctx.reply.error(err::SYNTAX);
        return;
    }
    let mut text = String::new();
    match wanted_ids {
        // Listed in the order asked, as Redis does.
        Some(ids) => {
            for id in ids {
                // A killed client is on its way out (Redis frees it at once): not listed.
                if let Some(client) = ctx.server.clients.get(id).filter(|c| !c.is_killed()) {
                    text.push_str(&describe(ctx, &client, args));
                    text.push('\n');
                }
            }
        }
        None => {
            for client in ctx.server.clients.list() {
                if client.is_killed()
                    || wanted_type.is_some_and(|kind| client_type_of(&client) != kind)
                {
                    continue;
                }
                text.push_str(&describe(ctx, &client, args));
                text.push('\n');
            }
        }
    }
    ctx.reply.verbatim(b"txt", text.as_bytes());
}

fn client_kill(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let mut addr: Option<&[u8]> = None;
    let mut laddr: Option<&[u8]> = None;
    let mut user: Option<&[u8]> = None;
    let mut kind = None;
    let mut id = None;
    let mut skip_me = true;
    let old_form = args.len() == 3;
    if old_form {
        addr = Some(&args[2]);
        // The old form may close the caller's own connection.
        skip_me = false;
    } else {
        let mut i = 2;
        while i < args.len() {
            let Some(value) = args.get(i + 1) else {
                ctx.reply.error(err::SYNTAX);
                return;
            };
            let option = &args[i];
            if is(option, "ID") {
                // Not a number at all gets the same answer, as in Redis 7.0.
                match parse_i64(value) {
                    Some(n) if n >= 1 => id = Some(n as u64),
                    _ => {
                        ctx.reply.error(b"ERR client-id should be greater than 0");
                        return;
                    }
                }
            } else if is(option, "TYPE") {
                match client_type_by_name(value) {
                    Some(k) => kind = Some(k),
                    None => return unknown_type(ctx, value),
                }
            } else if is(option, "ADDR") {
                addr = Some(value);
            } else if is(option, "LADDR") {
                laddr = Some(value);
            } else if is(option, "USER") {
                if ctx
                    .server
                    .acl
                    .get(&String::from_utf8_lossy(value))
                    .is_none()
                {
                    let message = format!("ERR No such user '{}'", String::from_utf8_lossy(value));
                    ctx.reply.error(message.as_bytes());
                    return;
                }
                user = Some(value);
            } else if is(option, "SKIPME") {
                if is(value, "YES") {
                    skip_me = true;
                } else if is(value, "NO") {
                    skip_me = false;
                } else {
                    ctx.reply.error(err::SYNTAX);
                    return;
                }
            } else {
                ctx.reply.error(err::SYNTAX);
                return;
            }
            i += 2;
        }
    }
    let me = ctx.client.id;
    let mut killed = 0i64;
    let mut close_me = false;
    for client in ctx.server.clients.list() {
        if addr.is_some_and(|a| a != client.addr.as_bytes())
            || laddr.is_some_and(|a| a != client.laddr.as_bytes())
            || kind.is_some_and(|k| client_type_of(&client) != k)
            || id.is_some_and(|wanted| wanted != client.id)
            || user.is_some_and(|u| u != client.user.lock().name.as_bytes())
            || (client.id == me && skip_me)
        {
            continue;
        }
        if client.id == me {
            close_me = true;
        } else {
            client.kill();
        }
        killed += 1;
    }
    if old_form {
        if killed == 0 {
            ctx.reply.error(b"ERR No such client");
        } else {
            ctx.reply.ok();
        }
    } else {
        ctx.reply.integer(killed);
    }
    if close_me {
        ctx.client.close_after_reply = true;
    }
}

fn on_off(arg: &[u8]) -> Option<bool> {
    if is(arg, "ON") {
        Some(true)
    } else if is(arg, "OFF") {
        Some(false)
    } else {
        None
    }
}

fn client_no_evict(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    match on_off(&args[2]) {
        Some(on) => {
            ctx.client.shared.no_evict.store(on, Ordering::Relaxed);
            ctx.reply.ok();
        }
        None => ctx.reply.error(err::SYNTAX),
    }
}

fn client_no_touch(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    match on_off(&args[2]) {
        Some(on) => {
            ctx.client.shared.no_touch.store(on, Ordering::Relaxed);
            ctx.reply.ok();
        }
        None => ctx.reply.error(err::SYNTAX),
    }
}

/// The gatekeeper drops replies by mode; this only switches the mode. The OK written here
/// reaches the client only when the mode ends up On.
fn client_reply(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let mode = &args[2];
    if is(mode, "ON") {
        ctx.client.reply_mode = ReplyMode::On;
    } else if is(mode, "OFF") {
        ctx.client.reply_mode = ReplyMode::Off;
    } else if is(mode, "SKIP") {
        if ctx.client.reply_mode != ReplyMode::Off {
            ctx.client.reply_mode = ReplyMode::SkipNext;
        }
    } else {
        ctx.reply.error(err::SYNTAX);
        return;
    }
    ctx.reply.ok();
}

/// The id invalidations are redirected to (0: none) while tracking, else -1.
fn client_getredir(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    let tracking = &ctx.client.tracking;
    ctx.reply.integer(if tracking.on {
        tracking.redirect as i64
    } else {
        -1
    });
}

fn client_trackinginfo(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    let tracking = &ctx.client.tracking;
    let broken = ctx.client.shared.tracking.flags() & tracking_flags::BROKEN_REDIRECT != 0;
    let mut shown: Vec<&[u8]> = vec![if tracking.on { b"on" } else { b"off" }];
    if tracking.bcast {
        shown.push(b"bcast");
    }
    if tracking.optin {
        shown.push(b"optin");
        if tracking.caching {
            shown.push(b"caching-yes");
        }
    }
    if tracking.optout {
        shown.push(b"optout");
        if tracking.caching {
            shown.push(b"caching-no");
        }
    }
    if tracking.noloop {
        shown.push(b"noloop");
    }
    if broken {
        shown.push(b"broken_redirect");
    }
    ctx.reply.map(3);
    ctx.reply.bulk(b"flags");
    ctx.reply.set(shown.len());
    for flag in shown {
        ctx.reply.bulk(flag);
    }
    ctx.reply.bulk(b"redirect");
    ctx.reply.integer(if tracking.on {
        tracking.redirect as i64
    } else {
        -1
    });
    ctx.reply.bulk(b"prefixes");
    ctx.reply.array(tracking.prefixes.len());
    for prefix in &tracking.prefixes {
        ctx.reply.bulk(prefix);
    }
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN] [OPTOUT] [NOLOOP],
/// with Redis' checks in Redis' order.
fn client_tracking(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let mut redirect: i64 = 0;
    let mut options = 0u8;
    let mut prefixes: Vec<Bytes> = Vec::new();
    let mut at = 3;
    while at < args.len() {
        let more = at + 1 < args.len();
        let option = &args[at];
        if is(option, "REDIRECT") && more {
            at += 1;
            if redirect != 0 {
                ctx.reply
                    .error(b"ERR A client can only redirect to a single other client");
                return;
            }
            let Some(id) = parse_i64(&args[at]) else {
                ctx.reply.error(err::NOT_INTEGER);
                return;
            };
            // It must exist now (it may go later: its clients then learn of it).
            let exists = u64::try_from(id)
                .ok()
                .and_then(|id| ctx.server.clients.get(id))
                .is_some_and(|c| !c.is_closing());
            if !exists {
                ctx.reply
                    .error(b"ERR The client ID you want redirect to does not exist");
                return;
            }
            redirect = id;
        } else if is(option, "BCAST") {
            options |= tracking_flags::BCAST;
        } else if is(option, "OPTIN") {
            options |= tracking_flags::OPTIN;
        } else if is(option, "OPTOUT") {
            options |= tracking_flags::OPTOUT;
        } else if is(option, "NOLOOP") {
            options |= tracking_flags::NOLOOP;
        } else if is(option, "PREFIX") && more {
            at += 1;
            prefixes.push(args[at].clone());
        } else {
            ctx.reply.error(err::SYNTAX);
            return;
        }
        at += 1;
    }
    if is(&args[2], "OFF") {
        ctx.server.tracking.disable(ctx.server, ctx.client);
        ctx.reply.ok();
        return;
    }
    if !is(&args[2], "ON") {
        ctx.reply.error(err::SYNTAX);
        return;
    }
    let bcast = options & tracking_flags::BCAST != 0;
    let optin = options & tracking_flags::OPTIN != 0;
    let optout = options & tracking_flags::OPTOUT != 0;
    let current = &ctx.client.tracking;
    if !bcast && !prefixes.is_empty() {
        ctx.reply
            .error(b"ERR PREFIX option requires BCAST mode to be enabled");
        return;
    }
    if current.on && current.bcast != bcast {
        ctx.reply.error(b"ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.");
        return;
    }
    if bcast && (optin || optout) {
        ctx.reply
            .error(b"ERR OPTIN and OPTOUT are not compatible with BCAST");
        return;
    }
    if optin && optout {
        ctx.reply
            .error(b"ERR You can't specify both OPTIN mode and OPTOUT mode");
        return;
    }
    if (optin && current.optout) || (optout && current.optin) {
        ctx.reply.error(b"ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.");
        return;
    }
    if bcast && !prefixes_acceptable(ctx, &prefixes) {
        return;
    }
    ctx.server
        .tracking
        .enable(ctx.server, ctx.client, redirect as u64, options, &prefixes);
    ctx.reply.ok();
}

/// Redis' `checkPrefixCollisionsOrReply`: no new prefix may be a prefix of (or equal to)
/// one the client has, nor of another new one. Like Redis 7.0.15, whose check returns the
/// index of the first prefix of a colliding pair among the new ones (taken as success
/// unless it is the first), a collision found there for a later prefix answers the error
/// and still lets tracking go on (and answer OK).
fn prefixes_acceptable(ctx: &mut Ctx<'_, '_>, prefixes: &[Bytes]) -> bool {
    fn overlap(a: &[u8], b: &[u8]) -> bool {
        let shorter = a.len().min(b.len());
        a[..shorter] == b[..shorter]
    }
    for (i, prefix) in prefixes.iter().enumerate() {
        if let Some(existing) = ctx
            .client
            .tracking
            .prefixes
            .iter()
            .find(|existing| overlap(existing, prefix))
        {
            let message = prefix_error(prefix, "an existing", existing);
            ctx.reply.error(&message);
            return false;
        }
        if let Some(other) = prefixes[i + 1..]
            .iter()
            .find(|other| overlap(prefix, other))
        {
            let message = prefix_error(prefix, "another provided", other);
            ctx.reply.error(&message);
            return i != 0;
        }
    }
    true
}

/// `Prefix 'a' overlaps with <which> prefix 'b'. ...`, each prefix shown as C's `%s`
/// shows it (up to a NUL byte), newlines turned into spaces as Redis' error replies do.
fn prefix_error(prefix: &[u8], which: &str, other: &[u8]) -> Vec<u8> {
    let c_string = |bytes: &[u8]| -> Vec<u8> {
        bytes
            .iter()
            .take_while(|&&b| b != 0)
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
            .collect()
    };
    let mut message = b"ERR Prefix '".to_vec();
    message.extend(c_string(prefix));
    message.extend_from_slice(format!("' overlaps with {which} prefix '").as_bytes());
    message.extend(c_string(other));
    message.extend_from_slice(b"'. Prefixes for a single client must not overlap.");
    message
}

/// CLIENT CACHING YES|NO: in OPTIN mode, track the next command's keys; in OPTOUT mode,
/// do not.
fn client_caching(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let tracking = &mut ctx.client.tracking;
    if !tracking.on {
        ctx.reply.error(b"ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
        return;
    }
    if is(&args[2], "YES") {
        if !tracking.optin {
            ctx.reply.error(
                b"ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            );
            return;
        }
    } else if is(&args[2], "NO") {
        if !tracking.optout {
            ctx.reply.error(
                b"ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            );
            return;
        }
    } else {
        ctx.reply.error(err::SYNTAX);
        return;
    }
    tracking.caching = true;
    ctx.reply.ok();
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: ends a blocking command's wait as if it timed out (or
/// with an `-UNBLOCKED` error); 1 when the client was blocked, else 0.
fn client_unblock(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if args.len() > 4 {
        subcommand_syntax_error(ctx, args);
        return;
    }
    let reason = match args.get(3) {
        None => crate::client::UnblockReason::Timeout,
        Some(arg) if is(arg, "TIMEOUT") => crate::client::UnblockReason::Timeout,
        Some(arg) if is(arg, "ERROR") => crate::client::UnblockReason::Error,
        Some(_) => {
            ctx.reply
                .error(b"ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
            return;
        }
    };
    let Some(id) = parse_i64(&args[2]) else {
        ctx.reply.error(err::NOT_INTEGER);
        return;
    };
    let unblocked = u64::try_from(id).is_ok_and(|id| ctx.server.clients.unblock(id, reason));
    ctx.reply.integer(i64::from(unblocked));
}

/// CLIENT PAUSE timeout [WRITE|ALL]: holds every client's commands (ALL, the default) or
/// those that may write (WRITE) for `timeout` milliseconds, expiry included. A pause in
/// force keeps the later end and the stricter mode; 0 pauses nothing new. Clients that
/// only wait (blocked in BLPOP & co) are not disturbed. Inside MULTI the pause starts once
/// the transaction ends (the rest of EXEC's queue runs).
fn client_pause(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if args.len() > 4 {
        subcommand_syntax_error(ctx, args);
        return;
    }
    let mode = match args.get(3) {
        None => PauseMode::All,
        Some(mode) if is(mode, "WRITE") => PauseMode::Write,
        Some(mode) if is(mode, "ALL") => PauseMode::All,
        Some(_) => {
            ctx.reply
                .error(b"ERR CLIENT PAUSE mode must be WRITE or ALL");
            return;
        }
    };
    let Some(timeout_ms) = parse_i64(&args[2]) else {
        ctx.reply
            .error(b"ERR timeout is not an integer or out of range");
        return;
    };
    if timeout_ms < 0 {
        ctx.reply.error(b"ERR timeout is negative");
        return;
    }
    let end = (timeout_ms > 0).then(|| {
        let nanos = (timeout_ms as u64).saturating_mul(1_000_000);
        Tick::from_nanos(Tick::now().as_nanos().saturating_add(nanos))
    });
    ctx.server.pause.pause(&ctx.server.keyspace, mode, end);
    ctx.reply.ok();
}

/// CLIENT UNPAUSE: ends the pause in force (if any); the commands it held run, in the order
/// they arrived.
fn client_unpause(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    ctx.server.pause.unpause(&ctx.server.keyspace);
    ctx.reply.ok();
}

/// Redis' reply when a subcommand exists but got arguments it cannot take.
pub(crate) fn subcommand_syntax_error(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let sub = &args[1][..args[1].len().min(128)];
    let message = format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        String::from_utf8_lossy(sub),
        String::from_utf8_lossy(&args[0]).to_uppercase()
    );
    ctx.reply.error(message.as_bytes());
}
