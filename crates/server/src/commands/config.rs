//! CONFIG: GET, SET, RESETSTAT, REWRITE, HELP. The option table and the rules live in
//! `crate::config`; this file turns arguments into calls and results into replies.

use bytes::Bytes;

use super::client::help_reply;
use super::{err, Ctx};
use crate::spec::{flag, Arg, CommandSpec, Group};

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "config",
    group: Group::Server,
    summary: "Groups the subcommands that read and change the server's configuration.",
    since: "2.0.0",
    complexity: "Depends on subcommand.",
    arity: -2,
    subcommands: CONFIG_SUBCOMMANDS,
    ..CommandSpec::BASE
}];

const CONFIG_FLAGS: u32 = flag::ADMIN | flag::NOSCRIPT | flag::LOADING | flag::STALE;

static CONFIG_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "get",
        group: Group::Server,
        summary:
            "Returns the options matching the given names or glob patterns, with their values.",
        since: "2.0.0",
        complexity: "O(N) when N is the number of configuration parameters provided",
        arity: -3,
        flags: CONFIG_FLAGS,
        history: &[("7.0.0", "Accepts several patterns in one call.")],
        arguments: &[Arg::block("parameter", &[Arg::string("parameter")]).multiple()],
        handler: Some(config_get),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "set",
        group: Group::Server,
        summary: "Changes options at runtime; several at once, all or none.",
        since: "2.0.0",
        complexity: "O(N) when N is the number of configuration parameters provided",
        arity: -4,
        flags: CONFIG_FLAGS,
        history: &[("7.0.0", "Accepts several option/value pairs in one call.")],
        tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
        arguments: &[Arg::block(
            "parameter_value",
            &[Arg::string("parameter"), Arg::string("value")],
        )
        .multiple()],
        handler: Some(config_set),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "resetstat",
        group: Group::Server,
        summary: "Zeroes the statistics INFO reports.",
        since: "2.0.0",
        complexity: "O(1)",
        arity: 2,
        flags: CONFIG_FLAGS,
        handler: Some(config_resetstat),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "rewrite",
        group: Group::Server,
        summary: "Writes the options in force back into the config file the server started with.",
        since: "2.8.0",
        complexity: "O(1)",
        arity: 2,
        flags: CONFIG_FLAGS,
        handler: Some(config_rewrite),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "help",
        group: Group::Server,
        summary: "Lists the CONFIG subcommands and what they do.",
        since: "5.0.0",
        complexity: "O(1)",
        arity: 2,
        flags: flag::LOADING | flag::STALE,
        handler: Some(config_help),
        ..CommandSpec::BASE
    },
];

fn config_get(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let patterns: Vec<&[u8]> = args[2..].iter().map(|a| a.as_ref()).collect();
    let matches = ctx.server.config.get_matching(&patterns);
    ctx.reply.map(matches.len());
    for (name, value) in &matches {
        ctx.reply.bulk(name.as_bytes());
        ctx.reply.bulk(value.as_bytes());
    }
}

