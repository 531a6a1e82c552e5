//! The sorted set against a simple model, in both forms and across the conversion.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn bound(score: f64, exclusive: bool) -> ScoreBound {
    ScoreBound { score, exclusive }
}

fn members(set: &SortedSet, min: ScoreBound, max: ScoreBound) -> Vec<String> {
    set.range_by_score(min, max)
        .map(|(m, _)| String::from_utf8_lossy(&m).into_owned())
        .collect()
}

/// Tests here change the process-wide thresholds; they take turns.
static THRESHOLDS: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

fn with_thresholds<T>(entries: usize, value: usize, f: impl FnOnce() -> T) -> T {
    let _turn = THRESHOLDS.lock();
    let old = compact::get();
    compact::set(compact::Thresholds {
        zset_max_entries: entries,
        zset_max_value: value,
        ..old
    });
    let out = f();
    compact::set(old);
    out
}

#[test]
fn score_ranges() {
    for large in [false, true] {
        let _turn = THRESHOLDS.lock();
        let mut set = SortedSet::new();
        if large {
            set.convert_to_large();
        }
        for (m, s) in [
            ("a", 1.0),
            ("b", 2.0),
            ("c", 2.0),
            ("d", 3.0),
            ("e", f64::INFINITY),
        ] {
            set.insert(m.as_bytes(), s);
        }
        assert_eq!(set.encoding(), if large { "skiplist" } else { "listpack" });
        assert_eq!(
            members(&set, bound(2.0, false), bound(2.0, false)),
            ["b", "c"]
        );
        assert_eq!(members(&set, bound(2.0, true), bound(3.0, false)), ["d"]);
        assert_eq!(
            members(&set, bound(1.0, false), bound(3.0, true)),
            ["a", "b", "c"]
        );
        assert!(members(&set, bound(2.0, true), bound(2.0, true)).is_empty());
        assert!(members(&set, bound(3.0, false), bound(1.0, false)).is_empty());
        let all = bound(f64::INFINITY, false);
        assert_eq!(members(&set, bound(f64::NEG_INFINITY, false), all).len(), 5);
        assert!(members(&set, bound(f64::INFINITY, true), all).is_empty());
        assert_eq!(members(&set, bound(3.0, true), all), ["e"]);
        let rev: Vec<Vec<u8>> = set
            .range_by_score(bound(1.0, true), bound(3.0, false))
            .rev()
            .map(|(m, _)| m.to_vec())
            .collect();
        assert_eq!(rev, [b"d".to_vec(), b"c".to_vec(), b"b".to_vec()]);
    }
}

#[test]
fn negative_zero_survives_the_insert_that_converts() {
    // The member whose insert turns the listpack into the large form keeps its sign,
    // whether it converts by count or by length.
    with_thresholds(0, 64, || {
        let mut set = SortedSet::new();
        set.insert(b"first", -0.0);
        assert_eq!(set.encoding(), "skiplist");
        assert!(set.score(b"first").is_some_and(|s| s.is_sign_negative()));
    });
    with_thresholds(128, 4, || {
        let mut set = SortedSet::new();
        set.insert(b"short", 1.0);
        set.insert(b"longer", -0.0);
        assert_eq!(set.encoding(), "skiplist");
        assert!(set.score(b"longer").is_some_and(|s| s.is_sign_negative()));
    });
}

#[test]
fn negative_zero_equals_zero() {
    let _turn = THRESHOLDS.lock();
    let mut large = SortedSet::new();
    large.convert_to_large();
    large.insert(b"b", -0.0);
    large.insert(b"a", 0.0);
    // The large form keeps the sign (as Redis' skiplist); a listpack drops it.
    assert!(large.score(b"b").is_some_and(|s| s.is_sign_negative()));
    assert_eq!(large.rank(b"b"), Some(1));
    large.compact_if_fits();
    assert!(large.score(b"b").is_some_and(|s| s.is_sign_positive()));
    let mut set = SortedSet::new();
    set.insert(b"b", -0.0);
    set.insert(b"a", 0.0);
    let order: Vec<Vec<u8>> = set.iter().map(|(m, _)| m.to_vec()).collect();
    assert_eq!(order, [b"a".to_vec(), b"b".to_vec()]);
    assert!(set.score(b"b").is_some_and(|s| s.is_sign_positive()));
    assert_eq!(set.remove(b"b"), Some(0.0));
    assert_eq!(set.pop_max(), Some((b"a".to_vec(), 0.0)));
    assert!(set.is_empty());
}

