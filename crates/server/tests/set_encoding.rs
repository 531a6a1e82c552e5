//! Set encodings against redis-server 7.0 (Debian's package): the same commands run on
//! both servers and the replies must match: OBJECT ENCODING at and across the intset
//! threshold (default and CONFIG SET), the order an intset lists in, the shapes of SPOP
//! and SRANDMEMBER replies, RDB reloads, and DUMP payloads moving both ways.

use latch_testkit::Server;
use redis::Value;

struct Pair {
    latch: redis::Connection,
    redis: redis::Connection,
    latch_server: Server,
    _redis_server: Server,
}

fn connect(server: &Server) -> redis::Connection {
    redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap()
}

impl Pair {
    fn start() -> Pair {
        let latch = Server::latch(&[]);
        let redis = Server::redis(&[]);
        Pair {
            latch: connect(&latch),
            redis: connect(&redis),
            latch_server: latch,
            _redis_server: redis,
        }
    }

    fn both(&mut self, args: &[&str]) -> (Value, Value) {
        let run = |conn: &mut redis::Connection| {
            let mut cmd = redis::cmd(args[0]);
            for arg in &args[1..] {
                cmd.arg(*arg);
            }
            cmd.query::<Value>(conn)
                .unwrap_or_else(|e| Value::SimpleString(format!("error: {e}")))
        };
        (run(&mut self.latch), run(&mut self.redis))
    }

    /// Runs `args` on both servers; the replies must be identical.
    fn same(&mut self, args: &[&str]) -> Value {
        let (latch, redis) = self.both(args);
        assert_eq!(latch, redis, "{args:?}");
        latch
    }

    /// Runs `args` on both; the replies must hold the same elements (a hashtable lists in
    /// no particular order).
    fn same_sorted(&mut self, args: &[&str]) {
        let (latch, redis) = self.both(args);
        assert_eq!(sorted(latch), sorted(redis), "{args:?}");
    }

    /// Reloads both datasets from an RDB file: Latch saves and restarts (it has no DEBUG
    /// RELOAD), redis-server reloads.
    fn reload(&mut self) {
        let saved: String = redis::cmd("SAVE").query(&mut self.latch).unwrap();
        assert_eq!(saved, "OK");
        self.latch_server.restart(&[]);
        self.latch_server.wait_for_pong();
        self.latch = connect(&self.latch_server);
        let reloaded: String = redis::cmd("DEBUG")
            .arg("RELOAD")
            .query(&mut self.redis)
            .unwrap();
        assert_eq!(reloaded, "OK");
    }

