//! Tests of [`List`]: against a `VecDeque` model with small node limits, so nodes split,
//! merge and come and go.

use super::*;
use proptest::prelude::*;

fn strings(list: &List) -> Vec<Vec<u8>> {
    list.to_vecs()
}

/// Every node non-empty and within `limit`, the cached length right, the single-pack
/// form whenever one node is left, and exactly the inner nodes compressed (or marked as
/// not worth it).
fn check_shape(list: &List, limit: NodeLimit) {
    let mut counted = 0;
    list.for_each_node(|node| {
        counted += node.len();
        assert!(!node.is_empty(), "an empty node in {list:?}");
        assert!(limit.fits(node), "a node over the limit: {node:?}");
    });
    assert_eq!(counted, list.len());
    if let Repr::Nodes(nodes) = &list.repr {
        for (k, node) in nodes.nodes.iter().enumerate() {
            let inner = nodes.is_inner(k);
            match node {
                Node::Plain(_) => assert!(!inner, "inner node {k} left plain"),
                Node::Compressed(packed) => {
                    assert!(inner, "end node {k} compressed");
                    let pack = packed.restore();
                    assert_eq!(pack.len(), node.count());
                    assert!(packed.0.heap_bytes() < pack.heap_bytes(), "node {k} grew");
                }
                Node::Incompressible(pack) => {
                    if inner {
                        assert!(Compressed::new(pack).is_none(), "node {k} compresses");
                    }
                }
            }
        }
        let one_small = nodes.nodes.len() == 1 && nodes.nodes[0].count() <= SINGLE_MAX_ENTRIES;
        assert!(
            nodes.nodes.len() >= 2 || !one_small,
            "a boxed list that fits the single form"
        );
        // The remembered offsets are the tail node's last ones.
        let tail = nodes
            .nodes
            .back()
            .unwrap()
            .as_pack()
            .expect("the tail is a pack");
        let offsets: Vec<usize> = tail.iter_offsets().map(|(at, _)| at).collect();
        let known: Vec<usize> = nodes.tail.recent[..nodes.tail.recent_len as usize]
            .iter()
            .map(|&at| at as usize)
            .collect();
        assert_eq!(&offsets[offsets.len() - known.len()..], &known[..]);
        // Every mark is an element's start (those past the end are dropped when read).
        for &mark in &nodes.tail.marks {
            let mark = mark as usize;
            assert!(
                mark >= tail.data_len() || offsets.contains(&mark),
                "mark {mark}"
            );
        }
    } else {
        assert!(list.len() <= SINGLE_MAX_ENTRIES);
    }
}

#[test]
fn a_value_stays_three_words() {
    assert_eq!(std::mem::size_of::<List>(), 16);
    assert_eq!(std::mem::size_of::<crate::Value>(), 24);
}

#[test]
fn ten_short_items_are_one_small_pack() {
    let list: List = (0..10).map(|i| format!("item-{i}-12345")).collect();
    assert_eq!(list.node_count(), 1);
    assert!(matches!(list.repr, Repr::Single(_)));
    assert!(list.heap_bytes() <= 8 + 10 * 14, "{}", list.heap_bytes());
}

#[test]
fn rpop_drains_a_big_node_through_the_remembered_offsets() {
    let limit = NodeLimit::from_config(-2);
    let mut list = List::new();
    for i in 0..6000 {
        list.push_back_within(format!("{}", i % 300).as_bytes(), limit);
    }
    assert!(list.node_count() >= 2);
    for i in (0..6000).rev() {
        assert_eq!(list.pop_back(), Some(format!("{}", i % 300).into_bytes()));
        if i % 97 == 0 {
            check_shape(&list, limit);
        }
    }
    assert!(list.is_empty());
}

#[test]
fn limits_read_as_redis_does() {
    assert_eq!(
        NodeLimit::from_config(-2),
        NodeLimit {
            entries: usize::MAX,
            bytes: NODE_MAX_BYTES
        }
    );
    assert_eq!(
        NodeLimit::from_config(5),
        NodeLimit {
            entries: 5,
            bytes: NODE_MAX_BYTES
        }
    );
}

#[test]
fn a_large_element_gets_a_node_of_its_own() {
    let limit = NodeLimit::from_config(-1);
    let mut list = List::new();
    list.push_back_within(b"a", limit);
    list.push_back_within(&[b'x'; 10_000], limit);
    list.push_back_within(b"b", limit);
    assert_eq!(list.node_count(), 3);
    check_shape(&list, limit);
    assert_eq!(list.get(1).unwrap().len(), 10_000);
}

