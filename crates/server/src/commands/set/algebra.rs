//! Set algebra over several keys: SINTER, SINTERCARD, SINTERSTORE, SUNION, SUNIONSTORE,
//! SDIFF, SDIFFSTORE. A missing key is an empty set; any key of another type is WRONGTYPE,
//! checked for every key before anything is answered or stored.

use bytes::Bytes;
use latch_keyspace::Value;

use latch_keyspace::Set;

use super::{reply_members, reply_set, set_of};
use crate::commands::{err, parse_i64, Ctx};
use crate::pubsub::notify;
use crate::spec::{acl, flag, keyflag, Arg, BeginSearch, CommandSpec, FindKeys, Group, KeySpec};

const READ_KEYS: &[KeySpec] = &[KeySpec::to_end(1, 1, keyflag::RO | keyflag::ACCESS)];
const READ_KEYS_ARGS: &[Arg] = &[Arg::key("key", 0).multiple()];
const STORE_ARGS: &[Arg] = &[Arg::key("destination", 0), Arg::key("key", 1).multiple()];

const INTER_COMPLEXITY: &str =
    "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.";
const UNION_COMPLEXITY: &str = "O(N) where N is the total number of elements in all given sets.";

pub(super) const SINTER: CommandSpec = CommandSpec {
    name: "sinter",
    group: Group::Set,
    summary: "Replies with the members every given set shares.",
    since: "1.0.0",
    complexity: INTER_COMPLEXITY,
    arity: -2,
    flags: flag::READONLY,
    acl: acl::SET,
    key_specs: READ_KEYS,
    arguments: READ_KEYS_ARGS,
    tips: &["nondeterministic_output_order"],
    handler: Some(sinter),
    ..CommandSpec::BASE
};

pub(super) const SINTERCARD: CommandSpec = CommandSpec {
    name: "sintercard",
    group: Group::Set,
    summary: "Counts the members the given sets share, optionally stopping at a limit.",
    since: "7.0.0",
    complexity: INTER_COMPLEXITY,
    arity: -3,
    flags: flag::READONLY,
    acl: acl::SET,
    key_specs: &[KeySpec {
        flags: keyflag::RO | keyflag::ACCESS,
        begin: BeginSearch::Index(1),
        find: FindKeys::Keynum {
            key_num_index: 0,
            first_key: 1,
            key_step: 1,
        },
        notes: None,
    }],
    arguments: &[
        Arg::integer("numkeys"),
        Arg::key("key", 0).multiple(),
        Arg::integer("limit").with_token("LIMIT").optional(),
    ],
    handler: Some(sintercard),
    ..CommandSpec::BASE
};

pub(super) const SINTERSTORE: CommandSpec = CommandSpec {
    name: "sinterstore",
    group: Group::Set,
    summary: "Stores the members every given set shares under a destination key; replies its size.",
    since: "1.0.0",
    complexity: INTER_COMPLEXITY,
    arity: -3,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::SET,
    key_specs: &[
        KeySpec::single(1, keyflag::RW | keyflag::UPDATE),
        KeySpec::to_end(2, 1, keyflag::RO | keyflag::ACCESS),
    ],
    arguments: STORE_ARGS,
    handler: Some(sinterstore),
    ..CommandSpec::BASE
};

pub(super) const SUNION: CommandSpec = CommandSpec {
    name: "sunion",
    group: Group::Set,
    summary: "Replies with the members found in any of the given sets.",
    since: "1.0.0",
    complexity: UNION_COMPLEXITY,
    arity: -2,
    flags: flag::READONLY,
    acl: acl::SET,
    key_specs: READ_KEYS,
    arguments: READ_KEYS_ARGS,
    tips: &["nondeterministic_output_order"],
    handler: Some(sunion),
    ..CommandSpec::BASE
};

pub(super) const SUNIONSTORE: CommandSpec = CommandSpec {
    name: "sunionstore",
    group: Group::Set,
    summary: "Stores the members found in any of the given sets under a destination key; replies its size.",
    since: "1.0.0",
    complexity: UNION_COMPLEXITY,
    arity: -3,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::SET,
    key_specs: &[
        KeySpec::single(1, keyflag::OW | keyflag::UPDATE),
        KeySpec::to_end(2, 1, keyflag::RO | keyflag::ACCESS),
    ],
    arguments: STORE_ARGS,
    handler: Some(sunionstore),
    ..CommandSpec::BASE
};

pub(super) const SDIFF: CommandSpec = CommandSpec {
    name: "sdiff",
    group: Group::Set,
    summary: "Replies with the members of the first set that none of the other sets has.",
    since: "1.0.0",
    complexity: UNION_COMPLEXITY,
    arity: -2,
    flags: flag::READONLY,
    acl: acl::SET,
    key_specs: READ_KEYS,
    arguments: READ_KEYS_ARGS,
    tips: &["nondeterministic_output_order"],
    handler: Some(sdiff),
    ..CommandSpec::BASE
};

