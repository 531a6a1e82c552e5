//! Keyspace (generic) and database commands against the real binary.

mod common;

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use common::{RawConn, TestServer};

fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Sends a command and reads one integer reply (`:n\r\n`).
fn integer(raw: &mut RawConn, args: &[&[u8]]) -> i64 {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    raw.send(&out);
    let mut line = Vec::new();
    loop {
        let byte = raw.read_n(1);
        assert_eq!(byte.len(), 1, "connection closed");
        line.push(byte[0]);
        if line.ends_with(b"\r\n") {
            break;
        }
    }
    let text = String::from_utf8_lossy(&line).into_owned();
    assert!(
        text.starts_with(':'),
        "not an integer reply to {:?}: {text:?}",
        String::from_utf8_lossy(args[0])
    );
    text[1..text.len() - 2].parse().expect("integer")
}

#[test]
fn dbsize_flushdb_flushall_swapdb() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(&[b"DBSIZE"], b":0\r\n");
    raw.expect(&[b"SET", b"a", b"1"], b"+OK\r\n");
    raw.expect(&[b"SET", b"b", b"2"], b"+OK\r\n");
    raw.expect(&[b"DBSIZE"], b":2\r\n");
    raw.expect(
        &[b"DBSIZE", b"x"],
        b"-ERR wrong number of arguments for 'dbsize' command\r\n",
    );

    // SWAPDB: errors in Redis' order, then the swap itself.
    raw.expect(&[b"SWAPDB", b"x", b"1"], b"-ERR invalid first DB index\r\n");
    raw.expect(
        &[b"SWAPDB", b"0", b"y"],
        b"-ERR invalid second DB index\r\n",
    );
    raw.expect(
        &[b"SWAPDB", b"0", b"4294967296"],
        b"-ERR invalid second DB index\r\n",
    );
    raw.expect(
        &[b"SWAPDB", b"0", b"16"],
        b"-ERR DB index is out of range\r\n",
    );
    raw.expect(
        &[b"SWAPDB", b"-1", b"0"],
        b"-ERR DB index is out of range\r\n",
    );
    raw.expect(&[b"SWAPDB", b"0", b"0"], b"+OK\r\n");
    raw.expect(&[b"SWAPDB", b"0", b"1"], b"+OK\r\n");
    raw.expect(&[b"DBSIZE"], b":0\r\n");
    raw.expect(&[b"SELECT", b"1"], b"+OK\r\n");
    raw.expect(&[b"DBSIZE"], b":2\r\n");

    // FLUSHDB empties only the selected database.
    raw.expect(&[b"SELECT", b"0"], b"+OK\r\n");
    raw.expect(&[b"SET", b"c", b"3"], b"+OK\r\n");
    raw.expect(&[b"FLUSHDB"], b"+OK\r\n");
    raw.expect(&[b"DBSIZE"], b":0\r\n");
    raw.expect(&[b"SELECT", b"1"], b"+OK\r\n");
    raw.expect(&[b"DBSIZE"], b":2\r\n");
    raw.expect(&[b"FLUSHDB", b"bogus"], b"-ERR syntax error\r\n");
    raw.expect(&[b"FLUSHDB", b"SYNC", b"ASYNC"], b"-ERR syntax error\r\n");
    raw.expect(&[b"FLUSHDB", b"async"], b"+OK\r\n");
    raw.expect(&[b"DBSIZE"], b":0\r\n");

    // FLUSHALL empties every database.
    raw.expect(&[b"SET", b"x", b"1"], b"+OK\r\n");
    raw.expect(&[b"SELECT", b"7"], b"+OK\r\n");
    raw.expect(&[b"SET", b"y", b"1"], b"+OK\r\n");
    raw.expect(&[b"FLUSHALL", b"nope"], b"-ERR syntax error\r\n");
    raw.expect(&[b"DBSIZE"], b":1\r\n");
    raw.expect(&[b"FLUSHALL", b"SYNC"], b"+OK\r\n");
    raw.expect(&[b"DBSIZE"], b":0\r\n");
    raw.expect(&[b"SELECT", b"1"], b"+OK\r\n");
    raw.expect(&[b"DBSIZE"], b":0\r\n");
    raw.expect(&[b"FLUSHALL"], b"+OK\r\n");
}

