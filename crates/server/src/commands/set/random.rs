//! Random members: SRANDMEMBER and SPOP.

use bytes::Bytes;
use latch_keyspace::Set;
use rand::Rng;

use super::{bulk_member, rebuilt, reply_members, reply_set, set_mut, set_of};
use crate::commands::{err, parse_i64, Ctx};
use crate::pubsub::notify;
use crate::spec::{acl, flag, keyflag, Arg, CommandSpec, Group, KeySpec};

pub(super) const SRANDMEMBER: CommandSpec = CommandSpec {
    name: "srandmember",
    group: Group::Set,
    summary: "Replies with random members of a set without removing them; a negative count allows repeats.",
    since: "1.0.0",
    complexity: "Without the count argument O(1), otherwise O(N) where N is the absolute value of the passed count.",
    arity: -2,
    flags: flag::READONLY,
    acl: acl::SET,
    key_specs: &[KeySpec::single(1, keyflag::RO | keyflag::ACCESS)],
    arguments: &[
        Arg::key("key", 0),
        Arg::integer("count").optional().since("2.6.0"),
    ],
    history: &[("2.6.0", "Takes an optional count.")],
    tips: &["nondeterministic_output"],
    handler: Some(srandmember),
    ..CommandSpec::BASE
};

pub(super) const SPOP: CommandSpec = CommandSpec {
    name: "spop",
    group: Group::Set,
    summary: "Removes random members from a set and replies with them.",
    since: "1.0.0",
    complexity:
        "Without the count argument O(1), otherwise O(N) where N is the value of the passed count.",
    arity: -2,
    flags: flag::WRITE | flag::FAST,
    acl: acl::SET,
    key_specs: &[KeySpec::single(
        1,
        keyflag::RW | keyflag::ACCESS | keyflag::DELETE,
    )],
    arguments: &[
        Arg::key("key", 0),
        Arg::integer("count").optional().since("3.2.0"),
    ],
    history: &[("3.2.0", "Takes an optional count.")],
    tips: &["nondeterministic_output"],
    handler: Some(spop),
    ..CommandSpec::BASE
};

/// The most members one call may pick with repeats when nothing else bounds the reply.
pub(crate) const MAX_REPEATED_PICKS: u64 = 1 << 24;

/// Where a reply of `wanted` repeated picks (SRANDMEMBER, HRANDFIELD, ZRANDMEMBER with a
/// negative count) must stop: Redis builds any count and stops once the reply passes the
/// client's hard output limit (the client is then closed unanswered). Latch does the same
/// past [`MAX_REPEATED_PICKS`]: `Some(bytes)` to stop at (`u64::MAX` for counts under it),
/// `None` when the client has no hard limit, and such a count is refused rather than
/// exhausting memory.
pub(crate) fn repeated_picks_stop(
    server: &crate::server::Server,
    client: &crate::client::Client,
    wanted: u64,
) -> Option<u64> {
    if wanted <= MAX_REPEATED_PICKS {
        return Some(u64::MAX);
    }
    // A reply past the hard limit of the client's class is never sent: the connection
    // closes.
    let class = crate::pubsub::output_class(client.subscriptions.any());
    match server.config.client_output_buffer_limits()[class].hard_bytes {
        0 => None,
        limit => Some(limit),
    }
}

/// Parses a random-member count as Redis does (`-LONG_MAX..=LONG_MAX`): `Err` holds the
/// error to answer.
pub(crate) fn parse_random_count(arg: &[u8]) -> Result<i64, Vec<u8>> {
    let Some(count) = parse_i64(arg) else {
        return Err(err::NOT_INTEGER.to_vec());
    };
    if count == i64::MIN {
        return Err(format!(
            "ERR value is out of range, value must between {} and {}",
            -i64::MAX,
            i64::MAX
        )
        .into_bytes());
    }
    Ok(count)
}

/// `count` distinct indexes below `len` (`count <= len`), in random order.
pub(crate) fn distinct_picks(len: usize, count: usize) -> Vec<usize> {
    rand::seq::index::sample(&mut rand::thread_rng(), len, count).into_vec()
}

/// SRANDMEMBER picks distinct members one by one (Redis' CASE 4) unless the count is over
/// a third of the set; then it drops members from a copy (CASE 3).
const SRANDMEMBER_SUB_STRATEGY_MUL: u64 = 3;

/// SPOP with a count pops members one by one (CASE 2) while what stays is over a fifth of
/// what goes; else it picks what stays into a new set (CASE 3).
const SPOP_MOVE_STRATEGY_MUL: u64 = 5;

