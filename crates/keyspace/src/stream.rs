//! The stream value: entries ordered by ID, consumer groups with their pending entries.
//!
//! Redis keeps a stream's entries in listpacks ("nodes") hanging off a radix tree. Several
//! observable behaviours follow from that layout: approximate trimming (`MAXLEN ~`) only
//! drops whole nodes, `LIMIT` counts whole nodes, and `XINFO STREAM` reports the node count.
//! So next to the entries themselves this keeps a model of the nodes (where each starts, how
//! many live and deleted entries it holds, roughly how many bytes its listpack takes) that
//! splits exactly where Redis' would.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;

use crate::value::parse_i64_strict;

/// A stream entry ID: milliseconds and a sequence number, ordered as a pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The ID right after this one; `None` for the last possible ID.
    pub fn next(self) -> Option<StreamId> {
        if self.seq < u64::MAX {
            Some(StreamId::new(self.ms, self.seq + 1))
        } else if self.ms < u64::MAX {
            Some(StreamId::new(self.ms + 1, 0))
        } else {
            None
        }
    }

    /// The ID right before this one; `None` for 0-0.
    pub fn prev(self) -> Option<StreamId> {
        if self.seq > 0 {
            Some(StreamId::new(self.ms, self.seq - 1))
        } else if self.ms > 0 {
            Some(StreamId::new(self.ms - 1, u64::MAX))
        } else {
            None
        }
    }

    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }

    /// The 16-byte big-endian form Redis uses as radix tree key.
    fn key_bytes(self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.ms.to_be_bytes());
        out[8..].copy_from_slice(&self.seq.to_be_bytes());
        out
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// An entry's fields and values, flat: field, value, field, value...
pub type Fields = Vec<Vec<u8>>;

/// How XADD chooses the new entry's ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NewId {
    /// `*`: from the clock, never below the last ID.
    Auto,
    /// `<ms>-*`: the given milliseconds, the sequence picked.
    Ms(u64),
    /// A full ID.
    Exact(StreamId),
}

/// Why an entry could not be added.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddError {
    /// The ID is not above the stream's last ID.
    NotAbove,
    /// `<ms>-*` where the last ID already has that ms and the largest sequence.
    SequenceExhausted,
    /// The fields and values together are bigger than one node may hold.
    TooLarge,
}

/// Where Redis splits nodes (`stream-node-max-entries`, `stream-node-max-bytes`; 0 means
/// no limit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeLimits {
    pub max_entries: u64,
    pub max_bytes: u64,
}

/// What to trim to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrimTo {
    /// Keep at most this many entries.
    MaxLen(u64),
    /// Drop entries below this ID.
    MinId(StreamId),
}

/// A trimming request: the target, whether whole nodes only (`~`), and the most entries
/// it may remove (0: no limit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trim {
    pub to: TrimTo,
    pub approx: bool,
    pub limit: u64,
}

/// One delivered but not yet acknowledged entry of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The consumer it was last delivered to.
    pub consumer: Vec<u8>,
    /// Unix time in milliseconds of the last delivery.
    pub delivery_ms: i64,
    pub deliveries: u64,
}

/// A consumer of a group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Consumer {
    /// Unix time in milliseconds the consumer was last seen (read or claimed).
    pub seen_ms: i64,
    /// Its pending entries (details in the group's list).
    pub pending: BTreeSet<StreamId>,
}

/// A consumer group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Group {
    /// The last ID delivered to any consumer of the group.
    pub last_id: StreamId,
    /// How many entries the group has read, when known.
    pub entries_read: Option<i64>,
    pub pending: BTreeMap<StreamId, Pending>,
    pub consumers: BTreeMap<Vec<u8>, Consumer>,
}

impl Group {
    pub fn new(last_id: StreamId, entries_read: Option<i64>) -> Group {
        Group {
            last_id,
            entries_read,
            ..Group::default()
        }
    }

