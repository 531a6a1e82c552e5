//! Property tests of the RDB codec through its public API: values survive `DUMP`/`RESTORE`
//! and whole files unchanged, and no input, however damaged, makes the reader panic.

use std::collections::{HashMap, VecDeque};

use latch_keyspace::stream::{Group, NewId, NodeLimits, Pending, StreamId};
use latch_keyspace::{SortedSet, Stream, Value};
use latch_persist::crc64::crc64;
use latch_persist::rdb::{dump_payload, restore_payload, Item, Reader, Writer};
use proptest::prelude::*;

/// Strings of the kinds the encoder treats differently: short text, integers of every
/// width, binary, and long repetitive text that compresses.
fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => proptest::collection::vec(b'a'..=b'e', 0..12),
        2 => any::<i64>().prop_map(|v| v.to_string().into_bytes()),
        2 => any::<i16>().prop_map(|v| v.to_string().into_bytes()),
        1 => proptest::collection::vec(any::<u8>(), 0..80),
        1 => (1usize..40, 21usize..200).prop_map(|(period, len)| {
            (0..len).map(|i| b'a' + (i % period) as u8 % 26).collect()
        }),
    ]
}

fn score() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<i32>().prop_map(f64::from),
        any::<f64>().prop_filter("not NaN", |v| !v.is_nan()),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        (-1000i32..1000).prop_map(|v| v as f64 / 8.0),
    ]
}

fn list() -> impl Strategy<Value = Value> {
    prop_oneof![
        proptest::collection::vec(bytes(), 1..20),
        proptest::collection::vec(bytes(), 1..600),
    ]
    .prop_map(|items| Value::List(VecDeque::from(items).into()))
}

fn set() -> impl Strategy<Value = Value> {
    prop_oneof![
        proptest::collection::hash_set(bytes(), 1..200),
        proptest::collection::hash_set(
            any::<i32>().prop_map(|v| v.to_string().into_bytes()),
            1..600
        ),
    ]
    .prop_map(|members| {
        Value::Set(latch_keyspace::Set::from_members(
            members.iter().map(|m| &m[..]),
        ))
    })
}

fn hash() -> impl Strategy<Value = Value> {
    prop_oneof![
        proptest::collection::hash_map(bytes(), bytes(), 1..20),
        proptest::collection::hash_map(bytes(), bytes(), 1..300),
    ]
    .prop_map(|fields| Value::Hash(fields.into_iter().collect()))
}

fn zset() -> impl Strategy<Value = Value> {
    prop_oneof![
        proptest::collection::vec((bytes(), score()), 1..20),
        proptest::collection::vec((bytes(), score()), 1..300),
    ]
    .prop_map(|pairs| {
        let mut set = SortedSet::new();
        for (member, score) in pairs {
            set.insert(&member, score);
        }
        Value::ZSet(set)
    })
}

/// A stream built the way XADD, XSETID, XGROUP and XREADGROUP build one.
fn stream() -> impl Strategy<Value = Value> {
    let entry = (
        1u64..1000,
        0u64..3,
        proptest::collection::vec((0usize..4, bytes()), 1..4),
    );
    let group = (
        proptest::collection::vec(b'a'..=b'z', 1..8),
        proptest::option::of(0i64..1000),
        proptest::collection::vec((0usize..40, 0usize..4, any::<i64>(), 1u64..100), 0..10),
        proptest::collection::vec(proptest::collection::vec(b'a'..=b'e', 1..5), 0..3),
    );
    (
        proptest::collection::vec(entry, 0..250),
        prop_oneof![Just((100u64, 4096u64)), Just((5, 4096)), Just((0, 300))],
        proptest::collection::vec(group, 0..3),
        0u64..5,
    )
        .prop_map(|(entries, (max_entries, max_bytes), groups, extra)| {
            let limits = NodeLimits {
                max_entries,
                max_bytes,
            };
            let names: [&[u8]; 4] = [b"name", b"temp", b"n", b"1"];
            let mut s = Stream::new();
            let mut ms = 0;
            for (step, seq, pairs) in entries {
                ms += step;
                let fields = pairs
                    .into_iter()
                    .flat_map(|(f, v)| [names[f].to_vec(), v])
                    .collect();
                // Equal IDs are refused, like XADD refuses them.
                let _ = s.add(NewId::Exact(StreamId::new(ms, seq)), fields, 0, limits);
            }
            s.last_id = StreamId::new(s.last_id.ms + extra, s.last_id.seq);
            s.max_deleted_id = StreamId::new(extra, 0);
            let ids: Vec<StreamId> = s
                .range(StreamId::MIN, StreamId::MAX)
                .map(|(id, _)| *id)
                .collect();
            for (name, entries_read, pending, consumers) in groups {
                let mut group = Group::new(ids.first().copied().unwrap_or_default(), entries_read);
                let mut owners: Vec<Vec<u8>> = consumers;
                for owner in &owners {
                    group.create_consumer(owner, 1_700_000_000_000);
                }
                if owners.is_empty() {
                    owners.push(b"solo".to_vec());
                    group.create_consumer(b"solo", 5);
                }
                for (which, owner, delivery_ms, deliveries) in pending {
                    if let Some(&id) = ids.get(which) {
                        let owner = &owners[owner % owners.len()];
                        group.deliver(id, owner, 0);
                        if let Some(p) = group.transfer(id, owner) {
                            *p = Pending {
                                consumer: owner.clone(),
                                delivery_ms,
                                deliveries,
                            };
                        }
                    }
                }
                s.groups.insert(name, group);
            }
            Value::Stream(Box::new(s))
        })
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        bytes().prop_map(Value::Str),
        list(),
        set(),
        hash(),
        zset(),
        stream(),
    ]
}

