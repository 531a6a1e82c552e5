//! The list value: Latch's quicklist.
//!
//! Redis 7.0 keeps every list in a quicklist, a linked list of listpack nodes, each
//! limited by `list-max-listpack-size`. A [`List`] is the same idea with [`Pack`]s as the
//! nodes:
//!
//! - a list of up to [`SINGLE_MAX_ENTRIES`] elements that fits one node is that one pack,
//!   held directly (8 bytes, no box: `Value` stays 24 bytes), so ten short items cost one
//!   allocation of about 140 bytes;
//! - a larger list is a box holding a deque of packs, the total length and the offsets
//!   of the tail node's last elements. Pushes and pops at either end touch one end node;
//!   reads by index skip whole nodes by their counts, from whichever end is nearer.
//!
//! A node takes another element while Redis' `_quicklistNodeAllowInsert` would let it
//! (with a negative `list-max-listpack-size` its bytes stay within 4..64 KiB, with a
//! positive one its entries stay within that count and its bytes within 8 KiB,
//! `SIZE_SAFETY_LIMIT`), and while it stays within [`NODE_MAX_BYTES`]. An element too large for any node gets a node of its own, as in
//! Redis (which also keeps elements of 1 GiB and more "plain"; the RDB encoder does).
//! A pack reads forward only, so finding the last element of a node scans it: the box
//! remembers where the tail node's last elements start ([`TailOffsets`]), so RPOP decodes
//! a couple of elements on average.
//! Changes in the middle (LINSERT, LSET, LREM) split a node that outgrew the limit and
//! merge neighbours that fit together again, as quicklist does.
//!
//! `list-compress-depth` is accepted by CONFIG but not acted on: nodes are never
//! compressed.

use std::collections::VecDeque;
use std::fmt;

use crate::compact;
use crate::pack::{self, Elem, Pack};
use crate::value::parse_i64_strict;

/// Redis' byte limit on a node whose size is given in entries.
const SIZE_SAFETY_LIMIT: usize = 8192;

/// The most elements a list holds in the unboxed single-pack form: there a pop from the
/// tail scans the whole pack (there is no room to remember offsets).
pub const SINGLE_MAX_ENTRIES: usize = 128;

/// How many offsets of the tail node's last elements a boxed list remembers.
pub const TAIL_OFFSETS: usize = 16;

/// The most bytes a node takes, whatever `list-max-listpack-size` allows: LPUSH moves the
/// head node's bytes (as Redis' listpack insert does), and 2 KiB nodes keep that short
/// while costing 16 bytes per node (under 1%) and filling jemalloc's size classes.
pub const NODE_MAX_BYTES: usize = 2048;

/// How large one node may grow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeLimit {
    entries: usize,
    bytes: usize,
}

impl NodeLimit {
    /// The limit `list-max-listpack-size` sets now.
    pub fn current() -> NodeLimit {
        NodeLimit::from_config(compact::list_max_size())
    }

    /// The limit for a `list-max-listpack-size` of `size`.
    pub fn from_config(size: i64) -> NodeLimit {
        let (entries, bytes) = compact::list_node_limit(size);
        NodeLimit {
            entries,
            bytes: bytes.min(SIZE_SAFETY_LIMIT).min(NODE_MAX_BYTES),
        }
    }

    /// Whether `node` may take `count` more elements of `bytes` encoded bytes.
    fn allows(self, node: &Pack, bytes: usize, count: usize) -> bool {
        node.len() + count <= self.entries && node.heap_bytes() + bytes <= self.bytes
    }

    /// Whether `node` is within the limit (a single element always is).
    fn fits(self, node: &Pack) -> bool {
        node.len() <= 1 || (node.len() <= self.entries && node.heap_bytes() <= self.bytes)
    }
}

/// Matches elements against one client-given string without parsing it per element: a
/// pack stores canonical integers as integers and everything else as bytes.
#[derive(Clone, Copy, Debug)]
pub struct Matcher<'a> {
    bytes: &'a [u8],
    int: Option<i64>,
}