fn srandmember(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if args.len() > 3 {
        ctx.reply.error(err::SYNTAX);
        return;
    }
    let count = match args.get(2).map(|arg| parse_random_count(arg)) {
        None => None,
        Some(Ok(count)) => Some(count),
        Some(Err(message)) => {
            ctx.reply.error(&message);
            return;
        }
    };
    let db = ctx.db();
    let Some(entry) = ctx.keys.get(db, &args[1]) else {
        match count {
            None => ctx.reply.null(),
            Some(_) => ctx.reply.array(0),
        }
        return;
    };
    let Some(members) = set_of(entry) else {
        ctx.reply.error(err::WRONGTYPE);
        return;
    };
    let mut rng = rand::thread_rng();
    let Some(count) = count else {
        match members.random(&mut rng) {
            Some(member) => bulk_member(ctx.reply, member),
            None => ctx.reply.null(),
        }
        return;
    };
    let wanted = count.unsigned_abs();
    let size = members.len() as u64;
    if wanted == 0 || size == 0 {
        // (An empty set is never stored, but answer as for a missing key.)
        ctx.reply.array(0);
        return;
    }
    if count < 0 || wanted == 1 {
        // Repeats allowed: independent picks, in the order drawn.
        let Some(stop_at) = repeated_picks_stop(ctx.server, ctx.client, wanted) else {
            ctx.reply.error(b"ERR value is out of range");
            return;
        };
        ctx.reply.array(wanted as usize);
        for _ in 0..wanted {
            let member = members.get(rng.gen_range(0..members.len()));
            bulk_member(ctx.reply, member);
            if ctx.reply.len() as u64 >= stop_at {
                break;
            }
        }
        return;
    }
    if wanted >= size {
        // The whole set, in its own order.
        ctx.reply.array(size as usize);
        for member in members.iter() {
            bulk_member(ctx.reply, member);
        }
        return;
    }
    // Distinct members in no particular order (Redis lists them from a scratch dict):
    // dropping random ones from a copy when most are wanted, else drawing until enough.
    let chosen = if wanted * SRANDMEMBER_SUB_STRATEGY_MUL > size {
        let mut kept: Vec<usize> = (0..size as usize).collect();
        while kept.len() as u64 > wanted {
            let drop = rng.gen_range(0..kept.len());
            kept.swap_remove(drop);
        }
        kept
    } else {
        distinct_picks(size as usize, wanted as usize)
    };
    ctx.reply.array(chosen.len());
    for index in chosen {
        bulk_member(ctx.reply, members.get(index));
    }
}

fn spop(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    if args.len() > 3 {
        ctx.reply.error(err::SYNTAX);
        return;
    }
    let count = match args.get(2) {
        None => None,
        Some(arg) => match parse_i64(arg) {
            Some(count) if count >= 0 => Some(count as u64),
            _ => {
                ctx.reply.error(err::NOT_POSITIVE);
                return;
            }
        },
    };
    let db = ctx.db();
    let key = &args[1][..];
    let Some(entry) = ctx.keys.get(db, key) else {
        match count {
            None => ctx.reply.null(),
            Some(_) => ctx.reply.set(0),
        }
        return;
    };
    let Some(members) = set_mut(entry) else {
        ctx.reply.error(err::WRONGTYPE);
        return;
    };
    if count == Some(0) {
        ctx.reply.set(0);
        return;
    }
    let size = members.len() as u64;
    let mut rng = rand::thread_rng();
    // The reply comes first when the whole set goes (it lists the set as a union does).
    let mut whole: Option<Set> = None;
    let mut replacement: Option<Set> = None;
    let popped: Vec<Vec<u8>> = match count {
        None => members.pop_random(&mut rng).into_iter().collect(),
        Some(count) if count >= size => {
            let listed = rebuilt(members);
            let all = listed.iter().map(|m| m.to_vec()).collect();
            whole = Some(listed);
            *members = Set::new();
            all
        }
        Some(count) if (size - count) * SPOP_MOVE_STRATEGY_MUL > count => (0..count)
            .filter_map(|_| members.pop_random(&mut rng))
            .collect(),
        Some(count) => {
            // Most of the set goes: move what stays into a new set, reply with the rest in
            // the old set's order.
            let mut kept: Option<Set> = None;
            for _ in 0..size - count {
                let Some(member) = members.pop_random(&mut rng) else {
                    break;
                };
                kept.get_or_insert_with(|| Set::for_member(&member))
                    .insert(&member);
            }
            let rest = members.iter().map(|m| m.to_vec()).collect();
            replacement = kept;
            rest
        }
    };
    if let Some(kept) = replacement {
        *members = kept;
    }
    let emptied = members.is_empty();
    ctx.notify(notify::SET, "spop", key);
    if emptied {
        ctx.keys.remove(db, key);
        ctx.notify(notify::GENERIC, "del", key);
    }
    ctx.keys.signal_modified(db, key);
    // Logged as the removal of the members it chose, as Redis does: a DEL when a count took
    // the whole set, else one SREM per member.
    if emptied && count.is_some() {
        ctx.propagate_with(|| vec![Bytes::from_static(b"DEL"), args[1].clone()]);
    } else {
        for member in &popped {
            ctx.propagate_with(|| {
                vec![
                    Bytes::from_static(b"SREM"),
                    args[1].clone(),
                    Bytes::copy_from_slice(member),
                ]
            });
        }
    }
    // Redis counts one change per member popped.
    ctx.keys
        .add_dirty(db, key, popped.len().saturating_sub(1) as u64);
    match count {
        None => match popped.first() {
            Some(member) => ctx.reply.bulk(member),
            None => ctx.reply.null(),
        },
        Some(_) => match &whole {
            Some(all) => reply_members(ctx.reply, all),
            None => {
                let listed: Vec<&[u8]> = popped.iter().map(|m| &m[..]).collect();
                reply_set(ctx.reply, &listed);
            }
        },
    }
}
