//! Files move both ways between Latch and the real redis-server 7.0 (Debian's package,
//! installed by `.ci/run`): Latch's AOF directory and RDB dump load in redis-server and
//! pass `redis-check-aof` / `redis-check-rdb`, and Latch loads redis-server's.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::TestServer;
use latch_testkit::{Program, Server};
use redis::Commands;

/// A redis-server started by the testkit (which checks the port is its own), in a
/// directory the test owns; killed on drop.
struct RedisServer(Server);

impl RedisServer {
    fn start(dir: &Path, extra: &[&str]) -> RedisServer {
        let server = Server::start_in(Program::Redis, dir, extra);
        server.wait_for_pong();
        RedisServer(server)
    }

    fn client(&self) -> redis::Connection {
        redis::Client::open(self.0.url())
            .and_then(|client| client.get_connection())
            .unwrap()
    }

    /// SHUTDOWN (the AOF synced) and wait for the exit.
    fn shutdown(mut self) {
        self.0.shutdown_nosave();
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("latch-roundtrip-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes keys of every type, small and large encodings, in two databases.
fn populate(conn: &mut redis::Connection) {
    let _: () = conn.set("string", "hello").unwrap();
    let _: () = conn.set("int", 12345).unwrap();
    let _: () = conn.set("long", "x".repeat(300)).unwrap();
    let _: () = redis::cmd("SET")
        .arg("lock")
        .arg("token")
        .arg("PX")
        .arg(600_000)
        .query(conn)
        .unwrap();
    let _: () = conn.rpush("small-list", &["a", "b", "c"]).unwrap();
    let big: Vec<String> = (0..300).map(|i| format!("item-{i}")).collect();
    let _: () = conn.rpush("big-list", &big).unwrap();
    let _: () = conn.sadd("int-set", &[1, 2, 3, 300000]).unwrap();
    let _: () = conn.sadd("set", &big).unwrap();
    let _: () = conn
        .hset_multiple("small-hash", &[("f1", "v1"), ("f2", "v2")])
        .unwrap();
    let fields: Vec<(String, String)> = (0..200)
        .map(|i| (format!("f{i}"), format!("v{i}")))
        .collect();
    let _: () = conn.hset_multiple("big-hash", &fields).unwrap();
    let _: () = conn
        .zadd_multiple("small-zset", &[(1.5, "a"), (2.0, "b")])
        .unwrap();
    let members: Vec<(f64, String)> = (0..200)
        .map(|i| (i as f64 / 3.0, format!("m{i}")))
        .collect();
    let _: () = conn.zadd_multiple("big-zset", &members).unwrap();
    for i in 1..=5 {
        let _: String = redis::cmd("XADD")
            .arg("stream")
            .arg(format!("{i}-0"))
            .arg("field")
            .arg(i)
            .query(conn)
            .unwrap();
    }
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("stream")
        .arg("group")
        .arg("0")
        .query(conn)
        .unwrap();
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("group")
        .arg("alice")
        .arg("COUNT")
        .arg(2)
        .arg("STREAMS")
        .arg("stream")
        .arg(">")
        .query(conn)
        .unwrap();
    let _: () = redis::cmd("SELECT").arg(3).query(conn).unwrap();
    let _: () = conn.set("in-db-3", "yes").unwrap();
    let _: () = redis::cmd("SELECT").arg(0).query(conn).unwrap();
}

/// What every key holds, in a form both servers must agree on.
fn describe(conn: &mut redis::Connection) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for db in [0, 3] {
        let _: () = redis::cmd("SELECT").arg(db).query(conn).unwrap();
        let mut keys: Vec<String> = conn.keys("*").unwrap();
        keys.sort();
        for key in keys {
            let kind: String = redis::cmd("TYPE").arg(&key).query(conn).unwrap();
            let content = match kind.as_str() {
                "string" => conn.get::<_, String>(&key).unwrap(),
                "list" => format!("{:?}", conn.lrange::<_, Vec<String>>(&key, 0, -1).unwrap()),
                "set" => {
                    let mut members: Vec<String> = conn.smembers(&key).unwrap();
                    members.sort();
                    format!("{members:?}")
                }
                "hash" => format!(
                    "{:?}",
                    conn.hgetall::<_, BTreeMap<String, String>>(&key).unwrap()
                ),
                "zset" => format!(
                    "{:?}",
                    conn.zrange_withscores::<_, Vec<(String, String)>>(&key, 0, -1)
                        .unwrap()
                ),
                "stream" => {
                    let entries: redis::Value = redis::cmd("XRANGE")
                        .arg(&key)
                        .arg("-")
                        .arg("+")
                        .query(conn)
                        .unwrap();
                    let pending: redis::Value = redis::cmd("XPENDING")
                        .arg(&key)
                        .arg("group")
                        .query(conn)
                        .unwrap();
                    format!("{entries:?} {pending:?}")
                }
                other => panic!("unexpected type {other}"),
            };
            let pttl: i64 = conn.pttl(&key).unwrap();
            let ttl = if pttl > 0 { "ttl" } else { "persistent" };
            out.insert(format!("{db}/{key}"), format!("{kind} {ttl} {content}"));
        }
    }
    let _: () = redis::cmd("SELECT").arg(0).query(conn).unwrap();
    out
}

fn wait_rewrite(conn: &mut redis::Connection) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info: String = redis::cmd("INFO").arg("persistence").query(conn).unwrap();
        if info.contains("aof_rewrite_in_progress:0") && !info.contains("aof_rewrite_scheduled:1") {
            return;
        }
        assert!(Instant::now() < deadline, "rewrite never finished");
        std::thread::sleep(Duration::from_millis(30));
    }
}

