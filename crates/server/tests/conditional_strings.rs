//! Compare-and-act on strings: SET's IFEQ/IFNE/IFDEQ/IFDNE and DELEX and DIGEST (Redis
//! 8.4), DELIFEQ (Valkey 9.0). Replies byte for byte, the lock idioms they replace, and what
//! the replication stream carries (plain SET and DEL, which a redis-server 7 replica
//! applies).

mod common;

use common::replies::{NIL, SYNTAX, WRONGTYPE};
use common::{bulk, check, TestServer};
use latch_testkit::{Program, Server};
use redis::Value;

const BAD_DIGEST: &str = "-ERR the digest must be 16 hexadecimal digits\r\n";

/// XXH3-64 of "Hello world", as Redis' DIGEST page shows it.
const HELLO_DIGEST: &str = "b6acb9d84a38ff74";

fn client(server: &TestServer) -> redis::Connection {
    redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap()
}

fn digest(conn: &mut redis::Connection, key: &str) -> String {
    redis::cmd("DIGEST").arg(key).query(conn).unwrap()
}

fn pttl(conn: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(conn).unwrap()
}

#[test]
fn digest_answers_the_xxh3_of_a_string() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    c.expect(&[b"SET", b"key1", b"Hello world"], b"+OK\r\n");
    check(&mut c, "DIGEST key1", &bulk(HELLO_DIGEST));
    check(&mut c, "DIGEST missing", NIL);
    check(&mut c, "RPUSH list a", ":1\r\n");
    check(&mut c, "DIGEST list", WRONGTYPE);
    // An integer-looking value digests its decimal text.
    check(&mut c, "SET n 12345", "+OK\r\n");
    check(&mut c, "INCR n", ":12346\r\n");
    c.expect(&[b"SET", b"t", b"12346"], b"+OK\r\n");
    let mut conn = client(&server);
    assert_eq!(digest(&mut conn, "n"), digest(&mut conn, "t"));
    check(
        &mut c,
        "DIGEST",
        "-ERR wrong number of arguments for 'digest' command\r\n",
    );
}

#[test]
fn set_ifeq_and_ifne() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    // IFEQ never creates a key; IFNE does.
    check(&mut c, "SET k v IFEQ v", NIL);
    check(&mut c, "EXISTS k", ":0\r\n");
    check(&mut c, "SET k v1 IFNE other", "+OK\r\n");
    check(&mut c, "SET k v2 IFEQ wrong", NIL);
    check(&mut c, "GET k", &bulk("v1"));
    check(&mut c, "SET k v2 IFEQ v1", "+OK\r\n");
    check(&mut c, "SET k v3 IFNE v2", NIL);
    check(&mut c, "SET k v3 IFNE v1", "+OK\r\n");
    check(&mut c, "GET k", &bulk("v3"));
    // With GET: the old value either way.
    check(&mut c, "SET k v4 IFEQ nope GET", &bulk("v3"));
    check(&mut c, "GET k", &bulk("v3"));
    check(&mut c, "SET k v4 IFEQ v3 GET", &bulk("v3"));
    check(&mut c, "SET k v5 GET IFNE v4", &bulk("v4"));
    check(&mut c, "GET k", &bulk("v4"));
    check(&mut c, "SET fresh v IFNE x GET", NIL);
    check(&mut c, "GET fresh", &bulk("v"));
    // Another type: WRONGTYPE, and nothing changes.
    check(&mut c, "SADD s m", ":1\r\n");
    check(&mut c, "SET s v IFEQ m", WRONGTYPE);
    check(&mut c, "SET s v IFNE m", WRONGTYPE);
    check(&mut c, "TYPE s", "+set\r\n");
}

#[test]
fn set_conditions_with_expiry() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "SET lock token-a PX 100000", "+OK\r\n");
    // Extending a lock only its holder may extend: the new TTL applies when the value
    // matches.
    check(&mut c, "SET lock token-a IFEQ token-a PX 500000", "+OK\r\n");
    let mut conn = client(&server);
    let ms = pttl(&mut conn, "lock");
    assert!(ms > 400_000, "PTTL after the extension: {ms}");
    check(&mut c, "SET lock token-b IFEQ token-x PX 1", NIL);
    check(&mut c, "GET lock", &bulk("token-a"));
    // KEEPTTL keeps it.
    check(&mut c, "SET lock token-c IFEQ token-a KEEPTTL", "+OK\r\n");
    let ms = pttl(&mut conn, "lock");
    assert!(ms > 400_000, "PTTL after KEEPTTL: {ms}");
}

