//! Stream commands (Redis' "stream" group), by theme:
//!
//! - [`entries`]: XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XSETID.
//! - [`read`]: XREAD, XREADGROUP.
//! - [`groups`]: XGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM.
//! - [`info`]: XINFO and its subcommands.
//!
//! Shared here: reading a value as a stream, Redis' stream ID syntax, the entry reply shape
//! and the consumer-group errors.

mod entries;
mod groups;
mod info;
mod read;

use bytes::Bytes;
use latch_keyspace::stream::{Fields, Group as ConsumerGroup, NodeLimits, Pending, StreamId};
use latch_keyspace::{Locked, Stream, Value};
use latch_protocol::Reply;

use crate::commands::{err, Ctx};
use crate::spec::CommandSpec;

pub static COMMANDS: &[CommandSpec] = &[
    entries::XADD,
    entries::XRANGE,
    entries::XREVRANGE,
    entries::XLEN,
    read::XREAD,
    read::XREADGROUP,
    groups::XGROUP,
    entries::XSETID,
    groups::XACK,
    groups::XPENDING,
    groups::XCLAIM,
    groups::XAUTOCLAIM,
    info::XINFO,
    entries::XDEL,
    entries::XTRIM,
];

const INVALID_ID: &[u8] = b"ERR Invalid stream ID specified as stream command argument";

/// The key holds something other than a stream.
pub(crate) struct WrongType;

/// The stream under `key`: `Ok(None)` when the key is missing.
fn stream_at<'a>(
    keys: &'a mut Locked<'_>,
    db: usize,
    key: &[u8],
) -> Result<Option<&'a mut Stream>, WrongType> {
    match keys.get(db, key) {
        None => Ok(None),
        Some(Value::Stream(stream)) => Ok(Some(stream)),
        Some(_) => Err(WrongType),
    }
}

/// [`stream_at`] answering WRONGTYPE itself: `Err(())` when it did.
fn stream_or_reply<'a>(
    keys: &'a mut Locked<'_>,
    reply: &mut Reply,
    db: usize,
    key: &[u8],
) -> Result<Option<&'a mut Stream>, ()> {
    stream_at(keys, db, key).map_err(|WrongType| reply.error(err::WRONGTYPE))
}

/// The node limits XADD splits by (`stream-node-max-entries`, `stream-node-max-bytes`).
fn node_limits(ctx: &Ctx<'_, '_>) -> NodeLimits {
    let (max_entries, max_bytes) = ctx.server.config.stream_node_limits();
    NodeLimits {
        max_entries,
        max_bytes,
    }
}

/// The current Unix time in milliseconds, as stream IDs and delivery times use it.
fn now_ms(ctx: &Ctx<'_, '_>) -> i64 {
    ctx.now().wall_ms
}

/// Parses an unsigned number the way Redis' `string2ull` does: strictly first, then as C's
/// `strtoull` would (leading spaces, a sign, and a `-` that wraps around).
fn parse_u64(text: &[u8]) -> Option<u64> {
    if let Some(n) = latch_keyspace::parse_i64_strict(text) {
        return u64::try_from(n).ok();
    }
    let trimmed = match text.iter().position(|b| !b" \t\n\x0b\x0c\r".contains(b)) {
        Some(start) => &text[start..],
        None => return None,
    };
    let (negative, digits) = match trimmed.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, trimmed),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut value: u64 = 0;
    for &d in digits {
        value = value.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

/// The parts of an ID argument: `-`, `+`, `<ms>`, `<ms>-<seq>` or `<ms>-*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IdSyntax {
    Min,
    Max,
    /// Milliseconds, and the sequence when given (`None` for `<ms>` alone).
    Parts(u64, Option<u64>),
    /// `<ms>-*`.
    MsStar(u64),
}

/// Redis' `streamGenericParseIDOrReply` grammar (without the reply).
fn id_syntax(arg: &[u8]) -> Option<IdSyntax> {
    // Redis copies the argument into a 128-byte C string: longer ones are refused and a
    // NUL ends it early.
    if arg.len() > 127 {
        return None;
    }
    let text = match arg.iter().position(|&b| b == 0) {
        Some(end) => &arg[..end],
        None => arg,
    };
    match text {
        b"-" => return Some(IdSyntax::Min),
        b"+" => return Some(IdSyntax::Max),
        _ => {}
    }
    match text.iter().position(|&b| b == b'-') {
        None => Some(IdSyntax::Parts(parse_u64(text)?, None)),
        Some(dash) => {
            let ms = parse_u64(&text[..dash])?;
            let seq = &text[dash + 1..];
            if seq == b"*" {
                Some(IdSyntax::MsStar(ms))
            } else {
                Some(IdSyntax::Parts(ms, Some(parse_u64(seq)?)))
            }
        }
    }
}

