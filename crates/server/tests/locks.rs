//! Latch's native locks (LOCK.ACQUIRE / RELEASE / EXTEND / INFO): grants and fencing
//! tokens, waiting in line in the server, the hand-over at a release or at the holder's
//! deadline, sharing a lock with clients that use `SET NX PX` and `DEL`, and the blocking
//! rules every blocking command follows (timeouts, CLIENT UNBLOCK, MULTI, killed waiters).

mod common;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use common::replies::{SYNTAX, WRONGTYPE};
use common::{check, TestServer};
use latch_testkit::{Program, Server};
use redis::{Connection, Value};

fn client(server: &TestServer) -> Connection {
    let conn = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    conn
}

/// A grant's `[fencing-token, ttl-ms]`, or None for nil.
fn acquire(conn: &mut Connection, args: &[&str]) -> Option<(i64, i64)> {
    let mut cmd = redis::cmd("LOCK.ACQUIRE");
    for arg in args {
        cmd.arg(*arg);
    }
    match cmd.query::<Value>(conn).unwrap() {
        Value::Nil => None,
        Value::Array(items) => match items.as_slice() {
            [Value::Int(fence), Value::Int(ttl)] => Some((*fence, *ttl)),
            other => panic!("LOCK.ACQUIRE answered {other:?}"),
        },
        other => panic!("LOCK.ACQUIRE answered {other:?}"),
    }
}

fn int(conn: &mut Connection, args: &[&str]) -> i64 {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query(conn).unwrap()
}

/// LOCK.INFO's reply, and a way to read one of its fields.
fn info_fields(conn: &mut Connection, name: &str) -> impl Fn(&str) -> Value {
    let reply: Value = redis::cmd("LOCK.INFO").arg(name).query(conn).unwrap();
    let Value::Array(items) = reply else {
        panic!("LOCK.INFO answered {reply:?}")
    };
    move |wanted: &str| {
        items
            .chunks(2)
            .find(|pair| pair[0] == Value::BulkString(wanted.as_bytes().to_vec()))
            .map(|pair| pair[1].clone())
            .unwrap_or_else(|| panic!("LOCK.INFO lacks {wanted}: {items:?}"))
    }
}

/// LOCK.INFO as (holder, fencing token, ttl, waiters' client ids).
fn info(conn: &mut Connection, name: &str) -> (Option<String>, i64, i64, Vec<i64>) {
    let field = info_fields(conn, name);
    let holder = match field("holder") {
        Value::Nil => None,
        Value::BulkString(bytes) => Some(String::from_utf8(bytes).unwrap()),
        other => panic!("holder {other:?}"),
    };
    let (Value::Int(fence), Value::Int(ttl), Value::Array(waiters)) =
        (field("fencing-token"), field("ttl-ms"), field("waiters"))
    else {
        panic!("LOCK.INFO's fields")
    };
    let waiters = waiters
        .iter()
        .map(|waiter| match waiter {
            Value::Array(pair) => match pair[0] {
                Value::Int(id) => id,
                _ => panic!("waiter {pair:?}"),
            },
            other => panic!("waiter {other:?}"),
        })
        .collect();
    (holder, fence, ttl, waiters)
}

