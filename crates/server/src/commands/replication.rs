//! Replication commands: REPLICAOF (SLAVEOF), REPLCONF, PSYNC, SYNC, WAIT, ROLE. The work
//! is `crate::replication`'s; these check arguments and answer as redis-server does.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{err, is, parse_i64, Ctx};
use crate::replication::failover::Stage;
use crate::replication::primary::SyncRequest;
use crate::replication::{link, state, PrimaryAddr};
use crate::spec::{acl, docflag, flag, Arg, CommandSpec, Group};

const REPLICAOF_ARGS: &[Arg] = &[Arg::oneof(
    "args",
    &[
        Arg::block("host-port", &[Arg::string("host"), Arg::integer("port")]),
        Arg::block(
            "no-one",
            &[Arg::token("no", "NO"), Arg::token("one", "ONE")],
        ),
    ],
)];

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "replicaof",
        group: Group::Server,
        summary: "Makes the server a replica of another one, or (NO ONE) a primary again.",
        since: "5.0.0",
        complexity: "O(1)",
        arity: 3,
        flags: flag::NO_ASYNC_LOADING | flag::ADMIN | flag::NOSCRIPT | flag::STALE,
        arguments: REPLICAOF_ARGS,
        handler: Some(replicaof),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "slaveof",
        group: Group::Server,
        summary: "Makes the server a replica of another one, or (NO ONE) a primary again.",
        since: "1.0.0",
        complexity: "O(1)",
        arity: 3,
        flags: flag::NO_ASYNC_LOADING | flag::ADMIN | flag::NOSCRIPT | flag::STALE,
        arguments: REPLICAOF_ARGS,
        doc_flags: docflag::DEPRECATED,
        deprecated_since: Some("5.0.0"),
        replaced_by: Some("`REPLICAOF`"),
        handler: Some(replicaof),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "replconf",
        group: Group::Server,
        summary: "What a replica tells its primary about itself and its progress (internal).",
        since: "3.0.0",
        complexity: "O(1)",
        arity: -1,
        flags: flag::ADMIN | flag::NOSCRIPT | flag::LOADING | flag::STALE | flag::ALLOW_BUSY,
        doc_flags: docflag::SYSCALL,
        handler: Some(replconf),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "psync",
        group: Group::Server,
        summary: "Asks to be replicated from a history and offset (internal).",
        since: "2.8.0",
        arity: -3,
        flags: flag::NO_ASYNC_LOADING | flag::ADMIN | flag::NO_MULTI | flag::NOSCRIPT,
        arguments: &[Arg::string("replicationid"), Arg::integer("offset")],
        handler: Some(psync),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "sync",
        group: Group::Server,
        summary: "Asks for a full copy of the data and the stream after it (internal).",
        since: "1.0.0",
        arity: 1,
        flags: flag::NO_ASYNC_LOADING | flag::ADMIN | flag::NO_MULTI | flag::NOSCRIPT,
        handler: Some(sync),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "wait",
        group: Group::Generic,
        summary: "Waits until replicas have acknowledged this connection's writes, and says how many did.",
        since: "3.0.0",
        complexity: "O(1)",
        arity: 3,
        flags: flag::NOSCRIPT,
        acl: acl::CONNECTION,
        arguments: &[Arg::integer("numreplicas"), Arg::integer("timeout")],
        tips: &["request_policy:all_shards", "response_policy:agg_min"],
        handler: Some(wait),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "failover",
        group: Group::Server,
        summary: "Hands this primary's role to one of its replicas without losing writes.",
        since: "6.2.0",
        complexity: "O(1)",
        arity: -1,
        flags: flag::ADMIN | flag::NOSCRIPT | flag::STALE,
        arguments: &[
            Arg::block(
                "target",
                &[
                    Arg::string("host"),
                    Arg::integer("port"),
                    Arg::token("force", "FORCE").optional(),
                ],
            )
            .with_token("TO")
            .optional(),
            Arg::token("abort", "ABORT").optional(),
            Arg::integer("milliseconds").with_token("TIMEOUT").optional(),
        ],
        handler: Some(failover),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "role",
        group: Group::Server,
        summary: "Says whether this server is a primary or a replica, with its replication state.",
        since: "2.8.12",
        complexity: "O(1)",
        arity: 1,
        flags: flag::NOSCRIPT | flag::LOADING | flag::STALE | flag::FAST,
        acl: acl::ADMIN | acl::DANGEROUS,
        handler: Some(role),
        ..CommandSpec::BASE
    },
];

