//! COMMAND: the command table described to clients (INFO, DOCS, COUNT, LIST, GETKEYS...),
//! generated from the `CommandSpec` entries, in Redis 7's reply shapes.

use bytes::Bytes;
use latch_keyspace::glob::glob_match;
use latch_protocol::Reply;

use super::client::help_reply;
use super::{err, is, Ctx};
use crate::spec::{
    acl, flag, key_positions, keyflag, Arg, ArgType, BeginSearch, CommandSpec, FindKeys, Group,
    KeySpec,
};
use crate::table::{table, Command};

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "command",
    group: Group::Server,
    summary: "Describes the commands this server knows (all of them without a subcommand).",
    since: "2.8.13",
    complexity: "O(N) where N is the total number of Redis commands",
    arity: -1,
    flags: flag::LOADING | flag::STALE,
    acl: acl::CONNECTION,
    tips: &["nondeterministic_output_order"],
    subcommands: COMMAND_SUBCOMMANDS,
    handler: Some(command_all),
    ..CommandSpec::BASE
}];

static COMMAND_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "count",
        group: Group::Server,
        summary: "Returns how many commands the server knows.",
        since: "2.8.13",
        complexity: "O(1)",
        arity: 2,
        flags: flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        handler: Some(command_count),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "docs",
        group: Group::Server,
        summary: "Returns documentation (summary, arguments, history...) for some or all commands.",
        since: "7.0.0",
        complexity: "O(N) where N is the number of commands to look up",
        arity: -2,
        flags: flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        arguments: &[
            Arg::string("command-name").optional().multiple(),
        ],
        tips: &["nondeterministic_output_order"],
        handler: Some(command_docs),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "getkeys",
        group: Group::Server,
        summary: "Shows which arguments of a complete command are key names.",
        since: "2.8.13",
        complexity: "O(N) where N is the number of arguments to the command",
        arity: -4,
        flags: flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        handler: Some(command_getkeys),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "getkeysandflags",
        group: Group::Server,
        summary: "Shows which arguments of a complete command are key names, with how each key is accessed.",
        since: "7.0.0",
        complexity: "O(N) where N is the number of arguments to the command",
        arity: -4,
        flags: flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        handler: Some(command_getkeysandflags),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "help",
        group: Group::Server,
        summary: "Lists the COMMAND subcommands with a short description of each.",
        since: "5.0.0",
        complexity: "O(1)",
        arity: 2,
        flags: flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        handler: Some(command_help),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "info",
        group: Group::Server,
        summary: "Returns the table entries (arity, flags, key positions...) of some or all commands.",
        since: "2.8.13",
        complexity: "O(N) where N is the number of commands to look up",
        arity: -2,
        flags: flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        arguments: &[
            Arg::string("command-name").optional().multiple(),
        ],
        history: &[("7.0.0", "Calling it without command names lists every command.")],
        tips: &["nondeterministic_output_order"],
        handler: Some(command_info),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "list",
        group: Group::Server,
        summary: "Lists command names, optionally only those matching a filter.",
        since: "7.0.0",
        complexity: "O(N) where N is the total number of Redis commands",
        arity: -2,
        flags: flag::LOADING | flag::STALE,
        acl: acl::CONNECTION,
        arguments: &[
            Arg::oneof("filterby", &[
                Arg::string("module-name").with_token("MODULE"),
                Arg::string("category").with_token("ACLCAT"),
                Arg::new("pattern", ArgType::Pattern).with_token("PATTERN"),
            ]).with_token("FILTERBY").optional(),
        ],
        tips: &["nondeterministic_output_order"],
        handler: Some(command_list),
        ..CommandSpec::BASE
    },
];

fn command_help(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    help_reply(
        ctx.reply,
        "command",
        &[
            "(no subcommand)",
            "    Describe every command this server knows.",
            "COUNT",
            "    Reply with the number of commands.",
            "LIST [FILTERBY (MODULE <name>|ACLCAT <category>|PATTERN <pattern>)]",
            "    Reply with the names of the commands and subcommands, optionally filtered.",
            "INFO [<command-name> ...]",
            "    Describe the named commands (all of them when none is named).",
            "DOCS [<command-name> ...]",
            "    Reply with the documentation of the named commands (all of them when none",
            "    is named).",
            "GETKEYS <full-command>",
            "    Reply with the key names in a complete command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Reply with the key names in a complete command and how each is accessed.",
        ],
    );
}

