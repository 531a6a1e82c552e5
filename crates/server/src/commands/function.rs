//! FUNCTION and FCALL: Redis 7 function libraries (`crate::scripting::functions`).
//! FCALL runs like EVAL (claim, exclusive view); the FUNCTION subcommands that change or
//! read libraries take the claim without shards; STATS and KILL read the run state only,
//! so they answer while a function is busy.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::client::{help_reply, subcommand_syntax_error};
use super::scripting::{kill_running, split_keys};
use super::{is, Ctx};
use crate::scripting::functions;
use crate::spec::{
    acl, flag, keyflag, Arg, BeginSearch, CommandSpec, FindKeys, Group, KeySpec, LockPlan,
};

const FCALL_ARGS: &[Arg] = &[
    Arg::string("function"),
    Arg::integer("numkeys"),
    Arg::key("key", 0).optional().multiple(),
    Arg::string("arg").optional().multiple(),
];

const FCALL_KEYS_RW: &[KeySpec] = &[KeySpec {
    flags: keyflag::RW | keyflag::ACCESS | keyflag::UPDATE,
    begin: BeginSearch::Index(2),
    find: FindKeys::Keynum {
        key_num_index: 0,
        first_key: 1,
        key_step: 1,
    },
    notes: Some("We cannot tell how the keys will be used so we assume the worst, RW and UPDATE"),
}];
const FCALL_KEYS_RO: &[KeySpec] = &[KeySpec {
    flags: keyflag::RO | keyflag::ACCESS,
    notes: Some("We cannot tell how the keys will be used so we assume the worst, RO and ACCESS"),
    ..FCALL_KEYS_RW[0]
}];

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "fcall",
        group: Group::Scripting,
        summary: "Runs a function of a loaded library, atomically.",
        since: "7.0.0",
        complexity: "Depends on the function that is executed.",
        arity: -3,
        flags: flag::NOSCRIPT
            | flag::SKIP_MONITOR
            | flag::MAY_REPLICATE
            | flag::NO_MANDATORY_KEYS
            | flag::STALE,
        acl: acl::SCRIPTING,
        key_specs: FCALL_KEYS_RW,
        arguments: FCALL_ARGS,
        handler: Some(fcall),
        lock: LockPlan::Script,
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "fcall_ro",
        group: Group::Scripting,
        summary: "Runs a function that may only read.",
        since: "7.0.0",
        complexity: "Depends on the function that is executed.",
        arity: -3,
        flags: flag::NOSCRIPT
            | flag::SKIP_MONITOR
            | flag::NO_MANDATORY_KEYS
            | flag::STALE
            | flag::READONLY,
        acl: acl::SCRIPTING,
        key_specs: FCALL_KEYS_RO,
        arguments: FCALL_ARGS,
        handler: Some(fcall_ro),
        lock: LockPlan::Script,
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "function",
        group: Group::Scripting,
        summary: "Groups the subcommands that manage server-side function libraries.",
        since: "7.0.0",
        complexity: "Depends on subcommand.",
        arity: -2,
        subcommands: FUNCTION_SUBCOMMANDS,
        ..CommandSpec::BASE
    },
];

const SUB: CommandSpec = CommandSpec {
    group: Group::Scripting,
    since: "7.0.0",
    acl: acl::SCRIPTING,
    lock: LockPlan::Engine,
    ..CommandSpec::BASE
};