fn replicaof(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(server) = ctx.server.arc() else {
        ctx.reply.error(b"ERR the server is shutting down");
        return;
    };
    if ctx.server.replication.failover.lock().stage != Stage::None {
        ctx.reply
            .error(b"ERR REPLICAOF not allowed while failing over.");
        return;
    }
    if is(&args[1], "NO") && is(&args[2], "ONE") {
        crate::replication::replica::stop(&server);
        ctx.reply.ok();
        return;
    }
    if ctx.client.shared.role.load(Ordering::Relaxed) == crate::client::role::REPLICA {
        ctx.reply
            .error(b"ERR Command is not valid when client is a replica.");
        return;
    }
    let Some(port) = parse_i64(&args[2]) else {
        ctx.reply.error(err::NOT_INTEGER);
        return;
    };
    if !(0..=65535).contains(&port) {
        ctx.reply
            .error(b"ERR value is out of range, value must between 0 and 65535");
        return;
    }
    let primary = PrimaryAddr {
        host: String::from_utf8_lossy(&args[1]).into_owned(),
        port: port as u16,
    };
    if ctx.server.replication.primary().as_ref() == Some(&primary) {
        ctx.reply
            .simple(b"OK Already connected to specified master");
        return;
    }
    crate::replication::replica::start(&server, primary);
    ctx.reply.ok();
}

fn replconf(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if args.len().is_multiple_of(2) {
        ctx.reply.error(err::SYNTAX);
        return;
    }
    for pair in args[1..].chunks(2) {
        let (option, value) = (&pair[0], &pair[1]);
        if is(option, "listening-port") {
            let Some(port) = parse_i64(value).filter(|p| (0..=65535).contains(p)) else {
                ctx.reply.error(err::NOT_INTEGER);
                return;
            };
            ctx.client.replconf.listening_port = port as u16;
        } else if is(option, "ip-address") {
            if value.len() >= 46 {
                let message = format!(
                    "ERR REPLCONF ip-address provided by replica instance is too long: {} bytes",
                    value.len()
                );
                ctx.reply.error(message.as_bytes());
                return;
            }
            ctx.client.replconf.ip_address = Some(String::from_utf8_lossy(value).into_owned());
        } else if is(option, "capa") {
            if is(value, "eof") {
                ctx.client.replconf.capa_eof = true;
            } else if is(value, "psync2") {
                ctx.client.replconf.capa_psync2 = true;
            }
        } else if is(option, "ack") || is(option, "getack") {
            // ACKs come on a replica's feeder connection (`replication::primary`) and
            // GETACKs on this server's link to its primary; anywhere else Redis ignores
            // them without a reply.
            return;
        } else if is(option, "rdb-only") {
            // redis-cli --rdb sends it; the snapshot is sent the same way either way.
            match parse_i64(value) {
                Some(0 | 1) => {}
                Some(_) => {
                    ctx.reply
                        .error(b"ERR value is out of range, value must between 0 and 1");
                    return;
                }
                None => {
                    ctx.reply.error(err::NOT_INTEGER);
                    return;
                }
            }
        } else if is(option, "rdb-filter-only") {
            // Include filters: none (an empty snapshot) or "functions" (redis-cli
            // --functions-rdb).
            let text = String::from_utf8_lossy(value);
            let mut functions = false;
            for filter in text.split_ascii_whitespace() {
                if filter.eq_ignore_ascii_case("functions") {
                    functions = true;
                } else {
                    let message = format!("ERR Unsupported rdb-filter-only option: {filter}");
                    ctx.reply.error(message.as_bytes());
                    return;
                }
            }
            ctx.client.replconf.rdb_filter_functions = Some(functions);
        } else {
            let message = format!(
                "ERR Unrecognized REPLCONF option: {}",
                String::from_utf8_lossy(option)
            );
            ctx.reply.error(message.as_bytes());
            return;
        }
    }
    ctx.reply.ok();
}

