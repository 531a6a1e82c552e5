//! A hash's two forms against the real binary: the compact one ("listpack") keeps insertion
//! order; a hash turns into a table ("hashtable") exactly where Redis 7.0's `t_hash.c`
//! converts one, and never back while it lives; a load decides afresh, as Redis' does.
//! These stand in for the encoding checks that Redis' own Tcl units make only with
//! `needs:debug` or without `--ignore-encoding`, which the external mode skips.

mod common;

use std::collections::{HashMap, HashSet};

use common::{bulk, bulks, check, resp3, TestServer};
use redis::{Connection, Value};

fn encoding(con: &mut Connection, key: &str) -> String {
    redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(key)
        .query(con)
        .unwrap()
}

fn hset(con: &mut Connection, key: &str, pairs: &[(String, String)]) {
    let _: i64 = redis::cmd("HSET").arg(key).arg(pairs).query(con).unwrap();
}

fn fields(n: usize) -> Vec<(String, String)> {
    (0..n).map(|i| (format!("f{i}"), format!("v{i}"))).collect()
}

fn memory_usage(con: &mut Connection, key: &str) -> i64 {
    redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .query(con)
        .unwrap()
}

#[test]
fn small_hashes_list_fields_in_insertion_order() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    let mut c3 = resp3(&server);
    check(&mut c, "HSET h zeta 1 alpha 2 mid 3", ":3\r\n");
    // A new value keeps its field's place; a new field goes last.
    check(&mut c, "HSET h alpha two last 4", ":1\r\n");
    check(&mut c, "OBJECT ENCODING h", &bulk("listpack"));
    let order = bulks(&["zeta", "1", "alpha", "two", "mid", "3", "last", "4"]);
    check(&mut c, "HGETALL h", &order);
    check(
        &mut c3,
        "HGETALL h",
        &format!("%4\r\n{}", &order[order.find("\r\n").unwrap() + 2..]),
    );
    check(&mut c, "HKEYS h", &bulks(&["zeta", "alpha", "mid", "last"]));
    check(&mut c, "HVALS h", &bulks(&["1", "two", "3", "4"]));
    // HSCAN returns a compact hash whole with cursor 0, whatever COUNT says.
    check(
        &mut c,
        "HSCAN h 0 COUNT 1",
        &format!("*2\r\n$1\r\n0\r\n{order}"),
    );
    check(
        &mut c,
        "HSCAN h 0 MATCH *a*",
        &format!(
            "*2\r\n$1\r\n0\r\n{}",
            bulks(&["zeta", "1", "alpha", "two", "last", "4"])
        ),
    );
    // A count not below the length lists the whole hash, in its order.
    check(
        &mut c,
        "HRANDFIELD h 4",
        &bulks(&["zeta", "alpha", "mid", "last"]),
    );
    check(&mut c, "HRANDFIELD h 10 WITHVALUES", &order);
    // A field that goes and comes back goes last.
    check(&mut c, "HDEL h zeta", ":1\r\n");
    check(&mut c, "HSET h zeta 5", ":1\r\n");
    check(&mut c, "HKEYS h", &bulks(&["alpha", "mid", "last", "zeta"]));
    check(&mut c, "OBJECT ENCODING h", &bulk("listpack"));
}

#[test]
fn integers_in_a_small_hash_read_back_as_sent() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(
        &mut c,
        "HSET h 1 -2 007 +3 -0 9223372036854775807 big -9223372036854775808 x 4096",
        ":5\r\n",
    );
    check(
        &mut c,
        "HGETALL h",
        &bulks(&[
            "1",
            "-2",
            "007",
            "+3",
            "-0",
            "9223372036854775807",
            "big",
            "-9223372036854775808",
            "x",
            "4096",
        ]),
    );
    check(&mut c, "HGET h 1", &bulk("-2"));
    check(&mut c, "HGET h 01", "$-1\r\n");
    check(&mut c, "HEXISTS h 007", ":1\r\n");
    check(&mut c, "HEXISTS h 7", ":0\r\n");
    check(&mut c, "HSTRLEN h 1", ":2\r\n");
    check(&mut c, "HSTRLEN h -0", ":19\r\n");
    check(&mut c, "HSTRLEN h big", ":20\r\n");
    check(&mut c, "HINCRBY h x 1", ":4097\r\n");
    check(&mut c, "HINCRBY h 1 2", ":0\r\n");
    check(&mut c, "HINCRBYFLOAT h 1 0.5", &bulk("0.5"));
    check(
        &mut c,
        "HMGET h x 1 nope",
        "*3\r\n$4\r\n4097\r\n$3\r\n0.5\r\n$-1\r\n",
    );
    check(&mut c, "OBJECT ENCODING h", &bulk("listpack"));
}

