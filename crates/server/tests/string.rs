//! The string commands against the real binary: replies byte for byte, RESP2 and RESP3.

mod common;

use std::io::Read;

use common::replies::{NIL, NOT_FLOAT, NOT_INTEGER, NULL3, SYNTAX};
use common::{bulk, check, resp3, RawConn, TestServer};

fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn seed_example_setnx() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    conn_expect_args(&mut c, &[b"SETNX", b"mykey", b"Hello"], ":1\r\n");
    conn_expect_args(&mut c, &[b"SETNX", b"mykey", b"World"], ":0\r\n");
    conn_expect_args(&mut c, &[b"GET", b"mykey"], "$5\r\nHello\r\n");
    check(
        &mut c,
        "SETNX mykey",
        "-ERR wrong number of arguments for 'setnx' command\r\n",
    );
}

fn conn_expect_args(conn: &mut RawConn, args: &[&[u8]], expected: &str) {
    conn.expect(args, expected.as_bytes());
}

#[test]
fn legacy_lock_with_setnx_and_getset() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    let first = (wall_ms() + 10_000).to_string();
    let second = (wall_ms() + 20_000).to_string();
    check(&mut c, &format!("SETNX lock.foo {first}"), ":1\r\n");
    // Another client finds the lock held and reads its timestamp...
    let mut other = server.raw();
    check(&mut other, &format!("SETNX lock.foo {second}"), ":0\r\n");
    check(&mut other, "GET lock.foo", &bulk(&first));
    // ...and, deeming it expired, takes it over: GETSET hands back the old timestamp.
    check(
        &mut other,
        &format!("GETSET lock.foo {second}"),
        &bulk(&first),
    );
    check(&mut c, "GET lock.foo", &bulk(&second));
}

#[test]
fn set_and_get_basics() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "GET k", NIL);
    check(&mut c, "SET k v", "+OK\r\n");
    check(&mut c, "GET k", &bulk("v"));
    conn_expect_args(&mut c, &[b"SET", b"empty", b""], "+OK\r\n");
    check(&mut c, "GET empty", "$0\r\n\r\n");
    conn_expect_args(&mut c, &[b"SET", b"bin", b"a\r\n\0b"], "+OK\r\n");
    conn_expect_args(&mut c, &[b"GET", b"bin"], "$5\r\na\r\n\0b\r\n");
    check(
        &mut c,
        "GET",
        "-ERR wrong number of arguments for 'get' command\r\n",
    );
    check(
        &mut c,
        "SET k",
        "-ERR wrong number of arguments for 'set' command\r\n",
    );
}

#[test]
fn set_conditions_and_get_option() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "SET k 1 NX", "+OK\r\n");
    check(&mut c, "SET k 2 NX", NIL);
    check(&mut c, "GET k", &bulk("1"));
    check(&mut c, "SET k 3 XX", "+OK\r\n");
    check(&mut c, "SET missing 3 XX", NIL);
    check(&mut c, "GET missing", NIL);
    // GET answers the old value whether or not the write happens.
    check(&mut c, "SET k 4 GET", &bulk("3"));
    check(&mut c, "SET k 5 NX GET", &bulk("4"));
    check(&mut c, "GET k", &bulk("4"));
    check(&mut c, "SET fresh 1 NX GET", NIL);
    check(&mut c, "GET fresh", &bulk("1"));
    check(&mut c, "SET nothere 1 XX GET", NIL);
    check(&mut c, "GET nothere", NIL);
    check(&mut c, "SET k 6 GET GET", &bulk("4"));
    // Options are case-insensitive.
    check(&mut c, "set k 7 xx get", &bulk("6"));
}

#[test]
fn set_option_syntax_errors() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    for bad in [
        "SET k v NX XX",
        "SET k v XX NX",
        "SET k v EX",
        "SET k v EX 10 PX 10",
        "SET k v PX 10 EXAT 10",
        "SET k v EXAT 10 PXAT 10",
        "SET k v KEEPTTL EX 10",
        "SET k v EX 10 KEEPTTL",
        "SET k v PERSIST",
        "SET k v bogus",
        "SET k v NXX",
    ] {
        check(&mut c, bad, SYNTAX);
    }
    check(&mut c, "GET k", NIL);
    // Repeating the same option is fine; the last value wins.
    check(&mut c, "SET k v EX 10 EX 20", "+OK\r\n");
    check(&mut c, "SET k v NX NX", NIL);
}

