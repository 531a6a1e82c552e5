//! Ranges: ZRANGE (by rank, score or name, either direction) and its older forms, ZRANGESTORE,
//! ZCOUNT, ZLEXCOUNT, ZRANK, ZREVRANK, ZREMRANGEBYRANK, ZREMRANGEBYSCORE, ZREMRANGEBYLEX.
//!
//! Rank positions are found in O(log N) in the large form (see `SortedSet`).

use bytes::Bytes;
use latch_keyspace::zset::ScoreBound;
use latch_keyspace::{Member, SortedSet};

use super::{
    parse_score_bound, remove_if_empty, reply_scored, store_result, zset_at, LexRange, WrongType,
    NOT_FLOAT_RANGE, NOT_LEX_RANGE,
};
use crate::commands::{err, is, parse_i64, Ctx};
use crate::pubsub::notify;

/// What a range selects.
#[derive(Clone, Debug)]
enum Selector {
    /// Inclusive 0-based positions (negative count from the end), as ZRANGE without BY*.
    Rank {
        start: i64,
        stop: i64,
    },
    Score {
        min: ScoreBound,
        max: ScoreBound,
    },
    Lex(LexRange),
}

/// A parsed range request.
#[derive(Clone, Debug)]
struct RangeQuery {
    selector: Selector,
    reverse: bool,
    /// LIMIT offset count; `count` < 0 means no limit.
    offset: i64,
    count: i64,
    with_scores: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Decided by BYSCORE/BYLEX (rank when neither is given): ZRANGE, ZRANGESTORE.
    Auto,
    Rank,
    Score,
    Lex,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// Decided by REV: ZRANGE, ZRANGESTORE.
    Auto,
    Forward,
    Reverse,
}

/// Parses `<key> <min> <max> [options]` starting at `args[key_at]`, answering Redis' errors
/// on failure. `store` (ZRANGESTORE) refuses WITHSCORES.
fn parse_query(
    ctx: &mut Ctx<'_, '_>,
    args: &[Bytes],
    key_at: usize,
    store: bool,
    mut kind: Kind,
    mut direction: Direction,
) -> Option<RangeQuery> {
    let mut with_scores = false;
    let mut limit: Option<(i64, i64)> = None;
    let mut index = key_at + 3;
    while index < args.len() {
        let option = &args[index];
        let left = args.len() - index - 1;
        if !store && is(option, "WITHSCORES") {
            with_scores = true;
        } else if is(option, "LIMIT") && left >= 2 {
            let (Some(offset), Some(count)) =
                (parse_i64(&args[index + 1]), parse_i64(&args[index + 2]))
            else {
                ctx.reply.error(err::NOT_INTEGER);
                return None;
            };
            limit = Some((offset, count));
            index += 2;
        } else if direction == Direction::Auto && is(option, "REV") {
            direction = Direction::Reverse;
        } else if kind == Kind::Auto && is(option, "BYLEX") {
            kind = Kind::Lex;
        } else if kind == Kind::Auto && is(option, "BYSCORE") {
            kind = Kind::Score;
        } else {
            ctx.reply.error(err::SYNTAX);
            return None;
        }
        index += 1;
    }
    let reverse = direction == Direction::Reverse;
    if kind == Kind::Auto {
        kind = Kind::Rank;
    }
    if limit.is_some() && kind == Kind::Rank {
        ctx.reply.error(
            b"ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
        return None;
    }
    if with_scores && kind == Kind::Lex {
        ctx.reply
            .error(b"ERR syntax error, WITHSCORES not supported in combination with BYLEX");
        return None;
    }
    // Reversed score and name ranges are written max first.
    let (mut min_arg, mut max_arg) = (&args[key_at + 1][..], &args[key_at + 2][..]);
    if reverse && kind != Kind::Rank {
        std::mem::swap(&mut min_arg, &mut max_arg);
    }
    let selector = match kind {
        Kind::Rank | Kind::Auto => {
            let (Some(start), Some(stop)) = (parse_i64(min_arg), parse_i64(max_arg)) else {
                ctx.reply.error(err::NOT_INTEGER);
                return None;
            };
            Selector::Rank { start, stop }
        }
        Kind::Score => {
            let (Some(min), Some(max)) = (parse_score_bound(min_arg), parse_score_bound(max_arg))
            else {
                ctx.reply.error(NOT_FLOAT_RANGE);
                return None;
            };
            Selector::Score { min, max }
        }
        Kind::Lex => {
            let Some(range) = LexRange::parse(min_arg, max_arg) else {
                ctx.reply.error(NOT_LEX_RANGE);
                return None;
            };
            Selector::Lex(range)
        }
    };
    let (offset, count) = limit.unwrap_or((0, -1));
    Some(RangeQuery {
        selector,
        reverse,
        offset,
        count,
        with_scores: with_scores || store,
    })
}

/// Resolves an inclusive rank range against `len` members; `None` when empty.
fn resolve_ranks(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let stop = if stop < 0 { len + stop } else { stop };
    if start > stop || start >= len {
        return None;
    }
    Some((start as usize, stop.min(len - 1) as usize))
}

/// Applies LIMIT: a negative offset selects nothing, a negative count means no limit.
fn limited<'a>(
    items: impl Iterator<Item = (Member<'a>, f64)>,
    offset: i64,
    count: i64,
) -> Vec<(Member<'a>, f64)> {
    if offset < 0 {
        return Vec::new();
    }
    let offset = usize::try_from(offset).unwrap_or(usize::MAX);
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    items.skip(offset).take(count).collect()
}

/// The members a query selects, in reply order.
fn select<'a>(set: &'a SortedSet, query: &'a RangeQuery) -> Vec<(Member<'a>, f64)> {
    match &query.selector {
        Selector::Rank { start, stop } => match resolve_ranks(*start, *stop, set.len()) {
            None => Vec::new(),
            Some((first, last)) => {
                if query.reverse {
                    // Descending ranks first..=last are ascending ones counted from the end.
                    let len = set.len();
                    set.range_by_rank(len - 1 - last, len - first)
                        .rev()
                        .collect()
                } else {
                    set.range_by_rank(first, last + 1).collect()
                }
            }
        },
        Selector::Score { min, max } => {
            let members = set.range_by_score(*min, *max);
            if query.reverse {
                limited(members.rev(), query.offset, query.count)
            } else {
                limited(members, query.offset, query.count)
            }
        }
        Selector::Lex(range) => {
            limited(range.members(set, query.reverse), query.offset, query.count)
        }
    }
}

