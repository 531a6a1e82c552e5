//! Replication with Redis 7.0's protocol (REPLICAOF, PSYNC, REPLCONF, WAIT, ROLE, INFO
//! replication), between Latch and Debian's redis-server 7.0 in every direction: full
//! syncs (disk and diskless), the command stream after them, chains, partial resyncs after
//! a cut link, read-only replicas, promotion, WAIT, and how a replica treats keys its
//! primary has not expired yet.
//!
//! Data is compared by value (TYPE, then GET / LRANGE / sorted SMEMBERS / sorted HGETALL /
//! ZRANGE WITHSCORES / XRANGE and XINFO GROUPS / PFCOUNT, and whether the key has a TTL),
//! never by DUMP bytes: two servers may legitimately encode the same value differently.
//!
//! Debugging aid: with `REPLICATION_TESTS_ALL_REDIS=1` in the environment every server these
//! tests would run as Latch runs as redis-server instead, which checks the tests' own
//! expectations against Redis 7.0 (they were written that way and all pass so).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use latch_testkit::{Program, Server};
use redis::{Connection, Value};

/// How long any wait for the replication state lasts before the test fails.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Options every primary gets: Redis' default diskless sync waits 5 seconds for more
/// replicas before it starts a transfer.
const PRIMARY_ARGS: &[&str] = &["--repl-diskless-sync-delay", "0"];

/// The program for the servers the test names as Latch: redis-server when
/// `REPLICATION_TESTS_ALL_REDIS=1` (to check the expectations against Redis 7.0).
fn latch() -> Program {
    if std::env::var("REPLICATION_TESTS_ALL_REDIS").is_ok_and(|v| v == "1") {
        Program::Redis
    } else {
        Program::Latch
    }
}

fn start_primary(program: Program, extra: &[&str]) -> Server {
    let mut args: Vec<&str> = PRIMARY_ARGS.to_vec();
    args.extend_from_slice(extra);
    Server::start(program, &args)
}

fn start_replica(program: Program, primary: &Server, extra: &[&str]) -> Server {
    let port = primary.port.to_string();
    let mut args: Vec<&str> = vec!["--replicaof", "127.0.0.1", &port];
    args.extend_from_slice(extra);
    Server::start(program, &args)
}

fn connect(server: &Server) -> Connection {
    let conn = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap_or_else(|e| panic!("connect to {:?} on {}: {e}", server.program, server.port));
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    conn
}

/// The `name:value` lines of `INFO <section>`.
fn info(conn: &mut Connection, section: &str) -> BTreeMap<String, String> {
    let text: String = redis::cmd("INFO").arg(section).query(conn).unwrap();
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.to_string(), value.trim_end().to_string()))
        .collect()
}

fn info_field(conn: &mut Connection, section: &str, field: &str) -> Option<String> {
    info(conn, section).remove(field)
}

fn info_int(conn: &mut Connection, section: &str, field: &str) -> i64 {
    let value =
        info_field(conn, section, field).unwrap_or_else(|| panic!("INFO {section} has no {field}"));
    value
        .parse()
        .unwrap_or_else(|_| panic!("INFO {section} {field}:{value} is not an integer"))
}

