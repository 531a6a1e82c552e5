//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT: Lua scripts, run atomically. The
//! gatekeeper gives these commands the scripting claim and an exclusive view of the whole
//! keyspace (`LockPlan::Script`); the engine (`crate::scripting`) does the rest.

use bytes::Bytes;

use super::client::{help_reply, subcommand_syntax_error};
use super::{err, is, parse_i64, Ctx};
use crate::spec::{
    acl, flag, keyflag, Arg, BeginSearch, CommandSpec, FindKeys, Group, KeySpec, LockPlan,
};

const EVAL_FLAGS: u32 = flag::NOSCRIPT
    | flag::SKIP_MONITOR
    | flag::MAY_REPLICATE
    | flag::NO_MANDATORY_KEYS
    | flag::STALE;
const EVAL_RO_FLAGS: u32 =
    flag::NOSCRIPT | flag::SKIP_MONITOR | flag::NO_MANDATORY_KEYS | flag::STALE | flag::READONLY;

/// The keys of EVAL-like commands: `numkeys` at 2, then that many keys.
const EVAL_KEYS_RW: &[KeySpec] = &[KeySpec {
    flags: keyflag::RW | keyflag::ACCESS | keyflag::UPDATE,
    begin: BeginSearch::Index(2),
    find: FindKeys::Keynum {
        key_num_index: 0,
        first_key: 1,
        key_step: 1,
    },
    notes: Some("We cannot tell how the keys will be used so we assume the worst, RW and UPDATE"),
}];
const EVALSHA_KEYS_RW: &[KeySpec] = &[KeySpec {
    notes: None,
    ..EVAL_KEYS_RW[0]
}];
const EVAL_KEYS_RO: &[KeySpec] = &[KeySpec {
    flags: keyflag::RO | keyflag::ACCESS,
    notes: Some("We cannot tell how the keys will be used so we assume the worst, RO and ACCESS"),
    ..EVAL_KEYS_RW[0]
}];
const EVALSHA_KEYS_RO: &[KeySpec] = &[KeySpec {
    notes: None,
    ..EVAL_KEYS_RO[0]
}];

const EVAL_ARGS: &[Arg] = &[
    Arg::string("script"),
    Arg::integer("numkeys"),
    Arg::key("key", 0).optional().multiple(),
    Arg::string("arg").optional().multiple(),
];
const EVALSHA_ARGS: &[Arg] = &[
    Arg::string("sha1"),
    Arg::integer("numkeys"),
    Arg::key("key", 0).optional().multiple(),
    Arg::string("arg").optional().multiple(),
];

const SCRIPT_BASE: CommandSpec = CommandSpec {
    group: Group::Scripting,
    complexity: "Depends on the script that is executed.",
    arity: -3,
    acl: acl::SCRIPTING,
    lock: LockPlan::Script,
    ..CommandSpec::BASE
};

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "eval",
        summary: "Runs a Lua script on the server, atomically.",
        since: "2.6.0",
        flags: EVAL_FLAGS,
        key_specs: EVAL_KEYS_RW,
        arguments: EVAL_ARGS,
        handler: Some(eval),
        ..SCRIPT_BASE
    },
    CommandSpec {
        name: "evalsha",
        summary: "Runs a cached Lua script, named by the SHA1 of its body.",
        since: "2.6.0",
        flags: EVAL_FLAGS,
        key_specs: EVALSHA_KEYS_RW,
        arguments: EVALSHA_ARGS,
        handler: Some(evalsha),
        ..SCRIPT_BASE
    },
    CommandSpec {
        name: "eval_ro",
        summary: "Runs a Lua script that may only read.",
        since: "7.0.0",
        flags: EVAL_RO_FLAGS,
        key_specs: EVAL_KEYS_RO,
        arguments: EVAL_ARGS,
        handler: Some(eval_ro),
        ..SCRIPT_BASE
    },
    CommandSpec {
        name: "evalsha_ro",
        summary: "Runs a cached Lua script that may only read.",
        since: "7.0.0",
        flags: EVAL_RO_FLAGS,
        key_specs: EVALSHA_KEYS_RO,
        arguments: EVALSHA_ARGS,
        handler: Some(evalsha_ro),
        ..SCRIPT_BASE
    },
    CommandSpec {
        name: "script",
        group: Group::Scripting,
        summary: "Groups the subcommands that manage the Lua script cache.",
        since: "2.6.0",
        complexity: "Depends on subcommand.",
        arity: -2,
        subcommands: SCRIPT_SUBCOMMANDS,
        ..CommandSpec::BASE
    },
];

