//! PUBLISH reaches replicas, as in Redis 7.0: a subscriber connected to a replica hears what
//! is published on its primary (the command goes down the replication stream, not into the
//! AOF), between Latch and Debian's redis-server in both directions.

use std::time::{Duration, Instant};

use latch_testkit::{Program, Server};

fn connect(server: &Server) -> redis::Connection {
    let conn = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    conn
}

fn start_replica(program: Program, primary: &Server) -> Server {
    let port = primary.port.to_string();
    Server::start(program, &["--replicaof", "127.0.0.1", &port])
}

/// Waits until the replica's link is up and its offset is the primary's.
fn wait_in_sync(primary: &mut redis::Connection, replica: &mut redis::Connection) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let role: Vec<redis::Value> = redis::cmd("ROLE").query(replica).unwrap();
        let state = match role.get(3) {
            Some(redis::Value::BulkString(s)) => String::from_utf8_lossy(s).into_owned(),
            _ => String::new(),
        };
        let offset = |conn: &mut redis::Connection| -> i64 {
            let info: String = redis::cmd("INFO").arg("replication").query(conn).unwrap();
            info.lines()
                .find_map(|l| l.strip_prefix("master_repl_offset:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(-1)
        };
        if state == "connected" && offset(primary) == offset(replica) {
            return;
        }
        assert!(Instant::now() < deadline, "replica never caught up");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn subscribe(server: &Server, channel: &str) -> redis::Connection {
    let mut conn = connect(server);
    let _: redis::Value = redis::cmd("SUBSCRIBE")
        .arg(channel)
        .query(&mut conn)
        .unwrap();
    conn
}

fn next_message(conn: &mut redis::Connection) -> Vec<String> {
    let value = conn.recv_response().expect("a message");
    let redis::Value::Array(items) = value else {
        panic!("not a message: {value:?}");
    };
    items
        .into_iter()
        .map(|item| match item {
            redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
            other => format!("{other:?}"),
        })
        .collect()
}

fn published_on_primary_reaches(primary_program: Program, replica_program: Program) {
    let primary_server = Server::start(
        primary_program,
        &["--appendonly", "yes", "--repl-diskless-sync-delay", "0"],
    );
    let mut primary = connect(&primary_server);
    let replica_server = start_replica(replica_program, &primary_server);
    let mut replica = connect(&replica_server);
    wait_in_sync(&mut primary, &mut replica);
    let mut listener = subscribe(&replica_server, "news");
    let mut sharded = connect(&replica_server);
    let _: redis::Value = redis::cmd("SSUBSCRIBE")
        .arg("shard-news")
        .query(&mut sharded)
        .unwrap();

    // On its own, in a transaction, and from a script.
    let heard: i64 = redis::cmd("PUBLISH")
        .arg("news")
        .arg("one")
        .query(&mut primary)
        .unwrap();
    assert_eq!(heard, 0, "nobody listens on the primary");
    let _: redis::Value = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("k")
        .arg("v")
        .cmd("PUBLISH")
        .arg("news")
        .arg("two")
        .query(&mut primary)
        .unwrap();
    let _: redis::Value = redis::cmd("EVAL")
        .arg("return redis.call('publish', KEYS[1], ARGV[1])")
        .arg(1)
        .arg("news")
        .arg("three")
        .query(&mut primary)
        .unwrap();
    let _: i64 = redis::cmd("SPUBLISH")
        .arg("shard-news")
        .arg("four")
        .query(&mut primary)
        .unwrap();
    for text in ["one", "two", "three"] {
        assert_eq!(next_message(&mut listener), ["message", "news", text]);
    }
    assert_eq!(
        next_message(&mut sharded),
        ["smessage", "shard-news", "four"]
    );
    wait_in_sync(&mut primary, &mut replica);
    let value: String = redis::cmd("GET").arg("k").query(&mut replica).unwrap();
    assert_eq!(value, "v");

    // The AOF holds the SET, never a PUBLISH: replaying it must not publish again.
    let _: redis::Value = redis::cmd("CONFIG")
        .arg("SET")
        .arg("appendfsync")
        .arg("always")
        .query(&mut primary)
        .unwrap();
    let mut aof = Vec::new();
    for entry in std::fs::read_dir(primary_server.dir.join("appendonlydir")).unwrap() {
        aof.extend(std::fs::read(entry.unwrap().path()).unwrap());
    }
    let aof = String::from_utf8_lossy(&aof).to_ascii_lowercase();
    assert!(aof.contains("\r\nset\r\n"), "{aof}");
    assert!(!aof.contains("publish"), "{aof}");
}

#[test]
fn latch_primary_publishes_to_its_replicas() {
    published_on_primary_reaches(Program::Latch, Program::Latch);
    published_on_primary_reaches(Program::Latch, Program::Redis);
}

#[test]
fn latch_replica_hears_redis_server_publish() {
    published_on_primary_reaches(Program::Redis, Program::Latch);
}
