//! Whole-database commands: DBSIZE, FLUSHDB, FLUSHALL, SWAPDB.
//!
//! All of them see or change every shard of a database, so they lock the whole keyspace.

use bytes::Bytes;
use latch_keyspace::lazyfree;

use super::{err, is, parse_i64, Ctx};
use crate::spec::{acl, flag, Arg, CommandSpec, Group, LockPlan};

/// `ASYNC | SYNC`, shared by FLUSHDB and FLUSHALL.
const FLUSH_MODE: &[Arg] = &[Arg::oneof(
    "async",
    &[
        Arg::token("async", "ASYNC").since("4.0.0"),
        Arg::token("sync", "SYNC").since("6.2.0"),
    ],
)
.optional()];

const FLUSH_HISTORY: &[(&str, &str)] = &[
    ("4.0.0", "The `ASYNC` modifier was added."),
    ("6.2.0", "The `SYNC` modifier was added."),
];

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "dbsize",
        group: Group::Server,
        summary: "Counts the keys of the selected database.",
        arity: 1,
        flags: flag::READONLY | flag::FAST,
        acl: acl::KEYSPACE,
        tips: &["request_policy:all_shards", "response_policy:agg_sum"],
        handler: Some(dbsize),
        lock: LockPlan::All,
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "flushdb",
        group: Group::Server,
        summary: "Deletes every key of the selected database.",
        complexity: "O(N) where N is the number of keys in the selected database",
        arity: -1,
        flags: flag::WRITE,
        acl: acl::KEYSPACE | acl::DANGEROUS,
        arguments: FLUSH_MODE,
        history: FLUSH_HISTORY,
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        handler: Some(flushdb),
        lock: LockPlan::All,
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "flushall",
        group: Group::Server,
        summary: "Deletes every key of every database.",
        complexity: "O(N) where N is the total number of keys in all databases",
        arity: -1,
        flags: flag::WRITE,
        acl: acl::KEYSPACE | acl::DANGEROUS,
        arguments: FLUSH_MODE,
        history: FLUSH_HISTORY,
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        handler: Some(flushall),
        lock: LockPlan::All,
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "swapdb",
        group: Group::Server,
        summary: "Exchanges the contents of two databases.",
        since: "4.0.0",
        complexity:
            "O(N) where N is the count of clients watching or blocking on keys from both databases.",
        arity: 3,
        flags: flag::WRITE | flag::FAST,
        acl: acl::KEYSPACE | acl::DANGEROUS,
        arguments: &[Arg::integer("index1"), Arg::integer("index2")],
        handler: Some(swapdb),
        lock: LockPlan::All,
        ..CommandSpec::BASE
    },
];

fn dbsize(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    let db = ctx.db();
    let len = ctx.keys.db_len(db);
    ctx.reply.integer(len as i64);
}

/// FLUSHDB/FLUSHALL's optional `ASYNC|SYNC`: whether to free the keys on the lazyfree
/// thread (without a mode, as `lazyfree-lazy-user-flush` says). `None` after writing the
/// syntax error. Either way the database is empty when the command returns.
fn flush_lazily(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) -> Option<bool> {
    match args {
        [_] => Some(lazyfree::user_flush()),
        [_, mode] if is(mode, "ASYNC") => Some(true),
        [_, mode] if is(mode, "SYNC") => Some(false),
        _ => {
            ctx.reply.error(err::SYNTAX);
            None
        }
    }
}

fn flushdb(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(lazily) = flush_lazily(ctx, args) else {
        return;
    };
    let db = ctx.db();
    ctx.keys.flush_db_freeing(db, lazily);
    ctx.reply.ok();
}

fn flushall(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(lazily) = flush_lazily(ctx, args) else {
        return;
    };
    // As Redis, which kills its saving child: a BGSAVE under way stops.
    crate::persistence::snapshot::abort_bgsave(ctx.server);
    for db in 0..ctx.server.keyspace.num_dbs() {
        ctx.keys.flush_db_freeing(db, lazily);
    }
    // As Redis: with save points, the emptied data set is saved at once.
    if !ctx.server.config.save_params().is_empty() {
        if let Err(error) = crate::persistence::snapshot::save_held(ctx.server, ctx.keys) {
            tracing::warn!("FLUSHALL could not save the RDB file: {error:#}");
        }
    }
    ctx.reply.ok();
}

/// Parses a database index the way Redis' `getIntFromObjectOrReply` does (a 32-bit int).
fn db_index(arg: &[u8]) -> Option<i64> {
    parse_i64(arg).filter(|&n| i32::try_from(n).is_ok())
}

fn swapdb(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(first) = db_index(&args[1]) else {
        ctx.reply.error(b"ERR invalid first DB index");
        return;
    };
    let Some(second) = db_index(&args[2]) else {
        ctx.reply.error(b"ERR invalid second DB index");
        return;
    };
    let num_dbs = ctx.server.keyspace.num_dbs() as i64;
    if !(0..num_dbs).contains(&first) || !(0..num_dbs).contains(&second) {
        ctx.reply.error(err::DB_INDEX);
        return;
    }
    if first != second {
        ctx.keys.swap_dbs(first as usize, second as usize);
    }
    ctx.reply.ok();
}
