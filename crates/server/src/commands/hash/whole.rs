//! Reading a whole hash or parts of it at a time: HGETALL, HKEYS, HVALS, HSCAN, HRANDFIELD.

use bytes::Bytes;
use latch_protocol::Resp;

use super::fields::read;
use super::hash_of;
use crate::commands::keys::scan::parse_cursor;
use crate::commands::set::random::{
    distinct_picks, parse_random_count, picks_with_repeats, MAX_REPEATED_PICKS,
};
use crate::commands::set::scan::{parse_options, reply_scan, scans_whole, walk};
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
    let Ok(fields) = read(ctx.keys, ctx.reply, db, &args[1]) else {
        return;
    };
    let len = fields.map_or(0, |f| f.len());
    match listing {
        Listing::Pairs => ctx.reply.map(len),
        Listing::Fields | Listing::Values => ctx.reply.array(len),
    }
    for (field, value) in fields.into_iter().flatten() {
        if listing != Listing::Values {
            ctx.reply.bulk(field);
        }
        if listing != Listing::Fields {
            ctx.reply.bulk(value);
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
    let Some(fields) = hash_of(entry) else {
        ctx.reply.error(err::WRONGTYPE);
        return;
    };
    let Some(options) = parse_options(ctx.reply, &args[3..]) else {
        return;
    };
    let pairs = fields.iter().map(|(f, v)| (&f[..], &v[..]));
    let (next, chosen) = if scans_whole(entry) {
        (0, pairs.collect())
    } else {
        walk(pairs, |(field, _)| field, cursor, options.count)
    };
    let mut shown: Vec<&[u8]> = Vec::with_capacity(chosen.len() * 2);
    for (field, value) in chosen {
        if options.matches(field) {
            shown.push(field);
            shown.push(value);
        }
    }
    reply_scan(ctx.reply, next, &shown);
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
    let Ok(fields) = read(ctx.keys, ctx.reply, db, &args[1]) else {
        return;
    };
    let Some(fields) = fields.filter(|f| !f.is_empty()) else {
        match count {
            None => ctx.reply.null(),
            Some(_) => ctx.reply.array(0),
        }
        return;
    };
    let Some(count) = count else {
        // The table has no random access: walk to one picked position.
        let index = picks_with_repeats(fields.len(), 1);
        match index.first().and_then(|&i| fields.keys().nth(i)) {
            Some(field) => ctx.reply.bulk(field),
            None => ctx.reply.null(),
        }
        return;
    };
    let pairs: Vec<(&[u8], &[u8])> = fields.iter().map(|(f, v)| (&f[..], &v[..])).collect();
    let wanted = count.unsigned_abs();
    let chosen: Vec<(&[u8], &[u8])> = if wanted == 0 {
        Vec::new()
    } else if count < 0 || wanted == 1 {
        if wanted > MAX_REPEATED_PICKS {
            ctx.reply.error(b"ERR value is out of range");
            return;
        }
        picks_with_repeats(pairs.len(), wanted)
            .into_iter()
            .map(|i| pairs[i])
            .collect()
    } else if wanted >= pairs.len() as u64 {
        pairs
    } else {
        distinct_picks(pairs.len(), wanted as usize)
            .into_iter()
            .map(|i| pairs[i])
            .collect()
    };
    // RESP3 nests each field with its value; RESP2 lists them flat.
    let nested = with_values && ctx.reply.resp() == Resp::V3;
    if with_values && !nested {
        ctx.reply.array(chosen.len() * 2);
    } else {
        ctx.reply.array(chosen.len());
    }
    for (field, value) in chosen {
        if nested {
            ctx.reply.array(2);
        }
        ctx.reply.bulk(field);
        if with_values {
            ctx.reply.bulk(value);
        }
    }
}
