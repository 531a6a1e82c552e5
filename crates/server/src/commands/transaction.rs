//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! Queueing happens in the gatekeeper (`crate::gate`): while a client is in MULTI, every
//! command but these (and QUIT, RESET) is checked and queued there. EXEC hands the queue back
//! to the gatekeeper, which locks the union of the queued commands' shards once and runs them
//! through the same path as ordinary commands. WATCH registers the keys in the keyspace
//! shards; every real change of a watched key (`Locked::signal_modified`, expiry, FLUSHDB,
//! FLUSHALL, SWAPDB) raises the watching client's flag, and EXEC then answers a null array.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::Ctx;
use crate::client::{Client, Transaction};
use crate::server::Server;
use crate::spec::{acl, flag, keyflag, Arg, CommandSpec, Group, KeySpec};

pub const EXECABORT: &[u8] = b"EXECABORT Transaction discarded because of previous errors.";

/// The flags MULTI, DISCARD, WATCH and UNWATCH share in Redis 7.0.
const CONTROL_FLAGS: u32 =
    flag::NOSCRIPT | flag::LOADING | flag::STALE | flag::FAST | flag::ALLOW_BUSY;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "multi",
        group: Group::Transactions,
        summary: "Opens a transaction: later commands are queued until EXEC runs them together.",
        since: "1.2.0",
        arity: 1,
        flags: CONTROL_FLAGS,
        acl: acl::TRANSACTION,
        handler: Some(multi),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "exec",
        group: Group::Transactions,
        summary:
            "Runs every command queued since MULTI, atomically, and replies with their replies.",
        since: "1.2.0",
        complexity: "Depends on commands in the transaction",
        arity: 1,
        flags: flag::NOSCRIPT | flag::LOADING | flag::STALE | flag::SKIP_SLOWLOG,
        acl: acl::TRANSACTION,
        handler: Some(exec),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "discard",
        group: Group::Transactions,
        summary: "Drops the commands queued since MULTI and leaves the transaction.",
        since: "2.0.0",
        complexity: "O(N), when N is the number of queued commands",
        arity: 1,
        flags: CONTROL_FLAGS,
        acl: acl::TRANSACTION,
        handler: Some(discard),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "watch",
        group: Group::Transactions,
        summary: "Makes the next EXEC fail if any of the given keys changes before it runs.",
        since: "2.2.0",
        complexity: "O(1) for every key.",
        arity: -2,
        flags: CONTROL_FLAGS,
        acl: acl::TRANSACTION,
        key_specs: &[KeySpec::to_end(1, 1, keyflag::RO)],
        arguments: &[Arg::key("key", 0).multiple()],
        handler: Some(watch),
        ..CommandSpec::BASE
    },
    CommandSpec {
        name: "unwatch",
        group: Group::Transactions,
        summary: "Stops watching every key this connection watches.",
        since: "2.2.0",
        arity: 1,
        flags: CONTROL_FLAGS,
        acl: acl::TRANSACTION,
        handler: Some(unwatch),
        ..CommandSpec::BASE
    },
];

fn multi(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    if ctx.client.multi.is_some() {
        // Redis refuses it without aborting the transaction.
        ctx.reply.error(b"ERR MULTI calls can not be nested");
        return;
    }
    ctx.client.multi = Some(Transaction::default());
    ctx.client.shared.multi.store(0, Ordering::Relaxed);
    ctx.reply.ok();
}

fn exec(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    let Some(transaction) = leave_multi(ctx.client) else {
        ctx.reply.error(b"ERR EXEC without MULTI");
        return;
    };
    if transaction.aborted {
        ctx.server.keyspace.unwatch(&mut ctx.client.watches);
        ctx.reply.error(EXECABORT);
        return;
    }
    crate::gate::run_transaction(ctx.server, ctx.client, ctx.reply, &transaction.queued);
}

fn discard(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    if ctx.client.multi.is_none() {
        ctx.reply.error(b"ERR DISCARD without MULTI");
        return;
    }
    discard_transaction(ctx.server, ctx.client);
    ctx.reply.ok();
}

fn watch(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if ctx.client.multi.is_some() {
        ctx.reply.error(b"ERR WATCH inside MULTI is not allowed");
        return;
    }
    // Already doomed: the next EXEC fails whatever else is watched.
    if !ctx.client.watches.is_dirty() {
        let db = ctx.db();
        for key in &args[1..] {
            ctx.keys.watch(db, key, &mut ctx.client.watches);
        }
    }
    ctx.reply.ok();
}

fn unwatch(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    // The gatekeeper locked nothing for UNWATCH (no key specs), or, inside EXEC, the watches
    // are already gone; either way locking the watched keys' shards here is safe.
    ctx.server.keyspace.unwatch(&mut ctx.client.watches);
    ctx.reply.ok();
}

/// Takes the client out of MULTI, returning its queue.
fn leave_multi(client: &mut Client) -> Option<Transaction> {
    let transaction = client.multi.take()?;
    client.shared.multi.store(-1, Ordering::Relaxed);
    client.shared.memory.multi.store(0, Ordering::Relaxed);
    Some(transaction)
}

/// Redis' `discardTransaction`: leaves MULTI (if in it) and unwatches everything. The caller
/// must hold no shard.
pub fn discard_transaction(server: &Server, client: &mut Client) {
    leave_multi(client);
    server.keyspace.unwatch(&mut client.watches);
}
