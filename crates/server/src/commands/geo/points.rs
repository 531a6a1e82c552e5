//! Members one by one: GEOADD, GEOPOS, GEODIST, GEOHASH.

use bytes::Bytes;
use latch_keyspace::{SortedSet, Value};

use super::{format_distance, hash, parse_lon_lat, parse_unit, reply_position, zset_at, WrongType};
use crate::commands::{err, is, Ctx};
use crate::pubsub::notify;

/// GEOADD key [NX|XX] [CH] longitude latitude member [...]: ZADD with geohash scores.
pub(super) fn geoadd(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let (mut nx, mut xx, mut ch) = (false, false, false);
    let mut first = 2;
    while let Some(option) = args.get(first) {
        if is(option, "NX") {
            nx = true;
        } else if is(option, "XX") {
            xx = true;
        } else if is(option, "CH") {
            ch = true;
        } else {
            break;
        }
        first += 1;
    }
    let triples = &args[first..];
    if triples.is_empty() || !triples.len().is_multiple_of(3) || (nx && xx) {
        ctx.reply.error(err::SYNTAX);
        return;
    }
    // Every position is checked before anything changes.
    let mut points = Vec::with_capacity(triples.len() / 3);
    let mut scores = Vec::with_capacity(triples.len() / 3);
    for triple in triples.chunks_exact(3) {
        let score = match parse_lon_lat(&triple[0], &triple[1]) {
            Ok([longitude, latitude]) => hash::score_of(longitude, latitude).unwrap_or(0),
            Err(message) => {
                ctx.reply.error(&message);
                return;
            }
        };
        points.push((score as f64, &triple[2][..]));
        scores.push(score);
    }
    let db = ctx.db();
    let key = &args[1][..];
    let mut created = None;
    let set = match zset_at(ctx.keys, db, key) {
        Err(WrongType) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
        Ok(Some(set)) => set,
        Ok(None) if xx => {
            ctx.reply.integer(0);
            return;
        }
        Ok(None) => created.insert(SortedSet::new()),
    };
    let (mut added, mut updated) = (0i64, 0i64);
    for (score, member) in points {
        match set.score(member) {
            Some(_) if nx => {}
            Some(current) => {
                if current != score {
                    set.insert(member, score);
                    updated += 1;
                }
            }
            None if xx => {}
            None => {
                set.insert(member, score);
                added += 1;
            }
        }
    }
    if let Some(set) = created {
        if !set.is_empty() {
            ctx.keys.set(db, key, Value::ZSet(set), None);
        }
    }
    if added + updated > 0 {
        ctx.keys.signal_modified(db, key);
        // GEOADD runs as the ZADD it amounts to, event included.
        ctx.notify(notify::ZSET, "zadd", key);
        // Logged as the ZADD it amounts to (options kept, each position as its score), as
        // Redis does.
        ctx.propagate_with(|| {
            let mut logged = Vec::with_capacity(first + triples.len() / 3 * 2);
            logged.push(Bytes::from_static(b"zadd"));
            logged.extend(args[1..first].iter().cloned());
            for (score, triple) in scores.iter().zip(triples.chunks_exact(3)) {
                logged.push(Bytes::from(score.to_string()));
                logged.push(triple[2].clone());
            }
            logged
        });
    }
    ctx.reply.integer(if ch { added + updated } else { added });
}

/// GEOPOS key [member ...]: each member's position, nil for missing ones.
pub(super) fn geopos(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let set = match zset_at(ctx.keys, db, &args[1]) {
        Err(WrongType) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
        Ok(set) => set,
    };
    let members = &args[2..];
    let positions: Vec<Option<[f64; 2]>> = members
        .iter()
        .map(|member| {
            set.as_ref()
                .and_then(|s| s.score(member))
                .and_then(hash::decode_score)
        })
        .collect();
    ctx.reply.array(positions.len());
    for position in positions {
        match position {
            Some(position) => reply_position(ctx.reply, position),
            None => ctx.reply.null_array(),
        }
    }
}

/// GEODIST key member1 member2 [unit]: the distance between two members.
pub(super) fn geodist(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let metres_per_unit = match args.len() {
        4 => 1.0,
        5 => match parse_unit(&args[4]) {
            Ok(metres) => metres,
            Err(message) => {
                ctx.reply.error(message);
                return;
            }
        },
        _ => {
            ctx.reply.error(err::SYNTAX);
            return;
        }
    };
    let db = ctx.db();
    let set = match zset_at(ctx.keys, db, &args[1]) {
        Err(WrongType) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
        Ok(None) => {
            ctx.reply.null();
            return;
        }
        Ok(Some(set)) => set,
    };
    let positions = (set.score(&args[2]), set.score(&args[3]));
    let (Some(a), Some(b)) = positions else {
        ctx.reply.null();
        return;
    };
    match (hash::decode_score(a), hash::decode_score(b)) {
        (Some([x1, y1]), Some([x2, y2])) => {
            let distance = hash::distance(x1, y1, x2, y2) / metres_per_unit;
            ctx.reply.bulk(format_distance(distance).as_bytes());
        }
        _ => ctx.reply.null(),
    }
}

/// GEOHASH key [member ...]: each member's standard 11-character geohash.
pub(super) fn geohash(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    let db = ctx.db();
    let set = match zset_at(ctx.keys, db, &args[1]) {
        Err(WrongType) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
        Ok(set) => set,
    };
    let members = &args[2..];
    let hashes: Vec<Option<[u8; 11]>> = members
        .iter()
        .map(|member| {
            set.as_ref()
                .and_then(|s| s.score(member))
                .and_then(hash::standard_geohash)
        })
        .collect();
    ctx.reply.array(hashes.len());
    for text in hashes {
        match text {
            Some(text) => ctx.reply.bulk(&text),
            None => ctx.reply.null(),
        }
    }
}
