//! ZSCAN: walking a sorted set's members and scores a few at a time.
//!
//! A set small enough for Redis' compact encoding is returned whole with cursor 0, as Redis
//! does. A bigger one is walked in the order of a per-process hash of its members, the cursor
//! being the next hash to visit: every member present for the whole walk is returned at
//! least once, whatever changes in between.

use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};

use bytes::Bytes;
use latch_keyspace::glob::glob_match;
use latch_keyspace::Value;
use latch_protocol::format_double_g17;

use crate::commands::keys::scan::parse_cursor;
use crate::commands::{err, is, parse_i64, Ctx};

/// A hash that is the same for a member throughout the process (cursors depend on it).
fn member_hash(member: &[u8]) -> u64 {
    BuildHasherDefault::<DefaultHasher>::default().hash_one(member)
}

pub(super) fn zscan(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(cursor) = parse_cursor(&args[2]) else {
        ctx.reply.error(err::INVALID_CURSOR);
        return;
    };
    let db = ctx.db();
    let (set, small) = match ctx.keys.get(db, &args[1]).map(|e| &e.value) {
        None => {
            ctx.reply.array(2);
            ctx.reply.bulk(b"0");
            ctx.reply.array(0);
            return;
        }
        Some(value @ Value::ZSet(set)) => (set, value.encoding() == "listpack"),
        Some(Value::Str(_) | Value::List(_) | Value::Set(_) | Value::Hash(_)) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
    };
    // As in Redis, options are looked at only once the key is known to hold a sorted set.
    let mut count: usize = 10;
    let mut pattern: Option<&[u8]> = None;
    let mut index = 3;
    while index < args.len() {
        let has_value = index + 1 < args.len();
        let option = &args[index];
        if is(option, "COUNT") && has_value {
            let Some(n) = parse_i64(&args[index + 1]) else {
                ctx.reply.error(err::NOT_INTEGER);
                return;
            };
            if n < 1 {
                ctx.reply.error(err::SYNTAX);
                return;
            }
            count = usize::try_from(n).unwrap_or(usize::MAX);
        } else if is(option, "MATCH") && has_value {
            pattern = Some(&args[index + 1][..]).filter(|p| *p != b"*");
        } else {
            ctx.reply.error(err::SYNTAX);
            return;
        }
        index += 2;
    }
    let (next, batch): (u64, Vec<(&[u8], f64)>) = if small {
        (0, set.iter().collect())
    } else {
        let mut pending: Vec<(u64, &[u8], f64)> = set
            .iter()
            .map(|(m, s)| (member_hash(m), m, s))
            .filter(|(h, _, _)| *h >= cursor)
            .collect();
        if pending.len() > count {
            pending.select_nth_unstable_by_key(count - 1, |(h, _, _)| *h);
            let last = pending[count - 1].0;
            // Members sharing the last hash go in this batch too: the next cursor skips it.
            pending.retain(|(h, _, _)| *h <= last);
            let next = last.checked_add(1).unwrap_or(0);
            (next, pending.into_iter().map(|(_, m, s)| (m, s)).collect())
        } else {
            (0, pending.into_iter().map(|(_, m, s)| (m, s)).collect())
        }
    };
    let batch: Vec<(&[u8], f64)> = batch
        .into_iter()
        .filter(|(m, _)| pattern.is_none_or(|p| glob_match(p, m, false)))
        .collect();
    ctx.reply.array(2);
    ctx.reply.bulk(next.to_string().as_bytes());
    ctx.reply.array(batch.len() * 2);
    let mut text = Vec::with_capacity(24);
    for (member, score) in batch {
        ctx.reply.bulk(member);
        text.clear();
        format_double_g17(score, &mut text);
        ctx.reply.bulk(&text);
    }
}