/// Polls `probe` every 20 ms until it says done; panics with `what` and the last value it
/// saw after `timeout`. Returns that last value.
fn wait_until<V: Debug>(timeout: Duration, what: &str, mut probe: impl FnMut() -> (bool, V)) -> V {
    let deadline = Instant::now() + timeout;
    loop {
        let (done, value) = probe();
        if done {
            return value;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}; last value: {value:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_link_up(replica: &mut Connection) {
    wait_until(TIMEOUT, "master_link_status:up on the replica", || {
        let status = info_field(replica, "replication", "master_link_status");
        (status.as_deref() == Some("up"), status)
    });
}

/// Waits until the primary's `master_repl_offset` equals the replica's `slave_repl_offset`.
fn wait_offsets_equal(primary: &mut Connection, replica: &mut Connection) -> i64 {
    wait_until(
        TIMEOUT,
        "primary master_repl_offset == replica slave_repl_offset",
        || {
            let primary_offset = info_field(primary, "replication", "master_repl_offset");
            let replica_offset = info_field(replica, "replication", "slave_repl_offset");
            (
                primary_offset.is_some() && primary_offset == replica_offset,
                (primary_offset, replica_offset),
            )
        },
    )
    .0
    .unwrap()
    .parse()
    .unwrap()
}

fn run(conn: &mut Connection, args: &[&str]) -> Value {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query(conn)
        .unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

fn select(conn: &mut Connection, db: u32) {
    redis::cmd("SELECT").arg(db).query::<()>(conn).unwrap();
}

/// One line of a reply read from a raw socket: the exact error strings, without the
/// client library's parsing of error codes.
fn raw_reply_line(port: u16, args: &[&str]) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut request = format!("*{}\r\n", args.len());
    for arg in args {
        request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    stream.write_all(request.as_bytes()).unwrap();
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).unwrap();
    line.trim_end().to_string()
}

const LIBRARY: &str =
    "#!lua name=lib\nredis.register_function('f', function(keys, args) return 1 end)";

/// A key of every type and encoding, with and without TTLs, in databases 0 and 3, and a
/// function library.
fn fill_every_type(conn: &mut Connection) {
    select(conn, 0);
    run(conn, &["SET", "str:plain", "hello world"]);
    run(conn, &["SET", "str:int", "12345"]);
    run(conn, &["SET", "str:px", "with px", "PX", "600000"]);
    run(conn, &["SET", "str:expire", "with expire"]);
    run(conn, &["EXPIRE", "str:expire", "600"]);
    let big: String = (0..20_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    run(conn, &["SET", "str:big", &big]);

    let mut small_list = redis::cmd("RPUSH");
    small_list.arg("list:small");
    for i in 0..10 {
        small_list.arg(format!("item-{i}"));
    }
    small_list.query::<i64>(conn).unwrap();
    let mut big_list = redis::cmd("RPUSH");
    big_list.arg("list:big");
    for i in 0..1000 {
        big_list.arg(format!("element-{i}"));
    }
    big_list.query::<i64>(conn).unwrap();

    let mut int_set = redis::cmd("SADD");
    int_set.arg("set:int");
    for i in 0..50 {
        int_set.arg(i * 7 - 100);
    }
    int_set.query::<i64>(conn).unwrap();
    run(
        conn,
        &["SADD", "set:str", "apple", "banana", "cherry", "date"],
    );

    run(
        conn,
        &["HSET", "hash:small", "f1", "v1", "f2", "v2", "n", "3"],
    );
    let mut big_hash = redis::cmd("HSET");
    big_hash.arg("hash:big");
    for i in 0..1000 {
        big_hash.arg(format!("field-{i}")).arg(format!("value-{i}"));
    }
    big_hash.query::<i64>(conn).unwrap();

    run(
        conn,
        &["ZADD", "zset:small", "1", "a", "2.5", "b", "-3", "c"],
    );
    let mut big_zset = redis::cmd("ZADD");
    big_zset.arg("zset:big");
    for i in 0..1000 {
        big_zset.arg(f64::from(i) * 1.5).arg(format!("member-{i}"));
    }
    big_zset.query::<i64>(conn).unwrap();

    run(conn, &["XADD", "stream", "1-1", "f", "v1"]);
    run(conn, &["XADD", "stream", "2-1", "f", "v2", "g", "w2"]);
    run(conn, &["XADD", "stream", "3-1", "f", "v3"]);
    run(conn, &["XGROUP", "CREATE", "stream", "grp", "0"]);
    run(
        conn,
        &[
            "XREADGROUP",
            "GROUP",
            "grp",
            "alice",
            "COUNT",
            "1",
            "STREAMS",
            "stream",
            ">",
        ],
    );

    run(conn, &["PFADD", "hll", "a", "b", "c", "d", "e", "f", "g"]);

    select(conn, 3);
    run(conn, &["SET", "db3:str", "in three"]);
    run(conn, &["RPUSH", "db3:list", "x", "y", "z"]);
    run(conn, &["HSET", "db3:hash", "k", "v"]);
    select(conn, 0);

    run(conn, &["FUNCTION", "LOAD", LIBRARY]);
}

/// Writes of every kind after the full sync: they reach the replica as the command stream.
fn streamed_writes(conn: &mut Connection) {
    select(conn, 0);
    run(conn, &["SET", "w:ex", "v", "EX", "100"]);
    for _ in 0..3 {
        run(conn, &["INCR", "w:counter"]);
    }
    run(conn, &["LPUSH", "list:small", "pushed-1", "pushed-2"]);
    run(conn, &["LPUSH", "w:newlist", "one"]);
    run(conn, &["HSET", "hash:small", "f3", "v3"]);
    run(conn, &["HSET", "hash:big", "field-1000", "value-1000"]);
    run(conn, &["ZADD", "zset:small", "4", "d", "10", "a"]);
    run(conn, &["SADD", "set:int", "99999"]);
    run(conn, &["SADD", "set:str", "elderberry"]);
    run(conn, &["DEL", "str:plain", "list:big"]);
    run(conn, &["EXPIRE", "hash:big", "1000"]);
    run(conn, &["XADD", "stream", "4-1", "f", "v4"]);
    run(conn, &["XACK", "stream", "grp", "1-1"]);
    run(conn, &["PFADD", "hll", "h", "i", "j"]);
    run(
        conn,
        &[
            "EVAL",
            "redis.call('set',KEYS[1],ARGV[1]) redis.call('incr',KEYS[2])",
            "2",
            "a",
            "b",
            "v",
        ],
    );
    let replies: (String, i64) = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("tx:1")
        .arg("in multi")
        .cmd("INCRBY")
        .arg("tx:2")
        .arg(5)
        .query(conn)
        .unwrap();
    assert_eq!(replies, ("OK".to_string(), 5));
    select(conn, 3);
    run(conn, &["SET", "db3:new", "later"]);
    run(conn, &["DEL", "db3:list"]);
    run(conn, &["RPUSH", "db3:list2", "p", "q"]);
    select(conn, 5);
    run(conn, &["SET", "db5:str", "gone soon"]);
    run(conn, &["RPUSH", "db5:list", "gone", "soon"]);
    run(conn, &["FLUSHDB"]);
    select(conn, 0);
    run(conn, &["SET", "w:last", "the end"]);
}

/// A readable, canonical rendering of a reply.
fn render(value: &Value) -> String {
    match value {
        Value::Nil => "nil".to_string(),
        Value::Int(n) => n.to_string(),
        Value::BulkString(bytes) => format!("{:?}", String::from_utf8_lossy(bytes)),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".to_string(),
        Value::Array(items) | Value::Set(items) => {
            let items: Vec<String> = items.iter().map(render).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Map(pairs) => {
            let pairs: Vec<String> = pairs
                .iter()
                .map(|(k, v)| format!("{}: {}", render(k), render(v)))
                .collect();
            format!("{{{}}}", pairs.join(", "))
        }
        other => format!("{other:?}"),
    }
}

fn sorted_strings(mut items: Vec<Vec<u8>>) -> String {
    items.sort();
    let items: Vec<String> = items
        .iter()
        .map(|item| format!("{:?}", String::from_utf8_lossy(item)))
        .collect();
    format!("[{}]", items.join(", "))
}

/// (database, key) -> (TYPE, canonical value, whether PTTL > 0).
type Dump = BTreeMap<(u32, String), (String, String, bool)>;

fn dump_all(conn: &mut Connection) -> Dump {
    let mut dump = Dump::new();
    for db in 0..16 {
        select(conn, db);
        let mut keys = BTreeSet::new();
        let mut cursor = "0".to_string();
        loop {
            let (next, batch): (String, Vec<Vec<u8>>) = redis::cmd("SCAN")
                .arg(&cursor)
                .arg("COUNT")
                .arg(1000)
                .query(conn)
                .unwrap();
            keys.extend(batch);
            cursor = next;
            if cursor == "0" {
                break;
            }
        }
        for key in keys {
            let kind: String = redis::cmd("TYPE").arg(&key).query(conn).unwrap();
            let query = |name: &str, conn: &mut Connection, extra: &[&str]| -> Value {
                let mut cmd = redis::cmd(name);
                cmd.arg(&key);
                for arg in extra {
                    cmd.arg(*arg);
                }
                cmd.query(conn).unwrap()
            };
            let value = match kind.as_str() {
                "none" => continue,
                "string" => {
                    let bytes: Vec<u8> = redis::cmd("GET").arg(&key).query(conn).unwrap();
                    if bytes.starts_with(b"HYLL") {
                        let count: i64 = redis::cmd("PFCOUNT").arg(&key).query(conn).unwrap();
                        format!("hll count {count}")
                    } else {
                        format!("{:?}", String::from_utf8_lossy(&bytes))
                    }
                }
                "list" => render(&query("LRANGE", conn, &["0", "-1"])),
                "set" => {
                    let members: Vec<Vec<u8>> =
                        redis::cmd("SMEMBERS").arg(&key).query(conn).unwrap();
                    sorted_strings(members)
                }
                "hash" => {
                    let pairs: Vec<(Vec<u8>, Vec<u8>)> =
                        redis::cmd("HGETALL").arg(&key).query(conn).unwrap();
                    let joined: Vec<Vec<u8>> = pairs
                        .into_iter()
                        .map(|(mut field, value)| {
                            field.push(b'=');
                            field.extend(value);
                            field
                        })
                        .collect();
                    sorted_strings(joined)
                }
                "zset" => render(&query("ZRANGE", conn, &["0", "-1", "WITHSCORES"])),
                "stream" => {
                    let entries = render(&query("XRANGE", conn, &["-", "+"]));
                    let mut info = redis::cmd("XINFO");
                    info.arg("GROUPS").arg(&key);
                    let groups = render(&info.query(conn).unwrap());
                    format!("entries {entries} groups {groups}")
                }
                other => panic!("unexpected type {other} for key {key:?}"),
            };
            let pttl: i64 = redis::cmd("PTTL").arg(&key).query(conn).unwrap();
            dump.insert(
                (db, String::from_utf8_lossy(&key).into_owned()),
                (kind, value, pttl > 0),
            );
        }
    }
    select(conn, 0);
    dump
}

fn assert_same_data(primary: &mut Connection, replica: &mut Connection, when: &str) -> Dump {
    let expected = dump_all(primary);
    assert!(
        expected.len() > 10,
        "{when}: the primary holds only {} keys",
        expected.len()
    );
    let actual = dump_all(replica);
    assert_eq!(actual, expected, "{when}: the replica's data differs");
    expected
}

/// The library names `FUNCTION LIST` answers (RESP2: each library a flat array).
fn function_libraries(conn: &mut Connection) -> Vec<String> {
    let Value::Array(libraries) = run(conn, &["FUNCTION", "LIST"]) else {
        panic!("FUNCTION LIST is not an array");
    };
    libraries
        .iter()
        .filter_map(|library| {
            let Value::Array(fields) = library else {
                return None;
            };
            fields.chunks(2).find_map(|pair| match pair {
                [Value::BulkString(name), Value::BulkString(value)]
                    if name.as_slice() == b"library_name" =>
                {
                    Some(String::from_utf8_lossy(value).into_owned())
                }
                _ => None,
            })
        })
        .collect()
}

/// Full sync of every type, then the command stream, then WAIT: `primary` -> `replica`.
fn full_sync_then_stream(primary: Program, primary_extra: &[&str], replica: Program) {
    let primary_server = start_primary(primary, primary_extra);
    let mut p = connect(&primary_server);
    fill_every_type(&mut p);
    let replica_server = start_replica(replica, &primary_server, &[]);
    let mut r = connect(&replica_server);
    wait_link_up(&mut r);
    wait_offsets_equal(&mut p, &mut r);
    let before = assert_same_data(&mut p, &mut r, "after the full sync");
    assert!(before.contains_key(&(3, "db3:list".to_string())));
    assert!(before[&(0, "str:px".to_string())].2, "str:px has a TTL");

    streamed_writes(&mut p);
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut p).unwrap();
    assert_eq!(acked, 1, "WAIT 1 5000");
    wait_offsets_equal(&mut p, &mut r);
    let after = assert_same_data(&mut p, &mut r, "after the streamed writes");
    assert_eq!(after[&(0, "a".to_string())].1, "\"v\"");
    assert_eq!(after[&(0, "b".to_string())].1, "\"1\"");
    assert_eq!(after[&(0, "tx:2".to_string())].1, "\"5\"");
    assert!(after[&(0, "w:ex".to_string())].2, "w:ex has a TTL");
    assert!(
        !after.keys().any(|(db, _)| *db == 5),
        "database 5 was flushed"
    );
    assert!(!after.contains_key(&(0, "str:plain".to_string())));
    assert_eq!(function_libraries(&mut r), vec!["lib".to_string()]);
}

#[test]
fn redis_server_replicates_from_latch() {
    full_sync_then_stream(latch(), &[], Program::Redis);
}

#[test]
fn latch_replicates_from_redis_server() {
    full_sync_then_stream(Program::Redis, &[], latch());
}

#[test]
fn latch_replicates_from_latch_disk_and_diskless() {
    for diskless in ["yes", "no"] {
        full_sync_then_stream(latch(), &["--repl-diskless-sync", diskless], latch());
    }
}

#[test]
fn chain_redis_latch_redis() {
    let primary_server = start_primary(Program::Redis, &[]);
    let mut p = connect(&primary_server);
    fill_every_type(&mut p);
    let middle_server = start_replica(latch(), &primary_server, PRIMARY_ARGS);
    let mut m = connect(&middle_server);
    wait_link_up(&mut m);
    wait_offsets_equal(&mut p, &mut m);
    let end_server = start_replica(Program::Redis, &middle_server, &[]);
    let mut e = connect(&end_server);
    wait_link_up(&mut e);
    wait_offsets_equal(&mut m, &mut e);
    assert_same_data(&mut p, &mut m, "primary and middle after the full syncs");
    assert_same_data(&mut p, &mut e, "primary and end after the full syncs");

    streamed_writes(&mut p);
    let fields = |conn: &mut Connection| {
        let info = info(conn, "replication");
        (
            info.get("master_replid").cloned(),
            info.get("master_repl_offset").cloned(),
        )
    };
    wait_until(
        TIMEOUT,
        "the same master_replid and master_repl_offset on all three",
        || {
            let all = [fields(&mut p), fields(&mut m), fields(&mut e)];
            let same = all[0].0.is_some() && all[0].1.is_some() && all.iter().all(|f| *f == all[0]);
            (same, all)
        },
    );
    wait_offsets_equal(&mut p, &mut m);
    wait_offsets_equal(&mut m, &mut e);
    let primary_dump = assert_same_data(&mut p, &mut m, "primary and middle after the writes");
    assert!(primary_dump.contains_key(&(0, "w:last".to_string())));
    assert_same_data(&mut p, &mut e, "primary and end after the writes");
    assert_eq!(function_libraries(&mut e), vec!["lib".to_string()]);
}

/// Cuts the replica's link (`CLIENT KILL TYPE master` on the replica), writes meanwhile,
/// and expects a partial resync: `sync_partial_ok` + 1 and no new `sync_full` on the primary.
fn partial_resync(primary: Program, replica: Program) {
    let primary_server = start_primary(primary, &[]);
    let mut p = connect(&primary_server);
    fill_every_type(&mut p);
    let replica_server = start_replica(replica, &primary_server, &[]);
    let mut r = connect(&replica_server);
    wait_link_up(&mut r);
    wait_offsets_equal(&mut p, &mut r);
    let full_before = info_int(&mut p, "stats", "sync_full");
    let partial_before = info_int(&mut p, "stats", "sync_partial_ok");
    assert_eq!(full_before, 1, "one full sync so far");

    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("master")
        .query(&mut r)
        .unwrap();
    assert_eq!(killed, 1, "CLIENT KILL TYPE master on the replica");
    let mut writes = redis::pipe();
    for i in 0..100 {
        writes
            .cmd("SET")
            .arg(format!("during-cut:{i}"))
            .arg(i)
            .ignore();
    }
    writes.query::<()>(&mut p).unwrap();

    wait_until(TIMEOUT, "sync_partial_ok to grow on the primary", || {
        let partial = info_int(&mut p, "stats", "sync_partial_ok");
        (partial > partial_before, partial)
    });
    wait_link_up(&mut r);
    wait_offsets_equal(&mut p, &mut r);
    assert_eq!(
        info_int(&mut p, "stats", "sync_partial_ok"),
        partial_before + 1
    );
    assert_eq!(info_int(&mut p, "stats", "sync_full"), full_before);
    let dump = assert_same_data(&mut p, &mut r, "after the partial resync");
    assert!(dump.contains_key(&(0, "during-cut:99".to_string())));
}

#[test]
fn partial_resync_after_a_cut_link() {
    partial_resync(latch(), latch());
    partial_resync(latch(), Program::Redis);
}

#[test]
fn replica_is_read_only_and_serves_reads() {
    let primary_server = start_primary(latch(), &[]);
    let mut p = connect(&primary_server);
    run(&mut p, &["SET", "replicated", "value"]);
    let replica_server = start_replica(latch(), &primary_server, &[]);
    let mut r = connect(&replica_server);
    wait_link_up(&mut r);
    wait_offsets_equal(&mut p, &mut r);

    let reply = raw_reply_line(replica_server.port, &["SET", "x", "1"]);
    assert!(
        reply.starts_with("-READONLY You can't write against a read only replica."),
        "SET on a replica answered {reply:?}"
    );
    let reply = raw_reply_line(replica_server.port, &["GET", "replicated"]);
    assert_eq!(reply, "$5");
    let value: String = redis::cmd("GET").arg("replicated").query(&mut r).unwrap();
    assert_eq!(value, "value");
    assert_eq!(
        info_field(&mut r, "replication", "slave_read_only").as_deref(),
        Some("1")
    );

    run(&mut r, &["CONFIG", "SET", "replica-read-only", "no"]);
    let reply = raw_reply_line(replica_server.port, &["SET", "x", "1"]);
    assert_eq!(reply, "+OK");
    let value: String = redis::cmd("GET").arg("x").query(&mut r).unwrap();
    assert_eq!(value, "1");
    assert_eq!(
        info_field(&mut r, "replication", "slave_read_only").as_deref(),
        Some("0")
    );
}

fn bulk(value: &Value) -> String {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).unwrap(),
        other => panic!("expected a bulk string, got {other:?}"),
    }
}

fn int(value: &Value) -> i64 {
    match value {
        Value::Int(n) => *n,
        other => panic!("expected an integer, got {other:?}"),
    }
}

#[test]
fn role_and_info_replication() {
    let primary_server = start_primary(latch(), &[]);
    let mut p = connect(&primary_server);
    run(&mut p, &["SET", "k", "v"]);
    let replica_server = start_replica(latch(), &primary_server, &[]);
    let mut r = connect(&replica_server);
    wait_link_up(&mut r);
    wait_offsets_equal(&mut p, &mut r);
    // The offset counts the stream since the first replica: 0 until a write after it.
    run(&mut p, &["SET", "k", "after the sync"]);
    let offset = wait_offsets_equal(&mut p, &mut r);
    assert!(offset > 0);

    // ROLE on the primary: ["master", offset, [[ip, port, acked offset]]], the replica's
    // port and offset as bulk strings. The replica acknowledges once a second.
    let (role, primary_offset, replicas) = wait_until(
        TIMEOUT,
        "ROLE on the primary to list the replica at the primary's offset",
        || {
            let Value::Array(role) = run(&mut p, &["ROLE"]) else {
                panic!("ROLE is not an array");
            };
            let Value::Array(replicas) = &role[2] else {
                panic!("ROLE's third element is not an array: {role:?}");
            };
            let replicas: Vec<Vec<String>> = replicas
                .iter()
                .map(|replica| match replica {
                    Value::Array(fields) => fields.iter().map(bulk).collect(),
                    other => panic!("a replica in ROLE is {other:?}"),
                })
                .collect();
            let primary_offset = int(&role[1]);
            let done = replicas.len() == 1 && replicas[0][2] == primary_offset.to_string();
            (done, (bulk(&role[0]), primary_offset, replicas))
        },
    );
    assert_eq!(role, "master");
    assert_eq!(
        primary_offset,
        info_int(&mut p, "replication", "master_repl_offset")
    );
    assert_eq!(
        replicas,
        vec![vec![
            "127.0.0.1".to_string(),
            replica_server.port.to_string(),
            primary_offset.to_string(),
        ]]
    );

    // ROLE on the replica: ["slave", host, port (integer), state, offset (integer)].
    let Value::Array(role) = run(&mut r, &["ROLE"]) else {
        panic!("ROLE is not an array");
    };
    assert_eq!(role.len(), 5, "{role:?}");
    assert_eq!(bulk(&role[0]), "slave");
    assert_eq!(bulk(&role[1]), "127.0.0.1");
    assert_eq!(int(&role[2]), i64::from(primary_server.port));
    assert_eq!(bulk(&role[3]), "connected");
    assert_eq!(int(&role[4]), primary_offset);

    let primary_info = info(&mut p, "replication");
    assert_eq!(primary_info["role"], "master");
    assert_eq!(primary_info["connected_slaves"], "1");
    assert_eq!(primary_info["master_replid"].len(), 40);
    assert_eq!(
        primary_info["master_repl_offset"],
        primary_offset.to_string()
    );
    let slave0 = &primary_info["slave0"];
    let slave0: BTreeMap<&str, &str> = slave0
        .split(',')
        .map(|pair| pair.split_once('=').unwrap())
        .collect();
    assert_eq!(
        slave0.keys().copied().collect::<Vec<_>>(),
        ["ip", "lag", "offset", "port", "state"],
        "slave0 fields"
    );
    assert_eq!(slave0["ip"], "127.0.0.1");
    assert_eq!(slave0["port"], replica_server.port.to_string());
    assert_eq!(slave0["state"], "online");
    assert_eq!(slave0["offset"], primary_offset.to_string());
    assert!(
        slave0["lag"].parse::<u64>().is_ok(),
        "lag={}",
        slave0["lag"]
    );
    assert!(
        info_field(&mut p, "replication", "slave1").is_none(),
        "only one replica"
    );

    let replica_info = info(&mut r, "replication");
    assert_eq!(replica_info["role"], "slave");
    assert_eq!(replica_info["master_host"], "127.0.0.1");
    assert_eq!(replica_info["master_port"], primary_server.port.to_string());
    assert_eq!(replica_info["master_link_status"], "up");
    assert_eq!(replica_info["master_sync_in_progress"], "0");
    assert_eq!(replica_info["slave_read_only"], "1");
    assert_eq!(replica_info["slave_priority"], "100");
    assert_eq!(replica_info["connected_slaves"], "0");
    assert_eq!(
        replica_info["slave_repl_offset"],
        primary_offset.to_string()
    );
    assert_eq!(replica_info["master_replid"], primary_info["master_replid"]);
    assert!(replica_info["master_last_io_seconds_ago"]
        .parse::<i64>()
        .is_ok());
}

#[test]
fn replicaof_no_one_promotes() {
    let primary_server = start_primary(latch(), &[]);
    let mut p = connect(&primary_server);
    run(&mut p, &["SET", "before", "promotion"]);
    let replica_server = start_replica(latch(), &primary_server, &[]);
    let mut r = connect(&replica_server);
    wait_link_up(&mut r);
    let synced_offset = wait_offsets_equal(&mut p, &mut r);
    let old_replid = info_field(&mut p, "replication", "master_replid").unwrap();

    let reply: String = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut r)
        .unwrap();
    assert_eq!(reply, "OK");
    let promoted = info(&mut r, "replication");
    assert_eq!(promoted["role"], "master");
    assert_eq!(promoted["master_replid2"], old_replid);
    assert_ne!(promoted["master_replid"], old_replid);
    let offset: i64 = promoted["master_repl_offset"].parse().unwrap();
    let second: i64 = promoted["second_repl_offset"].parse().unwrap();
    assert_eq!(second, offset + 1, "second_repl_offset is the offset + 1");
    assert!(offset >= synced_offset, "{offset} < {synced_offset}");
    assert!(!promoted.contains_key("master_host"), "{promoted:?}");

    run(&mut r, &["SET", "after", "promotion"]);
    let value: String = redis::cmd("GET").arg("before").query(&mut r).unwrap();
    assert_eq!(value, "promotion");
    let value: String = redis::cmd("GET").arg("after").query(&mut r).unwrap();
    assert_eq!(value, "promotion");
    assert_eq!(
        info_field(&mut r, "replication", "role").as_deref(),
        Some("master")
    );
}

#[test]
fn wait_counts_acknowledging_replicas() {
    let primary_server = start_primary(latch(), &[]);
    let mut p = connect(&primary_server);
    run(&mut p, &["SET", "k", "v"]);

    let started = Instant::now();
    let acked: i64 = redis::cmd("WAIT").arg(0).arg(0).query(&mut p).unwrap();
    assert_eq!(acked, 0);
    // A timeout of 0 blocks forever when too few replicas acknowledge: "at once" suffices.
    assert!(
        started.elapsed() < Duration::from_millis(1000),
        "WAIT 0 0 blocked"
    );

    let started = Instant::now();
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(200).query(&mut p).unwrap();
    let elapsed = started.elapsed();
    assert_eq!(acked, 0);
    assert!(
        elapsed >= Duration::from_millis(190) && elapsed < Duration::from_millis(2000),
        "WAIT 1 200 took {elapsed:?}"
    );

    let latch_replica = start_replica(latch(), &primary_server, &[]);
    let redis_replica = start_replica(Program::Redis, &primary_server, &[]);
    let mut r1 = connect(&latch_replica);
    let mut r2 = connect(&redis_replica);
    wait_link_up(&mut r1);
    wait_link_up(&mut r2);
    wait_until(TIMEOUT, "connected_slaves:2 on the primary", || {
        let n = info_field(&mut p, "replication", "connected_slaves");
        (n.as_deref() == Some("2"), n)
    });
    run(&mut p, &["SET", "k", "acknowledged"]);
    let acked: i64 = redis::cmd("WAIT").arg(2).arg(5000).query(&mut p).unwrap();
    assert_eq!(acked, 2, "WAIT 2 5000");
    for replica in [&mut r1, &mut r2] {
        let value: String = redis::cmd("GET").arg("k").query(replica).unwrap();
        assert_eq!(value, "acknowledged");
    }
}

#[test]
fn replica_keeps_expired_keys_until_the_primarys_del() {
    let primary_server = start_primary(latch(), &[]);
    let mut p = connect(&primary_server);
    run(&mut p, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    let replica_server = start_replica(latch(), &primary_server, &[]);
    let mut r = connect(&replica_server);
    wait_link_up(&mut r);
    wait_offsets_equal(&mut p, &mut r);

    run(&mut p, &["SET", "k", "v", "PX", "200"]);
    wait_until(TIMEOUT, "DBSIZE 1 on the replica", || {
        let n: i64 = redis::cmd("DBSIZE").query(&mut r).unwrap();
        (n == 1, n)
    });
    std::thread::sleep(Duration::from_millis(400));

    // Logically expired on the replica, but only the primary deletes it.
    let value: Option<String> = redis::cmd("GET").arg("k").query(&mut r).unwrap();
    assert_eq!(value, None, "GET of an expired key on the replica");
    let exists: i64 = redis::cmd("EXISTS").arg("k").query(&mut r).unwrap();
    assert_eq!(exists, 0, "EXISTS of an expired key on the replica");
    let size: i64 = redis::cmd("DBSIZE").query(&mut r).unwrap();
    assert_eq!(size, 1, "the replica keeps the key until the primary's DEL");
    std::thread::sleep(Duration::from_millis(200));
    let size: i64 = redis::cmd("DBSIZE").query(&mut r).unwrap();
    assert_eq!(size, 1, "still there: the primary's active expiry is off");

    // The primary's lazy expiry deletes it and sends the DEL.
    let value: Option<String> = redis::cmd("GET").arg("k").query(&mut p).unwrap();
    assert_eq!(value, None);
    wait_until(TIMEOUT, "DBSIZE 0 on the replica", || {
        let n: i64 = redis::cmd("DBSIZE").query(&mut r).unwrap();
        (n == 0, n)
    });
    let size: i64 = redis::cmd("DBSIZE").query(&mut p).unwrap();
    assert_eq!(size, 0);
}

/// A promoted replica keeps its old primary's history as `replid2`, so the old primary,
/// told to follow it, continues with a partial resync (`+CONTINUE`) instead of a full one;
/// a redis-server replica of the old primary follows the new one the same way.
#[test]
fn the_old_primary_rejoins_the_promoted_replica_with_a_partial_resync() {
    let a_server = start_primary(latch(), &[]);
    let mut a = connect(&a_server);
    fill_every_type(&mut a);
    let b_server = start_replica(latch(), &a_server, PRIMARY_ARGS);
    let c_server = start_replica(Program::Redis, &a_server, &[]);
    let mut b = connect(&b_server);
    let mut c = connect(&c_server);
    wait_link_up(&mut b);
    wait_link_up(&mut c);
    run(&mut a, &["SET", "last", "before-failover"]);
    wait_offsets_equal(&mut a, &mut b);
    wait_offsets_equal(&mut a, &mut c);

    // Fail over by hand: B becomes the primary, A and C follow it.
    run(&mut b, &["REPLICAOF", "NO", "ONE"]);
    let full_before = info_int(&mut b, "stats", "sync_full");
    let partial_before = info_int(&mut b, "stats", "sync_partial_ok");
    let b_port = b_server.port.to_string();
    run(&mut a, &["REPLICAOF", "127.0.0.1", &b_port]);
    run(&mut c, &["REPLICAOF", "127.0.0.1", &b_port]);
    wait_link_up(&mut a);
    wait_link_up(&mut c);
    run(&mut b, &["SET", "last", "after-failover"]);
    wait_offsets_equal(&mut b, &mut a);
    wait_offsets_equal(&mut b, &mut c);
    assert_eq!(
        info_int(&mut b, "stats", "sync_partial_ok"),
        partial_before + 2,
        "both followers continued"
    );
    assert_eq!(
        info_int(&mut b, "stats", "sync_full"),
        full_before,
        "no full resync"
    );
    let b_id = info_field(&mut b, "replication", "master_replid");
    assert_eq!(info_field(&mut a, "replication", "master_replid"), b_id);
    assert_same_data(&mut b, &mut a, "the old primary after it rejoined");
    assert_same_data(&mut b, &mut c, "the redis-server replica after the switch");
}

/// `redis-cli --rdb` takes a snapshot through the replication protocol (REPLCONF rdb-only,
/// SYNC) that redis-server loads; `redis-cli --replica` prints the command stream.
/// (With `REPLICATION_TESTS_ALL_REDIS=1` the second half fails: after a diskless transfer
/// redis-server 7.0 holds the stream until the replica's first `REPLCONF ACK`, which
/// redis-cli here never sends before the test gives up; Latch streams at once.)
#[test]
fn redis_cli_rdb_and_replica_modes() {
    let primary_server = start_primary(latch(), &[]);
    let mut p = connect(&primary_server);
    fill_every_type(&mut p);
    let expected = dump_all(&mut p);
    let port = primary_server.port.to_string();
    let dir = std::env::temp_dir().join(format!("latch-cli-rdb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rdb = dir.join("dump.rdb");
    let status = std::process::Command::new("redis-cli")
        .args(["-p", &port, "--rdb", rdb.to_str().unwrap()])
        .output()
        .expect("redis-cli");
    assert!(status.status.success(), "{status:?}");
    let loaded = Server::start_in(Program::Redis, &dir, &["--dbfilename", "dump.rdb"]);
    loaded.wait_for_pong();
    let mut l = connect(&loaded);
    assert_eq!(
        dump_all(&mut l),
        expected,
        "redis-server loading redis-cli --rdb's file"
    );
    drop(loaded);
    let _ = std::fs::remove_dir_all(&dir);

    // --functions-rdb (REPLCONF rdb-filter-only functions): the libraries, no keys.
    std::fs::create_dir_all(&dir).unwrap();
    run(
        &mut p,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=kept\nredis.register_function('kept_fn', function() return 7 end)",
        ],
    );
    let status = std::process::Command::new("redis-cli")
        .args(["-p", &port, "--functions-rdb", rdb.to_str().unwrap()])
        .output()
        .expect("redis-cli");
    assert!(status.status.success(), "{status:?}");
    let loaded = Server::start_in(Program::Redis, &dir, &["--dbfilename", "dump.rdb"]);
    loaded.wait_for_pong();
    let mut l = connect(&loaded);
    assert_eq!(run(&mut l, &["DBSIZE"]), Value::Int(0));
    assert_eq!(run(&mut l, &["FCALL", "kept_fn", "0"]), Value::Int(7));
    drop(loaded);
    let _ = std::fs::remove_dir_all(&dir);
    run(&mut p, &["FUNCTION", "DELETE", "kept"]);
    // Filters other than functions are refused, as by redis-server.
    let refused = redis::cmd("REPLCONF")
        .arg("rdb-filter-only")
        .arg("keys")
        .query::<Value>(&mut p)
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("Unsupported rdb-filter-only option: keys"),
        "{refused}"
    );

    let mut replica = std::process::Command::new("redis-cli")
        .args(["-p", &port, "--replica"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("redis-cli --replica");
    let stdout = replica.stdout.take().unwrap();
    let (lines_tx, lines_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap_or(0) > 0 {
            let _ = lines_tx.send(std::mem::take(&mut line));
        }
    });
    wait_until(TIMEOUT, "redis-cli --replica attached", || {
        let n = info_field(&mut p, "replication", "connected_slaves");
        (n.as_deref() == Some("1"), n)
    });
    run(&mut p, &["SET", "streamed", "to-redis-cli"]);
    let deadline = Instant::now() + TIMEOUT;
    let mut seen = String::new();
    while !seen.contains("\"SET\",\"streamed\",\"to-redis-cli\"") {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines_rx.recv_timeout(left) {
            Ok(line) => seen.push_str(&line),
            Err(_) => {
                let _ = replica.kill();
                panic!(
                    "redis-cli --replica did not print the SET; it printed:\n{seen}\nthe primary's log:\n{}",
                    primary_server.log()
                );
            }
        }
    }
    let _ = replica.kill();
    let _ = replica.wait();
}

/// While the link to its primary is down, a replica with `replica-serve-stale-data no`
/// answers MASTERDOWN to everything but the commands flagged `stale` (INFO, REPLICAOF...).
#[test]
fn a_replica_without_its_primary_refuses_stale_reads_when_told_to() {
    // A port nothing listens on.
    let nobody = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let replica_server = Server::start(
        latch(),
        &[
            "--replicaof",
            "127.0.0.1",
            &nobody,
            "--replica-serve-stale-data",
            "no",
        ],
    );
    let mut r = connect(&replica_server);
    let error = redis::cmd("GET")
        .arg("k")
        .query::<Value>(&mut r)
        .unwrap_err();
    assert_eq!(error.code(), Some("MASTERDOWN"), "{error}");
    assert_eq!(
        info_field(&mut r, "replication", "master_link_status").as_deref(),
        Some("down")
    );
    run(
        &mut r,
        &["CONFIG", "SET", "replica-serve-stale-data", "yes"],
    );
    let value: Option<String> = redis::cmd("GET").arg("k").query(&mut r).unwrap();
    assert_eq!(value, None);
    run(&mut r, &["CONFIG", "SET", "replica-serve-stale-data", "no"]);
    run(&mut r, &["REPLICAOF", "NO", "ONE"]);
    let value: Option<String> = redis::cmd("GET").arg("k").query(&mut r).unwrap();
    assert_eq!(value, None, "a primary serves its data");
}

/// FAILOVER hands the primary's role to a caught-up replica without a full resync: the
/// old primary follows the new one, and every write made before is on both.
#[test]
fn failover_hands_the_role_to_a_replica() {
    let a_server = start_primary(latch(), &[]);
    let mut a = connect(&a_server);
    let error = redis::cmd("FAILOVER").query::<Value>(&mut a).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("FAILOVER requires connected replicas"),
        "{error}"
    );
    let error = redis::cmd("FAILOVER")
        .arg("ABORT")
        .query::<Value>(&mut a)
        .unwrap_err();
    assert!(
        error.to_string().contains("No failover in progress"),
        "{error}"
    );
    fill_every_type(&mut a);
    let b_server = start_replica(latch(), &a_server, PRIMARY_ARGS);
    let mut b = connect(&b_server);
    wait_link_up(&mut b);
    run(&mut a, &["SET", "last", "before-failover"]);
    wait_offsets_equal(&mut a, &mut b);
    let error = redis::cmd("FAILOVER")
        .arg("TO")
        .arg("127.0.0.1")
        .arg(1)
        .query::<Value>(&mut a)
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("FAILOVER target HOST and PORT is not a replica"),
        "{error}"
    );
    let full_before = info_int(&mut b, "stats", "sync_full");
    let b_port = b_server.port.to_string();
    run(
        &mut a,
        &["FAILOVER", "TO", "127.0.0.1", &b_port, "TIMEOUT", "10000"],
    );
    wait_until(
        TIMEOUT,
        "the replica promoted and the primary following it",
        || {
            let a_role = info_field(&mut a, "replication", "role");
            let b_role = info_field(&mut b, "replication", "role");
            let link = info_field(&mut a, "replication", "master_link_status");
            (
                a_role.as_deref() == Some("slave")
                    && b_role.as_deref() == Some("master")
                    && link.as_deref() == Some("up"),
                (a_role, b_role, link),
            )
        },
    );
    assert_eq!(
        info_field(&mut a, "replication", "master_failover_state").as_deref(),
        Some("no-failover")
    );
    assert_eq!(
        info_field(&mut a, "replication", "master_port"),
        Some(b_port.clone())
    );
    assert_eq!(
        info_int(&mut b, "stats", "sync_full"),
        full_before,
        "no full resync"
    );
    run(&mut b, &["SET", "last", "after-failover"]);
    wait_offsets_equal(&mut b, &mut a);
    assert_same_data(&mut b, &mut a, "after the failover");
    let error = redis::cmd("SET")
        .arg("x")
        .arg("1")
        .query::<Value>(&mut a)
        .unwrap_err();
    assert_eq!(error.code(), Some("READONLY"), "{error}");
}

/// `min-replicas-to-write`: writes get NOREPLICAS until enough replicas acknowledged within
/// `min-replicas-max-lag` seconds; INFO counts the good ones.
#[test]
fn min_replicas_to_write_counts_acknowledging_replicas() {
    let primary_server = start_primary(
        latch(),
        &[
            "--min-replicas-to-write",
            "1",
            "--min-replicas-max-lag",
            "10",
        ],
    );
    let mut p = connect(&primary_server);
    let error = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query::<Value>(&mut p)
        .unwrap_err();
    assert_eq!(error.code(), Some("NOREPLICAS"), "{error}");
    assert_eq!(
        info_field(&mut p, "replication", "min_slaves_good_slaves").as_deref(),
        Some("0")
    );
    let replica_server = start_replica(latch(), &primary_server, &[]);
    let mut r = connect(&replica_server);
    wait_link_up(&mut r);
    wait_until(TIMEOUT, "one good replica", || {
        let n = info_field(&mut p, "replication", "min_slaves_good_slaves");
        (n.as_deref() == Some("1"), n)
    });
    run(&mut p, &["SET", "k", "v"]);
    drop(r);
    drop(replica_server);
    wait_until(TIMEOUT, "no good replica once it is gone", || {
        let n = info_field(&mut p, "replication", "min_slaves_good_slaves");
        (n.as_deref() == Some("0"), n)
    });
    let error = redis::cmd("SET")
        .arg("k")
        .arg("w")
        .query::<Value>(&mut p)
        .unwrap_err();
    assert_eq!(error.code(), Some("NOREPLICAS"), "{error}");
}

/// A full sync while clients keep writing: the snapshot and the stream after it meet
/// exactly, whichever framing (`$EOF:` diskless or `$<length>`) and replica. (A diskless
/// snapshot followed at once by the stream once left replicas reading "the snapshot"
/// forever: the end mark was not the last bytes they read.)
#[test]
fn full_sync_under_writes() {
    for (diskless, replica_program) in [
        ("yes", Program::Redis),
        ("yes", latch()),
        ("no", Program::Redis),
        ("no", latch()),
    ] {
        let primary_server = start_primary(latch(), &["--repl-diskless-sync", diskless]);
        let mut p = connect(&primary_server);
        for batch in 0..20 {
            let mut pipe = redis::pipe();
            for i in 0..1000 {
                pipe.cmd("SET")
                    .arg(format!("seed:{batch}:{i}"))
                    .arg("x".repeat(64))
                    .ignore();
            }
            pipe.query::<()>(&mut p).unwrap();
        }
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let stop = std::sync::Arc::clone(&stop);
            let mut w = connect(&primary_server);
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    run(
                        &mut w,
                        &["SET", &format!("live:{}", n % 5000), &n.to_string()],
                    );
                    run(&mut w, &["INCR", "counter"]);
                    n += 1;
                }
                n
            })
        };
        let replica_server = start_replica(replica_program, &primary_server, &[]);
        let mut r = connect(&replica_server);
        wait_link_up(&mut r);
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let written = writer.join().unwrap();
        assert!(written > 0);
        wait_offsets_equal(&mut p, &mut r);
        let sizes: (i64, i64) = (
            redis::cmd("DBSIZE").query(&mut p).unwrap(),
            redis::cmd("DBSIZE").query(&mut r).unwrap(),
        );
        assert_eq!(
            sizes.0, sizes.1,
            "diskless {diskless}: DBSIZE primary, replica"
        );
        let counters: (i64, i64) = (
            redis::cmd("GET").arg("counter").query(&mut p).unwrap(),
            redis::cmd("GET").arg("counter").query(&mut r).unwrap(),
        );
        assert_eq!(counters.0, counters.1, "diskless {diskless}: the counter");
        assert_eq!(counters.0 as u64, written, "every INCR counted");
    }
}

