//! Shared locks and counting semaphores (`LOCK.ACQUIRE ... SHARED | PERMITS n`): the
//! holders of such a lock are the members of a sorted set at the lock's name, each scored
//! with the unix time in milliseconds its lease runs out. The key itself expires with the
//! last lease (`PEXPIREAT` of the largest score), so a client that knows nothing of LOCK.*
//! sees a key that is there while anyone holds the lock, as with an exclusive one.
//!
//! A lease past its score is dropped by the next command that takes or gives a permit
//! (logged as `ZREMRANGEBYSCORE name -inf (<now>`, the same on every replay); LOCK.INFO,
//! a read, only leaves such leases out.

use bytes::Bytes;
use latch_keyspace::zset::SortedSet;
use latch_keyspace::{Deadline, Value};

use crate::commands::Ctx;
use crate::pubsub::notify;

/// A holder's token and the milliseconds its lease has left.
pub(super) type Lease = (Vec<u8>, i64);

/// The live leases of the sorted set at `name` (the caller checked its type), longest-held
/// first as the set orders them by deadline. With `purge`, leases that ran out are
/// removed (and the key with the last of them).
pub(super) fn leases(ctx: &mut Ctx<'_, '_>, name: &Bytes, purge: bool) -> Vec<Lease> {
    let db = ctx.db();
    let now_ms = ctx.now().wall_ms;
    let Some(Value::ZSet(set)) = ctx.keys.get(db, name) else {
        return Vec::new();
    };
    let mut live = Vec::with_capacity(set.len());
    let mut passed = Vec::new();
    for (member, score) in set.iter() {
        let left = score as i64 - now_ms;
        if left < 0 {
            passed.push(member.to_vec());
        } else {
            live.push((member.to_vec(), left));
        }
    }
    if purge && !passed.is_empty() {
        for member in &passed {
            set.remove(member);
        }
        if live.is_empty() {
            ctx.keys.remove(db, name);
        }
        ctx.keys.signal_modified(db, name);
        ctx.notify(notify::ZSET, "zremrangebyscore", name);
        ctx.propagate_with(|| {
            vec![
                Bytes::from_static(b"ZREMRANGEBYSCORE"),
                name.clone(),
                Bytes::from_static(b"-inf"),
                Bytes::from(format!("({now_ms}")),
            ]
        });
    }
    live
}

/// Adds (or renews) `token`'s lease of `ttl_ms`, and makes the key outlive its longest
/// lease.
pub(super) fn grant(ctx: &mut Ctx<'_, '_>, name: &Bytes, token: &Bytes, ttl_ms: i64) {
    let db = ctx.db();
    let until = ctx.now().wall_ms.saturating_add(ttl_ms);
    let longest = match ctx.keys.get(db, name) {
        Some(Value::ZSet(set)) => {
            set.insert(token, until as f64);
            set.iter()
                .map(|(_, score)| score as i64)
                .max()
                .unwrap_or(until)
        }
        _ => {
            let mut set = SortedSet::new();
            set.insert(token, until as f64);
            ctx.keys.set(db, name, Value::ZSet(set), None);
            until
        }
    };
    ctx.keys
        .set_deadline(db, name, Some(Deadline::at_wall(longest)));
    ctx.keys.signal_modified(db, name);
    ctx.notify(notify::ZSET, "zadd", name);
    ctx.notify(notify::GENERIC, "expire", name);
    ctx.propagate_with(|| {
        vec![
            Bytes::from_static(b"ZADD"),
            name.clone(),
            Bytes::from(until.to_string()),
            token.clone(),
        ]
    });
    ctx.propagate_with(|| {
        vec![
            Bytes::from_static(b"PEXPIREAT"),
            name.clone(),
            Bytes::from(longest.to_string()),
        ]
    });
}

/// Removes `token`'s lease (the key with the last one).
pub(super) fn release(ctx: &mut Ctx<'_, '_>, name: &Bytes, token: &Bytes) {
    let db = ctx.db();
    let emptied = match ctx.keys.get(db, name) {
        Some(Value::ZSet(set)) => {
            set.remove(token);
            set.is_empty()
        }
        _ => return,
    };
    if emptied {
        ctx.keys.remove(db, name);
    }
    ctx.keys.signal_modified(db, name);
    ctx.notify(notify::ZSET, "zrem", name);
    ctx.propagate_with(|| vec![Bytes::from_static(b"ZREM"), name.clone(), token.clone()]);
}
