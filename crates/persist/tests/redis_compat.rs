//! Compatibility with the real Redis 7.0, which must be installed (`redis-server`,
//! `redis-check-rdb`): these tests fail, rather than skip, without it.
//!
//! - An RDB file Latch writes passes `redis-check-rdb` and loads into `redis-server`,
//!   which then serves exactly the values written.
//! - A file `redis-server` saves reads back, through [`Reader`], as the values it serves.
//! - `DUMP` payloads travel both ways: Redis' decode here, ours restore in Redis.
//!
//! Each test starts its own server on a free port in a temporary directory; guards stop
//! the server and remove the directory even when an assertion fails.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use latch_keyspace::stream::{Group, NewId, NodeLimits, Pending, StreamId};
use latch_keyspace::{SortedSet, Stream, Value};
use latch_persist::rdb::{dump_payload, restore_payload, Item, Reader, Writer};
use latch_testkit::Program;

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let path = std::env::temp_dir().join(format!(
            "latch-persist-{tag}-{}-{nanos}",
            std::process::id()
        ));
        fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A running `redis-server`, started by the testkit (which checks the port is its own) in
/// the test's directory; killed when dropped.
struct Server(latch_testkit::Server);

impl Server {
    fn start(dir: &Path, dbfilename: &str) -> Server {
        let server = latch_testkit::Server::start_in(
            Program::Redis,
            dir,
            &["--dbfilename", dbfilename, "--appendonly", "no"],
        );
        server.wait_for_pong();
        Server(server)
    }

    fn connect(&self) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", self.0.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Conn {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Reply {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    fn bulk(&self) -> Vec<u8> {
        match self {
            Reply::Bulk(Some(b)) => b.clone(),
            other => panic!("expected a bulk string, got {other:?}"),
        }
    }

    fn text(&self) -> String {
        match self {
            Reply::Status(s) => s.clone(),
            other => String::from_utf8(other.bulk()).unwrap(),
        }
    }

    fn int(&self) -> i64 {
        match self {
            Reply::Int(v) => *v,
            other => panic!("expected an integer, got {other:?}"),
        }
    }

    fn array(&self) -> Vec<Reply> {
        match self {
            Reply::Array(Some(items)) => items.clone(),
            other => panic!("expected an array, got {other:?}"),
        }
    }

    fn bulks(&self) -> Vec<Vec<u8>> {
        self.array().iter().map(Reply::bulk).collect()
    }

    /// A flat key/value array (RESP2 maps) as a map.
    fn map(&self) -> HashMap<String, Reply> {
        self.array()
            .chunks(2)
            .map(|pair| (pair[0].text(), pair[1].clone()))
            .collect()
    }
}

