//! CLIENT PAUSE and CLIENT UNPAUSE against the real binary: WRITE holds writes (reads go
//! on), ALL holds everything, held commands run at UNPAUSE or at the timeout and in the
//! order they arrived, expiry is held meanwhile, transactions and scripts are judged as
//! Redis 7.0 judges them.

mod common;

use std::io::Read;
use std::time::{Duration, Instant};

use common::replies::NIL;
use common::{bulk, bulks, check, encode, read_line, RawConn, TestServer};

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

/// Asserts that no reply is waiting on `conn` (looking for a short moment).
fn nothing_pending(conn: &mut RawConn) {
    conn.stream
        .set_read_timeout(Some(Duration::from_millis(30)))
        .unwrap();
    let mut byte = [0u8; 1];
    let read = conn.stream.read(&mut byte);
    conn.stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    match read {
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) => {}
        other => panic!(
            "expected no reply yet, got {other:?} ({:?})",
            byte[0] as char
        ),
    }
}

/// One field of an INFO section, as text.
fn info_field(conn: &mut RawConn, section: &str, field: &str) -> String {
    send(conn, &format!("INFO {section}"));
    let header = read_line(conn);
    let len: usize = header.trim()[1..].parse().expect("bulk length");
    let body = conn.read_n(len + 2);
    let text = String::from_utf8_lossy(&body).into_owned();
    let prefix = format!("{field}:");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
}

fn blocked_clients(control: &mut RawConn) -> usize {
    info_field(control, "clients", "blocked_clients")
        .parse()
        .expect("a count")
}