#[test]
fn set_expire_errors() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    let invalid = "-ERR invalid expire time in 'set' command\r\n";
    check(&mut c, "SET k v EX abc", NOT_INTEGER);
    check(&mut c, "SET k v EX 1.5", NOT_INTEGER);
    check(&mut c, "SET k v EX 0", invalid);
    check(&mut c, "SET k v PX -1", invalid);
    check(&mut c, "SET k v EX 10000000000000000", invalid);
    check(&mut c, "SET k v EX -9999999999999999", invalid);
    check(&mut c, "SET k v PX 9223372036854775807", invalid);
    check(&mut c, "SET k v EXAT 9223372036854776", invalid);
    check(&mut c, "SET k v EXAT 0", invalid);
    check(&mut c, "GET k", NIL);
    check(
        &mut c,
        "SETEX k 0 v",
        "-ERR invalid expire time in 'setex' command\r\n",
    );
    check(
        &mut c,
        "SETEX k -10 v",
        "-ERR invalid expire time in 'setex' command\r\n",
    );
    check(&mut c, "SETEX k x v", NOT_INTEGER);
    check(
        &mut c,
        "PSETEX k 0 v",
        "-ERR invalid expire time in 'psetex' command\r\n",
    );
    check(&mut c, "PSETEX k x v", NOT_INTEGER);
    check(
        &mut c,
        "SETEX k 10",
        "-ERR wrong number of arguments for 'setex' command\r\n",
    );
}

/// PTTL of `key`, or `None` while PTTL is not available in this build.
fn pttl(c: &mut RawConn, key: &str) -> Option<i64> {
    let mut out = format!("*2\r\n$4\r\nPTTL\r\n${}\r\n{key}\r\n", key.len()).into_bytes();
    c.send(&out);
    out.clear();
    let mut byte = [0u8; 1];
    while !out.ends_with(b"\r\n") {
        match c.stream.read(&mut byte) {
            Ok(1) => out.push(byte[0]),
            _ => panic!("no reply to PTTL"),
        }
    }
    let line = String::from_utf8_lossy(&out[..out.len() - 2]).into_owned();
    line.strip_prefix(':')
        .map(|n| n.parse().expect("PTTL integer"))
}

#[test]
fn expiring_sets() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "SET a v EX 100", "+OK\r\n");
    check(&mut c, "SETEX b 100 v", "+OK\r\n");
    check(&mut c, "PSETEX c 100000 v", "+OK\r\n");
    check(
        &mut c,
        &format!("SET d v EXAT {}", wall_ms() / 1000 + 100),
        "+OK\r\n",
    );
    check(
        &mut c,
        &format!("SET e v PXAT {}", wall_ms() + 100_000),
        "+OK\r\n",
    );
    for key in ["a", "b", "c", "d", "e"] {
        check(&mut c, &format!("GET {key}"), &bulk("v"));
        if let Some(ttl) = pttl(&mut c, key) {
            assert!((90_000..=100_000).contains(&ttl), "{key}: {ttl}");
        }
    }
    // KEEPTTL keeps it; a plain SET, GETSET and MSET clear it.
    check(&mut c, "SET a w KEEPTTL", "+OK\r\n");
    check(&mut c, "GET a", &bulk("w"));
    if let Some(ttl) = pttl(&mut c, "a") {
        assert!(ttl > 90_000);
    }
    check(&mut c, "SET a x", "+OK\r\n");
    check(&mut c, "GETSET b y", &bulk("v"));
    check(&mut c, "MSET c z", "+OK\r\n");
    for key in ["a", "b", "c"] {
        if let Some(ttl) = pttl(&mut c, key) {
            assert_eq!(ttl, -1, "{key}");
        }
    }
    // An absolute time in the past: the key is gone at once.
    check(&mut c, "SET past v EXAT 1", "+OK\r\n");
    check(&mut c, "GET past", NIL);
    check(
        &mut c,
        &format!("SET past v PXAT {}", wall_ms() - 1000),
        "+OK\r\n",
    );
    check(&mut c, "GET past", NIL);
    // A short relative TTL runs out.
    check(&mut c, "SET short v PX 30", "+OK\r\n");
    check(&mut c, "DEBUG ADVANCE-CLOCK 31", "+OK\r\n");
    check(&mut c, "GET short", NIL);
    check(&mut c, "SETNX short again", ":1\r\n");
}