#[test]
fn del_unlink_exists_type_touch() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(&[b"SET", b"a", b"1"], b"+OK\r\n");
    raw.expect(&[b"SET", b"b", b"2"], b"+OK\r\n");
    raw.expect(&[b"SET", b"c", b"3"], b"+OK\r\n");
    raw.expect(&[b"EXISTS", b"a", b"a", b"nope", b"b"], b":3\r\n");
    raw.expect(
        &[b"EXISTS"],
        b"-ERR wrong number of arguments for 'exists' command\r\n",
    );
    raw.expect(&[b"TYPE", b"a"], b"+string\r\n");
    raw.expect(&[b"TYPE", b"nope"], b"+none\r\n");
    raw.expect(&[b"TOUCH", b"a", b"b", b"nope"], b":2\r\n");
    raw.expect(&[b"DEL", b"a", b"nope", b"a"], b":1\r\n");
    raw.expect(
        &[b"DEL"],
        b"-ERR wrong number of arguments for 'del' command\r\n",
    );
    raw.expect(&[b"UNLINK", b"b", b"c", b"d"], b":2\r\n");
    raw.expect(&[b"EXISTS", b"a", b"b", b"c"], b":0\r\n");
    raw.expect(&[b"DBSIZE"], b":0\r\n");
}

#[test]
fn expire_option_errors() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(&[b"SET", b"k", b"v"], b"+OK\r\n");
    let incompatible = b"-ERR NX and XX, GT or LT options at the same time are not compatible\r\n";
    for command in [&b"EXPIRE"[..], b"PEXPIRE", b"EXPIREAT", b"PEXPIREAT"] {
        raw.expect(&[command, b"k", b"100", b"NX", b"XX"], incompatible);
        raw.expect(&[command, b"k", b"100", b"nx", b"gt"], incompatible);
        raw.expect(&[command, b"k", b"100", b"LT", b"NX"], incompatible);
        raw.expect(
            &[command, b"k", b"100", b"GT", b"LT"],
            b"-ERR GT and LT options at the same time are not compatible\r\n",
        );
        raw.expect(
            &[command, b"k", b"100", b"XX", b"bogus"],
            b"-ERR Unsupported option bogus\r\n",
        );
        // The options are checked before the number.
        raw.expect(
            &[command, b"k", b"x", b"bogus"],
            b"-ERR Unsupported option bogus\r\n",
        );
        raw.expect(
            &[command, b"k", b"x"],
            b"-ERR value is not an integer or out of range\r\n",
        );
        raw.expect(
            &[command, b"k", b""],
            b"-ERR value is not an integer or out of range\r\n",
        );
    }
    // Overflow, exactly where Redis refuses.
    raw.expect(
        &[b"EXPIRE", b"k", b"9223370399119966"],
        b"-ERR invalid expire time in 'expire' command\r\n",
    );
    raw.expect(
        &[b"EXPIRE", b"k", b"9223372036854776"],
        b"-ERR invalid expire time in 'expire' command\r\n",
    );
    raw.expect(
        &[b"EXPIRE", b"k", b"-9223372036854776"],
        b"-ERR invalid expire time in 'expire' command\r\n",
    );
    raw.expect(
        &[b"PEXPIRE", b"k", b"9223372036854770000"],
        b"-ERR invalid expire time in 'pexpire' command\r\n",
    );
    raw.expect(
        &[b"EXPIREAT", b"k", b"9223372036854776"],
        b"-ERR invalid expire time in 'expireat' command\r\n",
    );
    raw.expect(&[b"TTL", b"k"], b":-1\r\n");
    // Large absolute times are fine; hugely negative ones delete.
    raw.expect(&[b"PEXPIREAT", b"k", b"9223372036854770000"], b":1\r\n");
    raw.expect(&[b"PEXPIREAT", b"k", b"-9223372036854770000"], b":1\r\n");
    raw.expect(&[b"TTL", b"k"], b":-2\r\n");
    // A missing key: 0, whatever the options.
    raw.expect(&[b"EXPIRE", b"missing", b"100", b"NX"], b":0\r\n");
    raw.expect(&[b"EXPIRE", b"missing", b"-1"], b":0\r\n");
}