/// `COMMAND` without a subcommand: every command's INFO entry.
pub fn command_all(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    reply_all_info(ctx.reply);
}

fn reply_all_info(reply: &mut Reply) {
    let table = table();
    let top: Vec<&Command> = table.top_level().collect();
    reply.array(top.len());
    for command in top {
        reply_info(reply, command);
    }
}

fn command_count(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    ctx.reply.integer(table().top_level().count() as i64);
}

fn command_info(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if args.len() == 2 {
        reply_all_info(ctx.reply);
        return;
    }
    let table = table();
    ctx.reply.array(args.len() - 2);
    for name in &args[2..] {
        match table.by_full_name(name) {
            Some(command) => reply_info(ctx.reply, command),
            None => ctx.reply.null(),
        }
    }
}

fn command_docs(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let table = table();
    let found: Vec<&Command> = if args.len() == 2 {
        table.top_level().collect()
    } else {
        args[2..]
            .iter()
            .filter_map(|name| table.by_full_name(name))
            .collect()
    };
    ctx.reply.map(found.len());
    for command in found {
        ctx.reply.bulk(command.full_name.as_bytes());
        reply_docs(ctx.reply, command);
    }
}

fn command_list(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    enum Filter<'a> {
        None,
        Module,
        AclCategory(u32),
        Pattern(&'a [u8]),
    }
    let mut filter = Filter::None;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        if !(is(&args[i], "FILTERBY") && more == 2) {
            ctx.reply.error(err::SYNTAX);
            return;
        }
        let kind = &args[i + 1];
        let value = &args[i + 2];
        filter = if is(kind, "MODULE") {
            Filter::Module
        } else if is(kind, "ACLCAT") {
            let category = acl::NAMES
                .iter()
                .find(|(_, name)| name.as_bytes()[1..].eq_ignore_ascii_case(value))
                .map(|(bit, _)| *bit)
                .unwrap_or(0);
            Filter::AclCategory(category)
        } else if is(kind, "PATTERN") {
            Filter::Pattern(value)
        } else {
            ctx.reply.error(err::SYNTAX);
            return;
        };
        i += 3;
    }
    let names: Vec<&str> = table()
        .all()
        .iter()
        .filter(|command| match filter {
            Filter::None => true,
            // There are no modules.
            Filter::Module => false,
            Filter::AclCategory(bit) => bit != 0 && command.spec.acl_categories() & bit != 0,
            Filter::Pattern(pattern) => glob_match(pattern, command.full_name.as_bytes(), true),
        })
        .map(|command| command.full_name.as_str())
        .collect();
    ctx.reply.array(names.len());
    for name in names {
        ctx.reply.bulk(name.as_bytes());
    }
}

fn command_getkeys(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    getkeys(ctx, args, false);
}

fn command_getkeysandflags(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    getkeys(ctx, args, true);
}

/// Finds the command a `COMMAND GETKEYS` names: the subcommand of a container when one is
/// given, else the command itself.
fn lookup_for_getkeys(args: &[Bytes]) -> Option<&'static Command> {
    let table = table();
    let command = table.lookup_called(&args[0])?;
    if command.spec.subcommands.is_empty() || args.len() == 1 {
        Some(command)
    } else {
        table.subcommand(command, &args[1])
    }
}

fn getkeys(ctx: &mut Ctx<'_, '_>, args: &[Bytes], with_flags: bool) {
    let target = &args[2..];
    let Some(command) = lookup_for_getkeys(target) else {
        ctx.reply.error(b"ERR Invalid command specified");
        return;
    };
    let spec = command.spec;
    if !spec
        .key_specs
        .iter()
        .any(|ks| ks.flags & keyflag::NOT_KEY == 0)
    {
        ctx.reply.error(b"ERR The command has no key arguments");
        return;
    }
    if !spec.arity_ok(target.len()) {
        ctx.reply
            .error(b"ERR Invalid number of arguments specified for command");
        return;
    }
    // SORT's BY/GET/STORE keys and MIGRATE's KEYS sit where only the command's own parser
    // finds them for sure ("unknown" or incomplete key specs); like Redis' getkeys
    // procedures, that parser answers instead of the specs.
    let name = command.full_name.as_str();
    if let Some(keys) = crate::commands::parsed_keys(name, target) {
        reply_keys(ctx.reply, target, &keys, with_flags);
        return;
    }
    // One key spec at a time, so every key carries its own spec's flags.
    let mut keys: Vec<(usize, u16)> = Vec::new();
    let mut positions = Vec::new();
    let mut invalid = false;
    for key_spec in spec.key_specs {
        if key_spec.flags & keyflag::NOT_KEY != 0 {
            continue;
        }
        let single = CommandSpec {
            key_specs: std::slice::from_ref(key_spec),
            ..*spec
        };
        if key_positions(&single, target, &mut positions).is_err() {
            invalid = true;
            break;
        }
        // A key found through an incomplete spec is still reported with its access flags.
        let reported = key_spec.flags & !keyflag::INCOMPLETE;
        keys.extend(positions.iter().map(|&p| (p, reported)));
    }
    if !invalid
        && spec
            .key_specs
            .iter()
            .any(|ks| ks.flags & keyflag::VARIABLE_FLAGS != 0)
    {
        if let (Some(flags), [(_, _)]) = (variable_key_flags(command, target), keys.as_slice()) {
            keys[0].1 = flags;
        }
    }
    if invalid || keys.is_empty() {
        if spec.has_flag(flag::NO_MANDATORY_KEYS) {
            ctx.reply.array(0);
        } else {
            ctx.reply
                .error(b"ERR Invalid arguments specified for command");
        }
        return;
    }
    reply_keys(ctx.reply, target, &keys, with_flags);
}