/// Whether this server may feed a replica now (a replica must be connected to its own
/// primary to serve a sub-replica, as Redis requires).
fn refuse_sync(ctx: &mut Ctx<'_, '_>) -> bool {
    let replication = &ctx.server.replication;
    if replication.is_replica()
        && replication.link.status.load(Ordering::Relaxed) != link::CONNECTED
    {
        ctx.reply
            .error(b"NOMASTERLINK Can't SYNC while not connected with my master");
        return true;
    }
    ctx.client.shared.role.load(Ordering::Relaxed) == crate::client::role::REPLICA
}

fn psync(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if ctx.client.shared.role.load(Ordering::Relaxed) == crate::client::role::REPLICA {
        return;
    }
    if args.len() > 3 && is(&args[3], "FAILOVER") {
        // Our primary hands its role over to us.
        tracing::warn!(
            "Failover request received for replid {}.",
            String::from_utf8_lossy(&args[1])
        );
        if !ctx.server.replication.is_replica() {
            ctx.reply
                .error(b"ERR PSYNC FAILOVER can't be sent to a master.");
            return;
        }
        if args[1][..] != *ctx.server.replication.ids().replid.as_bytes() {
            ctx.reply
                .error(b"ERR PSYNC FAILOVER replid must match my replid.");
            return;
        }
        if let Some(server) = ctx.server.arc() {
            crate::replication::replica::stop(&server);
        }
    }
    if ctx.server.replication.failover.lock().stage != Stage::None {
        ctx.reply
            .error(b"NOMASTERLINK Can't SYNC while failing over");
        return;
    }
    if refuse_sync(ctx) {
        return;
    }
    let Some(offset) = parse_i64(&args[2]) else {
        ctx.reply.error(err::NOT_INTEGER);
        return;
    };
    ctx.client.sync_request = Some(SyncRequest {
        psync: Some((String::from_utf8_lossy(&args[1]).into_owned(), offset)),
    });
}

fn sync(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    if refuse_sync(ctx) {
        return;
    }
    ctx.client.sync_request = Some(SyncRequest { psync: None });
}

