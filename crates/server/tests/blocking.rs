//! Blocking commands (BLPOP & co) against the real binary: served at once, woken by writes,
//! timeouts, CLIENT UNBLOCK, MULTI, kills, fairness between waiters, INFO and CLIENT LIST.

mod common;

use std::time::{Duration, Instant};

use common::replies::{NIL, NIL_ARRAY, NULL3, WRONGTYPE};
use common::{bulk, bulks, check, encode, read_line, resp3, RawConn, TestServer};

/// Sends a command written as space-separated words without reading the reply.
fn send(conn: &mut RawConn, command: &str) {
    let args: Vec<&[u8]> = command.split(' ').map(str::as_bytes).collect();
    conn.send(&encode(&args));
}

/// Reads exactly `expected.len()` bytes and asserts they are `expected`.
fn expect_reply(conn: &mut RawConn, expected: &str) {
    let got = conn.read_n(expected.len());
    assert_eq!(String::from_utf8_lossy(&got), expected);
}

/// INFO's `blocked_clients` value.
fn blocked_clients(control: &mut RawConn) -> usize {
    send(control, "INFO clients");
    let header = read_line(control);
    let len: usize = header.trim()[1..].parse().expect("bulk length");
    let body = control.read_n(len + 2);
    let text = String::from_utf8_lossy(&body).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("blocked_clients field")
}

/// Waits (bounded) until INFO reports `count` blocked clients.
fn wait_blocked(control: &mut RawConn, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while blocked_clients(control) != count {
        assert!(
            Instant::now() < deadline,
            "never saw {count} blocked clients"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `CLIENT ID` of a connection.
fn client_id(conn: &mut RawConn) -> u64 {
    send(conn, "CLIENT ID");
    read_line(conn).trim()[1..].parse().expect("id")
}

/// A key/element pair as B[LR]POP answers it.
fn pair(key: &str, element: &str) -> String {
    bulks(&[key, element])
}

#[test]
fn served_at_once_when_data_is_there() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "RPUSH l a b c", ":3\r\n");
    check(&mut c, "BLPOP missing l 0", &pair("l", "a"));
    check(&mut c, "BRPOP l 0", &pair("l", "c"));
    check(&mut c, "BRPOPLPUSH l m 0", &bulk("b"));
    check(&mut c, "BLMOVE m l RIGHT LEFT 0", &bulk("b"));
    check(&mut c, "RPUSH l x y", ":3\r\n");
    check(
        &mut c,
        "BLMPOP 0 2 missing l RIGHT COUNT 2",
        "*2\r\n$1\r\nl\r\n*2\r\n$1\r\ny\r\n$1\r\nx\r\n",
    );
    check(&mut c, "ZADD z 1 a 2 b 3 c", ":3\r\n");
    check(
        &mut c,
        "BZPOPMIN z 0",
        "*3\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\n1\r\n",
    );
    check(
        &mut c,
        "BZPOPMAX z 0",
        "*3\r\n$1\r\nz\r\n$1\r\nc\r\n$1\r\n3\r\n",
    );
    check(
        &mut c,
        "BZMPOP 0 1 z MIN",
        "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n",
    );
    check(&mut c, "SET s v", "+OK\r\n");
    check(&mut c, "BLPOP s 0", WRONGTYPE);
    check(&mut c, "BZPOPMIN s 0", WRONGTYPE);
    check(&mut c, "BRPOPLPUSH s l 0", WRONGTYPE);
    let mut r3 = resp3(&server);
    check(&mut r3, "ZADD z 1.5 m", ":1\r\n");
    check(
        &mut r3,
        "BZPOPMIN z 0",
        "*3\r\n$1\r\nz\r\n$1\r\nm\r\n,1.5\r\n",
    );
}

#[test]
fn timeout_arguments_and_replies() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "BLPOP l -1", "-ERR timeout is negative\r\n");
    check(
        &mut c,
        "BLPOP l abc",
        "-ERR timeout is not a float or out of range\r\n",
    );
    check(
        &mut c,
        "BLPOP l 0x7FFFFFFFFFFFFF",
        "-ERR timeout is negative\r\n",
    );
    check(&mut c, "BLPOP l inf", "-ERR timeout is negative\r\n");
    check(
        &mut c,
        "BLMPOP x 1 l LEFT",
        "-ERR timeout is not a float or out of range\r\n",
    );
    // The other arguments are checked before the timeout, as Redis does.
    check(
        &mut c,
        "BLMPOP x 0 l LEFT",
        "-ERR numkeys should be greater than 0\r\n",
    );
    check(&mut c, "BLMOVE a b UP LEFT x", "-ERR syntax error\r\n");
    // Every timeout answers a null array (Redis 7.0 does so even for BLMOVE/BRPOPLPUSH).
    for command in [
        "BLPOP l 0.01",
        "BRPOP l l2 0.01",
        "BRPOPLPUSH l m 0.01",
        "BLMOVE l m LEFT RIGHT 0.01",
        "BLMPOP 0.01 1 l LEFT",
        "BZPOPMIN z 0.01",
        "BZPOPMAX z 0.01",
        "BZMPOP 0.01 1 z MAX COUNT 3",
    ] {
        check(&mut c, command, NIL_ARRAY);
    }
    let mut r3 = resp3(&server);
    check(&mut r3, "BLPOP l 0.01", NULL3);
    check(&mut r3, "BLMOVE l m LEFT RIGHT 0.01", NULL3);
    check(&mut r3, "BZMPOP 0.01 1 z MIN", NULL3);
}