/// Replicas that ask for a full sync within `repl-diskless-sync-delay` share one snapshot
/// (Redis shares one fork); both get the same data and stream.
#[test]
fn replicas_asking_together_share_one_snapshot() {
    let primary_server = start_primary(latch(), &["--repl-diskless-sync-delay", "1"]);
    let mut p = connect(&primary_server);
    fill_every_type(&mut p);
    let port = primary_server.port.to_string();
    let first = Server::start(latch(), &[]);
    let second = Server::start(Program::Redis, &[]);
    let mut r1 = connect(&first);
    let mut r2 = connect(&second);
    run(&mut r1, &["REPLICAOF", "127.0.0.1", &port]);
    run(&mut r2, &["REPLICAOF", "127.0.0.1", &port]);
    wait_link_up(&mut r1);
    wait_link_up(&mut r2);
    run(&mut p, &["SET", "after", "the-sync"]);
    wait_offsets_equal(&mut p, &mut r1);
    wait_offsets_equal(&mut p, &mut r2);
    assert_same_data(&mut p, &mut r1, "the Latch replica");
    assert_same_data(&mut p, &mut r2, "the redis-server replica");
    assert_eq!(info_int(&mut p, "stats", "sync_full"), 2);
    if latch() == Program::Latch {
        let log = strip_ansi(&primary_server.log());
        assert!(
            log.contains("snapshot for replicas' full sync serialized")
                && log.contains("replicas=2"),
            "one snapshot for both replicas; the log:\n{log}"
        );
    }
}

