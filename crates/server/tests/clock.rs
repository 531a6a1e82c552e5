//! Relative TTLs run on the monotonic clock, absolute ones on the wall clock: a wall-clock
//! jump never expires a lock early (the thing Redis' critics asked for), while EXPIREAT and
//! PXAT follow the wall clock exactly as in Redis.

mod common;

use common::TestServer;

fn int(conn: &mut redis::Connection, args: &[&str]) -> i64 {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(conn).unwrap()
}

fn ok(conn: &mut redis::Connection, args: &[&str]) {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let _: () = cmd.query(conn).unwrap();
}

#[test]
fn wall_clock_jump_keeps_relative_ttls_and_moves_absolute_ones() {
    let server = TestServer::start(&[]);
    let mut c = server.client();
    let (now_s, _): (String, String) = redis::cmd("TIME").query(&mut c).unwrap();
    let now_ms = now_s.parse::<i64>().unwrap() * 1000;
    ok(&mut c, &["SET", "lock", "token", "NX", "PX", "10000"]);
    ok(
        &mut c,
        &[
            "SET",
            "deadline",
            "v",
            "PXAT",
            &(now_ms + 10_000).to_string(),
        ],
    );
    ok(&mut c, &["SET", "ex", "v"]);
    assert_eq!(int(&mut c, &["EXPIRE", "ex", "10"]), 1);
    ok(&mut c, &["SET", "at", "v"]);
    assert_eq!(
        int(
            &mut c,
            &["EXPIREAT", "at", &(now_ms / 1000 + 10).to_string()]
        ),
        1
    );

    // The wall clock jumps 20 s ahead (an NTP step, an operator's `date -s`).
    ok(&mut c, &["DEBUG", "JUMP-CLOCK", "20000"]);
    let lock_pttl = int(&mut c, &["PTTL", "lock"]);
    assert!(
        (9_000..=10_000).contains(&lock_pttl),
        "relative TTL kept: {lock_pttl}"
    );
    assert_eq!(int(&mut c, &["EXISTS", "lock", "ex"]), 2);
    assert_eq!(
        int(&mut c, &["EXISTS", "deadline"]),
        0,
        "PXAT follows the wall clock"
    );
    assert_eq!(
        int(&mut c, &["EXISTS", "at"]),
        0,
        "EXPIREAT follows the wall clock"
    );
    // EXPIRETIME of a relative TTL is reported against the (jumped) wall clock.
    let (jumped_s, _): (String, String) = redis::cmd("TIME").query(&mut c).unwrap();
    let expiretime = int(&mut c, &["PEXPIRETIME", "lock"]);
    let expected = jumped_s.parse::<i64>().unwrap() * 1000 + lock_pttl;
    assert!(
        (expiretime - expected).abs() <= 1000,
        "{expiretime} vs {expected}"
    );

    // A backwards jump does not keep a relative TTL alive longer either.
    ok(&mut c, &["DEBUG", "JUMP-CLOCK", "-3600000"]);
    assert!(int(&mut c, &["PTTL", "lock"]) <= 10_000);
    // Time passing (both clocks) does expire it.
    ok(&mut c, &["DEBUG", "ADVANCE-CLOCK", "10001"]);
    assert_eq!(int(&mut c, &["EXISTS", "lock", "ex"]), 0);
    assert_eq!(int(&mut c, &["PTTL", "lock"]), -2);
}

