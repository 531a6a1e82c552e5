//! SORT and SORT_RO: order a list, set or sorted set by the elements themselves or by
//! values found under keys named by a pattern (`BY weight_*`, `BY obj_*->field`), fetch
//! related values (`GET`), page (`LIMIT`) and optionally store the result as a list.
//!
//! The keys a BY or GET pattern names depend on the data being sorted, so no key spec can
//! name them before the command runs: both commands lock the whole keyspace
//! (`LockPlan::All`), and their "unknown" key specs make `COMMAND GETKEYS` ask [`keys_of`].

use std::cmp::Ordering;

use bytes::Bytes;
use latch_keyspace::{Elem, Locked, Value};

use super::{err, is, parse_f64, parse_i64, Ctx};
use crate::pubsub::notify;
use crate::spec::{
    acl, flag, keyflag, Arg, ArgType, BeginSearch, CommandSpec, FindKeys, Group, KeySpec, LockPlan,
};

pub static COMMANDS: &[CommandSpec] = &[SORT, SORT_RO];

const SORT_KEY: KeySpec = KeySpec::single(1, keyflag::RO | keyflag::ACCESS);

// The notes are part of what COMMAND INFO answers, so they are Redis' own words.
const PATTERN_KEYS: KeySpec = KeySpec {
    flags: keyflag::RO | keyflag::ACCESS,
    begin: BeginSearch::Unknown,
    find: FindKeys::Unknown,
    notes: Some("For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from the content of the key we sort"),
};

const STORE_KEY: KeySpec = KeySpec {
    flags: keyflag::OW | keyflag::UPDATE,
    begin: BeginSearch::Unknown,
    find: FindKeys::Unknown,
    notes: Some("For the optional STORE keyword. It is marked 'unknown' because the keyword can appear anywhere in the argument array"),
};

const BY_ARG: Arg = Arg {
    key_spec_index: Some(1),
    ..Arg::new("pattern", ArgType::Pattern)
        .with_token("BY")
        .optional()
};

const GET_ARG: Arg = Arg {
    key_spec_index: Some(1),
    ..Arg::new("pattern", ArgType::Pattern)
        .with_token("GET")
        .optional()
        .multiple()
        .multiple_token()
};

const LIMIT_ARG: Arg = Arg::block(
    "offset_count",
    &[Arg::integer("offset"), Arg::integer("count")],
)
.with_token("LIMIT")
.optional();

const ORDER_ARG: Arg = Arg::oneof(
    "order",
    &[Arg::token("asc", "ASC"), Arg::token("desc", "DESC")],
)
.optional();

const ALPHA_ARG: Arg = Arg::new("sorting", ArgType::PureToken)
    .with_token("ALPHA")
    .optional();

const COMPLEXITY: &str = "O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).";

pub const SORT: CommandSpec = CommandSpec {
    name: "sort",
    group: Group::Generic,
    summary: "Sorts the members of a list, set or sorted set, optionally by external weights, and returns or stores the result.",
    since: "1.0.0",
    complexity: COMPLEXITY,
    arity: -2,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::SET | acl::SORTEDSET | acl::LIST | acl::DANGEROUS,
    key_specs: &[SORT_KEY, PATTERN_KEYS, STORE_KEY],
    arguments: &[
        Arg::key("key", 0),
        BY_ARG,
        LIMIT_ARG,
        GET_ARG,
        ORDER_ARG,
        ALPHA_ARG,
        Arg {
            key_spec_index: Some(2),
            ..Arg::new("destination", ArgType::Key)
                .with_token("STORE")
                .optional()
        },
    ],
    handler: Some(sort),
    // BY and GET patterns read keys that are only known once the elements are: lock all.
    lock: LockPlan::All,
    ..CommandSpec::BASE
};

pub const SORT_RO: CommandSpec = CommandSpec {
    name: "sort_ro",
    group: Group::Generic,
    summary: "Sorts the members of a list, set or sorted set and returns them; SORT without STORE.",
    since: "7.0.0",
    complexity: COMPLEXITY,
    arity: -2,
    flags: flag::READONLY,
    acl: acl::SET | acl::SORTEDSET | acl::LIST | acl::DANGEROUS,
    key_specs: &[SORT_KEY, PATTERN_KEYS],
    arguments: &[
        Arg::key("key", 0),
        BY_ARG,
        LIMIT_ARG,
        GET_ARG,
        ORDER_ARG,
        ALPHA_ARG,
    ],
    handler: Some(sort_ro),
    // As SORT: pattern keys are unknown until the elements are read.
    lock: LockPlan::All,
    ..CommandSpec::BASE
};

