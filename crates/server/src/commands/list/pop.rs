//! Taking from the ends: LPOP, RPOP, LMPOP, LMOVE, RPOPLPUSH, and their blocking forms
//! BLPOP, BRPOP, BLMPOP, BLMOVE, BRPOPLPUSH (which block through [`gate::block`] when there
//! is nothing to take, and run again when a key may serve them).

use bytes::Bytes;
use latch_keyspace::Value;

use super::{list_at, pop_at, push_at, remove_if_empty, End, List, WrongType};
use crate::commands::{err, parse_i64, Ctx};
use crate::gate;
use crate::pubsub::notify;

pub(super) fn lpop(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    pop_generic(ctx, args, End::Head);
}

pub(super) fn rpop(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    pop_generic(ctx, args, End::Tail);
}

/// Parses a non-negative count the way Redis' `getPositiveLongFromObjectOrReply` does:
/// anything else (a non-number included) gets the same "must be positive" error.
fn positive_count(arg: &[u8]) -> Option<usize> {
    parse_i64(arg)
        .filter(|n| *n >= 0)
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
}

/// Pops up to `count` elements from `end` of the list under `key` (which must exist and be a
/// list), removing the key when it empties. The elements come in pop order.
fn pop_many(ctx: &mut Ctx<'_, '_>, key: &[u8], end: End, count: usize) -> Vec<Vec<u8>> {
    let db = ctx.db();
    let mut popped = Vec::new();
    if let Ok(Some(list)) = list_at(ctx.keys, db, key) {
        let take = count.min(list.len());
        popped.reserve(take);
        for _ in 0..take {
            if let Some(element) = pop_at(list, end) {
                popped.push(element);
            }
        }
    }
    if !popped.is_empty() {
        let removed = remove_if_empty(ctx.keys, db, key);
        ctx.keys.signal_modified(db, key);
        ctx.notify(notify::LIST, end.pop_event(), key);
        if removed {
            ctx.notify(notify::GENERIC, "del", key);
        }
    }
    popped
}

/// LPOP/RPOP key [count]: without a count one bulk (nil when there is no key); with one an
/// array (a null array when there is no key, empty for a count of 0).
fn pop_generic(ctx: &mut Ctx<'_, '_>, args: &[Bytes], end: End) {
    if args.len() > 3 {
        let name = String::from_utf8_lossy(&args[0]).to_lowercase();
        ctx.reply.error(&crate::commands::arity_error(&name));
        return;
    }
    let count = match args.get(2) {
        None => None,
        Some(arg) => match positive_count(arg) {
            Some(n) => Some(n),
            None => {
                ctx.reply.error(err::NOT_POSITIVE);
                return;
            }
        },
    };
    let db = ctx.db();
    let key = &args[1][..];
    match list_at(ctx.keys, db, key) {
        Err(WrongType) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
        Ok(None) => {
            if count.is_some() {
                ctx.reply.null_array();
            } else {
                ctx.reply.null();
            }
            return;
        }
        Ok(Some(_)) => {}
    }
    match count {
        None => match pop_many(ctx, key, end, 1).pop() {
            Some(element) => ctx.reply.bulk(&element),
            None => ctx.reply.null(),
        },
        Some(count) => {
            let popped = pop_many(ctx, key, end, count);
            ctx.reply.array(popped.len());
            for element in &popped {
                ctx.reply.bulk(element);
            }
        }
    }
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]: pops from the first key holding a
/// non-empty list and answers `[key, [elements]]`, or a null array when every key is empty.
pub(super) fn lmpop(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(request) = parse_mpop(ctx, args, 1) else {
        return;
    };
    serve_mpop(ctx, &request);
}

/// A parsed [B]LMPOP: where its keys are, which end, how many elements.
pub(super) struct MpopRequest<'a> {
    pub keys: &'a [Bytes],
    pub end: End,
    pub count: usize,
}

/// Parses `numkeys key... LEFT|RIGHT [COUNT n]` starting at `args[numkeys_at]`, answering
/// Redis' errors on failure.
pub(super) fn parse_mpop<'a>(
    ctx: &mut Ctx<'_, '_>,
    args: &'a [Bytes],
    numkeys_at: usize,
) -> Option<MpopRequest<'a>> {
    let numkeys = parse_i64(&args[numkeys_at]).filter(|n| *n > 0);
    let Some(numkeys) = numkeys else {
        ctx.reply.error(b"ERR numkeys should be greater than 0");
        return None;
    };
    let first_key = numkeys_at + 1;
    let where_at = usize::try_from(numkeys)
        .ok()
        .and_then(|n| first_key.checked_add(n))
        .filter(|at| *at < args.len());
    let Some(where_at) = where_at else {
        ctx.reply.error(err::SYNTAX);
        return None;
    };
    let Some(end) = End::parse(&args[where_at]) else {
        ctx.reply.error(err::SYNTAX);
        return None;
    };
    let count = crate::commands::mpop_count(ctx.reply, &args[where_at + 1..])?;
    Some(MpopRequest {
        keys: &args[first_key..where_at],
        end,
        count,
    })
}

