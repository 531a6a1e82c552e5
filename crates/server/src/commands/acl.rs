//! ACL: users and their rules (the rules themselves live in `crate::acl`). SETUSER,
//! GETUSER, DELUSER, USERS, LIST, WHOAMI, CAT, GENPASS, DRYRUN, LOG and HELP, with Redis
//! 7.0's replies. Not yet: an ACL file (LOAD and SAVE answer an error), selectors.

use bytes::Bytes;

use super::client::{help_reply, subcommand_syntax_error};
use super::{parse_i64, Ctx};
use crate::spec::{acl, flag, Arg, CommandSpec, Group};
use crate::table::table;

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "acl",
    group: Group::Server,
    summary: "Groups the subcommands that manage users and their permissions.",
    since: "6.0.0",
    complexity: "Depends on subcommand.",
    arity: -2,
    subcommands: ACL_SUBCOMMANDS,
    ..CommandSpec::BASE
}];

const ADMIN_FLAGS: u32 = flag::ADMIN | flag::NOSCRIPT | flag::LOADING | flag::STALE;
const USER_FLAGS: u32 = flag::NOSCRIPT | flag::LOADING | flag::STALE;

const SUBCOMMAND_BASE: CommandSpec = CommandSpec {
    group: Group::Server,
    since: "6.0.0",
    complexity: "O(1)",
    flags: ADMIN_FLAGS,
    ..CommandSpec::BASE
};

static ACL_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "cat",
        summary: "Lists the ACL categories, or the commands in one of them.",
        complexity: "O(1) since the categories and commands are a fixed set.",
        arity: -2,
        flags: USER_FLAGS,
        arguments: &[Arg::string("categoryname").optional()],
        handler: Some(acl_cat),
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "deluser",
        summary: "Deletes users and closes their connections; answers how many existed.",
        complexity: "O(1) amortized time considering the typical user.",
        arity: -3,
        arguments: &[Arg::string("username").multiple()],
        handler: Some(acl_deluser),
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "dryrun",
        summary: "Tells whether a user could run a command, without running it.",
        since: "7.0.0",
        complexity: "O(1).",
        arity: -4,
        arguments: &[
            Arg::string("username"),
            Arg::string("command"),
            Arg::string("arg").optional().multiple(),
        ],
        handler: Some(acl_dryrun),
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "genpass",
        summary: "Answers a random password, as hex, of 256 bits or the bits asked for.",
        arity: -2,
        flags: USER_FLAGS,
        arguments: &[Arg::integer("bits").optional()],
        handler: Some(acl_genpass),
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "getuser",
        summary: "Describes one user's flags, passwords and permissions.",
        complexity: "O(N). Where N is the number of password, command and pattern rules that the user has.",
        arity: 3,
        arguments: &[Arg::string("username")],
        history: &[
            ("6.2.0", "Added Pub/Sub channel patterns."),
            ("7.0.0", "Added selectors and changed the format of key and channel patterns from a list to their rule representation."),
        ],
        handler: Some(acl_getuser),
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "help",
        summary: "Lists the ACL subcommands with a short description of each.",
        arity: 2,
        flags: flag::LOADING | flag::STALE,
        handler: Some(acl_help),
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "list",
        summary: "Lists every user as the rules that would recreate it.",
        complexity: "O(N). Where N is the number of configured users.",
        arity: 2,
        handler: Some(acl_list),
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "load",
        summary: "Reloads the users from the ACL file.",
        complexity: "O(N). Where N is the number of configured users.",
        arity: 2,
        handler: Some(acl_load),
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "log",
        summary: "Lists the latest refusals of the ACL rules and failed logins, or clears them.",
        complexity: "O(N) with N the number of entries shown.",
        arity: -2,
        arguments: &[Arg::oneof(
            "operation",
            &[Arg::integer("count"), Arg::token("reset", "RESET")],
        )
        .optional()],
        handler: Some(acl_log),
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "save",
        summary: "Writes the users to the ACL file.",
        complexity: "O(N). Where N is the number of configured users.",
        arity: 2,
        handler: Some(acl_save),
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "setuser",
        summary: "Creates a user or changes its rules; all the rules apply, or none.",
        complexity: "O(N). Where N is the number of rules provided.",
        arity: -3,
        arguments: &[
            Arg::string("username"),
            Arg::string("rule").optional().multiple(),
        ],
        history: &[
            ("6.2.0", "Added Pub/Sub channel patterns."),
            ("7.0.0", "Added selectors and key based permissions."),
        ],
        handler: Some(acl_setuser),
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "users",
        summary: "Lists the user names.",
        complexity: "O(N). Where N is the number of configured users.",
        arity: 2,
        handler: Some(acl_users),
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "whoami",
        summary: "Answers the name of the user this connection runs as.",
        arity: 2,
        flags: USER_FLAGS,
        handler: Some(acl_whoami),
        ..SUBCOMMAND_BASE
    },
];

