//! SAVE, BGSAVE, BGREWRITEAOF: snapshots and AOF rewrites on request
//! (`crate::persistence` does the work).

use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::commands::{err, is, Ctx};
use crate::spec::{flag, Arg, CommandSpec, Group};

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "save",
        group: Group::Server,
        summary: "Writes a snapshot of every database to the RDB file, blocking until done.",
        since: "1.0.0",
        complexity: "O(N) where N is the number of keys in all databases",
        arity: 1,
        flags: flag::NO_ASYNC_LOADING | flag::ADMIN | flag::NOSCRIPT | flag::NO_MULTI,
        handler: Some(save),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "bgsave",
        group: Group::Server,
        summary: "Writes a snapshot of every database to the RDB file in the background.",
        since: "1.0.0",
        arity: -1,
        flags: flag::NO_ASYNC_LOADING | flag::ADMIN | flag::NOSCRIPT,
        arguments: &[Arg::token("schedule", "SCHEDULE").optional().since("3.2.2")],
        history: &[("3.2.2", "Gained the `SCHEDULE` option.")],
        handler: Some(bgsave),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "bgrewriteaof",
        group: Group::Server,
        summary: "Rewrites the append-only file as a fresh base snapshot, in the background.",
        since: "1.0.0",
        arity: 1,
        flags: flag::NO_ASYNC_LOADING | flag::ADMIN | flag::NOSCRIPT,
        handler: Some(bgrewriteaof),
        ..CommandSpec::BASE
    },
];

fn save(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    let server = ctx.server;
    if server
        .persistence
        .bgsave_in_progress
        .load(Ordering::Acquire)
    {
        ctx.reply.error(b"ERR Background save already in progress");
        return;
    }
    // The snapshot takes every shard lock for a moment and then writes on this thread:
    // let the runtime move this worker's other connections elsewhere meanwhile.
    let result = crate::server::beside_runtime(|| crate::persistence::snapshot::save(server));
    match result {
        Ok(()) => ctx.reply.ok(),
        Err(error) => {
            tracing::warn!("SAVE failed: {error:#}");
            ctx.reply.error(b"ERR");
        }
    }
}

fn bgsave(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    // SCHEDULE waits for an AOF rewrite in Redis, where both are child processes; Latch
    // runs them side by side, so it starts at once.
    match &args[1..] {
        [] => {}
        [option] if is(option, "SCHEDULE") => {}
        _ => {
            ctx.reply.error(err::SYNTAX);
            return;
        }
    }
    let persistence = &ctx.server.persistence;
    if persistence.bgsave_in_progress.load(Ordering::Acquire) {
        ctx.reply.error(b"ERR Background save already in progress");
        return;
    }
    // Inside EXEC it waits for the cron, as in Redis.
    if ctx.client.in_exec {
        persistence.bgsave_scheduled.store(true, Ordering::Relaxed);
        ctx.reply.simple(b"Background saving scheduled");
        return;
    }
    let Some(server) = ctx.server.arc() else {
        ctx.reply.error(b"ERR the server is shutting down");
        return;
    };
    if crate::persistence::snapshot::bgsave(&server) {
        ctx.reply.simple(b"Background saving started");
    } else {
        ctx.reply.error(b"ERR Background save already in progress");
    }
}

fn bgrewriteaof(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    let persistence = &ctx.server.persistence;
    if persistence.rewrite_in_progress.load(Ordering::Acquire) {
        ctx.reply
            .error(b"ERR Background append only file rewriting already in progress");
        return;
    }
    if persistence.bgsave_in_progress.load(Ordering::Acquire) || ctx.client.in_exec {
        // As Redis: the rewrite runs once the snapshot is written, or the transaction ran.
        persistence.rewrite_scheduled.store(true, Ordering::Relaxed);
        ctx.reply
            .simple(b"Background append only file rewriting scheduled");
        return;
    }
    let Some(server) = ctx.server.arc() else {
        ctx.reply.error(b"ERR the server is shutting down");
        return;
    };
    if !crate::persistence::aofdir::rewrite_in_background(&server) {
        ctx.reply
            .error(b"ERR Background append only file rewriting already in progress");
        return;
    }
    ctx.reply
        .simple(b"Background append only file rewriting started");
}