impl<'a> Matcher<'a> {
    pub fn new(bytes: &'a [u8]) -> Matcher<'a> {
        let int = if bytes.len() <= 20 {
            parse_i64_strict(bytes)
        } else {
            None
        };
        Matcher { bytes, int }
    }

    pub fn matches(&self, elem: Elem<'_>) -> bool {
        match (elem, self.int) {
            (Elem::Int(n), Some(wanted)) => n == wanted,
            (Elem::Bytes(bytes), None) => bytes == self.bytes,
            _ => false,
        }
    }
}

/// A list value. See the module documentation.
#[derive(Clone)]
pub struct List {
    repr: Repr,
}

#[derive(Clone)]
enum Repr {
    /// The whole list in one node (possibly empty).
    Single(Pack),
    /// Two or more non-empty nodes.
    Nodes(Box<Nodes>),
}

#[derive(Clone, Default)]
struct Nodes {
    nodes: VecDeque<Pack>,
    /// Elements in all nodes.
    len: usize,
    tail: TailOffsets,
}

/// Where the tail node's last elements start, so RPOP need not scan the whole node (a
/// pack reads forward only). `recent` holds the offsets of its last few elements, in
/// order; `marks` the offsets of every [`MARK_STRIDE`]th element from its front. When
/// `recent` runs out, a scan from the last mark still inside the node refills it (and
/// adds marks as it goes), so a pop decodes a couple of elements on average. RPUSH
/// appends to `recent`; any other change to the tail node forgets both.
#[derive(Clone, Default)]
struct TailOffsets {
    recent: [u32; TAIL_OFFSETS],
    recent_len: u32,
    marks: Vec<u32>,
}

/// Elements between two marks.
const MARK_STRIDE: usize = 16;

impl TailOffsets {
    fn forget(&mut self) {
        self.recent_len = 0;
        self.marks = Vec::new();
    }

    /// An element was appended to the tail node at byte `at`.
    fn pushed(&mut self, at: usize) {
        // Marks left past the end by pops would now point inside the new element.
        while self.marks.last().is_some_and(|&m| m as usize >= at) {
            self.marks.pop();
        }
        let len = self.recent_len as usize;
        if len == 0 {
            return;
        }
        if len == TAIL_OFFSETS {
            self.recent.copy_within(1.., 0);
            self.recent[len - 1] = at as u32;
        } else {
            self.recent[len] = at as u32;
            self.recent_len += 1;
        }
    }

    /// The offset of the tail node's last element, which the caller then removes.
    fn pop(&mut self, node: &Pack) -> usize {
        if self.recent_len == 0 {
            self.refill(node);
        }
        self.recent_len -= 1;
        self.recent[self.recent_len as usize] as usize
    }