fn wait_for_waiters(conn: &mut Connection, name: &str, count: usize) -> Vec<i64> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, _, _, waiters) = info(conn, name);
        if waiters.len() == count {
            return waiters;
        }
        assert!(
            Instant::now() < deadline,
            "{count} waiters never queued: {waiters:?}"
        );
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn grants_releases_extends_and_fencing_tokens_grow() {
    let server = TestServer::start(&[]);
    let mut c = client(&server);
    let (first, ttl) = acquire(&mut c, &["job", "a", "10000"]).expect("free lock");
    assert_eq!(ttl, 10000);
    assert_eq!(acquire(&mut c, &["job", "b", "10000"]), None, "held by a");
    // The holder asking again: the same fencing token, the TTL renewed.
    assert_eq!(
        acquire(&mut c, &["job", "a", "20000"]),
        Some((first, 20000))
    );
    assert!(int(&mut c, &["PTTL", "job"]) > 15000);
    let (holder, fence, ttl, waiters) = info(&mut c, "job");
    assert_eq!(
        (holder.as_deref(), fence, waiters.len()),
        (Some("a"), first, 0)
    );
    assert!(ttl > 15000, "ttl {ttl}");

    assert_eq!(int(&mut c, &["LOCK.EXTEND", "job", "b", "500"]), 0);
    assert_eq!(int(&mut c, &["LOCK.EXTEND", "job", "a", "500000"]), 1);
    assert!(int(&mut c, &["PTTL", "job"]) > 400_000);
    assert_eq!(int(&mut c, &["LOCK.RELEASE", "job", "b"]), 0);
    assert_eq!(int(&mut c, &["LOCK.RELEASE", "job", "a"]), 1);
    assert_eq!(int(&mut c, &["LOCK.RELEASE", "job", "a"]), 0);
    assert_eq!(int(&mut c, &["EXISTS", "job"]), 0);

    // Tokens grow strictly, and are kept in `{job}:fence`, the counter latch-lock uses.
    let (second, _) = acquire(&mut c, &["job", "b", "1000"]).unwrap();
    assert!(second > first, "{second} after {first}");
    let stored: String = redis::cmd("GET").arg("{job}:fence").query(&mut c).unwrap();
    assert_eq!(stored, second.to_string());
    // A counter set far ahead (another server's, after a failover) is continued.
    int(&mut c, &["LOCK.RELEASE", "job", "b"]);
    let ahead = (second + 1_000_000_000).to_string();
    let _: () = redis::cmd("SET")
        .arg("{job}:fence")
        .arg(&ahead)
        .query(&mut c)
        .unwrap();
    let (third, _) = acquire(&mut c, &["job", "c", "1000"]).unwrap();
    assert_eq!(third, second + 1_000_000_001);

    let (holder, fence, ttl, _) = info(&mut c, "nothing");
    assert_eq!((holder, fence, ttl), (None, 0, -2));
}

#[test]
fn bad_arguments() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(
        &mut c,
        "LOCK.ACQUIRE l t 0",
        "-ERR invalid expire time in 'lock.acquire' command\r\n",
    );
    check(
        &mut c,
        "LOCK.ACQUIRE l t -5",
        "-ERR invalid expire time in 'lock.acquire' command\r\n",
    );
    check(
        &mut c,
        "LOCK.ACQUIRE l t x",
        "-ERR value is not an integer or out of range\r\n",
    );
    check(&mut c, "LOCK.ACQUIRE l t 100 WAIT", SYNTAX);
    check(&mut c, "LOCK.ACQUIRE l t 100 LATER 5", SYNTAX);
    check(
        &mut c,
        "LOCK.ACQUIRE l t 100 WAIT -1",
        "-ERR timeout is negative\r\n",
    );
    check(
        &mut c,
        "LOCK.ACQUIRE l t 100 WAIT x",
        "-ERR timeout is not an integer or out of range\r\n",
    );
    check(
        &mut c,
        "LOCK.ACQUIRE l t",
        "-ERR wrong number of arguments for 'lock.acquire' command\r\n",
    );
    check(
        &mut c,
        "LOCK.EXTEND l t 0",
        "-ERR invalid expire time in 'lock.extend' command\r\n",
    );
    check(&mut c, "RPUSH l x", ":1\r\n");
    check(&mut c, "LOCK.ACQUIRE l t 100", WRONGTYPE);
    check(&mut c, "LOCK.RELEASE l t", WRONGTYPE);
    check(&mut c, "LOCK.INFO l", WRONGTYPE);
    check(&mut c, "SET n:x 1", "+OK\r\n");
    check(&mut c, "SET {n}:fence not-a-number", "+OK\r\n");
    check(
        &mut c,
        "LOCK.ACQUIRE n t 100",
        "-ERR the lock's fencing counter does not hold an integer\r\n",
    );
    check(&mut c, "EXISTS n", ":0\r\n");
}