#[test]
fn block_then_push_wakes_resp2_and_resp3() {
    let server = TestServer::start(&[]);
    let mut control = server.raw();
    let mut waiter = server.raw();
    send(&mut waiter, "BLPOP l 0");
    wait_blocked(&mut control, 1);
    check(&mut control, "RPUSH l a b", ":2\r\n");
    expect_reply(&mut waiter, &pair("l", "a"));
    wait_blocked(&mut control, 0);
    check(&mut control, "LRANGE l 0 -1", &bulks(&["b"]));

    let mut waiter3 = resp3(&server);
    send(&mut waiter3, "BZPOPMAX z 5");
    wait_blocked(&mut control, 1);
    check(&mut control, "ZADD z 2.5 m", ":1\r\n");
    expect_reply(&mut waiter3, "*3\r\n$1\r\nz\r\n$1\r\nm\r\n,2.5\r\n");

    send(&mut waiter3, "BZMPOP 0 2 z1 z2 MIN COUNT 5");
    wait_blocked(&mut control, 1);
    check(&mut control, "ZADD z2 1 a 2 b", ":2\r\n");
    expect_reply(
        &mut waiter3,
        "*2\r\n$2\r\nz2\r\n*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2\r\n",
    );

    send(&mut waiter, "BLMPOP 0 2 l1 l2 RIGHT COUNT 2");
    wait_blocked(&mut control, 1);
    check(&mut control, "LPUSH l2 a b c", ":3\r\n");
    expect_reply(
        &mut waiter,
        "*2\r\n$2\r\nl2\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n",
    );
}

#[test]
fn writes_that_leave_nothing_or_the_wrong_type_do_not_serve() {
    let server = TestServer::start(&[]);
    let mut control = server.raw();
    let mut waiter = server.raw();
    send(&mut waiter, "BLPOP l 0");
    wait_blocked(&mut control, 1);
    // Pushed and deleted in one transaction: nothing to take.
    check(&mut control, "MULTI", "+OK\r\n");
    check(&mut control, "LPUSH l a", "+QUEUED\r\n");
    check(&mut control, "DEL l", "+QUEUED\r\n");
    check(&mut control, "SET l x", "+QUEUED\r\n");
    check(&mut control, "EXEC", "*3\r\n:1\r\n:1\r\n+OK\r\n");
    // A string under the key: the waiter keeps waiting instead of answering WRONGTYPE.
    assert_eq!(blocked_clients(&mut control), 1);
    check(&mut control, "DEL l", ":1\r\n");
    check(&mut control, "LPUSH l b", ":1\r\n");
    expect_reply(&mut waiter, &pair("l", "b"));
}

