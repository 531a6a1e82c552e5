//! The set commands against the real binary: replies byte for byte, RESP2 and RESP3.

mod common;

use std::collections::HashSet;

use common::replies::{NOT_INTEGER, SYNTAX, WRONGTYPE};
use common::{bulk, bulks, check, resp3, TestServer};

fn members(con: &mut redis::Connection, key: &str) -> HashSet<String> {
    redis::cmd("SMEMBERS").arg(key).query(con).unwrap()
}

fn set_of(items: &[&str]) -> HashSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn sadd_srem_scard_and_membership() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "SADD s a b c a", ":3\r\n");
    check(&mut c, "SADD s a d", ":1\r\n");
    check(&mut c, "SADD s a", ":0\r\n");
    check(&mut c, "SCARD s", ":4\r\n");
    check(&mut c, "SCARD missing", ":0\r\n");
    check(&mut c, "SISMEMBER s a", ":1\r\n");
    check(&mut c, "SISMEMBER s z", ":0\r\n");
    check(&mut c, "SISMEMBER missing a", ":0\r\n");
    check(&mut c, "SMISMEMBER s a z d", "*3\r\n:1\r\n:0\r\n:1\r\n");
    check(&mut c, "SMISMEMBER missing a b", "*2\r\n:0\r\n:0\r\n");
    check(&mut c, "SREM s a z", ":1\r\n");
    check(&mut c, "SREM missing a", ":0\r\n");
    check(&mut c, "SREM s b c d e", ":3\r\n");
    check(&mut c, "EXISTS s", ":0\r\n");
    check(
        &mut c,
        "SADD s",
        "-ERR wrong number of arguments for 'sadd' command\r\n",
    );
    check(
        &mut c,
        "SMISMEMBER s",
        "-ERR wrong number of arguments for 'smismember' command\r\n",
    );
    // Wrong types.
    check(&mut c, "SET str x", "+OK\r\n");
    for command in [
        "SADD str a",
        "SREM str a",
        "SCARD str",
        "SISMEMBER str a",
        "SMISMEMBER str a",
        "SMEMBERS str",
        "SRANDMEMBER str",
        "SRANDMEMBER str 2",
        "SPOP str",
        "SPOP str 2",
        "SSCAN str 0",
        "SINTER str",
        "SUNION str",
        "SDIFF str",
        "SINTERCARD 1 str",
    ] {
        check(&mut c, command, WRONGTYPE);
    }
    check(&mut c, "TYPE s2", "+none\r\n");
    check(&mut c, "SADD s2 1", ":1\r\n");
    check(&mut c, "TYPE s2", "+set\r\n");
}

#[test]
fn smembers_order_and_resp3() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    // Integer sets list in ascending order, as Redis' intset does.
    check(&mut c, "SADD nums 30 -2 10 7", ":4\r\n");
    check(&mut c, "SMEMBERS nums", &bulks(&["-2", "7", "10", "30"]));
    check(&mut c, "SMEMBERS missing", "*0\r\n");
    check(&mut c, "OBJECT ENCODING nums", &bulk("intset"));
    check(&mut c, "SADD nums x", ":1\r\n");
    check(&mut c, "OBJECT ENCODING nums", &bulk("hashtable"));
    let mut c3 = resp3(&server);
    check(&mut c3, "SMEMBERS missing", "~0\r\n");
    check(&mut c3, "SADD one a", ":1\r\n");
    check(&mut c3, "SMEMBERS one", "~1\r\n$1\r\na\r\n");
    check(&mut c3, "SINTER one", "~1\r\n$1\r\na\r\n");
    check(&mut c3, "SUNION one missing", "~1\r\n$1\r\na\r\n");
    check(&mut c3, "SDIFF one missing", "~1\r\n$1\r\na\r\n");
    check(&mut c3, "SINTER one missing", "~0\r\n");
    check(&mut c3, "SRANDMEMBER one 5", "*1\r\n$1\r\na\r\n");
    check(&mut c3, "SRANDMEMBER missing", "_\r\n");
    check(&mut c3, "SPOP missing", "_\r\n");
    check(&mut c3, "SPOP missing 2", "~0\r\n");
    check(&mut c3, "SPOP one 0", "~0\r\n");
    check(&mut c3, "SPOP one 3", "~1\r\n$1\r\na\r\n");
    check(&mut c3, "EXISTS one", ":0\r\n");
}

