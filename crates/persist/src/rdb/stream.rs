//! Streams in RDB form (types 15, 19 and 21).
//!
//! A stream is stored as its nodes, each a 16-byte big-endian master ID and a listpack,
//! then the metadata (length, last ID, first ID, largest deleted ID, entries ever added),
//! then the consumer groups: name, last delivered ID, entries read, the pending entries
//! with their delivery time and count, and the consumers with their seen time and the IDs
//! of their pending entries.
//!
//! A node's listpack starts with a "master entry": live count, deleted count, the field
//! names of the node's first entry, and a 0. Each entry follows as flags, the ID as a
//! difference from the master ID, then either just the values (when its field names equal
//! the master's, flag SAMEFIELDS) or the field count and field/value pairs, and finally
//! the number of listpack elements the entry took, so the node can be walked backwards.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

use latch_keyspace::stream::{Consumer, Fields, Group, Pending, StreamId};
use latch_keyspace::Stream;

use super::decode::Input;
use super::encode::{put_len, put_millis, put_string, Sink};
use super::listpack::{self, Element};
use super::{types, RdbError};

const FLAG_DELETED: i64 = 1;
const FLAG_SAMEFIELDS: i64 = 2;
/// Redis' default `stream-node-max-entries`, used when the node layout must be rebuilt.
const NODE_MAX_ENTRIES: usize = 100;
/// Entries read of a group that does not know it.
const ENTRIES_READ_UNKNOWN: u64 = u64::MAX;

fn id_bytes(id: StreamId) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&id.ms.to_be_bytes());
    out[8..].copy_from_slice(&id.seq.to_be_bytes());
    out
}

fn id_from_bytes(bytes: &[u8; 16]) -> StreamId {
    let mut ms = [0u8; 8];
    let mut seq = [0u8; 8];
    ms.copy_from_slice(&bytes[..8]);
    seq.copy_from_slice(&bytes[8..]);
    StreamId::new(u64::from_be_bytes(ms), u64::from_be_bytes(seq))
}

/// A node about to be written.
struct Planned<'a> {
    master_id: StreamId,
    master_fields: Vec<&'a [u8]>,
    entries: Vec<(&'a StreamId, &'a Fields)>,
}

/// The nodes to write: the stream's own layout, so that it survives a reload, unless that
/// does not cover every entry, in which case entries are regrouped at Redis' default size.
fn plan_nodes(s: &Stream) -> Vec<Planned<'_>> {
    let nodes: Vec<Planned<'_>> = s
        .snapshot_nodes()
        .map(|node| Planned {
            master_id: node.master_id,
            master_fields: node.master_fields.iter().map(Vec::as_slice).collect(),
            entries: node.entries.collect(),
        })
        .filter(|node| !node.entries.is_empty())
        .collect();
    let covered: usize = nodes.iter().map(|n| n.entries.len()).sum();
    if covered == s.len() {
        return nodes;
    }
    let all: Vec<_> = s.range(StreamId::MIN, StreamId::MAX).collect();
    all.chunks(NODE_MAX_ENTRIES)
        .map(|chunk| Planned {
            master_id: *chunk[0].0,
            master_fields: chunk[0]
                .1
                .chunks_exact(2)
                .map(|pair| pair[0].as_slice())
                .collect(),
            entries: chunk.to_vec(),
        })
        .collect()
}

fn node_listpack(node: &Planned<'_>) -> Vec<u8> {
    let mut lp = listpack::Builder::new();
    lp.push_int(node.entries.len() as i64);
    lp.push_int(0);
    lp.push_int(node.master_fields.len() as i64);
    for field in &node.master_fields {
        lp.push(field);
    }
    lp.push_int(0);
    let master = node.master_id;
    for (id, fields) in &node.entries {
        let pairs = fields.chunks_exact(2);
        let count = pairs.len();
        let same = count == node.master_fields.len()
            && pairs
                .clone()
                .zip(&node.master_fields)
                .all(|(pair, master_field)| pair[0] == *master_field);
        lp.push_int(if same { FLAG_SAMEFIELDS } else { 0 });
        // Differences wrap like Redis' unsigned arithmetic; IDs never precede the master.
        lp.push_int(id.ms.wrapping_sub(master.ms) as i64);
        lp.push_int(id.seq.wrapping_sub(master.seq) as i64);
        if same {
            for pair in pairs {
                lp.push(&pair[1]);
            }
        } else {
            lp.push_int(count as i64);
            for pair in pairs {
                lp.push(&pair[0]);
                lp.push(&pair[1]);
            }
        }
        let elements = if same { count + 3 } else { 2 * count + 4 };
        lp.push_int(elements as i64);
    }
    lp.finish()
}

