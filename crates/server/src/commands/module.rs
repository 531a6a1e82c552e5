//! MODULE: Latch loads no Redis modules (they are C libraries written against redis-server's
//! own structures), so LIST answers an empty list, and LOAD, LOADEX and UNLOAD, behind
//! `enable-module-command` as in Redis, fail as Redis' do when a library cannot be loaded
//! or named module is not loaded.

use bytes::Bytes;

use super::client::help_reply;
use super::Ctx;
use crate::spec::{acl, flag, Arg, CommandSpec, Group};

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "module",
    group: Group::Server,
    summary: "A container for module commands.",
    since: "4.0.0",
    complexity: "Depends on subcommand.",
    arity: -2,
    subcommands: SUBCOMMANDS,
    ..CommandSpec::BASE
}];

const LOADING: u32 = flag::NO_ASYNC_LOADING | flag::ADMIN | flag::NOSCRIPT | flag::PROTECTED;

const SUBCOMMAND_BASE: CommandSpec = CommandSpec {
    group: Group::Server,
    complexity: "O(1)",
    acl: acl::ADMIN | acl::DANGEROUS,
    ..CommandSpec::BASE
};

static SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "list",
        summary: "Returns all loaded modules.",
        since: "4.0.0",
        complexity: "O(N) where N is the number of loaded modules.",
        arity: 2,
        flags: flag::ADMIN | flag::NOSCRIPT,
        tips: &["nondeterministic_output_order"],
        handler: Some(module_list),
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "load",
        summary: "Loads a module.",
        since: "4.0.0",
        arity: -3,
        flags: LOADING,
        arguments: &[
            Arg::string("path"),
            Arg::string("arg").optional().multiple(),
        ],
        handler: Some(module_load),
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "loadex",
        summary: "Loads a module using extended parameters.",
        since: "7.0.0",
        arity: -3,
        flags: LOADING,
        arguments: &[
            Arg::string("path"),
            Arg::block("configs", &[Arg::string("name"), Arg::string("value")])
                .with_token("CONFIG")
                .optional()
                .multiple()
                .multiple_token(),
            Arg::block("args", &[Arg::string("arg")])
                .with_token("ARGS")
                .optional()
                .multiple(),
        ],
        handler: Some(module_load),
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "unload",
        summary: "Unloads a module.",
        since: "4.0.0",
        arity: 3,
        flags: LOADING,
        arguments: &[Arg::string("name")],
        handler: Some(module_unload),
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "help",
        summary: "Returns helpful text about the different subcommands.",
        since: "5.0.0",
        arity: 2,
        flags: flag::LOADING | flag::STALE,
        acl: 0,
        handler: Some(module_help),
        ..SUBCOMMAND_BASE
    },
];

fn module_list(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    ctx.reply.array(0);
}

fn module_load(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    tracing::warn!(
        path = %String::from_utf8_lossy(&args[2]),
        "Module {} failed to load: Latch cannot load Redis modules",
        String::from_utf8_lossy(&args[2])
    );
    ctx.reply
        .error(b"ERR Error loading the extension. Please check the server logs.");
}

fn module_unload(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    ctx.reply
        .error(b"ERR Error unloading module: no such module with that name");
}

fn module_help(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    help_reply(
        ctx.reply,
        "module",
        &[
            "LIST",
            "    The loaded modules (Latch loads none: always empty).",
            "LOAD <path> [<arg> ...]",
            "    Would load a module library; Latch cannot, and answers an error.",
            "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
            "    The same, with module configurations.",
            "UNLOAD <name>",
            "    Would unload a module; none is loaded.",
        ],
    );
}