/// Serves an [B]LMPOP from the first non-empty list. Returns false (having answered
/// nothing) when every key is empty, so a blocking caller can wait; true after replying
/// (elements or WRONGTYPE).
pub(super) fn try_mpop(ctx: &mut Ctx<'_, '_>, request: &MpopRequest<'_>) -> bool {
    let db = ctx.db();
    let retry = gate::is_retry(ctx);
    for key in request.keys {
        match list_at(ctx.keys, db, key) {
            // A blocked client is served only by lists (as in Redis).
            Err(WrongType) if retry => continue,
            Err(WrongType) => {
                ctx.reply.error(err::WRONGTYPE);
                return true;
            }
            Ok(None) => continue,
            Ok(Some(list)) if list.is_empty() => continue,
            Ok(Some(_)) => {}
        }
        let popped = pop_many(ctx, key, request.end, request.count);
        ctx.reply.array(2);
        ctx.reply.bulk(key);
        ctx.reply.array(popped.len());
        for element in &popped {
            ctx.reply.bulk(element);
        }
        // Logged as the plain pop it amounted to (with the count it took), as Redis does.
        ctx.propagate_with(|| {
            vec![
                pop_command(request.end),
                key.clone(),
                Bytes::from(popped.len().to_string()),
            ]
        });
        return true;
    }
    false
}