#[test]
fn entries_past_the_limit_make_a_table() {
    let server = TestServer::start(&[]);
    let mut con = server.client();
    hset(&mut con, "h", &fields(512));
    assert_eq!(encoding(&mut con, "h"), "listpack");
    hset(&mut con, "h", &[("f0".into(), "again".into())]);
    assert_eq!(encoding(&mut con, "h"), "listpack");
    hset(&mut con, "h", &[("f512".into(), "v".into())]);
    assert_eq!(encoding(&mut con, "h"), "hashtable");
    // Redis 7.0 never converts back, however small the hash gets.
    let _: i64 = redis::cmd("HDEL")
        .arg("h")
        .arg((1..513).map(|i| format!("f{i}")).collect::<Vec<_>>())
        .query(&mut con)
        .unwrap();
    assert_eq!(encoding(&mut con, "h"), "hashtable");
    let all: Vec<String> = redis::cmd("HGETALL").arg("h").query(&mut con).unwrap();
    assert_eq!(all, ["f0", "again"]);

    // One HSET of many pairs converts once it passes the limit.
    let mut c = server.raw();
    check(&mut c, "CONFIG SET hash-max-listpack-entries 4", "+OK\r\n");
    check(&mut c, "HSET m a 1 b 2 c 3 d 4", ":4\r\n");
    check(&mut c, "OBJECT ENCODING m", &bulk("listpack"));
    check(&mut c, "HSET m e 5 f 6", ":2\r\n");
    check(&mut c, "OBJECT ENCODING m", &bulk("hashtable"));
    check(&mut c, "HLEN m", ":6\r\n");
    // A lower limit applies at a hash's next write, even one that adds nothing.
    check(&mut c, "CONFIG SET hash-max-listpack-entries 8", "+OK\r\n");
    check(&mut c, "HSET n a 1 b 2 c 3 d 4 e 5", ":5\r\n");
    check(&mut c, "CONFIG SET hash-max-listpack-entries 4", "+OK\r\n");
    check(&mut c, "OBJECT ENCODING n", &bulk("listpack"));
    check(&mut c, "HSET n a 1", ":0\r\n");
    check(&mut c, "OBJECT ENCODING n", &bulk("hashtable"));
    // hash-max-ziplist-entries is the same option under its old name; 0 makes every hash
    // a table from its first field.
    check(&mut c, "CONFIG SET hash-max-ziplist-entries 0", "+OK\r\n");
    check(&mut c, "HSET z a 1", ":1\r\n");
    check(&mut c, "OBJECT ENCODING z", &bulk("hashtable"));
}

#[test]
fn a_long_field_or_value_makes_a_table() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    let at_limit = "x".repeat(64);
    let past_limit = "x".repeat(65);
    let mut con = server.client();
    hset(&mut con, "v", &[("f".into(), at_limit.clone())]);
    hset(&mut con, "k", &[(at_limit.clone(), "v".into())]);
    check(&mut c, "OBJECT ENCODING v", &bulk("listpack"));
    check(&mut c, "OBJECT ENCODING k", &bulk("listpack"));
    hset(&mut con, "v", &[("f".into(), past_limit.clone())]);
    hset(&mut con, "k", &[(past_limit.clone(), "v".into())]);
    check(&mut c, "OBJECT ENCODING v", &bulk("hashtable"));
    check(&mut c, "OBJECT ENCODING k", &bulk("hashtable"));
    // As Redis' 'Is a ziplist encoded Hash promoted on big payload?'.
    hset(&mut con, "p", &[("a".into(), "1".into())]);
    hset(&mut con, "p", &[("foo".into(), "a".repeat(1024))]);
    let object: String = redis::cmd("DEBUG")
        .arg("OBJECT")
        .arg("p")
        .query(&mut con)
        .unwrap();
    assert!(object.contains("encoding:hashtable"), "{object}");

    // HSETNX: a field that exists changes nothing, a long new one converts.
    hset(&mut con, "nx", &[("f".into(), "v".into())]);
    let set: i64 = redis::cmd("HSETNX")
        .arg("nx")
        .arg("f")
        .arg(&past_limit)
        .query(&mut con)
        .unwrap();
    assert_eq!(set, 0);
    check(&mut c, "OBJECT ENCODING nx", &bulk("listpack"));
    let set: i64 = redis::cmd("HSETNX")
        .arg("nx")
        .arg("g")
        .arg(&past_limit)
        .query(&mut con)
        .unwrap();
    assert_eq!(set, 1);
    check(&mut c, "OBJECT ENCODING nx", &bulk("hashtable"));
}

