//! SORT and SORT_RO against the real binary: replies byte for byte as Redis 7.0 gives them.

mod common;

use common::replies::{NOT_INTEGER, SYNTAX, WRONGTYPE};
use common::{bulks, check, resp3, TestServer};

fn list(c: &mut common::RawConn) {
    check(c, "RPUSH l 3 1 2 10 1.5", ":5\r\n");
}

#[test]
fn numeric_alpha_order_and_limit() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    list(&mut c);
    check(&mut c, "SORT l", &bulks(&["1", "1.5", "2", "3", "10"]));
    check(&mut c, "SORT l DESC", &bulks(&["10", "3", "2", "1.5", "1"]));
    check(
        &mut c,
        "SORT l ALPHA",
        &bulks(&["1", "1.5", "10", "2", "3"]),
    );
    check(&mut c, "SORT l ALPHA DESC LIMIT 1 2", &bulks(&["2", "10"]));
    check(&mut c, "SORT l LIMIT -5 2", &bulks(&["1", "1.5"]));
    check(&mut c, "SORT l LIMIT 10 2", "*0\r\n");
    check(
        &mut c,
        "SORT l LIMIT 1 -1",
        &bulks(&["1.5", "2", "3", "10"]),
    );
    check(
        &mut c,
        "SORT_RO l LIMIT 2 9223372036854775807",
        &bulks(&["2", "3", "10"]),
    );
    check(&mut c, "SORT l LIMIT a 2", NOT_INTEGER);
    check(&mut c, "SORT l FOO", SYNTAX);
    check(&mut c, "SORT l STORE", SYNTAX);
    check(&mut c, "SORT_RO l STORE x", SYNTAX);
    check(&mut c, "SORT missing", "*0\r\n");
    check(&mut c, "RPUSH bad 1 x 2", ":3\r\n");
    check(
        &mut c,
        "SORT bad",
        "-ERR One or more scores can't be converted into double\r\n",
    );
    check(&mut c, "SORT bad ALPHA", &bulks(&["1", "2", "x"]));
    check(&mut c, "SET str x", "+OK\r\n");
    check(&mut c, "SORT str", WRONGTYPE);
    check(&mut c, "SORT str FOO", SYNTAX);
}

#[test]
fn by_and_get_patterns() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    list(&mut c);
    check(
        &mut c,
        "MSET w_3 30 w_1 10 w_2 5 w_10 -1 w_1.5 7",
        "+OK\r\n",
    );
    check(
        &mut c,
        "SORT l BY w_*",
        &bulks(&["10", "2", "1.5", "1", "3"]),
    );
    check(
        &mut c,
        "SORT l BY w_* GET # GET w_* GET nokey LIMIT 0 2",
        "*6\r\n$2\r\n10\r\n$2\r\n-1\r\n$-1\r\n$1\r\n2\r\n$1\r\n5\r\n$-1\r\n",
    );
    check(
        &mut c,
        "SORT l BY nosort",
        &bulks(&["3", "1", "2", "10", "1.5"]),
    );
    check(
        &mut c,
        "SORT l BY nosort DESC LIMIT 1 2",
        &bulks(&["10", "2"]),
    );
    check(&mut c, "HSET h_1 f 9 g 100", ":2\r\n");
    // Elements without a BY value sort first, in their original order.
    check(
        &mut c,
        "SORT l BY h_*->g ALPHA",
        &bulks(&["3", "2", "10", "1.5", "1"]),
    );
    check(
        &mut c,
        "SORT l BY h_*->f GET h_*->f",
        "*5\r\n$-1\r\n$-1\r\n$-1\r\n$-1\r\n$1\r\n9\r\n",
    );
    // A pattern ending in a bare "->" names a plain key.
    check(&mut c, "DEL l", ":1\r\n");
    check(&mut c, "RPUSH l a", ":1\r\n");
    check(&mut c, "SET x:a-> 100", "+OK\r\n");
    check(&mut c, "SORT l BY num GET x:*->", &bulks(&["100"]));
    check(&mut c, "SORT_RO l BY nosort GET x:*->", &bulks(&["100"]));

    let mut c3 = resp3(&server);
    check(&mut c3, "SORT l ALPHA GET nokey", "*1\r\n_\r\n");
}

