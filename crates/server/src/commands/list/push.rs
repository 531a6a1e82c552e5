//! Adding at the ends: LPUSH, RPUSH, LPUSHX, RPUSHX.

use bytes::Bytes;
use latch_keyspace::Value;

use super::{list_at, push_at, End, List, WrongType};
use crate::commands::{err, Ctx};
use crate::pubsub::notify;

pub(super) fn lpush(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    push_generic(ctx, args, End::Head, false);
}

pub(super) fn rpush(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    push_generic(ctx, args, End::Tail, false);
}

pub(super) fn lpushx(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    push_generic(ctx, args, End::Head, true);
}

pub(super) fn rpushx(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    push_generic(ctx, args, End::Tail, true);
}

/// `args[2..]` pushed one by one at `end` (so LPUSH a b c leaves c first); with
/// `only_existing` a missing key answers 0 and stays missing.
fn push_generic(ctx: &mut Ctx<'_, '_>, args: &[Bytes], end: End, only_existing: bool) {
    let db = ctx.db();
    let key = &args[1][..];
    let elements = &args[2..];
    let len = match list_at(ctx.keys, db, key) {
        Err(WrongType) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
        Ok(Some(list)) => {
            for element in elements {
                push_at(list, end, element);
            }
            list.len()
        }
        Ok(None) if only_existing => {
            ctx.reply.integer(0);
            return;
        }
        Ok(None) => {
            let mut list = List::new();
            for element in elements {
                push_at(&mut list, end, element);
            }
            let len = list.len();
            ctx.keys.set(db, key, Value::List(list), None);
            len
        }
    };
    ctx.keys.signal_modified(db, key);
    ctx.notify(notify::LIST, end.push_event(), key);
    ctx.reply.integer(len as i64);
}