#[test]
fn counters_convert_where_redis_does() {
    // As Redis' 'HINCRBYFLOAT over hash-max-listpack-value encoded with a listpack'.
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "CONFIG SET hash-max-listpack-value 8", "+OK\r\n");
    check(&mut c, "HSET small tmp 0", ":1\r\n");
    check(&mut c, "HSET big tmp 0", ":1\r\n");
    check(&mut c, "HINCRBYFLOAT small tmp 0.000005", &bulk("0.000005"));
    check(&mut c, "HINCRBYFLOAT big tmp 0.0000005", &bulk("0.0000005"));
    check(&mut c, "OBJECT ENCODING small", &bulk("listpack"));
    check(&mut c, "OBJECT ENCODING big", &bulk("hashtable"));
    check(&mut c, "HINCRBYFLOAT small2 abcdefgh 1", &bulk("1"));
    check(&mut c, "HINCRBYFLOAT big2 abcdefghi 1", &bulk("1"));
    check(&mut c, "OBJECT ENCODING small2", &bulk("listpack"));
    check(&mut c, "OBJECT ENCODING big2", &bulk("hashtable"));
    check(&mut c, "HINCRBY small3 abcdefgh 1", ":1\r\n");
    check(&mut c, "HINCRBY big3 abcdefghi 1", ":1\r\n");
    check(&mut c, "OBJECT ENCODING small3", &bulk("listpack"));
    check(&mut c, "OBJECT ENCODING big3", &bulk("hashtable"));
    // A value that grows past the limit by increments converts too.
    check(&mut c, "HSET grow n 99999999", ":1\r\n");
    check(&mut c, "HINCRBY grow n 1", ":100000000\r\n");
    check(&mut c, "OBJECT ENCODING grow", &bulk("hashtable"));
}

#[test]
fn copy_dump_and_restore_keep_the_form_and_the_order() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    let mut con = server.client();
    check(&mut c, "HSET h z 1 a 2 m 3", ":3\r\n");
    check(&mut c, "COPY h h2", ":1\r\n");
    check(&mut c, "OBJECT ENCODING h2", &bulk("listpack"));
    check(&mut c, "HKEYS h2", &bulks(&["z", "a", "m"]));
    hset(&mut con, "big", &fields(600));
    check(&mut c, "COPY big big2", ":1\r\n");
    check(&mut c, "OBJECT ENCODING big2", &bulk("hashtable"));
    check(&mut c, "HLEN big2", ":600\r\n");

    let payload: Vec<u8> = redis::cmd("DUMP").arg("h").query(&mut con).unwrap();
    // RDB_TYPE_HASH_LISTPACK, written from the compact form.
    assert_eq!(payload[0], 16);
    let _: () = redis::cmd("RESTORE")
        .arg("r")
        .arg(0)
        .arg(&payload)
        .query(&mut con)
        .unwrap();
    check(&mut c, "OBJECT ENCODING r", &bulk("listpack"));
    check(&mut c, "HKEYS r", &bulks(&["z", "a", "m"]));
    // Restored under a lower limit, the same payload makes a table.
    check(&mut c, "CONFIG SET hash-max-listpack-entries 2", "+OK\r\n");
    let _: () = redis::cmd("RESTORE")
        .arg("r2")
        .arg(0)
        .arg(&payload)
        .query(&mut con)
        .unwrap();
    check(&mut c, "OBJECT ENCODING r2", &bulk("hashtable"));
    let restored: HashMap<String, String> =
        redis::cmd("HGETALL").arg("r2").query(&mut con).unwrap();
    assert_eq!(restored.len(), 3);
    assert_eq!(restored["m"], "3");

    let payload: Vec<u8> = redis::cmd("DUMP").arg("big").query(&mut con).unwrap();
    // RDB_TYPE_HASH.
    assert_eq!(payload[0], 4);
}