#[test]
fn scores_read_back_bit_exactly() {
    let _turn = THRESHOLDS.lock();
    let scores = [
        0.0,
        1.0,
        -1.0,
        127.0,
        128.0,
        -32769.0,
        1.5,
        0.1,
        -2.5e-300,
        9_007_199_254_740_991.0,
        9_007_199_254_740_992.0,
        1e20,
        -1e300,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::MIN_POSITIVE,
    ];
    let mut set = SortedSet::new();
    for (i, s) in scores.iter().enumerate() {
        set.insert(format!("m{i}").as_bytes(), *s);
    }
    assert_eq!(set.encoding(), "listpack");
    for (i, s) in scores.iter().enumerate() {
        let got = set.score(format!("m{i}").as_bytes()).unwrap();
        assert_eq!(got.to_bits(), s.to_bits(), "{s}");
    }
}

#[test]
fn ten_short_members_take_about_110_bytes() {
    let _turn = THRESHOLDS.lock();
    let mut set = SortedSet::new();
    for i in 0..10 {
        set.insert(format!("member-{i}").as_bytes(), i as f64);
    }
    assert_eq!(set.encoding(), "listpack");
    assert!(set.heap_bytes() <= 112, "{}", set.heap_bytes());
}

#[test]
fn integer_members_read_back_as_text() {
    let _turn = THRESHOLDS.lock();
    let mut set = SortedSet::new();
    for m in ["-5", "0", "12345678901", "007", "x"] {
        set.insert(m.as_bytes(), 1.0);
    }
    let order: Vec<Vec<u8>> = set.iter().map(|(m, _)| m.to_vec()).collect();
    let expected: Vec<Vec<u8>> = ["-5", "0", "007", "12345678901", "x"]
        .iter()
        .map(|m| m.as_bytes().to_vec())
        .collect();
    assert_eq!(order, expected);
    assert_eq!(set.rank(b"12345678901"), Some(3));
}

#[test]
fn thresholds_convert_on_insert_and_back_on_request() {
    with_thresholds(4, 8, || {
        let mut set = SortedSet::new();
        for i in 0..4 {
            set.insert(format!("m{i}").as_bytes(), i as f64);
        }
        assert_eq!(set.encoding(), "listpack");
        // Updating a member never converts.
        set.insert(b"m0", 10.0);
        assert_eq!(set.encoding(), "listpack");
        set.insert(b"m4", 4.0);
        assert_eq!(set.encoding(), "skiplist");
        set.remove(b"m4");
        // Removing members never turns it back by itself.
        assert_eq!(set.encoding(), "skiplist");
        set.compact_if_fits();
        assert_eq!(set.encoding(), "listpack");
        set.insert(b"123456789", 1.0);
        assert_eq!(set.encoding(), "skiplist");
        set.compact_if_fits();
        assert_eq!(set.encoding(), "skiplist");
    });
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u16, i16, bool),
    Remove(u16),
    PopMin,
    PopMax,
    RemoveRank(u16),
    Compact,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u16..400, -50i16..50, any::<bool>()).prop_map(|(m, s, f)| Op::Insert(m, s, f)),
        2 => (0u16..400).prop_map(Op::Remove),
        1 => Just(Op::PopMin),
        1 => Just(Op::PopMax),
        1 => (0u16..400).prop_map(Op::RemoveRank),
        1 => Just(Op::Compact),
    ]
}

fn member_name(m: u16) -> Vec<u8> {
    // Some members are integers (kept as such in a listpack), one is too long for it.
    match m % 4 {
        0 => m.to_string().into_bytes(),
        1 if m == 1 => vec![b'L'; 70],
        _ => format!("member-{m}").into_bytes(),
    }
}

