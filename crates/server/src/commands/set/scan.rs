//! SSCAN, and the cursor walk over one collection that HSCAN (and ZSCAN) share.
//!
//! Redis walks a collection's hash table with a reverse-binary cursor. We have no stable
//! table order to walk (a `HashSet` reorders as it grows), so each element gets a fixed
//! position on a 64-bit line (a hash with fixed keys), and the cursor is a position: one
//! step returns the elements at or after the cursor with the smallest positions, and the
//! next cursor is the position of the first element not returned. An element present for
//! the whole walk is therefore returned exactly once, whatever is added or removed meanwhile.
//!
//! Small collections (Redis' intset and listpack encodings) come back whole in one step
//! with cursor 0, as Redis does.

use std::hash::Hasher;

use bytes::Bytes;
use latch_keyspace::glob::glob_match;
use latch_protocol::Reply;

use super::set_of;
use crate::commands::keys::scan::parse_cursor;
use crate::commands::{err, is, parse_i64, Ctx};
use crate::spec::{acl, flag, keyflag, Arg, ArgType, CommandSpec, Group, KeySpec};

/// The `... MATCH pattern COUNT n` options of SSCAN, HSCAN and ZSCAN.
pub(crate) struct ScanOptions<'a> {
    /// `None` when absent or `*` (which matches everything).
    pub pattern: Option<&'a [u8]>,
    pub count: usize,
}

impl ScanOptions<'_> {
    /// Whether `element` passes the MATCH filter.
    pub fn matches(&self, element: &[u8]) -> bool {
        self.pattern.is_none_or(|p| glob_match(p, element, false))
    }
}

/// Parses the options after the cursor as Redis' `scanGenericCommand` does; writes the
/// error and returns `None` on a bad one.
pub(crate) fn parse_options<'a>(
    reply: &mut Reply,
    options: &'a [Bytes],
) -> Option<ScanOptions<'a>> {
    let mut parsed = ScanOptions {
        pattern: None,
        count: 10,
    };
    let mut index = 0;
    while index < options.len() {
        let has_value = index + 1 < options.len();
        let option = &options[index];
        if is(option, "COUNT") && has_value {
            let Some(count) = parse_i64(&options[index + 1]) else {
                reply.error(err::NOT_INTEGER);
                return None;
            };
            if count < 1 {
                reply.error(err::SYNTAX);
                return None;
            }
            parsed.count = usize::try_from(count).unwrap_or(usize::MAX);
        } else if is(option, "MATCH") && has_value {
            parsed.pattern = Some(&options[index + 1][..]).filter(|p| *p != b"*");
        } else {
            reply.error(err::SYNTAX);
            return None;
        }
        index += 2;
    }
    Some(parsed)
}

/// An element's fixed place on the cursor line (`DefaultHasher::new()` is SipHash with fixed
/// keys: the same in every call of this process).
fn position(element: &[u8]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    hasher.write(element);
    hasher.finish()
}

/// Every step hashes the whole collection, so a step returns at least this fraction of it:
/// a full walk then costs at most this many passes, whatever COUNT says (COUNT is a hint).
const MIN_STEP_FRACTION: usize = 128;

