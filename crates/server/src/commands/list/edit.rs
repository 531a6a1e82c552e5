//! Changing lists in place: LSET, LREM, LTRIM, LINSERT.

use bytes::Bytes;
use latch_keyspace::list::Matcher;

use super::{list_at, remove_if_empty, resolve_index, resolve_range, WrongType};
use crate::commands::{err, int_arg, is, parse_i64, Ctx};
use crate::pubsub::notify;

pub(super) fn lset(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let key = &args[1][..];
    let list = match list_at(ctx.keys, db, key) {
        Err(WrongType) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
        Ok(None) => {
            ctx.reply.error(err::NO_SUCH_KEY);
            return;
        }
        Ok(Some(list)) => list,
    };
    let Some(index) = parse_i64(&args[2]) else {
        ctx.reply.error(err::NOT_INTEGER);
        return;
    };
    match resolve_index(index, list.len()) {
        None => ctx.reply.error(b"ERR index out of range"),
        Some(i) => {
            list.set(i, &args[3]);
            ctx.keys.signal_modified(db, key);
            ctx.notify(notify::LIST, "lset", key);
            ctx.reply.ok();
        }
    }
}

/// LREM key count element: removes up to `count` matches from the head (count > 0), from the
/// tail (count < 0), or all of them (0).
pub(super) fn lrem(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(count) = int_arg(ctx, &args[2]) else {
        return;
    };
    let db = ctx.db();
    let key = &args[1][..];
    let wanted = &args[3][..];
    let list = match list_at(ctx.keys, db, key) {
        Err(WrongType) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
        Ok(None) => {
            ctx.reply.integer(0);
            return;
        }
        Ok(Some(list)) => list,
    };
    let limit = list.remove_matching(wanted, count);
    if limit > 0 {
        let removed = remove_if_empty(ctx.keys, db, key);
        ctx.keys.signal_modified(db, key);
        ctx.notify(notify::LIST, "lrem", key);
        if removed {
            ctx.notify(notify::GENERIC, "del", key);
        }
    }
    ctx.reply.integer(limit as i64);
}

pub(super) fn ltrim(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(start) = int_arg(ctx, &args[2]) else {
        return;
    };
    let Some(stop) = int_arg(ctx, &args[3]) else {
        return;
    };
    let db = ctx.db();
    let key = &args[1][..];
    match list_at(ctx.keys, db, key) {
        Err(WrongType) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
        Ok(None) => {
            ctx.reply.ok();
            return;
        }
        Ok(Some(list)) => match resolve_range(start, stop, list.len()) {
            None => list.clear(),
            Some((first, last)) => list.trim(first, last),
        },
    }
    let removed = remove_if_empty(ctx.keys, db, key);
    // Redis signals an LTRIM of an existing list even when it keeps every element.
    ctx.keys.signal_modified(db, key);
    ctx.notify(notify::LIST, "ltrim", key);
    if removed {
        ctx.notify(notify::GENERIC, "del", key);
    }
    ctx.reply.ok();
}

/// LINSERT key BEFORE|AFTER pivot element: the new length, -1 without the pivot, 0 without
/// the key.
pub(super) fn linsert(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let after = if is(&args[2], "AFTER") {
        true
    } else if is(&args[2], "BEFORE") {
        false
    } else {
        ctx.reply.error(err::SYNTAX);
        return;
    };
    let db = ctx.db();
    let key = &args[1][..];
    let list = match list_at(ctx.keys, db, key) {
        Err(WrongType) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
        Ok(None) => {
            ctx.reply.integer(0);
            return;
        }
        Ok(Some(list)) => list,
    };
    let pivot = Matcher::new(&args[3]);
    let (mut position, mut seen) = (None, 0);
    list.scan(0, |e| {
        if pivot.matches(e) {
            position = Some(seen);
            return false;
        }
        seen += 1;
        true
    });
    let Some(pivot) = position else {
        ctx.reply.integer(-1);
        return;
    };
    list.insert(pivot + usize::from(after), &args[4]);
    let len = list.len();
    ctx.keys.signal_modified(db, key);
    ctx.notify(notify::LIST, "linsert", key);
    ctx.reply.integer(len as i64);
}
