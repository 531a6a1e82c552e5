//! MULTI, EXEC, DISCARD, WATCH, UNWATCH against the real binary.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{bulk, check, resp3, RawConn, TestServer};

const OK: &str = "+OK\r\n";
const QUEUED: &str = "+QUEUED\r\n";
const EXECABORT: &str = "-EXECABORT Transaction discarded because of previous errors.\r\n";

fn ok(conn: &mut RawConn, command: &str) {
    check(conn, command, OK);
}

/// WATCH `key`, MULTI, PING, EXEC: the EXEC reply (`*1\r\n+PONG\r\n` or the null array).
fn try_exec(conn: &mut RawConn, key: &str, exec_reply: &str) {
    ok(conn, &format!("WATCH {key}"));
    ok(conn, "MULTI");
    check(conn, "PING", QUEUED);
    check(conn, "EXEC", exec_reply);
}

const PONG_ARRAY: &str = "*1\r\n+PONG\r\n";
const NULL_ARRAY: &str = "*-1\r\n";

#[test]
fn queued_commands_run_at_exec_in_order() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    ok(&mut c, "MULTI");
    check(&mut c, "SET k 1", QUEUED);
    check(&mut c, "INCR k", QUEUED);
    check(&mut c, "GET k", QUEUED);
    // Nothing ran yet: another client sees no key.
    let mut other = server.raw();
    check(&mut other, "EXISTS k", ":0\r\n");
    check(&mut c, "EXEC", &format!("*3\r\n+OK\r\n:2\r\n{}", bulk("2")));
    // An empty transaction, and the client is out of MULTI afterwards.
    ok(&mut c, "MULTI");
    check(&mut c, "EXEC", "*0\r\n");
    check(&mut c, "PING", "+PONG\r\n");
}

#[test]
fn multi_state_errors() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "EXEC", "-ERR EXEC without MULTI\r\n");
    check(&mut c, "DISCARD", "-ERR DISCARD without MULTI\r\n");
    check(
        &mut c,
        "EXEC x",
        "-EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command\r\n",
    );
    ok(&mut c, "MULTI");
    // Neither nested MULTI nor WATCH inside MULTI aborts the transaction.
    check(&mut c, "MULTI", "-ERR MULTI calls can not be nested\r\n");
    check(
        &mut c,
        "WATCH x",
        "-ERR WATCH inside MULTI is not allowed\r\n",
    );
    check(&mut c, "SET a 1", QUEUED);
    check(&mut c, "EXEC", "*1\r\n+OK\r\n");
    // DISCARD drops the queue.
    ok(&mut c, "MULTI");
    check(&mut c, "DEL a", QUEUED);
    ok(&mut c, "DISCARD");
    check(&mut c, "GET a", &bulk("1"));
    // RESET leaves MULTI too.
    ok(&mut c, "MULTI");
    check(&mut c, "DEL a", QUEUED);
    check(&mut c, "RESET", "+RESET\r\n");
    check(&mut c, "EXEC", "-ERR EXEC without MULTI\r\n");
    check(&mut c, "GET a", &bulk("1"));
}

#[test]
fn queueing_errors_abort_the_transaction() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    // Unknown command.
    ok(&mut c, "MULTI");
    check(&mut c, "SET a 1", QUEUED);
    check(
        &mut c,
        "NOSUCHCOMMAND x",
        "-ERR unknown command 'NOSUCHCOMMAND', with args beginning with: 'x' \r\n",
    );
    check(&mut c, "SET b 1", QUEUED);
    check(&mut c, "EXEC", EXECABORT);
    check(&mut c, "EXISTS a b", ":0\r\n");
    // Wrong arity.
    ok(&mut c, "MULTI");
    check(
        &mut c,
        "GET",
        "-ERR wrong number of arguments for 'get' command\r\n",
    );
    check(&mut c, "EXEC", EXECABORT);
    // A no-multi command.
    ok(&mut c, "MULTI");
    check(
        &mut c,
        "SHUTDOWN",
        "-ERR Command not allowed inside a transaction\r\n",
    );
    check(&mut c, "EXEC", EXECABORT);
    // The client left MULTI.
    check(&mut c, "PING", "+PONG\r\n");
}