/// The keys `COMMAND GETKEYS` reports for SORT / SORT_RO (positions in `args`, with access
/// flags), found the way Redis' own SORT key extraction does; `None` for other commands.
/// SORT: the sorted key, plus the destination of the last STORE whose option parser would
/// see it (LIMIT skips two arguments, BY and GET one).
pub fn keys_of(command: &str, args: &[Bytes]) -> Option<Vec<(usize, u16)>> {
    let readonly = match command {
        "sort" => false,
        "sort_ro" => true,
        _ => return None,
    };
    let mut keys = vec![(1, keyflag::RO | keyflag::ACCESS)];
    if readonly {
        return Some(keys);
    }
    let mut store = None;
    let mut index = 2;
    while index < args.len() {
        let arg = &args[index];
        if is(arg, "LIMIT") {
            index += 2;
        } else if is(arg, "GET") || is(arg, "BY") {
            index += 1;
        } else if is(arg, "STORE") && index + 1 < args.len() {
            store = Some(index + 1);
        }
        index += 1;
    }
    if let Some(position) = store {
        keys.push((position, keyflag::OW | keyflag::UPDATE));
    }
    Some(keys)
}

fn sort(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    sort_generic(ctx, args, false);
}

fn sort_ro(ctx: &mut Ctx<'_, '_>, args: &[Bytes]) {
    sort_generic(ctx, args, true);
}

/// What the options asked for.
struct Options<'a> {
    desc: bool,
    alpha: bool,
    limit_start: i64,
    limit_count: i64,
    by: Option<&'a [u8]>,
    /// BY with a pattern without `*`: keep the native order.
    dont_sort: bool,
    get: Vec<&'a [u8]>,
    store: Option<&'a [u8]>,
}

/// Parses SORT's options; writes the error and returns `None` on a bad one.
fn parse_options<'a>(
    ctx: &mut Ctx<'_, '_>,
    args: &'a [Bytes],
    readonly: bool,
) -> Option<Options<'a>> {
    let mut options = Options {
        desc: false,
        alpha: false,
        limit_start: 0,
        limit_count: -1,
        by: None,
        dont_sort: false,
        get: Vec::new(),
        store: None,
    };
    // BY and GET patterns may name any key: Redis allows them only to a user that may
    // read every key with this command (asked once, the first time one is seen).
    let mut reads_any_key: Option<bool> = None;
    let mut may_read_any_key = |ctx: &Ctx<'_, '_>| {
        *reads_any_key.get_or_insert_with(|| {
            crate::table::table()
                .lookup(&args[0])
                .is_some_and(|command| ctx.client.user.reads_any_key(command, args))
        })
    };
    let mut index = 2;
    while index < args.len() {
        let arg = &args[index];
        let left = args.len() - index - 1;
        if is(arg, "ASC") {
            options.desc = false;
        } else if is(arg, "DESC") {
            options.desc = true;
        } else if is(arg, "ALPHA") {
            options.alpha = true;
        } else if is(arg, "LIMIT") && left >= 2 {
            let (Some(start), Some(count)) =
                (parse_i64(&args[index + 1]), parse_i64(&args[index + 2]))
            else {
                ctx.reply.error(err::NOT_INTEGER);
                return None;
            };
            options.limit_start = start;
            options.limit_count = count;
            index += 2;
        } else if !readonly && is(arg, "STORE") && left >= 1 {
            options.store = Some(&args[index + 1]);
            index += 1;
        } else if is(arg, "BY") && left >= 1 {
            let pattern = &args[index + 1][..];
            options.by = Some(pattern);
            // A constant pattern weighs every element the same: nothing to sort.
            options.dont_sort = !c_string(pattern).contains(&b'*');
            if !options.dont_sort && !may_read_any_key(ctx) {
                ctx.reply
                    .error(b"ERR BY option of SORT denied due to insufficient ACL permissions.");
                return None;
            }
            index += 1;
        } else if is(arg, "GET") && left >= 1 {
            if !may_read_any_key(ctx) {
                ctx.reply
                    .error(b"ERR GET option of SORT denied due to insufficient ACL permissions.");
                return None;
            }
            options.get.push(&args[index + 1]);
            index += 1;
        } else {
            ctx.reply.error(err::SYNTAX);
            return None;
        }
        index += 1;
    }
    Some(options)
}