    fn refill(&mut self, node: &Pack) {
        let end = node.data_len();
        while self.marks.last().is_some_and(|&m| m as usize >= end) {
            self.marks.pop();
        }
        if self.marks.is_empty() {
            self.marks.push(0);
        }
        let mut at = *self.marks.last().expect("a mark") as usize;
        let mut ring = [0u32; TAIL_OFFSETS];
        let mut seen = 0;
        while at < end {
            if seen > 0 && seen % MARK_STRIDE == 0 {
                self.marks.push(at as u32);
            }
            ring[seen % TAIL_OFFSETS] = at as u32;
            seen += 1;
            at += node.at(at).1;
        }
        let keep = seen.min(TAIL_OFFSETS);
        for i in 0..keep {
            self.recent[i] = ring[(seen - keep + i) % TAIL_OFFSETS];
        }
        self.recent_len = keep as u32;
    }
}

impl Default for List {
    fn default() -> List {
        List::new()
    }
}

impl List {
    /// An empty list.
    pub fn new() -> List {
        List {
            repr: Repr::Single(Pack::new()),
        }
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Single(pack) => pack.len(),
            Repr::Nodes(nodes) => nodes.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of nodes (1 for an empty list).
    pub fn node_count(&self) -> usize {
        match &self.repr {
            Repr::Single(_) => 1,
            Repr::Nodes(nodes) => nodes.nodes.len(),
        }
    }

    /// The nodes, from the head (none for an empty list).
    pub fn nodes(&self) -> impl Iterator<Item = &Pack> {
        let (single, many) = match &self.repr {
            Repr::Single(pack) => (Some(pack).filter(|p| !p.is_empty()), None),
            Repr::Nodes(nodes) => (None, Some(nodes.nodes.iter())),
        };
        single.into_iter().chain(many.into_iter().flatten())
    }

    /// Bytes of heap memory the list takes (for `MEMORY USAGE`).
    pub fn heap_bytes(&self) -> usize {
        match &self.repr {
            Repr::Single(pack) => pack.heap_bytes(),
            Repr::Nodes(nodes) => {
                std::mem::size_of::<Nodes>()
                    + nodes.nodes.capacity() * std::mem::size_of::<Pack>()
                    + nodes.tail.marks.capacity() * 4
                    + nodes.nodes.iter().map(Pack::heap_bytes).sum::<usize>()
            }
        }
    }

    fn node(&self, k: usize) -> &Pack {
        match &self.repr {
            Repr::Single(pack) => pack,
            Repr::Nodes(nodes) => &nodes.nodes[k],
        }
    }

    fn node_mut(&mut self, k: usize) -> &mut Pack {
        match &mut self.repr {
            Repr::Single(pack) => pack,
            Repr::Nodes(nodes) => &mut nodes.nodes[k],
        }
    }

    /// Records `added` elements put into and `removed` taken out of existing nodes.
    fn adjust_len(&mut self, added: usize, removed: usize) {
        if let Repr::Nodes(nodes) = &mut self.repr {
            nodes.len = nodes.len + added - removed;
        }
    }

    /// The list as a deque of nodes (a single pack moves into one).
    fn make_nodes(&mut self) -> &mut Nodes {
        if let Repr::Single(_) = self.repr {
            let old = std::mem::replace(&mut self.repr, Repr::Nodes(Box::default()));
            if let (Repr::Single(pack), Repr::Nodes(nodes)) = (old, &mut self.repr) {
                nodes.len = pack.len();
                if !pack.is_empty() {
                    nodes.nodes.push_back(pack);
                }
            }
        }
        match &mut self.repr {
            Repr::Nodes(nodes) => nodes,
            Repr::Single(_) => unreachable!("just made nodes"),
        }
    }

    /// Forgets the tail node's offsets (before a change other than a push or pop there).
    fn forget_tail(&mut self) {
        if let Repr::Nodes(nodes) = &mut self.repr {
            nodes.tail.forget();
        }
    }

    /// Goes back to the single-pack form once one small node (or none) is left.
    fn settle(&mut self) {
        if let Repr::Nodes(nodes) = &mut self.repr {
            let small = match nodes.nodes.len() {
                0 => true,
                1 => nodes.nodes[0].len() <= SINGLE_MAX_ENTRIES,
                _ => false,
            };
            if small {
                let pack = nodes.nodes.pop_front().unwrap_or_default();
                self.repr = Repr::Single(pack);
            }
        }
    }

    /// Removes node `k`, which must be empty (a single pack just stays, empty).
    fn remove_empty_node(&mut self, k: usize) {
        if let Repr::Nodes(nodes) = &mut self.repr {
            debug_assert!(nodes.nodes[k].is_empty());
            nodes.nodes.remove(k);
            if k == nodes.nodes.len() {
                nodes.tail.forget();
            }
        }
    }

    pub fn push_back(&mut self, item: &[u8]) {
        self.push_back_within(item, NodeLimit::current());
    }

    pub fn push_front(&mut self, item: &[u8]) {
        self.push_front_within(item, NodeLimit::current());
    }

    fn push_back_within(&mut self, item: &[u8], limit: NodeLimit) {
        let elem = Elem::Bytes(item);
        let size = elem.encoded_len();
        if let Repr::Single(pack) = &mut self.repr {
            if pack.is_empty() || (pack.len() < SINGLE_MAX_ENTRIES && limit.allows(pack, size, 1)) {
                pack.insert_one(pack.data_len(), elem);
                return;
            }
        }
        let nodes = self.make_nodes();
        nodes.len += 1;
        if let Some(tail) = nodes.nodes.back_mut() {
            if limit.allows(tail, size, 1) {
                let at = tail.data_len();
                tail.insert_one(at, elem);
                nodes.tail.pushed(at);
                return;
            }
        }
        let mut node = Pack::new();
        node.insert_one(0, elem);
        nodes.nodes.push_back(node);
        nodes.tail.forget();
    }

    fn push_front_within(&mut self, item: &[u8], limit: NodeLimit) {
        let elem = Elem::Bytes(item);
        let size = elem.encoded_len();
        if let Repr::Single(pack) = &mut self.repr {
            if pack.is_empty() || (pack.len() < SINGLE_MAX_ENTRIES && limit.allows(pack, size, 1)) {
                pack.insert_one(0, elem);
                return;
            }
        }
        let nodes = self.make_nodes();
        nodes.len += 1;
        if nodes.nodes.len() == 1 {
            // The head is the tail: its offsets move.
            nodes.tail.forget();
        }
        if let Some(head) = nodes.nodes.front_mut() {
            if limit.allows(head, size, 1) {
                head.insert_one(0, elem);
                return;
            }
        }
        let mut node = Pack::new();
        node.insert_one(0, elem);
        nodes.nodes.push_front(node);
    }

    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        if self.is_empty() {
            return None;
        }
        if self.node_count() == 1 {
            self.forget_tail();
        }
        let node = self.node_mut(0);
        let (elem, size) = node.at(0);
        let item = elem.to_vec();
        node.remove_range(0, size, 1);
        let emptied = node.is_empty();
        self.adjust_len(0, 1);
        if emptied {
            self.remove_empty_node(0);
        }
        if emptied || self.node_count() == 1 {
            self.settle();
        }
        Some(item)
    }

    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        if self.is_empty() {
            return None;
        }
        let (item, emptied) = match &mut self.repr {
            Repr::Single(pack) => {
                let at = pack.last_offset()?;
                let item = pack.at(at).0.to_vec();
                pack.remove_range(at, pack.data_len(), 1);
                return Some(item);
            }
            Repr::Nodes(nodes) => {
                let node = nodes.nodes.back_mut()?;
                let at = nodes.tail.pop(node);
                let item = node.at(at).0.to_vec();
                node.remove_range(at, node.data_len(), 1);
                nodes.len -= 1;
                (item, node.is_empty())
            }
        };
        if emptied {
            self.remove_empty_node(self.node_count() - 1);
        }
        if emptied || self.node_count() == 1 {
            self.settle();
        }
        Some(item)
    }