    /// Looks a consumer up, creating it when missing; refreshes its seen time. Returns
    /// whether it was created.
    pub fn touch_consumer(&mut self, name: &[u8], now_ms: i64) -> bool {
        match self.consumers.get_mut(name) {
            Some(consumer) => {
                consumer.seen_ms = now_ms;
                false
            }
            None => {
                self.consumers.insert(
                    name.to_vec(),
                    Consumer {
                        seen_ms: now_ms,
                        pending: BTreeSet::new(),
                    },
                );
                true
            }
        }
    }

    /// Creates a consumer unless it exists (XGROUP CREATECONSUMER); whether it was created.
    pub fn create_consumer(&mut self, name: &[u8], now_ms: i64) -> bool {
        if self.consumers.contains_key(name) {
            return false;
        }
        self.touch_consumer(name, now_ms)
    }

    /// Removes a consumer and its pending entries; how many it had, `None` if unknown.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let consumer = self.consumers.remove(name)?;
        for id in &consumer.pending {
            self.pending.remove(id);
        }
        Some(consumer.pending.len())
    }

    /// Acknowledges one entry; whether it was pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        match self.pending.remove(&id) {
            Some(entry) => {
                if let Some(consumer) = self.consumers.get_mut(&entry.consumer) {
                    consumer.pending.remove(&id);
                }
                true
            }
            None => false,
        }
    }

    /// Records a first delivery to `consumer` (which must exist): a new pending entry, or
    /// an existing one handed over with its counter reset.
    pub fn deliver(&mut self, id: StreamId, consumer: &[u8], now_ms: i64) {
        if let Some(old) = self.pending.get(&id).map(|p| p.consumer.clone()) {
            if let Some(previous) = self.consumers.get_mut(&old) {
                previous.pending.remove(&id);
            }
        }
        self.pending.insert(
            id,
            Pending {
                consumer: consumer.to_vec(),
                delivery_ms: now_ms,
                deliveries: 1,
            },
        );
        if let Some(owner) = self.consumers.get_mut(consumer) {
            owner.pending.insert(id);
        }
    }

    /// Moves a pending entry to `consumer` (which must exist); the caller then updates the
    /// returned entry's time and counter.
    pub fn transfer(&mut self, id: StreamId, consumer: &[u8]) -> Option<&mut Pending> {
        let old = self.pending.get(&id)?.consumer.clone();
        if old != consumer {
            if let Some(previous) = self.consumers.get_mut(&old) {
                previous.pending.remove(&id);
            }
            if let Some(owner) = self.consumers.get_mut(consumer) {
                owner.pending.insert(id);
            }
        }
        let entry = self.pending.get_mut(&id)?;
        entry.consumer = consumer.to_vec();
        Some(entry)
    }

    /// Creates a pending entry for `consumer` (which must exist), for XCLAIM FORCE.
    pub fn insert_pending(&mut self, id: StreamId, consumer: &[u8], entry: Pending) {
        if let Some(owner) = self.consumers.get_mut(consumer) {
            owner.pending.insert(id);
        }
        self.pending.insert(id, entry);
    }

    fn heap_bytes(&self) -> usize {
        let pending: usize = self
            .pending
            .values()
            .map(|p| p.consumer.capacity() + 64)
            .sum();
        let consumers: usize = self
            .consumers
            .iter()
            .map(|(name, c)| name.capacity() + 64 + c.pending.len() * 24)
            .sum();
        pending + consumers + 64
    }
}

/// Redis' model of one listpack: where it starts, how many entries it holds, its fields
/// "master entry" (entries with the same fields are stored more compactly).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Node {
    live: u64,
    deleted: u64,
    master_fields: Vec<Vec<u8>>,
    /// Bytes of the entries after the master entry.
    entry_bytes: usize,
    /// The last ID appended, tombstones included.
    last_id: StreamId,
}

/// A listpack's header and end marker.
const LP_OVERHEAD: usize = 7;
/// Redis refuses nodes (and entries) past this size.
const LISTPACK_MAX_SIZE: u64 = 1 << 30;