/// After `repl-backlog-ttl` seconds without replicas a primary frees its backlog and starts
/// a new history, as redis-server does.
#[test]
fn the_backlog_is_freed_after_its_ttl_without_replicas() {
    let primary_server = start_primary(latch(), &["--repl-backlog-ttl", "1"]);
    let mut p = connect(&primary_server);
    let replica_server = start_replica(latch(), &primary_server, &[]);
    let mut r = connect(&replica_server);
    wait_link_up(&mut r);
    run(&mut p, &["SET", "k", "v"]);
    wait_offsets_equal(&mut p, &mut r);
    let replid = info_field(&mut p, "replication", "master_replid");
    assert_eq!(
        info_field(&mut p, "replication", "repl_backlog_active").as_deref(),
        Some("1")
    );
    drop(r);
    drop(replica_server);
    wait_until(TIMEOUT, "the backlog freed", || {
        let active = info_field(&mut p, "replication", "repl_backlog_active");
        (active.as_deref() == Some("0"), active)
    });
    assert_ne!(info_field(&mut p, "replication", "master_replid"), replid);
}

fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A replica restarted over the RDB file it saved continues from the file's offset with a
/// partial resync (Redis 7.0 stores `repl-id`, `repl-offset` and `repl-stream-db` in the
/// file and restores them at load): the primary's writes after the save arrive through
/// the backlog, in the database the stream was in, which the resumed stream does not
/// select again.
fn restarted_replica_continues(primary: Program, replica: Program) {
    let primary_server = start_primary(primary, &[]);
    let mut p = connect(&primary_server);
    fill_every_type(&mut p);
    let mut replica_server = start_replica(replica, &primary_server, &[]);
    let mut r = connect(&replica_server);
    wait_link_up(&mut r);
    select(&mut p, 3);
    run(&mut p, &["SET", "in-db-3", "before the save"]);
    wait_offsets_equal(&mut p, &mut r);
    run(&mut r, &["SAVE"]);
    let full_before = info_int(&mut p, "stats", "sync_full");
    let partial_before = info_int(&mut p, "stats", "sync_partial_ok");

    replica_server.kill();
    // Still in database 3: the stream carries no SELECT for these.
    run(
        &mut p,
        &["SET", "in-db-3:after", "written while the replica was down"],
    );
    run(&mut p, &["INCR", "counter-in-db-3"]);
    replica_server.restart(&[]);
    let mut r = connect(&replica_server);
    wait_link_up(&mut r);
    wait_offsets_equal(&mut p, &mut r);
    assert_eq!(
        info_int(&mut p, "stats", "sync_partial_ok"),
        partial_before + 1,
        "the restarted replica continued ({primary:?} primary, {replica:?} replica)"
    );
    assert_eq!(
        info_int(&mut p, "stats", "sync_full"),
        full_before,
        "no full sync"
    );
    select(&mut r, 3);
    let counter: i64 = redis::cmd("GET")
        .arg("counter-in-db-3")
        .query(&mut r)
        .unwrap();
    assert_eq!(counter, 1, "the INCR arrived once, in database 3");
    select(&mut p, 0);
    select(&mut r, 0);
    assert_same_data(&mut p, &mut r, "after the restarted replica continued");
}

