//! Geohash arithmetic, bit-compatible with Redis: a position is a 52-bit interleaving of
//! 26 bits of longitude (over -180..180) and 26 bits of latitude (over the Web-Mercator
//! limits -85.05112878..85.05112878), stored as the member's sorted-set score. Searches
//! cover the area with the cell holding the centre and its eight neighbours at a precision
//! ("step") chosen from the radius, then filter by exact distance.
//!
//! Every formula here follows Redis' choices (the same constants, the same order of
//! floating-point operations) so that scores, coordinates and distances come out identical.

/// Bits per coordinate at full precision (2 × 26 = 52 bits, exact in an f64 score).
pub const STEP_MAX: u8 = 26;
pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;
pub const LONG_MIN: f64 = -180.0;
pub const LONG_MAX: f64 = 180.0;

/// Earth's quadratic mean radius for WGS-84, in metres (Redis' constant).
const EARTH_RADIUS_M: f64 = 6372797.560856;
/// Half the Mercator projection's width, in metres.
const MERCATOR_MAX: f64 = 20037726.37;
const DEG_TO_RAD: f64 = std::f64::consts::PI / 180.0;

/// An interval of one coordinate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    pub min: f64,
    pub max: f64,
}

/// Redis' coordinate ranges.
pub const LONG_RANGE: Range = Range {
    min: LONG_MIN,
    max: LONG_MAX,
};
pub const LAT_RANGE: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

/// A geohash of `step` bits per coordinate. All-zero means "no cell" (a pruned neighbour).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HashBits {
    pub bits: u64,
    pub step: u8,
}

impl HashBits {
    pub fn is_zero(&self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The hash shifted to 52 bits: the lowest score inside its cell.
    pub fn align52(&self) -> u64 {
        self.bits << (52 - u32::from(self.step) * 2)
    }
}

/// The rectangle a geohash cell covers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Area {
    pub longitude: Range,
    pub latitude: Range,
}

