//! The slow log against Debian's redis-server 7.0.15: the same commands leave the same
//! entries (arguments as shown, secrets redacted or not by the same rules), and a blocked
//! command is logged when it is served, not when it blocks.

mod common;

use std::time::Duration;

use common::TestServer;
use latch_testkit::Server;

fn run(conn: &mut redis::Connection, args: &[&str]) {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    let _: redis::RedisResult<redis::Value> = cmd.query(conn);
}

/// The arguments of every slow log entry, newest first.
fn logged(conn: &mut redis::Connection) -> Vec<Vec<String>> {
    let entries: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query(conn)
        .unwrap();
    entries
        .into_iter()
        .map(|entry| {
            let redis::Value::Array(fields) = entry else {
                panic!("{entry:?}");
            };
            let redis::Value::Array(args) = &fields[3] else {
                panic!("{fields:?}");
            };
            args.iter()
                .map(|arg| match arg {
                    redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                    other => format!("{other:?}"),
                })
                .collect()
        })
        .collect()
}

/// Runs `script` on a fresh connection with every command logged; returns the log.
fn slowlog_of(url: &str, script: &[&[&str]]) -> Vec<Vec<String>> {
    let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
    run(
        &mut conn,
        &["CONFIG", "SET", "slowlog-log-slower-than", "0"],
    );
    run(&mut conn, &["SLOWLOG", "RESET"]);
    for args in script {
        run(&mut conn, args);
    }
    run(
        &mut conn,
        &["CONFIG", "SET", "slowlog-log-slower-than", "-1"],
    );
    logged(&mut conn)
}

#[test]
fn secrets_are_redacted_as_redis_does() {
    let latch = TestServer::start(&[]);
    let redis = Server::redis(&[]);
    let script: &[&[&str]] = &[
        &["ACL", "SETUSER", "bad user", "on", ">secret"],
        &["ACL", "SETUSER", "fine", "on", ">secret", "+get"],
        &["ACL", "SETUSER"],
        &[
            "CONFIG",
            "SET",
            "masterauth",
            "pw",
            "maxmemory-samples",
            "5",
        ],
        &["CONFIG", "SET", "masteruser", "user", "no-such-option", "x"],
        &["CONFIG", "SET", "requirepass"],
        &["AUTH", "wrong"],
        &["AUTH", "fine", "wrong"],
        &["AUTH", "a", "b", "c"],
        &["HELLO", "3", "AUTH", "fine", "wrong"],
        &["HELLO", "9", "AUTH", "fine", "wrong"],
        &["HELLO", "2", "SETNAME", "n", "AUTH", "fine", "wrong"],
        &[
            "MIGRATE",
            "127.0.0.1",
            "1",
            "k",
            "0",
            "10",
            "AUTH2",
            "u",
            "p",
        ],
        &["GET", "secret"],
    ];
    let from_latch = slowlog_of(&latch.url(), script);
    let from_redis = slowlog_of(&redis.url(), script);
    assert_eq!(from_latch, from_redis);
    assert!(from_latch.iter().any(|entry| entry.join(" ")
        == "acl setuser (redacted) (redacted) (redacted)"
        || entry.join(" ") == "ACL SETUSER (redacted) (redacted) (redacted)"));
}

#[test]
fn a_blocked_command_is_logged_when_served() {
    let latch = TestServer::start(&[]);
    let redis = Server::redis(&[]);
    for url in [latch.url(), redis.url()] {
        let client = redis::Client::open(url.as_str()).unwrap();
        let mut conn = client.get_connection().unwrap();
        run(
            &mut conn,
            &["CONFIG", "SET", "slowlog-log-slower-than", "0"],
        );
        let mut waiter = client.get_connection().unwrap();
        let blocked = std::thread::spawn(move || {
            let popped: Vec<String> = redis::cmd("BLPOP")
                .arg("list")
                .arg(0)
                .query(&mut waiter)
                .unwrap();
            popped
        });
        // Wait until it blocks, then empty the log: its entry must come when it is served.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let info: String = redis::cmd("INFO").arg("clients").query(&mut conn).unwrap();
            if info.contains("blocked_clients:1") {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "never blocked");
            std::thread::sleep(Duration::from_millis(10));
        }
        run(&mut conn, &["SLOWLOG", "RESET"]);
        run(&mut conn, &["RPUSH", "list", "item"]);
        assert_eq!(blocked.join().unwrap(), ["list", "item"]);
        run(
            &mut conn,
            &["CONFIG", "SET", "slowlog-log-slower-than", "-1"],
        );
        let entries = logged(&mut conn);
        let names: Vec<String> = entries.iter().map(|e| e.join(" ")).collect();
        assert!(
            names.contains(&"BLPOP list 0".to_string()),
            "{url}: {names:?}"
        );
    }
}
