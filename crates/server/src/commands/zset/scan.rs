//! ZSCAN: walking a sorted set's members and scores a few at a time.
//!
//! A set small enough for Redis' compact encoding is returned whole with cursor 0, as Redis
//! does. A bigger one is walked with the cursor walk SSCAN and HSCAN use
//! (`commands::set::scan::walk`).

use bytes::Bytes;
use latch_keyspace::{Member, Value};
use latch_protocol::format_double_g17;

use crate::commands::keys::scan::parse_cursor;
use crate::commands::set::scan::{parse_options, walk};
use crate::commands::{err, Ctx};

pub(super) fn zscan(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(cursor) = parse_cursor(&args[2]) else {
        ctx.reply.error(err::INVALID_CURSOR);
        return;
    };
    let db = ctx.db();
    let (set, small) = match ctx.keys.get(db, &args[1]).map(|v| &*v) {
        None => {
            ctx.reply.array(2);
            ctx.reply.bulk(b"0");
            ctx.reply.array(0);
            return;
        }
        Some(value @ Value::ZSet(set)) => (set, value.encoding() == "listpack"),
        Some(
            Value::Str(_) | Value::List(_) | Value::Set(_) | Value::Hash(_) | Value::Stream(_),
        ) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
    };
    // As in Redis, options are looked at only once the key is known to hold a sorted set.
    let Some(options) = parse_options(ctx.reply, &args[3..]) else {
        return;
    };
    let (next, batch): (u64, Vec<(Member<'_>, f64)>) = if small {
        (0, set.iter().collect())
    } else {
        // The large form lends its members' bytes.
        let borrowed = set.iter().filter_map(|(m, s)| Some((m.borrowed()?, s)));
        let (next, batch) = walk(borrowed, |(member, _)| member, cursor, options.count);
        let batch = batch.into_iter().map(|(m, s)| (Member::Bytes(m), s));
        (next, batch.collect())
    };
    let batch: Vec<(Member<'_>, f64)> = batch
        .into_iter()
        .filter(|(m, _)| options.matches(m))
        .collect();
    ctx.reply.array(2);
    ctx.reply.bulk(next.to_string().as_bytes());
    ctx.reply.array(batch.len() * 2);
    let mut text = Vec::with_capacity(24);
    for (member, score) in batch {
        ctx.reply.bulk(&member);
        text.clear();
        score_text(score, &mut text);
        ctx.reply.bulk(&text);
    }
}

/// A score as ZSCAN shows it, the text Redis' `d2string` makes (a listpack holds that text
/// or its integer): integers within half the i64 range in decimal, -0 kept, else `%.17g`.
fn score_text(score: f64, out: &mut Vec<u8>) {
    const INT_LIMIT: f64 = (i64::MAX / 2) as f64;
    if score == 0.0 {
        out.extend_from_slice(if score.is_sign_negative() {
            b"-0"
        } else {
            b"0"
        });
    } else if score.fract() == 0.0 && (-INT_LIMIT..=INT_LIMIT).contains(&score) {
        out.extend_from_slice((score as i64).to_string().as_bytes());
    } else {
        format_double_g17(score, out);
    }
}