/// Bytes of a listpack entry's trailing length for an encoding of `len` bytes.
fn lp_backlen(len: usize) -> usize {
    match len {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

fn lp_int(value: i64) -> usize {
    let encoded = if (0..=127).contains(&value) {
        1
    } else if (-4096..=4095).contains(&value) {
        2
    } else if i16::try_from(value).is_ok() {
        3
    } else if (-8_388_608..=8_388_607).contains(&value) {
        4
    } else if i32::try_from(value).is_ok() {
        5
    } else {
        9
    };
    encoded + lp_backlen(encoded)
}

/// Listpacks store strings that read as integers as integers.
fn lp_str(text: &[u8]) -> usize {
    if text.len() <= 20 {
        if let Some(value) = parse_i64_strict(text) {
            return lp_int(value);
        }
    }
    let encoded = match text.len() {
        0..=63 => 1 + text.len(),
        64..=4095 => 2 + text.len(),
        n => 5 + n,
    };
    encoded + lp_backlen(encoded)
}

impl Node {
    fn new(id: StreamId, fields: &Fields) -> Node {
        Node {
            live: 0,
            deleted: 0,
            master_fields: fields.iter().step_by(2).cloned().collect(),
            entry_bytes: 0,
            last_id: id,
        }
    }

    fn bytes(&self) -> usize {
        let master = lp_int(self.live as i64)
            + lp_int(self.deleted as i64)
            + lp_int(self.master_fields.len() as i64)
            + self.master_fields.iter().map(|f| lp_str(f)).sum::<usize>()
            + lp_int(0);
        LP_OVERHEAD + master + self.entry_bytes
    }

    fn same_fields(&self, fields: &Fields) -> bool {
        fields.len() == self.master_fields.len() * 2
            && fields
                .iter()
                .step_by(2)
                .zip(&self.master_fields)
                .all(|(a, b)| a == b)
    }

    /// Accounts for one appended entry.
    fn append(&mut self, master_id: StreamId, id: StreamId, fields: &Fields) {
        let same = self.same_fields(fields);
        let pairs = fields.len() / 2;
        let mut bytes = lp_int(if same { 2 } else { 0 })
            + lp_int(id.ms.wrapping_sub(master_id.ms) as i64)
            + lp_int(id.seq.wrapping_sub(master_id.seq) as i64);
        let mut pieces = pairs as i64 + 3;
        if same {
            bytes += fields
                .iter()
                .skip(1)
                .step_by(2)
                .map(|v| lp_str(v))
                .sum::<usize>();
        } else {
            bytes += lp_int(pairs as i64) + fields.iter().map(|f| lp_str(f)).sum::<usize>();
            pieces += pairs as i64 + 1;
        }
        bytes += lp_int(pieces);
        self.entry_bytes += bytes;
        self.live += 1;
        self.last_id = id;
    }
}

/// A stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stream {
    entries: BTreeMap<StreamId, Fields>,
    /// Nodes by the ID of their first entry.
    nodes: BTreeMap<StreamId, Node>,
    /// The largest ID ever added (or set by XSETID).
    pub last_id: StreamId,
    /// The first live entry's ID as last recorded (0-0 when empty).
    pub first_id: StreamId,
    /// The largest ID ever deleted by XDEL.
    pub max_deleted_id: StreamId,
    /// Entries ever added.
    pub entries_added: u64,
    pub groups: BTreeMap<Vec<u8>, Group>,
}

impl Stream {
    pub fn new() -> Stream {
        Stream::default()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Number of nodes (Redis' `radix-tree-keys`).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Number of radix tree nodes Redis would use to index the nodes
    /// (`radix-tree-nodes`): the root, every branching point, every child of one, and every
    /// key; chains without branches are compressed into one node.
    pub fn radix_tree_nodes(&self) -> usize {
        let keys: Vec<[u8; 16]> = self.nodes.keys().map(|id| id.key_bytes()).collect();
        let mut prefixes: HashSet<&[u8]> = HashSet::new();
        prefixes.insert(&[]);
        for key in &keys {
            prefixes.insert(&key[..]);
        }
        for pair in keys.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            let common = a.iter().zip(b.iter()).take_while(|(x, y)| x == y).count();
            if common < 16 {
                prefixes.insert(&a[..common]);
                prefixes.insert(&a[..common + 1]);
                prefixes.insert(&b[..common + 1]);
            }
        }
        prefixes.len()
    }

    pub fn get(&self, id: &StreamId) -> Option<&Fields> {
        self.entries.get(id)
    }

    pub fn contains(&self, id: &StreamId) -> bool {
        self.entries.contains_key(id)
    }

    /// Entries with IDs in `start..=end`, ascending (reverse it for XREVRANGE); empty when
    /// `start > end`.
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
    ) -> std::collections::btree_map::Range<'_, StreamId, Fields> {
        if start > end {
            // BTreeMap::range refuses an inverted range; this one is empty.
            return self.entries.range(StreamId::MAX..StreamId::MAX);
        }
        self.entries.range(start..=end)
    }

    /// The first and last live entries.
    pub fn first_entry(&self) -> Option<(&StreamId, &Fields)> {
        self.entries.iter().next()
    }

    pub fn last_entry(&self) -> Option<(&StreamId, &Fields)> {
        self.entries.iter().next_back()
    }

    /// The last live entry's ID.
    pub fn last_live_id(&self) -> Option<StreamId> {
        self.entries.keys().next_back().copied()
    }

    /// Adds an entry (Redis' `streamAppendItem`); `now_ms` is the clock for `*` IDs.
    pub fn add(
        &mut self,
        new_id: NewId,
        fields: Fields,
        now_ms: u64,
        limits: NodeLimits,
    ) -> Result<StreamId, AddError> {
        let id = match new_id {
            NewId::Exact(id) => id,
            NewId::Ms(ms) => {
                if self.last_id.ms == ms {
                    if self.last_id.seq == u64::MAX {
                        return Err(AddError::SequenceExhausted);
                    }
                    StreamId::new(ms, self.last_id.seq + 1)
                } else {
                    StreamId::new(ms, 0)
                }
            }
            NewId::Auto => {
                if now_ms > self.last_id.ms {
                    StreamId::new(now_ms, 0)
                } else {
                    self.last_id.next().unwrap_or(StreamId::MIN)
                }
            }
        };
        if id <= self.last_id {
            return Err(AddError::NotAbove);
        }
        let total: u64 = fields.iter().map(|f| f.len() as u64).sum();
        if total > LISTPACK_MAX_SIZE {
            return Err(AddError::TooLarge);
        }
        let max_bytes = if limits.max_bytes == 0 || limits.max_bytes > LISTPACK_MAX_SIZE {
            LISTPACK_MAX_SIZE
        } else {
            limits.max_bytes
        };
        let tail_full = match self.nodes.values().next_back() {
            None => true,
            Some(tail) => {
                tail.bytes() as u64 + total >= max_bytes
                    || (limits.max_entries > 0 && tail.live + tail.deleted >= limits.max_entries)
            }
        };
        if tail_full {
            self.nodes.insert(id, Node::new(id, &fields));
        }
        if let Some((master_id, tail)) = self.nodes.iter_mut().next_back() {
            tail.append(*master_id, id, &fields);
        }
        self.entries.insert(id, fields);
        // A RESTOREd or loaded stream may carry any count (Redis does not check it): it
        // wraps, as Redis' does.
        self.entries_added = self.entries_added.wrapping_add(1);
        self.last_id = id;
        if self.entries.len() == 1 {
            self.first_id = id;
        }
        Ok(id)
    }

    /// Removes one live entry from its node (dropping the node when it was its last live
    /// entry); whether it existed. Leaves first/max-deleted IDs to the caller.
    fn remove_entry(&mut self, id: StreamId) -> bool {
        if self.entries.remove(&id).is_none() {
            return false;
        }
        let node_key = self.nodes.range(..=id).next_back().map(|(k, _)| *k);
        if let Some(key) = node_key {
            let drop_node = match self.nodes.get_mut(&key) {
                Some(node) if node.live <= 1 => true,
                Some(node) => {
                    node.live -= 1;
                    node.deleted += 1;
                    false
                }
                None => false,
            };
            if drop_node {
                self.nodes.remove(&key);
            }
        }
        true
    }

    /// XDEL: deletes the given IDs, returns how many existed.
    pub fn delete(&mut self, ids: &[StreamId]) -> u64 {
        let mut deleted = 0;
        let mut first_deleted = false;
        for &id in ids {
            if self.remove_entry(id) {
                if id == self.first_id {
                    first_deleted = true;
                }
                if id > self.max_deleted_id {
                    self.max_deleted_id = id;
                }
                deleted += 1;
            }
        }
        if deleted > 0 {
            if self.entries.is_empty() {
                self.first_id = StreamId::MIN;
            } else if first_deleted {
                self.first_id = self.first_live_id();
            }
        }
        deleted
    }

    fn first_live_id(&self) -> StreamId {
        self.entries.keys().next().copied().unwrap_or(StreamId::MIN)
    }

    /// Trims the stream as Redis' `streamTrim` does; returns how many entries went.
    pub fn trim(&mut self, trim: Trim) -> u64 {
        let mut deleted: u64 = 0;
        loop {
            if let TrimTo::MaxLen(max) = trim.to {
                if self.entries.len() as u64 <= max {
                    break;
                }
            }
            let Some((&master_id, node)) = self.nodes.iter().next() else {
                break;
            };
            let live = node.live;
            if trim.limit > 0 && deleted + live > trim.limit {
                break;
            }
            let whole = match trim.to {
                TrimTo::MaxLen(max) => (self.entries.len() as u64).saturating_sub(live) >= max,
                TrimTo::MinId(min) => node.last_id < min,
            };
            if whole {
                let node_last = node.last_id;
                self.nodes.remove(&master_id);
                while let Some(entry) = self.entries.first_entry() {
                    if *entry.key() > node_last {
                        break;
                    }
                    entry.remove();
                }
                deleted += live;
                continue;
            }
            if trim.approx {
                break;
            }
            // Part of this node: its entries from the front until the target is met.
            let mut removed = 0;
            while let Some(first) = self.entries.keys().next().copied() {
                let stop = match trim.to {
                    TrimTo::MaxLen(max) => self.entries.len() as u64 <= max,
                    TrimTo::MinId(min) => first >= min,
                };
                if stop || first > node.last_id {
                    break;
                }
                self.entries.remove(&first);
                removed += 1;
            }
            if let Some(node) = self.nodes.get_mut(&master_id) {
                node.live = node.live.saturating_sub(removed);
                node.deleted += removed;
            }
            deleted += removed;
            break;
        }
        if self.entries.is_empty() {
            self.first_id = StreamId::MIN;
        } else if deleted > 0 {
            self.first_id = self.first_live_id();
        }
        deleted
    }

    /// Whether a tombstone may lie in `start..=end` (Redis' `streamRangeHasTombstones`).
    pub fn range_has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        if self.entries.is_empty() || self.max_deleted_id.is_zero() {
            return false;
        }
        if self.first_id > self.max_deleted_id {
            return false;
        }
        start <= self.max_deleted_id && self.max_deleted_id <= end
    }

    /// How many entries came before and including `id` since the stream began, when that
    /// can be known (Redis' `streamEstimateDistanceFromFirstEverEntry`).
    pub fn entries_read_at(&self, id: StreamId) -> Option<i64> {
        let added = self.entries_added as i64;
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.entries.is_empty() && id <= self.last_id {
            return Some(added);
        }
        match id.cmp(&self.last_id) {
            std::cmp::Ordering::Equal => return Some(added),
            std::cmp::Ordering::Greater => return None,
            std::cmp::Ordering::Less => {}
        }
        if self.max_deleted_id.is_zero() || self.max_deleted_id < self.first_id {
            let length = self.entries.len() as i64;
            match id.cmp(&self.first_id) {
                // `added` comes from the stream's metadata (a payload may hold any
                // value): the difference wraps, as Redis' signed arithmetic does.
                std::cmp::Ordering::Less => return Some(added.wrapping_sub(length)),
                std::cmp::Ordering::Equal => {
                    return Some(added.wrapping_sub(length).wrapping_add(1))
                }
                std::cmp::Ordering::Greater => {}
            }
        }
        None
    }

    /// A group's lag (entries not yet delivered), when it can be known.
    pub fn lag(&self, group: &Group) -> Option<i64> {
        let added = self.entries_added as i64;
        if self.entries_added == 0 {
            return Some(0);
        }
        if let Some(read) = group.entries_read {
            if !self.range_has_tombstones(group.last_id, StreamId::MAX) {
                return Some(added.wrapping_sub(read));
            }
        }
        self.entries_read_at(group.last_id)
            .map(|read| added.wrapping_sub(read))
    }

    /// Delivers new entries (XREADGROUP `>`): up to `count` (0: all) entries after the
    /// group's last ID go to `consumer` (which must exist), pending unless `noack`. Returns
    /// their IDs; `None` when there is no such group.
    pub fn deliver_new(
        &mut self,
        group_name: &[u8],
        consumer: &[u8],
        count: usize,
        noack: bool,
        now_ms: i64,
    ) -> Option<Vec<StreamId>> {
        let start = self.groups.get(group_name)?.last_id.next();
        let Some(start) = start else {
            return Some(Vec::new());
        };
        let limit = if count == 0 { usize::MAX } else { count };
        let ids: Vec<StreamId> = self
            .range(start, StreamId::MAX)
            .take(limit)
            .map(|(id, _)| *id)
            .collect();
        for &id in &ids {
            let group = self.groups.get(group_name)?;
            let (entries_read, last_id) = (group.entries_read, group.last_id);
            if id > last_id {
                let read = match entries_read {
                    Some(read) if !self.range_has_tombstones(id, StreamId::MAX) => {
                        Some(read.wrapping_add(1))
                    }
                    _ if self.entries_added != 0 => self.entries_read_at(id),
                    other => other,
                };
                let group = self.groups.get_mut(group_name)?;
                group.entries_read = read;
                group.last_id = id;
            }
            if !noack {
                self.groups
                    .get_mut(group_name)?
                    .deliver(id, consumer, now_ms);
            }
        }
        Some(ids)
    }

    /// Heap bytes, roughly (for MEMORY USAGE): the listpacks plus the groups.
    pub fn heap_bytes(&self) -> usize {
        let nodes: usize = self.nodes.values().map(|n| n.bytes() + 48).sum();
        let groups: usize = self
            .groups
            .iter()
            .map(|(name, g)| name.capacity() + g.heap_bytes())
            .sum();
        nodes + groups
    }
}

