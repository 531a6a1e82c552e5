//! Adding, reading and removing entries: XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XSETID.

use bytes::Bytes;
use latch_keyspace::stream::{AddError, NewId, NodeLimits, StreamId, Trim, TrimTo};
use latch_keyspace::{Stream, Value};

use super::{
    id_syntax, node_limits, now_ms, parse_strict_id, range_end_or_reply, range_start_or_reply,
    reply_entry, reply_id, stream_at, stream_or_reply, strict_id_or_reply, IdSyntax, WrongType,
    INVALID_ID,
};
use crate::commands::{arity_error, err, is, parse_i64, Ctx};
use crate::pubsub::notify;
use crate::spec::{acl, flag, keyflag, Arg, CommandSpec, Group, KeySpec};

const KEY_ARG: Arg = Arg::key("key", 0);

/// The trimming options XADD and XTRIM share.
const TRIM_ARGS: &[Arg] = &[
    Arg::oneof(
        "strategy",
        &[
            Arg::token("maxlen", "MAXLEN"),
            Arg::token("minid", "MINID").since("6.2.0"),
        ],
    ),
    Arg::oneof(
        "operator",
        &[Arg::token("equal", "="), Arg::token("approximately", "~")],
    )
    .optional(),
    Arg::string("threshold"),
    Arg::integer("count")
        .with_token("LIMIT")
        .optional()
        .since("6.2.0"),
];

pub(super) const XADD: CommandSpec = CommandSpec {
    name: "xadd",
    group: Group::Stream,
    summary: "Appends an entry to a stream (creating the stream if needed), optionally trimming it.",
    since: "5.0.0",
    complexity: "O(1) when adding a new entry, O(N) when trimming where N being the number of entries evicted.",
    arity: -5,
    flags: flag::WRITE | flag::DENYOOM | flag::FAST,
    acl: acl::STREAM,
    key_specs: &[KeySpec {
        notes: Some("UPDATE instead of INSERT because of the optional trimming feature"),
        ..KeySpec::single(1, keyflag::RW | keyflag::UPDATE)
    }],
    arguments: &[
        KEY_ARG,
        Arg::token("nomkstream", "NOMKSTREAM")
            .optional()
            .since("6.2.0"),
        Arg::block("trim", TRIM_ARGS).optional(),
        Arg::oneof(
            "id_or_auto",
            &[Arg::token("auto_id", "*"), Arg::string("id")],
        ),
        Arg::block(
            "field_value",
            &[Arg::string("field"), Arg::string("value")],
        )
        .multiple(),
    ],
    history: &[
        ("6.2.0", "Gained `NOMKSTREAM`, the `MINID` trimming strategy and `LIMIT`."),
        ("7.0.0", "Accepts IDs of the form `<ms>-*` (sequence chosen by the server)."),
    ],
    tips: &["nondeterministic_output"],
    handler: Some(xadd),
    ..CommandSpec::BASE
};

pub(super) const XRANGE: CommandSpec = CommandSpec {
    name: "xrange",
    group: Group::Stream,
    summary: "Replies with the entries of a stream between two IDs, oldest first.",
    since: "5.0.0",
    complexity: "O(N) with N being the number of elements being returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).",
    arity: -4,
    flags: flag::READONLY,
    acl: acl::STREAM,
    key_specs: &[KeySpec::single(1, keyflag::RO | keyflag::ACCESS)],
    arguments: &[
        KEY_ARG,
        Arg::string("start"),
        Arg::string("end"),
        Arg::integer("count").with_token("COUNT").optional(),
    ],
    history: &[("6.2.0", "Accepts exclusive bounds written `(<id>`.")],
    handler: Some(xrange),
    ..CommandSpec::BASE
};

pub(super) const XREVRANGE: CommandSpec = CommandSpec {
    name: "xrevrange",
    group: Group::Stream,
    summary: "Replies with the entries of a stream between two IDs, newest first.",
    since: "5.0.0",
    complexity: "O(N) with N being the number of elements returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).",
    arity: -4,
    flags: flag::READONLY,
    acl: acl::STREAM,
    key_specs: &[KeySpec::single(1, keyflag::RO | keyflag::ACCESS)],
    arguments: &[
        KEY_ARG,
        Arg::string("end"),
        Arg::string("start"),
        Arg::integer("count").with_token("COUNT").optional(),
    ],
    history: &[("6.2.0", "Accepts exclusive bounds written `(<id>`.")],
    handler: Some(xrevrange),
    ..CommandSpec::BASE
};

