//! The list commands against the real binary: replies byte for byte, RESP2 and RESP3.

mod common;

use common::replies::{NIL, NIL_ARRAY, NOT_INTEGER, NULL3, SYNTAX, WRONGTYPE};
use common::{bulk, bulks, check, resp3, TestServer};

#[test]
fn push_range_and_length() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "LPUSH l a b c", ":3\r\n");
    check(&mut c, "RPUSH l d e", ":5\r\n");
    check(&mut c, "LRANGE l 0 -1", &bulks(&["c", "b", "a", "d", "e"]));
    check(
        &mut c,
        "LRANGE l -100 100",
        &bulks(&["c", "b", "a", "d", "e"]),
    );
    check(&mut c, "LRANGE l 1 2", &bulks(&["b", "a"]));
    check(&mut c, "LRANGE l 3 1", "*0\r\n");
    check(&mut c, "LRANGE l x 1", NOT_INTEGER);
    check(&mut c, "LRANGE missing 0 -1", "*0\r\n");
    check(&mut c, "LLEN l", ":5\r\n");
    check(&mut c, "LLEN missing", ":0\r\n");
    check(&mut c, "LINDEX l -1", &bulk("e"));
    check(&mut c, "LINDEX l 5", NIL);
    check(&mut c, "LINDEX l x", NOT_INTEGER);
    check(&mut c, "LINDEX missing x", NIL);
    check(&mut c, "LPUSHX missing a", ":0\r\n");
    check(&mut c, "EXISTS missing", ":0\r\n");
    check(&mut c, "RPUSHX l f g", ":7\r\n");
    check(&mut c, "SET s v", "+OK\r\n");
    for command in [
        "LPUSH s a",
        "RPUSHX s a",
        "LRANGE s 0 -1",
        "LLEN s",
        "LINDEX s 0",
    ] {
        check(&mut c, command, WRONGTYPE);
    }
    check(&mut c, "TYPE l", "+list\r\n");
    check(&mut c, "OBJECT ENCODING l", &bulk("quicklist"));
}

#[test]
fn pop_shapes_in_both_protocols() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "RPUSH l a b c d e", ":5\r\n");
    check(&mut c, "LPOP l", &bulk("a"));
    check(&mut c, "RPOP l", &bulk("e"));
    check(&mut c, "LPOP l 0", "*0\r\n");
    check(&mut c, "RPOP l 2", &bulks(&["d", "c"]));
    check(
        &mut c,
        "LPOP l -1",
        "-ERR value is out of range, must be positive\r\n",
    );
    check(
        &mut c,
        "LPOP l x",
        "-ERR value is out of range, must be positive\r\n",
    );
    check(
        &mut c,
        "LPOP l 1 2",
        "-ERR wrong number of arguments for 'lpop' command\r\n",
    );
    check(&mut c, "LPOP l 10", &bulks(&["b"]));
    check(&mut c, "EXISTS l", ":0\r\n");
    check(&mut c, "LPOP l", NIL);
    check(&mut c, "LPOP l 1", NIL_ARRAY);
    check(&mut c, "RPOP l 1", NIL_ARRAY);

    let mut c3 = resp3(&server);
    check(&mut c3, "LPOP l", NULL3);
    check(&mut c3, "LPOP l 1", NULL3);
    check(&mut c3, "LMPOP 1 l LEFT", NULL3);
    check(&mut c3, "RPUSH l x", ":1\r\n");
    check(&mut c3, "RPOP l 3", &bulks(&["x"]));
}

#[test]
fn set_remove_trim_insert() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "RPUSH l a b a c a d", ":6\r\n");
    check(&mut c, "LREM l -2 a", ":2\r\n");
    check(&mut c, "LRANGE l 0 -1", &bulks(&["a", "b", "c", "d"]));
    check(&mut c, "LREM l 0 zz", ":0\r\n");
    check(&mut c, "LREM l x a", NOT_INTEGER);
    check(&mut c, "LREM missing 1 a", ":0\r\n");
    check(&mut c, "LSET l 0 A", "+OK\r\n");
    check(&mut c, "LSET l -1 D", "+OK\r\n");
    check(&mut c, "LSET l 4 Z", "-ERR index out of range\r\n");
    check(&mut c, "LSET missing 0 Z", "-ERR no such key\r\n");
    check(&mut c, "LINSERT l BEFORE b X", ":5\r\n");
    check(&mut c, "LINSERT l after D Y", ":6\r\n");
    check(&mut c, "LINSERT l AFTER nope Y", ":-1\r\n");
    check(&mut c, "LINSERT l MIDDLE b Y", SYNTAX);
    check(&mut c, "LINSERT missing BEFORE a b", ":0\r\n");
    check(
        &mut c,
        "LRANGE l 0 -1",
        &bulks(&["A", "X", "b", "c", "D", "Y"]),
    );
    check(&mut c, "LTRIM l 1 -2", "+OK\r\n");
    check(&mut c, "LRANGE l 0 -1", &bulks(&["X", "b", "c", "D"]));
    check(&mut c, "LTRIM missing 0 1", "+OK\r\n");
    check(&mut c, "LTRIM l 5 1", "+OK\r\n");
    check(&mut c, "EXISTS l", ":0\r\n");
    check(&mut c, "RPUSH e x", ":1\r\n");
    check(&mut c, "LREM e 0 x", ":1\r\n");
    check(&mut c, "EXISTS e", ":0\r\n");
}

