//! MIGRATE between two Latch servers, and from Latch to Debian's redis-server (with AUTH):
//! moved and copied keys, TTLs, REPLACE, the target's refusals, unreachable and stalled
//! targets, the cached connection, and COMMAND GETKEYS.

mod common;

use std::time::{Duration, Instant};

use common::TestServer;
use latch_testkit::Server;
use redis::{Commands, Value};

fn migrate(conn: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd("MIGRATE");
    for arg in args {
        cmd.arg(*arg);
    }
    cmd.query(conn)
}

fn error_text(result: redis::RedisResult<Value>) -> String {
    let error = result.expect_err("an error reply");
    format!(
        "{} {}",
        error.code().unwrap_or("?"),
        error.detail().unwrap_or("")
    )
}

fn cached_sockets(conn: &mut redis::Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("stats").query(conn).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("migrate_cached_sockets:"))
        .expect("migrate_cached_sockets in INFO")
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn moves_copies_and_replaces_keys_between_latch_servers() {
    let source = TestServer::start(&[]);
    let target = TestServer::start(&[]);
    let port = target.port.to_string();
    let mut src = source.client();
    let mut dst = target.client();

    let _: () = src.set("plain", "v1").unwrap();
    let _: () = src.set_ex("timed", "v2", 100).unwrap();
    let _: () = src.rpush("list", &["a", "b", "c"]).unwrap();

    assert_eq!(cached_sockets(&mut src), 0);
    // One key into database 0: it leaves the source.
    let reply = migrate(&mut src, &["127.0.0.1", &port, "plain", "0", "5000"]).unwrap();
    assert_eq!(reply, Value::Okay);
    assert!(!src.exists::<_, bool>("plain").unwrap());
    assert_eq!(dst.get::<_, String>("plain").unwrap(), "v1");
    assert_eq!(dst.ttl::<_, i64>("plain").unwrap(), -1);
    assert_eq!(cached_sockets(&mut src), 1);

    // Several keys (one missing) into database 2, copied: they stay here too, TTL kept.
    let reply = migrate(
        &mut src,
        &[
            "127.0.0.1",
            &port,
            "",
            "2",
            "5000",
            "COPY",
            "KEYS",
            "timed",
            "list",
            "missing",
        ],
    )
    .unwrap();
    assert_eq!(reply, Value::Okay);
    assert!(src.exists::<_, bool>("timed").unwrap());
    let _: () = redis::cmd("SELECT").arg(2).query(&mut dst).unwrap();
    let ttl: i64 = dst.ttl("timed").unwrap();
    assert!((95..=100).contains(&ttl), "ttl {ttl}");
    assert_eq!(
        dst.lrange::<_, Vec<String>>("list", 0, -1).unwrap(),
        ["a", "b", "c"]
    );
    assert!(!dst.exists::<_, bool>("missing").unwrap());

    // The target refuses to overwrite: the source keeps its key and relays the error.
    let error = error_text(migrate(
        &mut src,
        &["127.0.0.1", &port, "timed", "2", "5000"],
    ));
    assert_eq!(
        error,
        "ERR Target instance replied with error: BUSYKEY Target key name already exists."
    );
    assert!(src.exists::<_, bool>("timed").unwrap());
    // REPLACE overwrites, and the key moves.
    let _: () = src.set("timed", "newer").unwrap();
    let reply = migrate(
        &mut src,
        &["127.0.0.1", &port, "timed", "2", "5000", "REPLACE"],
    )
    .unwrap();
    assert_eq!(reply, Value::Okay);
    assert_eq!(dst.get::<_, String>("timed").unwrap(), "newer");
    assert!(!src.exists::<_, bool>("timed").unwrap());

    // Nothing to move: NOKEY, a status reply.
    let reply = migrate(&mut src, &["127.0.0.1", &port, "gone", "0", "5000"]).unwrap();
    assert_eq!(reply, Value::SimpleString("NOKEY".into()));
}

#[test]
fn argument_errors_match_redis() {
    let source = TestServer::start(&[]);
    let mut src = source.client();
    let _: () = src.set("k", "v").unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["127.0.0.1", "1", "k", "0", "10", "KEYS", "k"],
            "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
        ),
        (
            &["127.0.0.1", "1", "k", "0", "10", "BOGUS"],
            "ERR syntax error",
        ),
        (
            &["127.0.0.1", "1", "k", "0", "10", "AUTH"],
            "ERR syntax error",
        ),
        (
            &["127.0.0.1", "1", "k", "0", "10", "AUTH2", "user"],
            "ERR syntax error",
        ),
        (
            &["127.0.0.1", "1", "k", "db", "10"],
            "ERR value is not an integer or out of range",
        ),
        (
            &["127.0.0.1", "1", "k", "0", "soon"],
            "ERR value is not an integer or out of range",
        ),
    ];
    for (args, expected) in cases {
        assert_eq!(&error_text(migrate(&mut src, args)), expected, "{args:?}");
    }
    assert_eq!(src.get::<_, String>("k").unwrap(), "v");
}