/// (options, key has a TTL of 100 s?, new TTL, expected reply, expected TTL afterwards)
type ExpireCase<'a> = (&'a [&'a [u8]], bool, &'a [u8], &'a [u8], i64);

#[test]
fn expire_nx_xx_gt_lt_matrix() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    let cases: &[ExpireCase] = &[
        (&[b"NX"], true, b"200", b":0\r\n", 100),
        (&[b"NX"], false, b"200", b":1\r\n", 200),
        (&[b"XX"], true, b"200", b":1\r\n", 200),
        (&[b"XX"], false, b"200", b":0\r\n", -1),
        (&[b"GT"], true, b"200", b":1\r\n", 200),
        (&[b"GT"], true, b"50", b":0\r\n", 100),
        (&[b"GT"], false, b"200", b":0\r\n", -1),
        (&[b"LT"], true, b"50", b":1\r\n", 50),
        (&[b"LT"], true, b"200", b":0\r\n", 100),
        (&[b"LT"], false, b"200", b":1\r\n", 200),
        (&[b"LT", b"XX"], true, b"50", b":1\r\n", 50),
        (&[b"LT", b"XX"], false, b"50", b":0\r\n", -1),
        (&[b"GT", b"XX"], true, b"200", b":1\r\n", 200),
        (&[b"XX", b"XX"], true, b"200", b":1\r\n", 200),
    ];
    for (options, has_ttl, seconds, reply, ttl_after) in cases {
        raw.expect(&[b"SET", b"k", b"v"], b"+OK\r\n");
        if *has_ttl {
            raw.expect(&[b"EXPIRE", b"k", b"100"], b":1\r\n");
        }
        let mut args: Vec<&[u8]> = vec![b"EXPIRE", b"k", seconds];
        args.extend_from_slice(options);
        raw.expect(&args, reply);
        assert_eq!(
            integer(&mut raw, &[b"TTL", b"k"]),
            *ttl_after,
            "after EXPIRE k {:?} {:?}",
            String::from_utf8_lossy(seconds),
            options
                .iter()
                .map(|o| String::from_utf8_lossy(o))
                .collect::<Vec<_>>()
        );
    }
    // LT on a key without TTL still deletes when the time is in the past.
    raw.expect(&[b"SET", b"k", b"v"], b"+OK\r\n");
    raw.expect(&[b"EXPIRE", b"k", b"-1", b"LT"], b":1\r\n");
    raw.expect(&[b"EXISTS", b"k"], b":0\r\n");
    // GT compares absolute and relative deadlines alike.
    raw.expect(&[b"SET", b"k", b"v"], b"+OK\r\n");
    raw.expect(&[b"EXPIRE", b"k", b"100"], b":1\r\n");
    let later_s = (unix_ms() / 1000 + 1000).to_string();
    let sooner_s = (unix_ms() / 1000 + 10).to_string();
    raw.expect(&[b"EXPIREAT", b"k", sooner_s.as_bytes(), b"GT"], b":0\r\n");
    raw.expect(&[b"EXPIREAT", b"k", later_s.as_bytes(), b"GT"], b":1\r\n");
    raw.expect(&[b"PEXPIRE", b"k", b"500000", b"LT"], b":1\r\n");
    let pttl = integer(&mut raw, &[b"PTTL", b"k"]);
    assert!((499_000..=500_000).contains(&pttl), "{pttl}");
}

