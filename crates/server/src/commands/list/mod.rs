//! List commands (Redis' "list" group), by theme:
//!
//! - [`push`]: LPUSH, RPUSH, LPUSHX, RPUSHX.
//! - [`pop`]: LPOP, RPOP, LMPOP, LMOVE, RPOPLPUSH.
//! - [`read`]: LRANGE, LLEN, LINDEX, LPOS.
//! - [`edit`]: LSET, LREM, LTRIM, LINSERT.
//! - [`specs`]: the command-table entries.
//!
//! A list is a [`latch_keyspace::List`], packs in a deque as Redis' quicklist. Shared here:
//! finding a key's list (the one place that knows which value types are lists), removing a
//! list that became empty, and Redis' index normalisation.

mod edit;
mod pop;
mod push;
mod read;
mod specs;

use latch_keyspace::{Elem, Locked, Value};
use latch_protocol::Reply;

pub use specs::COMMANDS;

pub(crate) use latch_keyspace::List;

/// The key holds something other than a list (the caller answers WRONGTYPE).
pub(crate) struct WrongType;

/// Which end of a list an operation works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    Head,
    Tail,
}

impl End {
    /// The event a pop from this end reports.
    fn pop_event(self) -> &'static str {
        match self {
            End::Head => "lpop",
            End::Tail => "rpop",
        }
    }

    /// The event a push to this end reports.
    fn push_event(self) -> &'static str {
        match self {
            End::Head => "lpush",
            End::Tail => "rpush",
        }
    }

    /// `LEFT` or `RIGHT`, any case, as LMOVE and LMPOP spell them.
    fn parse(arg: &[u8]) -> Option<End> {
        if super::is(arg, "LEFT") {
            Some(End::Head)
        } else if super::is(arg, "RIGHT") {
            Some(End::Tail)
        } else {
            None
        }
    }
}

/// The list under `key`: `Ok(None)` when there is no key.
fn list_at<'a>(
    keys: &'a mut Locked<'_>,
    db: usize,
    key: &[u8],
) -> Result<Option<&'a mut List>, WrongType> {
    match keys.get(db, key) {
        None => Ok(None),
        Some(Value::List(list)) => Ok(Some(list)),
        Some(
            Value::Str(_) | Value::Set(_) | Value::Hash(_) | Value::ZSet(_) | Value::Stream(_),
        ) => Err(WrongType),
    }
}

/// Removes `key` when its list has become empty (Redis never keeps empty collections).
/// Removes the list under `key` if it is empty; returns whether it did.
fn remove_if_empty(keys: &mut Locked<'_>, db: usize, key: &[u8]) -> bool {
    let empty = matches!(
        keys.get_untouched(db, key).map(|v| &*v),
        Some(Value::List(list)) if list.is_empty()
    );
    if empty {
        keys.remove(db, key);
    }
    empty
}

fn push_at(list: &mut List, end: End, element: &[u8]) {
    match end {
        End::Head => list.push_front(element),
        End::Tail => list.push_back(element),
    }
}

/// Answers one element as a bulk string.
#[inline]
fn reply_elem(reply: &mut Reply, elem: Elem<'_>) {
    match elem {
        Elem::Bytes(bytes) => reply.bulk(bytes),
        Elem::Int(n) => reply.bulk_integer(n),
        Elem::Float(_) => reply.bulk(&elem.to_vec()),
    }
}

fn pop_at(list: &mut List, end: End) -> Option<Vec<u8>> {
    match end {
        End::Head => list.pop_front(),
        End::Tail => list.pop_back(),
    }
}

/// Resolves an inclusive `start..=stop` range (negative indexes count from the tail) the
/// way Redis' LRANGE/LTRIM do; `None` when the range is empty.
fn resolve_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
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
    let stop = stop.min(len - 1);
    Some((start as usize, stop as usize))
}

/// Resolves a single index (negative counts from the tail); `None` when out of range.
fn resolve_index(index: i64, len: usize) -> Option<usize> {
    let len = len as i64;
    let index = if index < 0 { len + index } else { index };
    (0..len).contains(&index).then_some(index as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_like_redis() {
        assert_eq!(resolve_range(0, -1, 3), Some((0, 2)));
        assert_eq!(resolve_range(-100, 100, 3), Some((0, 2)));
        assert_eq!(resolve_range(2, 1, 3), None);
        assert_eq!(resolve_range(3, 5, 3), None);
        assert_eq!(resolve_range(0, -4, 3), None);
        assert_eq!(resolve_range(i64::MIN, i64::MAX, 3), Some((0, 2)));
        assert_eq!(resolve_range(0, 0, 0), None);
    }

    #[test]
    fn indexes_like_redis() {
        assert_eq!(resolve_index(-1, 3), Some(2));
        assert_eq!(resolve_index(3, 3), None);
        assert_eq!(resolve_index(-4, 3), None);
        assert_eq!(resolve_index(i64::MIN, 3), None);
    }
}
