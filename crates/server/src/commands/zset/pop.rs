//! Taking members out: ZPOPMIN, ZPOPMAX, ZMPOP and their blocking forms BZPOPMIN,
//! BZPOPMAX, BZMPOP (which block through [`gate::block`] when there is nothing to take);
//! and sampling them: ZRANDMEMBER.

use bytes::Bytes;
use latch_keyspace::Member;
use latch_protocol::Resp;
use rand::Rng;

use super::{remove_if_empty, reply_scored, reply_scored_until, zset_at, WrongType};
use crate::commands::{err, is, parse_i64, Ctx};
use crate::gate;
use crate::pubsub::notify;

/// Which end of the order a pop takes from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Extreme {
    Min,
    Max,
}

impl Extreme {
    /// The plain pop from this end (what the other pops are logged as).
    fn pop_command(self) -> Bytes {
        Bytes::from_static(match self {
            Extreme::Min => b"ZPOPMIN",
            Extreme::Max => b"ZPOPMAX",
        })
    }
}

/// Pops up to `count` members from `key` (which must hold a sorted set), removing the key
/// when it empties. Members come in pop order.
fn pop_members(
    ctx: &mut Ctx<'_, '_>,
    key: &[u8],
    extreme: Extreme,
    count: usize,
) -> Vec<(Vec<u8>, f64)> {
    let db = ctx.db();
    let mut popped = Vec::new();
    if let Ok(Some(set)) = zset_at(ctx.keys, db, key) {
        let take = count.min(set.len());
        popped.reserve(take);
        for _ in 0..take {
            let next = match extreme {
                Extreme::Min => set.pop_min(),
                Extreme::Max => set.pop_max(),
            };
            if let Some(pair) = next {
                popped.push(pair);
            }
        }
    }
    if !popped.is_empty() {
        let emptied = remove_if_empty(ctx.keys, db, key);
        ctx.keys.signal_modified(db, key);
        let event = match extreme {
            Extreme::Min => "zpopmin",
            Extreme::Max => "zpopmax",
        };
        ctx.notify(notify::ZSET, event, key);
        if emptied {
            ctx.notify(notify::GENERIC, "del", key);
        }
    }
    popped
}

pub(super) fn zpopmin(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    pop_command(ctx, args, Extreme::Min);
}

pub(super) fn zpopmax(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    pop_command(ctx, args, Extreme::Max);
}

/// ZPOPMIN/ZPOPMAX key [count]: a flat `[member, score, ...]` array, except that with a count
/// RESP3 gets `[member, score]` pairs. A missing key gives an empty array.
fn pop_command(ctx: &mut Ctx<'_, '_>, args: &[Bytes], extreme: Extreme) {
    if args.len() > 3 {
        ctx.reply.error(err::SYNTAX);
        return;
    }
    let count = match args.get(2) {
        None => None,
        Some(arg) => match parse_i64(arg).filter(|n| *n >= 0) {
            Some(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            None => {
                ctx.reply.error(err::NOT_POSITIVE);
                return;
            }
        },
    };
    let db = ctx.db();
    let key = &args[1][..];
    match zset_at(ctx.keys, db, key) {
        Err(WrongType) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
        Ok(None) => {
            ctx.reply.array(0);
            return;
        }
        Ok(Some(_)) => {}
    }
    let popped = pop_members(ctx, key, extreme, count.unwrap_or(1));
    let pairs = count.is_some() && ctx.reply.resp() == Resp::V3;
    let items = popped.iter().map(|(m, s)| (m.as_slice(), *s));
    if pairs {
        reply_scored(ctx.reply, items, true);
    } else {
        ctx.reply.array(popped.len() * 2);
        for (member, score) in items {
            ctx.reply.bulk(member);
            ctx.reply.double(score);
        }
    }
}

/// A parsed [B]ZMPOP.
pub(super) struct MpopRequest<'a> {
    pub keys: &'a [Bytes],
    pub extreme: Extreme,
    pub count: usize,
}

/// Parses `numkeys key... MIN|MAX [COUNT n]` starting at `args[numkeys_at]`, answering
/// Redis' errors on failure.
pub(super) fn parse_mpop<'a>(
    ctx: &mut Ctx<'_, '_>,
    args: &'a [Bytes],
    numkeys_at: usize,
) -> Option<MpopRequest<'a>> {
    let Some(numkeys) = parse_i64(&args[numkeys_at]).filter(|n| *n > 0) else {
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
    let extreme = if is(&args[where_at], "MIN") {
        Extreme::Min
    } else if is(&args[where_at], "MAX") {
        Extreme::Max
    } else {
        ctx.reply.error(err::SYNTAX);
        return None;
    };
    let count = crate::commands::mpop_count(ctx.reply, &args[where_at + 1..])?;
    Some(MpopRequest {
        keys: &args[first_key..where_at],
        extreme,
        count,
    })
}

