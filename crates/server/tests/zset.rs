//! The sorted-set commands against the real binary: replies byte for byte, RESP2 and RESP3.

mod common;

use std::collections::HashMap;

use common::replies::{NIL, NOT_FLOAT, NULL3, SYNTAX, WRONGTYPE};
use common::{bulk, bulks, check, resp3, TestServer};

#[test]
fn zadd_options_and_errors() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "ZADD z 1 a 2 b 3 c", ":3\r\n");
    check(&mut c, "ZADD z 1 a", ":0\r\n");
    check(&mut c, "ZADD z CH 5 a", ":1\r\n");
    check(&mut c, "ZADD z NX 10 a 4 d", ":1\r\n");
    check(&mut c, "ZADD z XX CH 20 a 30 zz", ":1\r\n");
    check(&mut c, "ZADD z GT CH 1 a", ":0\r\n");
    check(&mut c, "ZADD z LT CH 1 a", ":1\r\n");
    check(&mut c, "ZADD z INCR 2.5 a", &bulk("3.5"));
    check(&mut c, "ZADD z INCR NX 1 a", NIL);
    check(&mut c, "ZINCRBY z -0.5 a", &bulk("3"));
    check(
        &mut c,
        "ZADD z NX XX 1 a",
        "-ERR XX and NX options at the same time are not compatible\r\n",
    );
    check(
        &mut c,
        "ZADD z GT LT 1 a",
        "-ERR GT, LT, and/or NX options at the same time are not compatible\r\n",
    );
    check(
        &mut c,
        "ZADD z INCR 1 a 2 b",
        "-ERR INCR option supports a single increment-element pair\r\n",
    );
    check(&mut c, "ZADD z NX 1", SYNTAX);
    check(&mut c, "ZADD z 1 a 2", SYNTAX);
    check(&mut c, "ZADD z x a", NOT_FLOAT);
    check(&mut c, "ZADD z nan a", NOT_FLOAT);
    check(&mut c, "ZADD z inf i -inf j", ":2\r\n");
    check(
        &mut c,
        "ZADD z INCR -inf i",
        "-ERR resulting score is not a number (NaN)\r\n",
    );
    check(&mut c, "ZADD missing XX 1 a", ":0\r\n");
    check(&mut c, "EXISTS missing", ":0\r\n");
    check(&mut c, "ZSCORE z i", &bulk("inf"));
    check(&mut c, "ZSCORE z nope", NIL);
    check(&mut c, "ZMSCORE z a nope", "*2\r\n$1\r\n3\r\n$-1\r\n");
    check(&mut c, "ZCARD z", ":6\r\n");
    check(&mut c, "ZREM z i j nope", ":2\r\n");
    check(&mut c, "SET s v", "+OK\r\n");
    for command in ["ZADD s 1 a", "ZSCORE s a", "ZCARD s", "ZRANGE s 0 -1"] {
        check(&mut c, command, WRONGTYPE);
    }
    check(&mut c, "TYPE z", "+zset\r\n");

    let mut c3 = resp3(&server);
    check(&mut c3, "ZSCORE z a", ",3\r\n");
    check(&mut c3, "ZSCORE z nope", NULL3);
    check(&mut c3, "ZINCRBY z 0.1 b", ",2.1000000000000001\r\n");
}