/// A minimal RESP2 client.
struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Conn {
    fn call<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Reply {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            let arg = arg.as_ref();
            out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(arg);
            out.extend_from_slice(b"\r\n");
        }
        self.writer.write_all(&out).unwrap();
        self.read_reply()
    }

    /// A command of space-separated words.
    fn cmd(&mut self, words: &str) -> Reply {
        let args: Vec<&str> = words.split_whitespace().collect();
        self.call(&args)
    }

    fn ok<A: AsRef<[u8]>>(&mut self, args: &[A]) {
        let reply = self.call(args);
        assert!(
            !matches!(reply, Reply::Error(_)),
            "{:?} failed: {reply:?}",
            String::from_utf8_lossy(args[0].as_ref())
        );
    }

    fn read_line(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        line.trim_end_matches("\r\n").to_string()
    }

    fn read_reply(&mut self) -> Reply {
        let line = self.read_line();
        let (kind, rest) = line.split_at(1);
        match kind {
            "+" => Reply::Status(rest.to_string()),
            "-" => Reply::Error(rest.to_string()),
            ":" => Reply::Int(rest.parse().unwrap()),
            "$" => {
                let len: i64 = rest.parse().unwrap();
                if len < 0 {
                    return Reply::Bulk(None);
                }
                let mut buf = vec![0u8; len as usize + 2];
                self.reader.read_exact(&mut buf).unwrap();
                buf.truncate(len as usize);
                Reply::Bulk(Some(buf))
            }
            "*" => {
                let len: i64 = rest.parse().unwrap();
                if len < 0 {
                    return Reply::Array(None);
                }
                Reply::Array(Some((0..len).map(|_| self.read_reply()).collect()))
            }
            _ => panic!("bad reply line {line:?}"),
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn parse_id(text: &str) -> StreamId {
    let (ms, seq) = text.split_once('-').unwrap();
    StreamId::new(ms.parse().unwrap(), seq.parse().unwrap())
}

/// Checks that the server holds `value` under `key` (in the selected database), with
/// `expire` as its expiry.
fn assert_matches(conn: &mut Conn, key: &[u8], value: &Value, expire: Option<i64>) {
    let name = String::from_utf8_lossy(key).into_owned();
    assert_eq!(
        conn.call(&[&b"TYPE"[..], key]).text(),
        value.kind().name(),
        "{name}"
    );
    match value {
        Value::Str(s) => assert_eq!(&conn.call(&[&b"GET"[..], key]).bulk(), s, "{name}"),
        Value::List(items) => {
            let got: VecDeque<Vec<u8>> = conn
                .call(&[&b"LRANGE"[..], key, b"0", b"-1"])
                .bulks()
                .into();
            assert_eq!(got, VecDeque::from(items.to_vecs()), "{name}");
        }
        Value::Set(members) => {
            let got: HashSet<Vec<u8>> = conn
                .call(&[&b"SMEMBERS"[..], key])
                .bulks()
                .into_iter()
                .collect();
            let want: HashSet<Vec<u8>> = members.iter().map(|m| m.to_vec()).collect();
            assert_eq!(got, want, "{name}");
        }
        Value::Hash(hash) => {
            let flat = conn.call(&[&b"HGETALL"[..], key]).bulks();
            let got: Vec<(Vec<u8>, Vec<u8>)> = flat
                .chunks(2)
                .map(|pair| (pair[0].clone(), pair[1].clone()))
                .collect();
            let ours: Vec<(Vec<u8>, Vec<u8>)> =
                hash.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
            // Both keep the same form, and a compact hash (a listpack in Redis) the same
            // order.
            let encoding = conn.call(&[&b"OBJECT"[..], b"ENCODING", key]).bulk();
            assert_eq!(encoding, hash.encoding().as_bytes(), "{name}");
            if hash.is_compact() {
                assert_eq!(got, ours, "{name}");
            } else {
                let got: HashMap<_, _> = got.into_iter().collect();
                let ours: HashMap<_, _> = ours.into_iter().collect();
                assert_eq!(got, ours, "{name}");
            }
        }
        Value::ZSet(set) => {
            let flat = conn
                .call(&[&b"ZRANGE"[..], key, b"0", b"-1", b"WITHSCORES"])
                .bulks();
            let got: Vec<(Vec<u8>, f64)> = flat
                .chunks(2)
                .map(|pair| {
                    let score = String::from_utf8(pair[1].clone()).unwrap();
                    (pair[0].clone(), score.parse::<f64>().unwrap())
                })
                .collect();
            let expected: Vec<(Vec<u8>, f64)> = set.iter().map(|(m, s)| (m.to_vec(), s)).collect();
            assert_eq!(got, expected, "{name}");
        }
        Value::Stream(s) => assert_stream_matches(conn, key, s),
    }
    match expire {
        Some(ms) => {
            assert_eq!(conn.call(&[&b"PEXPIRETIME"[..], key]).int(), ms, "{name}");
            assert!(conn.call(&[&b"PTTL"[..], key]).int() > 0, "{name}");
        }
        None => assert_eq!(conn.call(&[&b"PTTL"[..], key]).int(), -1, "{name}"),
    }
}

fn assert_stream_matches(conn: &mut Conn, key: &[u8], s: &Stream) {
    let name = String::from_utf8_lossy(key).into_owned();
    let got: Vec<(String, Vec<Vec<u8>>)> = conn
        .call(&[&b"XRANGE"[..], key, b"-", b"+"])
        .array()
        .iter()
        .map(|entry| {
            let entry = entry.array();
            (entry[0].text(), entry[1].bulks())
        })
        .collect();
    let expected: Vec<(String, Vec<Vec<u8>>)> = s
        .range(StreamId::MIN, StreamId::MAX)
        .map(|(id, fields)| (id.to_string(), fields.clone()))
        .collect();
    assert_eq!(got, expected, "{name}");

    let info = conn
        .call(&[&b"XINFO"[..], b"STREAM", key, b"FULL", b"COUNT", b"0"])
        .map();
    assert_eq!(info["length"].int(), s.len() as i64, "{name}");
    assert_eq!(
        info["radix-tree-keys"].int(),
        s.node_count() as i64,
        "{name}"
    );
    assert_eq!(
        info["last-generated-id"].text(),
        s.last_id.to_string(),
        "{name}"
    );
    assert_eq!(
        info["max-deleted-entry-id"].text(),
        s.max_deleted_id.to_string(),
        "{name}"
    );
    assert_eq!(
        info["entries-added"].int(),
        s.entries_added as i64,
        "{name}"
    );
    assert_eq!(
        info["recorded-first-entry-id"].text(),
        s.first_id.to_string(),
        "{name}"
    );
    let groups = info["groups"].array();
    assert_eq!(groups.len(), s.groups.len(), "{name}");
    for (reply, (group_name, group)) in groups.iter().zip(&s.groups) {
        let g = reply.map();
        assert_eq!(g["name"].bulk(), *group_name, "{name}");
        assert_eq!(
            g["last-delivered-id"].text(),
            group.last_id.to_string(),
            "{name}"
        );
        let entries_read = match &g["entries-read"] {
            Reply::Bulk(None) => None,
            other => Some(other.int()),
        };
        assert_eq!(entries_read, group.entries_read, "{name}");
        let pending: Vec<(StreamId, Pending)> = g["pending"]
            .array()
            .iter()
            .map(|p| {
                let p = p.array();
                (
                    parse_id(&p[0].text()),
                    Pending {
                        consumer: p[1].bulk(),
                        delivery_ms: p[2].int(),
                        deliveries: p[3].int() as u64,
                    },
                )
            })
            .collect();
        let expected: Vec<(StreamId, Pending)> = group
            .pending
            .iter()
            .map(|(id, p)| (*id, p.clone()))
            .collect();
        assert_eq!(pending, expected, "{name}");
        let consumers = g["consumers"].array();
        assert_eq!(consumers.len(), group.consumers.len(), "{name}");
        for (reply, (consumer_name, consumer)) in consumers.iter().zip(&group.consumers) {
            let c = reply.map();
            assert_eq!(c["name"].bulk(), *consumer_name, "{name}");
            assert_eq!(c["seen-time"].int(), consumer.seen_ms, "{name}");
            let ids: Vec<StreamId> = c["pending"]
                .array()
                .iter()
                .map(|p| parse_id(&p.array()[0].text()))
                .collect();
            assert_eq!(
                ids,
                consumer.pending.iter().copied().collect::<Vec<_>>(),
                "{name}"
            );
        }
    }
}

fn strings(items: impl IntoIterator<Item = String>) -> Vec<Vec<u8>> {
    items.into_iter().map(String::into_bytes).collect()
}

/// A key as the tests hold it: database, name, value, expiry.
type Key = (u64, Vec<u8>, Value, Option<i64>);

/// Values of every type and encoding, as Latch holds them.
fn latch_values(now: i64) -> Vec<Key> {
    let mut keys: Vec<Key> = Vec::new();
    let mut add = |db: u64, key: &str, value: Value, expire: Option<i64>| {
        keys.push((db, b(key), value, expire));
    };
    add(0, "str:small", Value::Str(b("hello")), None);
    add(0, "str:int", Value::Str(b("12345")), None);
    add(0, "str:negative", Value::Str(b("-42")), None);
    add(0, "str:bigint", Value::Str(b("12345678901234")), None);
    add(0, "str:notint", Value::Str(b("007")), None);
    add(0, "str:empty", Value::Str(Vec::new()), None);
    add(0, "str:binary", Value::Str((0..=255).collect()), None);
    add(0, "str:long", Value::Str(b(&"latch ".repeat(500))), None);
    add(
        0,
        "str:expiring",
        Value::Str(b("soon")),
        Some(now + 3_600_000),
    );
    add(0, "str:expired", Value::Str(b("gone")), Some(now - 1000));

    add(
        0,
        "list:small",
        Value::List(
            strings(["a", "1", "-5", "hello"].map(String::from))
                .into_iter()
                .collect::<VecDeque<_>>()
                .into(),
        ),
        None,
    );
    let big: Vec<String> = (0..1000)
        .map(|i| match i % 4 {
            0 => i.to_string(),
            1 => format!("{i:0100}"),
            2 => "z".repeat(i % 300),
            _ => format!("item {i}"),
        })
        .collect();
    add(
        0,
        "list:big",
        Value::List(strings(big).into_iter().collect::<VecDeque<_>>().into()),
        None,
    );
    add(
        0,
        "list:hugeitem",
        Value::List(
            strings(["x".to_string(), "y".repeat(20_000), "z".to_string()])
                .into_iter()
                .collect::<VecDeque<_>>()
                .into(),
        ),
        None,
    );

    let set = |items: Vec<String>| {
        let items = strings(items);
        Value::Set(latch_keyspace::Set::from_members(
            items.iter().map(|m| &m[..]),
        ))
    };
    add(
        0,
        "set:ints",
        set((1..=10).map(|i| (i * 7 - 20).to_string()).collect()),
        None,
    );
    add(
        0,
        "set:wideints",
        set(vec!["1".into(), "-9000000000".into()]),
        None,
    );
    add(
        0,
        "set:manyints",
        set((0..600).map(|i| (i * 3).to_string()).collect()),
        None,
    );
    add(
        0,
        "set:strings",
        set((0..20).map(|i| format!("member-{i}")).collect()),
        None,
    );

    let hash = |pairs: Vec<(String, String)>| Value::Hash(pairs.into_iter().collect());
    add(
        0,
        "hash:small",
        hash((0..10).map(|i| (format!("f{i}"), i.to_string())).collect()),
        None,
    );
    // Fields out of sorted order, integers of each listpack width, an empty value: a
    // compact hash keeps its order through the file.
    add(
        0,
        "hash:ordered",
        hash(
            [
                ("zeta", "1"),
                ("alpha", "x"),
                ("42", "-7"),
                ("mid", ""),
                ("-1", "9223372036854775807"),
                ("big", "-4097"),
                ("wide", "8388608"),
            ]
            .into_iter()
            .map(|(f, v)| (f.to_string(), v.to_string()))
            .collect(),
        ),
        None,
    );
    add(
        0,
        "hash:big",
        hash(
            (0..600)
                .map(|i| (format!("field{i}"), "v".repeat(i % 30)))
                .collect(),
        ),
        None,
    );
    add(
        0,
        "hash:longvalue",
        hash(vec![
            ("f".into(), "long".repeat(30)),
            ("g".into(), "1".into()),
        ]),
        None,
    );

    let zset = |pairs: Vec<(String, f64)>| {
        let mut set = SortedSet::new();
        for (m, s) in pairs {
            set.insert(m.as_bytes(), s);
        }
        Value::ZSet(set)
    };
    let scores = [
        1.0,
        2.5,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.1,
        -3.0,
        1e300,
        123456789.125,
        -1e-20,
    ];
    add(
        0,
        "zset:small",
        zset(
            scores
                .iter()
                .enumerate()
                .map(|(i, s)| (format!("m{i}"), *s))
                .collect(),
        ),
        None,
    );
    add(
        0,
        "zset:big",
        zset(
            (0..200)
                .map(|i| (format!("member{i}"), i as f64 * 0.37))
                .collect(),
        ),
        None,
    );
    add(
        0,
        "zset:longmember",
        zset(vec![("m".repeat(70), 1.0), ("short".into(), 2.0)]),
        None,
    );

    add(
        0,
        "stream:main",
        Value::Stream(Box::new(sample_stream())),
        None,
    );
    let mut empty = Stream::new();
    empty.last_id = StreamId::new(5, 5);
    empty.entries_added = 3;
    empty.max_deleted_id = StreamId::new(5, 5);
    empty
        .groups
        .insert(b("g"), Group::new(StreamId::new(5, 5), Some(3)));
    add(0, "stream:empty", Value::Stream(Box::new(empty)), None);

    add(
        3,
        "other:db",
        Value::Str(b("in db 3")),
        Some(now + 7_200_000),
    );
    add(
        3,
        "other:list",
        Value::List(
            strings(["p".into(), "q".into()])
                .into_iter()
                .collect::<VecDeque<_>>()
                .into(),
        ),
        None,
    );
    keys
}

/// A stream of 250 entries over three nodes, with two consumer groups.
fn sample_stream() -> Stream {
    let limits = NodeLimits {
        max_entries: 100,
        max_bytes: 4096,
    };
    let base = 1_700_000_000_000u64;
    let mut s = Stream::new();
    for i in 1..=250u64 {
        let fields = if i % 10 == 0 {
            strings(["other".to_string(), i.to_string()])
        } else {
            strings(["name".into(), format!("n{i}"), "n".into(), i.to_string()])
        };
        s.add(NewId::Exact(StreamId::new(base + i, 0)), fields, 0, limits)
            .unwrap();
    }
    let ids: Vec<StreamId> = s
        .range(StreamId::MIN, StreamId::MAX)
        .map(|(id, _)| *id)
        .collect();
    let seen = base as i64 + 10_000;
    let mut g1 = Group::new(ids[19], Some(20));
    g1.create_consumer(b"alice", seen);
    g1.create_consumer(b"bob", seen + 5);
    g1.create_consumer(b"carol", seen + 9);
    for (k, id) in ids[..8].iter().enumerate() {
        let owner: &[u8] = if k < 5 { b"alice" } else { b"bob" };
        g1.deliver(*id, owner, seen - 100 + k as i64);
    }
    if let Some(p) = g1.transfer(ids[2], b"alice") {
        p.deliveries = 4;
    }
    s.groups.insert(b("g1"), g1);
    s.groups.insert(b("g2"), Group::new(s.last_id, None));
    s
}

fn write_rdb(path: &Path, keys: &[Key]) {
    let mut writer = Writer::new(fs::File::create(path).unwrap()).unwrap();
    writer.aux("redis-ver", b"7.0.15").unwrap();
    writer.aux("redis-bits", b"64").unwrap();
    writer
        .aux("ctime", now_ms().div_euclid(1000).to_string().as_bytes())
        .unwrap();
    writer.aux("used-mem", b"1000000").unwrap();
    writer.aux("aof-base", b"0").unwrap();
    writer.function(LIBRARY.as_bytes()).unwrap();
    for db in [0, 3] {
        let in_db: Vec<&Key> = keys.iter().filter(|k| k.0 == db).collect();
        let expires = in_db.iter().filter(|k| k.3.is_some()).count() as u64;
        writer.select_db(db, in_db.len() as u64, expires).unwrap();
        for (_, key, value, expire) in in_db {
            writer.key(key, value, *expire).unwrap();
        }
    }
    writer.finish().unwrap().sync_all().unwrap();
}

const LIBRARY: &str =
    "#!lua name=latchlib\nredis.register_function('latchfn', function(keys, args) return 42 end)";

/// `DEBUG OBJECT`'s count of quicklist nodes.
fn list_nodes(conn: &mut Conn, key: &str) -> String {
    let info = conn.call(&["DEBUG", "OBJECT", key]).text();
    info.split_whitespace()
        .find_map(|part| part.strip_prefix("ql_nodes:"))
        .unwrap()
        .to_string()
}

#[test]
fn latch_rdb_loads_in_redis() {
    let dir = TempDir::new("write");
    let path = dir.0.join("latch.rdb");
    let now = now_ms();
    let keys = latch_values(now);
    write_rdb(&path, &keys);

    let check = Command::new("redis-check-rdb")
        .arg(&path)
        .output()
        .expect("redis-check-rdb must be installed to run these tests");
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "redis-check-rdb failed:\n{report}");
    assert!(report.contains("RDB looks OK"), "{report}");

    let server = Server::start(&dir.0, "latch.rdb");
    let mut conn = server.connect();
    for db in [0u64, 3] {
        conn.cmd(&format!("SELECT {db}"));
        let mut live = 0;
        for (_, key, value, expire) in keys.iter().filter(|k| k.0 == db) {
            if expire.is_some_and(|ms| ms < now) {
                assert_eq!(conn.call(&[&b"EXISTS"[..], key]).int(), 0);
                continue;
            }
            live += 1;
            assert_matches(&mut conn, key, value, *expire);
        }
        assert_eq!(conn.cmd("DBSIZE").int(), live);
    }
    conn.cmd("SELECT 0");

    // Lists are split into nodes where Redis itself splits them.
    for key in ["list:big", "list:hugeitem"] {
        let (_, _, Value::List(items), _) = keys.iter().find(|k| k.1 == key.as_bytes()).unwrap()
        else {
            unreachable!()
        };
        let pushed = format!("{key}:pushed");
        let mut args: Vec<&[u8]> = vec![b"RPUSH", pushed.as_bytes()];
        let items = items.to_vecs();
        args.extend(items.iter().map(Vec::as_slice));
        conn.ok(&args);
        assert_eq!(
            list_nodes(&mut conn, key),
            list_nodes(&mut conn, &pushed),
            "{key}"
        );
    }

    // The function library came along.
    assert_eq!(conn.cmd("FCALL latchfn 0").int(), 42);
}

/// Fills a server with every type in its small and large encodings.
fn populate(conn: &mut Conn) {
    conn.cmd("FLUSHALL");
    conn.ok(&["SET", "s:small", "hello"]);
    conn.ok(&["SET", "s:int", "12345"]);
    conn.ok(&["SET", "s:minint", "-9223372036854775808"]);
    conn.ok(&["SET", "s:float", "3.14"]);
    conn.ok(&["SET", "s:long", &"abc".repeat(400)]);
    conn.ok(&[&b"SET"[..], b"s:binary", &(0..=255).collect::<Vec<u8>>()]);
    conn.ok(&["SET", "s:empty", ""]);
    conn.ok(&["SET", "s:expiring", "v", "PX", "3600000"]);

    conn.ok(&["RPUSH", "l:small", "a", "b", "c", "1", "-2", "3000000000"]);
    let mut args: Vec<String> = vec!["RPUSH".into(), "l:big".into()];
    args.extend((0..300).map(|i| format!("item-{i}-{}", "x".repeat(i % 50))));
    args.insert(150, "w".repeat(10_000));
    conn.ok(&args);
    let mut args: Vec<String> = vec!["RPUSH".into(), "l:compressible".into()];
    args.extend((0..200).map(|_| "aaaaaaaaaaaaaaaaaaaa".to_string()));
    conn.ok(&args);

    conn.ok(&[
        "SADD",
        "set:intset",
        "1",
        "2",
        "3",
        "-5",
        "100000",
        "9000000000",
    ]);
    let mut args: Vec<String> = vec!["SADD".into(), "set:bigints".into()];
    args.extend((0..600).map(|i| (i * 11).to_string()));
    conn.ok(&args);
    conn.ok(&["SADD", "set:strings", "a", "b", "c", "d"]);

    conn.ok(&["HSET", "h:small", "f1", "v1", "f2", "2", "f3", "-3"]);
    // Hashes stay listpacks up to 512 fields in Redis 7.0: 200 is still compact.
    for (key, fields) in [("h:medium", 200), ("h:big", 600)] {
        let mut args: Vec<String> = vec!["HSET".into(), key.into()];
        for i in 0..fields {
            args.push(format!("field{i}"));
            args.push(format!("value{i}"));
        }
        conn.ok(&args);
    }
    conn.ok(&["HSET", "h:longvalue", "f", &"v".repeat(100)]);

    conn.ok(&[
        "ZADD", "z:small", "1", "a", "2.5", "b", "-inf", "c", "+inf", "d", "0.1", "e",
    ]);
    let mut args: Vec<String> = vec!["ZADD".into(), "z:big".into()];
    for i in 0..200 {
        args.push(format!("{}", i as f64 * 0.37));
        args.push(format!("member{i}"));
    }
    conn.ok(&args);
    conn.ok(&["ZADD", "z:longmember", "1", &"m".repeat(70)]);

    for i in 1..=150 {
        let id = format!("{i}-0");
        if i % 7 == 0 {
            conn.ok(&["XADD", "x:main", &id, "other", &i.to_string()]);
        } else {
            conn.ok(&[
                "XADD",
                "x:main",
                &id,
                "name",
                &format!("n{i}"),
                "n",
                &i.to_string(),
            ]);
        }
    }
    conn.cmd("XDEL x:main 10-0 20-0 1-0");
    conn.ok(&["XGROUP", "CREATE", "x:main", "g1", "0"]);
    conn.cmd("XREADGROUP GROUP g1 alice COUNT 5 STREAMS x:main >");
    conn.cmd("XREADGROUP GROUP g1 bob COUNT 3 STREAMS x:main >");
    conn.cmd("XACK x:main g1 3-0");
    conn.ok(&["XGROUP", "CREATE", "x:main", "g2", "$"]);
    conn.ok(&["XGROUP", "CREATECONSUMER", "x:main", "g2", "carol"]);
    conn.ok(&["XGROUP", "CREATE", "x:empty", "g", "0", "MKSTREAM"]);

    conn.ok(&["FUNCTION", "LOAD", LIBRARY]);
    conn.cmd("SELECT 2");
    conn.ok(&["SET", "other", "1"]);
    conn.cmd("SELECT 0");
}

#[test]
fn redis_rdb_reads_in_latch() {
    let dir = TempDir::new("read");
    let server = Server::start(&dir.0, "dump.rdb");
    let mut conn = server.connect();
    populate(&mut conn);
    assert_eq!(conn.cmd("SAVE"), Reply::Status("OK".into()));

    let data = fs::read(dir.0.join("dump.rdb")).unwrap();
    let mut reader = Reader::new(&data[..]).unwrap();
    assert_eq!(reader.version(), 10);
    let mut db = 0;
    let mut keys: Vec<Key> = Vec::new();
    let mut aux = HashMap::new();
    let mut functions = Vec::new();
    while let Some(item) = reader.next().unwrap() {
        match item {
            Item::Aux { name, value } => {
                aux.insert(String::from_utf8(name).unwrap(), value);
            }
            Item::Function(code) => functions.push(code),
            Item::SelectDb(n) => db = n,
            Item::ResizeDb { .. } => {}
            Item::EmptyKey(key) => panic!("Redis wrote an empty key {key:?}"),
            Item::Key {
                key,
                value,
                expire_unix_ms,
                ..
            } => keys.push((db, key, value, expire_unix_ms)),
        }
    }
    assert_eq!(reader.offset(), data.len() as u64);
    assert_eq!(aux["redis-ver"], b"7.0.15");
    assert_eq!(functions, vec![b(LIBRARY)]);

    for db in [0u64, 2] {
        conn.cmd(&format!("SELECT {db}"));
        let in_db: Vec<&Key> = keys.iter().filter(|k| k.0 == db).collect();
        assert_eq!(conn.cmd("DBSIZE").int(), in_db.len() as i64);
        for (_, key, value, expire) in in_db {
            assert_matches(&mut conn, key, value, *expire);
        }
    }
    assert_eq!(keys.len(), 24);
}

#[test]
fn dump_payloads_cross_over() {
    let dir = TempDir::new("dump");
    let server = Server::start(&dir.0, "dump.rdb");
    let mut conn = server.connect();
    populate(&mut conn);

    // Redis' payloads decode to what Redis serves.
    let names = conn.cmd("KEYS *").bulks();
    assert_eq!(names.len(), 23);
    for key in names {
        let payload = conn.call(&[&b"DUMP"[..], &key]).bulk();
        let value = restore_payload(&payload).unwrap();
        let expire = match conn.call(&[&b"PEXPIRETIME"[..], &key]).int() {
            -1 => None,
            ms => Some(ms),
        };
        assert_matches(&mut conn, &key, &value, expire);
    }

    // Ours restore in Redis as the values they came from.
    for (db, key, value, _) in latch_values(now_ms()) {
        if db != 0 {
            continue;
        }
        let payload = dump_payload(&value);
        assert_eq!(restore_payload(&payload).unwrap(), value);
        let restored = [b"restored:".as_slice(), &key].concat();
        let reply = conn.call(&[&b"RESTORE"[..], &restored, b"0", &payload]);
        assert_eq!(
            reply,
            Reply::Status("OK".into()),
            "{}",
            String::from_utf8_lossy(&key)
        );
        assert_matches(&mut conn, &restored, &value, None);
    }
}