/// One step of a cursor walk over `items` (each named by `name_of`): the `count` items (or
/// more, on big collections) at or after `cursor` with the smallest positions, and the
/// cursor to continue from (0 at the end).
pub(crate) fn walk<'e, T: Copy>(
    items: impl Iterator<Item = T>,
    name_of: impl Fn(T) -> &'e [u8],
    cursor: u64,
    count: usize,
) -> (u64, Vec<T>) {
    let mut total = 0usize;
    let mut candidates: Vec<(u64, T)> = items
        .filter_map(|item| {
            total += 1;
            let at = position(name_of(item));
            (at >= cursor).then_some((at, item))
        })
        .collect();
    let count = count.max(total / MIN_STEP_FRACTION).max(1);
    if candidates.len() <= count {
        return (0, candidates.into_iter().map(|(_, item)| item).collect());
    }
    // Partition so that the first `count` have the smallest positions; the item at `count`
    // is the first left out, and its position is where the next step starts.
    candidates.select_nth_unstable_by_key(count, |(at, _)| *at);
    let mut next = candidates[count].0;
    let mut taken: Vec<T> = candidates[..count]
        .iter()
        .filter(|(at, _)| *at < next)
        .map(|(_, item)| *item)
        .collect();
    if taken.is_empty() {
        // Every one of the first `count + 1` shares one position (a hash collision): return
        // that whole position so the walk moves on.
        taken = candidates
            .iter()
            .filter(|(at, _)| *at == next)
            .map(|(_, item)| *item)
            .collect();
        next = candidates
            .iter()
            .map(|(at, _)| *at)
            .filter(|at| *at > next)
            .min()
            .unwrap_or(0);
    }
    (next, taken)
}

/// Writes a scan reply: the cursor as a bulk string, then the elements.
pub(crate) fn reply_scan(reply: &mut Reply, cursor: u64, elements: &[&[u8]]) {
    reply.array(2);
    reply.bulk(itoa::Buffer::new().format(cursor).as_bytes());
    reply.array(elements.len());
    for element in elements {
        reply.bulk(element);
    }
}

pub(super) const SSCAN: CommandSpec = CommandSpec {
    name: "sscan",
    group: Group::Set,
    summary: "Walks the members of a set a few at a time, resuming from a cursor.",
    since: "2.8.0",
    complexity: "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..",
    arity: -3,
    flags: flag::READONLY,
    acl: acl::SET,
    key_specs: &[KeySpec::single(1, keyflag::RO | keyflag::ACCESS)],
    arguments: &[
        Arg::key("key", 0),
        Arg::integer("cursor"),
        Arg::new("pattern", ArgType::Pattern)
            .with_token("MATCH")
            .optional(),
        Arg::integer("count").with_token("COUNT").optional(),
    ],
    tips: &["nondeterministic_output"],
    handler: Some(sscan),
    ..CommandSpec::BASE
};

fn sscan(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    // Order as in Redis: the cursor, then the key (a missing key answers an empty scan
    // without looking at the options), then its type, then the options.
    let Some(cursor) = parse_cursor(&args[2]) else {
        ctx.reply.error(err::INVALID_CURSOR);
        return;
    };
    let db = ctx.db();
    let Some(entry) = ctx.keys.get(db, &args[1]) else {
        reply_scan(ctx.reply, 0, &[]);
        return;
    };
    let Some(members) = set_of(entry) else {
        ctx.reply.error(err::WRONGTYPE);
        return;
    };
    let Some(options) = parse_options(ctx.reply, &args[3..]) else {
        return;
    };
    let (next, chosen) = members.scan(cursor, options.count);
    let texts: Vec<Vec<u8>> = chosen.into_iter().map(|m| m.to_vec()).collect();
    let shown: Vec<&[u8]> = texts
        .iter()
        .map(|m| &m[..])
        .filter(|m| options.matches(m))
        .collect();
    reply_scan(ctx.reply, next, &shown);
}

#[cfg(test)]
mod tests {
    use super::walk;
    use std::collections::HashSet;

    #[test]
    fn a_walk_returns_every_stable_element_once() {
        let mut items: Vec<Vec<u8>> = (0..1000).map(|i| format!("m{i}").into_bytes()).collect();
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut steps = 0;
        loop {
            let (next, chosen) = walk(items.iter().map(|m| &m[..]), |m| m, cursor, 7);
            for m in chosen {
                assert!(seen.insert(m.to_vec()), "returned twice");
            }
            // Remove and add elements mid-walk; the original first 500 must all be seen.
            if steps == 5 {
                items.truncate(700);
                items.extend((0..300).map(|i| format!("new{i}").into_bytes()));
            }
            steps += 1;
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        for i in 0..500 {
            assert!(seen.contains(format!("m{i}").as_bytes()));
        }
    }
}