#[test]
fn lpos_options() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "RPUSH p a b c 1 2 3 c c", ":8\r\n");
    check(&mut c, "LPOS p c", ":2\r\n");
    check(&mut c, "LPOS p c RANK 2", ":6\r\n");
    check(&mut c, "LPOS p c RANK -1", ":7\r\n");
    check(&mut c, "LPOS p c COUNT 0", "*3\r\n:2\r\n:6\r\n:7\r\n");
    check(&mut c, "LPOS p c COUNT 2 RANK -1", "*2\r\n:7\r\n:6\r\n");
    check(&mut c, "LPOS p c MAXLEN 2", NIL);
    check(&mut c, "LPOS p zz COUNT 1", "*0\r\n");
    check(&mut c, "LPOS missing a", NIL);
    check(&mut c, "LPOS missing a COUNT 1", "*0\r\n");
    check(&mut c, "LPOS p c RANK 0", "-ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list\r\n");
    check(
        &mut c,
        "LPOS p c COUNT -1",
        "-ERR COUNT can't be negative\r\n",
    );
    check(
        &mut c,
        "LPOS p c MAXLEN -1",
        "-ERR MAXLEN can't be negative\r\n",
    );
    check(&mut c, "LPOS p c FOO", SYNTAX);
}

#[test]
fn moves_between_lists() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "RPUSH src 1 2 3", ":3\r\n");
    check(&mut c, "LMOVE src dst LEFT RIGHT", &bulk("1"));
    check(&mut c, "LMOVE src dst right left", &bulk("3"));
    check(&mut c, "LRANGE dst 0 -1", &bulks(&["3", "1"]));
    check(&mut c, "LMOVE dst dst LEFT RIGHT", &bulk("3"));
    check(&mut c, "LRANGE dst 0 -1", &bulks(&["1", "3"]));
    check(&mut c, "LMOVE src dst UP LEFT", SYNTAX);
    check(&mut c, "LMOVE missing dst LEFT LEFT", NIL);
    check(&mut c, "SET s v", "+OK\r\n");
    // The destination's type is checked before anything is popped.
    check(&mut c, "LMOVE src s LEFT LEFT", WRONGTYPE);
    check(&mut c, "LLEN src", ":1\r\n");
    check(&mut c, "RPOPLPUSH src dst", &bulk("2"));
    check(&mut c, "EXISTS src", ":0\r\n");
    check(&mut c, "RPOPLPUSH src dst", NIL);
    check(&mut c, "LRANGE dst 0 -1", &bulks(&["2", "1", "3"]));
}

#[test]
fn lmpop_replies_and_errors() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "RPUSH b 1 2 3", ":3\r\n");
    check(
        &mut c,
        "LMPOP 2 a b LEFT",
        "*2\r\n$1\r\nb\r\n*1\r\n$1\r\n1\r\n",
    );
    check(
        &mut c,
        "LMPOP 2 a b RIGHT COUNT 10",
        "*2\r\n$1\r\nb\r\n*2\r\n$1\r\n3\r\n$1\r\n2\r\n",
    );
    check(&mut c, "LMPOP 2 a b LEFT", NIL_ARRAY);
    check(
        &mut c,
        "LMPOP 0 a LEFT",
        "-ERR numkeys should be greater than 0\r\n",
    );
    check(
        &mut c,
        "LMPOP x a LEFT",
        "-ERR numkeys should be greater than 0\r\n",
    );
    check(&mut c, "LMPOP 5 a LEFT", SYNTAX);
    check(&mut c, "LMPOP 1 a MIDDLE", SYNTAX);
    check(
        &mut c,
        "LMPOP 1 a LEFT COUNT 0",
        "-ERR count should be greater than 0\r\n",
    );
    check(&mut c, "LMPOP 1 a LEFT COUNT 1 COUNT 1", SYNTAX);
    check(&mut c, "SET s v", "+OK\r\n");
    check(&mut c, "LMPOP 2 a s LEFT", WRONGTYPE);
}

#[test]
fn redis_crate_round_trip() {
    let server = TestServer::start(&[]);
    let mut con = server.client();
    let len: i64 = redis::cmd("RPUSH")
        .arg("k")
        .arg(&["x", "y", "z"])
        .query(&mut con)
        .unwrap();
    assert_eq!(len, 3);
    let items: Vec<String> = redis::cmd("LRANGE")
        .arg("k")
        .arg(0)
        .arg(-1)
        .query(&mut con)
        .unwrap();
    assert_eq!(items, ["x", "y", "z"]);
    let popped: Option<String> = redis::cmd("LPOP").arg("nope").query(&mut con).unwrap();
    assert_eq!(popped, None);
}