#[test]
fn getex_options() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "GETEX missing", NIL);
    check(&mut c, "GETEX missing EX abc", NIL);
    check(&mut c, "GETEX missing bogus", SYNTAX);
    check(&mut c, "SET k v", "+OK\r\n");
    check(&mut c, "GETEX k", &bulk("v"));
    check(&mut c, "GETEX k EX 100", &bulk("v"));
    if let Some(ttl) = pttl(&mut c, "k") {
        assert!((90_000..=100_000).contains(&ttl));
    }
    check(&mut c, "GETEX k PERSIST", &bulk("v"));
    if let Some(ttl) = pttl(&mut c, "k") {
        assert_eq!(ttl, -1);
    }
    check(&mut c, "GETEX k PX 100000", &bulk("v"));
    check(
        &mut c,
        &format!("GETEX k EXAT {}", wall_ms() / 1000 + 100),
        &bulk("v"),
    );
    check(
        &mut c,
        &format!("GETEX k PXAT {}", wall_ms() + 100_000),
        &bulk("v"),
    );
    for bad in [
        "GETEX k PERSIST EX 10",
        "GETEX k EX 10 PERSIST",
        "GETEX k KEEPTTL",
        "GETEX k NX",
        "GETEX k GET",
        "GETEX k EX",
    ] {
        check(&mut c, bad, SYNTAX);
    }
    let invalid = "-ERR invalid expire time in 'getex' command\r\n";
    check(&mut c, "GETEX k EX 0", invalid);
    check(&mut c, "GETEX k EX 10000000000000000", invalid);
    check(&mut c, "GETEX k EX -9999999999999999", invalid);
    check(&mut c, "GETEX k EX x", NOT_INTEGER);
    check(
        &mut c,
        "GETEX",
        "-ERR wrong number of arguments for 'getex' command\r\n",
    );
    // A past absolute time answers the value and deletes the key.
    check(&mut c, "GETEX k EXAT 1", &bulk("v"));
    check(&mut c, "GET k", NIL);
}

#[test]
fn getdel_getset_mget() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "SET k v", "+OK\r\n");
    check(&mut c, "GETDEL k", &bulk("v"));
    check(&mut c, "GETDEL k", NIL);
    check(&mut c, "GET k", NIL);
    check(&mut c, "GETSET k a", NIL);
    check(&mut c, "GETSET k b", &bulk("a"));
    check(&mut c, "GET k", &bulk("b"));
    check(
        &mut c,
        "MGET k missing k",
        &format!("*3\r\n{}{NIL}{}", bulk("b"), bulk("b")),
    );
    check(
        &mut c,
        "MGET",
        "-ERR wrong number of arguments for 'mget' command\r\n",
    );
}

#[test]
fn mset_and_msetnx() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "MSET a 1 b 2", "+OK\r\n");
    check(
        &mut c,
        "MGET a b",
        &format!("*2\r\n{}{}", bulk("1"), bulk("2")),
    );
    check(
        &mut c,
        "MSET a 1 b",
        "-ERR wrong number of arguments for 'mset' command\r\n",
    );
    check(
        &mut c,
        "MSETNX a 1 b",
        "-ERR wrong number of arguments for 'msetnx' command\r\n",
    );
    check(&mut c, "MSETNX a 9 c 3", ":0\r\n");
    check(&mut c, "MGET a c", &format!("*2\r\n{}{NIL}", bulk("1")));
    check(&mut c, "MSETNX x 1 y 2 x 3", ":1\r\n");
    check(
        &mut c,
        "MGET x y",
        &format!("*2\r\n{}{}", bulk("3"), bulk("2")),
    );
    check(&mut c, "MSETNX x 1 x 2", ":0\r\n");
}

