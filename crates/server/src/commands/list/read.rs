//! Reading lists: LRANGE, LLEN, LINDEX, LPOS.

use bytes::Bytes;

use latch_keyspace::list::Matcher;
use latch_keyspace::Elem;

use super::{list_at, reply_elem, resolve_index, resolve_range, WrongType};
use crate::commands::{err, int_arg, is, parse_i64, Ctx};

pub(super) fn lrange(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(start) = int_arg(ctx, &args[2]) else {
        return;
    };
    let Some(stop) = int_arg(ctx, &args[3]) else {
        return;
    };
    let db = ctx.db();
    match list_at(ctx.keys, db, &args[1]) {
        Err(WrongType) => ctx.reply.error(err::WRONGTYPE),
        Ok(None) => ctx.reply.array(0),
        Ok(Some(list)) => match resolve_range(start, stop, list.len()) {
            None => ctx.reply.array(0),
            Some((first, last)) => {
                ctx.reply.array(last - first + 1);
                let reply = &mut *ctx.reply;
                list.for_each_in(first, last - first + 1, |element| {
                    reply_elem(reply, element)
                });
            }
        },
    }
}

pub(super) fn llen(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    match list_at(ctx.keys, db, &args[1]) {
        Err(WrongType) => ctx.reply.error(err::WRONGTYPE),
        Ok(None) => ctx.reply.integer(0),
        Ok(Some(list)) => ctx.reply.integer(list.len() as i64),
    }
}

pub(super) fn lindex(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    // As in Redis, the key is looked at before the index is parsed.
    let list = match list_at(ctx.keys, db, &args[1]) {
        Err(WrongType) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
        Ok(None) => {
            ctx.reply.null();
            return;
        }
        Ok(Some(list)) => list,
    };
    let Some(index) = parse_i64(&args[2]) else {
        ctx.reply.error(err::NOT_INTEGER);
        return;
    };
    let reply = &mut *ctx.reply;
    let found = resolve_index(index, list.len())
        .and_then(|i| list.get_with(i, |element| reply_elem(reply, element)));
    if found.is_none() {
        reply.null();
    }
}

const RANK_ZERO: &[u8] = b"ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list";

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len].
pub(super) fn lpos(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let mut rank: i64 = 1;
    // None: no COUNT given (a single index or nil is answered); Some(0): every match.
    let mut count: Option<u64> = None;
    let mut max_len: u64 = 0;
    let mut index = 3;
    while index < args.len() {
        let has_value = index + 1 < args.len();
        let option = &args[index];
        if is(option, "RANK") && has_value {
            let Some(n) = int_arg(ctx, &args[index + 1]) else {
                return;
            };
            if n == 0 {
                ctx.reply.error(RANK_ZERO);
                return;
            }
            rank = n;
        } else if is(option, "COUNT") && has_value {
            match parse_i64(&args[index + 1]).filter(|n| *n >= 0) {
                Some(n) => count = Some(n as u64),
                None => {
                    ctx.reply.error(b"ERR COUNT can't be negative");
                    return;
                }
            }
        } else if is(option, "MAXLEN") && has_value {
            match parse_i64(&args[index + 1]).filter(|n| *n >= 0) {
                Some(n) => max_len = n as u64,
                None => {
                    ctx.reply.error(b"ERR MAXLEN can't be negative");
                    return;
                }
            }
        } else {
            ctx.reply.error(err::SYNTAX);
            return;
        }
        index += 2;
    }
    let db = ctx.db();
    let wanted = &args[2][..];
    let list = match list_at(ctx.keys, db, &args[1]) {
        Err(WrongType) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
        Ok(None) => {
            if count.is_some() {
                ctx.reply.array(0);
            } else {
                ctx.reply.null();
            }
            return;
        }
        Ok(Some(list)) => list,
    };
    let from_tail = rank < 0;
    let skip_matches = rank.unsigned_abs() - 1;
    let len = list.len();
    let scan_limit = if max_len == 0 {
        len
    } else {
        usize::try_from(max_len).unwrap_or(usize::MAX).min(len)
    };
    let matcher = Matcher::new(wanted);
    let wanted_count = match count {
        None => 1,
        Some(0) => usize::MAX,
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
    };
    let skip = usize::try_from(skip_matches).unwrap_or(usize::MAX);
    // Scans at most `scan_limit` elements from the chosen end, skipping the first
    // `skip` matches and keeping up to `wanted_count` positions.
    let mut found: Vec<usize> = Vec::new();
    let (mut scanned, mut skipped) = (0, 0);
    let mut visit = |e: Elem<'_>| {
        if scanned == scan_limit || found.len() == wanted_count {
            return false;
        }
        let position = if from_tail {
            len - 1 - scanned
        } else {
            scanned
        };
        scanned += 1;
        if matcher.matches(e) {
            if skipped < skip {
                skipped += 1;
            } else {
                found.push(position);
            }
        }
        scanned < scan_limit && found.len() < wanted_count
    };
    if from_tail {
        list.scan_rev(&mut visit);
    } else {
        list.scan(0, &mut visit);
    }
    match count {
        None => match found.first() {
            Some(&position) => ctx.reply.integer(position as i64),
            None => ctx.reply.null(),
        },
        Some(_) => {
            ctx.reply.array(found.len());
            for position in found {
                ctx.reply.integer(position as i64);
            }
        }
    }
}