/// Waiters are granted the lock in the order they asked, each the moment the one before
/// releases it; a client that asks without waiting does not get ahead of them.
#[test]
fn waiters_are_served_in_order() {
    let server = TestServer::start(&[]);
    let mut c = client(&server);
    acquire(&mut c, &["queue", "holder", "60000"]).unwrap();
    let (granted_tx, granted_rx) = mpsc::channel();
    let mut threads = Vec::new();
    for i in 0..5 {
        let mut conn = client(&server);
        let granted = granted_tx.clone();
        threads.push(thread::spawn(move || {
            let token = format!("w{i}");
            let grant = acquire(&mut conn, &["queue", &token, "60000", "WAIT", "0"]);
            let (fence, _) = grant.expect("granted while waiting");
            granted.send((i, fence)).unwrap();
            thread::sleep(Duration::from_millis(20));
            assert_eq!(int(&mut conn, &["LOCK.RELEASE", "queue", &token]), 1);
        }));
        // Each in line before the next asks.
        wait_for_waiters(&mut c, "queue", i + 1);
    }
    assert_eq!(acquire(&mut c, &["queue", "barger", "60000"]), None);
    assert_eq!(int(&mut c, &["LOCK.RELEASE", "queue", "holder"]), 1);
    // Freed, but five wait: an asker without WAIT still does not get it.
    assert_eq!(acquire(&mut c, &["queue", "barger", "60000"]), None);
    let mut order = Vec::new();
    for _ in 0..5 {
        order.push(granted_rx.recv_timeout(Duration::from_secs(10)).unwrap());
    }
    for thread in threads {
        thread.join().unwrap();
    }
    let served: Vec<usize> = order.iter().map(|(i, _)| *i).collect();
    assert_eq!(served, vec![0, 1, 2, 3, 4]);
    assert!(
        order.windows(2).all(|pair| pair[1].1 > pair[0].1),
        "{order:?}"
    );
    assert!(acquire(&mut c, &["queue", "after", "1000"]).is_some());
}

/// A lock taken with `SET NX PX` by a client that knows nothing of LOCK.*: a waiter gets it
/// when its TTL runs out (at the deadline, not at a later sweep), and when a client DELs it.
#[test]
fn waiters_take_over_plain_keys_at_their_deadline_or_deletion() {
    let server = TestServer::start(&[]);
    let mut c = client(&server);
    for _ in 0..3 {
        let _: () = redis::cmd("SET")
            .arg("plain")
            .arg("old-client")
            .arg("NX")
            .arg("PX")
            .arg(300)
            .query(&mut c)
            .unwrap();
        let started = Instant::now();
        let mut waiter = client(&server);
        let grant = acquire(
            &mut waiter,
            &["plain", "new-client", "5000", "WAIT", "5000"],
        );
        let waited = started.elapsed();
        assert!(grant.is_some(), "granted after the TTL");
        assert!(
            waited >= Duration::from_millis(290) && waited < Duration::from_millis(340),
            "granted {waited:?} after a 300 ms TTL began"
        );
        assert_eq!(int(&mut c, &["LOCK.RELEASE", "plain", "new-client"]), 1);
    }

    let _: () = redis::cmd("SET")
        .arg("plain")
        .arg("old-client")
        .arg("NX")
        .query(&mut c)
        .unwrap();
    let waiter = {
        let mut conn = client(&server);
        thread::spawn(move || acquire(&mut conn, &["plain", "new-client", "5000", "WAIT", "0"]))
    };
    wait_for_waiters(&mut c, "plain", 1);
    assert_eq!(int(&mut c, &["DEL", "plain"]), 1);
    assert!(waiter.join().unwrap().is_some());
    let holder: String = redis::cmd("GET").arg("plain").query(&mut c).unwrap();
    assert_eq!(holder, "new-client");
}

