//! Sorted sets' two forms against Debian's redis-server 7.0.15: the same commands give the
//! same replies and the same `OBJECT ENCODING` in both, at and across each threshold
//! (defaults and CONFIG SET values), after the store commands, after a reload, and values
//! move between the two servers with DUMP/RESTORE in both forms.

mod common;

use common::TestServer;
use latch_testkit::Server;

fn run(conn: &mut redis::Connection, line: &str) -> String {
    let mut words = line.split(' ');
    let mut cmd = redis::cmd(words.next().unwrap());
    for word in words {
        cmd.arg(word);
    }
    match cmd.query::<redis::Value>(conn) {
        Ok(value) => format!("{value:?}"),
        Err(e) => format!("error {:?} {:?}", e.code(), e.detail()),
    }
}

fn args(conn: &mut redis::Connection, parts: &[&[u8]]) -> redis::Value {
    let mut cmd = redis::cmd(std::str::from_utf8(parts[0]).unwrap());
    for part in &parts[1..] {
        cmd.arg(*part);
    }
    cmd.query(conn).expect("command")
}

/// Latch and redis-server side by side.
struct Pair {
    _latch: TestServer,
    _redis: Server,
    latch: redis::Connection,
    redis: redis::Connection,
}

impl Pair {
    fn start() -> Pair {
        let latch_server = TestServer::start(&[]);
        let redis_server = Server::redis(&[]);
        let latch = latch_server.client();
        let redis = redis::Client::open(redis_server.url())
            .unwrap()
            .get_connection()
            .unwrap();
        Pair {
            _latch: latch_server,
            _redis: redis_server,
            latch,
            redis,
        }
    }

    /// Runs `line` on both servers; the replies must be the same. Returns Latch's.
    fn same(&mut self, line: &str) -> String {
        let from_latch = run(&mut self.latch, line);
        let from_redis = run(&mut self.redis, line);
        assert_eq!(from_latch, from_redis, "{line}");
        from_latch
    }

    fn encoding(&mut self, key: &str, expected: &str) {
        let reply = self.same(&format!("OBJECT ENCODING {key}"));
        assert!(
            reply.contains(expected),
            "{key}: {reply}, wanted {expected}"
        );
    }

    /// ZADD of `count` members `prefix-i` with score i, one command.
    fn fill(&mut self, key: &str, prefix: &str, count: usize) {
        if count == 0 {
            return;
        }
        let mut line = format!("ZADD {key}");
        for i in 0..count {
            line.push_str(&format!(" {i} {prefix}-{i}"));
        }
        self.same(&line);
    }
}

#[test]
fn encodings_follow_the_thresholds() {
    let mut pair = Pair::start();
    // Entries: 128 stay a listpack, the 129th converts, removals do not convert back.
    pair.fill("z", "m", 128);
    pair.encoding("z", "listpack");
    pair.same("ZADD z 128 m-128");
    pair.encoding("z", "skiplist");
    pair.same("ZREM z m-0 m-1 m-2");
    pair.encoding("z", "skiplist");
    // Updating a member of a full listpack keeps it one.
    pair.fill("full", "m", 128);
    pair.same("ZADD full 5.5 m-3");
    pair.same("ZINCRBY full 2 m-4");
    pair.encoding("full", "listpack");
    // Member length: 64 bytes fit, 65 do not.
    let fits = "x".repeat(64);
    let long = "y".repeat(65);
    pair.same(&format!("ZADD v 1 {fits}"));
    pair.encoding("v", "listpack");
    pair.same(&format!("ZADD v 2 {long}"));
    pair.encoding("v", "skiplist");
    pair.same(&format!("ZADD w 1 {long}"));
    pair.encoding("w", "skiplist");
    // CONFIG SET applies to the next writes.
    pair.same("CONFIG SET zset-max-listpack-entries 4");
    pair.same("CONFIG SET zset-max-listpack-value 8");
    pair.fill("c", "m", 4);
    pair.encoding("c", "listpack");
    pair.same("ZADD c 9 m-9");
    pair.encoding("c", "skiplist");
    pair.same("ZADD d 1 12345678");
    pair.encoding("d", "listpack");
    pair.same("ZADD d 1 123456789");
    pair.encoding("d", "skiplist");
    pair.same("CONFIG SET zset-max-listpack-entries 0");
    pair.same("ZADD e 1 a");
    pair.encoding("e", "skiplist");
    pair.same("CONFIG SET zset-max-listpack-entries 128");
    pair.same("CONFIG SET zset-max-listpack-value 64");
    // Store commands turn a result that fits back into a listpack.
    pair.same("ZUNIONSTORE u 1 e");
    pair.encoding("u", "listpack");
    pair.same("ZUNIONSTORE u 2 z full");
    pair.encoding("u", "skiplist");
    pair.same("ZINTERSTORE i 2 z full");
    pair.encoding("i", "listpack");
    pair.same("ZINTERSTORE i 2 u u");
    pair.encoding("i", "skiplist");
    pair.same("ZDIFFSTORE df 2 u e");
    pair.encoding("df", "skiplist");
    pair.same("ZDIFFSTORE df 2 z c");
    pair.encoding("df", "listpack");
    pair.same("ZRANGESTORE r z 0 9");
    pair.encoding("r", "listpack");
    pair.same("ZRANGESTORE r u 0 200");
    pair.encoding("r", "skiplist");
    pair.same("ZRANGESTORE r z (10 20 BYSCORE");
    pair.encoding("r", "listpack");
    pair.same("ZINTERSTORE i 2 c c");
    pair.encoding("i", "listpack");
    pair.same("GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania");
    pair.encoding("g", "listpack");
    pair.same("GEOSEARCHSTORE gs g FROMLONLAT 15 37 BYRADIUS 200 km ASC");
    pair.encoding("gs", "listpack");
    for key in ["z", "full", "v", "c", "d", "u", "i", "df", "r", "gs"] {
        pair.same(&format!("ZRANGE {key} 0 -1 WITHSCORES"));
    }
}

