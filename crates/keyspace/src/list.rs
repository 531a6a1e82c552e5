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
//!
//! `list-compress-depth` N > 0 keeps the N nodes at each end as packs and holds the nodes
//! between them LZ4-compressed ([`Compressed`]), as Redis holds them LZF-compressed: a
//! node is compressed when it becomes an inner one and takes at least
//! [`MIN_COMPRESS_BYTES`], if that saves at least [`MIN_COMPRESS_IMPROVE`] bytes (else it
//! stays a pack, marked so no later change retries it until it changes). Pushes and pops
//! touch the end nodes, so only a node crossing the depth boundary is compressed or
//! restored. A read of an inner node restores a copy and leaves the node compressed; a
//! change there restores the node itself, and the change's end compresses it again. As in
//! Redis, a list keeps the depth in force when it became more than one node.

use std::collections::VecDeque;
use std::fmt;

use crate::compact;
use crate::pack::{self, Elem, Pack};
use crate::thin::ThinBytes;
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

/// Nodes smaller than this are never compressed (Redis' `MIN_COMPRESS_BYTES`).
pub const MIN_COMPRESS_BYTES: usize = 48;

/// A node is kept compressed only if that saves at least this many bytes (Redis'
/// `MIN_COMPRESS_IMPROVE`).
pub const MIN_COMPRESS_IMPROVE: usize = 8;

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
    fn allows(self, node: &impl NodeSize, bytes: usize, count: usize) -> bool {
        node.count() + count <= self.entries && node.pack_bytes() + bytes <= self.bytes
    }

    /// Whether `node` is within the limit (a single element always is).
    fn fits(self, node: &impl NodeSize) -> bool {
        let count = node.count();
        count <= 1 || (count <= self.entries && node.pack_bytes() <= self.bytes)
    }
}

/// What the node limit looks at: the elements and the bytes of the node as a pack.
trait NodeSize {
    fn count(&self) -> usize;
    /// Bytes of encoded elements.
    fn data_bytes(&self) -> usize;

    /// Bytes of the node as a pack, header included.
    fn pack_bytes(&self) -> usize {
        pack::HEADER_BYTES + self.data_bytes()
    }
}

impl NodeSize for Pack {
    fn count(&self) -> usize {
        self.len()
    }

    fn data_bytes(&self) -> usize {
        self.data_len()
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
    nodes: VecDeque<Node>,
    /// Elements in all nodes.
    len: usize,
    tail: TailOffsets,
    /// `list-compress-depth` when the list became nodes (0: none compressed).
    depth: usize,
}

/// One node of a boxed list.
#[derive(Clone)]
enum Node {
    Plain(Pack),
    /// An inner node that compression would not shrink enough: left as it is until it
    /// changes (a change makes it `Plain`, to be tried again).
    Incompressible(Pack),
    Compressed(Compressed),
}

impl Node {
    /// The node's pack, when it is not compressed.
    #[cfg(test)]
    fn as_pack(&self) -> Option<&Pack> {
        match self {
            Node::Plain(pack) | Node::Incompressible(pack) => Some(pack),
            Node::Compressed(_) => None,
        }
    }

    /// Calls `f` with the node's elements as a pack (a restored copy for a compressed one).
    fn with_pack<R>(&self, f: impl FnOnce(&Pack) -> R) -> R {
        match self {
            Node::Plain(pack) | Node::Incompressible(pack) => f(pack),
            Node::Compressed(packed) => f(&packed.restore()),
        }
    }

    /// The node's pack, to change: a compressed node is restored first.
    fn pack_mut(&mut self) -> &mut Pack {
        match self {
            Node::Plain(_) => {}
            Node::Incompressible(_) | Node::Compressed(_) => {
                let pack = match std::mem::replace(self, Node::Plain(Pack::new())) {
                    Node::Plain(pack) | Node::Incompressible(pack) => pack,
                    Node::Compressed(packed) => packed.restore(),
                };
                *self = Node::Plain(pack);
            }
        }
        match self {
            Node::Plain(pack) => pack,
            _ => unreachable!("just made plain"),
        }
    }