#[test]
fn ttl_after_relative_and_absolute_expire() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(&[b"TTL", b"nope"], b":-2\r\n");
    raw.expect(&[b"PTTL", b"nope"], b":-2\r\n");
    raw.expect(&[b"EXPIRETIME", b"nope"], b":-2\r\n");
    raw.expect(&[b"PEXPIRETIME", b"nope"], b":-2\r\n");
    raw.expect(&[b"SET", b"k", b"v"], b"+OK\r\n");
    raw.expect(&[b"TTL", b"k"], b":-1\r\n");
    raw.expect(&[b"PTTL", b"k"], b":-1\r\n");
    raw.expect(&[b"EXPIRETIME", b"k"], b":-1\r\n");
    raw.expect(&[b"PEXPIRETIME", b"k"], b":-1\r\n");

    // Relative.
    let before_ms = unix_ms();
    raw.expect(&[b"EXPIRE", b"k", b"100"], b":1\r\n");
    let after_ms = unix_ms();
    assert_eq!(integer(&mut raw, &[b"TTL", b"k"]), 100);
    let pttl = integer(&mut raw, &[b"PTTL", b"k"]);
    assert!((99_000..=100_000).contains(&pttl), "{pttl}");
    let pexpiretime = integer(&mut raw, &[b"PEXPIRETIME", b"k"]);
    assert!(
        pexpiretime >= before_ms + 99_900 && pexpiretime <= after_ms + 100_100,
        "{pexpiretime}"
    );
    let expiretime = integer(&mut raw, &[b"EXPIRETIME", b"k"]);
    assert!(
        (expiretime - (pexpiretime + 500) / 1000).abs() <= 1,
        "{expiretime}"
    );

    raw.expect(&[b"PEXPIRE", b"k", b"1500"], b":1\r\n");
    let ttl = integer(&mut raw, &[b"TTL", b"k"]);
    assert!(
        ttl == 2 || ttl == 1,
        "TTL rounds to the nearest second: {ttl}"
    );

    // Absolute.
    let at_ms = unix_ms() + 50_000;
    let at_ms_text = at_ms.to_string();
    raw.expect(&[b"PEXPIREAT", b"k", at_ms_text.as_bytes()], b":1\r\n");
    assert_eq!(integer(&mut raw, &[b"PEXPIRETIME", b"k"]), at_ms);
    assert_eq!(
        integer(&mut raw, &[b"EXPIRETIME", b"k"]),
        (at_ms + 500) / 1000
    );
    let ttl = integer(&mut raw, &[b"TTL", b"k"]);
    assert!((49..=50).contains(&ttl), "{ttl}");
    let at_s = (unix_ms() / 1000 + 100).to_string();
    raw.expect(&[b"EXPIREAT", b"k", at_s.as_bytes()], b":1\r\n");
    assert_eq!(integer(&mut raw, &[b"EXPIRETIME", b"k"]).to_string(), at_s);
    assert_eq!(
        integer(&mut raw, &[b"PEXPIRETIME", b"k"]),
        at_s.parse::<i64>().unwrap() * 1000
    );

    // A time already past deletes the key and still answers 1.
    raw.expect(&[b"EXPIREAT", b"k", b"1"], b":1\r\n");
    raw.expect(&[b"EXISTS", b"k"], b":0\r\n");
    raw.expect(&[b"SET", b"k", b"v"], b"+OK\r\n");
    raw.expect(&[b"EXPIRE", b"k", b"0"], b":1\r\n");
    raw.expect(&[b"EXISTS", b"k"], b":0\r\n");
    raw.expect(&[b"SET", b"k", b"v"], b"+OK\r\n");
    raw.expect(&[b"PEXPIRE", b"k", b"-100"], b":1\r\n");
    raw.expect(&[b"DBSIZE"], b":0\r\n");

    // A short TTL runs out.
    raw.expect(&[b"SET", b"k", b"v"], b"+OK\r\n");
    raw.expect(&[b"PEXPIRE", b"k", b"20"], b":1\r\n");
    raw.expect(&[b"DEBUG", b"ADVANCE-CLOCK", b"21"], b"+OK\r\n");
    raw.expect(&[b"TTL", b"k"], b":-2\r\n");
    raw.expect(&[b"EXISTS", b"k"], b":0\r\n");
}

#[test]
fn persist() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(&[b"PERSIST", b"nope"], b":0\r\n");
    raw.expect(&[b"SET", b"k", b"v"], b"+OK\r\n");
    raw.expect(&[b"PERSIST", b"k"], b":0\r\n");
    raw.expect(&[b"EXPIRE", b"k", b"100"], b":1\r\n");
    raw.expect(&[b"PERSIST", b"k"], b":1\r\n");
    raw.expect(&[b"TTL", b"k"], b":-1\r\n");
    raw.expect(
        &[b"PERSIST", b"k", b"x"],
        b"-ERR wrong number of arguments for 'persist' command\r\n",
    );
}

#[test]
fn keys_with_patterns() {
    let server = TestServer::start(&[]);
    let mut conn = server.client();
    for key in ["foo_a", "foo_b", "foo_c", "key_x", "key_y", "key_z"] {
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg("v")
            .query(&mut conn)
            .unwrap();
    }
    let mut found: Vec<String> = redis::cmd("KEYS").arg("foo*").query(&mut conn).unwrap();
    found.sort();
    assert_eq!(found, ["foo_a", "foo_b", "foo_c"]);
    let mut all: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    all.sort();
    assert_eq!(all.len(), 6);
    let mut some: Vec<String> = redis::cmd("KEYS").arg("key_[xy]").query(&mut conn).unwrap();
    some.sort();
    assert_eq!(some, ["key_x", "key_y"]);
    let none: Vec<String> = redis::cmd("KEYS").arg("nothing*").query(&mut conn).unwrap();
    assert!(none.is_empty());
    let mut raw = server.raw();
    raw.expect(&[b"KEYS", b"foo_a"], b"*1\r\n$5\r\nfoo_a\r\n");
    raw.expect(
        &[b"KEYS"],
        b"-ERR wrong number of arguments for 'keys' command\r\n",
    );
}