#[test]
fn a_restarted_replica_continues_from_its_rdb_file() {
    restarted_replica_continues(latch(), latch());
    restarted_replica_continues(Program::Redis, latch());
    restarted_replica_continues(latch(), Program::Redis);
}

/// A primary restarted over a file it saved while it had replicas keeps that history as
/// its previous one, so a replica that had everything in the file continues with a
/// partial resync under the primary's new id (as Redis 7.0 does).
#[test]
fn a_restarted_primary_continues_its_replicas() {
    // No PING into the stream between the save and the restart.
    let mut primary_server = start_primary(latch(), &["--repl-ping-replica-period", "3600"]);
    let mut p = connect(&primary_server);
    fill_every_type(&mut p);
    let replica_server = start_replica(latch(), &primary_server, &[]);
    let mut r = connect(&replica_server);
    wait_link_up(&mut r);
    run(&mut p, &["SET", "last", "before the restart"]);
    wait_offsets_equal(&mut p, &mut r);
    let old_id = info_field(&mut p, "replication", "master_replid").unwrap();
    let offset = info_int(&mut p, "replication", "master_repl_offset");
    run(&mut p, &["SAVE"]);

    primary_server.restart(&[]);
    let mut p = connect(&primary_server);
    assert_eq!(
        info_field(&mut p, "replication", "master_replid2").as_deref(),
        Some(old_id.as_str()),
        "the file's history is the restarted primary's previous one"
    );
    assert_eq!(
        info_int(&mut p, "replication", "second_repl_offset"),
        offset + 1
    );
    assert_eq!(
        info_int(&mut p, "replication", "master_repl_offset"),
        offset
    );
    wait_until(TIMEOUT, "the replica to continue", || {
        let partial = info_int(&mut p, "stats", "sync_partial_ok");
        (partial == 1, partial)
    });
    wait_link_up(&mut r);
    run(&mut p, &["SET", "last", "after the restart"]);
    wait_offsets_equal(&mut p, &mut r);
    assert_eq!(info_int(&mut p, "stats", "sync_full"), 0, "no full sync");
    let new_id = info_field(&mut p, "replication", "master_replid");
    assert_eq!(info_field(&mut r, "replication", "master_replid"), new_id);
    assert_same_data(&mut p, &mut r, "after the primary's restart");
}