pub(super) const XLEN: CommandSpec = CommandSpec {
    name: "xlen",
    group: Group::Stream,
    summary: "Replies with the number of entries in a stream.",
    since: "5.0.0",
    complexity: "O(1)",
    arity: 2,
    flags: flag::READONLY | flag::FAST,
    acl: acl::STREAM,
    key_specs: &[KeySpec::single(1, keyflag::RO)],
    arguments: &[KEY_ARG],
    handler: Some(xlen),
    ..CommandSpec::BASE
};

pub(super) const XDEL: CommandSpec = CommandSpec {
    name: "xdel",
    group: Group::Stream,
    summary: "Removes entries from a stream by ID; replies with how many existed.",
    since: "5.0.0",
    complexity: "O(1) for each single item to delete in the stream, regardless of the stream size.",
    arity: -3,
    flags: flag::WRITE | flag::FAST,
    acl: acl::STREAM,
    key_specs: &[KeySpec::single(1, keyflag::RW | keyflag::DELETE)],
    arguments: &[KEY_ARG, Arg::string("id").multiple()],
    handler: Some(xdel),
    ..CommandSpec::BASE
};

pub(super) const XTRIM: CommandSpec = CommandSpec {
    name: "xtrim",
    group: Group::Stream,
    summary: "Drops the oldest entries of a stream, down to a length or up to an ID.",
    since: "5.0.0",
    complexity: "O(N), with N being the number of evicted entries. Constant times are very small however, since entries are organized in macro nodes containing multiple entries that can be released with a single deallocation.",
    arity: -4,
    flags: flag::WRITE,
    acl: acl::STREAM,
    key_specs: &[KeySpec::single(1, keyflag::RW | keyflag::DELETE)],
    arguments: &[KEY_ARG, Arg::block("trim", TRIM_ARGS)],
    history: &[("6.2.0", "Gained the `MINID` trimming strategy and `LIMIT`.")],
    tips: &["nondeterministic_output"],
    handler: Some(xtrim),
    ..CommandSpec::BASE
};

pub(super) const XSETID: CommandSpec = CommandSpec {
    name: "xsetid",
    group: Group::Stream,
    summary: "Overrides a stream's last ID and, optionally, its added-entries counter and largest deleted ID.",
    since: "5.0.0",
    complexity: "O(1)",
    arity: -3,
    flags: flag::WRITE | flag::DENYOOM | flag::FAST,
    acl: acl::STREAM,
    key_specs: &[KeySpec::single(1, keyflag::RW | keyflag::UPDATE)],
    arguments: &[
        KEY_ARG,
        Arg::string("last-id"),
        Arg::integer("entries_added")
            .with_token("ENTRIESADDED")
            .optional()
            .since("7.0.0"),
        Arg::string("max_deleted_entry_id")
            .with_token("MAXDELETEDID")
            .optional()
            .since("7.0.0"),
    ],
    history: &[(
        "7.0.0",
        "Gained `ENTRIESADDED` and `MAXDELETEDID`.",
    )],
    handler: Some(xsetid),
    ..CommandSpec::BASE
};

/// What XADD and XTRIM parsed before their key is looked at.
struct AddTrimArgs {
    /// XADD: the ID argument's position (the fields follow it).
    id_pos: usize,
    /// XADD: how to pick the ID.
    new_id: NewId,
    no_mkstream: bool,
    trim: Option<Trim>,
    /// Where the trim threshold is (the `~` or `=` before it, if any, is just before).
    threshold_at: usize,
}

/// Redis' cap on the work an approximate trim may do when no LIMIT is given.
fn default_approx_limit(limits: NodeLimits) -> u64 {
    let limit = limits.max_entries.saturating_mul(100);
    if limit == 0 {
        10_000
    } else {
        limit.min(1_000_000)
    }
}