#[test]
fn scan_errors_and_options() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(&[b"SCAN", b"0"], b"*2\r\n$1\r\n0\r\n*0\r\n");
    raw.expect(&[b"SCAN", b"x"], b"-ERR invalid cursor\r\n");
    raw.expect(&[b"SCAN", b" 1"], b"-ERR invalid cursor\r\n");
    raw.expect(
        &[b"SCAN", b"18446744073709551616"],
        b"-ERR invalid cursor\r\n",
    );
    raw.expect(&[b"SCAN", b"0", b"COUNT", b"0"], b"-ERR syntax error\r\n");
    raw.expect(&[b"SCAN", b"0", b"COUNT", b"-1"], b"-ERR syntax error\r\n");
    raw.expect(
        &[b"SCAN", b"0", b"COUNT", b"x"],
        b"-ERR value is not an integer or out of range\r\n",
    );
    raw.expect(&[b"SCAN", b"0", b"COUNT"], b"-ERR syntax error\r\n");
    raw.expect(&[b"SCAN", b"0", b"BOGUS", b"1"], b"-ERR syntax error\r\n");
    raw.expect(&[b"SCAN", b"x", b"BOGUS", b"1"], b"-ERR invalid cursor\r\n");
    raw.expect(&[b"SET", b"k", b"v"], b"+OK\r\n");
    raw.expect(
        &[b"SCAN", b"0", b"TYPE", b"list"],
        b"*2\r\n$1\r\n0\r\n*0\r\n",
    );
    raw.expect(
        &[
            b"SCAN", b"0", b"TYPE", b"STRING", b"MATCH", b"k", b"COUNT", b"100",
        ],
        b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\nk\r\n",
    );
    raw.expect(
        &[b"SCAN", b"0", b"MATCH", b"z*"],
        b"*2\r\n$1\r\n0\r\n*0\r\n",
    );
}

fn scan_all(conn: &mut redis::Connection, options: &[&str]) -> Vec<String> {
    let mut cursor = "0".to_string();
    let mut keys = Vec::new();
    for _ in 0..100_000 {
        let (next, batch): (String, Vec<String>) = redis::cmd("SCAN")
            .arg(&cursor)
            .arg(options)
            .query(conn)
            .unwrap();
        keys.extend(batch);
        if next == "0" {
            return keys;
        }
        cursor = next;
    }
    panic!("SCAN never finished");
}

#[test]
fn scan_visits_every_key() {
    let server = TestServer::start(&[]);
    let mut conn = server.client();
    let mut pipe = redis::pipe();
    for i in 0..5000 {
        pipe.cmd("SET").arg(format!("key:{i}")).arg("v").ignore();
    }
    let _: () = pipe.query(&mut conn).unwrap();
    for options in [
        &[][..],
        &["COUNT", "7"],
        &["COUNT", "1000"],
        &["TYPE", "string", "COUNT", "3"],
    ] {
        let mut keys = scan_all(&mut conn, options);
        keys.sort();
        let total = keys.len();
        keys.dedup();
        assert_eq!(total, keys.len(), "SCAN {options:?} returned duplicates");
        assert_eq!(keys.len(), 5000, "SCAN {options:?}");
    }
    let matched = scan_all(&mut conn, &["MATCH", "key:1??"]);
    assert_eq!(matched.len(), 100);
}

#[test]
fn scan_under_concurrent_inserts_sees_each_key_once() {
    let server = TestServer::start(&[]);
    let mut conn = server.client();
    let mut pipe = redis::pipe();
    for i in 0..3000 {
        pipe.cmd("SET").arg(format!("old:{i}")).arg("v").ignore();
    }
    let _: () = pipe.query(&mut conn).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let mut writer_conn = server.client();
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && i < 200_000 {
                let mut pipe = redis::pipe();
                for _ in 0..50 {
                    pipe.cmd("SET").arg(format!("new:{i}")).arg("v").ignore();
                    i += 1;
                }
                let _: () = pipe.query(&mut writer_conn).unwrap();
            }
        })
    };
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut cursor = "0".to_string();
    loop {
        let (next, batch): (String, Vec<String>) = redis::cmd("SCAN")
            .arg(&cursor)
            .arg("COUNT")
            .arg(20)
            .query(&mut conn)
            .unwrap();
        for key in batch {
            *seen.entry(key).or_default() += 1;
        }
        if next == "0" {
            break;
        }
        cursor = next;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    for i in 0..3000 {
        assert_eq!(seen.get(&format!("old:{i}")), Some(&1), "old:{i}");
    }
    assert!(seen.values().all(|&n| n == 1), "a key was returned twice");
}