    /// The node holding element `index` (which must be in range) and its index there,
    /// walking from the nearer end.
    fn locate(&self, index: usize) -> (usize, usize) {
        debug_assert!(index < self.len());
        let Repr::Nodes(nodes) = &self.repr else {
            return (0, index);
        };
        if index < nodes.len / 2 {
            let mut rest = index;
            for (k, node) in nodes.nodes.iter().enumerate() {
                if rest < node.len() {
                    return (k, rest);
                }
                rest -= node.len();
            }
        } else {
            // Counting from the tail: the element is `from_tail` (1-based) from the end.
            let mut from_tail = nodes.len - index;
            for (k, node) in nodes.nodes.iter().enumerate().rev() {
                if from_tail <= node.len() {
                    return (k, node.len() - from_tail);
                }
                from_tail -= node.len();
            }
        }
        unreachable!("the cached length covers every node")
    }

    /// The element at `index` from the head.
    pub fn get(&self, index: usize) -> Option<Elem<'_>> {
        if index >= self.len() {
            return None;
        }
        let (k, i) = self.locate(index);
        self.node(k).get(i)
    }

    /// Replaces the element at `index`; false when out of range.
    pub fn set(&mut self, index: usize, item: &[u8]) -> bool {
        self.set_within(index, item, NodeLimit::current())
    }

    fn set_within(&mut self, index: usize, item: &[u8], limit: NodeLimit) -> bool {
        if index >= self.len() {
            return false;
        }
        self.forget_tail();
        let (k, i) = self.locate(index);
        let node = self.node_mut(k);
        let at = node.offset_of(i);
        node.replace_at(at, Elem::Bytes(item));
        self.repair(k, limit);
        true
    }

    /// Inserts `item` before the element at `index` (`len()` appends).
    pub fn insert(&mut self, index: usize, item: &[u8]) {
        self.insert_within(index, item, NodeLimit::current());
    }

    fn insert_within(&mut self, index: usize, item: &[u8], limit: NodeLimit) {
        assert!(index <= self.len(), "insert past the end of a list");
        if index == self.len() {
            return self.push_back_within(item, limit);
        }
        if index == 0 {
            return self.push_front_within(item, limit);
        }
        self.forget_tail();
        let (k, i) = self.locate(index);
        let node = self.node_mut(k);
        let at = node.offset_of(i);
        node.insert_one(at, Elem::Bytes(item));
        self.adjust_len(1, 0);
        self.repair(k, limit);
    }

    /// After a change inside node `k`: splits it if it outgrew the limit, or merges it
    /// with a neighbour when the two fit in one node.
    fn repair(&mut self, k: usize, limit: NodeLimit) {
        if !limit.fits(self.node(k)) {
            let nodes = self.make_nodes();
            let node = nodes.nodes.remove(k).expect("node in range");
            let mut pieces = Vec::new();
            split_to_fit(node, limit, &mut pieces);
            for (j, piece) in pieces.into_iter().enumerate() {
                nodes.nodes.insert(k + j, piece);
            }
            return;
        }
        if matches!(&self.repr, Repr::Single(pack) if pack.len() > SINGLE_MAX_ENTRIES) {
            // An insert inside a full single pack: it fits a node, but not the single form.
            self.make_nodes();
            return;
        }
        self.merge_around(k, limit);
    }

    /// Merges node `k` into its predecessor, or its successor into it, when they fit.
    fn merge_around(&mut self, k: usize, limit: NodeLimit) {
        let Repr::Nodes(nodes) = &mut self.repr else {
            return;
        };
        let nodes = &mut nodes.nodes;
        if k > 0 && limit.allows(&nodes[k - 1], nodes[k].data_len(), nodes[k].len()) {
            let node = nodes.remove(k).expect("node in range");
            nodes[k - 1].append(&node);
        } else if k + 1 < nodes.len()
            && limit.allows(&nodes[k], nodes[k + 1].data_len(), nodes[k + 1].len())
        {
            let next = nodes.remove(k + 1).expect("node in range");
            nodes[k].append(&next);
        }
        self.settle();
    }

    /// Merges every pair of neighbours that fit in one node (after removals across the
    /// list), then drops back to one pack when one is left.
    fn merge_all(&mut self, limit: NodeLimit) {
        if let Repr::Nodes(nodes) = &mut self.repr {
            let nodes = &mut nodes.nodes;
            let mut k = 0;
            while k + 1 < nodes.len() {
                if limit.allows(&nodes[k], nodes[k + 1].data_len(), nodes[k + 1].len()) {
                    let next = nodes.remove(k + 1).expect("node in range");
                    nodes[k].append(&next);
                } else {
                    k += 1;
                }
            }
        }
        self.settle();
    }

    /// LREM: removes up to `count` elements equal to `wanted` from the head (`count > 0`),
    /// from the tail (`count < 0`) or all of them (0); returns how many it removed.
    pub fn remove_matching(&mut self, wanted: &[u8], count: i64) -> usize {
        self.remove_matching_within(wanted, count, NodeLimit::current())
    }

    fn remove_matching_within(&mut self, wanted: &[u8], count: i64, limit: NodeLimit) -> usize {
        self.forget_tail();
        let matcher = Matcher::new(wanted);
        let limit_count = if count == 0 {
            usize::MAX
        } else {
            usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX)
        };
        // Removing the last `n` matches is keeping the first `matches - n` of them.
        let (mut skip, mut remove) = if count < 0 {
            let matches = self.iter().filter(|e| matcher.matches(*e)).count();
            let remove = limit_count.min(matches);
            (matches - remove, remove)
        } else {
            (0, limit_count)
        };
        let mut removed_total = 0;
        let mut k = 0;
        while k < self.node_count() && remove > 0 {
            let removed = self.node_mut(k).retain(|elem| {
                if remove == 0 || !matcher.matches(elem) {
                    return true;
                }
                if skip > 0 {
                    skip -= 1;
                    return true;
                }
                remove -= 1;
                false
            });
            self.adjust_len(0, removed);
            removed_total += removed;
            if self.node(k).is_empty() && self.node_count() > 1 {
                self.remove_empty_node(k);
            } else {
                k += 1;
            }
        }
        if removed_total > 0 {
            self.merge_all(limit);
        }
        removed_total
    }

    /// LTRIM: keeps the elements `first..=last` (in range, `first <= last`).
    pub fn trim(&mut self, first: usize, last: usize) {
        assert!(first <= last && last < self.len(), "trim outside the list");
        self.forget_tail();
        let mut drop_back = self.len() - 1 - last;
        while drop_back > 0 {
            let k = self.node_count() - 1;
            let node = self.node_mut(k);
            let node_len = node.len();
            if node_len <= drop_back {
                node.clear();
                self.adjust_len(0, node_len);
                self.remove_empty_node(k);
                drop_back -= node_len;
            } else {
                let keep = node_len - drop_back;
                let at = node.offset_of(keep);
                node.remove_range(at, node.data_len(), drop_back);
                self.adjust_len(0, drop_back);
                drop_back = 0;
            }
        }
        let mut drop_front = first;
        while drop_front > 0 {
            let node = self.node_mut(0);
            let node_len = node.len();
            if node_len <= drop_front {
                node.clear();
                self.adjust_len(0, node_len);
                self.remove_empty_node(0);
                drop_front -= node_len;
            } else {
                let at = node.offset_of(drop_front);
                node.remove_range(0, at, drop_front);
                self.adjust_len(0, drop_front);
                drop_front = 0;
            }
        }
        self.settle();
    }

    /// Removes every element.
    pub fn clear(&mut self) {
        self.repr = Repr::Single(Pack::new());
    }

    /// Appends a node's worth of elements (how the RDB decoder rebuilds a list from the
    /// file's nodes): kept as one node when it fits the limit, else split.
    pub fn push_node(&mut self, pack: Pack) {
        self.push_node_within(pack, NodeLimit::current());
    }

    fn push_node_within(&mut self, pack: Pack, limit: NodeLimit) {
        if pack.is_empty() {
            return;
        }
        if let Repr::Single(single) = &mut self.repr {
            if single.is_empty() && limit.fits(&pack) {
                *single = pack;
                return;
            }
        }
        let nodes = self.make_nodes();
        nodes.tail.forget();
        nodes.len += pack.len();
        if limit.fits(&pack) {
            nodes.nodes.push_back(pack);
        } else {
            let mut pieces = Vec::new();
            split_to_fit(pack, limit, &mut pieces);
            nodes.nodes.extend(pieces);
        }
        self.settle();
    }

    /// The elements from the head.
    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0)
    }

    /// The elements from `index` on.
    pub fn iter_from(&self, index: usize) -> Iter<'_> {
        if index >= self.len() {
            return Iter {
                list: self,
                node: 0,
                inner: self.node(0).iter(),
                remaining: 0,
            };
        }
        let (k, i) = self.locate(index);
        let mut inner = self.node(k).iter();
        if i > 0 {
            inner.nth(i - 1);
        }
        Iter {
            list: self,
            node: k,
            inner,
            remaining: self.len() - index,
        }
    }

    /// Calls `f` with `count` elements from `first` on (LRANGE's loop, without an
    /// iterator's bookkeeping per element).
    pub fn for_each_in(&self, first: usize, count: usize, mut f: impl FnMut(Elem<'_>)) {
        if count == 0 || first >= self.len() {
            return;
        }
        let (mut k, index) = self.locate(first);
        let mut remaining = count.min(self.len() - first);
        let mut offset = self.node(k).offset_of(index);
        loop {
            self.node(k).for_each_from(offset, |elem| {
                f(elem);
                remaining -= 1;
                remaining > 0
            });
            offset = 0;
            if remaining == 0 {
                return;
            }
            k += 1;
        }
    }

    /// The elements from the tail.
    pub fn iter_rev(&self) -> RevIter<'_> {
        RevIter {
            list: self,
            next_node: if self.is_empty() {
                0
            } else {
                self.node_count()
            },
            pack: None,
            offsets: Vec::new(),
        }
    }

    /// Every element as bytes, from the head.
    pub fn to_vecs(&self) -> Vec<Vec<u8>> {
        self.iter().map(Elem::to_vec).collect()
    }
}