/// Runs a parsed query against `args[key_at]` and answers the selected members.
fn reply_range(ctx: &mut Ctx<'_, '_>, key: &[u8], query: &RangeQuery) {
    let db = ctx.db();
    match zset_at(ctx.keys, db, key) {
        Err(WrongType) => ctx.reply.error(err::WRONGTYPE),
        Ok(None) => ctx.reply.array(0),
        Ok(Some(set)) => match (&query.selector, query.reverse) {
            // A rank range is written as it is walked, with no list in between.
            (Selector::Rank { start, stop }, reverse) => {
                match resolve_ranks(*start, *stop, set.len()) {
                    None => ctx.reply.array(0),
                    Some((first, last)) if reverse => {
                        let len = set.len();
                        let members = set.range_by_rank(len - 1 - last, len - first).rev();
                        reply_scored(ctx.reply, members, query.with_scores);
                    }
                    Some((first, last)) => {
                        let members = set.range_by_rank(first, last + 1);
                        reply_scored(ctx.reply, members, query.with_scores);
                    }
                }
            }
            _ => {
                let selected = select(set, query);
                reply_scored(ctx.reply, selected.into_iter(), query.with_scores);
            }
        },
    }
}

fn range_command(ctx: &mut Ctx<'_, '_>, args: &[Bytes], kind: Kind, direction: Direction) {
    if let Some(query) = parse_query(ctx, args, 1, false, kind, direction) {
        reply_range(ctx, &args[1], &query);
    }
}

pub(super) fn zrange(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    range_command(ctx, args, Kind::Auto, Direction::Auto);
}

pub(super) fn zrevrange(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    range_command(ctx, args, Kind::Rank, Direction::Reverse);
}

pub(super) fn zrangebyscore(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    range_command(ctx, args, Kind::Score, Direction::Forward);
}

pub(super) fn zrevrangebyscore(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    range_command(ctx, args, Kind::Score, Direction::Reverse);
}

pub(super) fn zrangebylex(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    range_command(ctx, args, Kind::Lex, Direction::Forward);
}