/// A replica that serves a full sync in the middle of its primary's stream names, in the
/// snapshot (`repl-stream-db`), the database that stream is in: the writes after it carry
/// no SELECT, and the end of the chain must apply them there, not in database 0.
fn chain_joined_mid_stream(end: Program) {
    let primary_server = start_primary(latch(), &[]);
    let mut p = connect(&primary_server);
    let middle_server = start_replica(latch(), &primary_server, PRIMARY_ARGS);
    let mut m = connect(&middle_server);
    wait_link_up(&mut m);
    select(&mut p, 5);
    run(&mut p, &["SET", "in-db-5", "before the end joined"]);
    wait_offsets_equal(&mut p, &mut m);

    let end_server = start_replica(end, &middle_server, &[]);
    let mut e = connect(&end_server);
    wait_link_up(&mut e);
    run(&mut p, &["SET", "in-db-5:after", "after the end joined"]);
    wait_offsets_equal(&mut p, &mut m);
    wait_offsets_equal(&mut m, &mut e);
    select(&mut e, 5);
    let value: Option<String> = redis::cmd("GET")
        .arg("in-db-5:after")
        .query(&mut e)
        .unwrap();
    assert_eq!(
        value.as_deref(),
        Some("after the end joined"),
        "{end:?} at the end of the chain"
    );
    select(&mut e, 0);
    let in_db_0: i64 = redis::cmd("DBSIZE").query(&mut e).unwrap();
    assert_eq!(
        in_db_0, 0,
        "nothing landed in database 0 ({end:?} at the end)"
    );
}

