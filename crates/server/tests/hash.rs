//! The hash commands against the real binary: replies byte for byte, RESP2 and RESP3.

mod common;

use std::collections::{HashMap, HashSet};

use common::replies::{NIL, NOT_INTEGER, SYNTAX, WRONGTYPE};
use common::{bulk, check, resp3, TestServer};

#[test]
fn hset_hget_and_friends() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "HSET h a 1 b 2", ":2\r\n");
    check(&mut c, "HSET h a 10 c 3", ":1\r\n");
    check(&mut c, "HMSET h d 4", "+OK\r\n");
    check(
        &mut c,
        "HSET h a 1 b",
        "-ERR wrong number of arguments for 'hset' command\r\n",
    );
    check(
        &mut c,
        "HMSET h a 1 b",
        "-ERR wrong number of arguments for 'hmset' command\r\n",
    );
    check(
        &mut c,
        "HSET h a",
        "-ERR wrong number of arguments for 'hset' command\r\n",
    );
    check(&mut c, "HGET h a", &bulk("10"));
    check(&mut c, "HGET h zz", NIL);
    check(&mut c, "HGET missing a", NIL);
    check(
        &mut c,
        "HMGET h a zz d",
        &format!("*3\r\n{}{NIL}{}", bulk("10"), bulk("4")),
    );
    check(&mut c, "HMGET missing a b", &format!("*2\r\n{NIL}{NIL}"));
    check(&mut c, "HLEN h", ":4\r\n");
    check(&mut c, "HLEN missing", ":0\r\n");
    check(&mut c, "HEXISTS h a", ":1\r\n");
    check(&mut c, "HEXISTS h zz", ":0\r\n");
    check(&mut c, "HEXISTS missing a", ":0\r\n");
    check(&mut c, "HSTRLEN h a", ":2\r\n");
    check(&mut c, "HSTRLEN h zz", ":0\r\n");
    check(&mut c, "HSTRLEN missing a", ":0\r\n");
    check(&mut c, "HSETNX h a 99", ":0\r\n");
    check(&mut c, "HSETNX h e 5", ":1\r\n");
    check(&mut c, "HSETNX fresh f v", ":1\r\n");
    check(&mut c, "HGET h e", &bulk("5"));
    check(&mut c, "HDEL h zz", ":0\r\n");
    check(&mut c, "HDEL h a b zz", ":2\r\n");
    check(&mut c, "HDEL missing a", ":0\r\n");
    check(&mut c, "HDEL h c d e f", ":3\r\n");
    check(&mut c, "EXISTS h", ":0\r\n");
    check(&mut c, "TYPE fresh", "+hash\r\n");
    check(&mut c, "SET str x", "+OK\r\n");
    for command in [
        "HSET str a 1",
        "HMSET str a 1",
        "HSETNX str a 1",
        "HGET str a",
        "HMGET str a",
        "HGETALL str",
        "HKEYS str",
        "HVALS str",
        "HDEL str a",
        "HLEN str",
        "HEXISTS str a",
        "HSTRLEN str a",
        "HINCRBY str a 1",
        "HINCRBYFLOAT str a 1",
        "HSCAN str 0",
        "HRANDFIELD str",
        "HRANDFIELD str 1",
    ] {
        check(&mut c, command, WRONGTYPE);
    }
}

#[test]
fn whole_hash_replies_resp2_and_resp3() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    let mut c3 = resp3(&server);
    check(&mut c, "HGETALL missing", "*0\r\n");
    check(&mut c3, "HGETALL missing", "%0\r\n");
    check(&mut c3, "HKEYS missing", "*0\r\n");
    check(&mut c3, "HVALS missing", "*0\r\n");
    check(&mut c, "HSET one f v", ":1\r\n");
    check(&mut c, "HGETALL one", "*2\r\n$1\r\nf\r\n$1\r\nv\r\n");
    check(&mut c3, "HGETALL one", "%1\r\n$1\r\nf\r\n$1\r\nv\r\n");
    check(&mut c, "HKEYS one", "*1\r\n$1\r\nf\r\n");
    check(&mut c, "HVALS one", "*1\r\n$1\r\nv\r\n");
    check(&mut c3, "HGET one missing", "_\r\n");
    check(
        &mut c3,
        "HRANDFIELD one 1 WITHVALUES",
        "*1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
    );
    check(
        &mut c,
        "HRANDFIELD one 1 WITHVALUES",
        "*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
    );
    check(&mut c3, "HRANDFIELD one -2", "*2\r\n$1\r\nf\r\n$1\r\nf\r\n");

    let mut con = server.client();
    let pairs: Vec<(String, String)> = (0..300)
        .map(|i| (format!("f{i}"), format!("v{i}")))
        .collect();
    let _: () = redis::cmd("HSET")
        .arg("big")
        .arg(&pairs)
        .query(&mut con)
        .unwrap();
    let all: HashMap<String, String> = redis::cmd("HGETALL").arg("big").query(&mut con).unwrap();
    assert_eq!(all.len(), 300);
    assert_eq!(all["f7"], "v7");
    let keys: Vec<String> = redis::cmd("HKEYS").arg("big").query(&mut con).unwrap();
    let values: Vec<String> = redis::cmd("HVALS").arg("big").query(&mut con).unwrap();
    // Fields and values list in the same order.
    for (k, v) in keys.iter().zip(&values) {
        assert_eq!(&k[1..], &v[1..]);
    }
}