/// Parses `[NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT n]] <id>` (XADD) or the trim
/// options alone (XTRIM), in Redis' order and with its errors. `None` after replying.
fn parse_add_or_trim(ctx: &mut Ctx<'_, '_>, args: &[Bytes], xadd: bool) -> Option<AddTrimArgs> {
    const BOTH: &[u8] =
        b"ERR syntax error, MAXLEN and MINID options at the same time are not compatible";
    let mut parsed = AddTrimArgs {
        id_pos: args.len(),
        new_id: NewId::Auto,
        no_mkstream: false,
        trim: None,
        threshold_at: 0,
    };
    let mut to: Option<TrimTo> = None;
    let mut approx = false;
    let mut limit: Option<i64> = None;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = &args[i][..];
        if xadd && opt == b"*" {
            parsed.id_pos = i;
            break;
        } else if (is(opt, "MAXLEN") || is(opt, "MINID")) && more > 0 {
            if to.is_some() {
                ctx.reply.error(BOTH);
                return None;
            }
            approx = false;
            if more >= 2 && &args[i + 1][..] == b"~" {
                approx = true;
                i += 1;
            } else if more >= 2 && &args[i + 1][..] == b"=" {
                i += 1;
            }
            parsed.threshold_at = i + 1;
            let threshold = &args[i + 1];
            if is(opt, "MAXLEN") {
                let Some(max) = parse_i64(threshold) else {
                    ctx.reply.error(err::NOT_INTEGER);
                    return None;
                };
                if max < 0 {
                    ctx.reply.error(b"ERR The MAXLEN argument must be >= 0.");
                    return None;
                }
                to = Some(TrimTo::MaxLen(max as u64));
            } else {
                let min = strict_id_or_reply(ctx.reply, threshold)?;
                to = Some(TrimTo::MinId(min));
            }
            i += 1;
        } else if is(opt, "LIMIT") && more > 0 {
            let Some(n) = parse_i64(&args[i + 1]) else {
                ctx.reply.error(err::NOT_INTEGER);
                return None;
            };
            if n < 0 {
                ctx.reply.error(b"ERR The LIMIT argument must be >= 0.");
                return None;
            }
            limit = Some(n);
            i += 1;
        } else if xadd && is(opt, "NOMKSTREAM") {
            parsed.no_mkstream = true;
        } else if xadd {
            // Anything else is the ID (or a syntax error in its place).
            let Some(syntax) =
                id_syntax(opt).filter(|s| matches!(s, IdSyntax::Parts(..) | IdSyntax::MsStar(_)))
            else {
                ctx.reply.error(INVALID_ID);
                return None;
            };
            parsed.new_id = match syntax {
                IdSyntax::MsStar(ms) => NewId::Ms(ms),
                _ => NewId::Exact(parse_strict_id(opt, 0)?),
            };
            parsed.id_pos = i;
            break;
        } else {
            ctx.reply.error(err::SYNTAX);
            return None;
        }
        i += 1;
    }
    if limit.is_some_and(|n| n > 0) && to.is_none() {
        ctx.reply.error(
            b"ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        );
        return None;
    }
    if !xadd && to.is_none() {
        ctx.reply
            .error(b"ERR syntax error, XTRIM must be called with a trimming strategy");
        return None;
    }
    let limit = match limit {
        // Replaying the log, as Redis does for its own: an approximate trim was logged as
        // the exact one it amounted to (LIMIT kept), which must not be limited.
        _ if ctx.now().loading => 0,
        Some(_) if !approx => {
            ctx.reply
                .error(b"ERR syntax error, LIMIT cannot be used without the special ~ option");
            return None;
        }
        Some(n) => n as u64,
        None if approx => default_approx_limit(node_limits(ctx)),
        None => 0,
    };
    parsed.trim = to.map(|to| Trim { to, approx, limit });
    Some(parsed)
}

/// XADD key [NOMKSTREAM] [trim options] <id|*> field value [field value ...]
fn xadd(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(parsed) = parse_add_or_trim(ctx, args, true) else {
        return;
    };
    let field_pos = parsed.id_pos + 1;
    let field_args = args.len().saturating_sub(field_pos);
    if field_pos > args.len() || field_args < 2 || field_args % 2 == 1 {
        ctx.reply.error(&arity_error("xadd"));
        return;
    }
    if parsed.new_id == NewId::Exact(StreamId::MIN) {
        ctx.reply
            .error(b"ERR The ID specified in XADD must be greater than 0-0");
        return;
    }
    let fields: Vec<Vec<u8>> = args[field_pos..].iter().map(|a| a.to_vec()).collect();
    let limits = node_limits(ctx);
    let now = now_ms(ctx).max(0) as u64;
    let db = ctx.db();
    let key = &args[1][..];
    let outcome = match stream_at(ctx.keys, db, key) {
        Err(WrongType) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
        Ok(Some(stream)) => append(stream, &parsed, fields, now, limits),
        Ok(None) if parsed.no_mkstream => {
            ctx.reply.null();
            return;
        }
        Ok(None) => {
            let mut stream = Stream::new();
            let outcome = append(&mut stream, &parsed, fields, now, limits);
            if outcome.is_ok() {
                ctx.keys.set(db, key, Value::Stream(Box::new(stream)), None);
            }
            outcome
        }
    };
    match outcome {
        Ok((id, trimmed)) => {
            reply_id(ctx.reply, id);
            ctx.keys.signal_modified(db, key);
            ctx.notify(notify::STREAM, "xadd", key);
            if trimmed {
                ctx.notify(notify::STREAM, "xtrim", key);
            }
            log_add_or_trim(ctx, args, &parsed, Some(id));
        }
        Err(message) => ctx.reply.error(message),
    }
}

