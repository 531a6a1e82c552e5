//! An AOF base in command form, for `aof-use-rdb-preamble no`: the commands that rebuild
//! a cut, as Redis' rewrite writes them, so the base reads (and replays) like the rest of
//! the AOF. Redis' loader takes it, and Latch's loader takes Redis'.
//!
//! What it holds, in order: a `#TS:` annotation when `aof-timestamp-enabled` is on; a
//! `FUNCTION LOAD` per library; then per database a `SELECT` and each key: `SET` for a
//! string, `RPUSH`/`SADD`/`ZADD`/`HMSET` with at most 64 elements a command for the
//! collections, and for a stream its entries as `XADD`s (an empty one as `XADD ... MAXLEN
//! 0` of an entry at once trimmed), `XSETID` with its counters, each group with `XGROUP
//! CREATE ... ENTRIESREAD`, its pending entries as `XCLAIM ... FORCE` and its consumers
//! without any as `XGROUP CREATECONSUMER`; a key with a TTL is followed by `PEXPIREAT`.

use std::io::Write;

use latch_keyspace::stream::StreamId;
use latch_keyspace::{Elem, Value};

use super::snapshot::{each_key, Cut};
use crate::server::Server;

/// Elements per command for a collection (Redis' AOF_REWRITE_ITEMS_PER_CMD).
const ITEMS_PER_COMMAND: usize = 64;
/// Buffered output handed to the writer once it passes this.
const FLUSH_AT: usize = 256 * 1024;

/// Serializes the cut as commands into `out`; returns `out` when done.
pub fn write_commands_into<W: Write>(server: &Server, cut: &Cut, mut out: W) -> anyhow::Result<W> {
    let mut buffer = Vec::with_capacity(FLUSH_AT + 64 * 1024);
    if super::aof::timestamps_enabled() {
        buffer.extend_from_slice(super::aof::timestamp_line(super::aof::unix_now()).as_bytes());
    }
    for code in &cut.libraries {
        command(&mut buffer, &[b"FUNCTION", b"LOAD", code]);
    }
    let mut selected = None;
    each_key(server, cut, false, |db, slot, expire| {
        if selected != Some(db) {
            command(&mut buffer, &[b"SELECT", db.to_string().as_bytes()]);
            selected = Some(db);
        }
        let key = slot.key();
        rebuild(&mut buffer, key, slot.value());
        if let Some(ms) = expire {
            command(&mut buffer, &[b"PEXPIREAT", key, ms.to_string().as_bytes()]);
        }
        if buffer.len() >= FLUSH_AT {
            out.write_all(&buffer)?;
            buffer.clear();
        }
        Ok(())
    })?;
    out.write_all(&buffer)?;
    out.flush()?;
    Ok(out)
}

/// The commands that make `key` hold `value`.
fn rebuild(out: &mut Vec<u8>, key: &[u8], value: &Value) {
    match value {
        Value::Str(bytes) => command(out, &[b"SET", key, bytes]),
        Value::List(list) => {
            let mut items = Vec::new();
            list.scan(0, |elem| {
                items.push(elem_text(elem));
                true
            });
            batches(out, b"RPUSH", key, &items, 1);
        }
        Value::Set(set) => {
            let members: Vec<Vec<u8>> = set.iter().map(elem_text).collect();
            batches(out, b"SADD", key, &members, 1);
        }
        Value::ZSet(set) => {
            let mut pairs = Vec::with_capacity(set.len() * 2);
            for (member, score) in set.iter() {
                let mut text = Vec::new();
                latch_protocol::format_double_g17(score, &mut text);
                pairs.push(text);
                pairs.push(member.to_vec());
            }
            batches(out, b"ZADD", key, &pairs, 2);
        }
        Value::Hash(hash) => {
            let mut pairs = Vec::with_capacity(hash.len() * 2);
            for (field, value) in hash.iter() {
                pairs.push(elem_text(field));
                pairs.push(elem_text(value));
            }
            batches(out, b"HMSET", key, &pairs, 2);
        }
        Value::Stream(stream) => rebuild_stream(out, key, stream),
    }
}

/// `verb key` with `items` (in groups of `width`: a pair is one element) at most
/// [`ITEMS_PER_COMMAND`] elements a command.
fn batches(out: &mut Vec<u8>, verb: &[u8], key: &[u8], items: &[Vec<u8>], width: usize) {
    for chunk in items.chunks(ITEMS_PER_COMMAND * width) {
        header(out, 2 + chunk.len());
        bulk(out, verb);
        bulk(out, key);
        for item in chunk {
            bulk(out, item);
        }
    }
}

fn rebuild_stream(out: &mut Vec<u8>, key: &[u8], stream: &latch_keyspace::Stream) {
    if stream.is_empty() {
        // An entry trimmed as it is added: the stream exists, empty.
        command(out, &[b"XADD", key, b"MAXLEN", b"0", b"0-1", b"x", b"y"]);
    } else {
        for (id, fields) in stream.range(StreamId::MIN, StreamId::MAX) {
            header(out, 3 + fields.len());
            bulk(out, b"XADD");
            bulk(out, key);
            bulk(out, id.to_string().as_bytes());
            for field in fields {
                bulk(out, field);
            }
        }
    }
    command(
        out,
        &[
            b"XSETID",
            key,
            stream.last_id.to_string().as_bytes(),
            b"ENTRIESADDED",
            stream.entries_added.to_string().as_bytes(),
            b"MAXDELETEDID",
            stream.max_deleted_id.to_string().as_bytes(),
        ],
    );
    for (name, group) in &stream.groups {
        let read = group.entries_read.unwrap_or(-1).to_string();
        command(
            out,
            &[
                b"XGROUP",
                b"CREATE",
                key,
                name,
                group.last_id.to_string().as_bytes(),
                b"ENTRIESREAD",
                read.as_bytes(),
            ],
        );
        // Each pending entry is claimed by its consumer, which that creates; consumers
        // with none are created on their own.
        for (id, pending) in &group.pending {
            command(
                out,
                &[
                    b"XCLAIM",
                    key,
                    name,
                    &pending.consumer,
                    b"0",
                    id.to_string().as_bytes(),
                    b"TIME",
                    pending.delivery_ms.to_string().as_bytes(),
                    b"RETRYCOUNT",
                    pending.deliveries.to_string().as_bytes(),
                    b"JUSTID",
                    b"FORCE",
                ],
            );
        }
        for (consumer, state) in &group.consumers {
            let has_pending = group
                .pending
                .values()
                .any(|pending| &pending.consumer == consumer);
            if state.pending.is_empty() && !has_pending {
                command(out, &[b"XGROUP", b"CREATECONSUMER", key, name, consumer]);
            }
        }
    }
}

fn elem_text(elem: Elem<'_>) -> Vec<u8> {
    match elem.as_bytes() {
        Some(bytes) => bytes.to_vec(),
        None => elem.to_vec(),
    }
}

fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    header(out, args.len());
    for arg in args {
        bulk(out, arg);
    }
}

fn header(out: &mut Vec<u8>, count: usize) {
    out.push(b'*');
    out.extend_from_slice(itoa::Buffer::new().format(count).as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'$');
    out.extend_from_slice(itoa::Buffer::new().format(bytes.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}