/// The part of `bytes` a C string function sees: up to the first NUL.
fn c_string(bytes: &[u8]) -> &[u8] {
    match bytes.iter().position(|&b| b == 0) {
        Some(nul) => &bytes[..nul],
        None => bytes,
    }
}

/// The collection types SORT accepts.
enum Kind {
    List,
    Set,
    ZSet,
}

/// One element being sorted, with what it is compared by.
struct Item {
    element: Vec<u8>,
    score: f64,
    /// The BY value for ALPHA sorting by pattern (`None`: no such key).
    by_value: Option<Vec<u8>>,
}

fn sort_generic(ctx: &mut Ctx<'_, '_>, args: &[Bytes], readonly: bool) {
    let Some(mut options) = parse_options(ctx, args, readonly) else {
        return;
    };
    let db = ctx.db();
    // The key and the BY/GET keys are read (a miss is reported), even when storing.
    ctx.lookups_read(true);
    let (kind, mut elements) = match ctx.keys.get(db, &args[1]).map(|v| &*v) {
        None => (Kind::List, Vec::new()),
        Some(Value::List(items)) => (Kind::List, items.to_vecs()),
        Some(Value::Set(members)) => (Kind::Set, members.iter().map(|m| m.to_vec()).collect()),
        Some(Value::ZSet(set)) => (Kind::ZSet, set.iter().map(|(m, _)| m.to_vec()).collect()),
        Some(Value::Str(_) | Value::Hash(_) | Value::Stream(_)) => {
            ctx.reply.error(err::WRONGTYPE);
            return;
        }
    };
    // A set has no order of its own: when the result is stored, or read by a script, sort it
    // anyway so that what is kept or acted on does not depend on table layout.
    if options.dont_sort
        && matches!(kind, Kind::Set)
        && (options.store.is_some() || ctx.client.in_script)
    {
        options.dont_sort = false;
        options.alpha = true;
        options.by = None;
    }
    let length = elements.len() as i64;
    let mut start = options.limit_start.max(0).min(length);
    let count = options.limit_count.max(-1).min(length);
    let mut end = if count < 0 {
        length - 1
    } else {
        start + count - 1
    };
    if start >= length {
        start = length - 1;
        end = length - 2;
    }
    if end >= length {
        end = length - 1;
    }

    let mut items: Vec<Item>;
    let mut conversion_error = false;
    if options.dont_sort {
        // Lists and sorted sets keep their native order, reversed by DESC.
        if options.desc && !matches!(kind, Kind::Set) {
            elements.reverse();
        }
        items = elements
            .into_iter()
            .map(|element| Item {
                element,
                score: 0.0,
                by_value: None,
            })
            .collect();
    } else {
        items = Vec::with_capacity(elements.len());
        for element in elements {
            let mut item = Item {
                element,
                score: 0.0,
                by_value: None,
            };
            let weight = match options.by {
                Some(pattern) => lookup_by_pattern(ctx.keys, db, pattern, &item.element),
                None => None,
            };
            if options.alpha {
                item.by_value = weight;
            } else {
                let weight = match (options.by, &weight) {
                    (Some(_), None) => None,
                    (Some(_), Some(value)) => Some(&value[..]),
                    (None, _) => Some(&item.element[..]),
                };
                if let Some(text) = weight {
                    match strtod_whole(text) {
                        Some(score) => item.score = score,
                        None => conversion_error = true,
                    }
                }
            }
            items.push(item);
        }
        let by_pattern = options.by.is_some();
        let storing = options.store.is_some();
        let alpha = options.alpha;
        let compare = |a: &Item, b: &Item| -> Ordering {
            if !alpha {
                a.score
                    .partial_cmp(&b.score)
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| a.element.cmp(&b.element))
            } else if by_pattern {
                match (&a.by_value, &b.by_value) {
                    (None, None) => Ordering::Equal,
                    (None, Some(_)) => Ordering::Less,
                    (Some(_), None) => Ordering::Greater,
                    (Some(x), Some(y)) => compare_strings(x, y, storing),
                }
            } else {
                compare_strings(&a.element, &b.element, storing)
            }
        };
        if options.desc {
            items.sort_by(|a, b| compare(a, b).reverse());
        } else {
            items.sort_by(compare);
        }
    }

    if conversion_error {
        ctx.reply
            .error(b"ERR One or more scores can't be converted into double");
        return;
    }
    let selected: &[Item] = if end >= start && start >= 0 {
        &items[start as usize..=(end as usize).min(items.len().saturating_sub(1))]
    } else {
        &[]
    };
    match options.store {
        None => {
            let per_item = options.get.len().max(1);
            ctx.reply.array(selected.len() * per_item);
            for item in selected {
                if options.get.is_empty() {
                    ctx.reply.bulk(&item.element);
                }
                for pattern in &options.get {
                    match lookup_by_pattern(ctx.keys, db, pattern, &item.element) {
                        Some(value) => ctx.reply.bulk(&value),
                        None => ctx.reply.null(),
                    }
                }
            }
        }
        Some(destination) => {
            let mut stored = latch_keyspace::List::new();
            for item in selected {
                if options.get.is_empty() {
                    stored.push_back(&item.element);
                }
                for pattern in &options.get {
                    let value = lookup_by_pattern(ctx.keys, db, pattern, &item.element);
                    stored.push_back(&value.unwrap_or_default());
                }
            }
            let stored_len = stored.len();
            ctx.lookups_read(false);
            if stored_len > 0 {
                ctx.keys.set(db, destination, Value::List(stored), None);
                ctx.keys.signal_modified(db, destination);
                ctx.notify(notify::LIST, "sortstore", destination);
            } else if ctx.keys.remove_stored(db, destination) {
                ctx.keys.signal_modified(db, destination);
                ctx.notify(notify::GENERIC, "del", destination);
            }
            ctx.reply.integer(stored_len as i64);
        }
    }
}