#[test]
fn srandmember_counts() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    let mut con = server.client();
    check(&mut c, "SRANDMEMBER missing", "$-1\r\n");
    check(&mut c, "SRANDMEMBER missing 5", "*0\r\n");
    check(&mut c, "SRANDMEMBER missing -5", "*0\r\n");
    check(&mut c, "SADD s a b c d e", ":5\r\n");
    check(&mut c, "SRANDMEMBER s 0", "*0\r\n");
    check(&mut c, "SRANDMEMBER s x", NOT_INTEGER);
    check(&mut c, "SRANDMEMBER s 1 2", SYNTAX);
    check(
        &mut c,
        "SRANDMEMBER s -9223372036854775808",
        "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n",
    );
    let all = set_of(&["a", "b", "c", "d", "e"]);
    let one: String = redis::cmd("SRANDMEMBER").arg("s").query(&mut con).unwrap();
    assert!(all.contains(&one));
    // Positive: distinct members, at most the set's size.
    for count in [1, 3, 5, 10] {
        let got: Vec<String> = redis::cmd("SRANDMEMBER")
            .arg("s")
            .arg(count)
            .query(&mut con)
            .unwrap();
        assert_eq!(got.len(), count.min(5));
        let unique: HashSet<String> = got.iter().cloned().collect();
        assert_eq!(unique.len(), got.len());
        assert!(unique.is_subset(&all));
    }
    // Negative: exactly |count| picks, repeats allowed, and over enough picks every member
    // shows up.
    let got: Vec<String> = redis::cmd("SRANDMEMBER")
        .arg("s")
        .arg(-1000)
        .query(&mut con)
        .unwrap();
    assert_eq!(got.len(), 1000);
    assert_eq!(got.iter().cloned().collect::<HashSet<_>>(), all);
    // Nothing was removed.
    check(&mut c, "SCARD s", ":5\r\n");
}

#[test]
fn spop_variants() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    let mut con = server.client();
    check(&mut c, "SPOP missing", "$-1\r\n");
    check(&mut c, "SPOP missing 3", "*0\r\n");
    check(&mut c, "SADD s a b c d e f", ":6\r\n");
    check(
        &mut c,
        "SPOP s -1",
        "-ERR value is out of range, must be positive\r\n",
    );
    check(
        &mut c,
        "SPOP s x",
        "-ERR value is out of range, must be positive\r\n",
    );
    check(&mut c, "SPOP s 1 2", SYNTAX);
    check(&mut c, "SPOP s 0", "*0\r\n");
    let before = members(&mut con, "s");
    let one: String = redis::cmd("SPOP").arg("s").query(&mut con).unwrap();
    assert!(before.contains(&one));
    let two: Vec<String> = redis::cmd("SPOP").arg("s").arg(2).query(&mut con).unwrap();
    assert_eq!(two.len(), 2);
    let after = members(&mut con, "s");
    assert_eq!(after.len(), 3);
    let mut popped: HashSet<String> = two.into_iter().collect();
    popped.insert(one);
    assert_eq!(popped.len(), 3);
    assert!(popped.is_disjoint(&after));
    assert_eq!(
        popped.union(&after).cloned().collect::<HashSet<_>>(),
        before
    );
    // More than there are: everything, and the key goes.
    let rest: Vec<String> = redis::cmd("SPOP")
        .arg("s")
        .arg(100)
        .query(&mut con)
        .unwrap();
    assert_eq!(rest.into_iter().collect::<HashSet<_>>(), after);
    check(&mut c, "EXISTS s", ":0\r\n");
    // A single pop of the last member removes the key too.
    check(&mut c, "SADD t 5", ":1\r\n");
    check(&mut c, "SPOP t", &bulk("5"));
    check(&mut c, "EXISTS t", ":0\r\n");
}

fn scan_all(con: &mut redis::Connection, command: &str, key: &str, count: usize) -> Vec<String> {
    let mut cursor = "0".to_string();
    let mut found = Vec::new();
    let mut steps = 0;
    loop {
        let (next, items): (String, Vec<String>) = redis::cmd(command)
            .arg(key)
            .arg(&cursor)
            .arg("COUNT")
            .arg(count)
            .query(con)
            .unwrap();
        found.extend(items);
        steps += 1;
        assert!(steps < 100_000, "scan never ended");
        if next == "0" {
            return found;
        }
        cursor = next;
    }
}