fn config_set(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if !args.len().is_multiple_of(2) {
        ctx.reply.error(err::SYNTAX);
        return;
    }
    let pairs: Vec<(&[u8], &[u8])> = args[2..]
        .chunks(2)
        .map(|pair| (pair[0].as_ref(), pair[1].as_ref()))
        .collect();
    let config = &ctx.server.config;
    let protected_allowed = config.protected_configs_allowed(client_is_local(ctx));
    let oom_options = ["oom-score-adj", "oom-score-adj-values"];
    let oom_before: Vec<(&str, String)> = oom_options
        .iter()
        .map(|name| (*name, config.get(name).unwrap_or_default()))
        .collect();
    let listening_before = (config.port(), config.bind());
    // What every named option was, to put back if listening on a new port fails.
    let shown_before: Vec<(Vec<u8>, String)> = pairs
        .iter()
        .filter_map(|(name, _)| {
            let name = String::from_utf8_lossy(name);
            config
                .get(&name)
                .map(|value| (name.as_bytes().to_vec(), value))
        })
        .collect();
    match config.set(&pairs, protected_allowed) {
        Ok(()) => {
            let listening = (config.port(), config.bind());
            if listening != listening_before {
                let server = ctx.server.arc().expect("the server is running");
                if let Err(why) = crate::net::relisten(&server, listening_before.clone(), listening)
                {
                    // As Redis: the options go back to what they were, and the set fails.
                    let back: Vec<(&[u8], &[u8])> = shown_before
                        .iter()
                        .map(|(name, value)| (&name[..], value.as_bytes()))
                        .collect();
                    let _ = config.set(&back, true);
                    let name = pairs
                        .iter()
                        .find(|(name, _)| {
                            name.eq_ignore_ascii_case(b"port") || name.eq_ignore_ascii_case(b"bind")
                        })
                        .map_or("port".into(), |(name, _)| String::from_utf8_lossy(name));
                    let message = format!(
                        "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
                    );
                    ctx.reply.error(message.as_bytes());
                    return;
                }
            }
            let named_oom = pairs.iter().find(|(name, _)| {
                oom_options
                    .iter()
                    .any(|option| name.eq_ignore_ascii_case(option.as_bytes()))
            });
            if let Some((name, _)) = named_oom {
                let replica = ctx.server.replication.primary().is_some();
                if let Err(why) = crate::oom_score::apply(config, replica) {
                    // As Redis: the options go back to what they were, and the set fails.
                    let back: Vec<(&[u8], &[u8])> = oom_before
                        .iter()
                        .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
                        .collect();
                    let _ = config.set(&back, true);
                    let _ = crate::oom_score::apply(config, replica);
                    let message = format!(
                        "ERR CONFIG SET failed (possibly related to argument '{}') - {why}",
                        String::from_utf8_lossy(name)
                    );
                    ctx.reply.error(message.as_bytes());
                    return;
                }
            }
            if pairs
                .iter()
                .any(|(name, _)| name.eq_ignore_ascii_case(b"requirepass"))
            {
                let password = config.requirepass();
                ctx.server.acl.set_default_password(password.as_deref());
            }
            let named = |option: &str| {
                pairs
                    .iter()
                    .any(|(name, _)| name.eq_ignore_ascii_case(option.as_bytes()))
            };
            if named("maxmemory-policy") || named("lfu-log-factor") || named("lfu-decay-time") {
                crate::evict::apply_policy(ctx.server);
            }
            if named("maxmemory-clients") || named("maxmemory") {
                // A lower limit applies at once, as Redis evicts before the next command.
                let limit = crate::net::clients_memory_limit(ctx.server);
                if limit > 0 {
                    ctx.server.clients.evict_over(limit);
                }
            }
            if named("maxmemory") || named("maxmemory-policy") {
                crate::evict::perform(ctx.server);
            }
            if named("notify-keyspace-events") {
                ctx.server
                    .pubsub
                    .set_notify_flags(config.notify_keyspace_events());
            }
            if named("crash-log-enabled") {
                crate::crash::set_enabled(config.get_bool("crash-log-enabled"));
            }
            if named("aof-timestamp-enabled") {
                crate::persistence::aof::set_timestamps(config.get_bool("aof-timestamp-enabled"));
            }
            if named("appendfsync") {
                ctx.server.persistence.set_fsync(&config.appendfsync());
            }
            if named("appendonly") {
                let server = ctx.server;
                if config.appendonly() && ctx.client.in_exec {
                    crate::persistence::aofdir::turn_on_after_transaction(server);
                } else if config.appendonly() {
                    if let Some(server) = server.arc() {
                        crate::persistence::aofdir::turn_on(&server);
                    }
                } else {
                    crate::persistence::aofdir::turn_off(server);
                }
            }
            ctx.reply.ok()
        }
        Err(error) => ctx.reply.error(error.message().as_bytes()),
    }
}

/// Local as Redis counts it: a unix socket, or a loopback address.
fn client_is_local(ctx: &Ctx<'_, '_>) -> bool {
    let shared = &ctx.client.shared;
    shared.unix || shared.addr.starts_with("127.") || shared.addr.starts_with("[::1]:")
}

fn config_resetstat(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    // As Redis: counters and error tallies only; the slow log has its own SLOWLOG RESET.
    ctx.server.stats.reset();
    ctx.server.evictor.reset_stats();
    ctx.reply.ok();
}

fn config_rewrite(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    match ctx.server.rewrite_config(false) {
        Ok(()) => {
            tracing::warn!("CONFIG REWRITE executed with success");
            ctx.reply.ok();
        }
        Err(message) => {
            tracing::warn!("CONFIG REWRITE failed: {message}");
            ctx.reply.error(message.as_bytes());
        }
    }
}

fn config_help(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    help_reply(
        ctx.reply,
        "config",
        &[
            "GET <pattern>",
            "    Reply with every option whose name matches the glob-style <pattern>, and its value.",
            "SET <directive> <value>",
            "    Change the option <directive> to <value>.",
            "RESETSTAT",
            "    Zero the statistics INFO reports.",
            "REWRITE",
            "    Write the options in force back into the config file the server started with.",
        ],
    );
}