#[test]
fn various_integer_and_string_widths_survive_dump() {
    // As Redis' 'Hash ziplist of various encodings', which needs the compact form to hold
    // long strings when the thresholds allow them, in insertion order.
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    let mut con = server.client();
    check(
        &mut c,
        "CONFIG SET hash-max-listpack-entries 1000000000",
        "+OK\r\n",
    );
    check(
        &mut c,
        "CONFIG SET hash-max-listpack-value 1000000000",
        "+OK\r\n",
    );
    let pairs: Vec<(String, String)> = [
        ("ZIP_INT_8B", "127".to_string()),
        ("ZIP_INT_16B", "32767".to_string()),
        ("ZIP_INT_32B", "2147483647".to_string()),
        ("ZIP_INT_64B", "9223372036854775808".to_string()),
        ("ZIP_INT_IMM_MIN", "0".to_string()),
        ("ZIP_INT_IMM_MAX", "12".to_string()),
        ("ZIP_STR_06B", "x".repeat(31)),
        ("ZIP_STR_14B", "x".repeat(8191)),
        ("ZIP_STR_32B", "x".repeat(65535)),
    ]
    .into_iter()
    .map(|(f, v)| (f.to_string(), v))
    .collect();
    for pair in &pairs {
        hset(&mut con, "k", std::slice::from_ref(pair));
    }
    check(&mut c, "OBJECT ENCODING k", &bulk("listpack"));
    let listed: Vec<(String, String)> = redis::cmd("HGETALL").arg("k").query(&mut con).unwrap();
    assert_eq!(listed, pairs);
    let payload: Vec<u8> = redis::cmd("DUMP").arg("k").query(&mut con).unwrap();
    check(&mut c, "CONFIG SET hash-max-listpack-entries 2", "+OK\r\n");
    let _: () = redis::cmd("RESTORE")
        .arg("kk")
        .arg(0)
        .arg(&payload)
        .query(&mut con)
        .unwrap();
    check(&mut c, "OBJECT ENCODING kk", &bulk("hashtable"));
    let restored: HashMap<String, String> =
        redis::cmd("HGETALL").arg("kk").query(&mut con).unwrap();
    assert_eq!(restored, pairs.iter().cloned().collect());
}

#[test]
fn a_restart_keeps_the_order_and_loads_what_fits_compact() {
    let server = TestServer::start(&["--appendonly", "no", "--save", ""]);
    let mut con = server.client();
    let mut c = server.raw();
    check(&mut c, "HSET small q 1 b 2 x 3", ":3\r\n");
    // Large now, but small enough to load compact: Redis loads it as a listpack.
    check(&mut c, "CONFIG SET hash-max-listpack-entries 2", "+OK\r\n");
    check(&mut c, "HSET shrunk a 1 b 2 c 3", ":3\r\n");
    check(&mut c, "HDEL shrunk c", ":1\r\n");
    check(&mut c, "OBJECT ENCODING shrunk", &bulk("hashtable"));
    check(
        &mut c,
        "CONFIG SET hash-max-listpack-entries 512",
        "+OK\r\n",
    );
    hset(&mut con, "big", &fields(1000));
    let dir = server.shutdown_keep_files("SAVE");

    let server = TestServer::start_in(Some(&dir), &["--appendonly", "no", "--save", ""]);
    let mut c = server.raw();
    check(&mut c, "OBJECT ENCODING small", &bulk("listpack"));
    check(&mut c, "HKEYS small", &bulks(&["q", "b", "x"]));
    check(&mut c, "OBJECT ENCODING shrunk", &bulk("listpack"));
    check(&mut c, "HLEN shrunk", ":2\r\n");
    check(&mut c, "OBJECT ENCODING big", &bulk("hashtable"));
    check(&mut c, "HLEN big", ":1000\r\n");
    check(&mut c, "HGET big f999", &bulk("v999"));
}