const SUBCOMMAND_BASE: CommandSpec = CommandSpec {
    group: Group::Scripting,
    acl: acl::SCRIPTING,
    lock: LockPlan::Engine,
    ..CommandSpec::BASE
};

static SCRIPT_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "debug",
        summary: "Sets the debug mode of server-side Lua scripts.",
        since: "3.2.0",
        arity: 3,
        flags: flag::NOSCRIPT,
        arguments: &[Arg::oneof(
            "mode",
            &[
                Arg::token("yes", "YES"),
                Arg::token("sync", "SYNC"),
                Arg::token("no", "NO"),
            ],
        )],
        handler: Some(script_debug),
        lock: LockPlan::Keys,
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "exists",
        summary: "Tells, for each SHA1, whether the script is in the cache.",
        since: "2.6.0",
        complexity:
            "O(N) with N being the number of scripts to check (so checking a single script is an O(1) operation).",
        arity: -3,
        flags: flag::NOSCRIPT,
        arguments: &[Arg::string("sha1").multiple()],
        tips: &["request_policy:all_shards", "response_policy:agg_logical_and"],
        handler: Some(script_exists),
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "flush",
        summary: "Empties the script cache.",
        since: "2.6.0",
        complexity: "O(N) with N being the number of scripts in cache",
        arity: -2,
        flags: flag::NOSCRIPT,
        arguments: &[Arg::oneof(
            "async",
            &[Arg::token("async", "ASYNC"), Arg::token("sync", "SYNC")],
        )
        .optional()
        .since("6.2.0")],
        history: &[("6.2.0", "Added the `ASYNC` and `SYNC` flushing mode modifiers.")],
        tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
        handler: Some(script_flush),
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "help",
        summary: "Lists the SCRIPT subcommands with a short description of each.",
        since: "5.0.0",
        arity: 2,
        flags: flag::LOADING | flag::STALE,
        handler: Some(script_help),
        lock: LockPlan::Keys,
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "kill",
        summary: "Stops the running script, if it has not written anything.",
        since: "2.6.0",
        arity: 2,
        flags: flag::NOSCRIPT | flag::ALLOW_BUSY,
        tips: &["request_policy:all_shards", "response_policy:one_succeeded"],
        handler: Some(script_kill),
        lock: LockPlan::Keys,
        ..SUBCOMMAND_BASE
    },
    CommandSpec {
        name: "load",
        summary: "Compiles a script into the cache without running it; answers its SHA1.",
        since: "2.6.0",
        complexity: "O(N) with N being the length in bytes of the script body.",
        arity: 3,
        flags: flag::NOSCRIPT | flag::STALE,
        arguments: &[Arg::string("script")],
        tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
        handler: Some(script_load),
        ..SUBCOMMAND_BASE
    },
];

fn eval(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    eval_generic(ctx, args, false, false);
}

fn evalsha(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    eval_generic(ctx, args, true, false);
}

fn eval_ro(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    eval_generic(ctx, args, false, true);
}

fn evalsha_ro(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    eval_generic(ctx, args, true, true);
}

/// Splits `numkeys key... arg...` (from `args[2]` on) as Redis checks it; answers the
/// error and returns `None` when the count is wrong.
pub fn split_keys<'a>(
    ctx: &mut Ctx<'_, '_>,
    args: &'a [Bytes],
) -> Option<(&'a [Bytes], &'a [Bytes])> {
    let Some(numkeys) = parse_i64(&args[2]) else {
        ctx.reply.error(err::NOT_INTEGER);
        return None;
    };
    let available = (args.len() - 3) as i64;
    if numkeys > available {
        ctx.reply
            .error(b"ERR Number of keys can't be greater than number of args");
        return None;
    }
    if numkeys < 0 {
        ctx.reply.error(b"ERR Number of keys can't be negative");
        return None;
    }
    let split = 3 + numkeys as usize;
    Some((&args[3..split], &args[split..]))
}