/// Recomputes a payload's CRC after it was tampered with, so decoding gets to see it.
fn refooter(mut payload: Vec<u8>) -> Vec<u8> {
    if payload.len() >= 10 {
        let body = payload.len() - 8;
        let crc = crc64(0, &payload[..body]);
        payload[body..].copy_from_slice(&crc.to_le_bytes());
    }
    payload
}

fn read_everything(data: &[u8]) {
    if let Ok(mut reader) = Reader::new(data) {
        // Every item consumes input, so this ends.
        while let Ok(Some(_)) = reader.next() {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn dump_restore_is_identity(value in value()) {
        let payload = dump_payload(&value);
        prop_assert_eq!(restore_payload(&payload).unwrap(), value);
    }

    #[test]
    fn files_round_trip(
        keys in proptest::collection::vec((bytes(), value(), proptest::option::of(any::<i64>())), 0..6),
        aux in proptest::collection::vec(("[a-z-]{1,10}", bytes()), 0..3),
    ) {
        let keys: HashMap<Vec<u8>, (Value, Option<i64>)> =
            keys.into_iter().map(|(k, v, e)| (k, (v, e))).collect();
        let mut writer = Writer::new(Vec::new()).unwrap();
        for (name, value) in &aux {
            writer.aux(name, value).unwrap();
        }
        writer.function(b"#!lua name=lib\nredis.register_function('f', function() return 1 end)").unwrap();
        let expires = keys.values().filter(|(_, e)| e.is_some()).count() as u64;
        writer.select_db(3, keys.len() as u64, expires).unwrap();
        for (key, (value, expire)) in &keys {
            writer.key(key, value, *expire).unwrap();
        }
        let data = writer.finish().unwrap();

        let mut reader = Reader::new(&data[..]).unwrap();
        prop_assert_eq!(reader.version(), 10);
        let mut read_aux = Vec::new();
        let mut read_keys = HashMap::new();
        let mut functions = 0;
        while let Some(item) = reader.next().unwrap() {
            match item {
                Item::Aux { name, value } => read_aux.push((String::from_utf8(name).unwrap(), value)),
                Item::Function(_) => functions += 1,
                Item::SelectDb(db) => prop_assert_eq!(db, 3),
                Item::ResizeDb { keys: n, expires: e } => {
                    prop_assert_eq!(n, keys.len() as u64);
                    prop_assert_eq!(e, expires);
                }
                Item::EmptyKey(key) => prop_assert!(false, "an empty key {:?} was written", key),
                Item::Key {
                    key,
                    value,
                    expire_unix_ms,
                    ..
                } => {
                    read_keys.insert(key, (value, expire_unix_ms));
                }
            }
        }
        prop_assert_eq!(reader.offset(), data.len() as u64);
        prop_assert_eq!(read_aux, aux);
        prop_assert_eq!(functions, 1);
        prop_assert_eq!(read_keys, keys);
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..400)) {
        read_everything(&data);
        let mut with_header = b"REDIS0010".to_vec();
        with_header.extend_from_slice(&data);
        read_everything(&with_header);
        let _ = restore_payload(&data);
        let _ = restore_payload(&refooter(data));
    }

    #[test]
    fn damaged_files_and_payloads_never_panic(
        value in value(),
        damage in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut payload = dump_payload(&value);
        let body = payload.len() - 10;
        for (at, byte) in &damage {
            payload[at.index(body)] = *byte;
        }
        let payload = refooter(payload);
        let _ = restore_payload(&payload);
        let _ = restore_payload(&refooter(payload[..cut.index(payload.len())].to_vec()));

        let mut writer = Writer::new(Vec::new()).unwrap();
        writer.select_db(0, 1, 0).unwrap();
        writer.key(b"k", &value, None).unwrap();
        let mut file = writer.finish().unwrap();
        let len = file.len();
        for (at, byte) in &damage {
            file[at.index(len)] = *byte;
        }
        read_everything(&file);
        read_everything(&file[..cut.index(len)]);
    }
}

#[test]
fn huge_claimed_lengths_fail_fast() {
    // A string claiming 2^64-1 bytes, a list claiming 2^64-1 elements, an LZF string
    // claiming to expand to 4 GB: all refused without allocating or looping for long.
    let cases: [&[u8]; 3] = [
        b"\x00\x81\xff\xff\xff\xff\xff\xff\xff\xff",
        b"\x01\x81\xff\xff\xff\xff\xff\xff\xff\xff\x01a",
        b"\x00\xc3\x03\x80\xff\xff\xff\xff\x00ab",
    ];
    for body in cases {
        let mut payload = body.to_vec();
        payload.extend_from_slice(&10u16.to_le_bytes());
        payload.extend_from_slice(&[0; 8]);
        assert!(restore_payload(&refooter(payload)).is_err());
    }
}