#[test]
fn sscan_walks_every_member_once() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    let mut con = server.client();
    check(&mut c, "SSCAN missing 0", "*2\r\n$1\r\n0\r\n*0\r\n");
    // A missing key answers before the options are read, as in Redis.
    check(&mut c, "SSCAN missing 0 COUNT 0", "*2\r\n$1\r\n0\r\n*0\r\n");
    check(&mut c, "SSCAN missing x", "-ERR invalid cursor\r\n");
    check(&mut c, "SADD small 3 1 2", ":3\r\n");
    check(
        &mut c,
        "SSCAN small 0",
        "*2\r\n$1\r\n0\r\n*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n",
    );
    check(
        &mut c,
        "SSCAN small 0 MATCH 2",
        "*2\r\n$1\r\n0\r\n*1\r\n$1\r\n2\r\n",
    );
    check(&mut c, "SSCAN small 0 COUNT 0", SYNTAX);
    check(&mut c, "SSCAN small 0 COUNT x", NOT_INTEGER);
    check(&mut c, "SSCAN small 0 MATCH", SYNTAX);
    check(&mut c, "SSCAN small 0 TYPE set", SYNTAX);
    // A big set is walked with a cursor.
    let items: Vec<String> = (0..1000).map(|i| format!("ele:{i}")).collect();
    let _: i64 = redis::cmd("SADD")
        .arg("big")
        .arg(&items)
        .query(&mut con)
        .unwrap();
    for count in [1, 10, 100, 5000] {
        let found = scan_all(&mut con, "SSCAN", "big", count);
        assert_eq!(found.len(), 1000, "count {count}");
        assert_eq!(found.into_iter().collect::<HashSet<_>>().len(), 1000);
    }
    let (_, first): (String, Vec<String>) = redis::cmd("SSCAN")
        .arg("big")
        .arg(0)
        .query(&mut con)
        .unwrap();
    assert!(first.len() >= 10 && first.len() < 1000);
    let (next, matched): (String, Vec<String>) = redis::cmd("SSCAN")
        .arg("big")
        .arg(0)
        .arg("MATCH")
        .arg("ele:99*")
        .arg("COUNT")
        .arg(100_000)
        .query(&mut con)
        .unwrap();
    assert_eq!(next, "0");
    assert_eq!(matched.len(), 11);
}

#[test]
fn sscan_survives_removals_mid_walk() {
    let server = TestServer::start(&[]);
    let mut con = server.client();
    let items: Vec<i64> = (0..600).collect();
    let _: i64 = redis::cmd("SADD")
        .arg("set")
        .arg("x")
        .arg(&items)
        .query(&mut con)
        .unwrap();
    let mut found = HashSet::new();
    let mut cursor = "0".to_string();
    let mut step = 0;
    loop {
        let (next, batch): (String, Vec<String>) = redis::cmd("SSCAN")
            .arg("set")
            .arg(&cursor)
            .query(&mut con)
            .unwrap();
        found.extend(batch);
        step += 1;
        if step == 3 {
            let _: i64 = redis::cmd("SREM")
                .arg("set")
                .arg(&items[100..])
                .query(&mut con)
                .unwrap();
        }
        if next == "0" {
            break;
        }
        cursor = next;
    }
    for i in 0..100 {
        assert!(found.contains(&i.to_string()), "missing {i}");
    }
}

#[test]
fn smove_cases() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "SADD src a b", ":2\r\n");
    check(&mut c, "SADD dst c", ":1\r\n");
    check(&mut c, "SMOVE src dst a", ":1\r\n");
    check(&mut c, "SMOVE src dst zz", ":0\r\n");
    check(&mut c, "SMOVE missing dst a", ":0\r\n");
    check(&mut c, "SISMEMBER dst a", ":1\r\n");
    check(&mut c, "SMOVE src src b", ":1\r\n");
    check(&mut c, "SMOVE src src zz", ":0\r\n");
    // Moving the last member deletes the source and creates the destination.
    check(&mut c, "SMOVE src fresh b", ":1\r\n");
    check(&mut c, "EXISTS src", ":0\r\n");
    check(&mut c, "SMEMBERS fresh", &bulks(&["b"]));
    // Already in the destination: removed from the source only.
    check(&mut c, "SADD src2 c", ":1\r\n");
    check(&mut c, "SMOVE src2 dst c", ":1\r\n");
    check(&mut c, "EXISTS src2", ":0\r\n");
    check(&mut c, "SCARD dst", ":2\r\n");
    check(&mut c, "SET str x", "+OK\r\n");
    check(&mut c, "SMOVE str dst a", WRONGTYPE);
    check(&mut c, "SMOVE dst str a", WRONGTYPE);
    // A missing source answers 0 before the destination's type is checked.
    check(&mut c, "SMOVE missing str a", ":0\r\n");
}