pub(super) const SDIFFSTORE: CommandSpec = CommandSpec {
    name: "sdiffstore",
    group: Group::Set,
    summary: "Stores the members of the first set that none of the others has under a destination key; replies its size.",
    since: "1.0.0",
    complexity: UNION_COMPLEXITY,
    arity: -3,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::SET,
    key_specs: &[
        KeySpec::single(1, keyflag::OW | keyflag::UPDATE),
        KeySpec::to_end(2, 1, keyflag::RO | keyflag::ACCESS),
    ],
    arguments: STORE_ARGS,
    handler: Some(sdiffstore),
    ..CommandSpec::BASE
};

/// Looks up every key once (as Redis' `lookupKeyRead`, counting hits and misses): each
/// set's size, `None` for a missing key. Writes WRONGTYPE and returns `None` at the first
/// key of another type.
fn sizes(ctx: &mut Ctx<'_, '_>, keys: &[Bytes]) -> Option<Vec<Option<usize>>> {
    let db = ctx.db();
    let mut sizes = Vec::with_capacity(keys.len());
    for key in keys {
        match ctx.keys.get(db, key) {
            None => sizes.push(None),
            Some(entry) => match set_of(entry) {
                Some(members) => sizes.push(Some(members.len())),
                None => {
                    ctx.reply.error(err::WRONGTYPE);
                    return None;
                }
            },
        }
    }
    Some(sizes)
}

/// The members all `keys` share, in the order of the smallest set; `None` after WRONGTYPE.
fn intersection(ctx: &mut Ctx<'_, '_>, keys: &[Bytes]) -> Option<Vec<Vec<u8>>> {
    let sizes = sizes(ctx, keys)?;
    let mut known: Vec<(usize, usize)> = Vec::with_capacity(sizes.len());
    for (index, size) in sizes.iter().enumerate() {
        match size {
            // An empty set empties the intersection.
            None => return Some(Vec::new()),
            Some(size) => known.push((*size, index)),
        }
    }
    let Some(&(_, smallest)) = known.iter().min() else {
        return Some(Vec::new());
    };
    let db = ctx.db();
    // These second lookups are not new reads for the hit/miss counters.
    let counted = ctx.keys.effects;
    let mut shared: Vec<Vec<u8>> = ctx
        .keys
        .get(db, &keys[smallest])
        .and_then(|e| set_of(e))
        .map(|m| m.iter().map(|e| e.to_vec()).collect())
        .unwrap_or_default();
    for key in keys {
        if shared.is_empty() {
            break;
        }
        if key == &keys[smallest] {
            continue;
        }
        match ctx.keys.get(db, key).and_then(|e| set_of(e)) {
            Some(members) => shared.retain(|m| members.contains(m)),
            None => shared.clear(),
        }
    }
    ctx.keys.effects.hits = counted.hits;
    ctx.keys.effects.misses = counted.misses;
    Some(shared)
}

/// The members of any of `keys`, gathered as Redis does (into a set that starts as an
/// intset); `None` after WRONGTYPE.
fn union(ctx: &mut Ctx<'_, '_>, keys: &[Bytes]) -> Option<Set> {
    let db = ctx.db();
    let mut all = Set::new();
    let mut text = Vec::new();
    for key in keys {
        if let Some(entry) = ctx.keys.get(db, key) {
            let Some(members) = set_of(entry) else {
                ctx.reply.error(err::WRONGTYPE);
                return None;
            };
            for member in members.iter() {
                text.clear();
                member.append_to(&mut text);
                all.insert(&text);
            }
        }
    }
    Some(all)
}