/// Serves a [B]ZMPOP from the first key holding a sorted set: `[key, [[member, score], ...]]`.
/// Returns false, having answered nothing, when no key holds one.
pub(super) fn try_mpop(ctx: &mut Ctx<'_, '_>, request: &MpopRequest<'_>) -> bool {
    let db = ctx.db();
    let retry = gate::is_retry(ctx);
    for key in request.keys {
        match zset_at(ctx.keys, db, key) {
            // A blocked client is served only by sorted sets (as in Redis).
            Err(WrongType) if retry => continue,
            Err(WrongType) => {
                ctx.reply.error(err::WRONGTYPE);
                return true;
            }
            Ok(None) => continue,
            Ok(Some(_)) => {}
        }
        let popped = pop_members(ctx, key, request.extreme, request.count);
        ctx.reply.array(2);
        ctx.reply.bulk(key);
        ctx.reply.array(popped.len());
        for (member, score) in &popped {
            ctx.reply.array(2);
            ctx.reply.bulk(member);
            ctx.reply.double(*score);
        }
        // Logged as the plain pop it amounted to (with the count it took), as Redis does.
        ctx.propagate_with(|| {
            vec![
                request.extreme.pop_command(),
                key.clone(),
                Bytes::from(popped.len().to_string()),
            ]
        });
        return true;
    }
    false
}

pub(super) fn zmpop(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(request) = parse_mpop(ctx, args, 1) else {
        return;
    };
    if !try_mpop(ctx, &request) {
        ctx.reply.null_array();
    }
}

pub(super) fn bzpopmin(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    blocking_pop(ctx, args, Extreme::Min);
}

pub(super) fn bzpopmax(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    blocking_pop(ctx, args, Extreme::Max);
}

/// BZPOPMIN/BZPOPMAX key [key ...] timeout: `[key, member, score]` from the first key holding
/// a sorted set, else block on every key.
fn blocking_pop(ctx: &mut Ctx<'_, '_>, args: &[Bytes], extreme: Extreme) {
    let Some(timeout) = gate::block_timeout(ctx.reply, &args[args.len() - 1]) else {
        return;
    };
    let keys = &args[1..args.len() - 1];
    let db = ctx.db();
    let retry = gate::is_retry(ctx);
    for key in keys {
        match zset_at(ctx.keys, db, key) {
            Err(WrongType) if retry => continue,
            Err(WrongType) => {
                ctx.reply.error(err::WRONGTYPE);
                return;
            }
            Ok(None) => continue,
            Ok(Some(_)) => {}
        }
        if let Some((member, score)) = pop_members(ctx, key, extreme, 1).pop() {
            ctx.reply.array(3);
            ctx.reply.bulk(key);
            ctx.reply.bulk(&member);
            ctx.reply.double(score);
            // Logged as the plain pop it amounted to, as Redis does.
            ctx.propagate_with(|| vec![extreme.pop_command(), key.clone()]);
            return;
        }
    }
    gate::block(ctx, args, keys, timeout, false);
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count].
pub(super) fn bzmpop(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
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

/// ZRANDMEMBER key [count [WITHSCORES]].
pub(super) fn zrandmember(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let key = &args[1][..];
    if args.len() == 2 {
        match zset_at(ctx.keys, db, key) {
            Err(WrongType) => ctx.reply.error(err::WRONGTYPE),
            Ok(None) => ctx.reply.null(),
            Ok(Some(set)) => {
                let pick = rand::thread_rng().gen_range(0..set.len().max(1));
                match set.nth(pick) {
                    Some((member, _)) => ctx.reply.bulk(&member),
                    None => ctx.reply.null(),
                }
            }
        }
        return;
    }
    let Some(count) = parse_i64(&args[2]) else {
        ctx.reply.error(err::NOT_INTEGER);
        return;
    };
    if count == i64::MIN {
        ctx.reply.error(
            b"ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        );
        return;
    }
    let with_scores = match args.get(3) {
        None => false,
        Some(arg) if args.len() == 4 && is(arg, "WITHSCORES") => true,
        Some(_) => {
            ctx.reply.error(err::SYNTAX);
            return;
        }
    };
    if with_scores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        ctx.reply.error(b"ERR value is out of range");
        return;
    }
    let set = match zset_at(ctx.keys, db, key) {
        Err(WrongType) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
        Ok(None) => {
            ctx.reply.array(0);
            return;
        }
        Ok(Some(set)) => set,
    };
    let len = set.len();
    let mut rng = rand::thread_rng();
    let wanted = count.unsigned_abs();
    if count == 0 || len == 0 {
        ctx.reply.array(0);
        return;
    }
    // Snapshot (member, score) once: picking by position is then O(1).
    let members: Vec<(Member<'_>, f64)> = set.iter().collect();
    if count < 0 || wanted == 1 {
        let Some(stop_at) =
            crate::commands::set::random::repeated_picks_stop(ctx.server, ctx.client, wanted)
        else {
            ctx.reply.error(b"ERR value is out of range");
            return;
        };
        // Past the usual bound, the picks stop once the reply passes the client's limit.
        let entries = usize::try_from(wanted).unwrap_or(usize::MAX);
        let picks = (0..entries).map(|_| members[rng.gen_range(0..len)]);
        reply_scored_until(ctx.reply, entries, picks, with_scores, stop_at);
        return;
    }
    if wanted >= len as u64 {
        // Redis walks the set from its highest member here.
        reply_scored(ctx.reply, members.into_iter().rev(), with_scores);
        return;
    }
    // Distinct members: a partial Fisher-Yates shuffle of positions.
    let wanted = wanted as usize;
    let mut positions: Vec<usize> = (0..len).collect();
    for i in 0..wanted {
        let j = rng.gen_range(i..len);
        positions.swap(i, j);
    }
    let picks = positions[..wanted].iter().map(|&p| members[p]);
    reply_scored(ctx.reply, picks, with_scores);
}