fn wait(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if ctx.server.replication.is_replica() {
        ctx.reply.error(b"ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.");
        return;
    }
    let Some(wanted) = parse_i64(&args[1]) else {
        ctx.reply.error(err::NOT_INTEGER);
        return;
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
    let offset = ctx.client.repl_offset;
    let acked = ctx.server.replication.acked_at_least(offset);
    if acked as i64 >= wanted || ctx.client.multi.is_some() || ctx.client.in_script {
        ctx.reply.integer(acked as i64);
        return;
    }
    // The connection waits (without holding its worker) and answers.
    ctx.client.wait_request = Some(crate::replication::WaitRequest {
        offset,
        wanted: wanted.max(0) as u64,
        timeout_ms: timeout_ms as u64,
    });
}

fn role(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    let server = ctx.server;
    let replication = &server.replication;
    match replication.primary() {
        Some(primary) => {
            let status = replication.link.status.load(Ordering::Relaxed);
            let state: &[u8] = match status {
                link::DOWN => b"connect",
                link::CONNECTING => b"connecting",
                link::TRANSFER => b"sync",
                _ => b"connected",
            };
            let offset = if status == link::CONNECTED {
                replication.link.processed.load(Ordering::Relaxed) as i64
            } else {
                -1
            };
            ctx.reply.array(5);
            ctx.reply.bulk(b"slave");
            ctx.reply.bulk(primary.host.as_bytes());
            ctx.reply.integer(i64::from(primary.port));
            ctx.reply.bulk(state);
            ctx.reply.integer(offset);
        }
        None => {
            let replicas: Vec<_> = replication
                .attached
                .lock()
                .iter()
                .filter(|replica| replica.state.load(Ordering::Relaxed) == state::ONLINE)
                .cloned()
                .collect();
            ctx.reply.array(3);
            ctx.reply.bulk(b"master");
            ctx.reply.integer(server.persistence.feed.end() as i64);
            ctx.reply.array(replicas.len());
            for replica in replicas {
                ctx.reply.array(3);
                ctx.reply.bulk(replica.ip.as_bytes());
                ctx.reply.bulk(
                    replica
                        .listening_port
                        .load(Ordering::Relaxed)
                        .to_string()
                        .as_bytes(),
                );
                ctx.reply.bulk(
                    replica
                        .ack_offset
                        .load(Ordering::Relaxed)
                        .to_string()
                        .as_bytes(),
                );
            }
        }
    }
}

fn failover(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(server) = ctx.server.arc() else {
        ctx.reply.error(b"ERR the server is shutting down");
        return;
    };
    if args.len() == 2 && is(&args[1], "ABORT") {
        if crate::replication::failover::abort(&server, "Failover manually aborted") {
            ctx.reply.ok();
        } else {
            ctx.reply.error(b"ERR No failover in progress.");
        }
        return;
    }
    let mut timeout_ms = 0i64;
    let mut force = false;
    let mut target = None;
    let mut at = 1;
    while at < args.len() {
        let arg = &args[at];
        if is(arg, "TIMEOUT") && at + 1 < args.len() && timeout_ms == 0 {
            let Some(ms) = parse_i64(&args[at + 1]) else {
                ctx.reply.error(err::NOT_INTEGER);
                return;
            };
            if ms <= 0 {
                ctx.reply
                    .error(b"ERR FAILOVER timeout must be greater than 0");
                return;
            }
            timeout_ms = ms;
            at += 2;
        } else if is(arg, "TO") && at + 2 < args.len() && target.is_none() {
            let Some(port) = parse_i64(&args[at + 2]) else {
                ctx.reply.error(err::NOT_INTEGER);
                return;
            };
            target = Some(PrimaryAddr {
                host: String::from_utf8_lossy(&args[at + 1]).into_owned(),
                port: port.clamp(0, 65535) as u16,
            });
            at += 3;
        } else if is(arg, "FORCE") && !force {
            force = true;
            at += 1;
        } else {
            ctx.reply.error(err::SYNTAX);
            return;
        }
    }
    let replication = &ctx.server.replication;
    if replication.failover.lock().stage != Stage::None {
        ctx.reply.error(b"ERR FAILOVER already in progress.");
        return;
    }
    if replication.is_replica() {
        ctx.reply
            .error(b"ERR FAILOVER is not valid when server is a replica.");
        return;
    }
    let replicas = replication.attached.lock().clone();
    if replicas.is_empty() {
        ctx.reply
            .error(b"ERR FAILOVER requires connected replicas.");
        return;
    }
    if force && (timeout_ms == 0 || target.is_none()) {
        ctx.reply.error(
            b"ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
        );
        return;
    }
    if let Some(target) = &target {
        let found = replicas.iter().find(|replica| {
            replica.ip == target.host
                && replica.listening_port.load(Ordering::Relaxed) == target.port
        });
        match found {
            None => {
                ctx.reply
                    .error(b"ERR FAILOVER target HOST and PORT is not a replica.");
                return;
            }
            Some(replica) if replica.state.load(Ordering::Relaxed) != state::ONLINE => {
                ctx.reply
                    .error(b"ERR FAILOVER target replica is not online.");
                return;
            }
            Some(_) => {}
        }
    }
    crate::replication::failover::begin(&server, target, timeout_ms as u64, force);
    ctx.reply.ok();
}