    fn into_pack(self) -> Pack {
        match self {
            Node::Plain(pack) | Node::Incompressible(pack) => pack,
            Node::Compressed(packed) => packed.restore(),
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Node::Plain(pack) | Node::Incompressible(pack) => pack.heap_bytes(),
            Node::Compressed(packed) => packed.0.heap_bytes(),
        }
    }

    /// Compresses a plain node if that is worth it (else marks it incompressible).
    fn compress(&mut self) {
        if let Node::Plain(pack) = self {
            *self = match Compressed::new(pack) {
                Some(packed) => Node::Compressed(packed),
                None => Node::Incompressible(std::mem::take(pack)),
            };
        }
    }

    /// Restores a compressed node (an end node is always a pack).
    fn decompress(&mut self) {
        if let Node::Compressed(_) = self {
            self.pack_mut();
        }
    }
}

impl NodeSize for Node {
    fn count(&self) -> usize {
        match self {
            Node::Plain(pack) | Node::Incompressible(pack) => pack.len(),
            Node::Compressed(packed) => packed.count(),
        }
    }

    fn data_bytes(&self) -> usize {
        match self {
            Node::Plain(pack) | Node::Incompressible(pack) => pack.data_len(),
            Node::Compressed(packed) => packed.data_len(),
        }
    }
}

/// A node's pack data, LZ4-compressed, in one allocation behind a thin pointer:
/// `[u32 element count][u32 data length][LZ4 block]`.
#[derive(Clone)]
struct Compressed(ThinBytes);

impl Compressed {
    /// The pack compressed, when it is large enough and compresses well enough.
    fn new(pack: &Pack) -> Option<Compressed> {
        let data = pack.data();
        if data.len() < MIN_COMPRESS_BYTES {
            return None;
        }
        let mut out = vec![0u8; 8 + lz4_flex::block::get_maximum_output_size(data.len())];
        out[..4].copy_from_slice(&(pack.len() as u32).to_le_bytes());
        out[4..8].copy_from_slice(&(data.len() as u32).to_le_bytes());
        let size = lz4_flex::block::compress_into(data, &mut out[8..]).ok()?;
        if size + MIN_COMPRESS_IMPROVE > data.len() {
            return None;
        }
        Some(Compressed(ThinBytes::new(&out[..8 + size])))
    }

    fn field(&self, at: usize) -> usize {
        let bytes = self.0.as_bytes();
        u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes")) as usize
    }

    fn count(&self) -> usize {
        self.field(0)
    }

    fn data_len(&self) -> usize {
        self.field(4)
    }

    /// The pack it was made from.
    fn restore(&self) -> Pack {
        let block = &self.0.as_bytes()[8..];
        Pack::from_encoded(self.data_len(), self.count(), |out| {
            let size = lz4_flex::block::decompress_into(block, out)
                .expect("a node this module compressed decompresses");
            assert_eq!(size, out.len(), "a compressed node restores its whole pack");
        })
    }
}

impl Nodes {
    /// Whether node `k` is an inner one that the list's depth compresses.
    fn is_inner(&self, k: usize) -> bool {
        self.depth > 0 && k >= self.depth && k + self.depth < self.nodes.len()
    }

    /// Brings node `k` to the form its place asks for.
    fn settle_node(&mut self, k: usize) {
        if k >= self.nodes.len() {
            return;
        }
        if self.is_inner(k) {
            self.nodes[k].compress();
        } else {
            self.nodes[k].decompress();
        }
    }

    /// After nodes came or went at the ends: the nodes at the depth's boundaries.
    fn settle_ends(&mut self) {
        if self.depth == 0 {
            return;
        }
        let (n, d) = (self.nodes.len(), self.depth);
        for k in [
            d.wrapping_sub(1),
            d,
            n.wrapping_sub(d + 1),
            n.wrapping_sub(d),
        ] {
            self.settle_node(k);
        }
    }

    /// After changes anywhere: every node (a tag check for those already settled).
    fn settle_all(&mut self) {
        if self.depth == 0 {
            return;
        }
        for k in 0..self.nodes.len() {
            self.settle_node(k);
        }
    }
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