/// Cuts `node` in halves until every piece fits `limit` (or is one element).
fn split_to_fit(mut node: Pack, limit: NodeLimit, out: &mut Vec<Pack>) {
    if limit.fits(&node) {
        out.push(node);
        return;
    }
    let half = node.len() / 2;
    let at = node.offset_of(half);
    let tail = node.split_off(at, half);
    split_to_fit(node, limit, out);
    split_to_fit(tail, limit, out);
}

/// The elements of a list from some index on, towards the tail.
pub struct Iter<'a> {
    list: &'a List,
    node: usize,
    inner: pack::Iter<'a>,
    remaining: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Elem<'a>;

    fn next(&mut self) -> Option<Elem<'a>> {
        if self.remaining == 0 {
            return None;
        }
        loop {
            if let Some(elem) = self.inner.next() {
                self.remaining -= 1;
                return Some(elem);
            }
            self.node += 1;
            self.inner = self.list.node(self.node).iter();
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Iter<'_> {}

/// The elements of a list from the tail: each node's offsets are gathered once, as a
/// pack reads forward only.
pub struct RevIter<'a> {
    list: &'a List,
    /// The node before which the next one to read lies (0: none left).
    next_node: usize,
    pack: Option<&'a Pack>,
    offsets: Vec<usize>,
}