/// Writes a stream as type 19 (`STREAM_LISTPACKS_2`).
pub(crate) fn put_stream(out: &mut impl Sink, s: &Stream) {
    let nodes = plan_nodes(s);
    put_len(out, nodes.len() as u64);
    for node in &nodes {
        put_string(out, &id_bytes(node.master_id));
        put_string(out, &node_listpack(node));
    }
    put_len(out, s.len() as u64);
    for id in [s.last_id, s.first_id, s.max_deleted_id] {
        put_len(out, id.ms);
        put_len(out, id.seq);
    }
    put_len(out, s.entries_added);
    put_len(out, s.groups.len() as u64);
    for (name, group) in &s.groups {
        put_string(out, name);
        put_len(out, group.last_id.ms);
        put_len(out, group.last_id.seq);
        put_len(
            out,
            group
                .entries_read
                .map_or(ENTRIES_READ_UNKNOWN, |read| read as u64),
        );
        put_len(out, group.pending.len() as u64);
        for (id, pending) in &group.pending {
            out.put(&id_bytes(*id));
            put_millis(out, pending.delivery_ms);
            put_len(out, pending.deliveries);
        }
        // Each consumer's pending IDs come from the group's list, which names the owner:
        // Redis refuses a file where the two disagree, and a pending entry whose owner is
        // missing gets that consumer back.
        let mut consumers: BTreeMap<&[u8], (i64, Vec<StreamId>)> = group
            .consumers
            .iter()
            .map(|(name, c)| (name.as_slice(), (c.seen_ms, Vec::new())))
            .collect();
        for (id, pending) in &group.pending {
            consumers
                .entry(&pending.consumer)
                .or_insert((pending.delivery_ms, Vec::new()))
                .1
                .push(*id);
        }
        put_len(out, consumers.len() as u64);
        for (name, (seen_ms, ids)) in consumers {
            put_string(out, name);
            put_millis(out, seen_ms);
            put_len(out, ids.len() as u64);
            for id in ids {
                out.put(&id_bytes(id));
            }
        }
    }
}

/// A node's entries: ID, fields and values, and whether it is a tombstone.
type NodeEntries = Vec<(StreamId, Fields, bool)>;

/// Decodes one node's listpack, checked the way Redis' deep sanitization checks it.
fn parse_node(
    master: StreamId,
    elements: &[Element<'_>],
) -> Result<(Vec<Vec<u8>>, NodeEntries), &'static str> {
    let mut rest = elements.iter().copied();
    let mut next = |what: &'static str| rest.next().ok_or(what);
    let int = |e: Element<'_>, what: &'static str| e.as_int().ok_or(what);
    let count = |e: Element<'_>, what: &'static str| {
        int(e, what).and_then(|v| u64::try_from(v).map_err(|_| what))
    };

    let live = count(next("stream node without count")?, "bad stream node count")?;
    let deleted = count(next("stream node without count")?, "bad stream node count")?;
    let field_count = count(next("stream node without fields")?, "bad field count")?;
    let mut master_fields = Vec::new();
    for _ in 0..field_count {
        master_fields.push(next("stream master entry cut short")?.to_bytes());
    }
    if int(next("stream master entry cut short")?, "bad terminator")? != 0 {
        return Err("stream master entry not terminated by 0");
    }
    let total = live.checked_add(deleted).ok_or("bad stream node count")?;
    let mut entries = Vec::new();
    for _ in 0..total {
        let flags = int(next("stream entry cut short")?, "bad stream entry flags")?;
        let ms = int(next("stream entry cut short")?, "bad stream entry ID")?;
        let seq = int(next("stream entry cut short")?, "bad stream entry ID")?;
        let id = StreamId::new(
            master.ms.wrapping_add(ms as u64),
            master.seq.wrapping_add(seq as u64),
        );
        let same = flags & FLAG_SAMEFIELDS != 0;
        let mut fields = Vec::new();
        let pairs = if same {
            for field in &master_fields {
                fields.push(field.clone());
                fields.push(next("stream entry cut short")?.to_bytes());
            }
            master_fields.len() as u64
        } else {
            let pairs = count(next("stream entry cut short")?, "bad field count")?;
            for _ in 0..pairs {
                fields.push(next("stream entry cut short")?.to_bytes());
                fields.push(next("stream entry cut short")?.to_bytes());
            }
            pairs
        };
        let expected = if same { pairs + 3 } else { 2 * pairs + 4 };
        let stored = int(next("stream entry cut short")?, "bad stream entry size")?;
        if u64::try_from(stored) != Ok(expected) {
            return Err("stream entry size does not match its contents");
        }
        entries.push((id, fields, flags & FLAG_DELETED != 0));
    }
    if rest.next().is_some() {
        return Err("stream node has data past its entries");
    }
    Ok((master_fields, entries))
}