#[test]
fn randomkey() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(&[b"RANDOMKEY"], b"$-1\r\n");
    raw.expect(&[b"SET", b"only", b"v"], b"+OK\r\n");
    raw.expect(&[b"RANDOMKEY"], b"$4\r\nonly\r\n");
    let mut conn = server.client();
    for i in 0..50 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg("v")
            .query(&mut conn)
            .unwrap();
    }
    let mut distinct = std::collections::HashSet::new();
    for _ in 0..200 {
        let key: String = redis::cmd("RANDOMKEY").query(&mut conn).unwrap();
        distinct.insert(key);
    }
    assert!(distinct.len() > 5, "RANDOMKEY is not random: {distinct:?}");
    // Keys past their deadline are never picked.
    raw.expect(&[b"FLUSHALL"], b"+OK\r\n");
    raw.expect(&[b"SET", b"gone", b"v"], b"+OK\r\n");
    raw.expect(&[b"PEXPIRE", b"gone", b"10"], b":1\r\n");
    raw.expect(&[b"DEBUG", b"ADVANCE-CLOCK", b"11"], b"+OK\r\n");
    raw.expect(&[b"RANDOMKEY"], b"$-1\r\n");
    // ... and every one it meets is expired (and logged as a DEL), as in Redis: with
    // only a few keys in a few shards, each RANDOMKEY empties the database.
    raw.expect(&[b"DEBUG", b"SET-ACTIVE-EXPIRE", b"0"], b"+OK\r\n");
    for round in 0..20 {
        for key in [&b"a"[..], b"b", b"c"] {
            raw.expect(&[b"SET", key, b"v", b"PX", b"5"], b"+OK\r\n");
        }
        raw.expect(&[b"DEBUG", b"ADVANCE-CLOCK", b"6"], b"+OK\r\n");
        raw.expect(&[b"RANDOMKEY"], b"$-1\r\n");
        assert_eq!(integer(&mut raw, &[b"DBSIZE"]), 0, "round {round}");
    }
}

#[test]
fn rename_and_renamenx() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(&[b"RENAME", b"nope", b"x"], b"-ERR no such key\r\n");
    raw.expect(&[b"RENAME", b"nope", b"nope"], b"-ERR no such key\r\n");
    raw.expect(&[b"RENAMENX", b"nope", b"x"], b"-ERR no such key\r\n");
    raw.expect(&[b"SET", b"a", b"1"], b"+OK\r\n");
    raw.expect(&[b"RENAME", b"a", b"a"], b"+OK\r\n");
    raw.expect(&[b"RENAMENX", b"a", b"a"], b":0\r\n");
    raw.expect(&[b"RENAME", b"a", b"b"], b"+OK\r\n");
    raw.expect(&[b"EXISTS", b"a"], b":0\r\n");
    raw.expect(&[b"GET", b"b"], b"$1\r\n1\r\n");
    // Overwrite, keeping the source's TTL and not the target's.
    raw.expect(&[b"SET", b"c", b"3"], b"+OK\r\n");
    raw.expect(&[b"EXPIRE", b"c", b"100"], b":1\r\n");
    raw.expect(&[b"EXPIRE", b"b", b"200"], b":1\r\n");
    raw.expect(&[b"RENAME", b"b", b"c"], b"+OK\r\n");
    raw.expect(&[b"GET", b"c"], b"$1\r\n1\r\n");
    raw.expect(&[b"TTL", b"c"], b":200\r\n");
    raw.expect(&[b"SET", b"d", b"4"], b"+OK\r\n");
    raw.expect(&[b"RENAME", b"d", b"c"], b"+OK\r\n");
    raw.expect(&[b"TTL", b"c"], b":-1\r\n");
    // RENAMENX.
    raw.expect(&[b"SET", b"e", b"5"], b"+OK\r\n");
    raw.expect(&[b"RENAMENX", b"e", b"c"], b":0\r\n");
    raw.expect(&[b"GET", b"c"], b"$1\r\n4\r\n");
    raw.expect(&[b"RENAMENX", b"e", b"f"], b":1\r\n");
    raw.expect(&[b"GET", b"f"], b"$1\r\n5\r\n");
    raw.expect(&[b"DBSIZE"], b":2\r\n");
}

