//! Sorted-set commands (Redis' "sorted-set" group), by theme:
//!
//! - [`add`]: ZADD, ZINCRBY, ZREM, ZSCORE, ZMSCORE, ZCARD.
//! - [`range`]: ZRANGE and its older forms, ZRANGESTORE, ZCOUNT, ZLEXCOUNT, ZRANK,
//!   ZREVRANK, ZREMRANGEBY{RANK,SCORE,LEX}.
//! - [`pop`]: ZPOPMIN, ZPOPMAX, ZMPOP, ZRANDMEMBER.
//! - [`algebra`]: ZUNION, ZINTER, ZDIFF, their STORE forms, ZINTERCARD.
//! - [`scan`]: ZSCAN, a cursor walk over members and scores.
//! - [`specs`]: the command-table entries.
//!
//! Shared here: finding a key's sorted set (the one place that knows which value types are
//! sorted sets), removing a set that became empty, score and name interval parsing, and the
//! member/score reply shapes (flat in RESP2, pairs in RESP3).

mod add;
mod algebra;
mod pop;
mod range;
mod scan;
mod specs;

use crate::pubsub::notify;
use latch_keyspace::zset::ScoreBound;
use latch_keyspace::{Locked, Member, SortedSet, Value};
use latch_protocol::{Reply, Resp};

pub use specs::COMMANDS;

/// The key holds something other than a sorted set (the caller answers WRONGTYPE).
pub(crate) struct WrongType;

/// The sorted set under `key`: `Ok(None)` when there is no key.
fn zset_at<'a>(
    keys: &'a mut Locked<'_>,
    db: usize,
    key: &[u8],
) -> Result<Option<&'a mut SortedSet>, WrongType> {
    match keys.get(db, key) {
        None => Ok(None),
        Some(Value::ZSet(set)) => Ok(Some(set)),
        Some(
            Value::Str(_) | Value::List(_) | Value::Set(_) | Value::Hash(_) | Value::Stream(_),
        ) => Err(WrongType),
    }
}

/// Removes `key` when its sorted set has become empty (Redis never keeps empty collections).
/// Returns whether it did.
fn remove_if_empty(keys: &mut Locked<'_>, db: usize, key: &[u8]) -> bool {
    let empty = matches!(
        keys.get_untouched(db, key).map(|v| &*v),
        Some(Value::ZSet(set)) if set.is_empty()
    );
    if empty {
        keys.remove(db, key);
    }
    empty
}

/// Stores `set` under `destination` for the *STORE commands (replacing whatever was there,
/// TTL included) and answers its size; an empty result deletes the destination instead.
/// A stored result reports `event`.
fn store_result(
    ctx: &mut super::Ctx<'_, '_>,
    destination: &[u8],
    set: SortedSet,
    event: &'static str,
) {
    let db = ctx.db();
    let mut set = set;
    // Redis stores a result that fits the thresholds as a listpack.
    set.compact_if_fits();
    let len = set.len();
    if len == 0 {
        if ctx.keys.remove_stored(db, destination) {
            ctx.keys.signal_modified(db, destination);
            ctx.notify(notify::GENERIC, "del", destination);
        }
    } else {
        ctx.keys.set(db, destination, Value::ZSet(set), None);
        ctx.keys.signal_modified(db, destination);
        ctx.notify(notify::ZSET, event, destination);
    }
    ctx.reply.integer(len as i64);
}

/// Parses a number as C's `strtod` does for score intervals: leading white space allowed,
/// the rest consumed entirely, `inf`/`infinity` in any case, no NaN. An empty string is 0,
/// a quirk Redis inherits from `strtod`.
fn parse_strtod(text: &[u8]) -> Option<f64> {
    if text.is_empty() {
        return Some(0.0);
    }
    let start = text
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))?;
    let value = super::parse_f64(&text[start..])?;
    (!value.is_nan()).then_some(value)
}

/// One end of a score interval: `1.5` (inclusive) or `(1.5` (exclusive).
fn parse_score_bound(arg: &[u8]) -> Option<ScoreBound> {
    match arg.split_first() {
        Some((b'(', rest)) => Some(ScoreBound {
            score: parse_strtod(rest)?,
            exclusive: true,
        }),
        _ => Some(ScoreBound {
            score: parse_strtod(arg)?,
            exclusive: false,
        }),
    }
}

const NOT_FLOAT_RANGE: &[u8] = b"ERR min or max is not a float";
const NOT_LEX_RANGE: &[u8] = b"ERR min or max not valid string range item";

/// One end of a name interval: `-`, `+`, `[name` (inclusive) or `(name` (exclusive).
#[derive(Clone, Debug, PartialEq, Eq)]
enum LexBound {
    Min,
    Max,
    Name { name: Vec<u8>, exclusive: bool },
}