/// ALPHA comparison: byte order; without STORE Redis collates C strings (`strcoll`, which in
/// the C locale compares bytes up to the first NUL).
fn compare_strings(a: &[u8], b: &[u8], storing: bool) -> Ordering {
    if storing {
        a.cmp(b)
    } else {
        c_string(a).cmp(c_string(b))
    }
}

/// The value a BY or GET pattern names for `element`: `#` is the element itself; otherwise
/// the first `*` is replaced by the element and the resulting key read as a string, or with
/// `key->field` as a hash field. `None` when the pattern has no `*` or nothing is there.
fn lookup_by_pattern(
    keys: &mut Locked<'_>,
    db: usize,
    pattern: &[u8],
    element: &[u8],
) -> Option<Vec<u8>> {
    let visible = c_string(pattern);
    if visible == b"#" {
        return Some(element.to_vec());
    }
    let star = visible.iter().position(|&b| b == b'*')?;
    // `->` after the `*` with something after it splits off a hash field.
    let field = visible[star + 1..]
        .windows(2)
        .position(|w| w == b"->")
        .map(|at| star + 1 + at)
        .filter(|&arrow| arrow + 2 < visible.len())
        .map(|arrow| (arrow, &pattern[arrow + 2..]));
    let key_end = field.map_or(pattern.len(), |(arrow, _)| arrow);
    let mut key = Vec::with_capacity(key_end + element.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(element);
    key.extend_from_slice(&pattern[star + 1..key_end]);
    match (keys.get(db, &key).map(|v| &*v), field) {
        (Some(Value::Str(value)), None) => Some(value.clone()),
        (Some(Value::Hash(hash)), Some((_, name))) => hash.get(name).map(Elem::to_vec),
        _ => None,
    }
}

/// A number as SORT reads weights (C's `strtod` over the whole C string): leading white
/// space allowed, nothing after the number, an empty string is 0, NaN and out-of-range
/// values (overflow, or underflow to a subnormal or zero) are errors.
fn strtod_whole(bytes: &[u8]) -> Option<f64> {
    let text = c_string(bytes);
    if text.is_empty() {
        return Some(0.0);
    }
    let begin = text
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))?;
    let number = &text[begin..];
    let unsigned = number
        .strip_prefix(b"-")
        .or_else(|| number.strip_prefix(b"+"))
        .unwrap_or(number);
    if unsigned.len() > 2 && unsigned[0] == b'0' && unsigned[1] | 0x20 == b'x' {
        let magnitude = parse_hex_float(&unsigned[2..])?;
        return Some(if number[0] == b'-' {
            -magnitude
        } else {
            magnitude
        });
    }
    let value = parse_f64(number)?;
    let spelled_infinite = is(unsigned, "INF") || is(unsigned, "INFINITY");
    if value.is_infinite() && !spelled_infinite {
        return None;
    }
    let mantissa = unsigned
        .split(|&b| b == b'e' || b == b'E')
        .next()
        .unwrap_or_default();
    let nonzero_digits = mantissa.iter().any(|b| matches!(b, b'1'..=b'9'));
    if nonzero_digits && value.abs() < f64::MIN_POSITIVE {
        return None;
    }
    Some(value)
}