fn eval_generic(ctx: &mut Ctx<'_, '_>, args: &[Bytes], evalsha: bool, read_only: bool) {
    crate::gate::monitor_script_command(ctx, args);
    let Some((keys, script_args)) = split_keys(ctx, args) else {
        return;
    };
    let server = ctx.server;
    server.scripting.with_engine(|engine| {
        engine.eval(ctx, &args[1], evalsha, read_only, keys, script_args);
    });
}

fn script_load(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let server = ctx.server;
    match server.scripting.with_engine(|engine| engine.load(&args[2])) {
        Ok(sha) => ctx.reply.bulk(sha.as_bytes()),
        Err(message) => ctx.reply.error(&message),
    }
}

fn script_exists(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let server = ctx.server;
    let found: Vec<bool> = server
        .scripting
        .with_engine(|engine| args[2..].iter().map(|sha| engine.exists(sha)).collect());
    ctx.reply.array(found.len());
    for present in found {
        ctx.reply.integer(i64::from(present));
    }
}

fn script_flush(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if args.len() > 3 {
        return subcommand_syntax_error(ctx, args);
    }
    if args.len() == 3 && !is(&args[2], "SYNC") && !is(&args[2], "ASYNC") {
        ctx.reply
            .error(b"ERR SCRIPT FLUSH only support SYNC|ASYNC option");
        return;
    }
    ctx.server.scripting.flush_scripts();
    ctx.reply.ok();
}

fn script_kill(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    kill_running(ctx, true);
}

/// SCRIPT KILL and FUNCTION KILL (`eval`: which of the two).
pub fn kill_running(ctx: &mut Ctx<'_, '_>, eval: bool) {
    let run = &ctx.server.scripting.run;
    if !run.is_script_running() || !run.is_busy() {
        ctx.reply
            .error(b"NOTBUSY No scripts in execution right now.");
        return;
    }
    if run.wrote() {
        ctx.reply.error(b"UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.");
        return;
    }
    if eval && !run.is_eval() {
        ctx.reply.error(b"BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.");
        return;
    }
    if !eval && run.is_eval() {
        ctx.reply.error(b"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.");
        return;
    }
    run.request_kill();
    ctx.reply.ok();
}

/// SCRIPT DEBUG: YES and SYNC run the client's next EVAL in a debugging session
/// (`scripting::debugger`); YES undoes the session's writes when it ends
/// (`scripting::rollback`), where Redis forks and throws its child away.
fn script_debug(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    use crate::scripting::rollback::DebugMode;
    if ctx.client.multi.is_some() || ctx.client.in_exec {
        ctx.reply
            .error(b"ERR SCRIPT DEBUG must be called outside MULTI");
    } else if is(&args[2], "NO") {
        ctx.client.lua_debug = DebugMode::Off;
        ctx.reply.ok();
    } else if is(&args[2], "SYNC") {
        ctx.client.lua_debug = DebugMode::Keep;
        ctx.reply.ok();
    } else if is(&args[2], "YES") {
        ctx.client.lua_debug = DebugMode::RollBack;
        ctx.reply.ok();
    } else {
        ctx.reply.error(b"ERR Use SCRIPT DEBUG YES/SYNC/NO");
    }
}

fn script_help(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    help_reply(
        ctx.reply,
        "script",
        &[
            "EXISTS <sha1> [<sha1> ...]",
            "    Answer 1 or 0 for each SHA1: whether that script is in the cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Empty the script cache.",
            "KILL",
            "    Stop the running script, unless it has already written.",
            "LOAD <script>",
            "    Add a script to the cache and answer its SHA1, without running it.",
            "DEBUG (YES|SYNC|NO)",
            "    Debug the next EVAL step by step over this connection; the connection",
            "    closes when the session ends. YES: the session's writes are undone at its",
            "    end. SYNC: they are kept. NO: turn debugging off.",
        ],
    );
}