    /// How many nodes are held compressed (`list-compress-depth`).
    pub fn compressed_nodes(&self) -> usize {
        match &self.repr {
            Repr::Single(_) => 0,
            Repr::Nodes(nodes) => nodes
                .nodes
                .iter()
                .filter(|node| matches!(node, Node::Compressed(_)))
                .count(),
        }
    }

    /// Calls `f` with each node's elements as a pack, from the head (none for an empty
    /// list; a compressed node is restored for the call).
    pub fn for_each_node(&self, mut f: impl FnMut(&Pack)) {
        match &self.repr {
            Repr::Single(pack) => {
                if !pack.is_empty() {
                    f(pack)
                }
            }
            Repr::Nodes(nodes) => {
                for node in &nodes.nodes {
                    node.with_pack(&mut f);
                }
            }
        }
    }

    /// Bytes of heap memory the list takes (for `MEMORY USAGE`).
    pub fn heap_bytes(&self) -> usize {
        match &self.repr {
            Repr::Single(pack) => pack.heap_bytes(),
            Repr::Nodes(nodes) => {
                std::mem::size_of::<Nodes>()
                    + nodes.nodes.capacity() * std::mem::size_of::<Node>()
                    + nodes.tail.marks.capacity() * 4
                    + nodes.nodes.iter().map(Node::heap_bytes).sum::<usize>()
            }
        }
    }

    /// Calls `f` with node `k`'s elements as a pack.
    fn with_node<R>(&self, k: usize, f: impl FnOnce(&Pack) -> R) -> R {
        match &self.repr {
            Repr::Single(pack) => f(pack),
            Repr::Nodes(nodes) => nodes.nodes[k].with_pack(f),
        }
    }

    /// Node `k` as a pack to change (restored if it was compressed: the change's end
    /// settles it again).
    fn node_mut(&mut self, k: usize) -> &mut Pack {
        match &mut self.repr {
            Repr::Single(pack) => pack,
            Repr::Nodes(nodes) => nodes.nodes[k].pack_mut(),
        }
    }

    fn node_len(&self, k: usize) -> usize {
        match &self.repr {
            Repr::Single(pack) => pack.len(),
            Repr::Nodes(nodes) => nodes.nodes[k].count(),
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
            let nodes = Box::new(Nodes {
                depth: depth_in_force(),
                ..Nodes::default()
            });
            let old = std::mem::replace(&mut self.repr, Repr::Nodes(nodes));
            if let (Repr::Single(pack), Repr::Nodes(nodes)) = (old, &mut self.repr) {
                nodes.len = pack.len();
                if !pack.is_empty() {
                    nodes.nodes.push_back(Node::Plain(pack));
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

    /// Goes back to the single-pack form once one small node (or none) is left; else
    /// settles the compression of every node (after a change anywhere).
    fn settle(&mut self) {
        if !self.settle_small() {
            if let Repr::Nodes(nodes) = &mut self.repr {
                nodes.settle_all();
            }
        }
    }

    /// Goes back to the single-pack form once one small node (or none) is left; true when
    /// the list is (now) one pack.
    fn settle_small(&mut self) -> bool {
        let Repr::Nodes(nodes) = &mut self.repr else {
            return true;
        };
        let small = match nodes.nodes.len() {
            0 => true,
            1 => nodes.nodes[0].count() <= SINGLE_MAX_ENTRIES,
            _ => false,
        };
        if small {
            let pack = nodes
                .nodes
                .pop_front()
                .map(Node::into_pack)
                .unwrap_or_default();
            self.repr = Repr::Single(pack);
        }
        small
    }

    /// After a push or pop: back to one pack when one small node is left, else settles
    /// the nodes at the compression boundaries.
    fn settle_ends(&mut self) {
        let Repr::Nodes(nodes) = &mut self.repr else {
            return;
        };
        if nodes.nodes.len() <= 1 {
            self.settle();
        } else {
            nodes.settle_ends();
        }
    }

    /// Removes node `k`, which must be empty (a single pack just stays, empty).
    fn remove_empty_node(&mut self, k: usize) {
        if let Repr::Nodes(nodes) = &mut self.repr {
            debug_assert!(nodes.nodes[k].count() == 0);
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
                let tail = tail.pack_mut();
                let at = tail.data_len();
                tail.insert_one(at, elem);
                nodes.tail.pushed(at);
                return;
            }
        }
        let mut node = Pack::new();
        node.insert_one(0, elem);
        nodes.nodes.push_back(Node::Plain(node));
        nodes.tail.forget();
        nodes.settle_ends();
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
                head.pack_mut().insert_one(0, elem);
                return;
            }
        }
        let mut node = Pack::new();
        node.insert_one(0, elem);
        nodes.nodes.push_front(Node::Plain(node));
        nodes.settle_ends();
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
            self.settle_ends();
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
                let node = nodes.nodes.back_mut()?.pack_mut();
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
            self.settle_ends();
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
                if rest < node.count() {
                    return (k, rest);
                }
                rest -= node.count();
            }
        } else {
            // Counting from the tail: the element is `from_tail` (1-based) from the end.
            let mut from_tail = nodes.len - index;
            for (k, node) in nodes.nodes.iter().enumerate().rev() {
                if from_tail <= node.count() {
                    return (k, node.count() - from_tail);
                }
                from_tail -= node.count();
            }
        }
        unreachable!("the cached length covers every node")
    }

