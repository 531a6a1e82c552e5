//! Members one by one: ZADD, ZINCRBY, ZREM, ZSCORE, ZMSCORE, ZCARD.

use bytes::Bytes;
use latch_keyspace::{SortedSet, Value};

use super::{remove_if_empty, zset_at, WrongType};
use crate::commands::{err, is, parse_f64, Ctx};
use crate::pubsub::notify;

/// ZADD's modifiers.
#[derive(Clone, Copy, Default)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// What adding one member did.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Added,
    Updated,
    /// Processed but the score did not change.
    Unchanged,
    /// Skipped by NX, XX, GT or LT.
    Skipped,
    /// The increment made the score NaN (inf + -inf).
    NotANumber,
}

/// Adds or updates one member under ZADD's rules; `score` becomes the member's final score.
fn add_member(set: &mut SortedSet, member: &[u8], score: &mut f64, flags: AddFlags) -> Outcome {
    match set.score(member) {
        Some(current) => {
            if flags.nx {
                return Outcome::Skipped;
            }
            let mut new_score = *score;
            if flags.incr {
                new_score += current;
                if new_score.is_nan() {
                    return Outcome::NotANumber;
                }
            }
            if (flags.lt && new_score >= current) || (flags.gt && new_score <= current) {
                return Outcome::Skipped;
            }
            *score = new_score;
            if new_score == current {
                Outcome::Unchanged
            } else {
                set.insert(member, new_score);
                Outcome::Updated
            }
        }
        None if flags.xx => Outcome::Skipped,
        None => {
            set.insert(member, *score);
            Outcome::Added
        }
    }
}

pub(super) fn zadd(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    add_generic(ctx, args, AddFlags::default());
}

/// ZINCRBY key increment member: ZADD key INCR increment member.
pub(super) fn zincrby(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    add_generic(
        ctx,
        args,
        AddFlags {
            incr: true,
            ..AddFlags::default()
        },
    );
}

fn add_generic(ctx: &mut Ctx<'_, '_>, args: &[Bytes], mut flags: AddFlags) {
    let mut first_pair = 2;
    while let Some(option) = args.get(first_pair) {
        let flag = if is(option, "NX") {
            &mut flags.nx
        } else if is(option, "XX") {
            &mut flags.xx
        } else if is(option, "CH") {
            &mut flags.ch
        } else if is(option, "INCR") {
            &mut flags.incr
        } else if is(option, "GT") {
            &mut flags.gt
        } else if is(option, "LT") {
            &mut flags.lt
        } else {
            break;
        };
        *flag = true;
        first_pair += 1;
    }
    let pairs = &args[first_pair..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        ctx.reply.error(err::SYNTAX);
        return;
    }
    if flags.nx && flags.xx {
        ctx.reply
            .error(b"ERR XX and NX options at the same time are not compatible");
        return;
    }
    if (flags.nx && (flags.gt || flags.lt)) || (flags.gt && flags.lt) {
        ctx.reply
            .error(b"ERR GT, LT, and/or NX options at the same time are not compatible");
        return;
    }
    if flags.incr && pairs.len() > 2 {
        ctx.reply
            .error(b"ERR INCR option supports a single increment-element pair");
        return;
    }
    // Every score is parsed before anything changes: the command applies fully or not at all.
    let mut scores = Vec::with_capacity(pairs.len() / 2);
    for pair in pairs.chunks_exact(2) {
        match parse_f64(&pair[0]) {
            Some(score) => scores.push(score),
            None => {
                ctx.reply.error(err::NOT_FLOAT);
                return;
            }
        }
    }
    let db = ctx.db();
    let key = &args[1][..];
    let mut created = None;
    let set = match zset_at(ctx.keys, db, key) {
        Err(WrongType) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
        Ok(Some(set)) => set,
        Ok(None) if flags.xx => {
            if flags.incr {
                ctx.reply.null();
            } else {
                ctx.reply.integer(0);
            }
            return;
        }
        Ok(None) => created.insert(SortedSet::new()),
    };
    let (mut added, mut updated, mut processed) = (0i64, 0i64, 0i64);
    let mut last_score = 0.0;
    let mut nan = false;
    for (pair, score) in pairs.chunks_exact(2).zip(scores) {
        let mut score = score;
        match add_member(set, &pair[1], &mut score, flags) {
            Outcome::Added => added += 1,
            Outcome::Updated => updated += 1,
            Outcome::Unchanged => {}
            Outcome::Skipped => continue,
            Outcome::NotANumber => {
                nan = true;
                break;
            }
        }
        processed += 1;
        last_score = score;
    }
    if let Some(set) = created {
        if !set.is_empty() {
            ctx.keys.set(db, key, Value::ZSet(set), None);
        }
    }
    if added + updated > 0 {
        ctx.keys.signal_modified(db, key);
        ctx.notify(notify::ZSET, if flags.incr { "zincr" } else { "zadd" }, key);
    }
    if nan {
        ctx.reply
            .error(b"ERR resulting score is not a number (NaN)");
    } else if flags.incr {
        if processed > 0 {
            ctx.reply.double(last_score);
        } else {
            ctx.reply.null();
        }
    } else if flags.ch {
        ctx.reply.integer(added + updated);
    } else {
        ctx.reply.integer(added);
    }
}

pub(super) fn zrem(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let key = &args[1][..];
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
    let mut removed = 0i64;
    for member in &args[2..] {
        if set.remove(member).is_some() {
            removed += 1;
        }
        if set.is_empty() {
            break;
        }
    }
    if removed > 0 {
        let emptied = remove_if_empty(ctx.keys, db, key);
        ctx.keys.signal_modified(db, key);
        ctx.notify(notify::ZSET, "zrem", key);
        if emptied {
            ctx.notify(notify::GENERIC, "del", key);
        }
    }
    ctx.reply.integer(removed);
}

pub(super) fn zscore(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    match zset_at(ctx.keys, db, &args[1]) {
        Err(WrongType) => ctx.reply.error(err::WRONGTYPE),
        Ok(set) => match set.and_then(|s| s.score(&args[2])) {
            Some(score) => ctx.reply.double(score),
            None => ctx.reply.null(),
        },
    }
}

pub(super) fn zmscore(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    match zset_at(ctx.keys, db, &args[1]) {
        Err(WrongType) => ctx.reply.error(err::WRONGTYPE),
        Ok(set) => {
            let members = &args[2..];
            ctx.reply.array(members.len());
            for member in members {
                match set.as_ref().and_then(|s| s.score(member)) {
                    Some(score) => ctx.reply.double(score),
                    None => ctx.reply.null(),
                }
            }
        }
    }
}

pub(super) fn zcard(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    match zset_at(ctx.keys, db, &args[1]) {
        Err(WrongType) => ctx.reply.error(err::WRONGTYPE),
        Ok(None) => ctx.reply.integer(0),
        Ok(Some(set)) => ctx.reply.integer(set.len() as i64),
    }
}