#[test]
fn hincrby_and_hincrbyfloat() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "HINCRBY h n 5", ":5\r\n");
    check(&mut c, "HINCRBY h n -7", ":-2\r\n");
    check(&mut c, "HINCRBY h n x", NOT_INTEGER);
    check(&mut c, "HSET h s abc big 9223372036854775807", ":2\r\n");
    check(
        &mut c,
        "HINCRBY h s 1",
        "-ERR hash value is not an integer\r\n",
    );
    c.expect(&[b"HSET", b"h", b"sp", b" 1"], b":1\r\n");
    check(
        &mut c,
        "HINCRBY h sp 1",
        "-ERR hash value is not an integer\r\n",
    );
    c.expect(&[b"HSET", b"h", b"nul", b"1\x002"], b":1\r\n");
    check(
        &mut c,
        "HINCRBYFLOAT h nul 1",
        "-ERR hash value is not a float\r\n",
    );
    check(
        &mut c,
        "HINCRBY h big 1",
        "-ERR increment or decrement would overflow\r\n",
    );
    check(&mut c, "HINCRBY h big 0", ":9223372036854775807\r\n");
    check(&mut c, "HINCRBY missing n x", NOT_INTEGER);
    check(&mut c, "EXISTS missing", ":0\r\n");
    check(&mut c, "HINCRBYFLOAT f x 1.23", &bulk("1.23"));
    check(&mut c, "HINCRBYFLOAT f x 0.77", &bulk("2"));
    check(&mut c, "HINCRBYFLOAT f x -0.1", &bulk("1.9"));
    check(&mut c, "HINCRBYFLOAT f y 10.5", &bulk("10.5"));
    check(&mut c, "HINCRBYFLOAT f y 1e2", &bulk("110.5"));
    check(&mut c, "HSET f t 1000.1", ":1\r\n");
    // Long-double arithmetic, as Redis answers on x86-64.
    check(
        &mut c,
        "HINCRBYFLOAT f t 0.1",
        &bulk("1000.19999999999999996"),
    );
    check(
        &mut c,
        "HINCRBYFLOAT f x abc",
        "-ERR value is not a valid float\r\n",
    );
    check(
        &mut c,
        "HINCRBYFLOAT f x inf",
        "-ERR value is NaN or Infinity\r\n",
    );
    check(
        &mut c,
        "HINCRBYFLOAT newkey x +inf",
        "-ERR value is NaN or Infinity\r\n",
    );
    check(&mut c, "EXISTS newkey", ":0\r\n");
    check(&mut c, "HSET f s abc i inf", ":2\r\n");
    check(
        &mut c,
        "HINCRBYFLOAT f s 1",
        "-ERR hash value is not a float\r\n",
    );
    check(
        &mut c,
        "HINCRBYFLOAT f i 1",
        "-ERR increment would produce NaN or Infinity\r\n",
    );
    check(&mut c, "HINCRBY f n 3", ":3\r\n");
    check(&mut c, "HINCRBYFLOAT f n 1.5", &bulk("4.5"));
    check(
        &mut c,
        "HINCRBY f n 1",
        "-ERR hash value is not an integer\r\n",
    );
}

#[test]
fn hrandfield_counts() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    let mut con = server.client();
    check(&mut c, "HRANDFIELD missing", NIL);
    check(&mut c, "HRANDFIELD missing 3", "*0\r\n");
    check(&mut c, "HRANDFIELD missing 3 WITHVALUES", "*0\r\n");
    check(&mut c, "HSET h a 1 b 2 c 3 d 4", ":4\r\n");
    check(&mut c, "HRANDFIELD h 0", "*0\r\n");
    check(&mut c, "HRANDFIELD h 0 WITHVALUES", "*0\r\n");
    check(&mut c, "HRANDFIELD h x", NOT_INTEGER);
    check(&mut c, "HRANDFIELD h 1 foo", SYNTAX);
    check(&mut c, "HRANDFIELD h 1 WITHVALUES x", SYNTAX);
    check(
        &mut c,
        "HRANDFIELD h -9223372036854775808",
        "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n",
    );
    check(
        &mut c,
        "HRANDFIELD h -9223372036854770000 WITHVALUES",
        "-ERR value is out of range\r\n",
    );
    let fields: HashSet<String> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
    let one: String = redis::cmd("HRANDFIELD").arg("h").query(&mut con).unwrap();
    assert!(fields.contains(&one));
    for count in [1usize, 2, 4, 9] {
        let got: Vec<String> = redis::cmd("HRANDFIELD")
            .arg("h")
            .arg(count)
            .query(&mut con)
            .unwrap();
        assert_eq!(got.len(), count.min(4));
        assert_eq!(got.iter().collect::<HashSet<_>>().len(), got.len());
        let pairs: Vec<String> = redis::cmd("HRANDFIELD")
            .arg("h")
            .arg(count)
            .arg("WITHVALUES")
            .query(&mut con)
            .unwrap();
        assert_eq!(pairs.len(), 2 * count.min(4));
        for pair in pairs.chunks(2) {
            let expected = (pair[0].as_bytes()[0] - b'a' + b'1') as char;
            assert_eq!(pair[1], expected.to_string());
        }
    }
    let repeats: Vec<String> = redis::cmd("HRANDFIELD")
        .arg("h")
        .arg(-500)
        .query(&mut con)
        .unwrap();
    assert_eq!(repeats.len(), 500);
    assert_eq!(repeats.into_iter().collect::<HashSet<_>>(), fields);
    let repeats: Vec<String> = redis::cmd("HRANDFIELD")
        .arg("h")
        .arg(-20)
        .arg("WITHVALUES")
        .query(&mut con)
        .unwrap();
    assert_eq!(repeats.len(), 40);
}