/// The digits of a C hexadecimal float after `0x` (`1A`, `1.8p3`): `None` unless all of
/// it is consumed, or when the value overflows or underflows (strtod's ERANGE).
fn parse_hex_float(text: &[u8]) -> Option<f64> {
    let (digits, exponent_text) = match text.iter().position(|&b| b == b'p' || b == b'P') {
        Some(p) => (&text[..p], Some(&text[p + 1..])),
        None => (text, None),
    };
    let mut mantissa: u128 = 0;
    let mut scale: i64 = 0;
    let mut seen_digit = false;
    let mut seen_point = false;
    let mut nonzero = false;
    for &b in digits {
        if b == b'.' && !seen_point {
            seen_point = true;
            continue;
        }
        let digit = char::from(b).to_digit(16)?;
        seen_digit = true;
        nonzero |= digit != 0;
        if mantissa >> 120 == 0 {
            mantissa = mantissa * 16 + u128::from(digit);
            if seen_point {
                scale -= 4;
            }
        } else if !seen_point {
            // Digits past what u128 holds only scale the value (and are far below its
            // precision).
            scale += 4;
        }
    }
    if !seen_digit {
        return None;
    }
    let exponent = match exponent_text {
        None => 0,
        Some(e) => {
            let (negative, digits) = match e.split_first()? {
                (b'-', rest) => (true, rest),
                (b'+', rest) => (false, rest),
                _ => (false, e),
            };
            if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            // Clamped: anything this large overflows or underflows anyway.
            let magnitude = digits
                .iter()
                .fold(0i64, |n, d| (n * 10 + i64::from(d - b'0')).min(100_000));
            if negative {
                -magnitude
            } else {
                magnitude
            }
        }
    };
    let power = (scale + exponent).clamp(-5000, 5000) as i32;
    // Split the scaling so no intermediate power of two overflows on its own.
    let value = mantissa as f64 * 2f64.powi(power / 2) * 2f64.powi(power - power / 2);
    if value.is_infinite() || (nonzero && value < f64::MIN_POSITIVE) {
        return None;
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::from(w.to_string())).collect()
    }

    #[test]
    fn store_key_extraction() {
        let keys = |words: &[&str]| -> Vec<usize> {
            keys_of("sort", &args(words))
                .unwrap()
                .into_iter()
                .map(|(p, _)| p)
                .collect()
        };
        assert_eq!(keys(&["sort", "abc", "store", "def"]), [1, 3]);
        assert_eq!(
            keys(&["sort", "abc", "store", "x", "store", "y", "store", "def"]),
            [1, 7]
        );
        assert_eq!(keys(&["sort", "abc", "get", "store", "x"]), [1]);
        assert_eq!(keys(&["sort", "abc", "limit", "store", "x", "y"]), [1]);
        assert_eq!(keys(&["sort", "abc", "store"]), [1]);
        assert!(keys_of("get", &args(&["get", "k"])).is_none());
    }

    #[test]
    fn weights() {
        assert_eq!(strtod_whole(b""), Some(0.0));
        assert_eq!(strtod_whole(b" 1.5"), Some(1.5));
        assert_eq!(strtod_whole(b"1.5 "), None);
        assert_eq!(strtod_whole(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(strtod_whole(b"nan"), None);
        assert_eq!(strtod_whole(b"1e400"), None);
        assert_eq!(strtod_whole(b"1e-400"), None);
        assert_eq!(strtod_whole(b"0e-400"), Some(0.0));
        assert_eq!(strtod_whole(b"2\0junk"), Some(2.0));
        assert_eq!(strtod_whole(b"abc"), None);
        assert_eq!(strtod_whole(b"0x10"), Some(16.0));
        assert_eq!(strtod_whole(b"-0x1.8p1"), Some(-3.0));
        assert_eq!(strtod_whole(b" 0X1p-2"), Some(0.25));
        assert_eq!(strtod_whole(b"0x"), None);
        assert_eq!(strtod_whole(b"0x1p"), None);
        assert_eq!(strtod_whole(b"0x1p99999"), None);
    }
}