#[test]
fn sets_and_sorted_sets() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "SADD s 5 3 1 4", ":4\r\n");
    check(&mut c, "SORT s", &bulks(&["1", "3", "4", "5"]));
    check(&mut c, "SORT s BY nosort STORE d", ":4\r\n");
    check(&mut c, "LRANGE d 0 -1", &bulks(&["1", "3", "4", "5"]));
    check(&mut c, "SADD letters b a c", ":3\r\n");
    // Stored with a constant BY, a set is still sorted (alphabetically).
    check(&mut c, "SORT letters BY _ STORE d", ":3\r\n");
    check(&mut c, "LRANGE d 0 -1", &bulks(&["a", "b", "c"]));
    check(&mut c, "ZADD z 1 c 2 b 3 a", ":3\r\n");
    check(&mut c, "SORT z BY nosort", &bulks(&["c", "b", "a"]));
    check(
        &mut c,
        "SORT z BY nosort DESC LIMIT 0 2",
        &bulks(&["a", "b"]),
    );
    check(&mut c, "SORT z ALPHA", &bulks(&["a", "b", "c"]));
    check(&mut c, "SORT z BY nosort LIMIT 5 10", "*0\r\n");
}

#[test]
fn store() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    list(&mut c);
    check(
        &mut c,
        "MSET w_3 30 w_1 10 w_2 5 w_10 -1 w_1.5 7",
        "+OK\r\n",
    );
    check(&mut c, "SORT l BY w_* STORE dst", ":5\r\n");
    check(
        &mut c,
        "LRANGE dst 0 -1",
        &bulks(&["10", "2", "1.5", "1", "3"]),
    );
    check(&mut c, "TYPE dst", "+list\r\n");
    check(
        &mut c,
        "SORT l BY w_* GET # GET w_* LIMIT 0 2 STORE dst",
        ":4\r\n",
    );
    check(&mut c, "LRANGE dst 0 -1", &bulks(&["10", "-1", "2", "5"]));
    // Missing GET values are stored as empty strings.
    check(&mut c, "SORT l GET nokey_* LIMIT 0 2 STORE dst", ":2\r\n");
    check(&mut c, "LRANGE dst 0 -1", &bulks(&["", ""]));
    // An empty result deletes the destination (and creates none).
    check(&mut c, "SET dst old", "+OK\r\n");
    check(&mut c, "SORT missing STORE dst", ":0\r\n");
    check(&mut c, "EXISTS dst", ":0\r\n");
    check(&mut c, "SORT l ALPHA LIMIT 10 10 STORE dst", ":0\r\n");
    check(&mut c, "EXISTS dst", ":0\r\n");
    // The sorted key itself can be the destination.
    check(&mut c, "SORT l STORE l", ":5\r\n");
    check(
        &mut c,
        "LRANGE l 0 -1",
        &bulks(&["1", "1.5", "2", "3", "10"]),
    );
}

#[test]
fn key_introspection() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(
        &mut c,
        "COMMAND GETKEYSANDFLAGS SORT k1 STORE k2",
        "*2\r\n*2\r\n$2\r\nk1\r\n*2\r\n+RO\r\n+access\r\n*2\r\n$2\r\nk2\r\n*2\r\n+OW\r\n+update\r\n",
    );
    check(
        &mut c,
        "COMMAND GETKEYS SORT abc STORE invalid STORE stillbad STORE def",
        &bulks(&["abc", "def"]),
    );
    check(
        &mut c,
        "COMMAND GETKEYS SORT abc GET store x",
        &bulks(&["abc"]),
    );
    check(&mut c, "COMMAND GETKEYS SORT_RO abc BY x", &bulks(&["abc"]));
    let mut redis = server.client();
    for command in ["sort", "sort_ro"] {
        let info: redis::Value = redis::cmd("COMMAND")
            .arg("INFO")
            .arg(command)
            .query(&mut redis)
            .unwrap();
        let text = format!("{info:?}");
        assert!(text.contains("movablekeys"), "{command}: {text}");
        assert!(text.contains("unknown"), "{command}: {text}");
    }
}
