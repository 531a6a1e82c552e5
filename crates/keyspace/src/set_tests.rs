use std::collections::HashSet;

use proptest::prelude::*;

use super::*;

fn text(elem: Elem<'_>) -> Vec<u8> {
    elem.to_vec()
}

fn members(set: &Set) -> Vec<Vec<u8>> {
    set.iter().map(text).collect()
}

#[test]
fn small_integers_take_two_bytes_each() {
    let mut set = Set::new();
    for n in 0..10 {
        assert!(set.insert(n.to_string().as_bytes()));
    }
    assert!(!set.insert(b"3"));
    assert_eq!(set.encoding(), "intset");
    assert_eq!(set.heap_bytes(), 8 + 2 * 10);
    assert_eq!(set.intset_bytes().unwrap()[0], 2);
}

#[test]
fn intsets_widen_and_stay_sorted() {
    let mut set = Set::new();
    for text in [
        "5",
        "-3",
        "70000",
        "-9223372036854775808",
        "9223372036854775807",
        "0",
    ] {
        assert!(set.insert(text.as_bytes()));
    }
    assert_eq!(set.intset_bytes().unwrap()[0], 8);
    let listed: Vec<i64> = set.iter().map(|e| e.as_i64().unwrap()).collect();
    assert_eq!(listed, vec![i64::MIN, -3, 0, 5, 70000, i64::MAX]);
    for text in ["70000", "-3", "9223372036854775807"] {
        assert!(set.contains(text.as_bytes()));
        assert!(set.remove(text.as_bytes()));
        assert!(!set.contains(text.as_bytes()));
    }
    // Removing never narrows, as in Redis.
    assert_eq!(set.intset_bytes().unwrap()[0], 8);
    assert!(!set.contains(b"05"));
    assert!(!set.contains(b"x"));
}

#[test]
fn non_canonical_integers_are_strings() {
    for member in ["01", "+1", "-0", " 1", "1.0", "99999999999999999999"] {
        let mut set = Set::new();
        set.insert(b"1");
        set.insert(member.as_bytes());
        assert_eq!(set.encoding(), "hashtable", "{member}");
        assert!(set.contains(member.as_bytes()));
        assert!(set.contains(b"1"));
    }
}

#[test]
fn the_threshold_converts_past_it() {
    let mut set = Set::new();
    for n in 0..512 {
        set.insert(n.to_string().as_bytes());
    }
    assert_eq!(set.encoding(), "intset");
    set.insert(b"512");
    assert_eq!(set.encoding(), "hashtable");
    assert_eq!(set.len(), 513);
    // Never back, even when it shrinks.
    for n in 0..500 {
        assert!(set.remove(n.to_string().as_bytes()));
    }
    assert_eq!(set.encoding(), "hashtable");
    assert_eq!(set.len(), 13);
    for n in 500..513 {
        assert!(set.contains(n.to_string().as_bytes()));
    }
    // A loaded set starts over.
    let listed = members(&set);
    let loaded = Set::from_members(listed.iter().map(|m| &m[..]));
    assert_eq!(loaded.encoding(), "intset");
    assert_eq!(loaded, set);
}

#[test]
fn intset_bytes_round_trip_and_are_checked() {
    let set = Set::from_members([&b"7"[..], b"-2", b"40000"]);
    let bytes = set.intset_bytes().unwrap().to_vec();
    assert_eq!(Set::from_intset_bytes(&bytes).unwrap(), set);
    let mut unsorted = bytes.clone();
    unsorted[8..12].copy_from_slice(&bytes[12..16]);
    unsorted[12..16].copy_from_slice(&bytes[8..12]);
    assert!(Set::from_intset_bytes(&unsorted).is_err());
    assert!(Set::from_intset_bytes(&bytes[..bytes.len() - 1]).is_err());
    let mut bad_width = bytes;
    bad_width[0] = 3;
    assert!(Set::from_intset_bytes(&bad_width).is_err());
}