#[test]
fn a_chain_joined_mid_stream_keeps_the_streams_database() {
    chain_joined_mid_stream(latch());
    chain_joined_mid_stream(Program::Redis);
}

/// Snapshots a replica saves while its primary's writes pour in hold exactly the writes
/// their offset counts: after a restart over each, the replica continues from the file
/// and ends with the primary's counters, none applied twice or lost.
#[test]
fn a_replica_saving_under_writes_restarts_consistent() {
    let primary_server = start_primary(latch(), &[]);
    let mut p = connect(&primary_server);
    let mut replica_server = start_replica(latch(), &primary_server, &[]);
    let mut r = connect(&replica_server);
    wait_link_up(&mut r);
    for round in 0..3 {
        let port = primary_server.port;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let stop = std::sync::Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut conn = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                    .unwrap()
                    .get_connection()
                    .unwrap();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let mut batch = redis::pipe();
                    for key in 0..20 {
                        batch.cmd("INCR").arg(format!("counter:{key}")).ignore();
                    }
                    // Transactions too: a save never lands inside one.
                    batch.cmd("MULTI").ignore();
                    batch.cmd("INCR").arg("tx:a").ignore();
                    batch.cmd("INCR").arg("tx:b").ignore();
                    batch.cmd("EXEC").ignore();
                    batch.query::<()>(&mut conn).unwrap();
                }
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        for _ in 0..5 {
            run(&mut r, &["SAVE"]);
        }
        replica_server.kill();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().unwrap();
        replica_server.restart(&[]);
        r = connect(&replica_server);
        wait_link_up(&mut r);
        wait_offsets_equal(&mut p, &mut r);
        assert_eq!(
            info_int(&mut p, "stats", "sync_partial_ok"),
            round + 1,
            "round {round}: the replica continued from its file"
        );
        let a: i64 = redis::cmd("GET").arg("tx:a").query(&mut r).unwrap();
        let b: i64 = redis::cmd("GET").arg("tx:b").query(&mut r).unwrap();
        assert_eq!(a, b, "round {round}: a transaction split by a save");
        assert_same_data(&mut p, &mut r, &format!("round {round}, after the restart"));
    }
}