#[test]
fn runtime_errors_appear_in_place() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    ok(&mut c, "SET n 1");
    ok(&mut c, "MULTI");
    check(&mut c, "INCR n", QUEUED);
    check(&mut c, "SET n text", QUEUED);
    check(&mut c, "INCR n", QUEUED);
    check(&mut c, "GET n", QUEUED);
    check(
        &mut c,
        "EXEC",
        &format!(
            "*4\r\n:2\r\n+OK\r\n-ERR value is not an integer or out of range\r\n{}",
            bulk("text")
        ),
    );
    // EXEC's own stats count it as a success; the INCR as a failure (Redis counts so).
    let mut info = server.client();
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut info)
        .unwrap();
    let line = |name: &str| {
        stats
            .lines()
            .find(|l| l.starts_with(&format!("cmdstat_{name}:")))
            .unwrap_or_default()
            .to_string()
    };
    assert!(line("exec").contains("calls=1,"), "{}", line("exec"));
    assert!(line("exec").contains("failed_calls=0"), "{}", line("exec"));
    assert!(line("incr").contains("calls=2,"), "{}", line("incr"));
    assert!(line("incr").contains("failed_calls=1"), "{}", line("incr"));
}

#[test]
fn select_inside_multi_applies_to_later_commands() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    ok(&mut c, "MULTI");
    check(&mut c, "SET k db0", QUEUED);
    check(&mut c, "SELECT 3", QUEUED);
    check(&mut c, "SET k db3", QUEUED);
    check(&mut c, "EXEC", "*3\r\n+OK\r\n+OK\r\n+OK\r\n");
    check(&mut c, "GET k", &bulk("db3"));
    ok(&mut c, "SELECT 0");
    check(&mut c, "GET k", &bulk("db0"));
}

#[test]
fn whole_keyspace_commands_inside_exec() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    ok(&mut c, "MSET a 1 b 2");
    ok(&mut c, "MULTI");
    check(&mut c, "DBSIZE", QUEUED);
    check(&mut c, "SET c 3", QUEUED);
    check(&mut c, "INFO keyspace", QUEUED);
    check(&mut c, "FLUSHALL", QUEUED);
    check(&mut c, "DBSIZE", QUEUED);
    c.send(&common::encode(&[b"EXEC"]));
    let head = common::read_line(&mut c);
    assert_eq!(head, "*5\r\n");
    assert_eq!(common::read_line(&mut c), ":2\r\n");
    assert_eq!(common::read_line(&mut c), OK);
    let info_len = common::read_line(&mut c);
    let len: usize = info_len[1..info_len.len() - 2].parse().unwrap();
    let info = c.read_n(len + 2);
    assert!(
        String::from_utf8_lossy(&info).contains("db0:keys=3"),
        "{}",
        String::from_utf8_lossy(&info)
    );
    assert_eq!(common::read_line(&mut c), OK);
    assert_eq!(common::read_line(&mut c), ":0\r\n");
}

#[test]
fn watched_key_written_by_another_client_fails_exec() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    let mut other = server.raw();
    ok(&mut c, "SET k 1");
    ok(&mut c, "WATCH k");
    ok(&mut other, "SET k 2");
    ok(&mut c, "MULTI");
    check(&mut c, "SET k 3", QUEUED);
    check(&mut c, "EXEC", NULL_ARRAY);
    check(&mut c, "GET k", &bulk("2"));
    // The watch is gone after a failed EXEC.
    ok(&mut other, "SET k 4");
    ok(&mut c, "MULTI");
    check(&mut c, "PING", QUEUED);
    check(&mut c, "EXEC", PONG_ARRAY);
    // Watching a missing key that another client creates; and the watch remembers its db.
    ok(&mut c, "SELECT 5");
    ok(&mut c, "WATCH fresh");
    ok(&mut other, "SET fresh x");
    try_exec(&mut c, "other", PONG_ARRAY);
    ok(&mut c, "WATCH fresh");
    ok(&mut other, "SELECT 5");
    ok(&mut other, "SET fresh x");
    ok(&mut c, "MULTI");
    check(&mut c, "EXEC", NULL_ARRAY);
}

#[test]
fn null_reply_in_resp3() {
    let server = TestServer::start(&[]);
    let mut c = resp3(&server);
    let mut other = server.raw();
    ok(&mut c, "WATCH k");
    ok(&mut other, "SET k 1");
    ok(&mut c, "MULTI");
    check(&mut c, "PING", QUEUED);
    check(&mut c, "EXEC", "_\r\n");
}