impl<'a> Iterator for RevIter<'a> {
    type Item = Elem<'a>;

    fn next(&mut self) -> Option<Elem<'a>> {
        loop {
            if let (Some(pack), Some(at)) = (self.pack, self.offsets.pop()) {
                return Some(pack.at(at).0);
            }
            if self.next_node == 0 {
                return None;
            }
            self.next_node -= 1;
            let pack = self.list.node(self.next_node);
            self.offsets.clear();
            self.offsets.extend(pack.iter_offsets().map(|(at, _)| at));
            self.pack = Some(pack);
        }
    }
}

/// Whether two elements read as the same bytes (a pack stores each string one way).
fn same_elem(a: Elem<'_>, b: Elem<'_>) -> bool {
    match (a, b) {
        (Elem::Bytes(x), Elem::Bytes(y)) => x == y,
        (Elem::Int(x), Elem::Int(y)) => x == y,
        _ => a.to_vec() == b.to_vec(),
    }
}

/// Lists are equal when they hold the same elements, however they are split in nodes.
impl PartialEq for List {
    fn eq(&self, other: &List) -> bool {
        self.len() == other.len() && self.iter().zip(other.iter()).all(|(a, b)| same_elem(a, b))
    }
}

impl Eq for List {}

impl fmt::Debug for List {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: AsRef<[u8]>> FromIterator<T> for List {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> List {
        let mut list = List::new();
        let limit = NodeLimit::current();
        for item in items {
            list.push_back_within(item.as_ref(), limit);
        }
        list
    }
}

impl From<VecDeque<Vec<u8>>> for List {
    fn from(items: VecDeque<Vec<u8>>) -> List {
        items.into_iter().collect()
    }
}

impl From<Vec<Vec<u8>>> for List {
    fn from(items: Vec<Vec<u8>>) -> List {
        items.into_iter().collect()
    }
}

#[cfg(test)]
#[path = "list_tests.rs"]
mod tests;