#[test]
fn hscan_small_and_big() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    let mut con = server.client();
    check(&mut c, "HSCAN missing 0", "*2\r\n$1\r\n0\r\n*0\r\n");
    check(&mut c, "HSCAN missing x", "-ERR invalid cursor\r\n");
    check(&mut c, "HSET small f v", ":1\r\n");
    check(
        &mut c,
        "HSCAN small 0",
        "*2\r\n$1\r\n0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
    );
    check(&mut c, "HSCAN small 0 MATCH x*", "*2\r\n$1\r\n0\r\n*0\r\n");
    check(&mut c, "HSCAN small 0 COUNT 0", SYNTAX);
    check(&mut c, "HSCAN small 0 NOVALUES", SYNTAX);
    let pairs: Vec<(String, String)> = (0..1000)
        .map(|i| (format!("key:{i}"), i.to_string()))
        .collect();
    let _: () = redis::cmd("HMSET")
        .arg("big")
        .arg(&pairs)
        .query(&mut con)
        .unwrap();
    check(&mut c, "OBJECT ENCODING big", &bulk("hashtable"));
    for count in [1, 10, 333] {
        let mut cursor = "0".to_string();
        let mut seen = HashSet::new();
        loop {
            let (next, items): (String, Vec<String>) = redis::cmd("HSCAN")
                .arg("big")
                .arg(&cursor)
                .arg("COUNT")
                .arg(count)
                .query(&mut con)
                .unwrap();
            for pair in items.chunks(2) {
                assert_eq!(pair[0], format!("key:{}", pair[1]));
                assert!(seen.insert(pair[0].clone()), "twice: {}", pair[0]);
            }
            if next == "0" {
                break;
            }
            cursor = next;
        }
        assert_eq!(seen.len(), 1000);
    }
    let (next, items): (String, Vec<String>) = redis::cmd("HSCAN")
        .arg("big")
        .arg(0)
        .arg("MATCH")
        .arg("key:99*")
        .arg("COUNT")
        .arg(10_000)
        .query(&mut con)
        .unwrap();
    assert_eq!(next, "0");
    assert_eq!(items.len(), 22);
}

#[test]
fn specs_match_redis() {
    use latch_server::spec::{acl, docflag, flag};
    let table = latch_server::table::table();
    let expected = [
        ("hset", -4, flag::WRITE | flag::DENYOOM | flag::FAST),
        ("hmset", -4, flag::WRITE | flag::DENYOOM | flag::FAST),
        ("hget", 3, flag::READONLY | flag::FAST),
        ("hmget", -3, flag::READONLY | flag::FAST),
        ("hgetall", 2, flag::READONLY),
        ("hdel", -3, flag::WRITE | flag::FAST),
        ("hlen", 2, flag::READONLY | flag::FAST),
        ("hexists", 3, flag::READONLY | flag::FAST),
        ("hincrby", 4, flag::WRITE | flag::DENYOOM | flag::FAST),
        ("hincrbyfloat", 4, flag::WRITE | flag::DENYOOM | flag::FAST),
        ("hkeys", 2, flag::READONLY),
        ("hvals", 2, flag::READONLY),
        ("hsetnx", 4, flag::WRITE | flag::DENYOOM | flag::FAST),
        ("hstrlen", 3, flag::READONLY | flag::FAST),
        ("hscan", -3, flag::READONLY),
        ("hrandfield", -2, flag::READONLY),
    ];
    for (name, arity, flags) in expected {
        let spec = table.lookup(name.as_bytes()).expect(name).spec;
        assert_eq!(spec.arity, arity, "{name}");
        assert_eq!(spec.flags, flags, "{name}");
        assert_eq!(spec.group.name(), "hash", "{name}");
        assert_ne!(spec.acl_categories() & acl::HASH, 0, "{name}");
        assert_eq!(spec.key_specs.len(), 1, "{name}");
    }
    let hmset = table.lookup(b"hmset").unwrap().spec;
    assert_eq!(hmset.doc_flags, docflag::DEPRECATED);
    assert_eq!(hmset.deprecated_since, Some("4.0.0"));
}
