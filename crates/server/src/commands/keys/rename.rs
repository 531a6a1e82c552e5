//! Moving values between names and databases: RENAME, RENAMENX, COPY, MOVE.
//!
//! A key's shard depends on its name only, so the key specs lock the right shards even when
//! the other database is another one (MOVE, COPY ... DB).

use bytes::Bytes;
use latch_keyspace::lazyfree::{self, Cause};

use crate::commands::{err, is, parse_i64, Ctx};
use crate::pubsub::notify;
use crate::spec::{acl, flag, keyflag, Arg, CommandSpec, KeySpec};

pub(super) const RENAME: CommandSpec = CommandSpec {
    name: "rename",
    summary: "Gives a key a new name, replacing any key already under that name.",
    arity: 3,
    flags: flag::WRITE,
    acl: acl::KEYSPACE,
    key_specs: &[
        KeySpec::single(1, keyflag::RW | keyflag::ACCESS | keyflag::DELETE),
        KeySpec::single(2, keyflag::OW | keyflag::UPDATE),
    ],
    arguments: &[Arg::key("key", 0), Arg::key("newkey", 1)],
    handler: Some(rename),
    ..CommandSpec::BASE
};

pub(super) const RENAMENX: CommandSpec = CommandSpec {
    name: "renamenx",
    summary: "Gives a key a new name, only if no key has that name yet.",
    arity: 3,
    flags: flag::WRITE | flag::FAST,
    acl: acl::KEYSPACE,
    key_specs: &[
        KeySpec::single(1, keyflag::RW | keyflag::ACCESS | keyflag::DELETE),
        KeySpec::single(2, keyflag::OW | keyflag::INSERT),
    ],
    arguments: &[Arg::key("key", 0), Arg::key("newkey", 1)],
    history: &[(
        "3.2.0",
        "Renaming a key to its own name is no longer an error.",
    )],
    handler: Some(renamenx),
    ..CommandSpec::BASE
};

pub(super) const COPY: CommandSpec = CommandSpec {
    name: "copy",
    summary: "Copies a key's value (and TTL) to another key, possibly in another database.",
    since: "6.2.0",
    complexity: "O(N) worst case for collections, where N is the number of nested items. O(1) for string values.",
    arity: -3,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::KEYSPACE,
    key_specs: &[
        KeySpec::single(1, keyflag::RO | keyflag::ACCESS),
        KeySpec::single(2, keyflag::OW | keyflag::UPDATE),
    ],
    arguments: &[
        Arg::key("source", 0),
        Arg::key("destination", 1),
        Arg::integer("destination-db").with_token("DB").optional(),
        Arg::token("replace", "REPLACE").optional(),
    ],
    handler: Some(copy),
    ..CommandSpec::BASE
};

pub(super) const MOVE: CommandSpec = CommandSpec {
    name: "move",
    summary: "Moves a key (with its TTL) to another database, unless it exists there.",
    arity: 3,
    flags: flag::WRITE | flag::FAST,
    acl: acl::KEYSPACE,
    key_specs: &[KeySpec::single(
        1,
        keyflag::RW | keyflag::ACCESS | keyflag::UPDATE,
    )],
    arguments: &[Arg::key("key", 0), Arg::integer("db")],
    handler: Some(move_key),
    ..CommandSpec::BASE
};

fn rename(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    rename_generic(ctx, args, false);
}

fn renamenx(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    rename_generic(ctx, args, true);
}

fn rename_generic(ctx: &mut Ctx<'_, '_>, args: &[Bytes], only_if_new: bool) {
    let db = ctx.db();
    let (source, destination) = (&args[1][..], &args[2][..]);
    if ctx.keys.get(db, source).is_none() {
        ctx.reply.error(err::NO_SUCH_KEY);
        return;
    }
    if source == destination {
        reply_renamed(ctx, only_if_new, false);
        return;
    }
    let destination_exists = ctx.keys.exists(db, destination);
    if only_if_new && destination_exists {
        ctx.reply.integer(0);
        return;
    }
    // The entry moves whole: value, deadline and access time (and a string's encoding).
    let raw = ctx.keys.is_raw_string(db, source);
    let Some(entry) = ctx.keys.remove(db, source) else {
        ctx.reply.error(err::NO_SUCH_KEY);
        return;
    };
    if destination_exists {
        // Deleted, then created anew (a `new` event), as in Redis.
        if let Some(old) = ctx.keys.remove(db, destination) {
            lazyfree::free_for(Cause::ServerDel, old.value);
        }
    }
    ctx.keys.put_entry(db, destination, entry);
    if raw {
        ctx.keys.set_raw_string(db, destination, true);
    }
    ctx.keys.signal_modified(db, source);
    ctx.keys.signal_modified(db, destination);
    ctx.notify(notify::GENERIC, "rename_from", source);
    ctx.notify(notify::GENERIC, "rename_to", destination);
    reply_renamed(ctx, only_if_new, true);
}