/// One node as a snapshot (RDB) stores it: its key, which is also the master entry's ID
/// that its entries' IDs are stored relative to, the master entry's field names, and the
/// live entries it holds.
pub struct NodeSnapshot<'a> {
    pub master_id: StreamId,
    pub master_fields: &'a [Vec<u8>],
    pub entries: std::collections::btree_map::Range<'a, StreamId, Fields>,
}

/// Persistence: walking the nodes, and rebuilding a stream node by node.
impl Stream {
    /// The nodes in ID order, each with the live entries it holds.
    pub fn snapshot_nodes(&self) -> impl Iterator<Item = NodeSnapshot<'_>> + '_ {
        let mut nodes = self.nodes.iter().peekable();
        std::iter::from_fn(move || {
            let (&master_id, node) = nodes.next()?;
            // Node keys are strictly ascending, so the range is never inverted.
            let entries = match nodes.peek() {
                Some((&next, _)) => self.entries.range(master_id..next),
                None => self.entries.range(master_id..),
            };
            Some(NodeSnapshot {
                master_id,
                master_fields: &node.master_fields,
                entries,
            })
        })
    }

    /// Appends a node as a snapshot stored it: `master_id` is its key, `master_fields` its
    /// master entry's field names, and `entries` its entries in ID order, each flagged when
    /// it is a tombstone (a deleted entry still taking its place in the node). The live
    /// entries join the stream; `last_id`, `first_id`, `max_deleted_id` and
    /// `entries_added` are left to the caller. A node without live entries adds nothing.
    ///
    /// Returns false, changing nothing, unless the IDs ascend strictly, start at or above
    /// `master_id`, and `master_id` lies above everything already in the stream.
    pub fn push_snapshot_node(
        &mut self,
        master_id: StreamId,
        master_fields: Vec<Vec<u8>>,
        entries: Vec<(StreamId, Fields, bool)>,
    ) -> bool {
        if let Some((&key, node)) = self.nodes.iter().next_back() {
            if master_id <= key || master_id <= node.last_id {
                return false;
            }
        }
        if self
            .entries
            .keys()
            .next_back()
            .is_some_and(|&last| master_id <= last)
        {
            return false;
        }
        let mut previous: Option<StreamId> = None;
        for (id, _, _) in &entries {
            if *id < master_id || previous.is_some_and(|p| *id <= p) {
                return false;
            }
            previous = Some(*id);
        }
        let mut node = Node {
            live: 0,
            deleted: 0,
            master_fields,
            entry_bytes: 0,
            last_id: master_id,
        };
        for (id, fields, deleted) in entries {
            node.append(master_id, id, &fields);
            if deleted {
                node.live -= 1;
                node.deleted += 1;
            } else {
                self.entries.insert(id, fields);
            }
        }
        if node.live > 0 {
            self.nodes.insert(master_id, node);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: NodeLimits = NodeLimits {
        max_entries: 100,
        max_bytes: 4096,
    };

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        pairs
            .iter()
            .flat_map(|(f, v)| [f.as_bytes().to_vec(), v.as_bytes().to_vec()])
            .collect()
    }

    #[test]
    fn ids_step_and_wrap() {
        assert_eq!(StreamId::new(1, u64::MAX).next(), Some(StreamId::new(2, 0)));
        assert_eq!(StreamId::MAX.next(), None);
        assert_eq!(StreamId::new(2, 0).prev(), Some(StreamId::new(1, u64::MAX)));
        assert_eq!(StreamId::MIN.prev(), None);
        assert_eq!(StreamId::new(5, 7).to_string(), "5-7");
    }

    #[test]
    fn add_and_node_splits() {
        let mut s = Stream::new();
        for i in 0..1000u64 {
            let f = fields(&[("item", &i.to_string())]);
            s.add(NewId::Exact(StreamId::new(i + 1, 0)), f, 0, LIMITS)
                .unwrap();
        }
        assert_eq!(s.len(), 1000);
        assert_eq!(s.node_count(), 10);
        let removed = s.trim(Trim {
            to: TrimTo::MaxLen(555),
            approx: true,
            limit: 10_000,
        });
        assert_eq!(removed, 400);
        assert_eq!(s.len(), 600);
        assert_eq!(s.first_id, StreamId::new(401, 0));
        let removed = s.trim(Trim {
            to: TrimTo::MaxLen(555),
            approx: false,
            limit: 0,
        });
        assert_eq!(removed, 45);
        assert_eq!(s.first_id, StreamId::new(446, 0));
    }

    #[test]
    fn delete_and_tombstones() {
        let mut s = Stream::new();
        for i in 1..=5u64 {
            s.add(
                NewId::Exact(StreamId::new(i, 0)),
                fields(&[("f", "v")]),
                0,
                LIMITS,
            )
            .unwrap();
        }
        assert_eq!(s.delete(&[StreamId::new(2, 0), StreamId::new(9, 0)]), 1);
        assert_eq!(s.first_id, StreamId::new(1, 0));
        assert_eq!(s.delete(&[StreamId::new(1, 0)]), 1);
        assert_eq!(s.first_id, StreamId::new(3, 0));
        assert_eq!(s.max_deleted_id, StreamId::new(2, 0));
        // Every tombstone lies before the first entry: the counters stay exact.
        assert!(!s.range_has_tombstones(StreamId::MIN, StreamId::MAX));
        assert_eq!(s.entries_read_at(StreamId::new(3, 0)), Some(3));
        assert_eq!(s.delete(&[StreamId::new(4, 0)]), 1);
        assert!(s.range_has_tombstones(StreamId::MIN, StreamId::MAX));
        assert_eq!(s.entries_read_at(StreamId::new(5, 0)), Some(5));
        assert_eq!(s.entries_read_at(StreamId::new(3, 0)), None);
        assert_eq!(s.delete(&[StreamId::new(3, 0), StreamId::new(5, 0)]), 2);
        assert_eq!(s.node_count(), 0);
        assert_eq!(s.first_id, StreamId::MIN);
    }

    #[test]
    fn auto_ids() {
        let mut s = Stream::new();
        let a = s
            .add(NewId::Auto, fields(&[("a", "1")]), 100, LIMITS)
            .unwrap();
        let b = s
            .add(NewId::Auto, fields(&[("a", "1")]), 100, LIMITS)
            .unwrap();
        let c = s
            .add(NewId::Ms(100), fields(&[("a", "1")]), 0, LIMITS)
            .unwrap();
        assert_eq!(
            (a, b, c),
            (
                StreamId::new(100, 0),
                StreamId::new(100, 1),
                StreamId::new(100, 2)
            )
        );
        assert_eq!(
            s.add(NewId::Ms(50), fields(&[("a", "1")]), 0, LIMITS),
            Err(AddError::NotAbove)
        );
    }

    #[test]
    fn snapshot_nodes_rebuild_the_same_stream() {
        let mut s = Stream::new();
        for i in 1..=250u64 {
            let f = if i % 7 == 0 {
                fields(&[("other", "x")])
            } else {
                fields(&[("item", &i.to_string())])
            };
            s.add(NewId::Exact(StreamId::new(i, 0)), f, 0, LIMITS)
                .unwrap();
        }
        let mut copy = Stream::new();
        for node in s.snapshot_nodes() {
            let entries = node
                .entries
                .map(|(id, f)| (*id, f.clone(), false))
                .collect();
            assert!(copy.push_snapshot_node(node.master_id, node.master_fields.to_vec(), entries));
        }
        copy.last_id = s.last_id;
        copy.first_id = s.first_id;
        copy.entries_added = s.entries_added;
        assert_eq!(copy, s);
        assert_eq!(copy.node_count(), 3);
        // Out of order nodes are refused.
        assert!(!copy.push_snapshot_node(StreamId::new(5, 0), vec![], vec![]));
        let entries = vec![(StreamId::new(1000, 0), fields(&[("a", "1")]), true)];
        assert!(copy.push_snapshot_node(StreamId::new(1000, 0), vec![], entries));
        assert_eq!(copy.node_count(), 3);
    }

    #[test]
    fn radix_nodes() {
        let mut s = Stream::new();
        assert_eq!(s.radix_tree_nodes(), 1);
        s.add(
            NewId::Exact(StreamId::new(1, 0)),
            fields(&[("a", "1")]),
            0,
            LIMITS,
        )
        .unwrap();
        assert_eq!(s.radix_tree_nodes(), 2);
    }
}