#[test]
fn waits_end_as_blocking_commands_end() {
    let server = TestServer::start(&[]);
    let mut c = client(&server);
    acquire(&mut c, &["held", "owner", "60000"]).unwrap();

    // A timeout answers nil.
    let started = Instant::now();
    let mut w = client(&server);
    assert_eq!(acquire(&mut w, &["held", "w", "1000", "WAIT", "200"]), None);
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(wait_for_waiters(&mut c, "held", 0), Vec::<i64>::new());

    // CLIENT UNBLOCK, both ways.
    for (how, expected) in [("TIMEOUT", "nil"), ("ERROR", "UNBLOCKED")] {
        let mut conn = client(&server);
        let id = int(&mut conn, &["CLIENT", "ID"]);
        let waiting = thread::spawn(move || {
            redis::cmd("LOCK.ACQUIRE")
                .arg("held")
                .arg("w")
                .arg(1000)
                .arg("WAIT")
                .arg(0)
                .query::<Value>(&mut conn)
        });
        assert_eq!(wait_for_waiters(&mut c, "held", 1), vec![id]);
        assert_eq!(int(&mut c, &["CLIENT", "UNBLOCK", &id.to_string(), how]), 1);
        match (expected, waiting.join().unwrap()) {
            ("nil", Ok(Value::Nil)) => {}
            ("UNBLOCKED", Err(error)) => {
                assert!(error.to_string().contains("UNBLOCKED"), "{error}")
            }
            (_, other) => panic!("CLIENT UNBLOCK {how}: {other:?}"),
        }
    }

    // In MULTI the wait does not happen: nil at once.
    let _: () = redis::cmd("MULTI").query(&mut w).unwrap();
    let _: () = redis::cmd("LOCK.ACQUIRE")
        .arg("held")
        .arg("w")
        .arg(1000)
        .arg("WAIT")
        .arg(0)
        .query(&mut w)
        .unwrap();
    let replies: Vec<Value> = redis::cmd("EXEC").query(&mut w).unwrap();
    assert_eq!(replies, vec![Value::Nil]);

    // A waiter killed in line: the one behind it gets the lock.
    let mut doomed = client(&server);
    let doomed_id = int(&mut doomed, &["CLIENT", "ID"]);
    let doomed_wait = thread::spawn(move || {
        redis::cmd("LOCK.ACQUIRE")
            .arg("held")
            .arg("doomed")
            .arg(1000)
            .arg("WAIT")
            .arg(0)
            .query::<Value>(&mut doomed)
    });
    wait_for_waiters(&mut c, "held", 1);
    let next = {
        let mut conn = client(&server);
        thread::spawn(move || acquire(&mut conn, &["held", "next", "1000", "WAIT", "0"]))
    };
    wait_for_waiters(&mut c, "held", 2);
    assert_eq!(
        int(&mut c, &["CLIENT", "KILL", "ID", &doomed_id.to_string()]),
        1
    );
    assert!(doomed_wait.join().unwrap().is_err());
    assert_eq!(int(&mut c, &["LOCK.RELEASE", "held", "owner"]), 1);
    assert!(next.join().unwrap().is_some());
    let (holder, _, _, waiters) = info(&mut c, "held");
    assert_eq!((holder.as_deref(), waiters.len()), (Some("next"), 0));
}