#[test]
fn set_digest_conditions() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    c.expect(&[b"SET", b"k", b"Hello world"], b"+OK\r\n");
    check(
        &mut c,
        &format!("SET k next IFDEQ {HELLO_DIGEST}"),
        "+OK\r\n",
    );
    check(&mut c, &format!("SET k again IFDEQ {HELLO_DIGEST}"), NIL);
    check(
        &mut c,
        &format!("SET k again IFDNE {HELLO_DIGEST}"),
        "+OK\r\n",
    );
    check(&mut c, "GET k", &bulk("again"));
    // Either case of hex digits.
    let upper = digest(&mut client(&server), "k").to_ascii_uppercase();
    check(&mut c, &format!("SET k upper IFDEQ {upper}"), "+OK\r\n");
    check(&mut c, "SET new v IFDEQ 0000000000000000", NIL);
    check(&mut c, "SET new v IFDNE 0000000000000000", "+OK\r\n");
    for bad in [
        "abc",
        "0123456789abcdeg",
        "+123456789abcdef",
        "0123456789abcdef0",
    ] {
        check(&mut c, &format!("SET k v IFDEQ {bad}"), BAD_DIGEST);
        check(&mut c, &format!("DELEX k IFDNE {bad}"), BAD_DIGEST);
    }
    check(&mut c, "GET k", &bulk("upper"));
}

#[test]
fn set_conditions_exclude_each_other() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    for command in [
        "SET k v NX IFEQ a",
        "SET k v IFEQ a XX",
        "SET k v IFEQ a IFNE b",
        "SET k v IFDEQ 0000000000000000 IFEQ a",
        "SET k v IFEQ",
        "SET k v IFNE a b",
    ] {
        check(&mut c, command, SYNTAX);
    }
    // The same condition twice: the last value counts, as with a repeated EX.
    check(&mut c, "SET k v", "+OK\r\n");
    check(&mut c, "SET k w IFEQ x IFEQ v", "+OK\r\n");
    check(&mut c, "GET k", &bulk("w"));
    // GETEX takes none of them.
    check(&mut c, "GETEX k IFEQ w", SYNTAX);
}

#[test]
fn delex_and_delifeq() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "DELEX missing", ":0\r\n");
    check(&mut c, "DELEX missing IFNE x", ":0\r\n");
    // Without a condition, any type goes.
    check(&mut c, "RPUSH list a", ":1\r\n");
    check(&mut c, "DELEX list", ":1\r\n");
    check(&mut c, "EXISTS list", ":0\r\n");
    check(&mut c, "RPUSH list a", ":1\r\n");
    check(&mut c, "DELEX list IFEQ a", WRONGTYPE);
    check(&mut c, "DELIFEQ list a", WRONGTYPE);
    check(&mut c, "EXISTS list", ":1\r\n");

    check(&mut c, "SET lock mine", "+OK\r\n");
    check(&mut c, "DELEX lock IFEQ theirs", ":0\r\n");
    check(&mut c, "DELEX lock IFNE mine", ":0\r\n");
    check(&mut c, "DELIFEQ lock theirs", ":0\r\n");
    check(&mut c, "DELIFEQ lock mine", ":1\r\n");
    check(&mut c, "DELIFEQ lock mine", ":0\r\n");
    check(&mut c, "SET lock mine", "+OK\r\n");
    check(&mut c, "DELEX lock IFNE theirs", ":1\r\n");
    c.expect(&[b"SET", b"lock", b"Hello world"], b"+OK\r\n");
    check(&mut c, "DELEX lock IFDNE 0000000000000000", ":1\r\n");
    c.expect(&[b"SET", b"lock", b"Hello world"], b"+OK\r\n");
    check(
        &mut c,
        &format!("DELEX lock IFDEQ {HELLO_DIGEST}"),
        ":1\r\n",
    );

    check(&mut c, "DELEX k IFLT 1", SYNTAX);
    check(&mut c, "DELEX k IFEQ", SYNTAX);
    check(&mut c, "DELEX k IFEQ a b", SYNTAX);
    check(
        &mut c,
        "DELIFEQ k",
        "-ERR wrong number of arguments for 'delifeq' command\r\n",
    );
}