/// Whether every thread of `pid` is in the stopped state ('T' in /proc/PID/task/TID/stat).
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|task| {
        std::fs::read_to_string(task.path().join("stat"))
            .ok()
            .and_then(|stat| {
                let after_name = stat.rsplit_once(')')?.1.trim_start().to_string();
                after_name.chars().next()
            })
            == Some('T')
    })
}

#[test]
fn unreachable_and_stalled_targets_fail_with_ioerr_and_keep_the_key() {
    let source = TestServer::start(&[]);
    let mut src = source.client();
    let _: () = src.set("k", "v").unwrap();

    // Nothing listens on a port just freed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let error = error_text(migrate(&mut src, &["127.0.0.1", &closed, "k", "0", "500"]));
    assert_eq!(error, "IOERR error or timeout connecting to the client");

    // A stopped server accepts the connection (the kernel does) but never answers.
    let stalled = Server::latch(&[]);
    stalled.pause();
    // SIGSTOP takes effect asynchronously: wait until every thread shows as stopped.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !all_threads_stopped(stalled.pid()) {
        assert!(Instant::now() < deadline, "target did not stop");
        std::thread::sleep(Duration::from_millis(10));
    }
    let port = stalled.port.to_string();
    let started = Instant::now();
    let error = error_text(migrate(&mut src, &["127.0.0.1", &port, "k", "0", "300"]));
    stalled.resume();
    assert_eq!(error, "IOERR error or timeout reading to target instance");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(src.get::<_, String>("k").unwrap(), "v");
    // The failed connection is not kept.
    assert_eq!(cached_sockets(&mut src), 0);
}

#[test]
fn migrates_into_redis_server_with_auth_and_hides_the_password() {
    let source = TestServer::start(&[]);
    let redis = Server::redis(&["--requirepass", "s3cret"]);
    let port = redis.port.to_string();
    let mut src = source.client();
    let _: () = src.hset("h", "f", "1").unwrap();
    let _: () = src.zadd("z", "m", 2.5).unwrap();

    // Without the password, the target's NOAUTH comes back and nothing moves.
    let error = error_text(migrate(&mut src, &["127.0.0.1", &port, "h", "0", "5000"]));
    assert_eq!(
        error,
        "ERR Target instance replied with error: NOAUTH Authentication required."
    );
    assert!(src.exists::<_, bool>("h").unwrap());

    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg("0")
        .query(&mut src)
        .unwrap();
    let reply = migrate(
        &mut src,
        &[
            "127.0.0.1",
            &port,
            "",
            "0",
            "5000",
            "AUTH",
            "s3cret",
            "KEYS",
            "h",
            "z",
        ],
    )
    .unwrap();
    assert_eq!(reply, Value::Okay);
    assert!(!src.exists::<_, bool>("h").unwrap());
    assert!(!src.exists::<_, bool>("z").unwrap());

    let mut dst = redis::Client::open(format!("redis://:s3cret@127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    assert_eq!(dst.hget::<_, _, String>("h", "f").unwrap(), "1");
    assert_eq!(dst.zscore::<_, _, f64>("z", "m").unwrap(), 2.5);

    // The slow log shows the command with the password hidden.
    let log: Value = redis::cmd("SLOWLOG").arg("GET").query(&mut src).unwrap();
    let text = format!("{log:?}");
    assert!(text.contains("redacted"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
}

#[test]
fn getkeys_follows_migrates_own_parser() {
    let server = TestServer::start(&[]);
    let mut conn = server.client();
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg(&[
            "GETKEYS", "MIGRATE", "h", "1", "", "0", "10", "AUTH", "keys", "KEYS", "a", "keys", "b",
        ])
        .query(&mut conn)
        .unwrap();
    assert_eq!(keys, ["a", "keys", "b"]);
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg(&["GETKEYS", "MIGRATE", "h", "1", "k", "0", "10", "COPY"])
        .query(&mut conn)
        .unwrap();
    assert_eq!(keys, ["k"]);
    let info: Value = redis::cmd("COMMAND")
        .arg(&["INFO", "MIGRATE"])
        .query(&mut conn)
        .unwrap();
    assert!(format!("{info:?}").contains("movablekeys"));

    // ACL key patterns see the same keys: a key after a key named "keys" is still checked.
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "mover", "on", "nopass", "~a*", "+@all"])
        .query(&mut conn)
        .unwrap();
    let _: () = redis::cmd("AUTH")
        .arg(&["mover", "x"])
        .query(&mut conn)
        .unwrap();
    let error = error_text(migrate(
        &mut conn,
        &["127.0.0.1", "1", "", "0", "10", "KEYS", "a", "keys", "b"],
    ));
    assert!(error.starts_with("NOPERM"), "{error}");
    let reply = migrate(
        &mut conn,
        &["127.0.0.1", "1", "", "0", "10", "KEYS", "a1", "a2"],
    );
    assert_eq!(reply.unwrap(), Value::SimpleString("NOKEY".into()));
}