/// The answer of COMMAND GETKEYS (names) or GETKEYSANDFLAGS (names with access flags).
fn reply_keys(reply: &mut Reply, target: &[Bytes], keys: &[(usize, u16)], with_flags: bool) {
    reply.array(keys.len());
    for &(position, flags) in keys {
        if with_flags {
            reply.array(2);
            reply.bulk(&target[position]);
            reply_key_flags(reply, flags);
        } else {
            reply.bulk(&target[position]);
        }
    }
}

/// The real access flags of a command whose key spec says they depend on the arguments
/// (`variable_flags`), as Redis' own key extraction for SET and BITFIELD decides them.
fn variable_key_flags(command: &Command, args: &[Bytes]) -> Option<u16> {
    const READ_WRITE: u16 = keyflag::RW | keyflag::ACCESS | keyflag::UPDATE;
    match command.full_name.as_str() {
        // SET ... GET reads the old value; plain SET overwrites.
        "set" => Some(if args.iter().skip(3).any(|a| is(a, "GET")) {
            READ_WRITE
        } else {
            keyflag::OW | keyflag::UPDATE
        }),
        // BITFIELD with only GET (and OVERFLOW) operations is a read.
        "bitfield" => {
            let mut i = 2;
            let mut read_only = true;
            while i < args.len() {
                let remaining = args.len() - i - 1;
                if is(&args[i], "GET") && remaining >= 2 {
                    i += 3;
                } else if is(&args[i], "OVERFLOW") && remaining >= 1 {
                    i += 2;
                } else {
                    read_only = false;
                    break;
                }
            }
            Some(if read_only {
                keyflag::RO | keyflag::ACCESS
            } else {
                READ_WRITE
            })
        }
        _ => None,
    }
}

/// The legacy (first key, last key, step) triple and whether the command has keys the
/// triple cannot describe ("movablekeys"), derived from the key specs as Redis does: only
/// consecutive index+range specs with step 1 can be glued into one range.
fn legacy_range(spec: &CommandSpec) -> ((i64, i64, i64), bool) {
    let mut movable = false;
    match spec.key_specs {
        [] => return ((0, 0, 0), false),
        [KeySpec {
            begin: BeginSearch::Index(first),
            find: FindKeys::Range {
                last_key, key_step, ..
            },
            flags,
            ..
        }] => {
            let first = *first as i64;
            let last = if *last_key >= 0 {
                first + *last_key as i64
            } else {
                *last_key as i64
            };
            return (
                (first, last, *key_step as i64),
                flags & keyflag::INCOMPLETE != 0,
            );
        }
        _ => {}
    }
    let mut first_key = i64::MAX;
    // Compared as unsigned so that a negative (relative to the end) last key wins.
    let mut last_key: i64 = 0;
    let mut previous_last = 0i64;
    for key_spec in spec.key_specs {
        let (
            BeginSearch::Index(position),
            FindKeys::Range {
                last_key: relative_last,
                key_step,
                ..
            },
        ) = (key_spec.begin, key_spec.find)
        else {
            movable = true;
            continue;
        };
        let position = position as i64;
        if key_step != 1 || (previous_last != 0 && previous_last != position - 1) {
            movable = true;
            continue;
        }
        if key_spec.flags & keyflag::INCOMPLETE != 0 {
            movable = true;
        }
        first_key = first_key.min(position);
        let absolute_last = if relative_last >= 0 {
            relative_last as i64 + position
        } else {
            relative_last as i64
        };
        if (absolute_last as u64) > (last_key as u64) {
            last_key = absolute_last;
        }
        previous_last = last_key;
    }
    if first_key == i64::MAX {
        return ((0, 0, 0), true);
    }
    ((first_key, last_key, 1), movable)
}