#[test]
fn ranges_in_both_protocols() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "ZADD z 1 a 2 b 3 c 4 d", ":4\r\n");
    check(&mut c, "ZRANGE z 0 -1", &bulks(&["a", "b", "c", "d"]));
    check(
        &mut c,
        "ZRANGE z 0 1 WITHSCORES",
        &bulks(&["a", "1", "b", "2"]),
    );
    check(&mut c, "ZRANGE z 0 1 REV", &bulks(&["d", "c"]));
    check(
        &mut c,
        "ZRANGE z (1 +inf BYSCORE LIMIT 1 2",
        &bulks(&["c", "d"]),
    );
    check(&mut c, "ZRANGE z +inf (2 BYSCORE REV", &bulks(&["d", "c"]));
    check(&mut c, "ZRANGE z 0 10 BYSCORE LIMIT -1 5", "*0\r\n");
    check(
        &mut c,
        "ZRANGE z 0 -1 LIMIT 0 1",
        "-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX\r\n",
    );
    check(
        &mut c,
        "ZRANGE z - + BYLEX WITHSCORES",
        "-ERR syntax error, WITHSCORES not supported in combination with BYLEX\r\n",
    );
    check(
        &mut c,
        "ZRANGE z a b BYSCORE",
        "-ERR min or max is not a float\r\n",
    );
    check(
        &mut c,
        "ZRANGE z a b BYLEX",
        "-ERR min or max not valid string range item\r\n",
    );
    check(&mut c, "ZRANGE z 0 -1 REV REV", SYNTAX);
    check(&mut c, "ZRANGEBYSCORE z (1 3", &bulks(&["b", "c"]));
    check(
        &mut c,
        "ZREVRANGEBYSCORE z 3 (1 WITHSCORES",
        &bulks(&["c", "3", "b", "2"]),
    );
    check(&mut c, "ZREVRANGE z 0 0", &bulks(&["d"]));
    check(&mut c, "ZRANK z c", ":2\r\n");
    check(&mut c, "ZREVRANK z c", ":1\r\n");
    check(&mut c, "ZRANK z nope", NIL);
    check(&mut c, "ZCOUNT z (1 3", ":2\r\n");
    check(&mut c, "ZADD lex 0 a 0 b 0 c 0 d", ":4\r\n");
    check(&mut c, "ZRANGEBYLEX lex [b (d", &bulks(&["b", "c"]));
    check(
        &mut c,
        "ZREVRANGEBYLEX lex + - LIMIT 1 2",
        &bulks(&["c", "b"]),
    );
    check(&mut c, "ZLEXCOUNT lex - +", ":4\r\n");
    check(&mut c, "ZRANGESTORE dst z 1 2", ":2\r\n");
    check(
        &mut c,
        "ZRANGE dst 0 -1 WITHSCORES",
        &bulks(&["b", "2", "c", "3"]),
    );
    check(&mut c, "ZRANGESTORE dst missing 0 -1", ":0\r\n");
    check(&mut c, "EXISTS dst", ":0\r\n");

    let mut c3 = resp3(&server);
    check(
        &mut c3,
        "ZRANGE z 0 1 WITHSCORES",
        "*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2\r\n",
    );
    check(&mut c3, "ZRANGE z 0 1", &bulks(&["a", "b"]));
}

#[test]
fn removing_ranges() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "ZADD z 1 a 2 b 3 c 4 d 5 e", ":5\r\n");
    check(&mut c, "ZREMRANGEBYRANK z 0 0", ":1\r\n");
    check(&mut c, "ZREMRANGEBYSCORE z (2 3", ":1\r\n");
    check(&mut c, "ZREMRANGEBYLEX z - (d", ":1\r\n");
    check(&mut c, "ZRANGE z 0 -1", &bulks(&["d", "e"]));
    check(&mut c, "ZREMRANGEBYRANK z 0 -1", ":2\r\n");
    check(&mut c, "EXISTS z", ":0\r\n");
    check(
        &mut c,
        "ZREMRANGEBYSCORE z x 1",
        "-ERR min or max is not a float\r\n",
    );
}

#[test]
fn pops_in_both_protocols() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "ZADD z 1 a 2 b 3 c 4 d", ":4\r\n");
    check(&mut c, "ZPOPMIN z", &bulks(&["a", "1"]));
    check(&mut c, "ZPOPMAX z 2", &bulks(&["d", "4", "c", "3"]));
    check(&mut c, "ZPOPMIN z 0", "*0\r\n");
    check(
        &mut c,
        "ZPOPMIN z -1",
        "-ERR value is out of range, must be positive\r\n",
    );
    check(&mut c, "ZPOPMIN z 1 2", SYNTAX);
    check(&mut c, "ZPOPMIN missing 2", "*0\r\n");
    check(
        &mut c,
        "ZMPOP 2 missing z MIN COUNT 5",
        "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n",
    );
    check(&mut c, "EXISTS z", ":0\r\n");
    check(&mut c, "ZMPOP 1 z MIN", "*-1\r\n");
    check(&mut c, "ZMPOP 1 z FOO", SYNTAX);
    check(
        &mut c,
        "ZMPOP 0 z MIN",
        "-ERR numkeys should be greater than 0\r\n",
    );

    let mut c3 = resp3(&server);
    check(&mut c3, "ZADD z 1 a 2 b", ":2\r\n");
    check(&mut c3, "ZPOPMIN z", "*2\r\n$1\r\na\r\n,1\r\n");
    check(&mut c3, "ZPOPMIN z 1", "*1\r\n*2\r\n$1\r\nb\r\n,2\r\n");
    check(&mut c3, "ZMPOP 1 z MIN", NULL3);
}