#[test]
fn blmove_between_lists_and_chains() {
    let server = TestServer::start(&[]);
    let mut control = server.raw();
    let mut first = server.raw();
    let mut second = server.raw();
    // first moves list1 -> list2, second waits on list2 -> list3: one push runs the chain
    // before the pusher's next command (Redis' "Linked LMOVEs").
    send(&mut first, "BLMOVE list1 list2 RIGHT LEFT 0");
    wait_blocked(&mut control, 1);
    send(&mut second, "BLMOVE list2 list3 LEFT RIGHT 0");
    wait_blocked(&mut control, 2);
    check(&mut control, "RPUSH list1 foo", ":1\r\n");
    check(&mut control, "LRANGE list1 0 -1", "*0\r\n");
    check(&mut control, "LRANGE list2 0 -1", "*0\r\n");
    check(&mut control, "LRANGE list3 0 -1", &bulks(&["foo"]));
    expect_reply(&mut first, &bulk("foo"));
    expect_reply(&mut second, &bulk("foo"));

    // Circular: the element ends where it started.
    send(&mut first, "BRPOPLPUSH c1 c2 0");
    wait_blocked(&mut control, 1);
    send(&mut second, "BRPOPLPUSH c2 c1 0");
    wait_blocked(&mut control, 2);
    check(&mut control, "RPUSH c1 x", ":1\r\n");
    check(&mut control, "LRANGE c1 0 -1", &bulks(&["x"]));
    check(&mut control, "LRANGE c2 0 -1", "*0\r\n");
    expect_reply(&mut first, &bulk("x"));
    expect_reply(&mut second, &bulk("x"));

    // A destination of another type: WRONGTYPE once served, and the element stays.
    check(&mut control, "SET target nolist", "+OK\r\n");
    send(&mut first, "BRPOPLPUSH src target 0");
    wait_blocked(&mut control, 1);
    check(&mut control, "RPUSH src a b c", ":3\r\n");
    expect_reply(&mut first, WRONGTYPE);
    check(&mut control, "LRANGE src 0 -1", &bulks(&["a", "b", "c"]));
}

#[test]
fn waiters_on_one_key_are_served_in_order_one_element_each() {
    let server = TestServer::start(&[]);
    let mut control = server.raw();
    let mut waiters: Vec<RawConn> = (0..3).map(|_| server.raw()).collect();
    for (n, waiter) in waiters.iter_mut().enumerate() {
        send(waiter, "BLPOP l 0");
        wait_blocked(&mut control, n + 1);
    }
    check(&mut control, "RPUSH l a b", ":2\r\n");
    expect_reply(&mut waiters[0], &pair("l", "a"));
    expect_reply(&mut waiters[1], &pair("l", "b"));
    assert_eq!(blocked_clients(&mut control), 1);
    check(&mut control, "RPUSH l c", ":1\r\n");
    expect_reply(&mut waiters[2], &pair("l", "c"));
    check(&mut control, "EXISTS l", ":0\r\n");
}

#[test]
fn client_unblock_both_forms() {
    let server = TestServer::start(&[]);
    let mut control = server.raw();
    let mut waiter = server.raw();
    let id = client_id(&mut waiter);
    check(&mut control, &format!("CLIENT UNBLOCK {id}"), ":0\r\n");
    send(&mut waiter, "BLPOP l 0");
    wait_blocked(&mut control, 1);
    send(&mut control, &format!("CLIENT LIST ID {id}"));
    let listed = read_line(&mut control);
    let line = read_line(&mut control);
    assert!(listed.starts_with('$'), "{listed}");
    assert!(line.contains(" flags=b "), "{line}");
    assert!(line.contains(" cmd=blpop "), "{line}");
    check(&mut control, &format!("CLIENT UNBLOCK {id}"), ":1\r\n");
    assert_eq!(blocked_clients(&mut control), 0);
    expect_reply(&mut waiter, NIL_ARRAY);

    send(&mut waiter, "BZPOPMIN z 0");
    wait_blocked(&mut control, 1);
    check(
        &mut control,
        &format!("CLIENT UNBLOCK {id} TIMEOUT"),
        ":1\r\n",
    );
    expect_reply(&mut waiter, NIL_ARRAY);

    send(&mut waiter, "BRPOPLPUSH l m 0");
    wait_blocked(&mut control, 1);
    check(
        &mut control,
        &format!("CLIENT UNBLOCK {id} ERROR"),
        ":1\r\n",
    );
    expect_reply(
        &mut waiter,
        "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n",
    );
    check(
        &mut control,
        &format!("CLIENT UNBLOCK {id} ERROR"),
        ":0\r\n",
    );
    // Still usable afterwards, and no longer queued on the keys.
    check(&mut waiter, "PING", "+PONG\r\n");
    check(&mut control, "RPUSH l x", ":1\r\n");
    check(&mut control, "LRANGE l 0 -1", &bulks(&["x"]));
}