#[test]
fn memory_usage_follows_the_form() {
    let server = TestServer::start(&[]);
    let mut con = server.client();
    hset(&mut con, "h", &fields(10));
    let compact = memory_usage(&mut con, "h");
    // Ten short pairs in one pack: far from the 100-odd bytes a table entry costs.
    assert!(compact < 300, "{compact}");
    hset(&mut con, "h", &[("long".into(), "x".repeat(100))]);
    assert_eq!(encoding(&mut con, "h"), "hashtable");
    let large = memory_usage(&mut con, "h");
    assert!(large > compact + 100, "{compact} then {large}");
}

#[test]
fn hrandfield_on_a_table_picks_every_field_fairly() {
    let server = TestServer::start(&[]);
    let mut con = server.client();
    let mut c = server.raw();
    check(&mut c, "CONFIG SET hash-max-listpack-entries 0", "+OK\r\n");
    hset(&mut con, "h", &fields(10));
    assert_eq!(encoding(&mut con, "h"), "hashtable");
    let names: HashSet<String> = fields(10).into_iter().map(|(f, _)| f).collect();

    // Without a count, and with repeats: every field turns up, roughly evenly.
    let mut counts: HashMap<String, usize> = HashMap::new();
    for _ in 0..200 {
        let field: String = redis::cmd("HRANDFIELD").arg("h").query(&mut con).unwrap();
        *counts.entry(field).or_default() += 1;
    }
    let picks: Vec<String> = redis::cmd("HRANDFIELD")
        .arg("h")
        .arg(-5000)
        .query(&mut con)
        .unwrap();
    assert_eq!(picks.len(), 5000);
    for field in picks {
        *counts.entry(field).or_default() += 1;
    }
    assert_eq!(counts.keys().cloned().collect::<HashSet<_>>(), names);
    for (field, n) in &counts {
        // 520 expected for each; this bound fails by chance far less than once in 10^9.
        assert!((350..700).contains(n), "{field}: {n}");
    }

    // Distinct picks: both strategies (a copy thinned out, and draws until enough).
    for count in [9, 2] {
        let mut seen = HashSet::new();
        for _ in 0..100 {
            let got: Vec<String> = redis::cmd("HRANDFIELD")
                .arg("h")
                .arg(count)
                .arg("WITHVALUES")
                .query(&mut con)
                .unwrap();
            assert_eq!(got.len(), 2 * count);
            let fields: HashSet<&String> = got.iter().step_by(2).collect();
            assert_eq!(fields.len(), count);
            for pair in got.chunks(2) {
                assert_eq!(pair[0][1..], pair[1][1..]);
                seen.insert(pair[0].clone());
            }
        }
        assert_eq!(seen, names);
    }
    let all: Vec<String> = redis::cmd("HRANDFIELD")
        .arg("h")
        .arg(100)
        .query(&mut con)
        .unwrap();
    assert_eq!(all.into_iter().collect::<HashSet<_>>(), names);
}

#[test]
fn a_big_table_serves_random_fields_after_most_are_deleted() {
    let server = TestServer::start(&[]);
    let mut con = server.client();
    hset(&mut con, "h", &fields(20_000));
    let doomed: Vec<String> = (3..20_000).map(|i| format!("f{i}")).collect();
    for chunk in doomed.chunks(1000) {
        let _: i64 = redis::cmd("HDEL")
            .arg("h")
            .arg(chunk)
            .query(&mut con)
            .unwrap();
    }
    let picks: Vec<String> = redis::cmd("HRANDFIELD")
        .arg("h")
        .arg(-300)
        .query(&mut con)
        .unwrap();
    let seen: HashSet<String> = picks.into_iter().collect();
    assert_eq!(seen, ["f0", "f1", "f2"].map(String::from).into());
    let reply: Value = redis::cmd("HRANDFIELD")
        .arg("h")
        .arg(2)
        .query(&mut con)
        .unwrap();
    let Value::Array(items) = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(items.len(), 2);
}