/// The members of the first key that no other key has; `None` after WRONGTYPE. Built with
/// the algorithm Redis picks for these sizes, which decides the result's encoding: the
/// first set's survivors added one by one (algorithm 1), or the first set copied and the
/// others' members removed (algorithm 2, which leaves a hashtable a hashtable).
fn difference(ctx: &mut Ctx<'_, '_>, keys: &[Bytes]) -> Option<Set> {
    let sizes = sizes(ctx, keys)?;
    let db = ctx.db();
    let Some(first_size) = sizes[0] else {
        return Some(Set::new());
    };
    if keys[1..].iter().any(|k| k == &keys[0]) {
        // The first set minus itself.
        return Some(Set::new());
    }
    let present: Vec<usize> = sizes.iter().flatten().copied().collect();
    let algo_one_work = (first_size * present.len()) / 2;
    let algo_two_work: usize = present.iter().sum();
    // These second lookups are not new reads for the hit/miss counters.
    let counted = ctx.keys.effects;
    let first: Vec<Vec<u8>> = ctx
        .keys
        .get(db, &keys[0])
        .and_then(|e| set_of(e))
        .map(|m| m.iter().map(|e| e.to_vec()).collect())
        .unwrap_or_default();
    let mut left;
    if algo_one_work <= algo_two_work {
        let mut survivors = first;
        for key in &keys[1..] {
            if survivors.is_empty() {
                break;
            }
            if let Some(members) = ctx.keys.get(db, key).and_then(|e| set_of(e)) {
                survivors.retain(|m| !members.contains(m));
            }
        }
        left = Set::from_members(survivors.iter().map(|m| &m[..]));
    } else {
        left = Set::from_members(first.iter().map(|m| &m[..]));
        let mut text = Vec::new();
        for key in &keys[1..] {
            if left.is_empty() {
                break;
            }
            if let Some(members) = ctx.keys.get(db, key).and_then(|e| set_of(e)) {
                for member in members.iter() {
                    text.clear();
                    member.append_to(&mut text);
                    left.remove(&text);
                }
            }
        }
    }
    ctx.keys.effects.hits = counted.hits;
    ctx.keys.effects.misses = counted.misses;
    Some(left)
}

/// Stores `members` under `destination` (replacing whatever was there, TTL included), or
/// deletes `destination` when there are none; replies with the count.
/// `event` is what a stored result reports.
fn store(ctx: &mut Ctx<'_, '_>, destination: &[u8], members: Set, event: &'static str) {
    let db = ctx.db();
    let count = members.len();
    if count > 0 {
        ctx.keys.set(db, destination, Value::Set(members), None);
        ctx.keys.signal_modified(db, destination);
        ctx.notify(notify::SET, event, destination);
    } else if ctx.keys.remove_stored(db, destination) {
        ctx.keys.signal_modified(db, destination);
        ctx.notify(notify::GENERIC, "del", destination);
    }
    ctx.reply.integer(count as i64);
}

fn sinter(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if let Some(shared) = intersection(ctx, &args[1..]) {
        let listed: Vec<&[u8]> = shared.iter().map(|m| &m[..]).collect();
        reply_set(ctx.reply, &listed);
    }
}

fn sinterstore(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    ctx.lookups_read(true);
    if let Some(shared) = intersection(ctx, &args[2..]) {
        ctx.lookups_read(false);
        store(
            ctx,
            &args[1],
            Set::from_members(shared.iter().map(|m| &m[..])),
            "sinterstore",
        );
    }
}

fn sintercard(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    const BAD_NUMKEYS: &[u8] = b"ERR numkeys should be greater than 0";
    let numkeys = match parse_i64(&args[1]) {
        Some(n) if n >= 1 => n as u64,
        _ => {
            ctx.reply.error(BAD_NUMKEYS);
            return;
        }
    };
    let argc_keys = (args.len() - 2) as u64;
    if numkeys > argc_keys {
        ctx.reply
            .error(b"ERR Number of keys can't be greater than number of args");
        return;
    }
    let first_option = 2 + numkeys as usize;
    let mut limit: usize = 0;
    let mut index = first_option;
    while index < args.len() {
        if crate::commands::is(&args[index], "LIMIT") && index + 1 < args.len() {
            match parse_i64(&args[index + 1]) {
                Some(n) if n >= 0 => limit = usize::try_from(n).unwrap_or(usize::MAX),
                _ => {
                    ctx.reply.error(b"ERR LIMIT can't be negative");
                    return;
                }
            }
            index += 2;
        } else {
            ctx.reply.error(err::SYNTAX);
            return;
        }
    }
    if let Some(shared) = intersection(ctx, &args[2..first_option]) {
        let count = if limit > 0 {
            shared.len().min(limit)
        } else {
            shared.len()
        };
        ctx.reply.integer(count as i64);
    }
}

fn sunion(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if let Some(all) = union(ctx, &args[1..]) {
        reply_members(ctx.reply, &all);
    }
}

fn sunionstore(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    ctx.lookups_read(true);
    if let Some(all) = union(ctx, &args[2..]) {
        ctx.lookups_read(false);
        store(ctx, &args[1], all, "sunionstore");
    }
}

fn sdiff(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if let Some(left) = difference(ctx, &args[1..]) {
        reply_members(ctx.reply, &left);
    }
}

fn sdiffstore(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    ctx.lookups_read(true);
    if let Some(left) = difference(ctx, &args[2..]) {
        ctx.lookups_read(false);
        store(ctx, &args[1], left, "sdiffstore");
    }
}