/// A command that changes nothing must not fail a watcher's EXEC (Garnet broke
/// StackExchange.Redis' lock release exactly here).
#[test]
fn writes_that_change_nothing_do_not_touch_watched_keys() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    let mut other = server.raw();
    ok(&mut c, "SET k v");
    ok(&mut c, "WATCH k");
    check(&mut other, "SET k v2 NX", common::replies::NIL);
    check(&mut other, "DEL missing", ":0\r\n");
    check(&mut other, "SETNX k v3", ":0\r\n");
    check(&mut other, "PERSIST k", ":0\r\n");
    check(&mut other, "EXPIRE missing 10", ":0\r\n");
    ok(&mut c, "MULTI");
    check(&mut c, "SET k x", QUEUED);
    check(&mut c, "EXEC", "*1\r\n+OK\r\n");
    check(&mut c, "GET k", &bulk("x"));
}

#[test]
fn unwatch_and_discard_forget_watches() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    let mut other = server.raw();
    ok(&mut c, "WATCH k");
    ok(&mut other, "SET k 1");
    ok(&mut c, "UNWATCH");
    try_exec(&mut c, "unrelated", PONG_ARRAY);
    // DISCARD clears the dirty flag and the watches.
    ok(&mut c, "WATCH k");
    ok(&mut other, "SET k 2");
    ok(&mut c, "MULTI");
    ok(&mut c, "DISCARD");
    ok(&mut other, "SET k 3");
    ok(&mut c, "MULTI");
    check(&mut c, "INCR k", QUEUED);
    check(&mut c, "EXEC", "*1\r\n:4\r\n");
    // RESET too.
    ok(&mut c, "WATCH k");
    ok(&mut other, "SET k 5");
    check(&mut c, "RESET", "+RESET\r\n");
    ok(&mut c, "MULTI");
    check(&mut c, "PING", QUEUED);
    check(&mut c, "EXEC", PONG_ARRAY);
    // After a successful EXEC the key is no longer watched.
    try_exec(&mut c, "k", PONG_ARRAY);
    ok(&mut other, "SET k 6");
    ok(&mut c, "MULTI");
    check(&mut c, "PING", QUEUED);
    check(&mut c, "EXEC", PONG_ARRAY);
}

#[test]
fn expiry_of_a_watched_key_fails_exec() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    let mut other = server.raw();
    // Lazy: the key is past its deadline at EXEC, nobody has looked at it yet.
    ok(&mut c, "DEBUG SET-ACTIVE-EXPIRE 0");
    ok(&mut c, "SET k v PX 100");
    ok(&mut c, "WATCH k");
    ok(&mut c, "DEBUG ADVANCE-CLOCK 200");
    try_exec(&mut c, "k", NULL_ARRAY);
    // Removed by another client's lookup.
    ok(&mut c, "SET k v PX 100");
    ok(&mut c, "WATCH k");
    ok(&mut c, "DEBUG ADVANCE-CLOCK 200");
    check(&mut other, "GET k", common::replies::NIL);
    ok(&mut c, "MULTI");
    check(&mut c, "EXEC", NULL_ARRAY);
    // Removed by the active expiry cycle.
    ok(&mut c, "DEBUG SET-ACTIVE-EXPIRE 1");
    ok(&mut c, "SET k v PX 100");
    ok(&mut c, "WATCH k");
    ok(&mut c, "DEBUG ADVANCE-CLOCK 200");
    let mut waited = 0;
    loop {
        c.send(&common::encode(&[b"DBSIZE"]));
        if common::read_line(&mut c) == ":0\r\n" || waited > 200 {
            break;
        }
        waited += 1;
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    ok(&mut c, "MULTI");
    check(&mut c, "EXEC", NULL_ARRAY);
    // EXPIRE on a watched key is a change.
    ok(&mut c, "SET k v");
    ok(&mut c, "WATCH k");
    check(&mut other, "EXPIRE k 100", ":1\r\n");
    ok(&mut c, "MULTI");
    check(&mut c, "EXEC", NULL_ARRAY);
}