#[test]
fn a_scan_returns_every_stable_member() {
    let mut set = Set::new();
    for n in 0..1000 {
        set.insert(format!("m{n}").as_bytes());
    }
    let mut seen = HashSet::new();
    let mut cursor = 0;
    let mut steps = 0;
    loop {
        let (next, taken) = set.scan(cursor, 7);
        seen.extend(taken.into_iter().map(text));
        if steps == 5 {
            for n in 500..800 {
                set.remove(format!("m{n}").as_bytes());
            }
            for n in 0..300 {
                set.insert(format!("new{n}").as_bytes());
            }
        }
        steps += 1;
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    for n in (0..500).chain(800..1000) {
        assert!(seen.contains(format!("m{n}").as_bytes()), "m{n}");
    }
}

#[test]
fn pops_empty_the_set() {
    let mut rng = rand::thread_rng();
    for prefix in ["", "s"] {
        let mut set = Set::new();
        let mut model = HashSet::new();
        for n in 0..2000 {
            let member = format!("{prefix}{n}").into_bytes();
            set.insert(&member);
            model.insert(member);
        }
        while let Some(member) = set.pop_random(&mut rng) {
            assert!(model.remove(&member));
            assert!(!set.contains(&member));
            assert_eq!(set.len(), model.len());
        }
        assert!(model.is_empty());
    }
}

#[derive(Clone, Debug)]
enum Op {
    Insert(Vec<u8>),
    InsertRange(i64, u16),
    Remove(Vec<u8>),
    Pop,
}

fn member() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => (-300i64..300).prop_map(|n| n.to_string().into_bytes()),
        1 => any::<i64>().prop_map(|n| n.to_string().into_bytes()),
        1 => proptest::collection::vec(any::<u8>(), 0..30),
        1 => "[a-c]{1,3}".prop_map(String::into_bytes),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => member().prop_map(Op::Insert),
        1 => (-70000i64..70000, 0u16..600).prop_map(|(s, n)| Op::InsertRange(s, n)),
        3 => member().prop_map(Op::Remove),
        2 => Just(Op::Pop),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]
    #[test]
    fn behaves_as_a_set_of_strings(ops in proptest::collection::vec(op(), 1..60)) {
        let mut set = Set::new();
        let mut model: HashSet<Vec<u8>> = HashSet::new();
        // Whether Redis would have turned this set into a hashtable by now.
        let mut converted = false;
        let mut rng = rand::thread_rng();
        for op in ops {
            let mut add = |m: Vec<u8>, set: &mut Set, model: &mut HashSet<Vec<u8>>| {
                let fresh = model.insert(m.clone());
                prop_assert_eq!(set.insert(&m), fresh);
                if fresh && (parse_i64_strict(&m).is_none() || model.len() > 512) {
                    converted = true;
                }
                Ok(())
            };
            match op {
                Op::Insert(m) => add(m, &mut set, &mut model)?,
                Op::InsertRange(start, n) => {
                    for k in 0..n as i64 {
                        add((start + k).to_string().into_bytes(), &mut set, &mut model)?;
                    }
                }
                Op::Remove(m) => prop_assert_eq!(set.remove(&m), model.remove(&m)),
                Op::Pop => {
                    let popped = set.pop_random(&mut rng);
                    match popped {
                        Some(m) => prop_assert!(model.remove(&m)),
                        None => prop_assert!(model.is_empty()),
                    }
                }
            }
            prop_assert_eq!(set.len(), model.len());
            prop_assert_eq!(set.is_intset(), !converted);
            let listed = members(&set);
            let as_set: HashSet<Vec<u8>> = listed.iter().cloned().collect();
            prop_assert_eq!(&as_set, &model);
            prop_assert_eq!(listed.len(), model.len());
            if set.is_intset() {
                let ints: Vec<i64> = set.iter().map(|e| e.as_i64().unwrap()).collect();
                prop_assert!(ints.windows(2).all(|w| w[0] < w[1]));
            }
            for m in model.iter().take(20) {
                prop_assert!(set.contains(m));
            }
            let copy = Set::from_members(listed.iter().map(|m| &m[..]));
            prop_assert_eq!(&copy, &set);
        }
    }
}