/// The same script in both forms (everything a skiplist with
/// `zset-max-listpack-entries 0`).
fn replies_in_both_forms(entries: &str) {
    let mut pair = Pair::start();
    pair.same(&format!("CONFIG SET zset-max-listpack-entries {entries}"));
    let script = [
        "ZADD s 1.5 a -2 b 0 c -0 d 1e300 e -inf f inf g 3 12 -1 -5 0.1 h 2.5e-300 i",
        "ZADD s 9007199254740993 big 1e16 huge 4611686018427387904 half",
        "ZRANGE s 0 -1 WITHSCORES",
        "ZRANGE s 0 -1 REV WITHSCORES",
        "ZRANGE s 2 5",
        "ZRANGE s -3 -1 WITHSCORES",
        "ZRANGE s 5 2",
        "ZRANGE s (0 +inf BYSCORE WITHSCORES",
        "ZRANGE s +inf -inf BYSCORE REV LIMIT 1 3 WITHSCORES",
        "ZRANGEBYSCORE s -inf 0",
        "ZRANGEBYSCORE s (-2 (1.5",
        "ZREVRANGEBYSCORE s 1.5 -2 WITHSCORES",
        "ZCOUNT s -inf +inf",
        "ZCOUNT s (0 3",
        "ZRANK s a",
        "ZRANK s f",
        "ZREVRANK s g",
        "ZRANK s nosuch",
        "ZSCORE s d",
        "ZSCORE s 12",
        "ZSCORE s -1",
        "ZSCORE s big",
        "ZMSCORE s a b nosuch g",
        "ZADD s nan x",
        "ZADD s NX 100 a 100 newone",
        "ZADD s XX CH 100 a 100 other",
        "ZADD s GT CH 50 a 200 a",
        "ZADD s LT CH 300 a 1 b",
        "ZADD s GT LT 1 a",
        "ZADD s INCR 2.5 a",
        "ZADD s INCR -inf g",
        "ZADD s INCR -0 negzero",
        "ZSCORE s negzero",
        "ZINCRBY s -0 negzero",
        "ZINCRBY s 1 f",
        "ZINCRBY s -inf f",
        "ZADD s NX INCR 1 a",
        "ZADD s XX INCR 1 nosuch",
        "ZCARD s",
        "ZADD lex 0 a 0 b 0 c 0 d 0 e 0 f 0 g",
        "ZRANGEBYLEX lex [b (e",
        "ZREVRANGEBYLEX lex + - LIMIT 1 2",
        "ZLEXCOUNT lex - +",
        "ZREMRANGEBYLEX lex [a [b",
        "ZRANGE lex 0 -1",
        "ZPOPMIN s",
        "ZPOPMAX s 2",
        "ZPOPMIN s 0",
        "ZREMRANGEBYRANK s 1 2",
        "ZREMRANGEBYSCORE s (0 2",
        "ZRANGE s 0 -1 WITHSCORES",
        "ZUNION 2 s lex WITHSCORES",
        "ZINTER 2 s s WEIGHTS 1 2 WITHSCORES",
        "ZDIFF 2 s lex",
        "ZADD one 7 only",
        "ZRANDMEMBER one",
        "ZRANDMEMBER one -3 WITHSCORES",
        "ZRANDMEMBER one 5",
        "ZMPOP 2 nosuch one MIN COUNT 3",
        "EXISTS one",
    ];
    for line in script {
        pair.same(line);
    }
    if entries != "0" {
        // ZSCAN of a listpack returns everything at once, cursor 0.
        pair.same("ZSCAN s 0");
        pair.same("ZSCAN s 0 MATCH *e* COUNT 1");
    }
}

#[test]
fn replies_match_redis_as_listpacks() {
    replies_in_both_forms("128");
}

#[test]
fn replies_match_redis_as_skiplists() {
    replies_in_both_forms("0");
}

/// Fills `key` on `conn` with members of every score shape.
fn odd_scores(conn: &mut redis::Connection, key: &str, members: usize) {
    let shapes = [
        "1.5",
        "-2",
        "0",
        "-0",
        "1e300",
        "-inf",
        "inf",
        "0.1",
        "-2.5e-300",
        "9007199254740993",
        "123456789",
        "-7",
    ];
    for i in 0..members {
        let score = shapes[i % shapes.len()];
        run(conn, &format!("ZADD {key} {score} m{i}"));
    }
}

