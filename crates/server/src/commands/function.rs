//! FUNCTION: only FLUSH and HELP for now (there are no functions until scripting exists;
//! Redis' test harness flushes them before every test).

use bytes::Bytes;

use super::client::{help_reply, subcommand_syntax_error};
use super::{is, Ctx};
use crate::spec::{acl, flag, Arg, CommandSpec, Group};

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "function",
    group: Group::Scripting,
    summary: "Groups the subcommands that manage server-side function libraries.",
    since: "7.0.0",
    complexity: "Depends on subcommand.",
    arity: -2,
    subcommands: FUNCTION_SUBCOMMANDS,
    ..CommandSpec::BASE
}];

static FUNCTION_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "flush",
        group: Group::Scripting,
        summary: "Deletes every function library.",
        since: "7.0.0",
        complexity: "O(N) where N is the number of functions deleted",
        arity: -2,
        flags: flag::NOSCRIPT | flag::WRITE,
        acl: acl::SCRIPTING,
        arguments: &[Arg::oneof(
            "async",
            &[Arg::token("async", "ASYNC"), Arg::token("sync", "SYNC")],
        )
        .optional()],
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        handler: Some(function_flush),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "help",
        group: Group::Scripting,
        summary: "Lists the FUNCTION subcommands with a short description of each.",
        since: "7.0.0",
        complexity: "O(1)",
        arity: 2,
        flags: flag::LOADING | flag::STALE,
        acl: acl::SCRIPTING,
        handler: Some(function_help),
        ..CommandSpec::BASE
    },
];

fn function_flush(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if args.len() > 3 {
        return subcommand_syntax_error(ctx, args);
    }
    if args.len() == 3 && !is(&args[2], "SYNC") && !is(&args[2], "ASYNC") {
        ctx.reply
            .error(b"ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
        return;
    }
    ctx.reply.ok();
}

fn function_help(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    help_reply(
        ctx.reply,
        "function",
        &[
            "FLUSH [ASYNC|SYNC]",
            "    Delete every library (and so every function).",
        ],
    );
}
