//! Shutting down as redis-server does: a final snapshot that fails keeps the server
//! running (SHUTDOWN answers an error; a signal's shutdown is dropped), a signal waits for
//! the cron (so SHUTDOWN ABORT can cancel it), and a second SIGINT exits at once, removing
//! the half-written dump.

mod common;

use std::time::{Duration, Instant};

use common::{check, TestServer};
use latch_testkit::send_signal;

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn log(server: &TestServer) -> String {
    std::fs::read_to_string(server.dir.join("stderr.log")).unwrap_or_default()
}

#[test]
fn a_failed_final_snapshot_keeps_the_server_running() {
    let mut server = TestServer::start(&["--save", "3600 1"]);
    let mut conn = server.raw();
    check(&mut conn, "SET k v", "+OK\r\n");
    // A directory where the dump goes: the snapshot's rename fails.
    std::fs::create_dir(server.dir.join("dump.rdb")).unwrap();
    check(
        &mut conn,
        "SHUTDOWN",
        "-ERR Errors trying to SHUTDOWN. Check logs.\r\n",
    );
    // Writes were held during the attempt and go on after it.
    check(&mut conn, "SET k w", "+OK\r\n");
    send_signal(server.pid(), libc::SIGTERM);
    wait_for("the signal's save to fail", || {
        log(&server).contains("Error trying to save the DB, can't exit")
    });
    check(&mut conn, "PING", "+PONG\r\n");
    assert!(server.alive());
    // No temporary file is left behind by the failed renames.
    let leftovers: Vec<_> = std::fs::read_dir(&server.dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("temp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // FORCE exits anyway.
    conn.send(b"SHUTDOWN FORCE\r\n");
    assert!(server.wait_exit(Duration::from_secs(20)).is_some());
    assert!(log(&server).contains("Error trying to save the DB. Exit anyway."));
}

#[test]
fn a_signal_waits_for_the_cron_and_shutdown_abort_cancels_it() {
    let server = TestServer::start(&["--save", "3600 1"]);
    let mut conn = server.raw();
    check(&mut conn, "SET kept yes", "+OK\r\n");
    check(
        &mut conn,
        "SHUTDOWN ABORT",
        "-ERR No shutdown in progress.\r\n",
    );
    check(&mut conn, "DEBUG PAUSE-CRON 1", "+OK\r\n");
    send_signal(server.pid(), libc::SIGTERM);
    wait_for("the signal to be noted", || {
        log(&server).contains("Received SIGTERM scheduling shutdown")
    });
    std::thread::sleep(Duration::from_millis(300));
    check(&mut conn, "PING", "+PONG\r\n");
    check(&mut conn, "SHUTDOWN ABORT", "+OK\r\n");
    assert!(log(&server).contains("Shutdown manually aborted."));
    check(&mut conn, "DEBUG PAUSE-CRON 0", "+OK\r\n");
    std::thread::sleep(Duration::from_millis(300));
    check(&mut conn, "PING", "+PONG\r\n");
    // Without a pause the cron shuts down, saving first.
    send_signal(server.pid(), libc::SIGTERM);
    let mut server = server;
    assert!(server.wait_exit(Duration::from_secs(20)).is_some());
    let dir = std::env::temp_dir().join(format!("latch-shutdown-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(server.dir.join("dump.rdb"), dir.join("dump.rdb")).unwrap();
    drop(server);
    let server = TestServer::start_in(Some(&dir), &["--save", "3600 1"]);
    let mut conn = server.raw();
    check(&mut conn, "GET kept", "$3\r\nyes\r\n");
}

#[test]
fn a_second_sigint_exits_at_once_and_removes_the_partial_dump() {
    let mut server = TestServer::start(&["--save", "3600 1"]);
    let mut conn = server.raw();
    check(&mut conn, "DEBUG POPULATE 50", "+OK\r\n");
    // 100 ms per key: the final snapshot takes seconds.
    check(&mut conn, "CONFIG SET rdb-key-save-delay 100000", "+OK\r\n");
    let temp = server.dir.join(format!("temp-{}.rdb", server.pid()));
    send_signal(server.pid(), libc::SIGINT);
    wait_for("the final snapshot to start", || temp.exists());
    send_signal(server.pid(), libc::SIGINT);
    let status = server.wait_exit(Duration::from_secs(20)).expect("exited");
    assert_eq!(status.code(), Some(1));
    assert!(!temp.exists());
    assert!(!server.dir.join("dump.rdb").exists());
    assert!(log(&server).contains("You insist... exiting now."));
}

#[test]
fn a_busy_writing_script_leaves_the_server_answering_and_shutdown_nosave_ends_it() {
    // A script that never ends keeps the process busy after SHUTDOWN NOSAVE: the listening
    // socket must not take connections meanwhile (as once redis-server has exited).
    // The script holds the shard of the key it wrote: the cron (100 times a second here),
    // which reads every shard's change count, must not wait for it and stall the worker
    // that answers everyone else (Redis runs no cron during a script).
    let mut server = TestServer::start(&[
        "--save",
        "3600 1",
        "--lua-time-limit",
        "10",
        "--hz",
        "100",
        "--io-threads",
        "1",
    ]);
    let mut looping = server.raw();
    looping.send(b"EVAL \"redis.call('set','k','v') while true do end\" 0\r\n");
    std::thread::sleep(Duration::from_millis(200));
    for _ in 0..15 {
        let mut other = server.raw();
        other
            .stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        other.send(b"PING\r\n");
        assert!(common::read_line(&mut other).starts_with("-BUSY"));
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut conn = server.raw();
    conn.send(b"SHUTDOWN NOSAVE\r\n");
    assert!(conn.is_closed(), "SHUTDOWN NOSAVE answered");
    let refused = std::net::TcpStream::connect(("127.0.0.1", server.port));
    assert_eq!(
        refused.map_err(|e| e.kind()).err(),
        Some(std::io::ErrorKind::ConnectionRefused)
    );
    assert!(server.wait_exit(Duration::from_secs(20)).is_some());
}