#[test]
fn integer_counters() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "INCR n", ":1\r\n");
    check(&mut c, "INCRBY n 10", ":11\r\n");
    check(&mut c, "DECR n", ":10\r\n");
    check(&mut c, "DECRBY n 15", ":-5\r\n");
    check(&mut c, "GET n", &bulk("-5"));
    check(&mut c, "DECR fresh", ":-1\r\n");
    check(&mut c, "INCRBY n x", NOT_INTEGER);
    check(&mut c, "INCRBY n 1.5", NOT_INTEGER);
    check(
        &mut c,
        "DECRBY n -9223372036854775808",
        "-ERR decrement would overflow\r\n",
    );
    check(&mut c, "SET n 9223372036854775807", "+OK\r\n");
    check(
        &mut c,
        "INCR n",
        "-ERR increment or decrement would overflow\r\n",
    );
    check(&mut c, "SET n -9223372036854775808", "+OK\r\n");
    check(
        &mut c,
        "DECR n",
        "-ERR increment or decrement would overflow\r\n",
    );
    check(&mut c, "GET n", &bulk("-9223372036854775808"));
    for bad in ["01", "1.0", "abc", "12345678901234567890", "-0"] {
        check(&mut c, &format!("SET n {bad}"), "+OK\r\n");
        check(&mut c, "INCR n", NOT_INTEGER);
    }
    conn_expect_args(&mut c, &[b"SET", b"n", b" 1"], "+OK\r\n");
    check(&mut c, "INCR n", NOT_INTEGER);
    // The TTL survives an increment.
    check(&mut c, "SET t 1 EX 100", "+OK\r\n");
    check(&mut c, "INCR t", ":2\r\n");
    if let Some(ttl) = pttl(&mut c, "t") {
        assert!(ttl > 90_000);
    }
    check(
        &mut c,
        "INCR",
        "-ERR wrong number of arguments for 'incr' command\r\n",
    );
}

#[test]
fn float_counter() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "INCRBYFLOAT f 1", &bulk("1"));
    check(&mut c, "INCRBYFLOAT f 0.25", &bulk("1.25"));
    check(&mut c, "SET f 10.5", "+OK\r\n");
    check(&mut c, "INCRBYFLOAT f 0.1", &bulk("10.6"));
    check(&mut c, "SET f 5.0e3", "+OK\r\n");
    check(&mut c, "INCRBYFLOAT f 2.0e2", &bulk("5200"));
    check(&mut c, "INCRBYFLOAT g 3.0e3", &bulk("3000"));
    check(&mut c, "INCRBYFLOAT g -3.0e3", &bulk("0"));
    check(&mut c, "SET f 17179869184", "+OK\r\n");
    check(&mut c, "INCRBYFLOAT f 1.5", &bulk("17179869185.5"));
    check(&mut c, "SET f 1", "+OK\r\n");
    check(&mut c, "INCRBYFLOAT f -1.1", &bulk("-0.1"));
    // Sums are long double sums printed with 17 decimals, noise included, as Redis does.
    check(&mut c, "SET f 0.1", "+OK\r\n");
    check(&mut c, "INCRBYFLOAT f 0.2", &bulk("0.3"));
    check(&mut c, "SET f 1000.1", "+OK\r\n");
    check(&mut c, "INCRBYFLOAT f 0.1", &bulk("1000.19999999999999996"));
    check(&mut c, "SET f 0x1.8p3", "+OK\r\n");
    check(&mut c, "INCRBYFLOAT f 0x10", &bulk("28"));
    check(&mut c, "SET f 1.1e4932", "+OK\r\n");
    check(
        &mut c,
        "INCRBYFLOAT f 1.1e4932",
        "-ERR increment would produce NaN or Infinity\r\n",
    );
    check(&mut c, "INCRBYFLOAT f 1e4933", NOT_FLOAT);
    check(&mut c, "INCRBYFLOAT f 1e-4952", NOT_FLOAT);
    check(
        &mut c,
        "INCRBYFLOAT f +inf",
        "-ERR increment would produce NaN or Infinity\r\n",
    );
    check(&mut c, "INCRBYFLOAT f abc", NOT_FLOAT);
    check(&mut c, "INCRBYFLOAT f nan", NOT_FLOAT);
    check(&mut c, "SET f abc", "+OK\r\n");
    check(&mut c, "INCRBYFLOAT f 1", NOT_FLOAT);
    conn_expect_args(&mut c, &[b"SET", b"f", b" 11"], "+OK\r\n");
    check(&mut c, "INCRBYFLOAT f 1", NOT_FLOAT);
    conn_expect_args(&mut c, &[b"SET", b"f", b"1\x002"], "+OK\r\n");
    check(&mut c, "INCRBYFLOAT f 1", NOT_FLOAT);
    // Never "-0".
    check(&mut c, "DEL z", ":0\r\n");
    check(
        &mut c,
        "INCRBYFLOAT z 0.024390243902439025",
        &bulk("0.02439024390243902"),
    );
    check(&mut c, "INCRBYFLOAT z -0.024390243902439025", &bulk("0"));
}