/// Spreads the bits of `x` over the even positions and those of `y` over the odd ones.
fn interleave(x: u32, y: u32) -> u64 {
    fn spread(value: u32) -> u64 {
        let mut v = u64::from(value);
        v = (v | (v << 16)) & 0x0000_FFFF_0000_FFFF;
        v = (v | (v << 8)) & 0x00FF_00FF_00FF_00FF;
        v = (v | (v << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
        v = (v | (v << 2)) & 0x3333_3333_3333_3333;
        v = (v | (v << 1)) & 0x5555_5555_5555_5555;
        v
    }
    spread(x) | (spread(y) << 1)
}

/// The inverse of [`interleave`]: even bits in the low half, odd bits in the high half.
fn deinterleave(interleaved: u64) -> u64 {
    fn gather(value: u64) -> u64 {
        let mut v = value & 0x5555_5555_5555_5555;
        v = (v | (v >> 1)) & 0x3333_3333_3333_3333;
        v = (v | (v >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
        v = (v | (v >> 4)) & 0x00FF_00FF_00FF_00FF;
        v = (v | (v >> 8)) & 0x0000_FFFF_0000_FFFF;
        v = (v | (v >> 16)) & 0x0000_0000_FFFF_FFFF;
        v
    }
    gather(interleaved) | (gather(interleaved >> 1) << 32)
}

/// Encodes a position at `step` bits per coordinate over the given ranges (latitude in
/// the even bits). `None` outside Redis' limits or the ranges.
pub fn encode(
    long_range: Range,
    lat_range: Range,
    longitude: f64,
    latitude: f64,
    step: u8,
) -> Option<HashBits> {
    if step == 0 || step > 32 {
        return None;
    }
    if !(LONG_MIN..=LONG_MAX).contains(&longitude) || !(LAT_MIN..=LAT_MAX).contains(&latitude) {
        return None;
    }
    if latitude < lat_range.min
        || latitude > lat_range.max
        || longitude < long_range.min
        || longitude > long_range.max
    {
        return None;
    }
    let cells = (1u64 << step) as f64;
    let lat_offset = (latitude - lat_range.min) / (lat_range.max - lat_range.min) * cells;
    let long_offset = (longitude - long_range.min) / (long_range.max - long_range.min) * cells;
    // Truncation toward zero, as C's double-to-unsigned conversion.
    Some(HashBits {
        bits: interleave(lat_offset as u32, long_offset as u32),
        step,
    })
}

/// [`encode`] over Redis' ranges.
pub fn encode_wgs84(longitude: f64, latitude: f64, step: u8) -> Option<HashBits> {
    encode(LONG_RANGE, LAT_RANGE, longitude, latitude, step)
}

/// The cell a hash names. `None` for the all-zero hash.
pub fn decode(long_range: Range, lat_range: Range, hash: HashBits) -> Option<Area> {
    if hash.is_zero() {
        return None;
    }
    let separated = deinterleave(hash.bits);
    let lat_scale = lat_range.max - lat_range.min;
    let long_scale = long_range.max - long_range.min;
    let lat_index = separated as u32;
    let long_index = (separated >> 32) as u32;
    let cells = (1u64 << hash.step) as f64;
    Some(Area {
        latitude: Range {
            min: lat_range.min + (f64::from(lat_index) / cells) * lat_scale,
            max: lat_range.min + ((f64::from(lat_index) + 1.0) / cells) * lat_scale,
        },
        longitude: Range {
            min: long_range.min + (f64::from(long_index) / cells) * long_scale,
            max: long_range.min + ((f64::from(long_index) + 1.0) / cells) * long_scale,
        },
    })
}

/// The position a 52-bit score stands for: the centre of its cell, clamped to the limits.
/// Scores that are not geohashes still decode (to something), as in Redis.
pub fn decode_score(score: f64) -> Option<[f64; 2]> {
    let hash = HashBits {
        bits: c_double_to_u64(score),
        step: STEP_MAX,
    };
    let area = decode(LONG_RANGE, LAT_RANGE, hash)?;
    let longitude = ((area.longitude.min + area.longitude.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let latitude = ((area.latitude.min + area.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    Some([longitude, latitude])
}

/// C's `(uint64_t)` conversion of a double as x86-64 performs it, out-of-range values
/// included (a sorted set's scores need not be geohashes): below 2^63 through a signed
/// conversion (negative numbers wrap, -inf gives 2^63), from 2^63 up by offsetting (inf
/// and huge values give 0).
fn c_double_to_u64(value: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    const INDEFINITE: u64 = 1 << 63;
    let signed = |v: f64| {
        if (-TWO_63..TWO_63).contains(&v) {
            v as i64 as u64
        } else {
            INDEFINITE
        }
    };
    if value >= TWO_63 {
        signed(value - TWO_63) ^ INDEFINITE
    } else {
        signed(value)
    }
}

/// C's `(long long)` conversion of a double as x86-64 performs it: out of range gives
/// i64::MIN (what WITHHASH shows for a score that is not a geohash).
pub fn c_double_to_i64(value: f64) -> i64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if (-TWO_63..TWO_63).contains(&value) {
        value as i64
    } else {
        i64::MIN
    }
}

/// The score GEOADD stores for a (validated) position.
pub fn score_of(longitude: f64, latitude: f64) -> Option<u64> {
    encode_wgs84(longitude, latitude, STEP_MAX).map(|hash| hash.align52())
}

/// The standard 11-character base-32 geohash of a stored score (GEOHASH): the position is
/// re-encoded over the standard latitude range -90..90.
pub fn standard_geohash(score: f64) -> Option<[u8; 11]> {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let [longitude, latitude] = decode_score(score)?;
    let hash = encode(
        LONG_RANGE,
        Range {
            min: -90.0,
            max: 90.0,
        },
        longitude,
        latitude,
        STEP_MAX,
    )
    .unwrap_or_default();
    let mut text = [b'0'; 11];
    // 52 bits give ten characters; the eleventh is always '0', as Redis pads it.
    for (i, slot) in text.iter_mut().take(10).enumerate() {
        let index = (hash.bits >> (52 - (i + 1) * 5)) & 0x1f;
        *slot = ALPHABET[index as usize];
    }
    Some(text)
}

/// Moves a hash one cell east (`+1`) or west (`-1`) (longitude bits are the odd ones).
fn move_x(hash: &mut HashBits, direction: i8) {
    if direction == 0 {
        return;
    }
    let shift = 64 - u32::from(hash.step) * 2;
    let mut x = hash.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = hash.bits & 0x5555_5555_5555_5555;
    let zz = 0x5555_5555_5555_5555u64 >> shift;
    if direction > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaa_aaaa_aaaa_aaaau64 >> shift;
    hash.bits = x | y;
}

/// Moves a hash one cell north (`+1`) or south (`-1`) (latitude bits are the even ones).
fn move_y(hash: &mut HashBits, direction: i8) {
    if direction == 0 {
        return;
    }
    let shift = 64 - u32::from(hash.step) * 2;
    let x = hash.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let mut y = hash.bits & 0x5555_5555_5555_5555;
    let zz = 0xaaaa_aaaa_aaaa_aaaau64 >> shift;
    if direction > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555_5555_5555_5555u64 >> shift;
    hash.bits = x | y;
}

fn moved(hash: HashBits, dx: i8, dy: i8) -> HashBits {
    let mut neighbour = hash;
    move_x(&mut neighbour, dx);
    move_y(&mut neighbour, dy);
    neighbour
}

/// The precision (bits per coordinate) at which a cell and its neighbours cover a radius.
pub fn estimate_steps_by_radius(range_m: f64, latitude: f64) -> u8 {
    if range_m == 0.0 {
        return STEP_MAX;
    }
    let mut range_m = range_m;
    let mut step: i32 = 1;
    // Bounded: each pass doubles the range (an infinite range never enters the loop).
    while range_m < MERCATOR_MAX {
        range_m *= 2.0;
        step += 1;
    }
    step -= 2;
    // Cells are narrower towards the poles.
    if !(-66.0..=66.0).contains(&latitude) {
        step -= 1;
        if !(-80.0..=80.0).contains(&latitude) {
            step -= 1;
        }
    }
    step.clamp(1, i32::from(STEP_MAX)) as u8
}

/// The shape searched: a circle or an axis-aligned box around a centre.
#[derive(Clone, Copy, Debug)]
pub enum Extent {
    Radius(f64),
    Box { width: f64, height: f64 },
}

#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Longitude, latitude of the centre.
    pub centre: [f64; 2],
    /// Metres per unit of the sizes below.
    pub conversion: f64,
    pub extent: Extent,
}

/// Degrees of longitude/latitude the shape spans: `[min_lon, min_lat, max_lon, max_lat]`.
fn bounding_box(shape: &Shape) -> [f64; 4] {
    let [longitude, latitude] = shape.centre;
    let (half_height, half_width) = match shape.extent {
        Extent::Radius(radius) => (radius, radius),
        Extent::Box { width, height } => (height / 2.0, width / 2.0),
    };
    let height = shape.conversion * half_height;
    let width = shape.conversion * half_width;
    let lat_delta = (height / EARTH_RADIUS_M) / DEG_TO_RAD;
    let long_delta_top =
        (width / EARTH_RADIUS_M / ((latitude + lat_delta) * DEG_TO_RAD).cos()) / DEG_TO_RAD;
    let long_delta_bottom =
        (width / EARTH_RADIUS_M / ((latitude - lat_delta) * DEG_TO_RAD).cos()) / DEG_TO_RAD;
    // The wider edge is the one nearer the equator.
    let long_delta = if latitude < 0.0 {
        long_delta_bottom
    } else {
        long_delta_top
    };
    [
        longitude - long_delta,
        latitude - lat_delta,
        longitude + long_delta,
        latitude + lat_delta,
    ]
}

/// The cells to scan for a search, in Redis' order: the centre's cell, then north, south,
/// east, west, north-east, north-west, south-east, south-west. Cells that cannot hold a
/// match are all-zero.
pub fn search_cells(shape: &Shape) -> [HashBits; 9] {
    let [min_lon, min_lat, max_lon, max_lat] = bounding_box(shape);
    let [longitude, latitude] = shape.centre;
    let radius_m = match shape.extent {
        Extent::Radius(radius) => radius,
        Extent::Box { width, height } => {
            ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
        }
    } * shape.conversion;
    let mut step = estimate_steps_by_radius(radius_m, latitude);
    let cells_at = |step: u8| {
        let hash = encode(LONG_RANGE, LAT_RANGE, longitude, latitude, step).unwrap_or_default();
        let area = decode(LONG_RANGE, LAT_RANGE, hash);
        (hash, area)
    };
    let (mut hash, mut area) = cells_at(step);
    // Near a cell edge the estimate can be one step too fine for the neighbours to reach
    // the whole shape: check the four side neighbours and widen once if needed.
    let side = |hash: HashBits, dx: i8, dy: i8| decode(LONG_RANGE, LAT_RANGE, moved(hash, dx, dy));
    let too_small = side(hash, 0, 1).is_some_and(|north| north.latitude.max < max_lat)
        || side(hash, 0, -1).is_some_and(|south| south.latitude.min > min_lat)
        || side(hash, 1, 0).is_some_and(|east| east.longitude.max < max_lon)
        || side(hash, -1, 0).is_some_and(|west| west.longitude.min > min_lon);
    if step > 1 && too_small {
        step -= 1;
        (hash, area) = cells_at(step);
    }
    let mut cells = [
        hash,
        moved(hash, 0, 1),
        moved(hash, 0, -1),
        moved(hash, 1, 0),
        moved(hash, -1, 0),
        moved(hash, 1, 1),
        moved(hash, -1, 1),
        moved(hash, 1, -1),
        moved(hash, -1, -1),
    ];
    const NORTH: [usize; 3] = [1, 5, 6];
    const SOUTH: [usize; 3] = [2, 7, 8];
    const EAST: [usize; 3] = [3, 5, 7];
    const WEST: [usize; 3] = [4, 6, 8];
    if let (true, Some(area)) = (step >= 2, area) {
        let mut prune = |sides: [usize; 3]| {
            for i in sides {
                cells[i] = HashBits::default();
            }
        };
        if area.latitude.min < min_lat {
            prune(SOUTH);
        }
        if area.latitude.max > max_lat {
            prune(NORTH);
        }
        if area.longitude.min < min_lon {
            prune(WEST);
        }
        if area.longitude.max > max_lon {
            prune(EAST);
        }
    }
    cells
}

/// Distance along a meridian between two latitudes, in metres.
fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (lat2 * DEG_TO_RAD - lat1 * DEG_TO_RAD).abs()
}

/// Great-circle (haversine) distance in metres, as Redis computes it.
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let lon1r = lon1 * DEG_TO_RAD;
    let lon2r = lon2 * DEG_TO_RAD;
    let v = ((lon2r - lon1r) / 2.0).sin();
    // Same meridian: the formula reduces to the latitude difference.
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let lat1r = lat1 * DEG_TO_RAD;
    let lat2r = lat2 * DEG_TO_RAD;
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

/// Whether a point lies in the shape; its distance from the centre (metres) when it does.
pub fn distance_if_within(shape: &Shape, point: [f64; 2]) -> Option<f64> {
    let [x1, y1] = shape.centre;
    let [x2, y2] = point;
    match shape.extent {
        Extent::Radius(radius) => {
            let d = distance(x1, y1, x2, y2);
            (d <= radius * shape.conversion).then_some(d)
        }
        Extent::Box { width, height } => {
            let width_m = width * shape.conversion;
            let height_m = height * shape.conversion;
            if lat_distance(y2, y1) > height_m / 2.0 {
                return None;
            }
            if distance(x2, y2, x1, y2) > width_m / 2.0 {
                return None;
            }
            Some(distance(x1, y1, x2, y2))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleave_round_trips() {
        for (x, y) in [
            (0u32, 0u32),
            (1, 0),
            (0, 1),
            (0xdead_beef, 0x1234_5678),
            (u32::MAX, 7),
        ] {
            let mixed = interleave(x, y);
            let separated = deinterleave(mixed);
            assert_eq!((separated as u32, (separated >> 32) as u32), (x, y));
        }
    }

    #[test]
    fn scores_match_redis() {
        // Scores Redis stores for these positions (from its geo tests).
        assert_eq!(score_of(-73.9454966, 40.747533), Some(1791875804419201));
        assert_eq!(score_of(-74.0131604, 40.7126674), Some(1791873972053020));
        assert_eq!(score_of(13.361389, 38.115556), Some(3479099956230698));
    }

    #[test]
    fn geohash_strings() {
        let score = score_of(-5.6, 42.6).unwrap() as f64;
        assert_eq!(&standard_geohash(score).unwrap(), b"ezs42e44yx0");
    }

    #[test]
    fn decode_is_cell_centre() {
        let score = score_of(13.361389, 38.115556).unwrap() as f64;
        let [lon, lat] = decode_score(score).unwrap();
        assert!((lon - 13.361389).abs() < 1e-5 && (lat - 38.115556).abs() < 1e-5);
    }

    #[test]
    fn out_of_range_conversions() {
        assert_eq!(c_double_to_u64(-5.0), (-5i64) as u64);
        assert_eq!(c_double_to_u64(f64::NEG_INFINITY), 1 << 63);
        assert_eq!(c_double_to_u64(f64::INFINITY), 0);
        assert_eq!(c_double_to_u64(1e300), 0);
        assert_eq!(c_double_to_u64(1e19), 10_000_000_000_000_000_000);
        assert_eq!(c_double_to_i64(f64::INFINITY), i64::MIN);
        assert_eq!(c_double_to_i64(-3.5), -3);
    }

    #[test]
    fn step_estimates() {
        assert_eq!(estimate_steps_by_radius(0.0, 0.0), 26);
        assert_eq!(estimate_steps_by_radius(f64::INFINITY, 0.0), 1);
        assert_eq!(estimate_steps_by_radius(1000.0, 0.0), 14);
        assert_eq!(estimate_steps_by_radius(1000.0, 70.0), 13);
        assert_eq!(estimate_steps_by_radius(1000.0, -85.0), 12);
    }
}