#[test]
fn the_new_commands_are_in_the_command_table() {
    let server = TestServer::start(&[]);
    let mut conn = client(&server);
    for (name, arity, flag) in [
        ("delex", -2, "write"),
        ("delifeq", 3, "write"),
        ("digest", 2, "readonly"),
    ] {
        let info: Value = redis::cmd("COMMAND")
            .arg("INFO")
            .arg(name)
            .query(&mut conn)
            .unwrap();
        let Value::Array(entries) = info else {
            panic!("COMMAND INFO {name}: {info:?}")
        };
        let Some(Value::Array(entry)) = entries.first() else {
            panic!("COMMAND INFO {name}: {entries:?}")
        };
        assert_eq!(entry[0], Value::BulkString(name.as_bytes().to_vec()));
        assert_eq!(entry[1], Value::Int(arity), "arity of {name}");
        let flags = format!("{:?}", entry[2]);
        assert!(flags.contains(flag), "flags of {name}: {flags}");
        let docs: Value = redis::cmd("COMMAND")
            .arg("DOCS")
            .arg(name)
            .query(&mut conn)
            .unwrap();
        assert!(
            format!("{docs:?}").contains("summary"),
            "COMMAND DOCS {name}"
        );
    }
    let docs: Value = redis::cmd("COMMAND")
        .arg("DOCS")
        .arg("set")
        .query(&mut conn)
        .unwrap();
    let docs = format!("{docs:?}");
    for token in ["IFEQ", "IFNE", "IFDEQ", "IFDNE"] {
        assert!(docs.contains(token), "COMMAND DOCS set lacks {token}");
    }
}

/// Latch's stream carries what a redis-server 7.0 replica can apply: the writes the
/// conditions let through, as plain SET (with an absolute expiry) and DEL.
#[test]
fn a_redis_server_replica_follows_conditional_writes() {
    let primary = Server::start(Program::Latch, &["--repl-diskless-sync-delay", "0"]);
    let port = primary.port.to_string();
    let replica = Server::start(Program::Redis, &["--replicaof", "127.0.0.1", &port]);
    let mut p = redis::Client::open(primary.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let mut r = redis::Client::open(replica.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let run = |conn: &mut redis::Connection, args: &[&str]| -> redis::Value {
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        cmd.query(conn).unwrap()
    };
    run(&mut p, &["SET", "a", "1"]);
    run(&mut p, &["SET", "a", "2", "IFEQ", "1", "PX", "600000"]);
    run(&mut p, &["SET", "a", "3", "IFEQ", "nope"]);
    run(&mut p, &["SET", "b", "x", "IFNE", "y", "GET"]);
    run(&mut p, &["SET", "c", "gone"]);
    run(&mut p, &["DELEX", "c", "IFEQ", "gone"]);
    run(&mut p, &["SET", "d", "kept"]);
    run(&mut p, &["DELIFEQ", "d", "other"]);
    run(&mut p, &["SET", "done", "yes"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let done: Option<String> = redis::cmd("GET").arg("done").query(&mut r).unwrap();
        if done.is_some() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the replica never caught up"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let get = |conn: &mut redis::Connection, key: &str| -> Option<String> {
        redis::cmd("GET").arg(key).query(conn).unwrap()
    };
    assert_eq!(get(&mut r, "a").as_deref(), Some("2"));
    let ttl: i64 = redis::cmd("PTTL").arg("a").query(&mut r).unwrap();
    assert!(ttl > 500_000, "the extension's TTL on the replica: {ttl}");
    assert_eq!(get(&mut r, "b").as_deref(), Some("x"));
    assert_eq!(get(&mut r, "c"), None);
    assert_eq!(get(&mut r, "d").as_deref(), Some("kept"));
}