#[test]
fn append_strlen_and_ranges() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "APPEND k Hello", ":5\r\n");
    conn_expect_args(&mut c, &[b"APPEND", b"k", b" World"], ":11\r\n");
    check(&mut c, "GET k", &bulk("Hello World"));
    conn_expect_args(&mut c, &[b"APPEND", b"k", b""], ":11\r\n");
    check(&mut c, "STRLEN k", ":11\r\n");
    check(&mut c, "STRLEN missing", ":0\r\n");
    check(&mut c, "GETRANGE k 0 3", &bulk("Hell"));
    check(&mut c, "GETRANGE k 0 -1", &bulk("Hello World"));
    check(&mut c, "GETRANGE k -4 -1", &bulk("orld"));
    check(&mut c, "GETRANGE k 5 3", "$0\r\n\r\n");
    check(&mut c, "GETRANGE k -1 -5", "$0\r\n\r\n");
    check(&mut c, "GETRANGE k -5000 10000", &bulk("Hello World"));
    check(&mut c, "GETRANGE k 0 4294967297", &bulk("Hello World"));
    check(&mut c, "GETRANGE missing 0 -1", "$0\r\n\r\n");
    check(&mut c, "GETRANGE missing x 1", NOT_INTEGER);
    check(&mut c, "GETRANGE k 0 y", NOT_INTEGER);
    check(&mut c, "SUBSTR k 6 -1", &bulk("World"));
    check(&mut c, "SET n 1234", "+OK\r\n");
    check(&mut c, "GETRANGE n -3 -1", &bulk("234"));
}

#[test]
fn setrange() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "SETRANGE k 5 hi", ":7\r\n");
    check(&mut c, "GET k", "$7\r\n\0\0\0\0\0hi\r\n");
    check(&mut c, "SETRANGE k 0 HELLO", ":7\r\n");
    check(&mut c, "GET k", &bulk("HELLOhi"));
    conn_expect_args(&mut c, &[b"SETRANGE", b"k", b"100", b""], ":7\r\n");
    conn_expect_args(&mut c, &[b"SETRANGE", b"none", b"10", b""], ":0\r\n");
    check(&mut c, "GET none", NIL);
    check(&mut c, "SETRANGE k -1 x", "-ERR offset is out of range\r\n");
    check(&mut c, "SETRANGE k x x", NOT_INTEGER);
    let too_big = "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n";
    check(&mut c, "SETRANGE k 536870908 world", too_big);
    check(&mut c, "SETRANGE none 536870908 world", too_big);
    check(&mut c, "SETRANGE none 9223372036854775807 A", too_big);
    check(&mut c, "SET n 1234", "+OK\r\n");
    check(&mut c, "SETRANGE n 1 X", ":4\r\n");
    check(&mut c, "GET n", &bulk("1X34"));
}

#[test]
fn lcs() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "LCS a b", "$0\r\n\r\n");
    check(&mut c, "MSET a ohmytext b mynewtext", "+OK\r\n");
    check(&mut c, "LCS a b", &bulk("mytext"));
    check(&mut c, "LCS a b LEN", ":6\r\n");
    check(
        &mut c,
        "LCS a b IDX",
        "*4\r\n$7\r\nmatches\r\n*2\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n*2\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n$3\r\nlen\r\n:6\r\n",
    );
    check(
        &mut c,
        "LCS a b IDX MINMATCHLEN 4 WITHMATCHLEN",
        "*4\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n$3\r\nlen\r\n:6\r\n",
    );
    check(
        &mut c,
        "LCS a b IDX LEN",
        "-ERR If you want both the length and indexes, please just use IDX.\r\n",
    );
    check(&mut c, "LCS a b MINMATCHLEN", SYNTAX);
    check(&mut c, "LCS a b MINMATCHLEN x", NOT_INTEGER);
    check(&mut c, "LCS a b bogus", SYNTAX);
    check(
        &mut c,
        "LCS a",
        "-ERR wrong number of arguments for 'lcs' command\r\n",
    );
    let mut c3 = resp3(&server);
    check(
        &mut c3,
        "LCS a b IDX MINMATCHLEN 4",
        "%2\r\n$7\r\nmatches\r\n*1\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n$3\r\nlen\r\n:6\r\n",
    );
}