fn serve_mpop(ctx: &mut Ctx<'_, '_>, request: &MpopRequest<'_>) {
    if !try_mpop(ctx, request) {
        ctx.reply.null_array();
    }
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT.
pub(super) fn lmove(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let (Some(from), Some(to)) = (End::parse(&args[3]), End::parse(&args[4])) else {
        ctx.reply.error(err::SYNTAX);
        return;
    };
    move_generic(ctx, &args[1], &args[2], from, to);
}

/// RPOPLPUSH source destination: LMOVE source destination RIGHT LEFT.
pub(super) fn rpoplpush(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    move_generic(ctx, &args[1], &args[2], End::Tail, End::Head);
}

/// Outcome of trying to move one element.
pub(super) enum Moved {
    /// The source had nothing; nothing was answered.
    SourceEmpty,
    /// Moved and answered.
    Done,
    /// Answered WRONGTYPE.
    Refused,
}

/// Moves one element from `from` of `source` to `to` of `destination` (which may be the same
/// key) and answers it. A missing source answers nothing and returns `SourceEmpty`.
pub(super) fn try_move(
    ctx: &mut Ctx<'_, '_>,
    source: &[u8],
    destination: &[u8],
    from: End,
    to: End,
) -> Moved {
    let db = ctx.db();
    match list_at(ctx.keys, db, source) {
        Err(WrongType) => {
            ctx.reply.error(err::WRONGTYPE);
            return Moved::Refused;
        }
        Ok(None) => return Moved::SourceEmpty,
        Ok(Some(list)) if list.is_empty() => return Moved::SourceEmpty,
        Ok(Some(_)) => {}
    }
    // The destination's type is checked before anything is popped.
    if destination != source && list_at(ctx.keys, db, destination).is_err() {
        ctx.reply.error(err::WRONGTYPE);
        return Moved::Refused;
    }
    let element = match list_at(ctx.keys, db, source) {
        Ok(Some(list)) => pop_at(list, from),
        _ => None,
    };
    let Some(element) = element else {
        return Moved::SourceEmpty;
    };
    match list_at(ctx.keys, db, destination) {
        Ok(Some(list)) => push_at(list, to, &element),
        _ => {
            let mut list = List::new();
            list.push_back(&element);
            ctx.keys.set(db, destination, Value::List(list), None);
        }
    }
    ctx.keys.signal_modified(db, destination);
    ctx.notify(notify::LIST, to.push_event(), destination);
    let removed = remove_if_empty(ctx.keys, db, source);
    ctx.keys.signal_modified(db, source);
    ctx.notify(notify::LIST, from.pop_event(), source);
    if removed {
        ctx.notify(notify::GENERIC, "del", source);
    }
    ctx.reply.bulk(&element);
    Moved::Done
}

fn move_generic(ctx: &mut Ctx<'_, '_>, source: &[u8], destination: &[u8], from: End, to: End) {
    if let Moved::SourceEmpty = try_move(ctx, source, destination, from, to) {
        ctx.reply.null();
    }
}

/// BLPOP key [key ...] timeout.
pub(super) fn blpop(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    blocking_pop(ctx, args, End::Head);
}

/// BRPOP key [key ...] timeout.
pub(super) fn brpop(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    blocking_pop(ctx, args, End::Tail);
}

/// B[LR]POP: `[key, element]` from the first non-empty list, else block on every key.
fn blocking_pop(ctx: &mut Ctx<'_, '_>, args: &[Bytes], end: End) {
    let Some(timeout) = gate::block_timeout(ctx.reply, &args[args.len() - 1]) else {
        return;
    };
    let keys = &args[1..args.len() - 1];
    let db = ctx.db();
    let retry = gate::is_retry(ctx);
    for key in keys {
        match list_at(ctx.keys, db, key) {
            Err(WrongType) if retry => continue,
            Err(WrongType) => {
                ctx.reply.error(err::WRONGTYPE);
                return;
            }
            Ok(None) => continue,
            Ok(Some(list)) if list.is_empty() => continue,
            Ok(Some(_)) => {}
        }
        if let Some(element) = pop_many(ctx, key, end, 1).pop() {
            ctx.reply.array(2);
            ctx.reply.bulk(key);
            ctx.reply.bulk(&element);
            // Logged as the plain pop it amounted to, as Redis does.
            ctx.propagate_with(|| vec![pop_command(end), key.clone()]);
            return;
        }
    }
    gate::block(ctx, args, keys, timeout, false);
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count].
pub(super) fn blmpop(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    // Redis checks the other arguments before the timeout.
    let Some(request) = parse_mpop(ctx, args, 2) else {
        return;
    };
    let Some(timeout) = gate::block_timeout(ctx.reply, &args[1]) else {
        return;
    };
    if !try_mpop(ctx, &request) {
        gate::block(ctx, args, request.keys, timeout, false);
    }
}

/// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout.
pub(super) fn blmove(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let (Some(from), Some(to)) = (End::parse(&args[3]), End::parse(&args[4])) else {
        ctx.reply.error(err::SYNTAX);
        return;
    };
    let Some(timeout) = gate::block_timeout(ctx.reply, &args[5]) else {
        return;
    };
    blocking_move(ctx, args, from, to, timeout, b"LMOVE");
}

/// BRPOPLPUSH source destination timeout: BLMOVE source destination RIGHT LEFT timeout.
pub(super) fn brpoplpush(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(timeout) = gate::block_timeout(ctx.reply, &args[3]) else {
        return;
    };
    blocking_move(ctx, args, End::Tail, End::Head, timeout, b"RPOPLPUSH");
}

/// Moves one element as LMOVE does, or blocks on the source. A retry answers WRONGTYPE for
/// a destination of another type (as Redis does) but keeps waiting while the source is not
/// a list. A move is logged as `plain` (LMOVE or RPOPLPUSH), the command it amounted to.
fn blocking_move(
    ctx: &mut Ctx<'_, '_>,
    args: &[Bytes],
    from: End,
    to: End,
    timeout: Option<std::time::Duration>,
    plain: &'static [u8],
) {
    let (source, destination) = (&args[1], &args[2]);
    let db = ctx.db();
    let retry = gate::is_retry(ctx);
    if retry && list_at(ctx.keys, db, source).is_err() {
        return;
    }
    match try_move(ctx, source, destination, from, to) {
        Moved::SourceEmpty => gate::block(ctx, args, &args[1..2], timeout, true),
        Moved::Refused => {}
        Moved::Done => ctx.propagate_with(|| {
            let mut logged = vec![
                Bytes::from_static(plain),
                source.clone(),
                destination.clone(),
            ];
            if plain == b"LMOVE" {
                // Redis logs the directions as given, or in its own words once the client
                // was served after blocking.
                if retry {
                    logged.extend([end_word(from), end_word(to)]);
                } else {
                    logged.extend([args[3].clone(), args[4].clone()]);
                }
            }
            logged
        }),
    }
}

/// The plain pop from `end`: `LPOP` or `RPOP`.
fn pop_command(end: End) -> Bytes {
    Bytes::from_static(match end {
        End::Head => b"LPOP",
        End::Tail => b"RPOP",
    })
}

/// `left` or `right`, as Redis spells a direction it logs.
fn end_word(end: End) -> Bytes {
    Bytes::from_static(match end {
        End::Head => b"left",
        End::Tail => b"right",
    })
}