fn name_of(bytes: &Bytes) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn acl_setuser(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if args[2]
        .iter()
        .any(|&b| b == 0 || b.is_ascii_whitespace() || b == 0x0b)
    {
        ctx.reply
            .error(b"ERR Usernames can't contain spaces or null characters");
        return;
    }
    let all_channels_by_default = ctx.server.config.get_i64("acl-pubsub-default") == 1;
    match ctx
        .server
        .acl
        .set_user(&name_of(&args[2]), &args[3..], all_channels_by_default)
    {
        Ok(user) => {
            // Subscribers of this user that lost a channel are closed, as in Redis.
            crate::pubsub::close_revoked_subscribers(ctx.server, &user);
            ctx.reply.ok()
        }
        Err(message) => ctx.reply.error(message.as_bytes()),
    }
}

fn acl_getuser(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(user) = ctx.server.acl.get(&name_of(&args[2])) else {
        ctx.reply.null();
        return;
    };
    let rules = user.rules();
    let reply = &mut *ctx.reply;
    reply.map(6);
    reply.bulk(b"flags");
    let flags = rules.flags();
    reply.array(flags.len());
    for flag in flags {
        reply.bulk(flag.as_bytes());
    }
    reply.bulk(b"passwords");
    reply.array(rules.passwords.len());
    for hash in &rules.passwords {
        reply.bulk(crate::acl::hex(hash).as_bytes());
    }
    describe_selector(reply, &rules.root);
    reply.bulk(b"selectors");
    reply.array(rules.selectors.len());
    for selector in &rules.selectors {
        reply.map(3);
        describe_selector(reply, selector);
    }
}

/// A selector's commands, keys and channels, as three pairs of ACL GETUSER's map.
fn describe_selector(reply: &mut latch_protocol::reply::Reply, selector: &crate::acl::Selector) {
    reply.bulk(b"commands");
    reply.bulk(selector.describe_commands().as_bytes());
    reply.bulk(b"keys");
    reply.bulk(selector.describe_keys().as_bytes());
    reply.bulk(b"channels");
    reply.bulk(selector.describe_channels().as_bytes());
}

fn acl_deluser(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let names: Vec<String> = args[2..].iter().map(name_of).collect();
    if names.iter().any(|name| name == "default") {
        ctx.reply.error(b"ERR The 'default' user cannot be removed");
        return;
    }
    let removed = ctx.server.acl.delete(&names);
    close_clients_of(ctx, &removed);
    ctx.reply.integer(removed.len() as i64);
}

/// Closes the connections logged in as users that no longer exist, as Redis does (this
/// one after its reply).
fn close_clients_of(ctx: &mut Ctx<'_, '_>, removed: &[std::sync::Arc<crate::acl::User>]) {
    if removed.is_empty() {
        return;
    }
    for client in ctx.server.clients.list() {
        let user = client.user.lock().clone();
        if removed.iter().any(|r| std::sync::Arc::ptr_eq(r, &user)) {
            if client.id == ctx.client.id {
                ctx.client.close_after_reply = true;
            } else {
                client.kill();
            }
        }
    }
}

fn acl_users(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    let names = ctx.server.acl.names();
    ctx.reply.array(names.len());
    for name in names {
        ctx.reply.bulk(name.as_bytes());
    }
}

fn acl_list(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    let users = ctx.server.acl.users();
    ctx.reply.array(users.len());
    for user in users {
        let line = format!("user {} {}", user.name, user.rules().describe());
        ctx.reply.bulk(line.as_bytes());
    }
}

fn acl_whoami(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    let name = ctx.client.user.name.clone();
    ctx.reply.bulk(name.as_bytes());
}

fn acl_cat(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if args.len() > 3 {
        subcommand_syntax_error(ctx, args);
        return;
    }
    let Some(category) = args.get(2) else {
        ctx.reply.array(acl::NAMES.len());
        for (_, name) in acl::NAMES {
            ctx.reply.bulk(&name.as_bytes()[1..]);
        }
        return;
    };
    let lower = category.to_ascii_lowercase();
    let bits = match crate::acl::category_bits(&lower) {
        Some(bits) if bits != u32::MAX => bits,
        _ => {
            let message = format!("ERR Unknown category '{}'", name_of(category));
            ctx.reply.error(message.as_bytes());
            return;
        }
    };
    let names: Vec<&str> = table()
        .all()
        .iter()
        .filter(|command| {
            command.spec.subcommands.is_empty() && command.spec.acl_categories() & bits != 0
        })
        .map(|command| command.full_name.as_str())
        .collect();
    ctx.reply.array(names.len());
    for name in names {
        ctx.reply.bulk(name.as_bytes());
    }
}

fn acl_genpass(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let bits = match args.get(2) {
        None => 256,
        Some(text) => match parse_i64(text) {
            Some(bits) if (1..=4096).contains(&bits) => bits as usize,
            _ => {
                ctx.reply
                    .error(b"ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096");
                return;
            }
        },
    };
    let password = crate::server::random_hex(bits.div_ceil(4));
    ctx.reply.bulk(password.as_bytes());
}