#[test]
fn copy_command() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(&[b"COPY", b"nope", b"x"], b":0\r\n");
    raw.expect(&[b"SET", b"a", b"hello"], b"+OK\r\n");
    raw.expect(
        &[b"COPY", b"a", b"a"],
        b"-ERR source and destination objects are the same\r\n",
    );
    raw.expect(
        &[b"COPY", b"a", b"a", b"DB", b"0"],
        b"-ERR source and destination objects are the same\r\n",
    );
    raw.expect(
        &[b"COPY", b"a", b"b", b"DB", b"x"],
        b"-ERR value is not an integer or out of range\r\n",
    );
    raw.expect(
        &[b"COPY", b"a", b"b", b"DB", b"16"],
        b"-ERR DB index is out of range\r\n",
    );
    raw.expect(&[b"COPY", b"a", b"b", b"DB"], b"-ERR syntax error\r\n");
    raw.expect(&[b"COPY", b"a", b"b", b"BOGUS"], b"-ERR syntax error\r\n");
    raw.expect(&[b"COPY", b"a", b"b"], b":1\r\n");
    raw.expect(&[b"GET", b"b"], b"$5\r\nhello\r\n");
    raw.expect(&[b"TTL", b"b"], b":-1\r\n");
    raw.expect(&[b"SET", b"a", b"world"], b"+OK\r\n");
    raw.expect(&[b"COPY", b"a", b"b"], b":0\r\n");
    raw.expect(&[b"GET", b"b"], b"$5\r\nhello\r\n");
    raw.expect(&[b"EXPIRE", b"a", b"100"], b":1\r\n");
    raw.expect(&[b"COPY", b"a", b"b", b"replace"], b":1\r\n");
    raw.expect(&[b"GET", b"b"], b"$5\r\nworld\r\n");
    raw.expect(&[b"TTL", b"b"], b":100\r\n");
    // Into another database, same name.
    raw.expect(&[b"COPY", b"a", b"a", b"DB", b"3"], b":1\r\n");
    raw.expect(&[b"COPY", b"a", b"a", b"DB", b"3"], b":0\r\n");
    raw.expect(&[b"SELECT", b"3"], b"+OK\r\n");
    raw.expect(&[b"GET", b"a"], b"$5\r\nworld\r\n");
    raw.expect(&[b"TTL", b"a"], b":100\r\n");
}

#[test]
fn move_command() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(&[b"MOVE", b"nope", b"1"], b":0\r\n");
    raw.expect(&[b"SET", b"a", b"1"], b"+OK\r\n");
    raw.expect(
        &[b"MOVE", b"a", b"0"],
        b"-ERR source and destination objects are the same\r\n",
    );
    raw.expect(
        &[b"MOVE", b"a", b"x"],
        b"-ERR value is not an integer or out of range\r\n",
    );
    raw.expect(
        &[b"MOVE", b"a", b"16"],
        b"-ERR DB index is out of range\r\n",
    );
    raw.expect(
        &[b"MOVE", b"a", b"-1"],
        b"-ERR DB index is out of range\r\n",
    );
    raw.expect(
        &[b"MOVE", b"a", b"4294967296"],
        b"-ERR value is out of range, value must between -2147483648 and 2147483647\r\n",
    );
    raw.expect(&[b"EXPIRE", b"a", b"100"], b":1\r\n");
    raw.expect(&[b"MOVE", b"a", b"1"], b":1\r\n");
    raw.expect(&[b"EXISTS", b"a"], b":0\r\n");
    raw.expect(&[b"SET", b"a", b"2"], b"+OK\r\n");
    raw.expect(&[b"SELECT", b"1"], b"+OK\r\n");
    raw.expect(&[b"GET", b"a"], b"$1\r\n1\r\n");
    raw.expect(&[b"TTL", b"a"], b":100\r\n");
    raw.expect(&[b"MOVE", b"a", b"0"], b":0\r\n");
    raw.expect(&[b"GET", b"a"], b"$1\r\n1\r\n");
}