fn read_id<R: Read>(input: &mut Input<R>) -> Result<StreamId, RdbError> {
    Ok(id_from_bytes(&input.array()?))
}

fn read_len_id<R: Read>(input: &mut Input<R>) -> Result<StreamId, RdbError> {
    let ms = input.read_len()?;
    let seq = input.read_len()?;
    Ok(StreamId::new(ms, seq))
}

/// Reads a stream of type 15, 19 or 21.
pub(crate) fn read_stream<R: Read>(input: &mut Input<R>, kind: u8) -> Result<Stream, RdbError> {
    let mut s = Stream::new();
    let nodes = input.read_len()?;
    for _ in 0..nodes {
        let key = input.read_string()?;
        let key: [u8; 16] = key
            .as_slice()
            .try_into()
            .map_err(|_| input.corrupt("stream node key is not a stream ID"))?;
        let master = id_from_bytes(&key);
        let blob = input.read_string()?;
        let elements = listpack::parse(&blob).map_err(|e| input.integrity("Stream listpack", e))?;
        if elements.is_empty() {
            return Err(input.corrupt("Empty listpack inside stream"));
        }
        let (master_fields, entries) =
            parse_node(master, &elements).map_err(|e| input.integrity("Stream listpack", e))?;
        if !s.push_snapshot_node(master, master_fields, entries) {
            return Err(input.corrupt("stream nodes or entries out of order"));
        }
    }
    let length = input.read_len()?;
    s.last_id = read_len_id(input)?;
    if kind == types::STREAM_LISTPACKS {
        // Before Redis 7.0 these were not stored; Redis estimates them the same way.
        s.first_id = s.first_entry().map_or(StreamId::MIN, |(id, _)| *id);
        s.max_deleted_id = StreamId::MIN;
        s.entries_added = length;
    } else {
        s.first_id = read_len_id(input)?;
        s.max_deleted_id = read_len_id(input)?;
        s.entries_added = input.read_len()?;
    }
    if length != s.len() as u64 {
        return Err(input.corrupt("Stream length inconsistent with rax entries"));
    }

    let groups = input.read_len()?;
    for _ in 0..groups {
        let name = input.read_string()?;
        let last_id = read_len_id(input)?;
        let entries_read = if kind == types::STREAM_LISTPACKS {
            s.entries_read_at(last_id)
        } else {
            // Stored as a signed number: -1 means unknown. Any other value is kept, as
            // Redis keeps it (it checks none), and shown as is.
            let stored = input.read_len()? as i64;
            (stored != -1).then_some(stored)
        };
        if s.groups.contains_key(&name) {
            return Err(input.corrupt("duplicate consumer group"));
        }
        let mut group = Group::new(last_id, entries_read);

        // The group's pending entries come first; their owners are named by the consumers
        // that follow.
        let mut pel: BTreeMap<StreamId, (i64, u64, Option<Vec<u8>>)> = BTreeMap::new();
        for _ in 0..input.read_len()? {
            let id = read_id(input)?;
            let delivery_ms = input.millis()?;
            let deliveries = input.read_len()?;
            if pel.insert(id, (delivery_ms, deliveries, None)).is_some() {
                return Err(input.corrupt("duplicate pending entry in consumer group"));
            }
        }
        for _ in 0..input.read_len()? {
            let consumer_name = input.read_string()?;
            let seen_ms = input.millis()?;
            if kind == types::STREAM_LISTPACKS_3 {
                // Redis 7.2's "active time"; Latch does not track it.
                input.millis()?;
            }
            if group.consumers.contains_key(&consumer_name) {
                return Err(input.corrupt("Duplicate stream consumer detected."));
            }
            let mut consumer = Consumer {
                seen_ms,
                pending: BTreeSet::new(),
            };
            for _ in 0..input.read_len()? {
                let id = read_id(input)?;
                let Some(entry) = pel.get_mut(&id) else {
                    return Err(input.corrupt("consumer pending entry missing from group"));
                };
                if entry.2.is_some() {
                    return Err(input.corrupt("pending entry owned twice"));
                }
                entry.2 = Some(consumer_name.clone());
                consumer.pending.insert(id);
            }
            group.consumers.insert(consumer_name, consumer);
        }
        for (id, (delivery_ms, deliveries, owner)) in pel {
            let Some(consumer) = owner else {
                return Err(input.corrupt("Stream CG PEL entry without consumer"));
            };
            group.pending.insert(
                id,
                Pending {
                    consumer,
                    delivery_ms,
                    deliveries,
                },
            );
        }
        s.groups.insert(name, group);
    }
    Ok(s)
}