    /// Calls `f` with the element at `index` from the head; `None` when out of range.
    pub fn get_with<R>(&self, index: usize, f: impl FnOnce(Elem<'_>) -> R) -> Option<R> {
        if index >= self.len() {
            return None;
        }
        let (k, i) = self.locate(index);
        self.with_node(k, |pack| pack.get(i).map(f))
    }

    /// The element at `index` from the head, as bytes.
    pub fn get(&self, index: usize) -> Option<Vec<u8>> {
        self.get_with(index, |elem| elem.to_vec())
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
    /// with a neighbour when the two fit in one node; then settles compression.
    fn repair(&mut self, k: usize, limit: NodeLimit) {
        let fits = limit.fits(&*self.node_mut(k));
        if !fits {
            let nodes = self.make_nodes();
            let node = nodes.nodes.remove(k).expect("node in range").into_pack();
            let mut pieces = Vec::new();
            split_to_fit(node, limit, &mut pieces);
            for (j, piece) in pieces.into_iter().enumerate() {
                nodes.nodes.insert(k + j, Node::Plain(piece));
            }
            nodes.settle_all();
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
        if k > 0 && limit.allows(&nodes[k - 1], nodes[k].data_bytes(), nodes[k].count()) {
            let node = nodes.remove(k).expect("node in range").into_pack();
            nodes[k - 1].pack_mut().append(&node);
        } else if k + 1 < nodes.len()
            && limit.allows(&nodes[k], nodes[k + 1].data_bytes(), nodes[k + 1].count())
        {
            let next = nodes.remove(k + 1).expect("node in range").into_pack();
            nodes[k].pack_mut().append(&next);
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
                if limit.allows(&nodes[k], nodes[k + 1].data_bytes(), nodes[k + 1].count()) {
                    let next = nodes.remove(k + 1).expect("node in range").into_pack();
                    nodes[k].pack_mut().append(&next);
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
            let mut matches = 0;
            self.scan(0, |e| {
                matches += usize::from(matcher.matches(e));
                true
            });
            let remove = limit_count.min(matches);
            (matches - remove, remove)
        } else {
            (0, limit_count)
        };
        let mut removed_total = 0;
        let mut k = 0;
        while k < self.node_count() && remove > 0 {
            // A node without a match is left as it is (a compressed one stays so).
            let mut matches = 0;
            self.with_node(k, |pack| {
                pack.for_each_from(0, |e| {
                    matches += usize::from(matcher.matches(e));
                    true
                });
            });
            if matches <= skip {
                skip -= matches;
                k += 1;
                continue;
            }
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
            if self.node_len(k) == 0 && self.node_count() > 1 {
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
            let node_len = self.node_len(k);
            if node_len <= drop_back && self.node_count() > 1 {
                if let Repr::Nodes(nodes) = &mut self.repr {
                    nodes.nodes.pop_back();
                }
                self.adjust_len(0, node_len);
                drop_back -= node_len;
            } else {
                let node = self.node_mut(k);
                let keep = node_len - drop_back;
                let at = node.offset_of(keep);
                node.remove_range(at, node.data_len(), drop_back);
                self.adjust_len(0, drop_back);
                drop_back = 0;
            }
        }
        let mut drop_front = first;
        while drop_front > 0 {
            let node_len = self.node_len(0);
            if node_len <= drop_front && self.node_count() > 1 {
                if let Repr::Nodes(nodes) = &mut self.repr {
                    nodes.nodes.pop_front();
                }
                self.adjust_len(0, node_len);
                drop_front -= node_len;
            } else {
                let node = self.node_mut(0);
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
        let before = nodes.nodes.len();
        if limit.fits(&pack) {
            nodes.nodes.push_back(Node::Plain(pack));
        } else {
            let mut pieces = Vec::new();
            split_to_fit(pack, limit, &mut pieces);
            nodes.nodes.extend(pieces.into_iter().map(Node::Plain));
        }
        // Only the new nodes and the old ones now `depth` from the tail can be out of
        // place (a load appends node after node: settling all would be quadratic).
        for k in before.saturating_sub(nodes.depth)..nodes.nodes.len() {
            nodes.settle_node(k);
        }
        self.settle_small();
    }

    /// Calls `f` with the elements from `index` on, towards the tail, while it returns
    /// true.
    pub fn scan(&self, index: usize, mut f: impl FnMut(Elem<'_>) -> bool) {
        if index >= self.len() {
            return;
        }
        let (mut k, i) = self.locate(index);
        let mut offset = self.with_node(k, |pack| pack.offset_of(i));
        loop {
            let mut stopped = false;
            self.with_node(k, |pack| {
                pack.for_each_from(offset, |elem| {
                    stopped = !f(elem);
                    !stopped
                });
            });
            offset = 0;
            k += 1;
            if stopped || k >= self.node_count() {
                return;
            }
        }
    }

    /// Calls `f` with the elements from the tail towards the head while it returns true.
    pub fn scan_rev(&self, mut f: impl FnMut(Elem<'_>) -> bool) {
        if self.is_empty() {
            return;
        }
        let mut offsets = Vec::new();
        for k in (0..self.node_count()).rev() {
            let stopped = self.with_node(k, |pack| {
                offsets.clear();
                offsets.extend(pack.iter_offsets().map(|(at, _)| at));
                offsets.iter().rev().any(|&at| !f(pack.at(at).0))
            });
            if stopped {
                return;
            }
        }
    }

    /// Calls `f` with `count` elements from `first` on (LRANGE's loop).
    pub fn for_each_in(&self, first: usize, count: usize, mut f: impl FnMut(Elem<'_>)) {
        let mut remaining = count;
        if remaining == 0 {
            return;
        }
        self.scan(first, |elem| {
            f(elem);
            remaining -= 1;
            remaining > 0
        });
    }

    /// Every element as bytes, from the head.
    pub fn to_vecs(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::with_capacity(self.len());
        self.scan(0, |elem| {
            out.push(elem.to_vec());
            true
        });
        out
    }
}

/// The `list-compress-depth` a list that becomes nodes takes (tests set their own per
/// thread: the config is process-wide).
fn depth_in_force() -> usize {
    #[cfg(test)]
    if let Some(depth) = TEST_DEPTH.with(|d| d.get()) {
        return depth;
    }
    compact::list_compress_depth()
}

#[cfg(test)]
thread_local! {
    static TEST_DEPTH: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
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

/// Lists are equal when they hold the same elements, however they are split in nodes
/// (a pack stores each string one way, so equal strings read back as equal bytes).
impl PartialEq for List {
    fn eq(&self, other: &List) -> bool {
        self.len() == other.len() && self.to_vecs() == other.to_vecs()
    }
}

impl Eq for List {}

impl fmt::Debug for List {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let items = self.to_vecs();
        f.debug_list()
            .entries(items.iter().map(|item| String::from_utf8_lossy(item)))
            .finish()
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