/// RENAME answers OK; RENAMENX answers whether it renamed.
fn reply_renamed(ctx: &mut Ctx<'_, '_>, only_if_new: bool, renamed: bool) {
    if !only_if_new {
        ctx.reply.ok();
    } else {
        ctx.reply.integer(i64::from(renamed));
    }
}

/// A database index as Redis reads one (`getIntFromObjectOrReply`, then `selectDb`).
/// Writes the error and returns `None` when it is not a valid index.
fn db_arg(ctx: &mut Ctx<'_, '_>, arg: &[u8]) -> Option<usize> {
    let Some(index) = parse_i64(arg) else {
        ctx.reply.error(err::NOT_INTEGER);
        return None;
    };
    if i32::try_from(index).is_err() {
        ctx.reply
            .error(b"ERR value is out of range, value must between -2147483648 and 2147483647");
        return None;
    }
    match usize::try_from(index) {
        Ok(index) if index < ctx.server.keyspace.num_dbs() => Some(index),
        _ => {
            ctx.reply.error(err::DB_INDEX);
            None
        }
    }
}

fn copy(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let source_db = ctx.db();
    let mut destination_db = source_db;
    let mut replace = false;
    let mut index = 3;
    while index < args.len() {
        if is(&args[index], "REPLACE") {
            replace = true;
        } else if is(&args[index], "DB") && index + 1 < args.len() {
            let Some(db) = db_arg(ctx, &args[index + 1]) else {
                return;
            };
            destination_db = db;
            index += 1;
        } else {
            ctx.reply.error(err::SYNTAX);
            return;
        }
        index += 1;
    }
    let (source, destination) = (&args[1][..], &args[2][..]);
    if source_db == destination_db && source == destination {
        ctx.reply.error(err::SAME_OBJECT);
        return;
    }
    // The source is read (a miss is reported), the destination looked up to be written.
    ctx.lookups_read(true);
    let Some((value, deadline, raw)) = ctx
        .keys
        .get_slot(source_db, source)
        .map(|slot| (slot.value().clone(), slot.deadline(), slot.is_raw_string()))
    else {
        ctx.reply.integer(0);
        return;
    };
    ctx.lookups_read(false);
    let destination_exists = ctx.keys.exists(destination_db, destination);
    if !replace && destination_exists {
        ctx.reply.integer(0);
        return;
    }
    if destination_exists {
        // Replaced: deleted, then created anew (a `new` event), as in Redis.
        if let Some(old) = ctx.keys.remove(destination_db, destination) {
            lazyfree::free_for(Cause::ServerDel, old.value);
        }
    }
    // The copy is a new value: it starts with a fresh access time.
    ctx.keys.set(destination_db, destination, value, deadline);
    if raw {
        // Redis copies a plain sds into a plain sds.
        ctx.keys.set_raw_string(destination_db, destination, true);
    }
    ctx.keys.signal_modified(destination_db, destination);
    ctx.notify_db(notify::GENERIC, "copy_to", destination, destination_db);
    ctx.reply.integer(1);
}

fn move_key(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let source_db = ctx.db();
    let Some(destination_db) = db_arg(ctx, &args[2]) else {
        return;
    };
    if destination_db == source_db {
        ctx.reply.error(err::SAME_OBJECT);
        return;
    }
    let key = &args[1][..];
    if ctx.keys.get(source_db, key).is_none() || ctx.keys.exists(destination_db, key) {
        ctx.reply.integer(0);
        return;
    }
    let raw = ctx.keys.is_raw_string(source_db, key);
    let Some(entry) = ctx.keys.remove(source_db, key) else {
        ctx.reply.integer(0);
        return;
    };
    ctx.keys.put_entry(destination_db, key, entry);
    if raw {
        ctx.keys.set_raw_string(destination_db, key, true);
    }
    ctx.keys.signal_modified(source_db, key);
    ctx.keys.signal_modified(destination_db, key);
    ctx.notify_db(notify::GENERIC, "move_from", key, source_db);
    ctx.notify_db(notify::GENERIC, "move_to", key, destination_db);
    ctx.reply.integer(1);
}