pub(super) fn zrevrangebylex(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    range_command(ctx, args, Kind::Lex, Direction::Reverse);
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count].
pub(super) fn zrangestore(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(query) = parse_query(ctx, args, 2, true, Kind::Auto, Direction::Auto) else {
        return;
    };
    let db = ctx.db();
    let mut result = SortedSet::new();
    // The source is read (a miss is reported).
    ctx.lookups_read(true);
    match zset_at(ctx.keys, db, &args[2]) {
        Err(WrongType) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
        Ok(None) => {}
        Ok(Some(set)) => {
            for (member, score) in select(set, &query) {
                result.insert(&member, score);
            }
        }
    }
    ctx.lookups_read(false);
    store_result(ctx, &args[1], result, "zrangestore");
}

pub(super) fn zcount(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let (Some(min), Some(max)) = (parse_score_bound(&args[2]), parse_score_bound(&args[3])) else {
        ctx.reply.error(NOT_FLOAT_RANGE);
        return;
    };
    let db = ctx.db();
    match zset_at(ctx.keys, db, &args[1]) {
        Err(WrongType) => ctx.reply.error(err::WRONGTYPE),
        Ok(None) => ctx.reply.integer(0),
        Ok(Some(set)) => ctx.reply.integer(set.range_by_score(min, max).len() as i64),
    }
}

pub(super) fn zlexcount(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(range) = LexRange::parse(&args[2], &args[3]) else {
        ctx.reply.error(NOT_LEX_RANGE);
        return;
    };
    let db = ctx.db();
    match zset_at(ctx.keys, db, &args[1]) {
        Err(WrongType) => ctx.reply.error(err::WRONGTYPE),
        Ok(None) => ctx.reply.integer(0),
        Ok(Some(set)) => ctx.reply.integer(range.members(set, false).count() as i64),
    }
}

fn rank_command(ctx: &mut Ctx<'_, '_>, args: &[Bytes], reverse: bool) {
    let db = ctx.db();
    match zset_at(ctx.keys, db, &args[1]) {
        Err(WrongType) => ctx.reply.error(err::WRONGTYPE),
        Ok(None) => ctx.reply.null(),
        Ok(Some(set)) => match set.rank(&args[2]) {
            None => ctx.reply.null(),
            Some(rank) => {
                let rank = if reverse { set.len() - 1 - rank } else { rank };
                ctx.reply.integer(rank as i64);
            }
        },
    }
}

pub(super) fn zrank(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    rank_command(ctx, args, false);
}

pub(super) fn zrevrank(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    rank_command(ctx, args, true);
}

/// Removes the members `selector` picks from `args[1]` and answers how many.
/// `event` is what a removal reports.
fn remove_range(ctx: &mut Ctx<'_, '_>, key: &[u8], selector: Selector, event: &'static str) {
    let db = ctx.db();
    let query = RangeQuery {
        selector,
        reverse: false,
        offset: 0,
        count: -1,
        with_scores: false,
    };
    let set = match zset_at(ctx.keys, db, key) {
        Err(WrongType) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
        Ok(None) => {
            ctx.reply.integer(0);
            return;
        }
        Ok(Some(set)) => set,
    };
    let doomed: Vec<Vec<u8>> = select(set, &query)
        .into_iter()
        .map(|(member, _)| member.to_vec())
        .collect();
    for member in &doomed {
        set.remove(member);
    }
    if !doomed.is_empty() {
        let removed = remove_if_empty(ctx.keys, db, key);
        ctx.keys.signal_modified(db, key);
        ctx.notify(notify::ZSET, event, key);
        if removed {
            ctx.notify(notify::GENERIC, "del", key);
        }
    }
    ctx.reply.integer(doomed.len() as i64);
}

pub(super) fn zremrangebyrank(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let (Some(start), Some(stop)) = (parse_i64(&args[2]), parse_i64(&args[3])) else {
        ctx.reply.error(err::NOT_INTEGER);
        return;
    };
    remove_range(
        ctx,
        &args[1],
        Selector::Rank { start, stop },
        "zremrangebyrank",
    );
}

pub(super) fn zremrangebyscore(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let (Some(min), Some(max)) = (parse_score_bound(&args[2]), parse_score_bound(&args[3])) else {
        ctx.reply.error(NOT_FLOAT_RANGE);
        return;
    };
    remove_range(
        ctx,
        &args[1],
        Selector::Score { min, max },
        "zremrangebyscore",
    );
}

pub(super) fn zremrangebylex(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(range) = LexRange::parse(&args[2], &args[3]) else {
        ctx.reply.error(NOT_LEX_RANGE);
        return;
    };
    remove_range(ctx, &args[1], Selector::Lex(range), "zremrangebylex");
}