#[test]
fn intersections_unions_differences() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    let mut con = server.client();
    check(&mut c, "SADD a 1 2 3 4 x", ":5\r\n");
    check(&mut c, "SADD b 3 4 5 x", ":4\r\n");
    check(&mut c, "SADD c 4 x 9", ":3\r\n");
    assert_eq!(
        redis::cmd("SINTER")
            .arg(&["a", "b", "c"])
            .query::<HashSet<String>>(&mut con)
            .unwrap(),
        set_of(&["4", "x"])
    );
    assert_eq!(
        redis::cmd("SUNION")
            .arg(&["a", "b", "missing"])
            .query::<HashSet<String>>(&mut con)
            .unwrap(),
        set_of(&["1", "2", "3", "4", "5", "x"])
    );
    assert_eq!(
        redis::cmd("SDIFF")
            .arg(&["a", "b", "missing"])
            .query::<HashSet<String>>(&mut con)
            .unwrap(),
        set_of(&["1", "2"])
    );
    check(&mut c, "SDIFF a a", "*0\r\n");
    check(&mut c, "SDIFF missing a", "*0\r\n");
    check(&mut c, "SINTER a missing", "*0\r\n");
    // Integer-only results list in ascending order.
    check(&mut c, "SDIFF a c b", &bulks(&["1", "2"]));
    check(&mut c, "SINTERCARD 3 a b c", ":2\r\n");
    check(&mut c, "SINTERCARD 2 a b LIMIT 1", ":1\r\n");
    check(&mut c, "SINTERCARD 2 a b LIMIT 0", ":3\r\n");
    check(&mut c, "SINTERCARD 1 missing", ":0\r\n");
    check(
        &mut c,
        "SINTERCARD 0 a",
        "-ERR numkeys should be greater than 0\r\n",
    );
    check(
        &mut c,
        "SINTERCARD x a",
        "-ERR numkeys should be greater than 0\r\n",
    );
    check(
        &mut c,
        "SINTERCARD 3 a b",
        "-ERR Number of keys can't be greater than number of args\r\n",
    );
    check(&mut c, "SINTERCARD 1 a b", SYNTAX);
    check(&mut c, "SINTERCARD 1 a LIMIT", SYNTAX);
    check(
        &mut c,
        "SINTERCARD 1 a LIMIT -1",
        "-ERR LIMIT can't be negative\r\n",
    );
    check(
        &mut c,
        "SINTERCARD 1 a LIMIT x",
        "-ERR LIMIT can't be negative\r\n",
    );
    // WRONGTYPE wins over a missing key anywhere in the list.
    check(&mut c, "SET str x", "+OK\r\n");
    check(&mut c, "SINTER missing str", WRONGTYPE);
    check(&mut c, "SINTERCARD 2 str missing", WRONGTYPE);
    check(&mut c, "SDIFF missing str", WRONGTYPE);
    check(&mut c, "SUNION a str", WRONGTYPE);
    check(&mut c, "SINTERSTORE dst missing str", WRONGTYPE);

    // Stores replace the destination (TTL included) or delete it when empty.
    check(&mut c, "SET dst old", "+OK\r\n");
    check(&mut c, "EXPIRE dst 100", ":1\r\n");
    check(&mut c, "SINTERSTORE dst a b", ":3\r\n");
    check(&mut c, "TTL dst", ":-1\r\n");
    assert_eq!(members(&mut con, "dst"), set_of(&["3", "4", "x"]));
    check(&mut c, "SUNIONSTORE dst a b", ":6\r\n");
    check(&mut c, "SDIFFSTORE dst a b", ":2\r\n");
    check(&mut c, "SMEMBERS dst", &bulks(&["1", "2"]));
    check(&mut c, "SINTERSTORE dst a missing", ":0\r\n");
    check(&mut c, "EXISTS dst", ":0\r\n");
    check(&mut c, "SET dst old", "+OK\r\n");
    check(&mut c, "SUNIONSTORE dst missing", ":0\r\n");
    check(&mut c, "EXISTS dst", ":0\r\n");
    check(&mut c, "SET dst old", "+OK\r\n");
    check(&mut c, "SDIFFSTORE dst a a", ":0\r\n");
    check(&mut c, "EXISTS dst", ":0\r\n");
    // The destination may be one of the sources.
    check(&mut c, "SUNIONSTORE a a c", ":6\r\n");
    check(
        &mut c,
        "SINTERSTORE d",
        "-ERR wrong number of arguments for 'sinterstore' command\r\n",
    );
}

