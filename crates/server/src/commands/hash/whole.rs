//! Reading a whole hash or parts of it at a time: HGETALL, HKEYS, HVALS, HSCAN, HRANDFIELD.

use bytes::Bytes;
use latch_keyspace::hash::text;
use latch_keyspace::Elem;
use latch_protocol::Resp;

use super::fields::read;
use super::{hash_of, reply_elem};
use crate::commands::keys::scan::parse_cursor;
use crate::commands::set::random::{parse_random_count, repeated_picks_stop};
use crate::commands::set::scan::{parse_options, reply_scan, walk};
use crate::commands::{err, is, Ctx};
use crate::spec::{acl, flag, keyflag, Arg, ArgType, CommandSpec, Group, KeySpec};

const KEY_ARG: &[Arg] = &[Arg::key("key", 0)];
const READ_KEY: &[KeySpec] = &[KeySpec::single(1, keyflag::RO | keyflag::ACCESS)];

pub(super) const HGETALL: CommandSpec = CommandSpec {
    name: "hgetall",
    group: Group::Hash,
    summary: "Replies with every field of a hash and its value.",
    since: "2.0.0",
    complexity: "O(N) where N is the size of the hash.",
    arity: 2,
    flags: flag::READONLY,
    acl: acl::HASH,
    key_specs: READ_KEY,
    arguments: KEY_ARG,
    tips: &["nondeterministic_output_order"],
    handler: Some(hgetall),
    ..CommandSpec::BASE
};

pub(super) const HKEYS: CommandSpec = CommandSpec {
    name: "hkeys",
    group: Group::Hash,
    summary: "Replies with every field name of a hash.",
    since: "2.0.0",
    complexity: "O(N) where N is the size of the hash.",
    arity: 2,
    flags: flag::READONLY,
    acl: acl::HASH,
    key_specs: READ_KEY,
    arguments: KEY_ARG,
    tips: &["nondeterministic_output_order"],
    handler: Some(hkeys),
    ..CommandSpec::BASE
};

pub(super) const HVALS: CommandSpec = CommandSpec {
    name: "hvals",
    group: Group::Hash,
    summary: "Replies with every value of a hash.",
    since: "2.0.0",
    complexity: "O(N) where N is the size of the hash.",
    arity: 2,
    flags: flag::READONLY,
    acl: acl::HASH,
    key_specs: READ_KEY,
    arguments: KEY_ARG,
    tips: &["nondeterministic_output_order"],
    handler: Some(hvals),
    ..CommandSpec::BASE
};

pub(super) const HSCAN: CommandSpec = CommandSpec {
    name: "hscan",
    group: Group::Hash,
    summary: "Walks the fields and values of a hash a few at a time, resuming from a cursor.",
    since: "2.8.0",
    complexity: "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..",
    arity: -3,
    flags: flag::READONLY,
    acl: acl::HASH,
    key_specs: READ_KEY,
    arguments: &[
        Arg::key("key", 0),
        Arg::integer("cursor"),
        Arg::new("pattern", ArgType::Pattern)
            .with_token("MATCH")
            .optional(),
        Arg::integer("count").with_token("COUNT").optional(),
    ],
    tips: &["nondeterministic_output"],
    handler: Some(hscan),
    ..CommandSpec::BASE
};

pub(super) const HRANDFIELD: CommandSpec = CommandSpec {
    name: "hrandfield",
    group: Group::Hash,
    summary: "Replies with random fields of a hash (optionally with their values); a negative count allows repeats.",
    since: "6.2.0",
    complexity: "O(N) where N is the number of fields returned",
    arity: -2,
    flags: flag::READONLY,
    acl: acl::HASH,
    key_specs: READ_KEY,
    arguments: &[
        Arg::key("key", 0),
        Arg::block(
            "options",
            &[
                Arg::integer("count"),
                Arg::token("withvalues", "WITHVALUES").optional(),
            ],
        )
        .optional(),
    ],
    tips: &["nondeterministic_output"],
    handler: Some(hrandfield),
    ..CommandSpec::BASE
};

/// What HGETALL, HKEYS and HVALS list of each field.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Listing {
    Pairs,
    Fields,
    Values,
}

fn list_hash(ctx: &mut Ctx<'_, '_>, args: &[Bytes], listing: Listing) {
    let db = ctx.db();
    let Ok(hash) = read(ctx.keys, ctx.reply, db, &args[1]) else {
        return;
    };
    let len = hash.map_or(0, |h| h.len());
    match listing {
        Listing::Pairs => ctx.reply.map(len),
        Listing::Fields | Listing::Values => ctx.reply.array(len),
    }
    for (field, value) in hash.into_iter().flat_map(|h| h.iter()) {
        if listing != Listing::Values {
            reply_elem(ctx.reply, field);
        }
        if listing != Listing::Fields {
            reply_elem(ctx.reply, value);
        }
    }
}

fn hgetall(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    list_hash(ctx, args, Listing::Pairs);
}

fn hkeys(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    list_hash(ctx, args, Listing::Fields);
}