fn contents(conn: &mut redis::Connection, key: &str) -> String {
    run(conn, &format!("ZRANGE {key} 0 -1 WITHSCORES"))
}

#[test]
fn dump_and_restore_cross_over_in_both_forms() {
    let mut pair = Pair::start();
    for (key, members, encoding) in [("small", 12, "listpack"), ("large", 300, "skiplist")] {
        odd_scores(&mut pair.latch, key, members);
        odd_scores(&mut pair.redis, key, members);
        pair.encoding(key, encoding);
        assert_eq!(
            contents(&mut pair.latch, key),
            contents(&mut pair.redis, key)
        );
        // Latch -> redis-server and back.
        for (from_latch, tag) in [(true, "from-latch"), (false, "from-redis")] {
            let (source, target) = if from_latch {
                (&mut pair.latch, &mut pair.redis)
            } else {
                (&mut pair.redis, &mut pair.latch)
            };
            let payload = match args(source, &[b"DUMP", key.as_bytes()]) {
                redis::Value::BulkString(bytes) => bytes,
                other => panic!("DUMP: {other:?}"),
            };
            let copy = format!("{key}-{tag}");
            args(target, &[b"RESTORE", copy.as_bytes(), b"0", &payload]);
            assert_eq!(contents(target, &copy), contents(source, key), "{copy}");
            let encoding_of = run(target, &format!("OBJECT ENCODING {copy}"));
            assert!(encoding_of.contains(encoding), "{copy}: {encoding_of}");
        }
    }
    // A listpack with a member longer than zset-max-listpack-value stays a listpack when
    // restored (Redis checks only the entry count when it loads one).
    for conn in [&mut pair.latch, &mut pair.redis] {
        run(conn, &format!("ZADD long 1 a 2 {}", "x".repeat(40)));
    }
    let payload = match args(&mut pair.redis, &[b"DUMP", b"long"]) {
        redis::Value::BulkString(bytes) => bytes,
        other => panic!("DUMP: {other:?}"),
    };
    pair.same("CONFIG SET zset-max-listpack-value 8");
    for conn in [&mut pair.latch, &mut pair.redis] {
        args(conn, &[b"RESTORE", b"long2", b"0", &payload]);
    }
    pair.encoding("long2", "listpack");
    pair.same("ZADD long2 3 b");
    pair.encoding("long2", "listpack");
    pair.same("ZADD long2 4 123456789");
    pair.encoding("long2", "skiplist");
    pair.same("CONFIG SET zset-max-listpack-value 64");
    // Each server's copy of the other's set holds what its own does.
    for key in ["small", "large"] {
        assert_eq!(
            contents(&mut pair.latch, &format!("{key}-from-redis")),
            contents(&mut pair.redis, &format!("{key}-from-latch")),
        );
    }
}

#[test]
fn save_and_restart_keep_contents_and_forms() {
    let server = TestServer::start(&["--save", ""]);
    let mut conn = server.client();
    odd_scores(&mut conn, "small", 12);
    odd_scores(&mut conn, "large", 300);
    // Shrunk below the threshold: a reload makes it a listpack again, as in Redis.
    odd_scores(&mut conn, "shrunk", 200);
    run(&mut conn, "ZREMRANGEBYRANK shrunk 0 149");
    let before: Vec<String> = ["small", "large", "shrunk"]
        .iter()
        .map(|k| contents(&mut conn, k))
        .collect();
    assert!(run(&mut conn, "OBJECT ENCODING shrunk").contains("skiplist"));
    redis::cmd("SAVE").query::<()>(&mut conn).expect("SAVE");
    let dir = server.shutdown_keep_files("NOSAVE");
    let server = TestServer::start_in(Some(&dir), &["--save", ""]);
    let mut conn = server.client();
    let after: Vec<String> = ["small", "large", "shrunk"]
        .iter()
        .map(|k| contents(&mut conn, k))
        .collect();
    assert_eq!(before, after);
    for (key, encoding) in [
        ("small", "listpack"),
        ("large", "skiplist"),
        ("shrunk", "listpack"),
    ] {
        let reply = run(&mut conn, &format!("OBJECT ENCODING {key}"));
        assert!(reply.contains(encoding), "{key}: {reply}");
    }
}

#[test]
fn memory_usage_reflects_the_form() {
    let server = TestServer::start(&[]);
    let mut conn = server.client();
    let mut line = String::from("ZADD z");
    for i in 0..10 {
        line.push_str(&format!(" {i} member-{i}"));
    }
    run(&mut conn, &line);
    let usage = |conn: &mut redis::Connection, key: &str| -> i64 {
        redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .query(conn)
            .unwrap()
    };
    let small = usage(&mut conn, "z");
    run(&mut conn, "CONFIG SET zset-max-listpack-entries 0");
    run(&mut conn, "ZUNIONSTORE big 1 z");
    let large = usage(&mut conn, "big");
    assert!(small < 200, "a 10-member listpack takes {small}");
    assert!(large > small, "large {large}, small {small}");
}