/// Waits (bounded) until INFO reports `count` blocked clients.
fn wait_blocked(control: &mut RawConn, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while blocked_clients(control) != count {
        assert!(
            Instant::now() < deadline,
            "never saw {count} blocked clients"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn int(n: i64) -> String {
    format!(":{n}\r\n")
}

#[test]
fn write_pause_holds_writes_until_unpause_and_lets_reads_through() {
    let server = TestServer::start(&[]);
    let mut control = server.raw();
    let mut writer = server.raw();
    let mut reader = server.raw();
    check(&mut control, "CLIENT PAUSE 60000 WRITE", "+OK\r\n");

    send(&mut writer, "SET k v");
    wait_blocked(&mut control, 1);
    nothing_pending(&mut writer);
    // Reads (and admin commands) go on; the write has not happened.
    check(&mut reader, "GET k", NIL);
    check(&mut reader, "PING", "+PONG\r\n");
    // The held client is listed as blocked.
    send(&mut control, "CLIENT LIST");
    let header = read_line(&mut control);
    let len: usize = header.trim()[1..].parse().unwrap();
    let list = String::from_utf8_lossy(&control.read_n(len + 2)).into_owned();
    let held_line = list
        .lines()
        .find(|l| l.contains("cmd=set"))
        .expect("the held client is listed");
    assert!(held_line.contains(" flags=b "), "{held_line}");
    // Errors found before running still come back at once.
    check(
        &mut reader,
        "SET k",
        "-ERR wrong number of arguments for 'set' command\r\n",
    );
    nothing_pending(&mut writer);

    check(&mut control, "CLIENT UNPAUSE", "+OK\r\n");
    expect_reply(&mut writer, "+OK\r\n");
    check(&mut reader, "GET k", &bulk("v"));
    assert_eq!(blocked_clients(&mut control), 0);
}

#[test]
fn write_pause_ends_at_its_timeout() {
    let server = TestServer::start(&[]);
    let mut control = server.raw();
    let mut writer = server.raw();
    let paused_at = Instant::now();
    check(&mut control, "CLIENT PAUSE 300 WRITE", "+OK\r\n");
    // (Held: the timing below shows it; polling INFO could miss so short a wait.)
    send(&mut writer, "INCR counter");
    expect_reply(&mut writer, &int(1));
    let waited = paused_at.elapsed();
    assert!(
        waited >= Duration::from_millis(300),
        "answered after {waited:?}, before the pause's end"
    );
    assert!(waited < Duration::from_secs(3), "answered after {waited:?}");
    assert_eq!(blocked_clients(&mut control), 0);
    // Over: writes run at once again.
    check(&mut writer, "INCR counter", &int(2));
}

#[test]
fn all_pause_holds_reads_and_every_other_command() {
    let server = TestServer::start(&[]);
    let mut control = server.raw();
    let mut reader = server.raw();
    check(&mut reader, "SET k v", "+OK\r\n");
    let paused_at = Instant::now();
    check(&mut control, "CLIENT PAUSE 500", "+OK\r\n");
    send(&mut reader, "GET k");
    // CLIENT UNPAUSE is a command like any other: held too (as in Redis).
    send(&mut control, "CLIENT UNPAUSE");
    nothing_pending(&mut reader);
    nothing_pending(&mut control);
    expect_reply(&mut reader, &bulk("v"));
    expect_reply(&mut control, "+OK\r\n");
    let waited = paused_at.elapsed();
    assert!(
        waited >= Duration::from_millis(500),
        "answered after {waited:?}, before the pause's end"
    );
    check(&mut reader, "GET k", &bulk("v"));
}

#[test]
fn a_later_pause_keeps_the_later_end_and_the_stricter_mode() {
    let server = TestServer::start(&[]);
    let mut control = server.raw();
    let mut other = server.raw();
    check(&mut other, "SET k v", "+OK\r\n");
    // Shorter but stricter: the end stays, reads are held too.
    let paused_at = Instant::now();
    check(&mut control, "CLIENT PAUSE 300 WRITE", "+OK\r\n");
    check(&mut control, "CLIENT PAUSE 1 ALL", "+OK\r\n");
    send(&mut other, "GET k");
    nothing_pending(&mut other);
    expect_reply(&mut other, &bulk("v"));
    let waited = paused_at.elapsed();
    assert!(
        waited >= Duration::from_millis(300),
        "answered after {waited:?}"
    );
    // Later: the end moves.
    let paused_at = Instant::now();
    check(&mut control, "CLIENT PAUSE 100 WRITE", "+OK\r\n");
    check(&mut control, "CLIENT PAUSE 300 WRITE", "+OK\r\n");
    send(&mut other, "SET k w");
    expect_reply(&mut other, "+OK\r\n");
    let waited = paused_at.elapsed();
    assert!(
        waited >= Duration::from_millis(300),
        "answered after {waited:?}"
    );
}

#[test]
fn pause_arguments_are_checked_as_redis_checks_them() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    // A 0 timeout pauses nothing.
    check(&mut c, "CLIENT PAUSE 0", "+OK\r\n");
    check(&mut c, "SET k v", "+OK\r\n");
    check(
        &mut c,
        "CLIENT PAUSE abc",
        "-ERR timeout is not an integer or out of range\r\n",
    );
    check(&mut c, "CLIENT PAUSE -1", "-ERR timeout is negative\r\n");
    // The mode is checked first.
    check(
        &mut c,
        "CLIENT PAUSE abc READ",
        "-ERR CLIENT PAUSE mode must be WRITE or ALL\r\n",
    );
    check(
        &mut c,
        "CLIENT pause 10 WRITE now",
        "-ERR unknown subcommand or wrong number of arguments for 'pause'. Try CLIENT HELP.\r\n",
    );
    check(
        &mut c,
        "CLIENT PAUSE",
        "-ERR wrong number of arguments for 'client|pause' command\r\n",
    );
    check(
        &mut c,
        "CLIENT UNPAUSE now",
        "-ERR wrong number of arguments for 'client|unpause' command\r\n",
    );
    // UNPAUSE without a pause is fine.
    check(&mut c, "CLIENT UNPAUSE", "+OK\r\n");
    // The longest timeout pauses (as long as a clock can tell) until UNPAUSE.
    check(&mut c, "CLIENT PAUSE 9223372036854775807 WRITE", "+OK\r\n");
    let mut writer = server.raw();
    send(&mut writer, "SET k w");
    wait_blocked(&mut c, 1);
    check(&mut c, "GET k", &bulk("v"));
    check(&mut c, "CLIENT UNPAUSE", "+OK\r\n");
    expect_reply(&mut writer, "+OK\r\n");
}

#[test]
fn held_commands_run_in_the_order_they_arrived() {
    let server = TestServer::start(&[]);
    let mut control = server.raw();
    check(&mut control, "CLIENT PAUSE 60000 WRITE", "+OK\r\n");
    let mut clients: Vec<RawConn> = (0..4).map(|_| server.raw()).collect();
    for (i, client) in clients.iter_mut().enumerate() {
        send(client, &format!("RPUSH list {i}"));
        wait_blocked(&mut control, i + 1);
    }
    check(&mut control, "CLIENT UNPAUSE", "+OK\r\n");
    for client in &mut clients {
        // Each push's reply is the list's length after it: order shows in the list.
        let line = read_line(client);
        assert!(line.starts_with(':'), "{line:?}");
    }
    check(
        &mut control,
        "LRANGE list 0 -1",
        &bulks(&["0", "1", "2", "3"]),
    );
}

#[test]
fn a_held_client_that_leaves_never_runs_its_command() {
    let server = TestServer::start(&[]);
    let mut control = server.raw();
    check(&mut control, "CLIENT PAUSE 60000 WRITE", "+OK\r\n");
    let mut leaving = server.raw();
    send(&mut leaving, "CLIENT ID");
    let id: u64 = read_line(&mut leaving).trim()[1..].parse().unwrap();
    send(&mut leaving, "SET gone 1");
    wait_blocked(&mut control, 1);
    // CLIENT UNBLOCK is for blocking commands: a held client stays held.
    check(&mut control, &format!("CLIENT UNBLOCK {id}"), &int(0));
    drop(leaving);
    wait_blocked(&mut control, 0);
    check(&mut control, "CLIENT UNPAUSE", "+OK\r\n");
    check(&mut control, "EXISTS gone", &int(0));
}

#[test]
fn expired_keys_stay_during_a_pause_and_go_after_it() {
    let server = TestServer::start(&["--hz", "100"]);
    let mut c = server.raw();
    check(&mut c, "SET short v PX 100", "+OK\r\n");
    check(&mut c, "SET other v PX 100", "+OK\r\n");
    let expired_before: u64 = info_field(&mut c, "stats", "expired_keys").parse().unwrap();
    check(&mut c, "CLIENT PAUSE 60000 WRITE", "+OK\r\n");
    // Past both deadlines (the keyspace clock moves; the pause's end does not).
    check(&mut c, "DEBUG ADVANCE-CLOCK 1000", "+OK\r\n");
    check(&mut c, "GET short", NIL);
    check(&mut c, "EXISTS short other", &int(0));
    // Still stored: neither the lookups nor the active expiry (a few cron ticks at hz
    // 100) removed them.
    std::thread::sleep(Duration::from_millis(50));
    check(&mut c, "DBSIZE", &int(2));
    let during: u64 = info_field(&mut c, "stats", "expired_keys").parse().unwrap();
    assert_eq!(during, expired_before, "nothing expired during the pause");

    check(&mut c, "CLIENT UNPAUSE", "+OK\r\n");
    check(&mut c, "GET short", NIL);
    // The other key goes by lookup or by the cron, whichever comes first.
    check(&mut c, "EXISTS other", &int(0));
    check(&mut c, "DBSIZE", &int(0));
    let after: u64 = info_field(&mut c, "stats", "expired_keys").parse().unwrap();
    assert_eq!(after, expired_before + 2);
}

#[test]
fn transactions_wait_when_their_queue_writes_and_a_pause_inside_starts_after_exec() {
    let server = TestServer::start(&[]);
    let mut control = server.raw();
    let mut tx = server.raw();
    // Queued before the pause: the EXEC of a queue that writes is held.
    check(&mut tx, "MULTI", "+OK\r\n");
    check(&mut tx, "SET a 1", "+QUEUED\r\n");
    check(&mut control, "CLIENT PAUSE 60000 WRITE", "+OK\r\n");
    send(&mut tx, "EXEC");
    wait_blocked(&mut control, 1);
    nothing_pending(&mut tx);
    check(&mut control, "GET a", NIL);
    // A read-only transaction runs at once.
    let mut reads = server.raw();
    check(&mut reads, "MULTI", "+OK\r\n");
    check(&mut reads, "GET a", "+QUEUED\r\n");
    check(&mut reads, "PING", "+QUEUED\r\n");
    check(&mut reads, "EXEC", &format!("*2\r\n{NIL}+PONG\r\n"));
    check(&mut control, "CLIENT UNPAUSE", "+OK\r\n");
    expect_reply(&mut tx, "*1\r\n+OK\r\n");

    // A pause queued in a transaction lets the rest of the queue run.
    check(&mut tx, "MULTI", "+OK\r\n");
    check(&mut tx, "SET before 1", "+QUEUED\r\n");
    check(&mut tx, "CLIENT PAUSE 60000 WRITE", "+QUEUED\r\n");
    check(&mut tx, "SET after 1", "+QUEUED\r\n");
    check(&mut tx, "EXEC", "*3\r\n+OK\r\n+OK\r\n+OK\r\n");
    check(&mut control, "MGET before after", &bulks(&["1", "1"]));
    let mut writer = server.raw();
    send(&mut writer, "SET later 1");
    wait_blocked(&mut control, 1);
    check(&mut control, "CLIENT UNPAUSE", "+OK\r\n");
    expect_reply(&mut writer, "+OK\r\n");
}

#[test]
fn scripts_wait_unless_they_declare_no_writes() {
    let server = TestServer::start(&[]);
    let mut control = server.raw();
    let mut c = server.client();
    let read_only_body = "#!lua flags=no-writes\nreturn 7";
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(read_only_body)
        .query(&mut c)
        .unwrap();
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(
            "#!lua name=lib\nredis.register_function{function_name='ro', \
             callback=function() return 8 end, flags={'no-writes'}}",
        )
        .query(&mut c)
        .unwrap();
    check(&mut control, "CLIENT PAUSE 60000 WRITE", "+OK\r\n");
    // No shebang (EVAL may write), and a shebang without no-writes: held.
    let mut plain = server.raw();
    plain.send(&encode(&[b"EVAL", b"return 1", b"0"]));
    let mut flagged = server.raw();
    flagged.send(&encode(&[b"EVAL", b"#!lua\nreturn 2", b"0"]));
    wait_blocked(&mut control, 2);
    // Read-only ones run: a no-writes shebang, EVALSHA of one, a no-writes function,
    // EVAL_RO.
    let n: i64 = redis::cmd("EVAL")
        .arg(read_only_body)
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 7);
    let n: i64 = redis::cmd("EVALSHA")
        .arg(&sha)
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 7);
    let n: i64 = redis::cmd("FCALL").arg("ro").arg(0).query(&mut c).unwrap();
    assert_eq!(n, 8);
    let n: i64 = redis::cmd("EVAL_RO")
        .arg("return 9")
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 9);
    nothing_pending(&mut plain);
    nothing_pending(&mut flagged);
    check(&mut control, "CLIENT UNPAUSE", "+OK\r\n");
    expect_reply(&mut plain, &int(1));
    expect_reply(&mut flagged, &int(2));
}

#[test]
fn blocked_clients_are_served_by_a_transaction_that_paused() {
    // A client already waiting in BLPOP is not disturbed by a pause; a push made inside
    // the transaction that paused serves it, as in Redis.
    let server = TestServer::start(&[]);
    let mut control = server.raw();
    let mut waiter = server.raw();
    send(&mut waiter, "BLPOP queue 0");
    wait_blocked(&mut control, 1);
    check(&mut control, "MULTI", "+OK\r\n");
    check(&mut control, "CLIENT PAUSE 60000 WRITE", "+QUEUED\r\n");
    check(&mut control, "RPUSH queue job", "+QUEUED\r\n");
    check(&mut control, "EXEC", "*2\r\n+OK\r\n:1\r\n");
    expect_reply(&mut waiter, &bulks(&["queue", "job"]));
    check(&mut control, "CLIENT UNPAUSE", "+OK\r\n");
}