static FUNCTION_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "delete",
        summary: "Deletes a library and its functions.",
        arity: 3,
        flags: flag::NOSCRIPT | flag::WRITE,
        arguments: &[Arg::string("library-name")],
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        handler: Some(function_delete),
        ..SUB
    },
    CommandSpec {
        name: "dump",
        summary: "Serializes every library into one payload for FUNCTION RESTORE.",
        complexity: "O(N) where N is the number of functions",
        arity: 2,
        flags: flag::NOSCRIPT,
        handler: Some(function_dump),
        ..SUB
    },
    CommandSpec {
        name: "flush",
        summary: "Deletes every function library.",
        complexity: "O(N) where N is the number of functions deleted",
        arity: -2,
        flags: flag::NOSCRIPT | flag::WRITE,
        arguments: &[Arg::oneof(
            "async",
            &[Arg::token("async", "ASYNC"), Arg::token("sync", "SYNC")],
        )
        .optional()],
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        handler: Some(function_flush),
        ..SUB
    },
    CommandSpec {
        name: "help",
        summary: "Lists the FUNCTION subcommands with a short description of each.",
        arity: 2,
        flags: flag::LOADING | flag::STALE,
        handler: Some(function_help),
        lock: LockPlan::Keys,
        ..SUB
    },
    CommandSpec {
        name: "kill",
        summary: "Stops the running function, if it has not written anything.",
        arity: 2,
        flags: flag::NOSCRIPT | flag::ALLOW_BUSY,
        tips: &["request_policy:all_shards", "response_policy:one_succeeded"],
        handler: Some(function_kill),
        lock: LockPlan::Keys,
        ..SUB
    },
    CommandSpec {
        name: "list",
        summary: "Lists the libraries, their functions and, on request, their code.",
        complexity: "O(N) where N is the number of functions",
        arity: -2,
        flags: flag::NOSCRIPT,
        arguments: &[
            Arg::string("library-name-pattern")
                .with_token("LIBRARYNAME")
                .optional(),
            Arg::token("withcode", "WITHCODE").optional(),
        ],
        tips: &["nondeterministic_output_order"],
        handler: Some(function_list),
        ..SUB
    },
    CommandSpec {
        name: "load",
        summary: "Loads a library of functions from Lua code with a `#!lua name=...` line.",
        complexity: "O(1) (considering compilation time is redundant)",
        arity: -3,
        flags: flag::NOSCRIPT | flag::WRITE | flag::DENYOOM,
        arguments: &[
            Arg::token("replace", "REPLACE").optional(),
            Arg::string("function-code"),
        ],
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        handler: Some(function_load),
        ..SUB
    },
    CommandSpec {
        name: "restore",
        summary: "Loads the libraries of a FUNCTION DUMP payload.",
        complexity: "O(N) where N is the number of functions on the payload",
        arity: -3,
        flags: flag::NOSCRIPT | flag::WRITE | flag::DENYOOM,
        arguments: &[
            Arg::string("serialized-value"),
            Arg::oneof(
                "policy",
                &[
                    Arg::token("flush", "FLUSH"),
                    Arg::token("append", "APPEND"),
                    Arg::token("replace", "REPLACE"),
                ],
            )
            .optional(),
        ],
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        handler: Some(function_restore),
        ..SUB
    },
    CommandSpec {
        name: "stats",
        summary: "Tells which function runs now and how many libraries and functions exist.",
        arity: 2,
        flags: flag::NOSCRIPT | flag::ALLOW_BUSY,
        tips: &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
        handler: Some(function_stats),
        lock: LockPlan::Keys,
        ..SUB
    },
];

fn fcall(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    fcall_generic(ctx, args, false);
}

fn fcall_ro(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    fcall_generic(ctx, args, true);
}

fn fcall_generic(ctx: &mut Ctx<'_, '_>, args: &[Bytes], read_only: bool) {
    crate::gate::monitor_script_command(ctx, args);
    let server = ctx.server;
    let known = server
        .scripting
        .with_function_engine(|engine| engine.functions.function(&args[1]).is_some());
    if !known {
        ctx.reply.error(b"ERR Function not found");
        return;
    }
    if super::parse_i64(&args[2]).is_none() {
        ctx.reply.error(b"ERR Bad number of keys provided");
        return;
    }
    let Some((keys, function_args)) = split_keys(ctx, args) else {
        return;
    };
    *server.scripting.run.function.lock() = Some((
        String::from_utf8_lossy(&args[1]).into_owned(),
        args.to_vec(),
    ));
    server.scripting.with_function_engine(|engine| {
        engine.fcall(ctx, &args[1], read_only, keys, function_args);
    });
    *server.scripting.run.function.lock() = None;
}

/// Keeps what is read without the claim up to date: the counts FUNCTION STATS shows and
/// the libraries' code snapshots save. A change of the libraries is a change to log.
fn publish_counts(ctx: &mut Ctx<'_, '_>) {
    let server = ctx.server;
    let (libraries, functions, codes) = server.scripting.with_function_engine(|engine| {
        (
            engine.functions.libraries.len(),
            engine.functions.function_count(),
            engine
                .functions
                .libraries
                .values()
                .map(|library| library.code.clone())
                .collect::<Vec<_>>(),
        )
    });
    let run = &server.scripting.run;
    run.library_count.store(libraries, Ordering::Relaxed);
    run.function_count.store(functions, Ordering::Relaxed);
    let mut published = server.scripting.library_codes.lock();
    if *published != codes {
        *published = codes;
        ctx.keys.note_change();
    }
}