#[test]
fn many_keys_on_many_shards() {
    // Keys spread over shards: every multi-key command must lock them all.
    let server = TestServer::start(&[]);
    let mut con = server.client();
    let keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
    for key in &keys {
        let _: i64 = redis::cmd("SADD")
            .arg(key)
            .arg("common")
            .arg(key)
            .query(&mut con)
            .unwrap();
    }
    let shared: Vec<String> = redis::cmd("SINTER").arg(&keys).query(&mut con).unwrap();
    assert_eq!(shared, vec!["common".to_string()]);
    let n: i64 = redis::cmd("SINTERCARD")
        .arg(keys.len())
        .arg(&keys)
        .query(&mut con)
        .unwrap();
    assert_eq!(n, 1);
    let n: i64 = redis::cmd("SUNIONSTORE")
        .arg("all")
        .arg(&keys)
        .query(&mut con)
        .unwrap();
    assert_eq!(n, 41);
    let n: i64 = redis::cmd("SDIFFSTORE")
        .arg("only0")
        .arg(&keys)
        .query(&mut con)
        .unwrap();
    assert_eq!(n, 1);
    for (i, key) in keys.iter().enumerate().skip(1) {
        let moved: i64 = redis::cmd("SMOVE")
            .arg(key)
            .arg("k0")
            .arg(key)
            .query(&mut con)
            .unwrap();
        assert_eq!(moved, 1, "{i}");
    }
    let n: i64 = redis::cmd("SCARD").arg("k0").query(&mut con).unwrap();
    assert_eq!(n, 41);
}

#[test]
fn specs_match_redis() {
    use latch_server::spec::{acl, flag, keyflag, BeginSearch, FindKeys};
    let table = latch_server::table::table();
    let expected = [
        ("sadd", -3, flag::WRITE | flag::DENYOOM | flag::FAST),
        ("srem", -3, flag::WRITE | flag::FAST),
        ("smembers", 2, flag::READONLY),
        ("scard", 2, flag::READONLY | flag::FAST),
        ("sismember", 3, flag::READONLY | flag::FAST),
        ("smismember", -3, flag::READONLY | flag::FAST),
        ("srandmember", -2, flag::READONLY),
        ("spop", -2, flag::WRITE | flag::FAST),
        ("sscan", -3, flag::READONLY),
        ("smove", 4, flag::WRITE | flag::FAST),
        ("sinter", -2, flag::READONLY),
        ("sintercard", -3, flag::READONLY),
        ("sinterstore", -3, flag::WRITE | flag::DENYOOM),
        ("sunion", -2, flag::READONLY),
        ("sunionstore", -3, flag::WRITE | flag::DENYOOM),
        ("sdiff", -2, flag::READONLY),
        ("sdiffstore", -3, flag::WRITE | flag::DENYOOM),
    ];
    for (name, arity, flags) in expected {
        let spec = table.lookup(name.as_bytes()).expect(name).spec;
        assert_eq!(spec.arity, arity, "{name}");
        assert_eq!(spec.flags, flags, "{name}");
        assert_eq!(spec.group.name(), "set", "{name}");
        assert_ne!(spec.acl_categories() & acl::SET, 0, "{name}");
        assert!(!spec.key_specs.is_empty(), "{name}");
    }
    let smove = table.lookup(b"smove").unwrap().spec;
    assert_eq!(smove.key_specs.len(), 2);
    assert_eq!(
        smove.key_specs[0].flags,
        keyflag::RW | keyflag::ACCESS | keyflag::DELETE
    );
    let card = table.lookup(b"sintercard").unwrap().spec;
    assert!(matches!(card.key_specs[0].begin, BeginSearch::Index(1)));
    assert!(matches!(
        card.key_specs[0].find,
        FindKeys::Keynum {
            key_num_index: 0,
            first_key: 1,
            key_step: 1
        }
    ));
    assert!(card.movable_keys());
}