    fn encoding_is(&mut self, key: &str, expected: &str) {
        let value = self.same(&["OBJECT", "ENCODING", key]);
        assert_eq!(text(&value), expected, "{key}");
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

fn items(value: Value) -> Vec<String> {
    match value {
        Value::Array(items) | Value::Set(items) => items.iter().map(text).collect(),
        other => panic!("not an array: {other:?}"),
    }
}

fn sorted(value: Value) -> Vec<String> {
    let mut listed = items(value);
    listed.sort();
    listed
}

fn sadd_range(pair: &mut Pair, key: &str, range: std::ops::Range<i64>) {
    let members: Vec<String> = range.map(|n| n.to_string()).collect();
    let mut args = vec!["SADD", key];
    args.extend(members.iter().map(String::as_str));
    pair.same(&args);
}

#[test]
fn encodings_and_orders_match_redis() {
    let mut pair = Pair::start();
    // An intset lists ascending, whatever the insertion order and width.
    pair.same(&["SADD", "s", "3", "1", "-2"]);
    pair.encoding_is("s", "intset");
    pair.same(&["SADD", "s", "70000", "-9223372036854775808", "0"]);
    pair.same(&["SMEMBERS", "s"]);
    pair.same(&["SSCAN", "s", "0", "COUNT", "2"]);
    pair.same(&["SRANDMEMBER", "s", "100"]);
    pair.same(&["SISMEMBER", "s", "70000"]);
    pair.same(&["SISMEMBER", "s", "070000"]);
    // Non-canonical integers are strings.
    pair.same(&["SADD", "t", "1", "01"]);
    pair.encoding_is("t", "hashtable");
    // A string member converts, and removing it does not convert back.
    pair.same(&["SADD", "s", "a"]);
    pair.encoding_is("s", "hashtable");
    pair.same(&["SREM", "s", "a"]);
    pair.encoding_is("s", "hashtable");
    pair.same_sorted(&["SMEMBERS", "s"]);
    // SUNION and SDIFF list what is an intset again in ascending order.
    pair.same(&["SUNION", "s"]);
    pair.same(&["SDIFF", "s", "nothing"]);

    // The default threshold: 512 integers stay an intset, 513 do not.
    sadd_range(&mut pair, "big", 0..512);
    pair.encoding_is("big", "intset");
    pair.same(&["SADD", "big", "512"]);
    pair.encoding_is("big", "hashtable");
    pair.same(&["SREM", "big", "512"]);
    pair.encoding_is("big", "hashtable");

    // STORE results start as an intset again.
    pair.same(&["SUNIONSTORE", "u", "big"]);
    pair.encoding_is("u", "intset");
    pair.same(&["SMEMBERS", "u"]);
    pair.same(&["SINTERSTORE", "i", "big", "s"]);
    pair.encoding_is("i", "intset");
    pair.same(&["SMEMBERS", "i"]);
    pair.same(&["SADD", "mixed", "1", "2", "x"]);
    pair.same(&["SDIFFSTORE", "d", "mixed", "x-set"]);
    pair.encoding_is("d", "hashtable");
    pair.same(&["SADD", "x-set", "x"]);
    pair.same(&["SDIFFSTORE", "d", "mixed", "x-set"]);
    pair.encoding_is("d", "intset");
    pair.same(&["SMEMBERS", "d"]);
    // SDIFF's second algorithm copies the first set, then removes: a hashtable stays one.
    sadd_range(&mut pair, "m2", 0..20);
    pair.same(&["SADD", "m2", "y"]);
    pair.same(&["SADD", "y1", "y"]);
    pair.same(&["SADD", "y2", "y"]);
    pair.same(&["SDIFFSTORE", "d2", "m2", "y1", "y2"]);
    pair.encoding_is("d2", "hashtable");

    // SMOVE creates the destination in the form its first member needs.
    pair.same(&["SMOVE", "mixed", "n1", "1"]);
    pair.encoding_is("n1", "intset");
    pair.same(&["SMOVE", "mixed", "n2", "x"]);
    pair.encoding_is("n2", "hashtable");

    // CONFIG SET moves the threshold for later writes.
    pair.same(&["CONFIG", "SET", "set-max-intset-entries", "4"]);
    sadd_range(&mut pair, "c", 0..4);
    pair.encoding_is("c", "intset");
    pair.encoding_is("big", "hashtable");
    pair.same(&["SADD", "c", "4"]);
    pair.encoding_is("c", "hashtable");
    pair.same(&["SUNIONSTORE", "c5", "c"]);
    pair.encoding_is("c5", "hashtable");
    pair.same(&["SUNIONSTORE", "c4", "n1", "i"]);
    pair.same(&["CONFIG", "SET", "set-max-intset-entries", "512"]);

    // Reloading re-encodes: a hashtable of few integers loads as an intset.
    pair.reload();
    for key in ["s", "big", "u", "i", "d", "d2", "n1", "n2", "c", "c5", "t"] {
        let encoding = pair.same(&["OBJECT", "ENCODING", key]);
        assert!(matches!(text(&encoding).as_str(), "intset" | "hashtable"));
        pair.same_sorted(&["SMEMBERS", key]);
    }
    pair.same(&["SMEMBERS", "s"]);
}

#[test]
fn random_replies_have_redis_shapes() {
    let mut pair = Pair::start();
    sadd_range(&mut pair, "ints", 0..100);
    let strings: Vec<String> = (0..100).map(|n| format!("m{n}")).collect();
    let mut args = vec!["SADD", "strs"];
    args.extend(strings.iter().map(String::as_str));
    pair.same(&args);
    for key in ["ints", "strs"] {
        pair.same(&["SRANDMEMBER", key, "0"]);
        pair.same(&["SRANDMEMBER", "missing", "5"]);
        pair.same(&["SPOP", key, "0"]);
        pair.same(&["SPOP", "missing", "5"]);
        pair.same(&["SPOP", "missing"]);
        let (latch, redis) = pair.both(&["SRANDMEMBER", key, "-250"]);
        assert_eq!(items(latch).len(), items(redis).len());
        for count in ["5", "40", "99"] {
            let (latch, _) = pair.both(&["SRANDMEMBER", key, count]);
            let listed = items(latch);
            let distinct: std::collections::HashSet<&String> = listed.iter().collect();
            assert_eq!(listed.len(), count.parse::<usize>().unwrap());
            assert_eq!(distinct.len(), listed.len());
        }
    }
    // SPOP with a count near the size (Redis' CASE 3) replies in the set's order: ascending
    // for an intset; the rest stays.
    let (latch, _) = pair.both(&["SPOP", "ints", "90"]);
    let popped: Vec<i64> = items(latch).iter().map(|m| m.parse().unwrap()).collect();
    assert_eq!(popped.len(), 90);
    assert!(popped.windows(2).all(|w| w[0] < w[1]), "{popped:?}");
    let (latch, _) = pair.both(&["SCARD", "ints"]);
    assert_eq!(latch, Value::Int(10));
    // A hashtable of integers popped down to a few is rebuilt as an intset, as Redis does.
    sadd_range(&mut pair, "bigints", 0..600);
    pair.both(&["SPOP", "bigints", "590"]);
    pair.encoding_is("bigints", "intset");
    // Popping everything lists the set and deletes it.
    let (latch, redis) = pair.both(&["SPOP", "ints", "1000"]);
    assert_eq!(items(latch).len(), 10);
    assert_eq!(items(redis).len(), 10);
    pair.same(&["EXISTS", "ints"]);
    // A small count pops one by one (CASE 2).
    let (latch, _) = pair.both(&["SPOP", "strs", "3"]);
    assert_eq!(items(latch).len(), 3);
    pair.same(&["SCARD", "strs"]);
}

#[test]
fn dump_payloads_move_both_ways() {
    let mut pair = Pair::start();
    sadd_range(&mut pair, "small", -5..20);
    pair.same(&["SADD", "small", "100000", "-3000000000"]);
    sadd_range(&mut pair, "large", 0..700);
    pair.same(&["SADD", "strs", "a", "b", "1"]);
    for key in ["small", "large", "strs"] {
        let from_latch: Vec<u8> = redis::cmd("DUMP").arg(key).query(&mut pair.latch).unwrap();
        let from_redis: Vec<u8> = redis::cmd("DUMP").arg(key).query(&mut pair.redis).unwrap();
        // The type byte: an intset is written as one (from the compact form), as by Redis.
        assert_eq!(from_latch[0], from_redis[0], "{key}");
        assert_eq!(from_latch[0] == 11, key == "small", "{key}");
        let copy = format!("{key}-copy");
        let restored: String = redis::cmd("RESTORE")
            .arg(&copy)
            .arg(0)
            .arg(&from_latch)
            .query(&mut pair.redis)
            .unwrap();
        assert_eq!(restored, "OK");
        let restored: String = redis::cmd("RESTORE")
            .arg(&copy)
            .arg(0)
            .arg(&from_redis)
            .query(&mut pair.latch)
            .unwrap();
        assert_eq!(restored, "OK");
        pair.same_sorted(&["SMEMBERS", &copy]);
        pair.same(&["OBJECT", "ENCODING", &copy]);
        let (a, b) = pair.both(&["SMEMBERS", key]);
        assert_eq!(sorted(a), sorted(b));
    }
    pair.same(&["SMEMBERS", "small-copy"]);
}

#[test]
fn memory_usage_follows_the_form() {
    let server = Server::latch(&[]);
    let mut conn = connect(&server);
    let members: Vec<i64> = (0..10).collect();
    let _: i64 = redis::cmd("SADD")
        .arg("ints")
        .arg(&members)
        .query(&mut conn)
        .unwrap();
    let small: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("ints")
        .query(&mut conn)
        .unwrap();
    let _: i64 = redis::cmd("SADD")
        .arg("ints")
        .arg("x")
        .query(&mut conn)
        .unwrap();
    let large: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("ints")
        .query(&mut conn)
        .unwrap();
    assert!(small < 100, "an intset of 10 small integers: {small}");
    assert!(
        large > small + 100,
        "the hashtable form: {large} vs {small}"
    );
}
