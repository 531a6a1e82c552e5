//! Area searches: GEORADIUS, GEORADIUSBYMEMBER, their _RO forms, GEOSEARCH and
//! GEOSEARCHSTORE, all one parser and one search as in Redis (so errors come in the same
//! order and results in the same order).

use bytes::Bytes;
use latch_keyspace::zset::ScoreBound;
use latch_keyspace::{SortedSet, Value};

use super::hash::{self, Extent, HashBits, Shape};
use super::{
    format_distance, parse_double, parse_lon_lat, parse_unit, reply_position, zset_at, WrongType,
};
use crate::commands::{err, is, parse_i64, Ctx};
use crate::pubsub::notify;

/// Which command is running.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// GEORADIUS / GEORADIUS_RO: centre from arguments 2 and 3.
    Radius { store_allowed: bool },
    /// GEORADIUSBYMEMBER / GEORADIUSBYMEMBER_RO: centre at the member in argument 2.
    ByMember { store_allowed: bool },
    /// GEOSEARCH: FROMMEMBER/FROMLONLAT and BYRADIUS/BYBOX options.
    Search,
    /// GEOSEARCHSTORE: as GEOSEARCH, destination in argument 1, STOREDIST flag.
    SearchStore,
}

pub(super) fn georadius(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    search(
        ctx,
        args,
        Variant::Radius {
            store_allowed: true,
        },
    );
}

pub(super) fn georadius_ro(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    search(
        ctx,
        args,
        Variant::Radius {
            store_allowed: false,
        },
    );
}

pub(super) fn georadiusbymember(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    search(
        ctx,
        args,
        Variant::ByMember {
            store_allowed: true,
        },
    );
}

pub(super) fn georadiusbymember_ro(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    search(
        ctx,
        args,
        Variant::ByMember {
            store_allowed: false,
        },
    );
}

pub(super) fn geosearch(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    search(ctx, args, Variant::Search);
}

pub(super) fn geosearchstore(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    search(ctx, args, Variant::SearchStore);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    Unsorted,
    Ascending,
    Descending,
}

/// One match.
struct Point {
    member: Vec<u8>,
    position: [f64; 2],
    /// Metres until the reply converts it to the unit.
    distance: f64,
    score: f64,
}

const NO_MEMBER: &[u8] = b"ERR could not decode requested zset member";

/// The position of a member of `set`.
fn member_position(set: &SortedSet, member: &[u8]) -> Option<[f64; 2]> {
    set.score(member).and_then(hash::decode_score)
}

/// A radius and its unit: (radius, metres per unit), or Redis' error text.
fn parse_radius(radius: &[u8], unit: &[u8]) -> Result<(f64, f64), Vec<u8>> {
    let radius = parse_double(radius).ok_or(&b"ERR need numeric radius"[..])?;
    if radius < 0.0 {
        return Err(b"ERR radius cannot be negative".to_vec());
    }
    let conversion = parse_unit(unit)?;
    Ok((radius, conversion))
}

/// A box's width, height and unit: (width, height, metres per unit), or the error text.
fn parse_box(width: &[u8], height: &[u8], unit: &[u8]) -> Result<(f64, f64, f64), Vec<u8>> {
    let width = parse_double(width).ok_or(&b"ERR need numeric width"[..])?;
    let height = parse_double(height).ok_or(&b"ERR need numeric height"[..])?;
    if height < 0.0 || width < 0.0 {
        return Err(b"ERR height or width cannot be negative".to_vec());
    }
    let conversion = parse_unit(unit)?;
    Ok((width, height, conversion))
}

fn search(ctx: &mut Ctx<'_, '_>, args: &[Bytes], variant: Variant) {
    match run_search(ctx, args, variant) {
        Ok(()) => {}
        Err(message) => ctx.reply.error(&message),
    }
}