#[test]
fn pops_walk_through_nodes_from_both_ends() {
    let limit = NodeLimit::from_config(3);
    let mut list = List::new();
    for i in 0..10 {
        list.push_back_within(i.to_string().as_bytes(), limit);
    }
    assert_eq!(list.node_count(), 4);
    check_shape(&list, limit);
    assert_eq!(list.pop_back(), Some(b"9".to_vec()));
    assert_eq!(list.pop_front(), Some(b"0".to_vec()));
    let rest: Vec<Vec<u8>> = std::iter::from_fn(|| list.pop_back()).collect();
    assert_eq!(rest.len(), 8);
    assert_eq!(rest[0], b"8");
    assert!(list.is_empty());
    assert_eq!(list.pop_front(), None);
}

#[test]
fn inner_nodes_are_compressed_and_read_back() {
    TEST_DEPTH.with(|d| d.set(Some(1)));
    let limit = NodeLimit::from_config(-2);
    let items: Vec<Vec<u8>> = (0..20_000)
        .map(|i| format!("item-{i}-{}", i % 7).into_bytes())
        .collect();
    let mut list = List::new();
    for item in &items {
        list.push_back_within(item, limit);
    }
    let nodes = list.node_count();
    assert!(nodes > 50, "{nodes} nodes");
    assert_eq!(list.compressed_nodes(), nodes - 2);
    check_shape(&list, limit);
    // Half the bytes or less: the items share most of their text.
    let plain: usize = items.iter().map(|item| item.len() + 1).sum();
    assert!(
        list.heap_bytes() * 2 < plain,
        "{} of {plain}",
        list.heap_bytes()
    );
    // Reads and changes in the middle leave the inner nodes compressed.
    assert_eq!(list.get(10_000), Some(items[10_000].clone()));
    assert!(list.set(10_000, b"changed"));
    list.insert(5_000, b"inserted");
    assert_eq!(list.remove_matching(b"item-15000-6", 0), 1);
    assert_eq!(list.compressed_nodes(), list.node_count() - 2);
    check_shape(&list, limit);
    assert_eq!(list.get(5_000), Some(b"inserted".to_vec()));
    assert_eq!(list.get(10_001), Some(b"changed".to_vec()));
    // Popping from the head restores each node as it reaches the end.
    for item in &items[..5_000] {
        assert_eq!(list.pop_front().as_ref(), Some(item));
    }
    check_shape(&list, limit);
    list.trim(100, 200);
    check_shape(&list, limit);
    assert_eq!(list.get(0), Some(items[5_099].clone()));
    TEST_DEPTH.with(|d| d.set(None));
}

#[test]
fn without_a_depth_nothing_is_compressed() {
    TEST_DEPTH.with(|d| d.set(Some(0)));
    let list: List = (0..20_000).map(|i| format!("item-{i}")).collect();
    assert!(list.node_count() > 50);
    assert_eq!(list.compressed_nodes(), 0);
    TEST_DEPTH.with(|d| d.set(None));
}

#[derive(Clone, Debug)]
enum Op {
    PushFront(Vec<u8>),
    PushBack(Vec<u8>),
    PopFront,
    PopBack,
    Insert(usize, Vec<u8>),
    Set(usize, Vec<u8>),
    Remove(Vec<u8>, i64),
    Trim(usize, usize),
    Range(usize, usize),
    PushNode(Vec<Vec<u8>>),
    /// Many small pushes at one end (true: the tail), past the single-pack form.
    PushMany(bool, usize),
    /// Many pops from one end, through the remembered tail offsets.
    PopMany(bool, usize),
}

fn element() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => (0i64..6).prop_map(|n| n.to_string().into_bytes()),
        2 => proptest::collection::vec(b'a'..b'd', 0..12),
        1 => any::<i64>().prop_map(|n| n.to_string().into_bytes()),
        1 => proptest::collection::vec(any::<u8>(), 100..300),
        // Text that compresses, for nodes of a compressed list's middle.
        2 => (0usize..50).prop_map(|n| format!("item-{n}-{}", "abc".repeat(n % 7)).into_bytes()),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => element().prop_map(Op::PushFront),
        4 => element().prop_map(Op::PushBack),
        2 => Just(Op::PopFront),
        2 => Just(Op::PopBack),
        2 => (any::<usize>(), element()).prop_map(|(i, e)| Op::Insert(i, e)),
        2 => (any::<usize>(), element()).prop_map(|(i, e)| Op::Set(i, e)),
        1 => (element(), -3i64..4).prop_map(|(e, n)| Op::Remove(e, n)),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Op::Trim(a, b)),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Op::Range(a, b)),
        1 => proptest::collection::vec(element(), 1..8).prop_map(Op::PushNode),
        1 => (any::<bool>(), 1usize..300).prop_map(|(b, n)| Op::PushMany(b, n)),
        1 => (any::<bool>(), 1usize..100).prop_map(|(b, n)| Op::PopMany(b, n)),
    ]
}