/// An ID where `-` and `+` are allowed; `missing_seq` completes `<ms>` alone.
fn parse_id(arg: &[u8], missing_seq: u64) -> Option<StreamId> {
    match id_syntax(arg)? {
        IdSyntax::Min => Some(StreamId::MIN),
        IdSyntax::Max => Some(StreamId::MAX),
        IdSyntax::Parts(ms, seq) => Some(StreamId::new(ms, seq.unwrap_or(missing_seq))),
        IdSyntax::MsStar(_) => None,
    }
}

/// An ID where `-` and `+` are refused (Redis' "strict" form).
fn parse_strict_id(arg: &[u8], missing_seq: u64) -> Option<StreamId> {
    match id_syntax(arg)? {
        IdSyntax::Min | IdSyntax::Max => None,
        _ => parse_id(arg, missing_seq),
    }
}

/// [`parse_strict_id`] (sequence 0 when missing) or Redis' invalid-ID error.
fn strict_id_or_reply(reply: &mut Reply, arg: &[u8]) -> Option<StreamId> {
    let id = parse_strict_id(arg, 0);
    if id.is_none() {
        reply.error(INVALID_ID);
    }
    id
}

/// One end of a range (XRANGE, XPENDING, XAUTOCLAIM): `(` makes it exclusive, in which case
/// `-` and `+` are refused. Returns the ID and whether it is exclusive, or writes the error.
fn interval_or_reply(reply: &mut Reply, arg: &[u8], missing_seq: u64) -> Option<(StreamId, bool)> {
    let parsed = if arg.len() > 1 && arg[0] == b'(' {
        parse_strict_id(&arg[1..], missing_seq).map(|id| (id, true))
    } else {
        parse_id(arg, missing_seq).map(|id| (id, false))
    };
    if parsed.is_none() {
        reply.error(INVALID_ID);
    }
    parsed
}

/// The start of a range, moved past an exclusive bound; `None` after writing the error.
fn range_start_or_reply(reply: &mut Reply, arg: &[u8]) -> Option<StreamId> {
    let (id, exclusive) = interval_or_reply(reply, arg, 0)?;
    if !exclusive {
        return Some(id);
    }
    let next = id.next();
    if next.is_none() {
        reply.error(b"ERR invalid start ID for the interval");
    }
    next
}

/// The end of a range, moved before an exclusive bound; `None` after writing the error.
fn range_end_or_reply(reply: &mut Reply, arg: &[u8]) -> Option<StreamId> {
    let (id, exclusive) = interval_or_reply(reply, arg, u64::MAX)?;
    if !exclusive {
        return Some(id);
    }
    let prev = id.prev();
    if prev.is_none() {
        reply.error(b"ERR invalid end ID for the interval");
    }
    prev
}

fn reply_id(reply: &mut Reply, id: StreamId) {
    // "ms-seq" in a stack buffer: every XADD answers one.
    let mut text = [0u8; 41];
    let mut ms = itoa::Buffer::new();
    let mut seq = itoa::Buffer::new();
    let (ms, seq) = (ms.format(id.ms).as_bytes(), seq.format(id.seq).as_bytes());
    text[..ms.len()].copy_from_slice(ms);
    text[ms.len()] = b'-';
    text[ms.len() + 1..ms.len() + 1 + seq.len()].copy_from_slice(seq);
    reply.bulk(&text[..ms.len() + 1 + seq.len()]);
}

/// One entry as Redis shows it: its ID and its fields and values.
fn reply_entry(reply: &mut Reply, id: StreamId, fields: &Fields) {
    reply.array(2);
    reply_id(reply, id);
    reply.array(fields.len());
    for item in fields {
        reply.bulk(item);
    }
}