#[test]
fn resp3_nulls() {
    let server = TestServer::start(&[]);
    let mut c = resp3(&server);
    check(&mut c, "GET missing", NULL3);
    check(&mut c, "SET k v NX", "+OK\r\n");
    check(&mut c, "SET k v NX", NULL3);
    check(&mut c, "SET missing v XX GET", NULL3);
    check(&mut c, "GETDEL missing", NULL3);
    check(&mut c, "GETEX missing", NULL3);
    check(&mut c, "GETSET fresh v", NULL3);
    check(
        &mut c,
        "MGET k missing",
        &format!("*2\r\n{}{NULL3}", bulk("v")),
    );
    check(&mut c, "SETNX k v", ":0\r\n");
    check(&mut c, "INCRBYFLOAT f 1.5", &bulk("1.5"));
}

#[test]
fn specs_match_redis() {
    use latch_server::spec::{acl, docflag, flag, keyflag, ArgType, BeginSearch, FindKeys};
    let table = latch_server::table::table();
    let setnx = table.lookup(b"setnx").expect("setnx").spec;
    assert_eq!(setnx.arity, 3);
    assert_eq!(setnx.flags, flag::WRITE | flag::DENYOOM | flag::FAST);
    assert_eq!(setnx.acl_categories(), acl::WRITE | acl::STRING | acl::FAST);
    assert_eq!(setnx.key_specs.len(), 1);
    let spec = setnx.key_specs[0];
    assert_eq!(spec.flags, keyflag::OW | keyflag::INSERT);
    assert!(matches!(spec.begin, BeginSearch::Index(1)));
    assert!(matches!(
        spec.find,
        FindKeys::Range {
            last_key: 0,
            key_step: 1,
            limit: 0
        }
    ));
    assert_eq!(setnx.since, "1.0.0");
    assert_eq!(setnx.group.name(), "string");
    assert_eq!(setnx.complexity, "O(1)");
    assert_eq!(setnx.deprecated_since, Some("2.6.12"));
    assert_eq!(setnx.doc_flags, docflag::DEPRECATED);
    assert_eq!(setnx.replaced_by, Some("`SET` with the `NX` argument"));
    assert_eq!(setnx.arguments.len(), 2);
    assert_eq!(
        (
            setnx.arguments[0].name,
            setnx.arguments[0].kind,
            setnx.arguments[0].key_spec_index
        ),
        ("key", ArgType::Key, Some(0))
    );
    assert_eq!(
        (setnx.arguments[1].name, setnx.arguments[1].kind),
        ("value", ArgType::String)
    );

    let deprecated = [
        ("getset", "6.2.0", "`SET` with the `!GET` argument"),
        ("setex", "2.6.12", "`SET` with the `EX` argument"),
        ("psetex", "2.6.12", "`SET` with the `PX` argument"),
        ("substr", "2.0.0", "`GETRANGE`"),
    ];
    for (name, since, replaced_by) in deprecated {
        let spec = table.lookup(name.as_bytes()).expect(name).spec;
        assert_eq!(spec.deprecated_since, Some(since), "{name}");
        assert_eq!(spec.replaced_by, Some(replaced_by), "{name}");
        assert_eq!(spec.doc_flags, docflag::DEPRECATED, "{name}");
    }
    let arities = [
        ("append", 3),
        ("decr", 2),
        ("decrby", 3),
        ("get", 2),
        ("getdel", 2),
        ("getex", -2),
        ("getrange", 4),
        ("getset", 3),
        ("incr", 2),
        ("incrby", 3),
        ("incrbyfloat", 3),
        ("lcs", -3),
        ("mget", -2),
        ("mset", -3),
        ("msetnx", -3),
        ("psetex", 4),
        ("set", -3),
        ("setex", 4),
        ("setnx", 3),
        ("setrange", 4),
        ("strlen", 2),
        ("substr", 4),
    ];
    for (name, arity) in arities {
        let spec = table.lookup(name.as_bytes()).expect(name).spec;
        assert_eq!(spec.arity, arity, "{name}");
        assert_eq!(spec.group.name(), "string", "{name}");
        assert_ne!(spec.acl_categories() & acl::STRING, 0, "{name}");
    }
}
