//! A stream's counters come from DUMP payloads and RDB files unchecked: Redis 7.0.15 takes
//! any `entries-added`, `max-deleted-entry-id`, group `entries-read`, delivery time and seen
//! time, and its arithmetic on them wraps. Latch must take the same payloads, give the same
//! answers, and never panic on them (a debug build checks every overflow). Each payload is
//! RESTOREd into both servers and the same commands must answer alike.

mod common;

use latch_keyspace::stream::{Group, NewId, NodeLimits, StreamId};
use latch_keyspace::{Stream, Value};
use latch_persist::rdb::dump_payload;
use latch_testkit::Server;

/// What to write into the payload's stream.
struct Counters {
    entries_added: u64,
    max_deleted: StreamId,
    entries_read: Option<i64>,
    /// The delivery time of the one pending entry (and so its consumer's seen time).
    delivery_ms: i64,
}

const PLAIN: Counters = Counters {
    entries_added: 3,
    max_deleted: StreamId::MIN,
    entries_read: Some(1),
    delivery_ms: 5,
};

/// A stream 1-0, 2-0, 3-0 with group `g`, which delivered 1-0 to `alice`, as DUMP would
/// give it, with the counters patched in (the payload's CRC is computed over them).
fn payload(counters: &Counters) -> Vec<u8> {
    let mut stream = Stream::new();
    let limits = NodeLimits {
        max_entries: 100,
        max_bytes: 4096,
    };
    for ms in 1..=3 {
        let fields = vec![b"f".to_vec(), b"v".to_vec()];
        stream
            .add(NewId::Exact(StreamId::new(ms, 0)), fields, 0, limits)
            .unwrap();
    }
    stream.entries_added = counters.entries_added;
    stream.max_deleted_id = counters.max_deleted;
    let mut group = Group::new(StreamId::new(1, 0), counters.entries_read);
    group.deliver(StreamId::new(1, 0), b"alice", counters.delivery_ms);
    stream.groups.insert(b"g".to_vec(), group);
    dump_payload(&Value::Stream(Box::new(stream)))
}

fn query(conn: &mut redis::Connection, args: &[&[u8]]) -> String {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    format!("{:?}", cmd.query::<redis::Value>(conn))
}

/// RESTOREs the payload on both servers, then runs `commands` (words split on spaces) on
/// both; every reply must be Redis' and Latch must still answer PING.
fn same_answers(counters: &Counters, commands: &[&str]) {
    let latch = common::TestServer::start(&[]);
    let redis = Server::redis(&[]);
    let mut on_redis = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let mut on_latch = latch.client();
    let payload = payload(counters);
    let restore: &[&[u8]] = &[b"RESTORE", b"k", b"0", &payload];
    assert_eq!(query(&mut on_latch, restore), query(&mut on_redis, restore));
    for command in commands {
        let args: Vec<&[u8]> = command.split(' ').map(str::as_bytes).collect();
        let expected = query(&mut on_redis, &args);
        assert_eq!(query(&mut on_latch, &args), expected, "{command}");
    }
    assert_eq!(
        query(&mut on_latch, &[b"PING"]),
        "Ok(simple-string(\"PONG\"))"
    );
    let mut fresh = latch.client();
    assert_eq!(query(&mut fresh, &[b"PING"]), "Ok(simple-string(\"PONG\"))");
}

/// What the group and the stream report once an entry is added and read.
const ADD_AND_READ: &[&str] = &[
    "XINFO STREAM k",
    "XINFO GROUPS k",
    "XADD k 10-0 a b",
    "XINFO STREAM k",
    "XINFO GROUPS k",
    "XREADGROUP GROUP g bob STREAMS k >",
    "XINFO GROUPS k",
    "XPENDING k g",
    "XADD k 11-0 a b",
    "XINFO GROUPS k",
];

#[test]
fn entries_added_at_its_largest_wraps_on_the_next_add() {
    same_answers(
        &Counters {
            entries_added: u64::MAX,
            ..PLAIN
        },
        ADD_AND_READ,
    );
}

#[test]
fn entries_added_past_the_signed_range_still_gives_a_lag() {
    for entries_read in [None, Some(1), Some(i64::MAX)] {
        same_answers(
            &Counters {
                entries_added: 1 << 63,
                entries_read,
                ..PLAIN
            },
            ADD_AND_READ,
        );
    }
}

#[test]
fn entries_read_at_the_edges_is_kept_as_redis_keeps_it() {
    for entries_read in [Some(i64::MAX), Some(-5), Some(i64::MIN)] {
        same_answers(
            &Counters {
                entries_read,
                ..PLAIN
            },
            ADD_AND_READ,
        );
    }
}

#[test]
fn delivery_and_seen_times_at_the_edges() {
    // Idle times computed from i64::MIN wrap negative: shown as 0, never old enough to be
    // claimed or listed by a minimum idle time.
    same_answers(
        &Counters {
            delivery_ms: i64::MIN,
            ..PLAIN
        },
        &[
            "XPENDING k g IDLE 1000 - + 10",
            "XPENDING k g - + 10 alice",
            "XINFO CONSUMERS k g",
            "XCLAIM k g carol 1000 1-0 JUSTID",
            "XAUTOCLAIM k g carol 1000 0 JUSTID",
            "XPENDING k g",
        ],
    );
}