#[test]
fn union_intersection_difference() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "ZADD a 1 x 2 y 3 z", ":3\r\n");
    check(&mut c, "ZADD b 10 y 20 z 30 w", ":3\r\n");
    check(&mut c, "SADD s y q", ":2\r\n");
    check(
        &mut c,
        "ZUNION 2 a b WITHSCORES",
        &bulks(&["x", "1", "y", "12", "z", "23", "w", "30"]),
    );
    check(
        &mut c,
        "ZUNION 3 a b s WEIGHTS 1 1 100 AGGREGATE MAX WITHSCORES",
        &bulks(&["x", "1", "z", "20", "w", "30", "q", "100", "y", "100"]),
    );
    check(
        &mut c,
        "ZINTER 2 a b AGGREGATE MIN WITHSCORES",
        &bulks(&["y", "2", "z", "3"]),
    );
    check(&mut c, "ZINTERCARD 2 a b LIMIT 1", ":1\r\n");
    check(&mut c, "ZDIFF 2 a b WITHSCORES", &bulks(&["x", "1"]));
    check(&mut c, "ZUNIONSTORE out 2 a b WEIGHTS 2 1", ":4\r\n");
    check(&mut c, "ZSCORE out y", &bulk("14"));
    check(&mut c, "ZINTERSTORE out 2 a missing", ":0\r\n");
    check(&mut c, "EXISTS out", ":0\r\n");
    check(&mut c, "ZDIFFSTORE out 2 b a", ":1\r\n");
    check(
        &mut c,
        "ZUNION 0 a",
        "-ERR at least 1 input key is needed for 'zunion' command\r\n",
    );
    check(&mut c, "ZUNION 3 a b", SYNTAX);
    check(
        &mut c,
        "ZUNION 2 a b WEIGHTS 1 x",
        "-ERR weight value is not a float\r\n",
    );
    check(&mut c, "ZDIFF 2 a b WEIGHTS 1 1", SYNTAX);
    check(
        &mut c,
        "ZINTERCARD 2 a b LIMIT -1",
        "-ERR LIMIT can't be negative\r\n",
    );
    check(&mut c, "SET str v", "+OK\r\n");
    check(&mut c, "ZUNION 2 a str", WRONGTYPE);
}

#[test]
fn random_members() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "ZRANDMEMBER missing", NIL);
    check(&mut c, "ZRANDMEMBER missing 5", "*0\r\n");
    check(&mut c, "ZADD z 1 a 2 b 3 c", ":3\r\n");
    check(&mut c, "ZRANDMEMBER z 0", "*0\r\n");
    check(&mut c, "ZRANDMEMBER z 10", &bulks(&["c", "b", "a"]));
    check(&mut c, "ZRANDMEMBER z 1 FOO", SYNTAX);
    check(
        &mut c,
        "ZRANDMEMBER z -9223372036854775808",
        "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n",
    );
    check(
        &mut c,
        "ZRANDMEMBER z -9223372036854770000 WITHSCORES",
        "-ERR value is out of range\r\n",
    );
    let mut con = server.client();
    let picks: Vec<String> = redis::cmd("ZRANDMEMBER")
        .arg("z")
        .arg(-20)
        .query(&mut con)
        .unwrap();
    assert_eq!(picks.len(), 20);
    assert!(picks.iter().all(|p| ["a", "b", "c"].contains(&p.as_str())));
    let distinct: Vec<String> = redis::cmd("ZRANDMEMBER")
        .arg("z")
        .arg(2)
        .query(&mut con)
        .unwrap();
    assert_eq!(distinct.len(), 2);
    assert_ne!(distinct[0], distinct[1]);
}

#[test]
fn zscan_small_and_large() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "ZADD small 0.1 a 1e100 b", ":2\r\n");
    check(
        &mut c,
        "ZSCAN small 0",
        &format!(
            "*2\r\n$1\r\n0\r\n{}",
            bulks(&["a", "0.10000000000000001", "b", "1e+100"])
        ),
    );
    check(
        &mut c,
        "ZSCAN small 0 MATCH b*",
        &format!("*2\r\n$1\r\n0\r\n{}", bulks(&["b", "1e+100"])),
    );
    check(&mut c, "ZSCAN small 0 COUNT 0", SYNTAX);
    check(&mut c, "ZSCAN small x", "-ERR invalid cursor\r\n");
    check(&mut c, "ZSCAN missing 0 FOO", "*2\r\n$1\r\n0\r\n*0\r\n");

    // A set past the compact-encoding size is walked with a cursor.
    let mut con = server.client();
    let mut expected = HashMap::new();
    for i in 0..500 {
        let member = format!("m{i}");
        let score = i as f64 / 4.0;
        let _: i64 = redis::cmd("ZADD")
            .arg("big")
            .arg(score)
            .arg(&member)
            .query(&mut con)
            .unwrap();
        expected.insert(member, score);
    }
    let mut seen = HashMap::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        let (next, items): (String, Vec<String>) = redis::cmd("ZSCAN")
            .arg("big")
            .arg(&cursor)
            .arg("COUNT")
            .arg(20)
            .query(&mut con)
            .unwrap();
        for pair in items.chunks(2) {
            seen.insert(pair[0].clone(), pair[1].parse::<f64>().unwrap());
        }
        calls += 1;
        cursor = next;
        if cursor == "0" || calls > 1000 {
            break;
        }
    }
    assert!(calls > 1, "a big set takes several calls");
    assert_eq!(seen, expected);
}