/// The model: (score, member) order over a map from member to score.
fn model_order(model: &BTreeMap<Vec<u8>, f64>) -> Vec<(Vec<u8>, f64)> {
    let mut all: Vec<(Vec<u8>, f64)> = model.iter().map(|(m, s)| (m.clone(), *s)).collect();
    all.sort_by(|a, b| (Score(a.1), &a.0).cmp(&(Score(b.1), &b.0)));
    all
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn matches_a_model(
        ops in proptest::collection::vec(op(), 1..600),
        max_entries in prop_oneof![Just(0usize), Just(16), Just(128)],
        probes in proptest::collection::vec((-60i16..60, -60i16..60, any::<bool>(), any::<bool>()), 4),
    ) {
        with_thresholds(max_entries, 64, || -> Result<(), TestCaseError> {
            let mut set = SortedSet::new();
            let mut model: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Insert(m, s, fractional) => {
                        let score = if fractional { s as f64 / 8.0 } else { s as f64 };
                        let name = member_name(m);
                        prop_assert_eq!(set.insert(&name, score), model.insert(name, score));
                    }
                    Op::Remove(m) => {
                        let name = member_name(m);
                        prop_assert_eq!(set.remove(&name), model.remove(&name));
                    }
                    Op::PopMin => {
                        let expected = model_order(&model).into_iter().next();
                        if let Some((m, _)) = &expected {
                            model.remove(m);
                        }
                        prop_assert_eq!(set.pop_min(), expected);
                    }
                    Op::PopMax => {
                        let expected = model_order(&model).pop();
                        if let Some((m, _)) = &expected {
                            model.remove(m);
                        }
                        prop_assert_eq!(set.pop_max(), expected);
                    }
                    Op::RemoveRank(r) => {
                        let expected = model_order(&model).get(r as usize).cloned();
                        if let Some((m, _)) = &expected {
                            model.remove(m);
                        }
                        prop_assert_eq!(set.remove_rank(r as usize), expected);
                    }
                    Op::Compact => set.compact_if_fits(),
                }
                let fits = model.len() <= max_entries && model.keys().all(|m| m.len() <= 64);
                if !fits {
                    prop_assert_eq!(set.encoding(), "skiplist");
                }
            }
            set.check();
            let order = model_order(&model);
            prop_assert_eq!(set.len(), order.len());
            let got: Vec<(Vec<u8>, f64)> = set.iter().map(|(m, s)| (m.to_vec(), s)).collect();
            prop_assert_eq!(&got, &order);
            let back: Vec<(Vec<u8>, f64)> = set.iter().rev().map(|(m, s)| (m.to_vec(), s)).collect();
            let mut reversed = order.clone();
            reversed.reverse();
            prop_assert_eq!(&back, &reversed);
            for (rank, (m, s)) in order.iter().enumerate() {
                prop_assert_eq!(set.rank(m), Some(rank));
                prop_assert_eq!(set.score(m), Some(*s));
                let nth = set.nth(rank).map(|(m, s)| (m.to_vec(), s));
                prop_assert_eq!(nth, Some((m.clone(), *s)));
            }
            // Rank windows, walked from both ends alternately.
            for (a, b, _, _) in &probes {
                let (a, b) = (a.unsigned_abs() as usize, b.unsigned_abs() as usize);
                let (start, end) = (a.min(b), a.max(b));
                let mut it = set.range_by_rank(start, end);
                let want: Vec<(Vec<u8>, f64)> =
                    order.iter().skip(start).take(end.saturating_sub(start)).cloned().collect();
                prop_assert_eq!(it.len(), want.len());
                let (mut front, mut backs) = (Vec::new(), Vec::new());
                let mut flip = false;
                loop {
                    flip = !flip;
                    let next = if flip { it.next() } else { it.next_back() };
                    match next {
                        None => break,
                        Some((m, s)) if flip => front.push((m.to_vec(), s)),
                        Some((m, s)) => backs.push((m.to_vec(), s)),
                    }
                }
                backs.reverse();
                front.extend(backs);
                prop_assert_eq!(&front, &want);
            }
            // Score intervals against a filter of the model.
            for (lo, hi, lo_ex, hi_ex) in &probes {
                let min = bound(*lo as f64 / 4.0, *lo_ex);
                let max = bound(*hi as f64 / 4.0, *hi_ex);
                let want: Vec<(Vec<u8>, f64)> = order
                    .iter()
                    .filter(|(_, s)| !min.below_min(*s) && max.within_max(*s))
                    .cloned()
                    .collect();
                let got: Vec<(Vec<u8>, f64)> =
                    set.range_by_score(min, max).map(|(m, s)| (m.to_vec(), s)).collect();
                prop_assert_eq!(got, want);
            }
            // Lex order: members of equal score come in byte order (checked by `check`),
            // and the two forms hold the same thing.
            let mut other = set.clone();
            other.compact_if_fits();
            prop_assert_eq!(&other, &set);
            Ok(())
        })?;
    }
}