impl LexBound {
    fn parse(arg: &[u8]) -> Option<LexBound> {
        match arg.split_first()? {
            (b'-', []) => Some(LexBound::Min),
            (b'+', []) => Some(LexBound::Max),
            (b'(', rest) => Some(LexBound::Name {
                name: rest.to_vec(),
                exclusive: true,
            }),
            (b'[', rest) => Some(LexBound::Name {
                name: rest.to_vec(),
                exclusive: false,
            }),
            _ => None,
        }
    }

    /// Whether `member` is at or past this bound taken as a minimum.
    fn admits_from_below(&self, member: &[u8]) -> bool {
        match self {
            LexBound::Min => true,
            LexBound::Max => false,
            LexBound::Name { name, exclusive } => {
                if *exclusive {
                    member > name.as_slice()
                } else {
                    member >= name.as_slice()
                }
            }
        }
    }

    /// Whether `member` is at or before this bound taken as a maximum.
    fn admits_from_above(&self, member: &[u8]) -> bool {
        match self {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::Name { name, exclusive } => {
                if *exclusive {
                    member < name.as_slice()
                } else {
                    member <= name.as_slice()
                }
            }
        }
    }
}

/// A name interval `[min, max]`.
#[derive(Clone, Debug)]
struct LexRange {
    min: LexBound,
    max: LexBound,
}

impl LexRange {
    fn parse(min: &[u8], max: &[u8]) -> Option<LexRange> {
        Some(LexRange {
            min: LexBound::parse(min)?,
            max: LexBound::parse(max)?,
        })
    }

    #[cfg(test)]
    fn contains(&self, member: &[u8]) -> bool {
        self.min.admits_from_below(member) && self.max.admits_from_above(member)
    }

    /// Members in the interval, ascending or descending. Walks from the end it starts at and
    /// stops at the first member past the other bound, as Redis does (the members are in
    /// name order when all scores are equal, the case these commands are for). O(N).
    fn members<'a>(
        &'a self,
        set: &'a SortedSet,
        reverse: bool,
    ) -> Box<dyn Iterator<Item = (Member<'a>, f64)> + 'a> {
        if reverse {
            Box::new(
                set.iter()
                    .rev()
                    .skip_while(|(m, _)| !self.max.admits_from_above(m))
                    .take_while(|(m, _)| self.min.admits_from_below(m)),
            )
        } else {
            Box::new(
                set.iter()
                    .skip_while(|(m, _)| !self.min.admits_from_below(m))
                    .take_while(|(m, _)| self.max.admits_from_above(m)),
            )
        }
    }
}

/// Writes members (with their scores when `with_scores`) as ZRANGE does: a flat array in
/// RESP2, an array of `[member, score]` pairs in RESP3.
fn reply_scored<M, I>(reply: &mut Reply, items: I, with_scores: bool)
where
    M: AsRef<[u8]>,
    I: ExactSizeIterator<Item = (M, f64)>,
{
    let len = items.len();
    reply_scored_until(reply, len, items, with_scores, u64::MAX);
}

/// [`reply_scored`] of `len` entries from `items`, stopping early once the reply holds
/// `stop_at` bytes (a client's hard output limit: the reply is then never sent).
fn reply_scored_until<M, I>(
    reply: &mut Reply,
    len: usize,
    items: I,
    with_scores: bool,
    stop_at: u64,
) where
    M: AsRef<[u8]>,
    I: Iterator<Item = (M, f64)>,
{
    let resp3 = reply.resp() == Resp::V3;
    if with_scores && !resp3 {
        reply.array(len.saturating_mul(2));
    } else {
        reply.array(len);
    }
    for (member, score) in items {
        if reply.len() as u64 >= stop_at {
            break;
        }
        if with_scores && resp3 {
            reply.array(2);
        }
        reply.bulk(member.as_ref());
        if with_scores {
            reply.double(score);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtod_quirks() {
        assert_eq!(parse_strtod(b""), Some(0.0));
        assert_eq!(parse_strtod(b" 1.5"), Some(1.5));
        assert_eq!(parse_strtod(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_strtod(b"+Infinity"), Some(f64::INFINITY));
        assert_eq!(parse_strtod(b"nan"), None);
        assert_eq!(parse_strtod(b"1.5 "), None);
        assert_eq!(parse_strtod(b" "), None);
        assert_eq!(parse_strtod(b"abc"), None);
    }

    #[test]
    fn lex_bounds() {
        assert_eq!(LexBound::parse(b"-"), Some(LexBound::Min));
        assert_eq!(LexBound::parse(b"+"), Some(LexBound::Max));
        assert_eq!(LexBound::parse(b"+a"), None);
        assert_eq!(LexBound::parse(b"a"), None);
        assert_eq!(LexBound::parse(b""), None);
        let range = LexRange::parse(b"(a", b"[c").unwrap();
        assert!(!range.contains(b"a"));
        assert!(range.contains(b"b"));
        assert!(range.contains(b"c"));
        assert!(!range.contains(b"ca"));
    }
}