fn reply_flag_set<T: Copy + Into<u64>>(reply: &mut Reply, bits: T, names: &[(T, &str)]) {
    let bits: u64 = bits.into();
    let shown: Vec<&str> = names
        .iter()
        .filter(|(bit, _)| bits & (*bit).into() != 0)
        .map(|(_, name)| *name)
        .collect();
    reply.set(shown.len());
    for name in shown {
        reply.simple(name.as_bytes());
    }
}

fn reply_key_flags(reply: &mut Reply, flags: u16) {
    reply_flag_set(reply, flags, keyflag::NAMES);
}

/// One COMMAND INFO entry.
fn reply_info(reply: &mut Reply, command: &Command) {
    let spec = command.spec;
    let ((first, last, step), movable) = legacy_range(spec);
    reply.array(10);
    reply.bulk(command.full_name.as_bytes());
    reply.integer(spec.arity as i64);
    let mut flags = spec.flags;
    if movable {
        flags |= flag::MOVABLE_KEYS;
    }
    // may_replicate and protected are internal, as in Redis.
    let shown: Vec<&str> = flag::NAMES
        .iter()
        .filter(|(bit, _)| {
            flags & bit != 0 && *bit != flag::MAY_REPLICATE && *bit != flag::PROTECTED
        })
        .map(|(_, name)| *name)
        .collect();
    reply.set(shown.len());
    for name in shown {
        reply.simple(name.as_bytes());
    }
    reply.integer(first);
    reply.integer(last);
    reply.integer(step);
    reply_flag_set(reply, spec.acl_categories(), acl::NAMES);
    reply.set(spec.tips.len());
    for tip in spec.tips {
        reply.bulk(tip.as_bytes());
    }
    reply.set(spec.key_specs.len());
    for key_spec in spec.key_specs {
        reply_key_spec(reply, key_spec);
    }
    if spec.subcommands.is_empty() {
        reply.set(0);
    } else {
        let table = table();
        let subs: Vec<&Command> = table.subcommands_of(command).collect();
        reply.array(subs.len());
        for sub in subs {
            reply_info(reply, sub);
        }
    }
}

fn reply_key_spec(reply: &mut Reply, key_spec: &KeySpec) {
    reply.map(3 + key_spec.notes.is_some() as usize);
    if let Some(notes) = key_spec.notes {
        reply.bulk(b"notes");
        reply.bulk(notes.as_bytes());
    }
    reply.bulk(b"flags");
    reply_key_flags(reply, key_spec.flags);
    reply.bulk(b"begin_search");
    reply.map(2);
    reply.bulk(b"type");
    match key_spec.begin {
        BeginSearch::Index(index) => {
            reply.bulk(b"index");
            reply.bulk(b"spec");
            reply.map(1);
            reply.bulk(b"index");
            reply.integer(index as i64);
        }
        BeginSearch::Keyword {
            keyword,
            start_from,
        } => {
            reply.bulk(b"keyword");
            reply.bulk(b"spec");
            reply.map(2);
            reply.bulk(b"keyword");
            reply.bulk(keyword.as_bytes());
            reply.bulk(b"startfrom");
            reply.integer(start_from as i64);
        }
        BeginSearch::Unknown => {
            reply.bulk(b"unknown");
            reply.bulk(b"spec");
            reply.map(0);
        }
    }
    reply.bulk(b"find_keys");
    reply.map(2);
    reply.bulk(b"type");
    match key_spec.find {
        FindKeys::Range {
            last_key,
            key_step,
            limit,
        } => {
            reply.bulk(b"range");
            reply.bulk(b"spec");
            reply.map(3);
            reply.bulk(b"lastkey");
            reply.integer(last_key as i64);
            reply.bulk(b"keystep");
            reply.integer(key_step as i64);
            reply.bulk(b"limit");
            reply.integer(limit as i64);
        }
        FindKeys::Keynum {
            key_num_index,
            first_key,
            key_step,
        } => {
            reply.bulk(b"keynum");
            reply.bulk(b"spec");
            reply.map(3);
            reply.bulk(b"keynumidx");
            reply.integer(key_num_index as i64);
            reply.bulk(b"firstkey");
            reply.integer(first_key as i64);
            reply.bulk(b"keystep");
            reply.integer(key_step as i64);
        }
        FindKeys::Unknown => {
            reply.bulk(b"unknown");
            reply.bulk(b"spec");
            reply.map(0);
        }
    }
}