#[test]
fn object_subcommands() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(&[b"SET", b"int", b"12345"], b"+OK\r\n");
    raw.expect(&[b"SET", b"small", b"hello"], b"+OK\r\n");
    let long = vec![b'x'; 100];
    raw.expect(&[b"SET", b"big", &long], b"+OK\r\n");
    raw.expect(&[b"OBJECT", b"ENCODING", b"int"], b"$3\r\nint\r\n");
    raw.expect(&[b"OBJECT", b"encoding", b"small"], b"$6\r\nembstr\r\n");
    raw.expect(&[b"OBJECT", b"ENCODING", b"big"], b"$3\r\nraw\r\n");
    raw.expect(&[b"OBJECT", b"ENCODING", b"nope"], b"$-1\r\n");
    raw.expect(&[b"OBJECT", b"REFCOUNT", b"small"], b":1\r\n");
    raw.expect(&[b"SET", b"shared", b"100"], b"+OK\r\n");
    raw.expect(&[b"OBJECT", b"REFCOUNT", b"shared"], b":2147483647\r\n");
    raw.expect(&[b"OBJECT", b"REFCOUNT", b"nope"], b"$-1\r\n");
    raw.expect(&[b"OBJECT", b"IDLETIME", b"small"], b":0\r\n");
    raw.expect(&[b"OBJECT", b"IDLETIME", b"nope"], b"$-1\r\n");
    raw.expect(
        &[b"OBJECT", b"FREQ", b"small"],
        b"-ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.\r\n",
    );
    raw.expect(
        &[b"OBJECT", b"ENCODING"],
        b"-ERR wrong number of arguments for 'object|encoding' command\r\n",
    );
    raw.expect(
        &[b"OBJECT"],
        b"-ERR wrong number of arguments for 'object' command\r\n",
    );
    raw.expect(
        &[b"OBJECT", b"bogus", b"k"],
        b"-ERR unknown subcommand 'bogus'. Try OBJECT HELP.\r\n",
    );
    let mut conn = server.client();
    let help: Vec<String> = redis::cmd("OBJECT").arg("HELP").query(&mut conn).unwrap();
    assert_eq!(help.len(), 11);
    assert_eq!(
        help[0],
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    );
    assert_eq!(help[9], "HELP");
}

#[test]
fn object_idletime_is_not_reset_by_object() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(&[b"SET", b"k", b"v"], b"+OK\r\n");
    raw.expect(&[b"DEBUG", b"ADVANCE-CLOCK", b"2100"], b"+OK\r\n");
    let idle = integer(&mut raw, &[b"OBJECT", b"IDLETIME", b"k"]);
    assert!(idle >= 1, "{idle}");
    raw.expect(&[b"OBJECT", b"ENCODING", b"k"], b"$6\r\nembstr\r\n");
    raw.expect(&[b"TYPE", b"k"], b"+string\r\n");
    raw.expect(&[b"TTL", b"k"], b":-1\r\n");
    raw.expect(&[b"EXISTS", b"k"], b":1\r\n");
    assert!(integer(&mut raw, &[b"OBJECT", b"IDLETIME", b"k"]) >= idle);
    raw.expect(&[b"TOUCH", b"k"], b":1\r\n");
    raw.expect(&[b"OBJECT", b"IDLETIME", b"k"], b":0\r\n");
}

#[test]
fn resp3_nulls() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.send(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n");
    // Skip the HELLO map: read until the connection has been quiet.
    raw.stream
        .set_read_timeout(Some(std::time::Duration::from_millis(300)))
        .unwrap();
    let _ = raw.read_n(4096);
    raw.stream
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    raw.expect(&[b"RANDOMKEY"], b"_\r\n");
    raw.expect(&[b"OBJECT", b"ENCODING", b"nope"], b"_\r\n");
    raw.expect(&[b"SCAN", b"0"], b"*2\r\n$1\r\n0\r\n*0\r\n");
}

/// RESTORE ... IDLETIME sets the idle time OBJECT IDLETIME reports, also longer than the
/// server has been up (Redis' unit/dump "RESTORE can set LRU").
#[test]
fn restore_idletime_is_reported_by_object_idletime() {
    let server = TestServer::start(&[]);
    let mut conn = server.client();
    let _: () = redis::cmd("SET")
        .arg("foo")
        .arg("bar")
        .query(&mut conn)
        .unwrap();
    let payload: Vec<u8> = redis::cmd("DUMP").arg("foo").query(&mut conn).unwrap();
    let _: () = redis::cmd("DEL").arg("foo").query(&mut conn).unwrap();
    let _: () = redis::cmd("RESTORE")
        .arg("foo")
        .arg(0)
        .arg(payload)
        .arg("IDLETIME")
        .arg(100_000)
        .query(&mut conn)
        .unwrap();
    let idle: i64 = redis::cmd("OBJECT")
        .arg("IDLETIME")
        .arg("foo")
        .query(&mut conn)
        .unwrap();
    assert!((100_000..100_010).contains(&idle), "{idle}");
    let _: String = redis::cmd("GET").arg("foo").query(&mut conn).unwrap();
    let idle: i64 = redis::cmd("OBJECT")
        .arg("IDLETIME")
        .arg("foo")
        .query(&mut conn)
        .unwrap();
    assert!(idle < 10, "a read did not refresh the access time: {idle}");
}