/// A server that becomes a replica ends every blocking command's wait with Redis'
/// `-UNBLOCKED ... instance state changed` and closes those connections (Latch's lock
/// waiters too): they waited on a primary.
#[test]
fn becoming_a_replica_unblocks_blocked_clients() {
    let other = start_primary(Program::Redis, &[]);
    let server = start_primary(latch(), &[]);
    let port = server.port;
    let blpop = std::thread::spawn(move || {
        let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
        conn.write_all(b"BLPOP queue 0\r\n").unwrap();
        let mut line = String::new();
        BufReader::new(conn).read_line(&mut line).unwrap();
        line
    });
    let mut s = connect(&server);
    wait_until(TIMEOUT, "the BLPOP to block", || {
        let blocked = info_int(&mut s, "clients", "blocked_clients");
        (blocked == 1, blocked)
    });
    let other_port = other.port.to_string();
    run(&mut s, &["REPLICAOF", "127.0.0.1", &other_port]);
    assert_eq!(
        blpop.join().unwrap().trim_end(),
        "-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)"
    );
    assert_eq!(info_int(&mut s, "clients", "blocked_clients"), 0);
}

/// A replica that did not say `REPLCONF capa eof` cannot take a diskless transfer: it gets
/// `+FULLRESYNC` and its snapshot at once, as from redis-server (which starts a disk
/// snapshot for it), not after `repl-diskless-sync-delay`.
#[test]
fn a_replica_without_capa_eof_is_not_kept_waiting() {
    let server = Server::start(latch(), &["--repl-diskless-sync-delay", "5"]);
    let mut conn = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let started = Instant::now();
    conn.write_all(b"PSYNC ? -1\r\n").unwrap();
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.starts_with("+FULLRESYNC "), "{line:?}");
    line.clear();
    reader.read_line(&mut line).unwrap();
    assert!(
        line.starts_with('$') && !line.starts_with("$EOF:"),
        "{line:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_replica_under_maxmemory_keeps_what_its_primary_sends() {
    // replica-ignore-maxmemory (yes by default): a replica is its primary's copy and
    // evicts nothing of its own; with the option off it evicts as any server does.
    let primary = start_primary(latch(), &[]);
    let replica = start_replica(latch(), &primary, &["--maxmemory-policy", "allkeys-random"]);
    let mut p = connect(&primary);
    let mut r = connect(&replica);
    wait_link_up(&mut r);
    let value = "v".repeat(1000);
    let mut writes = redis::pipe();
    for i in 0..2000 {
        writes.cmd("SET").arg(format!("k:{i}")).arg(&value).ignore();
    }
    let () = writes.query(&mut p).unwrap();
    wait_offsets_equal(&mut p, &mut r);
    // A limit the data set is 1 MB over, then more writes.
    let used = info_int(&mut r, "memory", "used_memory");
    run(
        &mut r,
        &[
            "CONFIG",
            "SET",
            "maxmemory",
            &(used - (1 << 20)).to_string(),
        ],
    );
    run(&mut p, &["SET", "one-more", "v"]);
    wait_offsets_equal(&mut p, &mut r);
    assert_eq!(run(&mut r, &["DBSIZE"]), Value::Int(2001));
    assert_eq!(info_int(&mut r, "stats", "evicted_keys"), 0);

    run(&mut r, &["CONFIG", "SET", "replica-ignore-maxmemory", "no"]);
    let evicted = wait_until(TIMEOUT, "the replica to evict", || {
        let evicted = info_int(&mut r, "stats", "evicted_keys");
        (evicted >= 900, evicted)
    });
    assert!(evicted < 2000, "{evicted} keys evicted: everything");
    assert_eq!(run(&mut p, &["DBSIZE"]), Value::Int(2001));
}

#[test]
fn a_script_sends_its_commands_where_set_repl_says() {
    // Redis' unit/scripting checks the same against redis-server: a and d reach the
    // replica; a, c and d the AOF (b goes nowhere).
    let primary_server = start_primary(latch(), &["--appendonly", "yes"]);
    let mut p = connect(&primary_server);
    let replica_server = start_replica(latch(), &primary_server, &[]);
    let mut r = connect(&replica_server);
    wait_link_up(&mut r);
    let script = "redis.call('set','a','1')
        redis.set_repl(redis.REPL_NONE)
        redis.call('set','b','2')
        redis.set_repl(redis.REPL_AOF)
        redis.call('set','c','3')
        redis.set_repl(redis.REPL_REPLICA)
        redis.call('set','e','5')
        redis.set_repl(redis.REPL_ALL)
        redis.call('set','d','4')";
    run(&mut p, &["EVAL", script, "0"]);
    // A later write: once the replica has it, it has everything before it.
    run(&mut p, &["SET", "after", "1"]);
    wait_until(TIMEOUT, "the replica applies the later write", || {
        let after: Option<String> = redis::cmd("GET").arg("after").query(&mut r).unwrap();
        (after.is_some(), after)
    });
    let mget = |conn: &mut Connection| -> Vec<Option<String>> {
        redis::cmd("MGET")
            .arg(&["a", "b", "c", "d", "e"])
            .query(conn)
            .unwrap()
    };
    let some = |v: &str| Some(v.to_string());
    assert_eq!(
        mget(&mut r),
        vec![some("1"), None, None, some("4"), some("5")]
    );
    assert_eq!(
        mget(&mut p),
        vec![some("1"), some("2"), some("3"), some("4"), some("5")]
    );
    run(&mut p, &["DEBUG", "LOADAOF"]);
    assert_eq!(
        mget(&mut p),
        vec![some("1"), None, some("3"), some("4"), None]
    );
}

#[test]
fn exec_of_a_queued_writing_script_is_refused_on_a_read_only_replica() {
    // The transaction's flags include what a queued script declares: a `#!lua` script
    // without `no-writes` makes EXEC a write, refused as a whole on a replica.
    let primary_server = start_primary(latch(), &[]);
    let replica_server = start_primary(latch(), &[]);
    let mut conn = connect(&replica_server);
    run(&mut conn, &["MULTI"]);
    run(&mut conn, &["EVAL", "#!lua\nreturn 1", "0"]);
    let mut other = connect(&replica_server);
    run(&mut other, &["MULTI"]);
    run(
        &mut other,
        &["EVAL", "#!lua flags=no-writes\nreturn 2", "0"],
    );
    let port = primary_server.port.to_string();
    run(
        &mut connect(&replica_server),
        &["REPLICAOF", "127.0.0.1", &port],
    );
    let refused = redis::cmd("EXEC").query::<Value>(&mut conn).unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("Transaction discarded because of: READONLY"),
        "EXEC answered {refused}"
    );
    let ran: Vec<i64> = redis::cmd("EXEC").query(&mut other).unwrap();
    assert_eq!(ran, vec![2]);
}