#[test]
fn blocking_inside_multi_answers_at_once() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "MULTI", "+OK\r\n");
    for command in [
        "BLPOP l 0",
        "BRPOPLPUSH l m 0",
        "BLMOVE l m LEFT LEFT 0",
        "BZPOPMIN z 0",
        "BLMPOP 0 1 l LEFT",
        "BZMPOP 0 1 z MIN",
    ] {
        check(&mut c, command, "+QUEUED\r\n");
    }
    let expected = format!("*6\r\n{NIL_ARRAY}{NIL}{NIL}{NIL_ARRAY}{NIL_ARRAY}{NIL_ARRAY}");
    check(&mut c, "EXEC", &expected);
    let mut control = server.raw();
    assert_eq!(blocked_clients(&mut control), 0);
}

#[test]
fn killing_or_closing_a_blocked_client() {
    let server = TestServer::start(&[]);
    let mut control = server.raw();
    let mut waiter = server.raw();
    let id = client_id(&mut waiter);
    send(&mut waiter, "BLPOP l 0");
    wait_blocked(&mut control, 1);
    check(&mut control, &format!("CLIENT KILL ID {id}"), ":1\r\n");
    assert!(waiter.is_closed());
    wait_blocked(&mut control, 0);
    // A peer that goes away while blocked is forgotten too.
    let mut gone = server.raw();
    send(&mut gone, "BLPOP l 0");
    wait_blocked(&mut control, 1);
    drop(gone);
    wait_blocked(&mut control, 0);
    // Nobody is left to take the element.
    check(&mut control, "RPUSH l a", ":1\r\n");
    check(&mut control, "LLEN l", ":1\r\n");
}

#[test]
fn a_blocked_client_does_not_stall_others_and_keeps_its_pipeline() {
    let server = TestServer::start(&[]);
    let mut control = server.raw();
    let mut waiter = server.raw();
    // The PING after the BLPOP waits for the BLPOP's answer, as in Redis.
    waiter.send(&[encode(&[b"BLPOP", b"l", b"0"]), encode(&[b"PING"])].concat());
    wait_blocked(&mut control, 1);
    for _ in 0..50 {
        check(&mut control, "SET k v", "+OK\r\n");
    }
    check(&mut control, "RPUSH l a", ":1\r\n");
    expect_reply(&mut waiter, &format!("{}+PONG\r\n", pair("l", "a")));
}

#[test]
fn timeouts_fire_and_info_counts() {
    let server = TestServer::start(&[]);
    let mut control = server.raw();
    let mut waiter = server.raw();
    let started = Instant::now();
    send(&mut waiter, "BLPOP l 0.2");
    wait_blocked(&mut control, 1);
    expect_reply(&mut waiter, NIL_ARRAY);
    assert!(started.elapsed() >= Duration::from_millis(200));
    wait_blocked(&mut control, 0);
    // The call is counted once.
    send(&mut control, "INFO commandstats");
    let header = read_line(&mut control);
    let len: usize = header.trim()[1..].parse().expect("bulk length");
    let text = String::from_utf8_lossy(&control.read_n(len + 2)).into_owned();
    assert!(text.contains("cmdstat_blpop:calls=1,"), "{text}");
}

#[test]
fn swapdb_wakes_blocked_clients() {
    let server = TestServer::start(&[]);
    let mut control = server.raw();
    let mut waiter = server.raw();
    check(&mut control, "SELECT 1", "+OK\r\n");
    check(&mut control, "RPUSH k hello", ":1\r\n");
    check(&mut waiter, "SELECT 9", "+OK\r\n");
    send(&mut waiter, "BRPOP k 5");
    wait_blocked(&mut control, 1);
    check(&mut control, "SWAPDB 1 9", "+OK\r\n");
    expect_reply(&mut waiter, &pair("k", "hello"));
}