/// Parses, searches and answers; `Err` carries the error reply (nothing written yet).
fn run_search(ctx: &mut Ctx<'_, '_>, args: &[Bytes], variant: Variant) -> Result<(), Vec<u8>> {
    let db = ctx.db();
    let source_index = if variant == Variant::SearchStore {
        2
    } else {
        1
    };
    // The source is read (and its type checked) before any argument is looked at; a miss
    // is reported, even by the forms that store.
    ctx.lookups_read(true);
    let source: Option<&SortedSet> = match zset_at(ctx.keys, db, &args[source_index]) {
        Err(WrongType) => return Err(err::WRONGTYPE.to_vec()),
        Ok(set) => set.map(|s| &*s),
    };

    let mut centre: Option<[f64; 2]> = None;
    let mut extent: Option<Extent> = None;
    let mut conversion = 1.0;
    let mut store: Option<&[u8]> = None;
    let mut store_distance = false;
    let base = match variant {
        Variant::Radius { .. } => {
            centre = Some(parse_lon_lat(&args[2], &args[3])?);
            let (radius, metres) = parse_radius(&args[4], &args[5])?;
            extent = Some(Extent::Radius(radius));
            conversion = metres;
            6
        }
        Variant::ByMember { .. } => {
            // Without a source the arguments are still parsed, to pick the reply's shape.
            if let Some(set) = source {
                centre = Some(member_position(set, &args[2]).ok_or(NO_MEMBER)?);
                let (radius, metres) = parse_radius(&args[3], &args[4])?;
                extent = Some(Extent::Radius(radius));
                conversion = metres;
            }
            5
        }
        Variant::Search => 2,
        Variant::SearchStore => {
            store = Some(&args[1]);
            3
        }
    };
    let store_allowed = matches!(
        variant,
        Variant::Radius {
            store_allowed: true
        } | Variant::ByMember {
            store_allowed: true
        }
    );
    let searching = matches!(variant, Variant::Search | Variant::SearchStore);

    let (mut with_dist, mut with_hash, mut with_coord) = (false, false, false);
    let (mut from_member, mut from_lon_lat, mut by_radius, mut by_box) =
        (false, false, false, false);
    let mut order = Order::Unsorted;
    let mut any = false;
    let mut count: i64 = 0;
    let options = &args[base..];
    let mut i = 0;
    while i < options.len() {
        let arg = &options[i];
        let remaining = options.len() - i - 1;
        if is(arg, "WITHDIST") {
            with_dist = true;
        } else if is(arg, "WITHHASH") {
            with_hash = true;
        } else if is(arg, "WITHCOORD") {
            with_coord = true;
        } else if is(arg, "ANY") {
            any = true;
        } else if is(arg, "ASC") {
            order = Order::Ascending;
        } else if is(arg, "DESC") {
            order = Order::Descending;
        } else if is(arg, "COUNT") && remaining >= 1 {
            count = parse_i64(&options[i + 1]).ok_or(err::NOT_INTEGER)?;
            if count <= 0 {
                return Err(b"ERR COUNT must be > 0".to_vec());
            }
            i += 1;
        } else if (is(arg, "STORE") || is(arg, "STOREDIST")) && remaining >= 1 && store_allowed {
            store = Some(&options[i + 1]);
            store_distance = is(arg, "STOREDIST");
            i += 1;
        } else if is(arg, "STOREDIST") && variant == Variant::SearchStore {
            store_distance = true;
        } else if is(arg, "FROMMEMBER") && remaining >= 1 && searching && !from_lon_lat {
            if let Some(set) = source {
                centre = Some(member_position(set, &options[i + 1]).ok_or(NO_MEMBER)?);
            }
            from_member = true;
            i += 1;
        } else if is(arg, "FROMLONLAT") && remaining >= 2 && searching && !from_member {
            centre = Some(parse_lon_lat(&options[i + 1], &options[i + 2])?);
            from_lon_lat = true;
            i += 2;
        } else if is(arg, "BYRADIUS") && remaining >= 2 && searching && !by_box {
            let (radius, metres) = parse_radius(&options[i + 1], &options[i + 2])?;
            extent = Some(Extent::Radius(radius));
            conversion = metres;
            by_radius = true;
            i += 2;
        } else if is(arg, "BYBOX") && remaining >= 3 && searching && !by_radius {
            let (width, height, metres) =
                parse_box(&options[i + 1], &options[i + 2], &options[i + 3])?;
            extent = Some(Extent::Box { width, height });
            conversion = metres;
            by_box = true;
            i += 3;
        } else {
            return Err(err::SYNTAX.to_vec());
        }
        i += 1;
    }

    if store.is_some() && (with_dist || with_hash || with_coord) {
        let what = if variant == Variant::SearchStore {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return Err(format!(
            "ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )
        .into_bytes());
    }
    let name = String::from_utf8_lossy(&args[0]);
    if searching && !(from_member || from_lon_lat) {
        return Err(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )
        .into_bytes());
    }
    if searching && !(by_radius || by_box) {
        return Err(
            format!("ERR exactly one of BYRADIUS and BYBOX can be specified for {name}")
                .into_bytes(),
        );
    }
    if any && count == 0 {
        return Err(b"ERR the ANY argument requires COUNT argument".to_vec());
    }

    let (Some(set), Some(centre), Some(extent)) = (source, centre, extent) else {
        // No source: an empty answer, and STORE clears its destination.
        match store {
            Some(destination) => {
                ctx.lookups_read(false);
                if ctx.keys.remove_stored(db, destination) {
                    ctx.keys.signal_modified(db, destination);
                    ctx.notify(notify::GENERIC, "del", destination);
                }
                ctx.reply.integer(0);
            }
            None => ctx.reply.array(0),
        }
        return Ok(());
    };
    // COUNT asks for the nearest ones, so it implies ascending order (unless ANY).
    if count != 0 && order == Order::Unsorted && !any {
        order = Order::Ascending;
    }
    let shape = Shape {
        centre,
        conversion,
        extent,
    };
    let limit = if any { count as usize } else { 0 };
    let mut points = points_in_cells(set, &hash::search_cells(&shape), &shape, limit);
    match order {
        Order::Unsorted => {}
        Order::Ascending => points.sort_by(|a, b| a.distance.total_cmp(&b.distance)),
        Order::Descending => points.sort_by(|a, b| b.distance.total_cmp(&a.distance)),
    }
    let returned = if count == 0 {
        points.len()
    } else {
        points
            .len()
            .min(usize::try_from(count).unwrap_or(usize::MAX))
    };
    points.truncate(returned);
    for point in &mut points {
        point.distance /= conversion;
    }

    match store {
        None => {
            let extras = usize::from(with_dist) + usize::from(with_hash) + usize::from(with_coord);
            ctx.reply.array(points.len());
            for point in &points {
                if extras > 0 {
                    ctx.reply.array(extras + 1);
                }
                ctx.reply.bulk(&point.member);
                if with_dist {
                    ctx.reply.bulk(format_distance(point.distance).as_bytes());
                }
                if with_hash {
                    ctx.reply.integer(hash::c_double_to_i64(point.score));
                }
                if with_coord {
                    reply_position(ctx.reply, point.position);
                }
            }
        }
        Some(destination) => {
            ctx.lookups_read(false);
            if points.is_empty() {
                if ctx.keys.remove_stored(db, destination) {
                    ctx.keys.signal_modified(db, destination);
                    ctx.notify(notify::GENERIC, "del", destination);
                }
            } else {
                let mut result = SortedSet::new();
                for point in &points {
                    let score = if store_distance {
                        point.distance
                    } else {
                        point.score
                    };
                    result.insert(&point.member, score);
                }
                ctx.keys.set(db, destination, Value::ZSet(result), None);
                ctx.keys.signal_modified(db, destination);
                let event = if variant == Variant::SearchStore {
                    "geosearchstore"
                } else {
                    "georadiusstore"
                };
                ctx.notify(notify::ZSET, event, destination);
            }
            ctx.reply.integer(points.len() as i64);
        }
    }
    Ok(())
}

/// Members inside the shape, scanning the cells in order (skipping empty cells and a cell
/// equal to the one scanned just before, as Redis does). With `limit` > 0 (ANY) the scan
/// stops once that many matched.
fn points_in_cells(
    set: &SortedSet,
    cells: &[HashBits; 9],
    shape: &Shape,
    limit: usize,
) -> Vec<Point> {
    let mut points = Vec::new();
    let reached = |points: &Vec<Point>| limit > 0 && points.len() >= limit;
    // Index of the cell scanned last; 0 doubles as "none yet", a quirk kept from Redis.
    let mut last_scanned = 0usize;
    for (index, cell) in cells.iter().enumerate() {
        if cell.is_zero() {
            continue;
        }
        if last_scanned != 0 && *cell == cells[last_scanned] {
            continue;
        }
        if reached(&points) {
            break;
        }
        let min = cell.align52() as f64;
        let max = HashBits {
            bits: cell.bits + 1,
            step: cell.step,
        }
        .align52() as f64;
        let range = set.range_by_score(
            ScoreBound {
                score: min,
                exclusive: false,
            },
            ScoreBound {
                score: max,
                exclusive: true,
            },
        );
        for (member, score) in range {
            if let Some(position) = hash::decode_score(score) {
                if let Some(distance) = hash::distance_if_within(shape, position) {
                    points.push(Point {
                        member: member.to_vec(),
                        position,
                        distance,
                        score,
                    });
                }
            }
            if reached(&points) {
                break;
            }
        }
        last_scanned = index;
    }
    points
}