/// One COMMAND DOCS map (without its name).
fn reply_docs(reply: &mut Reply, command: &Command) {
    let spec = command.spec;
    let fields = 3
        + !spec.complexity.is_empty() as usize
        + (spec.doc_flags != 0) as usize
        + spec.deprecated_since.is_some() as usize
        + spec.replaced_by.is_some() as usize
        + !spec.history.is_empty() as usize
        + !spec.arguments.is_empty() as usize
        + !spec.subcommands.is_empty() as usize;
    reply.map(fields);
    reply.bulk(b"summary");
    reply.bulk(spec.summary.as_bytes());
    reply.bulk(b"since");
    reply.bulk(spec.since.as_bytes());
    reply.bulk(b"group");
    reply.bulk(spec.group.name().as_bytes());
    if !spec.complexity.is_empty() {
        reply.bulk(b"complexity");
        reply.bulk(spec.complexity.as_bytes());
    }
    if spec.doc_flags != 0 {
        reply.bulk(b"doc_flags");
        reply_flag_set(
            reply,
            spec.doc_flags,
            &[
                (crate::spec::docflag::DEPRECATED, "deprecated"),
                (crate::spec::docflag::SYSCALL, "syscmd"),
            ],
        );
    }
    if let Some(version) = spec.deprecated_since {
        reply.bulk(b"deprecated_since");
        reply.bulk(version.as_bytes());
    }
    if let Some(replacement) = spec.replaced_by {
        reply.bulk(b"replaced_by");
        reply.bulk(replacement.as_bytes());
    }
    if !spec.history.is_empty() {
        reply.bulk(b"history");
        reply.set(spec.history.len());
        for (version, change) in spec.history {
            reply.array(2);
            reply.bulk(version.as_bytes());
            reply.bulk(change.as_bytes());
        }
    }
    if !spec.arguments.is_empty() {
        reply.bulk(b"arguments");
        reply_arguments(reply, spec.arguments);
    }
    if !spec.subcommands.is_empty() {
        reply.bulk(b"subcommands");
        let table = table();
        let subs: Vec<&Command> = table.subcommands_of(command).collect();
        reply.map(subs.len());
        for sub in subs {
            reply.bulk(sub.full_name.as_bytes());
            reply_docs(reply, sub);
        }
    }
}

fn reply_arguments(reply: &mut Reply, arguments: &[Arg]) {
    reply.array(arguments.len());
    for arg in arguments {
        let nested = matches!(arg.kind, ArgType::Oneof | ArgType::Block);
        let fields = 2
            + arg.key_spec_index.is_some() as usize
            + arg.token.is_some() as usize
            + arg.summary.is_some() as usize
            + arg.since.is_some() as usize
            + arg.deprecated_since.is_some() as usize
            + (arg.flags != 0) as usize
            + nested as usize;
        reply.map(fields);
        reply.bulk(b"name");
        reply.bulk(arg.name.as_bytes());
        reply.bulk(b"type");
        reply.bulk(arg.kind.name().as_bytes());
        if let Some(index) = arg.key_spec_index {
            reply.bulk(b"key_spec_index");
            reply.integer(index as i64);
        }
        if let Some(token) = arg.token {
            reply.bulk(b"token");
            reply.bulk(token.as_bytes());
        }
        if let Some(summary) = arg.summary {
            reply.bulk(b"summary");
            reply.bulk(summary.as_bytes());
        }
        if let Some(since) = arg.since {
            reply.bulk(b"since");
            reply.bulk(since.as_bytes());
        }
        if let Some(version) = arg.deprecated_since {
            reply.bulk(b"deprecated_since");
            reply.bulk(version.as_bytes());
        }
        if arg.flags != 0 {
            reply.bulk(b"flags");
            reply_flag_set(
                reply,
                arg.flags,
                &[
                    (crate::spec::argflag::OPTIONAL, "optional"),
                    (crate::spec::argflag::MULTIPLE, "multiple"),
                    (crate::spec::argflag::MULTIPLE_TOKEN, "multiple_token"),
                ],
            );
        }
        if nested {
            reply.bulk(b"arguments");
            reply_arguments(reply, arg.children);
        }
    }
}
