//! Walking the keyspace: KEYS, SCAN, RANDOMKEY. All lock the whole keyspace.

use bytes::Bytes;
use latch_keyspace::glob::glob_match;

use crate::commands::{err, is, parse_i64, Ctx};
use crate::spec::{acl, flag, Arg, ArgType, CommandSpec, LockPlan};

pub(super) const KEYS: CommandSpec = CommandSpec {
    name: "keys",
    summary: "Lists every key matching a glob-style pattern.",
    complexity: "O(N) with N being the number of keys in the database, under the assumption that the key names in the database and the given pattern have limited length.",
    arity: 2,
    flags: flag::READONLY,
    acl: acl::KEYSPACE | acl::DANGEROUS,
    arguments: &[Arg::new("pattern", ArgType::Pattern)],
    tips: &["request_policy:all_shards", "nondeterministic_output_order"],
    handler: Some(keys),
    lock: LockPlan::All,
    ..CommandSpec::BASE
};

pub(super) const SCAN: CommandSpec = CommandSpec {
    name: "scan",
    summary: "Walks the keys of the database a few at a time, resuming from a cursor.",
    since: "2.8.0",
    complexity: "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.",
    arity: -2,
    flags: flag::READONLY,
    acl: acl::KEYSPACE,
    arguments: &[
        Arg::integer("cursor"),
        Arg::new("pattern", ArgType::Pattern).with_token("MATCH").optional(),
        Arg::integer("count").with_token("COUNT").optional(),
        Arg::string("type").with_token("TYPE").optional().since("6.0.0"),
    ],
    history: &[("6.0.0", "The `TYPE` option was added.")],
    tips: &["nondeterministic_output", "request_policy:special"],
    handler: Some(scan),
    lock: LockPlan::All,
    ..CommandSpec::BASE
};

pub(super) const RANDOMKEY: CommandSpec = CommandSpec {
    name: "randomkey",
    summary: "Replies with a key picked at random, or nil when the database is empty.",
    arity: 1,
    flags: flag::READONLY,
    acl: acl::KEYSPACE,
    tips: &["request_policy:all_shards", "nondeterministic_output"],
    handler: Some(randomkey),
    lock: LockPlan::All,
    ..CommandSpec::BASE
};

fn keys(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let pattern = &args[1][..];
    let all = pattern == b"*";
    let mut found: Vec<Box<[u8]>> = Vec::new();
    ctx.keys.for_each_key(db, &mut |slot| {
        if all || glob_match(pattern, slot.key(), false) {
            found.push(slot.key().into());
        }
    });
    ctx.reply.array(found.len());
    for key in &found {
        ctx.reply.bulk(key);
    }
}

/// Parses a SCAN cursor as Redis does with `strtoul`: an unsigned 64-bit decimal, a leading
/// `-` wrapping around as in C, no leading space, nothing after the digits. (An empty
/// cursor is 0, another C quirk Redis keeps.)
pub(crate) fn parse_cursor(arg: &[u8]) -> Option<u64> {
    let (negative, digits) = match arg.split_first() {
        None => return Some(0),
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        Some(_) => (false, arg),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut value: u64 = 0;
    for &digit in digits {
        value = value
            .checked_mul(10)?
            .checked_add(u64::from(digit - b'0'))?;
    }
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

fn scan(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let Some(cursor) = parse_cursor(&args[1]) else {
        ctx.reply.error(err::INVALID_CURSOR);
        return;
    };
    let mut count: usize = 10;
    let mut pattern: Option<&[u8]> = None;
    let mut type_name: Option<&[u8]> = None;
    let mut index = 2;
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
            // "*" matches everything: the same as no pattern.
            pattern = Some(&args[index + 1][..]).filter(|p| *p != b"*");
        } else if is(option, "TYPE") && has_value {
            type_name = Some(&args[index + 1][..]);
        } else {
            ctx.reply.error(err::SYNTAX);
            return;
        }
        index += 2;
    }
    let db = ctx.db();
    let mut found: Vec<Box<[u8]>> = Vec::new();
    let mut passed = Vec::new();
    let next = ctx.keys.scan_with_passed(
        db,
        cursor,
        count,
        &mut |slot| {
            if pattern.is_some_and(|p| !glob_match(p, slot.key(), false)) {
                return;
            }
            if type_name
                .is_some_and(|t| !t.eq_ignore_ascii_case(slot.value().kind().name().as_bytes()))
            {
                return;
            }
            found.push(slot.key().into());
        },
        &mut passed,
    );
    // A key met past its deadline that the pattern matches is removed, as Redis' SCAN does:
    // by its TYPE lookup when there is a type filter, else by its expiry check.
    for key in passed {
        if pattern.is_some_and(|p| !glob_match(p, &key, false)) {
            continue;
        }
        if type_name.is_some() {
            ctx.keys.get_untouched(db, &key);
        } else {
            ctx.keys.expire_if_passed(db, &key);
        }
    }
    ctx.reply.array(2);
    ctx.reply.bulk(next.to_string().as_bytes());
    ctx.reply.array(found.len());
    for key in &found {
        ctx.reply.bulk(key);
    }
}

fn randomkey(ctx: &mut Ctx<'_, '_>, _args: &[Bytes]) {
    let db = ctx.db();
    match ctx.keys.random_key(db) {
        Some(key) => ctx.reply.bulk(&key),
        None => ctx.reply.null(),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_cursor;

    #[test]
    fn cursors_parse_like_strtoul() {
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"+7"), Some(7));
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
        for bad in [
            &b"18446744073709551616"[..],
            b" 1",
            b"1 ",
            b"x",
            b"-",
            b"+",
            b"1x",
            b"--1",
        ] {
            assert_eq!(parse_cursor(bad), None, "{:?}", bad);
        }
    }
}