/// The `aclfile` in use, or Redis' error without one.
fn acl_file_path(ctx: &mut Ctx<'_, '_>) -> Option<String> {
    let path = ctx.server.config.get("aclfile").unwrap_or_default();
    if path.is_empty() {
        ctx.reply.error(b"ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.");
        return None;
    }
    Some(path)
}

/// ACL LOAD: the file's users replace all others, or nothing changes.
fn acl_load(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    let Some(path) = acl_file_path(ctx) else {
        return;
    };
    let all_channels_by_default = ctx.server.config.get_i64("acl-pubsub-default") == 1;
    match crate::acl::file::read(&path, all_channels_by_default) {
        Ok(users) => {
            let removed = ctx.server.acl.replace_all(users);
            close_clients_of(ctx, &removed);
            crate::pubsub::close_revoked_subscribers(ctx.server, &ctx.server.acl.default_user());
            ctx.reply.ok();
        }
        Err(errors) => ctx.reply.error(format!("ERR {errors}").as_bytes()),
    }
}

/// ACL SAVE: every user to the file.
fn acl_save(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    let Some(path) = acl_file_path(ctx) else {
        return;
    };
    match crate::acl::file::save(&ctx.server.acl, &path) {
        Ok(()) => ctx.reply.ok(),
        Err(error) => {
            tracing::warn!("Writing ACL file for ACL SAVE: {error}");
            ctx.reply.error(b"ERR There was an error trying to save the ACLs. Please check the server logs for more information");
        }
    }
}

fn acl_log(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if args.len() > 3 {
        subcommand_syntax_error(ctx, args);
        return;
    }
    let count = match args.get(2) {
        None => 10,
        Some(arg) if arg.eq_ignore_ascii_case(b"RESET") => {
            ctx.server.acl_log.clear();
            ctx.reply.ok();
            return;
        }
        Some(arg) => match parse_i64(arg) {
            Some(count) => count.max(0) as usize,
            None => {
                ctx.reply
                    .error(b"ERR value is not an integer or out of range");
                return;
            }
        },
    };
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let entries = ctx.server.acl_log.newest(count);
    ctx.reply.array(entries.len());
    for entry in &entries {
        let fields = entry.fields(now_ms);
        ctx.reply.map(fields.len());
        for (name, value) in fields {
            ctx.reply.bulk(name.as_bytes());
            match value {
                crate::acl_log::Field::Int(n) => ctx.reply.integer(n),
                crate::acl_log::Field::Double(d) => ctx.reply.double(d),
                crate::acl_log::Field::Text(text) => ctx.reply.bulk(text),
            }
        }
    }
}

fn acl_dryrun(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(user) = ctx.server.acl.get(&name_of(&args[2])) else {
        let message = format!("ERR User '{}' not found", name_of(&args[2]));
        ctx.reply.error(message.as_bytes());
        return;
    };
    let command_args = &args[3..];
    let table = table();
    let Some(top) = table.lookup(&command_args[0]) else {
        let message = format!("ERR Command '{}' not found", name_of(&command_args[0]));
        ctx.reply.error(message.as_bytes());
        return;
    };
    let command = match command_args.get(1) {
        Some(sub) if !top.spec.subcommands.is_empty() => table.subcommand(top, sub).unwrap_or(top),
        _ => top,
    };
    if !command.spec.arity_ok(command_args.len()) {
        let message = format!(
            "ERR wrong number of arguments for '{}' command",
            command.full_name
        );
        ctx.reply.error(message.as_bytes());
        return;
    }
    let text = match user.denial(command, command_args) {
        None => {
            ctx.reply.ok();
            return;
        }
        Some((crate::acl::Denied::Command, _)) => format!(
            "This user has no permissions to run the '{}' command",
            command.full_name
        ),
        Some((crate::acl::Denied::Channel, at)) => format!(
            "This user has no permissions to access the '{}' channel",
            name_of(&command_args[at])
        ),
        Some((crate::acl::Denied::Key, at)) => format!(
            "This user has no permissions to access the '{}' key",
            name_of(&command_args[at])
        ),
    };
    ctx.reply.bulk(text.as_bytes());
}

fn acl_help(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    help_reply(
        ctx.reply,
        "acl",
        &[
            "CAT [<category>]",
            "    List the ACL categories, or the commands in one category.",
            "DELUSER <username> [<username> ...]",
            "    Delete users and close their connections.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Tell whether the user could run the command.",
            "GETUSER <username>",
            "    Describe one user.",
            "GENPASS [<bits>]",
            "    Answer a random password (256 bits unless told otherwise).",
            "LIST",
            "    Every user, as the rules that recreate it.",
            "LOG [<count> | RESET]",
            "    The latest refusals and failed logins (10 unless told), or clear them.",
            "SETUSER <username> <rule> [<rule> ...]",
            "    Create or change a user; all rules apply or none.",
            "USERS",
            "    The user names.",
            "WHOAMI",
            "    The user this connection runs as.",
        ],
    );
}