fn hvals(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    list_hash(ctx, args, Listing::Values);
}

fn hscan(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    // Order as in Redis: the cursor, the key (missing: an empty scan, options unread), its
    // type, the options.
    let Some(cursor) = parse_cursor(&args[2]) else {
        ctx.reply.error(err::INVALID_CURSOR);
        return;
    };
    let db = ctx.db();
    let Some(entry) = ctx.keys.get(db, &args[1]) else {
        reply_scan(ctx.reply, 0, &[]);
        return;
    };
    let Some(hash) = hash_of(entry) else {
        ctx.reply.error(err::WRONGTYPE);
        return;
    };
    let Some(options) = parse_options(ctx.reply, &args[3..]) else {
        return;
    };
    // A compact hash comes back whole, in its order, with cursor 0, as Redis scans a
    // listpack.
    let (next, chosen) = if hash.is_compact() {
        (0, hash.iter().collect())
    } else {
        walk(
            hash.iter(),
            |(field, _)| bytes_of(field),
            cursor,
            options.count,
        )
    };
    let shown: Vec<(Elem<'_>, Elem<'_>)> = chosen
        .into_iter()
        .filter(|(field, _)| options.matches(text(*field, &mut itoa::Buffer::new())))
        .collect();
    ctx.reply.array(2);
    ctx.reply.bulk(itoa::Buffer::new().format(next).as_bytes());
    ctx.reply.array(shown.len() * 2);
    for (field, value) in shown {
        reply_elem(ctx.reply, field);
        reply_elem(ctx.reply, value);
    }
}

fn hrandfield(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let mut count = None;
    let mut with_values = false;
    if args.len() >= 3 {
        match parse_random_count(&args[2]) {
            Ok(n) => count = Some(n),
            Err(message) => {
                ctx.reply.error(&message);
                return;
            }
        }
        if args.len() > 4 || (args.len() == 4 && !is(&args[3], "WITHVALUES")) {
            ctx.reply.error(err::SYNTAX);
            return;
        }
        if args.len() == 4 {
            with_values = true;
            // Pairs double the reply; Redis keeps the doubled count in range.
            if count.is_some_and(|n| n.unsigned_abs() > (i64::MAX / 2) as u64) {
                ctx.reply.error(b"ERR value is out of range");
                return;
            }
        }
    }
    let db = ctx.db();
    let Ok(hash) = read(ctx.keys, ctx.reply, db, &args[1]) else {
        return;
    };
    let Some(hash) = hash.filter(|h| !h.is_empty()) else {
        match count {
            None => ctx.reply.null(),
            Some(_) => ctx.reply.array(0),
        }
        return;
    };
    let mut rng = rand::thread_rng();
    let Some(count) = count else {
        match hash.random_pair(&mut rng) {
            Some((field, _)) => reply_elem(ctx.reply, field),
            None => ctx.reply.null(),
        }
        return;
    };
    let wanted = count.unsigned_abs();
    let chosen: Vec<(Elem<'_>, Elem<'_>)> = if wanted == 0 {
        Vec::new()
    } else if count < 0 || wanted == 1 {
        let Some(stop_at) = repeated_picks_stop(ctx.server, ctx.client, wanted) else {
            ctx.reply.error(b"ERR value is out of range");
            return;
        };
        if stop_at != u64::MAX {
            // Past the usual bound, the picks stop once the reply passes the client's limit.
            let entries = usize::try_from(wanted).unwrap_or(usize::MAX);
            let picks = std::iter::from_fn(|| hash.random_pair(&mut rng));
            reply_pairs(ctx.reply, entries, picks, with_values, stop_at);
            return;
        }
        hash.random_pairs(wanted as usize, &mut rng)
    } else {
        hash.distinct_random_pairs(usize::try_from(wanted).unwrap_or(usize::MAX), &mut rng)
    };
    reply_pairs(
        ctx.reply,
        chosen.len(),
        chosen.into_iter(),
        with_values,
        u64::MAX,
    );
}

/// HRANDFIELD's reply: `len` fields (with their values, nested in RESP3 and flat in RESP2)
/// from `pairs`, stopping early once the reply holds `stop_at` bytes (a client's hard
/// output limit: the reply is then never sent, as Redis closes the client).
fn reply_pairs<'h>(
    reply: &mut latch_protocol::Reply,
    len: usize,
    pairs: impl Iterator<Item = (Elem<'h>, Elem<'h>)>,
    with_values: bool,
    stop_at: u64,
) {
    let nested = with_values && reply.resp() == Resp::V3;
    reply.array(if with_values && !nested {
        len.saturating_mul(2)
    } else {
        len
    });
    for (field, value) in pairs {
        if reply.len() as u64 >= stop_at {
            break;
        }
        if nested {
            reply.array(2);
        }
        reply_elem(reply, field);
        if with_values {
            reply_elem(reply, value);
        }
    }
}

/// A field or value of a large hash, which keeps every one as bytes.
fn bytes_of(elem: Elem<'_>) -> &[u8] {
    elem.as_bytes()
        .expect("a large hash keeps its fields and values as bytes")
}