/// Pipelined commands take their time from the end of the command before them (one clock
/// read per command): time that passed in that command, or between two reads of input,
/// must still count.
#[test]
fn commands_see_the_time_that_passed_before_them() {
    let server = TestServer::start(&[]);
    let mut c = server.client();
    // One batch: the GET follows a command that slept past the key's TTL.
    let (_, _, got): ((), (), Option<String>) = redis::pipe()
        .cmd("SET")
        .arg("k")
        .arg("v")
        .arg("PX")
        .arg(100)
        .cmd("DEBUG")
        .arg("SLEEP")
        .arg("0.3")
        .cmd("GET")
        .arg("k")
        .query(&mut c)
        .unwrap();
    assert_eq!(got, None, "expired during the DEBUG SLEEP before it");
    // Two batches with a pause between them.
    ok(&mut c, &["SET", "k", "v", "PX", "100"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let got: Option<String> = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(got, None, "expired during the pause before it");
}

#[test]
fn ttl_reports_consistently_for_both_kinds() {
    let server = TestServer::start(&[]);
    let mut c = server.client();
    let (now_s, _): (String, String) = redis::cmd("TIME").query(&mut c).unwrap();
    let now_s = now_s.parse::<i64>().unwrap();
    ok(&mut c, &["SET", "rel", "v", "EX", "100"]);
    ok(
        &mut c,
        &["SET", "abs", "v", "EXAT", &(now_s + 100).to_string()],
    );
    for key in ["rel", "abs"] {
        let ttl = int(&mut c, &["TTL", key]);
        assert!((98..=100).contains(&ttl), "{key}: {ttl}");
        let expiretime = int(&mut c, &["EXPIRETIME", key]);
        assert!(
            (expiretime - (now_s + 100)).abs() <= 1,
            "{key}: {expiretime}"
        );
    }
    ok(&mut c, &["DEBUG", "ADVANCE-CLOCK", "50000"]);
    for key in ["rel", "abs"] {
        let ttl = int(&mut c, &["TTL", key]);
        assert!((48..=50).contains(&ttl), "{key}: {ttl}");
    }
}

/// Polls DBSIZE (which removes nothing itself) every 50 ms until it is `expected` or
/// `seconds` have passed; the last size seen.
fn dbsize_when_swept(c: &mut redis::Connection, expected: i64, seconds: u64) -> i64 {
    let mut size = 0;
    for _ in 0..seconds * 20 {
        size = int(c, &["DBSIZE"]);
        if size == expected {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    size
}

#[test]
fn active_expiry_removes_keys_nobody_reads() {
    let server = TestServer::start(&["--hz", "100"]);
    let mut c = server.client();
    for i in 0..500 {
        ok(&mut c, &["SET", &format!("k{i}"), "v", "PX", "50"]);
    }
    ok(&mut c, &["SET", "stays", "v"]);
    ok(&mut c, &["DEBUG", "ADVANCE-CLOCK", "51"]);
    // Nobody reads the keys; the background sweep must find them.
    assert_eq!(dbsize_when_swept(&mut c, 1, 5), 1);
    let info: String = redis::cmd("INFO").arg("stats").query(&mut c).unwrap();
    assert!(info.contains("expired_keys:500"), "{info}");
}

#[test]
fn active_expiry_finds_the_few_passed_keys_among_many_live_ones() {
    // A tick that finds few passed keys stops after a few hundred keys; the next one goes
    // on from there, so every shard's keys are still read in turn.
    let server = TestServer::start(&["--hz", "100"]);
    let mut c = server.client();
    let mut pipe = redis::pipe();
    for (prefix, count, unit, ttl) in [("live", 30_000, "EX", 3600), ("gone", 300, "PX", 50)] {
        for i in 0..count {
            pipe.cmd("SET")
                .arg(format!("{prefix}{i}"))
                .arg("v")
                .arg(unit)
                .arg(ttl)
                .ignore();
        }
    }
    let _: () = pipe.query(&mut c).unwrap();
    ok(&mut c, &["DEBUG", "ADVANCE-CLOCK", "51"]);
    assert_eq!(dbsize_when_swept(&mut c, 30_000, 15), 30_000);
    let info: String = redis::cmd("INFO").arg("stats").query(&mut c).unwrap();
    assert!(info.contains("expired_keys:300\r"), "{info}");
}

#[test]
fn sigterm_stops_the_server_cleanly() {
    let mut server = TestServer::start(&[]);
    let status = std::process::Command::new("kill")
        .args(["-TERM", &server.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = server
        .wait_exit(std::time::Duration::from_secs(10))
        .expect("server exited");
    assert!(exit.success(), "{exit:?}");
}

#[test]
fn shutdown_nosave_stops_the_server() {
    let mut server = TestServer::start(&[]);
    let mut c = server.client();
    let result: redis::RedisResult<()> = redis::cmd("SHUTDOWN").arg("NOSAVE").query(&mut c);
    assert!(
        result.is_err(),
        "SHUTDOWN closes the connection without a reply"
    );
    let exit = server
        .wait_exit(std::time::Duration::from_secs(10))
        .expect("server exited");
    assert!(exit.success(), "{exit:?}");
}
