//! Starting on a data set: clients are served while it loads (LOADING for the commands a
//! load does not let run, INFO and CONFIG for those it does), "Ready to accept connections"
//! once it is in, and RDB files that keep keys past their deadline for the loader to drop,
//! as redis-server's do.

mod common;

use std::time::{Duration, Instant};

use common::{check, encode, read_line, RawConn, TestServer};

/// INFO `section`'s text, read whole from a raw connection.
fn info(conn: &mut RawConn, section: &str) -> String {
    conn.send(&encode(&[b"INFO", section.as_bytes()]));
    let header = read_line(conn);
    let len: usize = header
        .strip_prefix('$')
        .and_then(|n| n.trim_end().parse().ok())
        .unwrap_or_else(|| panic!("expected INFO's bulk, got {header:?}"));
    let body = conn.read_n(len + 2);
    String::from_utf8_lossy(&body).into_owned()
}

fn field(text: &str, name: &str) -> Option<String> {
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{name}:")))
        .map(|value| value.trim_end().to_string())
}

#[test]
fn clients_are_served_while_the_data_set_loads() {
    let keys = 20_000;
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(
        &mut c,
        &format!("DEBUG POPULATE {keys} key 1000"),
        "+OK\r\n",
    );
    check(&mut c, "SAVE", "+OK\r\n");
    let dir = server.shutdown_keep_files("NOSAVE");
    std::fs::write(dir.join("stderr.log"), b"").unwrap();

    // At least 100 µs a key: two seconds of loading or more.
    let server = TestServer::start_loading(
        &dir,
        &[
            "--key-load-delay",
            "100",
            "--loading-process-events-interval-bytes",
            "1024",
            "--enable-protected-configs",
            "yes",
        ],
    );
    let mut c = server.raw();
    let started = Instant::now();
    let persistence = info(&mut c, "persistence");
    assert_eq!(field(&persistence, "loading").as_deref(), Some("1"));
    check(
        &mut c,
        "GET key:1",
        "-LOADING Redis is loading the dataset in memory\r\n",
    );
    check(
        &mut c,
        "PING",
        "-LOADING Redis is loading the dataset in memory\r\n",
    );
    // Options that cannot change while loading say LOADING; others change.
    check(
        &mut c,
        "CONFIG SET dir /tmp",
        "-LOADING Redis is loading the dataset in memory\r\n",
    );
    check(&mut c, "CONFIG SET loglevel verbose", "+OK\r\n");
    // INFO's key counts wait for the loader's next turn, not for the end of the load.
    let keyspace = info(&mut c, "keyspace");
    let partial: usize = field(&keyspace, "db0")
        .and_then(|line| line.split([',', '=']).nth(1).and_then(|n| n.parse().ok()))
        .unwrap_or(0);
    assert!(
        partial < keys,
        "the load was over before INFO: {keyspace:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "the commands a load lets run waited {:?}",
        started.elapsed()
    );
    let log = std::fs::read_to_string(dir.join("stderr.log")).unwrap();
    assert!(
        !log.contains("Ready to accept connections"),
        "ready before the load ended: {log}"
    );

    let deadline = Instant::now() + Duration::from_secs(120);
    while field(&info(&mut c, "persistence"), "loading").as_deref() != Some("0") {
        assert!(Instant::now() < deadline, "the load did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
    check(&mut c, "DBSIZE", &format!(":{keys}\r\n"));
    check(&mut c, "CONFIG SET dir .", "+OK\r\n");
    let log = std::fs::read_to_string(dir.join("stderr.log")).unwrap();
    let done = log
        .find("Done loading RDB")
        .expect("no end of load in the log");
    let ready = log
        .find("Ready to accept connections")
        .expect("no ready line in the log");
    assert!(done < ready, "ready before the load ended: {log}");
}

#[test]
fn an_rdb_keeps_keys_past_their_deadline_and_a_load_drops_them() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "DEBUG SET-ACTIVE-EXPIRE 0", "+OK\r\n");
    for n in 0..5 {
        check(&mut c, &format!("SET gone{n} x PX 10"), "+OK\r\n");
    }
    check(&mut c, "SET kept y", "+OK\r\n");
    std::thread::sleep(Duration::from_millis(50));
    check(&mut c, "SAVE", "+OK\r\n");
    let dir = server.shutdown_keep_files("NOSAVE");

    let server = TestServer::start_in(Some(&dir), &[]);
    let mut c = server.raw();
    let persistence = info(&mut c, "persistence");
    assert_eq!(
        field(&persistence, "rdb_last_load_keys_expired").as_deref(),
        Some("5"),
        "{persistence}"
    );
    assert_eq!(
        field(&persistence, "rdb_last_load_keys_loaded").as_deref(),
        Some("1")
    );
    check(&mut c, "DBSIZE", ":1\r\n");
    // The counts are the last load's, not a sum.
    check(&mut c, "DEBUG RELOAD", "+OK\r\n");
    let persistence = info(&mut c, "persistence");
    assert_eq!(
        field(&persistence, "rdb_last_load_keys_loaded").as_deref(),
        Some("1")
    );
    assert_eq!(
        field(&persistence, "rdb_last_load_keys_expired").as_deref(),
        Some("0")
    );
}