/// Logs an XADD or XTRIM that changed the stream so that a replay does exactly the same, as
/// Redis does: a generated ID (`*`, `<ms>-*`) is written out, and an approximate trim
/// (which depends on how entries fell into nodes) becomes the exact trim it amounted to.
fn log_add_or_trim(
    ctx: &mut Ctx<'_, '_>,
    args: &[Bytes],
    parsed: &AddTrimArgs,
    added: Option<StreamId>,
) {
    let generated = added.filter(|_| !matches!(parsed.new_id, NewId::Exact(_)));
    let approx = parsed.trim.filter(|trim| trim.approx);
    if generated.is_none() && approx.is_none() {
        return;
    }
    let threshold = match approx.map(|trim| trim.to) {
        None => None,
        Some(to) => match stream_at(ctx.keys, ctx.db(), &args[1]) {
            Ok(Some(stream)) => Some(match to {
                TrimTo::MaxLen(_) => stream.len().to_string(),
                TrimTo::MinId(_) => stream
                    .first_entry()
                    .map_or(StreamId::MAX, |(id, _)| *id)
                    .to_string(),
            }),
            // Not reached: trimming leaves the (possibly empty) stream in place.
            _ => None,
        },
    };
    ctx.propagate_with(|| {
        let mut logged = args.to_vec();
        if let Some(threshold) = threshold {
            logged[parsed.threshold_at - 1] = Bytes::from_static(b"=");
            logged[parsed.threshold_at] = Bytes::from(threshold);
        }
        if let Some(id) = generated {
            logged[parsed.id_pos] = Bytes::from(id.to_string());
        }
        logged
    });
}

/// Adds one entry and trims as asked; the new ID (and whether the trim removed anything)
/// or Redis' error.
fn append(
    stream: &mut Stream,
    parsed: &AddTrimArgs,
    fields: Vec<Vec<u8>>,
    now_ms: u64,
    limits: NodeLimits,
) -> Result<(StreamId, bool), &'static [u8]> {
    if stream.last_id == StreamId::MAX {
        return Err(b"ERR The stream has exhausted the last possible ID, unable to add more items");
    }
    let id = stream
        .add(parsed.new_id, fields, now_ms, limits)
        .map_err(|e| match e {
            AddError::NotAbove => {
                &b"ERR The ID specified in XADD is equal or smaller than the target stream top item"
                    [..]
            }
            AddError::SequenceExhausted | AddError::TooLarge => {
                &b"ERR Elements are too large to be stored"[..]
            }
        })?;
    let trimmed = parsed.trim.is_some_and(|trim| stream.trim(trim) > 0);
    Ok((id, trimmed))
}

/// XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]
fn xtrim(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(parsed) = parse_add_or_trim(ctx, args, false) else {
        return;
    };
    let Some(trim) = parsed.trim else {
        return;
    };
    let db = ctx.db();
    let Ok(found) = stream_or_reply(ctx.keys, ctx.reply, db, &args[1]) else {
        return;
    };
    let removed = found.map_or(0, |stream| stream.trim(trim));
    if removed > 0 {
        ctx.keys.signal_modified(db, &args[1]);
        ctx.notify(notify::STREAM, "xtrim", &args[1]);
        log_add_or_trim(ctx, args, &parsed, None);
    }
    ctx.reply.integer(removed as i64);
}

fn xlen(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    if let Ok(found) = stream_or_reply(ctx.keys, ctx.reply, db, &args[1]) {
        let len = found.map_or(0, |s| s.len());
        ctx.reply.integer(len as i64);
    }
}

fn xrange(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    range_generic(ctx, args, false);
}

fn xrevrange(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    range_generic(ctx, args, true);
}