/// The stream carries a grant as plain commands in one transaction, which a redis-server
/// 7.0 replica applies: the lock key with its absolute deadline, and the fencing counter.
#[test]
fn a_redis_server_replica_holds_the_lock_and_the_counter() {
    let primary = Server::start(Program::Latch, &["--repl-diskless-sync-delay", "0"]);
    let port = primary.port.to_string();
    let replica = Server::start(Program::Redis, &["--replicaof", "127.0.0.1", &port]);
    let connect = |server: &Server| {
        redis::Client::open(server.url())
            .unwrap()
            .get_connection()
            .unwrap()
    };
    let (mut p, mut r) = (connect(&primary), connect(&replica));
    let (fence, _) = acquire(&mut p, &["job", "a", "600000"]).unwrap();
    assert_eq!(int(&mut p, &["LOCK.EXTEND", "job", "a", "700000"]), 1);
    acquire(&mut p, &["pool", "x", "600000", "PERMITS", "3"]).unwrap();
    acquire(&mut p, &["pool", "y", "600000", "PERMITS", "3"]).unwrap();
    assert_eq!(int(&mut p, &["LOCK.RELEASE", "pool", "x"]), 1);
    let _: () = redis::cmd("SET").arg("done").arg(1).query(&mut p).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while redis::cmd("GET")
        .arg("done")
        .query::<Option<String>>(&mut r)
        .unwrap()
        .is_none()
    {
        assert!(Instant::now() < deadline, "the replica never caught up");
        thread::sleep(Duration::from_millis(20));
    }
    let holder: String = redis::cmd("GET").arg("job").query(&mut r).unwrap();
    assert_eq!(holder, "a");
    assert!(int(&mut r, &["PTTL", "job"]) > 600_000);
    let counter: String = redis::cmd("GET").arg("{job}:fence").query(&mut r).unwrap();
    assert_eq!(counter, fence.to_string());
    let pool: Vec<String> = redis::cmd("ZRANGE")
        .arg("pool")
        .arg(0)
        .arg(-1)
        .query(&mut r)
        .unwrap();
    assert_eq!(pool, vec!["y".to_string()]);
    assert!(int(&mut r, &["PTTL", "pool"]) > 500_000);
    assert_eq!(int(&mut p, &["LOCK.RELEASE", "job", "a"]), 1);
    let _: () = redis::cmd("SET").arg("done").arg(2).query(&mut p).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while int(&mut r, &["EXISTS", "job"]) == 1 {
        assert!(
            Instant::now() < deadline,
            "the release never reached the replica"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

fn info_locks(conn: &mut Connection) -> std::collections::HashMap<String, String> {
    let text: String = redis::cmd("INFO").arg("locks").query(conn).unwrap();
    assert!(text.starts_with("# Locks\r\n"), "{text}");
    text.lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// INFO locks: counts, the clients waiting now, and the wait, hold and hand-over
/// histograms; a lease that ran out while held is counted.
#[test]
fn info_locks_counts_and_times() {
    let server = TestServer::start(&[]);
    let mut c = client(&server);
    let default: String = redis::cmd("INFO").query(&mut c).unwrap();
    assert!(!default.contains("# Locks"), "not a default section");
    acquire(&mut c, &["a", "one", "60000"]).unwrap();
    let waiter = {
        let mut conn = client(&server);
        thread::spawn(move || acquire(&mut conn, &["a", "two", "200", "WAIT", "0"]))
    };
    wait_for_waiters(&mut c, "a", 1);
    assert_eq!(info_locks(&mut c)["locks_waiting_clients"], "1");
    thread::sleep(Duration::from_millis(50));
    assert_eq!(int(&mut c, &["LOCK.RELEASE", "a", "one"]), 1);
    assert!(waiter.join().unwrap().is_some());
    // "two" never releases: its 200 ms lease runs out while a third waits.
    let mut third = client(&server);
    assert!(acquire(&mut third, &["a", "three", "1000", "WAIT", "5000"]).is_some());
    let stats = info_locks(&mut c);
    assert_eq!(stats["locks_granted"], "3", "{stats:?}");
    assert_eq!(stats["locks_granted_after_wait"], "2", "{stats:?}");
    assert_eq!(stats["locks_released"], "1", "{stats:?}");
    assert_eq!(stats["locks_expired_while_held"], "1", "{stats:?}");
    assert_eq!(stats["locks_waiting_clients"], "0", "{stats:?}");
    assert_eq!(stats["locks_held"], "1", "{stats:?}");
    let histogram = |name: &str| -> std::collections::HashMap<String, u64> {
        stats[name]
            .split(',')
            .map(|pair| {
                let (k, v) = pair.split_once('=').unwrap();
                (k.to_string(), v.parse().unwrap())
            })
            .collect()
    };
    let hold = histogram("lock_hold_usec");
    assert_eq!(hold["count"], 1);
    assert!(hold["max"] >= 50_000, "{hold:?}");
    let wait = histogram("lock_wait_usec");
    assert_eq!(wait["count"], 2);
    assert!(
        wait["max"] >= 150_000,
        "the third waited out a 200 ms lease: {wait:?}"
    );
    let handoff = histogram("lock_handoff_usec");
    assert_eq!(handoff["count"], 2, "{handoff:?}");
    assert!(handoff["max"] < 50_000, "{handoff:?}");
}

/// A lock waiter on a server that becomes a replica is answered `-UNBLOCKED` (as every
/// blocked client is, as in Redis) instead of waiting for a lock it could never be granted
/// there.
#[test]
fn lock_waiters_are_unblocked_when_the_server_becomes_a_replica() {
    let other = Server::start(Program::Redis, &[]);
    let server = TestServer::start(&[]);
    let mut c = client(&server);
    acquire(&mut c, &["held", "owner", "60000"]).unwrap();
    let waiter = {
        let mut conn = client(&server);
        thread::spawn(move || {
            redis::cmd("LOCK.ACQUIRE")
                .arg("held")
                .arg("w")
                .arg(1000)
                .arg("WAIT")
                .arg(0)
                .query::<Value>(&mut conn)
        })
    };
    wait_for_waiters(&mut c, "held", 1);
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(other.port)
        .query(&mut c)
        .unwrap();
    let error = waiter.join().unwrap().unwrap_err();
    assert!(
        error.to_string().contains("instance state changed"),
        "{error}"
    );
    let stats: String = redis::cmd("INFO").arg("locks").query(&mut c).unwrap();
    assert!(stats.contains("locks_waiting_clients:0"), "{stats}");
}

/// Reads one RESP3 push or reply line group from a raw connection: everything that
/// arrives within `wait`.
fn read_for(stream: &mut std::net::TcpStream, wait: Duration) -> String {
    use std::io::Read;
    stream
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let deadline = Instant::now() + wait;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn send(stream: &mut std::net::TcpStream, command: &str) {
    use std::io::Write;
    let parts: Vec<&str> = command.split(' ').collect();
    let mut out = format!("*{}\r\n", parts.len());
    for part in parts {
        out.push_str(&format!("${}\r\n{part}\r\n", part.len()));
    }
    stream.write_all(out.as_bytes()).unwrap();
}

/// NOTIFY: the holder gets a RESP3 push when its lease runs out (at the deadline, renewals
/// counted), or when it finds the key taken; none after it released the lock.
#[test]
fn notify_pushes_when_the_lock_runs_out_or_is_taken() {
    let server = TestServer::start(&[]);
    let mut holder = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    send(&mut holder, "HELLO 3");
    read_for(&mut holder, Duration::from_millis(100));

    send(&mut holder, "LOCK.ACQUIRE a t1 200 NOTIFY");
    let started = Instant::now();
    let granted = read_for(&mut holder, Duration::from_millis(100));
    assert!(granted.starts_with("*2\r\n:"), "{granted:?}");
    // Renewed once: the push comes at the new deadline.
    send(&mut holder, "LOCK.EXTEND a t1 300");
    let mut seen = read_for(&mut holder, Duration::from_millis(600));
    assert!(seen.starts_with(":1\r\n"), "{seen:?}");
    seen.drain(..4);
    assert_eq!(seen, ">3\r\n$4\r\nlock\r\n$1\r\na\r\n$7\r\nexpired\r\n");
    assert!(started.elapsed() >= Duration::from_millis(400));

    // Taken: another client deletes and sets the key.
    send(&mut holder, "LOCK.ACQUIRE b t1 300 NOTIFY");
    assert!(read_for(&mut holder, Duration::from_millis(50)).starts_with("*2\r\n"));
    let mut other = client(&server);
    assert_eq!(int(&mut other, &["DEL", "b"]), 1);
    let _: () = redis::cmd("SET")
        .arg("b")
        .arg("intruder")
        .query(&mut other)
        .unwrap();
    assert_eq!(
        read_for(&mut holder, Duration::from_millis(600)),
        ">3\r\n$4\r\nlock\r\n$1\r\nb\r\n$4\r\nlost\r\n"
    );

    // Released: nothing.
    send(&mut holder, "LOCK.ACQUIRE c t1 100 NOTIFY");
    assert!(read_for(&mut holder, Duration::from_millis(50)).starts_with("*2\r\n"));
    send(&mut holder, "LOCK.RELEASE c t1");
    assert_eq!(read_for(&mut holder, Duration::from_millis(400)), ":1\r\n");

    // RESP2 cannot carry a push.
    let mut c = server.raw();
    check(
        &mut c,
        "LOCK.ACQUIRE d t 100 NOTIFY",
        "-ERR NOTIFY needs the RESP3 protocol (HELLO 3): it answers with a push\r\n",
    );
}

/// LOCK.INFO's mode and holders.
fn holders(conn: &mut Connection, name: &str) -> (String, Vec<String>) {
    let field = info_fields(conn, name);
    let Value::BulkString(mode) = field("mode") else {
        panic!("mode")
    };
    let Value::Array(list) = field("holders") else {
        panic!("holders")
    };
    let tokens = list
        .iter()
        .map(|holder| match holder {
            Value::Array(pair) => match &pair[0] {
                Value::BulkString(token) => String::from_utf8(token.clone()).unwrap(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        })
        .collect();
    (String::from_utf8(mode).unwrap(), tokens)
}

/// A semaphore of 2 permits and a shared (read) lock: holders up to the count, waiters in
/// line behind, an exclusive (write) request waiting until every shared holder is gone and
/// not overtaken by shared requests that come after it; leases that run out give their
/// permit back; every grant a larger fencing token.
#[test]
fn semaphores_and_shared_locks() {
    let server = TestServer::start(&[]);
    let mut c = client(&server);
    let (f1, _) = acquire(&mut c, &["sem", "a", "60000", "PERMITS", "2"]).unwrap();
    let (f2, _) = acquire(&mut c, &["sem", "b", "300", "PERMITS", "2"]).unwrap();
    assert!(f2 > f1);
    assert_eq!(
        acquire(&mut c, &["sem", "c", "60000", "PERMITS", "2"]),
        None
    );
    let (mode, mut tokens) = holders(&mut c, "sem");
    tokens.sort();
    assert_eq!(
        (mode.as_str(), tokens),
        ("shared", vec!["a".into(), "b".into()])
    );
    // The key is a sorted set of the leases, there while anyone holds a permit.
    assert_eq!(int(&mut c, &["ZCARD", "sem"]), 2);
    assert!(int(&mut c, &["PTTL", "sem"]) > 50_000);
    // b's 300 ms lease runs out: the waiter gets its permit then.
    let started = Instant::now();
    let mut w = client(&server);
    let (f3, _) = acquire(
        &mut w,
        &["sem", "c", "60000", "PERMITS", "2", "WAIT", "5000"],
    )
    .unwrap();
    assert!(f3 > f2);
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(200), "{waited:?}");
    assert!(waited < Duration::from_millis(500), "{waited:?}");
    assert_eq!(
        int(&mut c, &["LOCK.RELEASE", "sem", "b"]),
        0,
        "b's lease ran out"
    );
    assert_eq!(int(&mut c, &["LOCK.RELEASE", "sem", "a"]), 1);
    assert_eq!(int(&mut c, &["LOCK.EXTEND", "sem", "c", "90000"]), 1);
    assert!(int(&mut c, &["PTTL", "sem"]) > 80_000);
    assert_eq!(int(&mut c, &["LOCK.RELEASE", "sem", "c"]), 1);
    assert_eq!(
        int(&mut c, &["EXISTS", "sem"]),
        0,
        "gone with its last holder"
    );

    // Readers share; a writer waits for all of them, and readers after it wait behind it.
    acquire(&mut c, &["rw", "r1", "60000", "SHARED"]).unwrap();
    acquire(&mut c, &["rw", "r2", "60000", "SHARED"]).unwrap();
    assert_eq!(acquire(&mut c, &["rw", "w", "60000"]), None);
    let writer = {
        let mut conn = client(&server);
        thread::spawn(move || acquire(&mut conn, &["rw", "w", "60000", "WAIT", "0"]))
    };
    wait_for_waiters(&mut c, "rw", 1);
    assert_eq!(
        acquire(&mut c, &["rw", "r3", "60000", "SHARED"]),
        None,
        "behind the writer"
    );
    let reader = {
        let mut conn = client(&server);
        thread::spawn(move || acquire(&mut conn, &["rw", "r3", "60000", "SHARED", "WAIT", "0"]))
    };
    wait_for_waiters(&mut c, "rw", 2);
    assert_eq!(int(&mut c, &["LOCK.RELEASE", "rw", "r1"]), 1);
    assert_eq!(
        wait_for_waiters(&mut c, "rw", 2).len(),
        2,
        "one reader still holds it"
    );
    assert_eq!(int(&mut c, &["LOCK.RELEASE", "rw", "r2"]), 1);
    assert!(writer.join().unwrap().is_some());
    let (mode, tokens) = holders(&mut c, "rw");
    assert_eq!(
        (mode.as_str(), tokens),
        ("exclusive", vec!["w".to_string()])
    );
    assert_eq!(int(&mut c, &["LOCK.RELEASE", "rw", "w"]), 1);
    assert!(reader.join().unwrap().is_some());
    assert_eq!(holders(&mut c, "rw").0, "shared");

    let mut raw = server.raw();
    check(
        &mut raw,
        "LOCK.ACQUIRE x t 100 PERMITS 0",
        "-ERR PERMITS must be a positive integer\r\n",
    );
    check(&mut raw, "LOCK.ACQUIRE x t 100 SHARED PERMITS 2", SYNTAX);
}

/// LOCK.LIST: the locks held or waited for, by pattern, with their mode, holders, TTL and
/// waiters.
#[test]
fn list_by_pattern() {
    let server = TestServer::start(&[]);
    let mut c = client(&server);
    acquire(&mut c, &["jobs:a", "t", "60000"]).unwrap();
    acquire(&mut c, &["jobs:b", "t", "60000", "PERMITS", "3"]).unwrap();
    acquire(&mut c, &["other", "t", "60000"]).unwrap();
    acquire(&mut c, &["jobs:free", "t", "60000"]).unwrap();
    assert_eq!(int(&mut c, &["LOCK.RELEASE", "jobs:free", "t"]), 1);
    let waiter = {
        let mut conn = client(&server);
        thread::spawn(move || acquire(&mut conn, &["jobs:a", "u", "1000", "WAIT", "0"]))
    };
    wait_for_waiters(&mut c, "jobs:a", 1);
    let rows: Value = redis::cmd("LOCK.LIST").arg("jobs:*").query(&mut c).unwrap();
    let text = format!("{rows:?}");
    let Value::Array(rows) = rows else {
        panic!("{text}")
    };
    assert_eq!(rows.len(), 2, "{text}");
    let row = |index: usize| -> Vec<Value> {
        match &rows[index] {
            Value::Array(fields) => fields.clone(),
            other => panic!("{other:?}"),
        }
    };
    let a = row(0);
    assert_eq!(a[1], Value::BulkString(b"jobs:a".to_vec()), "{text}");
    assert_eq!(a[3], Value::BulkString(b"exclusive".to_vec()), "{text}");
    assert_eq!(a[9], Value::Int(1), "one waiter: {text}");
    let b = row(1);
    assert_eq!(b[1], Value::BulkString(b"jobs:b".to_vec()), "{text}");
    assert_eq!(b[3], Value::BulkString(b"shared".to_vec()), "{text}");
    let all: Vec<Value> = redis::cmd("LOCK.LIST").query(&mut c).unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(int(&mut c, &["LOCK.RELEASE", "jobs:a", "t"]), 1);
    assert!(waiter.join().unwrap().is_some());
}

/// Inside a script a lock request never waits (nil at once, as BLPOP inside a script), and
/// the lock and its counter survive a restart from the AOF and load in redis-server from
/// the RDB as the ordinary keys they are.
#[test]
fn scripts_do_not_wait_and_files_keep_locks() {
    let dir = std::env::temp_dir().join(format!("latch-locks-files-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut server = Server::start_in(Program::Latch, &dir, &["--appendonly", "yes"]);
    let mut c = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let (fence, _) = acquire(&mut c, &["job", "a", "600000"]).unwrap();
    acquire(&mut c, &["pool", "x", "600000", "PERMITS", "2"]).unwrap();
    let in_script: Value = redis::cmd("EVAL")
        .arg("return redis.call('LOCK.ACQUIRE', KEYS[1], 'b', 1000, 'WAIT', 0)")
        .arg(1)
        .arg("job")
        .query(&mut c)
        .unwrap();
    assert_eq!(in_script, Value::Nil);
    let granted: Value = redis::cmd("EVAL")
        .arg("return redis.call('LOCK.ACQUIRE', KEYS[1], 'b', 1000)")
        .arg(1)
        .arg("other")
        .query(&mut c)
        .unwrap();
    assert!(matches!(granted, Value::Array(_)), "{granted:?}");

    server.restart(&[]);
    let mut c = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let (holder, counter, _, _) = info(&mut c, "job");
    assert_eq!((holder.as_deref(), counter), (Some("a"), fence));
    assert_eq!(
        acquire(&mut c, &["job", "c", "1000"]),
        None,
        "still held after the restart"
    );
    let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
    drop(server);

    let redis_dir = std::env::temp_dir().join(format!("latch-locks-rdb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&redis_dir);
    std::fs::create_dir_all(&redis_dir).unwrap();
    std::fs::copy(dir.join("dump.rdb"), redis_dir.join("dump.rdb")).unwrap();
    let redis = Server::start_in(Program::Redis, &redis_dir, &[]);
    let mut r = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let holder: String = redis::cmd("GET").arg("job").query(&mut r).unwrap();
    assert_eq!(holder, "a");
    let counter: String = redis::cmd("GET").arg("{job}:fence").query(&mut r).unwrap();
    assert_eq!(counter, fence.to_string());
    assert_eq!(int(&mut r, &["ZCARD", "pool"]), 1);
    assert!(int(&mut r, &["PTTL", "job"]) > 500_000);
    drop(redis);
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(redis_dir);
}