fn check_tool(tool: &str, arg: &Path) {
    let output = Command::new(tool)
        .arg(arg)
        .output()
        .unwrap_or_else(|e| panic!("{tool} must be installed (.ci/run installs it): {e}"));
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{tool} refused {}:\n{text}",
        arg.display()
    );
}

#[test]
fn redis_server_loads_latchs_aof_directory() {
    let latch = TestServer::start(&["--appendonly", "yes", "--save", ""]);
    let mut conn = latch.client();
    populate(&mut conn);
    // Part in the base (after a rewrite), part in the incremental file.
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
    wait_rewrite(&mut conn);
    let _: () = conn.set("after-rewrite", "1").unwrap();
    let _: () = conn.incr("int", 1).unwrap();
    let expected = describe(&mut conn);
    drop(conn);
    let dir = latch.shutdown_keep_files("NOSAVE");
    check_tool(
        "redis-check-aof",
        &dir.join("appendonlydir/appendonly.aof.manifest"),
    );
    let _ = std::fs::remove_file(dir.join("dump.rdb"));
    let redis = RedisServer::start(&dir, &["--appendonly", "yes"]);
    let loaded = describe(&mut redis.client());
    assert_eq!(loaded, expected);
    redis.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn latch_loads_redis_servers_aof_directory() {
    let dir = temp_dir("redis-aof");
    let redis = RedisServer::start(&dir, &["--appendonly", "yes"]);
    let mut conn = redis.client();
    populate(&mut conn);
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
    wait_rewrite(&mut conn);
    let _: () = conn.set("after-rewrite", "1").unwrap();
    let expected = describe(&mut conn);
    drop(conn);
    redis.shutdown();
    let latch = TestServer::start_in(Some(&dir), &["--appendonly", "yes", "--save", ""]);
    let loaded = describe(&mut latch.client());
    assert_eq!(loaded, expected);
}

#[test]
fn rdb_dumps_move_both_ways() {
    // Latch's dump: the checker accepts it, redis-server serves it.
    let latch = TestServer::start(&["--save", ""]);
    let mut conn = latch.client();
    populate(&mut conn);
    let _: () = redis::cmd("SAVE").query(&mut conn).unwrap();
    let expected = describe(&mut conn);
    drop(conn);
    let dir = latch.shutdown_keep_files("NOSAVE");
    check_tool("redis-check-rdb", &dir.join("dump.rdb"));
    let redis = RedisServer::start(&dir, &[]);
    assert_eq!(describe(&mut redis.client()), expected);
    // redis-server's dump: Latch serves it.
    let mut conn = redis.client();
    let _: () = conn.set("written-by-redis", "1").unwrap();
    let _: () = redis::cmd("SAVE").query(&mut conn).unwrap();
    let expected = describe(&mut conn);
    drop(conn);
    redis.shutdown();
    let latch = TestServer::start_in(Some(&dir), &["--save", ""]);
    assert_eq!(describe(&mut latch.client()), expected);
}

/// OBJECT IDLETIME (or FREQ) of `key`.
fn access_of(conn: &mut redis::Connection, what: &str, key: &str) -> i64 {
    redis::cmd("OBJECT").arg(what).arg(key).query(conn).unwrap()
}

/// A key restored as idle for 1,000 seconds and one with an LFU counter of 100.
fn restore_with_access(conn: &mut redis::Connection, policy: &str) {
    let _: () = conn.set("seed", "value").unwrap();
    let payload: Vec<u8> = redis::cmd("DUMP").arg("seed").query(conn).unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg(policy)
        .query(conn)
        .unwrap();
    let option = if policy.ends_with("lfu") {
        ["FREQ", "100"]
    } else {
        ["IDLETIME", "1000"]
    };
    let _: () = redis::cmd("RESTORE")
        .arg("k")
        .arg(0)
        .arg(&payload)
        .arg("REPLACE")
        .arg(&option[..])
        .query(conn)
        .unwrap();
}

#[test]
fn idle_times_and_lfu_counters_move_through_rdb_files_both_ways() {
    // Redis keeps the idle time under an LRU policy, the counter under an LFU one, and
    // neither otherwise; whoever loads the file gives them back.
    for (policy, what, kept) in [
        ("allkeys-lru", "IDLETIME", true),
        ("allkeys-lfu", "FREQ", true),
        ("noeviction", "IDLETIME", false),
    ] {
        let args = ["--save", "", "--maxmemory-policy", policy];
        let latch = TestServer::start(&args);
        let mut conn = latch.client();
        restore_with_access(&mut conn, policy);
        let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut conn).unwrap();
        let reloaded = access_of(&mut conn, what, "k");
        let _: () = redis::cmd("SAVE").query(&mut conn).unwrap();
        drop(conn);
        let dir = latch.shutdown_keep_files("NOSAVE");
        let redis = RedisServer::start(&dir, &args);
        let in_redis = access_of(&mut redis.client(), what, "k");
        match (kept, what) {
            (true, "IDLETIME") => {
                assert!((1000..1100).contains(&reloaded), "{policy}: {reloaded}");
                assert!((1000..1100).contains(&in_redis), "{policy}: {in_redis}");
            }
            (true, _) => {
                // A minute boundary may take one off.
                assert!((99..=100).contains(&reloaded), "{policy}: {reloaded}");
                assert!((98..=100).contains(&in_redis), "{policy}: {in_redis}");
            }
            (false, _) => {
                assert!(reloaded < 100, "{policy}: {reloaded}");
                assert!(in_redis < 100, "{policy}: {in_redis}");
            }
        }
        // And back: redis-server's file, loaded by Latch.
        let mut conn = redis.client();
        restore_with_access(&mut conn, policy);
        let _: () = redis::cmd("SAVE").query(&mut conn).unwrap();
        drop(conn);
        redis.shutdown();
        let latch = TestServer::start_in(Some(&dir), &args);
        let from_redis = access_of(&mut latch.client(), what, "k");
        match (kept, what) {
            (true, "IDLETIME") => {
                assert!((1000..1100).contains(&from_redis), "{policy}: {from_redis}")
            }
            (true, _) => assert!((98..=100).contains(&from_redis), "{policy}: {from_redis}"),
            (false, _) => assert!(from_redis < 100, "{policy}: {from_redis}"),
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