fn function_load(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let mut replace = false;
    let mut at = 2;
    while at < args.len() - 1 {
        if is(&args[at], "REPLACE") {
            replace = true;
            at += 1;
            continue;
        }
        let message = format!(
            "ERR Unknown option given: {}",
            String::from_utf8_lossy(&args[at])
        );
        ctx.reply.error(message.as_bytes());
        return;
    }
    if at >= args.len() {
        ctx.reply.error(b"ERR Function code is missing");
        return;
    }
    let server = ctx.server;
    let loaded = server
        .scripting
        .with_function_engine(|engine| engine.load_library(&args[at], replace));
    match loaded {
        Ok(name) => ctx.reply.bulk(name.as_bytes()),
        Err(message) => ctx.reply.error(&message),
    }
    publish_counts(ctx);
}

fn function_delete(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let server = ctx.server;
    if server
        .scripting
        .with_function_engine(|engine| engine.functions.delete(&args[2]))
    {
        ctx.reply.ok();
    } else {
        ctx.reply.error(b"ERR Library not found");
    }
    publish_counts(ctx);
}

fn function_flush(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if args.len() > 3 {
        return subcommand_syntax_error(ctx, args);
    }
    if args.len() == 3 && !is(&args[2], "SYNC") && !is(&args[2], "ASYNC") {
        ctx.reply
            .error(b"ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
        return;
    }
    let server = ctx.server;
    server
        .scripting
        .with_function_engine(|engine| engine.functions.flush());
    publish_counts(ctx);
    ctx.reply.ok();
}

fn function_list(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let mut with_code = false;
    let mut pattern: Option<&Bytes> = None;
    let mut at = 2;
    while at < args.len() {
        let arg = &args[at];
        at += 1;
        if !with_code && is(arg, "WITHCODE") {
            with_code = true;
            continue;
        }
        if pattern.is_none() && is(arg, "LIBRARYNAME") {
            if at >= args.len() {
                ctx.reply.error(b"ERR library name argument was not given");
                return;
            }
            pattern = Some(&args[at]);
            at += 1;
            continue;
        }
        let message = format!("ERR Unknown argument {}", String::from_utf8_lossy(arg));
        ctx.reply.error(message.as_bytes());
        return;
    }
    let server = ctx.server;
    let reply = &mut *ctx.reply;
    server.scripting.with_function_engine(|engine| {
        let libraries: Vec<&functions::Library> = engine
            .functions
            .libraries
            .values()
            .filter(|library| {
                pattern.is_none_or(|p| {
                    latch_keyspace::glob::glob_match(p, library.name.as_bytes(), true)
                })
            })
            .collect();
        reply.array(libraries.len());
        for library in libraries {
            reply.map(if with_code { 4 } else { 3 });
            reply.bulk(b"library_name");
            reply.bulk(library.name.as_bytes());
            reply.bulk(b"engine");
            reply.bulk(b"LUA");
            reply.bulk(b"functions");
            reply.array(library.functions.len());
            for function in &library.functions {
                reply.map(3);
                reply.bulk(b"name");
                reply.bulk(function.name.as_bytes());
                reply.bulk(b"description");
                match &function.description {
                    Some(text) => reply.bulk(text),
                    None => reply.null(),
                }
                reply.bulk(b"flags");
                let names = functions::flag_names(&function.flags);
                reply.set(names.len());
                for name in names {
                    reply.simple(name.as_bytes());
                }
            }
            if with_code {
                reply.bulk(b"library_code");
                reply.bulk(&library.code);
            }
        }
    });
}

fn function_dump(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    let server = ctx.server;
    let payload = server
        .scripting
        .with_function_engine(|engine| functions::dump(&engine.functions));
    ctx.reply.bulk(&payload);
}

fn function_restore(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if args.len() > 4 {
        return subcommand_syntax_error(ctx, args);
    }
    #[derive(PartialEq)]
    enum Policy {
        Append,
        Replace,
        Flush,
    }
    let policy = match args.get(3) {
        None => Policy::Append,
        Some(arg) if is(arg, "APPEND") => Policy::Append,
        Some(arg) if is(arg, "REPLACE") => Policy::Replace,
        Some(arg) if is(arg, "FLUSH") => Policy::Flush,
        Some(_) => {
            ctx.reply.error(
                b"ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            );
            return;
        }
    };
    let codes = match functions::read_dump(&args[2]) {
        Ok(codes) => codes,
        Err(message) => {
            ctx.reply.error(&message);
            return;
        }
    };
    let server = ctx.server;
    let outcome = server
        .scripting
        .with_function_engine(|engine| -> Result<(), Vec<u8>> {
            // Load into a fresh set first: nothing changes unless every library loads.
            let saved = std::mem::take(&mut engine.functions);
            let mut loaded = Vec::new();
            for code in &codes {
                match engine.load_library(code, false) {
                    Ok(name) => loaded.push(name),
                    Err(message) => {
                        engine.functions = saved;
                        return Err(message);
                    }
                }
            }
            let restored = std::mem::replace(&mut engine.functions, saved);
            if policy == Policy::Flush {
                engine.functions = restored;
                return Ok(());
            }
            for name in &loaded {
                let Some(library) = restored.libraries.get(&name.to_ascii_lowercase()) else {
                    continue;
                };
                if policy == Policy::Append && engine.functions.has_library(name) {
                    return Err(format!("ERR Library {name} already exists").into_bytes());
                }
                for function in &library.functions {
                    let clash = engine
                        .functions
                        .libraries
                        .values()
                        .filter(|other| {
                            !other.name.eq_ignore_ascii_case(name) || policy == Policy::Append
                        })
                        .any(|other| {
                            other
                                .functions
                                .iter()
                                .any(|f| f.name.eq_ignore_ascii_case(&function.name))
                        });
                    if clash {
                        return Err(
                            format!("ERR Function {} already exists", function.name).into_bytes()
                        );
                    }
                }
            }
            for code in &codes {
                engine.load_library(code, true)?;
            }
            Ok(())
        });
    match outcome {
        Ok(()) => ctx.reply.ok(),
        Err(message) => ctx.reply.error(&message),
    }
    publish_counts(ctx);
}

fn function_stats(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    let run = &ctx.server.scripting.run;
    ctx.reply.map(2);
    ctx.reply.bulk(b"running_script");
    let running = if run.is_script_running() && !run.is_eval() {
        run.function.lock().clone()
    } else {
        None
    };
    match running {
        None => ctx.reply.null(),
        Some((name, command)) => {
            ctx.reply.map(3);
            ctx.reply.bulk(b"name");
            ctx.reply.bulk(name.as_bytes());
            ctx.reply.bulk(b"command");
            ctx.reply.array(command.len());
            for arg in &command {
                ctx.reply.bulk(arg);
            }
            ctx.reply.bulk(b"duration_ms");
            ctx.reply.integer(run.elapsed_ms() as i64);
        }
    }
    ctx.reply.bulk(b"engines");
    ctx.reply.map(1);
    ctx.reply.bulk(b"LUA");
    ctx.reply.map(2);
    ctx.reply.bulk(b"libraries_count");
    ctx.reply
        .integer(run.library_count.load(Ordering::Relaxed) as i64);
    ctx.reply.bulk(b"functions_count");
    ctx.reply
        .integer(run.function_count.load(Ordering::Relaxed) as i64);
}

fn function_kill(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    kill_running(ctx, false);
}

fn function_help(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    help_reply(
        ctx.reply,
        "function",
        &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Load a library from code starting with '#!lua name=<library name>'. REPLACE",
            "    overwrites a library of that name.",
            "DELETE <LIBRARY NAME>",
            "    Delete a library and its functions.",
            "KILL",
            "    Stop the running function, unless it has already written.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete every library (and so every function).",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    List the libraries (matching PATTERN) with their functions (and code).",
            "STATS",
            "    The running function, and how many libraries and functions there are.",
            "DUMP",
            "    Serialize every library into one payload.",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Load the libraries of a DUMP payload: FLUSH deletes the existing ones first,",
            "    APPEND (the default) refuses names that exist, REPLACE overwrites them.",
        ],
    );
}