fn limit() -> impl Strategy<Value = NodeLimit> {
    prop_oneof![
        (1i64..6).prop_map(NodeLimit::from_config),
        Just(NodeLimit::from_config(-1)),
        // A tiny byte limit, below what the config allows, to split often by size.
        (16usize..200).prop_map(|bytes| NodeLimit {
            entries: usize::MAX,
            bytes
        }),
    ]
}

fn apply(list: &mut List, model: &mut VecDeque<Vec<u8>>, op: Op, limit: NodeLimit) {
    match op {
        Op::PushFront(e) => {
            list.push_front_within(&e, limit);
            model.push_front(e);
        }
        Op::PushBack(e) => {
            list.push_back_within(&e, limit);
            model.push_back(e);
        }
        Op::PopFront => assert_eq!(list.pop_front(), model.pop_front()),
        Op::PopBack => assert_eq!(list.pop_back(), model.pop_back()),
        Op::Insert(i, e) => {
            let index = i % (model.len() + 1);
            list.insert_within(index, &e, limit);
            model.insert(index, e);
        }
        Op::Set(i, e) => {
            let in_range = i < model.len() || model.is_empty();
            let index = if in_range { i } else { i % model.len() };
            let done = list.set_within(index, &e, limit);
            assert_eq!(done, index < model.len());
            if done {
                model[index] = e;
            }
        }
        Op::Remove(e, count) => {
            let removed = list.remove_matching_within(&e, count, limit);
            let mut expected = 0;
            let wanted = count.unsigned_abs() as usize;
            if count >= 0 {
                let mut kept = VecDeque::new();
                for item in model.drain(..) {
                    if item == e && (count == 0 || expected < wanted) {
                        expected += 1;
                    } else {
                        kept.push_back(item);
                    }
                }
                *model = kept;
            } else {
                let mut kept = VecDeque::new();
                for item in model.drain(..).rev() {
                    if item == e && expected < wanted {
                        expected += 1;
                    } else {
                        kept.push_front(item);
                    }
                }
                *model = kept;
            }
            assert_eq!(removed, expected);
        }
        Op::Trim(a, b) if !model.is_empty() => {
            let first = a % model.len();
            let last = first + b % (model.len() - first);
            list.trim(first, last);
            model.truncate(last + 1);
            model.drain(..first);
        }
        Op::Range(a, b) if !model.is_empty() => {
            let first = a % model.len();
            let count = b % (model.len() - first + 1);
            let mut got: Vec<Vec<u8>> = Vec::new();
            list.for_each_in(first, count, |e| got.push(e.to_vec()));
            let want: Vec<Vec<u8>> = model.range(first..first + count).cloned().collect();
            assert_eq!(got, want);
            let mut rest = 0;
            list.scan(first, |_| {
                rest += 1;
                true
            });
            assert_eq!(rest, model.len() - first);
        }
        Op::PushNode(items) => {
            let pack = Pack::from_elems(items.iter().map(|e| Elem::Bytes(e)));
            list.push_node_within(pack, limit);
            model.extend(items);
        }
        Op::PushMany(back, n) => {
            for i in 0..n {
                let item = format!("{}", i % 9).into_bytes();
                if back {
                    list.push_back_within(&item, limit);
                    model.push_back(item);
                } else {
                    list.push_front_within(&item, limit);
                    model.push_front(item);
                }
            }
        }
        Op::PopMany(back, n) => {
            for _ in 0..n {
                if back {
                    assert_eq!(list.pop_back(), model.pop_back());
                } else {
                    assert_eq!(list.pop_front(), model.pop_front());
                }
            }
        }
        Op::Trim(..) | Op::Range(..) => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]
    #[test]
    fn behaves_as_a_deque_of_strings(
        limit in limit(),
        depth in prop_oneof![2 => Just(0usize), 1 => 1usize..4],
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        TEST_DEPTH.with(|d| d.set(Some(depth)));
        let mut list = List::new();
        let mut model: VecDeque<Vec<u8>> = VecDeque::new();
        for op in ops {
            apply(&mut list, &mut model, op, limit);
            prop_assert_eq!(list.len(), model.len());
            check_shape(&list, limit);
            let want: Vec<Vec<u8>> = model.iter().cloned().collect();
            prop_assert_eq!(strings(&list), want.clone());
            let mut backwards: Vec<Vec<u8>> = Vec::new();
            list.scan_rev(|e| {
                backwards.push(e.to_vec());
                true
            });
            backwards.reverse();
            prop_assert_eq!(backwards, want.clone());
            for (i, item) in model.iter().enumerate() {
                prop_assert_eq!(list.get_with(i, |e| Matcher::new(item).matches(e)), Some(true));
            }
            prop_assert!(list.get(model.len()).is_none());
            let copy = list.clone();
            prop_assert_eq!(&copy, &list);
            prop_assert_eq!(&List::from(model.clone()), &list);
        }
    }
}
