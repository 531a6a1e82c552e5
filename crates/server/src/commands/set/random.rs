//! Random members: SRANDMEMBER and SPOP.

use bytes::Bytes;
use rand::seq::SliceRandom;
use rand::Rng;

use super::{members_in_order, reply_set, set_mut, set_of};
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

/// The most members one call may pick with repeats. Redis has no limit and would build a
/// reply as large as asked; we refuse beyond this rather than exhaust memory.
pub(crate) const MAX_REPEATED_PICKS: u64 = 1 << 24;

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

/// `count` indexes below `len` (which is not 0), each drawn independently.
pub(crate) fn picks_with_repeats(len: usize, count: u64) -> Vec<usize> {
    let mut rng = rand::thread_rng();
    (0..count).map(|_| rng.gen_range(0..len)).collect()
}

/// `count` distinct indexes below `len` (`count <= len`), in random order.
pub(crate) fn distinct_picks(len: usize, count: usize) -> Vec<usize> {
    rand::seq::index::sample(&mut rand::thread_rng(), len, count).into_vec()
}

/// One member picked uniformly, without building a list (the table has no random access,
/// so this walks to it).
fn random_member(members: &super::Members) -> Option<&[u8]> {
    if members.is_empty() {
        return None;
    }
    let index = rand::thread_rng().gen_range(0..members.len());
    members.iter().nth(index).map(|m| &m[..])
}

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
    let Some(count) = count else {
        match random_member(members) {
            Some(member) => ctx.reply.bulk(member),
            None => ctx.reply.null(),
        }
        return;
    };
    let listed = members_in_order(members);
    if listed.is_empty() {
        // Never stored (empty sets are removed), but answer as for a missing key.
        ctx.reply.array(0);
        return;
    }
    let wanted = count.unsigned_abs();
    if wanted == 0 {
        ctx.reply.array(0);
        return;
    }
    let chosen: Vec<&[u8]> = if count < 0 || wanted == 1 {
        if wanted > MAX_REPEATED_PICKS {
            ctx.reply.error(b"ERR value is out of range");
            return;
        }
        picks_with_repeats(listed.len(), wanted)
            .into_iter()
            .map(|i| listed[i])
            .collect()
    } else if wanted >= listed.len() as u64 {
        listed
    } else {
        distinct_picks(listed.len(), wanted as usize)
            .into_iter()
            .map(|i| listed[i])
            .collect()
    };
    ctx.reply.array(chosen.len());
    for member in chosen {
        ctx.reply.bulk(member);
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
    let size = members.len();
    let popped: Vec<Vec<u8>> = match count {
        Some(count) if count >= size as u64 => {
            // Everything goes: reply with the whole set and drop the key.
            let listed: Vec<Vec<u8>> = members_in_order(members)
                .into_iter()
                .map(<[u8]>::to_vec)
                .collect();
            members.clear();
            listed
        }
        None => random_member(members)
            .map(<[u8]>::to_vec)
            .and_then(|member| members.take(&member))
            .into_iter()
            .collect(),
        Some(count) => {
            let wanted = count as usize;
            let mut listed: Vec<&[u8]> = members.iter().map(|m| &m[..]).collect();
            let (chosen, _) = listed.partial_shuffle(&mut rand::thread_rng(), wanted);
            let chosen: Vec<Vec<u8>> = chosen.iter().map(|m| m.to_vec()).collect();
            for member in &chosen {
                members.remove(member);
            }
            chosen
        }
    };
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
        Some(_) => {
            let listed: Vec<&[u8]> = popped.iter().map(|m| &m[..]).collect();
            reply_set(ctx.reply, &listed);
        }
    }
}