/// A reply part written before its element count is known (Redis' deferred lengths): the
/// elements go to a scratch buffer and are copied after the header.
struct Deferred {
    scratch: Reply,
    count: usize,
}

impl Deferred {
    fn new(reply: &Reply) -> Deferred {
        Deferred {
            scratch: Reply::new(reply.resp()),
            count: 0,
        }
    }

    /// Writes the array header and the buffered elements to `reply`.
    fn finish_array(mut self, reply: &mut Reply) {
        reply.array(self.count);
        reply.raw(self.scratch.buffer());
    }
}

/// Redis' `streamPropagateXCLAIM`: what consumer group reads and claims are logged as, one
/// XCLAIM per pending entry they touched, giving it exactly its owner, delivery time and
/// count (FORCE creates it, JUSTID leaves the count alone) and the group its last ID. For
/// an entry gone from the stream, replaying it drops the pending entry, as the claim did.
fn log_xclaim(
    key: &Bytes,
    group: &[u8],
    id: Bytes,
    pending: &Pending,
    last_id: StreamId,
) -> Vec<Bytes> {
    vec![
        Bytes::from_static(b"XCLAIM"),
        key.clone(),
        Bytes::copy_from_slice(group),
        Bytes::copy_from_slice(&pending.consumer),
        Bytes::from_static(b"0"),
        id,
        Bytes::from_static(b"TIME"),
        Bytes::from(pending.delivery_ms.to_string()),
        Bytes::from_static(b"RETRYCOUNT"),
        Bytes::from(pending.deliveries.to_string()),
        Bytes::from_static(b"FORCE"),
        Bytes::from_static(b"JUSTID"),
        Bytes::from_static(b"LASTID"),
        Bytes::from(last_id.to_string()),
    ]
}

/// Redis' `streamPropagateGroupID`: a group's last ID and read counter (-1: unknown), for
/// a change no XCLAIM carries.
fn log_group_id(key: &Bytes, group_name: &[u8], group: &ConsumerGroup) -> Vec<Bytes> {
    vec![
        Bytes::from_static(b"XGROUP"),
        Bytes::from_static(b"SETID"),
        key.clone(),
        Bytes::copy_from_slice(group_name),
        Bytes::from(group.last_id.to_string()),
        Bytes::from_static(b"ENTRIESREAD"),
        Bytes::from(group.entries_read.unwrap_or(-1).to_string()),
    ]
}

/// `NOGROUP No such key '<key>' or consumer group '<group>'<suffix>`.
fn no_key_or_group(reply: &mut Reply, key: &[u8], group: &[u8], suffix: &str) {
    let message = format!(
        "NOGROUP No such key '{}' or consumer group '{}'{suffix}",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    );
    reply.error(message.as_bytes());
}

/// `NOGROUP No such consumer group '<group>' for key name '<key>'`.
fn no_group_for_key(reply: &mut Reply, key: &[u8], group: &[u8]) {
    let message = format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        String::from_utf8_lossy(group),
        String::from_utf8_lossy(key)
    );
    reply.error(message.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_grammar() {
        assert_eq!(parse_id(b"-", 0), Some(StreamId::MIN));
        assert_eq!(parse_id(b"+", 0), Some(StreamId::MAX));
        assert_eq!(parse_strict_id(b"-", 0), None);
        assert_eq!(parse_id(b"5", 7), Some(StreamId::new(5, 7)));
        assert_eq!(parse_id(b"5-3", 7), Some(StreamId::new(5, 3)));
        assert_eq!(parse_id(b"5-*", 0), None);
        assert_eq!(id_syntax(b"5-*"), Some(IdSyntax::MsStar(5)));
        assert_eq!(parse_id(b"5-3-1", 0), None);
        assert_eq!(parse_id(b"-5", 0), None);
        assert_eq!(parse_id(b"", 0), None);
        assert_eq!(parse_id(b"abc", 0), None);
        assert_eq!(parse_id(b"007", 0), Some(StreamId::new(7, 0)));
        assert_eq!(parse_id(b" 7", 0), Some(StreamId::new(7, 0)));
        assert_eq!(
            parse_id(b"18446744073709551615-18446744073709551615", 0),
            Some(StreamId::MAX)
        );
        assert_eq!(parse_id(b"18446744073709551616", 0), None);
        assert_eq!(parse_id(&[b'1'; 128], 0), None);
    }
}