#[test]
fn watching_an_already_expired_key() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    let mut other = server.raw();
    ok(&mut c, "DEBUG SET-ACTIVE-EXPIRE 0");
    // Stale when watched, and still there at EXEC: no change.
    ok(&mut c, "SET x foo PX 1");
    ok(&mut c, "DEBUG ADVANCE-CLOCK 10");
    try_exec(&mut c, "x", PONG_ARRAY);
    // Its removal by a lookup is no change either.
    ok(&mut c, "SET x foo PX 1");
    ok(&mut c, "DEBUG ADVANCE-CLOCK 10");
    ok(&mut c, "WATCH x");
    check(&mut other, "EXISTS x", ":0\r\n");
    ok(&mut c, "MULTI");
    check(&mut c, "PING", QUEUED);
    check(&mut c, "EXEC", PONG_ARRAY);
    // Nor is FLUSHDB removing it.
    ok(&mut c, "SET x foo PX 1");
    ok(&mut c, "DEBUG ADVANCE-CLOCK 10");
    ok(&mut c, "WATCH x");
    ok(&mut other, "FLUSHDB");
    ok(&mut c, "MULTI");
    check(&mut c, "PING", QUEUED);
    check(&mut c, "EXEC", PONG_ARRAY);
    // But giving it a live value is.
    ok(&mut c, "SET x foo PX 1");
    ok(&mut c, "DEBUG ADVANCE-CLOCK 10");
    ok(&mut c, "WATCH x");
    ok(&mut other, "SET x bar");
    ok(&mut c, "MULTI");
    check(&mut c, "EXEC", NULL_ARRAY);
}

#[test]
fn flushes_touch_existing_watched_keys_only() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    let mut other = server.raw();
    for flush in ["FLUSHALL", "FLUSHDB"] {
        ok(&mut c, "SET x 30");
        ok(&mut c, "WATCH x");
        ok(&mut other, flush);
        ok(&mut c, "MULTI");
        check(&mut c, "EXEC", NULL_ARRAY);
        // A watched key that does not exist is not touched.
        ok(&mut c, "WATCH x");
        ok(&mut other, flush);
        ok(&mut c, "MULTI");
        check(&mut c, "PING", QUEUED);
        check(&mut c, "EXEC", PONG_ARRAY);
    }
    // FLUSHDB of another database leaves the watch alone.
    ok(&mut c, "SET x 30");
    ok(&mut c, "WATCH x");
    ok(&mut other, "SELECT 1");
    ok(&mut other, "FLUSHDB");
    ok(&mut c, "MULTI");
    check(&mut c, "PING", QUEUED);
    check(&mut c, "EXEC", PONG_ARRAY);
    // Several watched keys, one client, then FLUSHALL.
    ok(&mut c, "MSET a a b b");
    ok(&mut c, "WATCH b a");
    ok(&mut other, "FLUSHALL");
    check(&mut c, "PING", "+PONG\r\n");
    ok(&mut c, "MULTI");
    check(&mut c, "EXEC", NULL_ARRAY);
}

#[test]
fn swapdb_touches_watched_keys_present_in_either_db() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    let mut other = server.raw();
    // Present in the watched db.
    ok(&mut c, "SET x 30");
    ok(&mut c, "WATCH x");
    ok(&mut other, "SWAPDB 0 1");
    ok(&mut c, "MULTI");
    check(&mut c, "EXEC", NULL_ARRAY);
    // Missing in the watched db, present in the other: SWAPDB creates it.
    ok(&mut c, "FLUSHALL");
    ok(&mut c, "SELECT 1");
    ok(&mut c, "SET x 30");
    ok(&mut c, "SELECT 0");
    ok(&mut c, "WATCH x");
    ok(&mut other, "SWAPDB 0 1");
    ok(&mut c, "MULTI");
    check(&mut c, "EXEC", NULL_ARRAY);
    // In neither: untouched.
    ok(&mut c, "FLUSHALL");
    ok(&mut c, "WATCH x");
    ok(&mut other, "SWAPDB 0 1");
    ok(&mut c, "MULTI");
    check(&mut c, "PING", QUEUED);
    check(&mut c, "EXEC", PONG_ARRAY);
    // A missing key replaced by an expired one: still logically missing.
    ok(&mut c, "DEBUG SET-ACTIVE-EXPIRE 0");
    ok(&mut c, "SET x foo PX 1");
    ok(&mut c, "DEBUG ADVANCE-CLOCK 10");
    ok(&mut c, "SELECT 1");
    ok(&mut c, "WATCH x");
    ok(&mut other, "SWAPDB 0 1");
    ok(&mut c, "MULTI");
    check(&mut c, "PING", QUEUED);
    check(&mut c, "EXEC", PONG_ARRAY);
}