/// XRANGE key start end [COUNT n] / XREVRANGE key end start [COUNT n]
fn range_generic(ctx: &mut Ctx<'_, '_>, args: &[Bytes], rev: bool) {
    let (start_arg, end_arg) = if rev {
        (&args[3], &args[2])
    } else {
        (&args[2], &args[3])
    };
    let Some(start) = range_start_or_reply(ctx.reply, start_arg) else {
        return;
    };
    let Some(end) = range_end_or_reply(ctx.reply, end_arg) else {
        return;
    };
    let mut count: Option<usize> = None;
    let mut j = 4;
    while j < args.len() {
        if is(&args[j], "COUNT") && j + 1 < args.len() {
            let Some(n) = parse_i64(&args[j + 1]) else {
                ctx.reply.error(err::NOT_INTEGER);
                return;
            };
            count = Some(usize::try_from(n).unwrap_or(0));
            j += 2;
        } else {
            ctx.reply.error(err::SYNTAX);
            return;
        }
    }
    let db = ctx.db();
    let Ok(found) = stream_or_reply(ctx.keys, ctx.reply, db, &args[1]) else {
        return;
    };
    let Some(stream) = found else {
        ctx.reply.array(0);
        return;
    };
    if count == Some(0) {
        ctx.reply.null_array();
        return;
    }
    let take = count.unwrap_or(usize::MAX);
    let items: Vec<_> = if rev {
        stream.range(start, end).rev().take(take).collect()
    } else {
        stream.range(start, end).take(take).collect()
    };
    ctx.reply.array(items.len());
    for (id, fields) in items {
        reply_entry(ctx.reply, *id, fields);
    }
}

/// XDEL key id [id ...]
fn xdel(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    // As in Redis the key is looked at first: a missing key answers 0 whatever the IDs.
    match stream_at(ctx.keys, db, &args[1]) {
        Err(WrongType) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
        Ok(None) => {
            ctx.reply.integer(0);
            return;
        }
        Ok(Some(_)) => {}
    }
    let mut ids = Vec::with_capacity(args.len() - 2);
    for arg in &args[2..] {
        let Some(id) = strict_id_or_reply(ctx.reply, arg) else {
            return;
        };
        ids.push(id);
    }
    let deleted = match stream_at(ctx.keys, db, &args[1]) {
        Ok(Some(stream)) => stream.delete(&ids),
        _ => 0,
    };
    if deleted > 0 {
        ctx.keys.signal_modified(db, &args[1]);
        ctx.notify(notify::STREAM, "xdel", &args[1]);
    }
    ctx.reply.integer(deleted as i64);
}

/// XSETID key last-id [ENTRIESADDED n] [MAXDELETEDID id]
fn xsetid(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(id) = strict_id_or_reply(ctx.reply, &args[2]) else {
        return;
    };
    let mut entries_added: Option<u64> = None;
    let mut max_deleted = StreamId::MIN;
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - 1 - i;
        if is(&args[i], "ENTRIESADDED") && more > 0 {
            let Some(n) = parse_i64(&args[i + 1]) else {
                ctx.reply.error(err::NOT_INTEGER);
                return;
            };
            if n < 0 {
                ctx.reply.error(b"ERR entries_added must be positive");
                return;
            }
            entries_added = Some(n as u64);
        } else if is(&args[i], "MAXDELETEDID") && more > 0 {
            let Some(deleted) = strict_id_or_reply(ctx.reply, &args[i + 1]) else {
                return;
            };
            if id < deleted {
                ctx.reply.error(
                    b"ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                );
                return;
            }
            max_deleted = deleted;
        } else {
            ctx.reply.error(err::SYNTAX);
            return;
        }
        i += 2;
    }
    let db = ctx.db();
    let Ok(found) = stream_or_reply(ctx.keys, ctx.reply, db, &args[1]) else {
        return;
    };
    let Some(stream) = found else {
        ctx.reply.error(err::NO_SUCH_KEY);
        return;
    };
    if let Some(top) = stream.last_live_id() {
        if id < top {
            ctx.reply.error(
                b"ERR The ID specified in XSETID is smaller than the target stream top item",
            );
            return;
        }
        if entries_added.is_some_and(|n| (stream.len() as u64) > n) {
            ctx.reply.error(
                b"ERR The entries_added specified in XSETID is smaller than the target stream length",
            );
            return;
        }
    }
    let before = (stream.last_id, stream.entries_added, stream.max_deleted_id);
    stream.last_id = id;
    if let Some(n) = entries_added {
        stream.entries_added = n;
    }
    if !max_deleted.is_zero() {
        stream.max_deleted_id = max_deleted;
    }
    let changed = before != (stream.last_id, stream.entries_added, stream.max_deleted_id);
    ctx.reply.ok();
    if changed {
        ctx.keys.signal_modified(db, &args[1]);
    }
    // Reported even when nothing changed, as Redis does.
    ctx.notify(notify::STREAM, "xsetid", &args[1]);
}