#[test]
fn client_list_shows_the_transaction() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    let mut redis = server.client();
    let info = |redis: &mut redis::Connection| -> String {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(redis).unwrap();
        list.lines()
            .find(|l| !l.contains("cmd=client|list"))
            .unwrap_or_default()
            .to_string()
    };
    ok(&mut c, "MULTI");
    check(&mut c, "PING", QUEUED);
    check(&mut c, "PING", QUEUED);
    let line = info(&mut redis);
    assert!(line.contains(" multi=2 "), "{line}");
    assert!(line.contains(" flags=x "), "{line}");
    check(&mut c, "EXEC", "*2\r\n+PONG\r\n+PONG\r\n");
    let line = info(&mut redis);
    assert!(line.contains(" multi=-1 "), "{line}");
    assert!(line.contains(" flags=N "), "{line}");
}

/// Optimistic increments (WATCH/GET/MULTI/SET/EXEC with retries) racing plain INCRs: every
/// increment lands exactly once.
#[test]
fn optimistic_transactions_are_atomic_under_load() {
    const WATCHERS: usize = 4;
    const INCREMENTERS: usize = 4;
    const PER_CLIENT: i64 = 300;
    let server = Arc::new(TestServer::start(&[]));
    let mut setup = server.client();
    let _: () = redis::cmd("SET")
        .arg("counter")
        .arg(0)
        .query(&mut setup)
        .unwrap();
    let failed_exec = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for _ in 0..WATCHERS {
        let server = server.clone();
        let failed_exec = failed_exec.clone();
        threads.push(std::thread::spawn(move || {
            let mut conn = server.client();
            let mut done = 0;
            let mut attempts = 0;
            while done < PER_CLIENT && attempts < PER_CLIENT * 1000 {
                attempts += 1;
                let _: () = redis::cmd("WATCH").arg("counter").query(&mut conn).unwrap();
                let value: i64 = redis::cmd("GET").arg("counter").query(&mut conn).unwrap();
                let result: Option<Vec<String>> = redis::pipe()
                    .atomic()
                    .cmd("SET")
                    .arg("counter")
                    .arg(value + 1)
                    .query(&mut conn)
                    .unwrap();
                match result {
                    Some(_) => done += 1,
                    None => failed_exec.store(true, Ordering::Relaxed),
                }
            }
            assert_eq!(done, PER_CLIENT, "gave up retrying");
        }));
    }
    for _ in 0..INCREMENTERS {
        let server = server.clone();
        threads.push(std::thread::spawn(move || {
            let mut conn = server.client();
            for _ in 0..PER_CLIENT {
                let _: i64 = redis::cmd("INCR").arg("counter").query(&mut conn).unwrap();
            }
        }));
    }
    for thread in threads {
        thread.join().unwrap();
    }
    let total: i64 = redis::cmd("GET").arg("counter").query(&mut setup).unwrap();
    assert_eq!(total, PER_CLIENT * (WATCHERS + INCREMENTERS) as i64);
}

/// Transactions over several keys in different shards never show a half-applied state.
#[test]
fn multi_key_transactions_are_isolated() {
    let server = Arc::new(TestServer::start(&[]));
    let keys: Vec<String> = (0..8).map(|i| format!("account:{i}")).collect();
    let mut setup = server.client();
    for key in &keys {
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg(100)
            .query(&mut setup)
            .unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut movers = Vec::new();
    for t in 0..4 {
        let server = server.clone();
        let keys = keys.clone();
        movers.push(std::thread::spawn(move || {
            let mut conn = server.client();
            for i in 0..300 {
                let from = &keys[(i + t) % keys.len()];
                let to = &keys[(i * 3 + t + 1) % keys.len()];
                let _: (i64, i64) = redis::pipe()
                    .atomic()
                    .cmd("DECRBY")
                    .arg(from)
                    .arg(7)
                    .cmd("INCRBY")
                    .arg(to)
                    .arg(7)
                    .query(&mut conn)
                    .unwrap();
            }
        }));
    }
    let reader = {
        let server = server.clone();
        let keys = keys.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut conn = server.client();
            let mut reads = 0;
            while !stop.load(Ordering::Relaxed) || reads == 0 {
                let mut pipe = redis::pipe();
                pipe.atomic();
                for key in &keys {
                    pipe.cmd("GET").arg(key);
                }
                let values: Vec<i64> = pipe.query(&mut conn).unwrap();
                assert_eq!(
                    values.iter().sum::<i64>(),
                    800,
                    "saw a half-applied transfer"
                );
                reads += 1;
            }
        })
    };
    for mover in movers {
        mover.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
}
