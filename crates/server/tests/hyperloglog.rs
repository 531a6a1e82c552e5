//! HyperLogLogs against Debian's redis-server 7.0.15: the same commands must leave the same
//! bytes in both (sparse and dense, the cached count included), values move between the
//! two with DUMP/RESTORE, estimates agree and stay within Redis' error, and corrupted values
//! get Redis' exact errors.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use common::TestServer;
use latch_testkit::Server;

/// Latch and redis-server side by side, with a connection to each.
struct Pair {
    latch: TestServer,
    _redis: Server,
    redis_port: u16,
    on_latch: redis::Connection,
    on_redis: redis::Connection,
}

fn query(conn: &mut redis::Connection, args: &[&[u8]]) -> redis::RedisResult<redis::Value> {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query(conn)
}

fn show(args: &[&[u8]]) -> String {
    let words: Vec<String> = args
        .iter()
        .take(4)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    words.join(" ")
}

impl Pair {
    fn start(latch_args: &[&str]) -> Pair {
        let latch = TestServer::start(latch_args);
        let redis = Server::redis(&[]);
        let on_redis = redis::Client::open(redis.url())
            .unwrap()
            .get_connection()
            .unwrap();
        let on_latch = latch.client();
        Pair {
            redis_port: redis.port,
            latch,
            _redis: redis,
            on_latch,
            on_redis,
        }
    }

    /// Runs a command on both; the replies must be equal. Returns Latch's.
    fn both(&mut self, args: &[&[u8]]) -> redis::RedisResult<redis::Value> {
        let expected = query(&mut self.on_redis, args);
        let got = query(&mut self.on_latch, args);
        assert_eq!(
            format!("{got:?}"),
            format!("{expected:?}"),
            "reply to {}",
            show(args)
        );
        got
    }

    /// `both` for a command given as words.
    fn run(&mut self, command: &str) -> redis::RedisResult<redis::Value> {
        let args: Vec<&[u8]> = command.split(' ').map(str::as_bytes).collect();
        self.both(&args)
    }

    /// PFADD of `elements` on both (same reply).
    fn pfadd(&mut self, key: &str, elements: &[String]) {
        let mut args: Vec<&[u8]> = vec![b"PFADD", key.as_bytes()];
        args.extend(elements.iter().map(|e| e.as_bytes()));
        self.both(&args).unwrap();
    }

    /// The key's bytes, which must be the same in both; `None` when missing.
    fn same_bytes(&mut self, key: &str) -> Option<Vec<u8>> {
        let get = |conn: &mut redis::Connection| -> Option<Vec<u8>> {
            redis::cmd("GET").arg(key).query(conn).unwrap()
        };
        let expected = get(&mut self.on_redis);
        let got = get(&mut self.on_latch);
        assert!(
            got == expected,
            "bytes of {key} differ:\nlatch {:02x?}\nredis {:02x?}",
            got.as_deref().map(|b| &b[..b.len().min(64)]),
            expected.as_deref().map(|b| &b[..b.len().min(64)]),
        );
        got
    }

    /// The exact error line both servers answer (`-...\r\n`), which must be equal.
    fn same_error(&mut self, args: &[&[u8]]) -> String {
        let expected = raw_line(self.redis_port, args);
        let got = raw_line(self.latch.port, args);
        assert_eq!(got, expected, "error for {}", show(args));
        assert!(got.starts_with('-'), "{} answered {got:?}", show(args));
        got
    }
}

/// Sends one command on a fresh connection and reads the first line of the reply.
fn raw_line(port: u16, args: &[&[u8]]) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.write_all(&common::encode(args)).unwrap();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => line.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&line).into_owned()
}

fn elements(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}-{i}")).collect()
}

const SPARSE: u8 = 1;
const DENSE: u8 = 0;
const DENSE_LEN: usize = 16 + 12288;

fn int(value: redis::Value) -> i64 {
    match value {
        redis::Value::Int(n) => n,
        other => panic!("not an integer: {other:?}"),
    }
}

#[test]
fn bytes_match_redis_from_sparse_to_dense() {
    let mut pair = Pair::start(&[]);
    // The default threshold, none at all, a small one, and one past the dense size.
    for max_bytes in ["3000", "0", "200", "20000"] {
        pair.run(&format!("CONFIG SET hll-sparse-max-bytes {max_bytes}"))
            .unwrap();
        let key = format!("hll-{max_bytes}");
        pair.run(&format!("PFADD {key}")).unwrap();
        let created = pair.same_bytes(&key).unwrap();
        assert_eq!(&created[..5], b"HYLL\x01");
        assert_eq!(created.len(), 18, "one XZERO opcode");
        let mut added = 0;
        for batch in [1, 2, 10, 50, 200, 1000, 5000, 20_000] {
            pair.pfadd(&key, &elements(&key, added..added + batch));
            added += batch;
            let bytes = pair.same_bytes(&key).unwrap();
            if max_bytes == "3000" && added <= 13 {
                assert_eq!(bytes[4], SPARSE, "{added} elements are sparse");
            }
            // Counting stores the count in the header: the same bytes again.
            pair.run(&format!("PFCOUNT {key}")).unwrap();
            let counted = pair.same_bytes(&key).unwrap();
            assert_eq!(counted[15] & 0x80, 0, "the cached count is valid");
            // Adding what is there changes nothing.
            pair.pfadd(&key, &elements(&key, 0..added.min(100)));
            assert_eq!(pair.same_bytes(&key).unwrap(), counted);
        }
        let bytes = pair.same_bytes(&key).unwrap();
        if max_bytes == "20000" {
            // Allowed past the dense size, the sparse code keeps going (until a register
            // needs more than 32).
            assert_eq!(bytes[4], SPARSE, "{added} elements, {} bytes", bytes.len());
            assert!(bytes.len() > DENSE_LEN, "{} bytes", bytes.len());
        } else {
            assert_eq!(bytes[4], DENSE, "{added} elements are dense");
            assert_eq!(bytes.len(), DENSE_LEN);
        }
        if max_bytes == "0" {
            // No room at all: the first register set made it dense.
            pair.run("DEL one").unwrap();
            pair.run("PFADD one x").unwrap();
            assert_eq!(pair.same_bytes("one").unwrap()[4], DENSE);
        }
    }
    // Binary and empty elements hash alike too.
    let odd: Vec<String> = vec![String::new(), "\u{0}\u{1}\u{ff}".into(), "é".repeat(40)];
    pair.pfadd("odd", &odd);
    pair.same_bytes("odd");
    pair.run("CONFIG SET hll-sparse-max-bytes 3000").unwrap();
}

#[test]
fn merge_and_multi_key_count_match_redis() {
    let mut pair = Pair::start(&[]);
    pair.pfadd("a", &elements("x", 0..100));
    pair.pfadd("b", &elements("x", 50..300));
    pair.pfadd("c", &elements("y", 0..6000));
    assert_eq!(pair.same_bytes("a").unwrap()[4], SPARSE);
    assert_eq!(pair.same_bytes("c").unwrap()[4], DENSE);

    // Sparse sources make a sparse destination, a dense one a dense destination.
    pair.run("PFMERGE ab a b").unwrap();
    assert_eq!(pair.same_bytes("ab").unwrap()[4], SPARSE);
    pair.run("PFMERGE ac a c").unwrap();
    assert_eq!(pair.same_bytes("ac").unwrap()[4], DENSE);
    // Into an existing value, which takes part in the union.
    pair.run("PFMERGE a b").unwrap();
    pair.same_bytes("a");
    // Missing sources are empty; the destination is created anyway.
    pair.run("PFMERGE empty nosuch").unwrap();
    pair.same_bytes("empty");
    pair.run("PFMERGE alone").unwrap();
    pair.same_bytes("alone");

    let union = int(pair.run("PFCOUNT a b c nosuch").unwrap());
    assert!((6200..6400).contains(&union), "union of 6300: {union}");
    pair.run("PFCOUNT ab").unwrap();
    pair.run("PFCOUNT ac").unwrap();
    pair.same_bytes("ab");
    pair.same_bytes("ac");
    // Counting several keys caches nothing.
    let before = pair.same_bytes("c").unwrap();
    pair.run("PFCOUNT c a").unwrap();
    assert_eq!(pair.same_bytes("c").unwrap(), before);
}

#[test]
fn dump_and_restore_move_values_both_ways() {
    let mut pair = Pair::start(&[]);
    pair.pfadd("sparse", &elements("s", 0..80));
    pair.pfadd("dense", &elements("d", 0..8000));
    for key in ["sparse", "dense"] {
        let original = pair.same_bytes(key).unwrap();
        // Latch to redis-server.
        let dumped: Vec<u8> = redis::cmd("DUMP")
            .arg(key)
            .query(&mut pair.on_latch)
            .unwrap();
        let copy = format!("{key}-from-latch");
        let _: () = redis::cmd("RESTORE")
            .arg(&copy)
            .arg(0)
            .arg(&dumped)
            .query(&mut pair.on_redis)
            .unwrap();
        let on_redis: Vec<u8> = redis::cmd("GET")
            .arg(&copy)
            .query(&mut pair.on_redis)
            .unwrap();
        assert_eq!(on_redis, original);
        // redis-server to Latch.
        let dumped: Vec<u8> = redis::cmd("DUMP")
            .arg(key)
            .query(&mut pair.on_redis)
            .unwrap();
        let copy = format!("{key}-from-redis");
        let _: () = redis::cmd("RESTORE")
            .arg(&copy)
            .arg(0)
            .arg(&dumped)
            .query(&mut pair.on_latch)
            .unwrap();
        let on_latch: Vec<u8> = redis::cmd("GET")
            .arg(&copy)
            .query(&mut pair.on_latch)
            .unwrap();
        assert_eq!(on_latch, original);
        // Each counts the other's value as its own.
        let count: i64 = redis::cmd("PFCOUNT")
            .arg(key)
            .query(&mut pair.on_redis)
            .unwrap();
        for (conn, copy) in [
            (&mut pair.on_redis, format!("{key}-from-latch")),
            (&mut pair.on_latch, format!("{key}-from-redis")),
        ] {
            let copied: i64 = redis::cmd("PFCOUNT").arg(&copy).query(conn).unwrap();
            assert_eq!(copied, count, "{copy}");
        }
    }
}

#[test]
fn count_of_100k_is_redis_count_within_its_error() {
    let mut pair = Pair::start(&[]);
    for batch in 0..100 {
        pair.pfadd("big", &elements("u", batch * 1000..(batch + 1) * 1000));
    }
    let count = int(pair.run("PFCOUNT big").unwrap());
    // Redis' standard error is 1.04 / sqrt(16384), 0.81%; allow three of them.
    let bound = (100_000.0 * 3.0 * 1.04 / 128.0) as i64;
    assert!(
        (count - 100_000).abs() <= bound,
        "estimate {count} of 100000 is off by more than {bound}"
    );
    pair.same_bytes("big");
    // The cached count is what PFCOUNT answers, and what the header holds.
    let bytes = pair.same_bytes("big").unwrap();
    let cached = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
    assert_eq!(cached as i64, count);
    assert_eq!(int(pair.run("PFCOUNT big").unwrap()), count);
}

#[test]
fn corrupted_values_get_redis_errors() {
    let mut pair = Pair::start(&[]);
    const INVALID: &str = "-INVALIDOBJ Corrupted HLL object detected\r\n";
    const NOT_HLL: &str = "-WRONGTYPE Key is not a valid HyperLogLog string value.\r\n";
    const WRONGTYPE: &str =
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

    // Bytes after the sparse code.
    pair.run("PFADD tail a b c").unwrap();
    pair.run("APPEND tail hello").unwrap();
    assert_eq!(pair.same_error(&[b"PFCOUNT", b"tail"]), INVALID);
    assert_eq!(pair.same_error(&[b"PFCOUNT", b"tail", b"x"]), INVALID);
    assert_eq!(pair.same_error(&[b"PFMERGE", b"x", b"tail"]), INVALID);
    assert_eq!(pair.same_error(&[b"PFDEBUG", b"TODENSE", b"tail"]), INVALID);
    assert_eq!(pair.same_error(&[b"PFDEBUG", b"GETREG", b"tail"]), INVALID);
    // A code that stops short: adding to a register past its end fails, and counting.
    pair.run("PFADD short a").unwrap();
    let mut bytes = pair.same_bytes("short").unwrap();
    bytes.truncate(18);
    let _: () = redis::cmd("SET")
        .arg("short")
        .arg(&bytes)
        .query(&mut pair.on_latch)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("short")
        .arg(&bytes)
        .query(&mut pair.on_redis)
        .unwrap();
    assert_eq!(pair.same_error(&[b"PFCOUNT", b"short"]), INVALID);

    // Not a HyperLogLog at all: broken magic, unknown encoding, a dense value cut short,
    // a string too short for the header.
    pair.run("PFADD magic a b c").unwrap();
    pair.run("SETRANGE magic 0 0123").unwrap();
    pair.run("PFADD encoding a b c").unwrap();
    pair.run("SETRANGE encoding 4 x").unwrap();
    pair.run("PFADD length a b c").unwrap();
    pair.run("SETRANGE length 4 \u{0}").unwrap();
    pair.run("SET small HYLL").unwrap();
    for key in ["magic", "encoding", "length", "small"] {
        let k = key.as_bytes();
        assert_eq!(pair.same_error(&[b"PFCOUNT", k]), NOT_HLL);
        assert_eq!(pair.same_error(&[b"PFADD", k, b"z"]), NOT_HLL);
        assert_eq!(pair.same_error(&[b"PFMERGE", k, b"tail"]), NOT_HLL);
        assert_eq!(pair.same_error(&[b"PFDEBUG", b"ENCODING", k]), NOT_HLL);
    }
    // Another type.
    pair.run("LPUSH list a").unwrap();
    assert_eq!(pair.same_error(&[b"PFADD", b"list", b"a"]), WRONGTYPE);
    assert_eq!(pair.same_error(&[b"PFCOUNT", b"list"]), WRONGTYPE);
    assert_eq!(pair.same_error(&[b"PFMERGE", b"list", b"a"]), WRONGTYPE);

    // PFDEBUG's own errors.
    pair.run("PFADD many a").unwrap();
    pair.run("PFDEBUG TODENSE many").unwrap();
    assert_eq!(
        pair.same_error(&[b"PFDEBUG", b"DECODE", b"many"]),
        "-ERR HLL encoding is not sparse\r\n"
    );
    assert_eq!(
        pair.same_error(&[b"PFDEBUG", b"NOPE", b"many"]),
        "-ERR Unknown PFDEBUG subcommand 'NOPE'\r\n"
    );
    assert_eq!(
        pair.same_error(&[b"PFDEBUG", b"GETREG", b"nosuch"]),
        "-ERR The specified key does not exist\r\n"
    );
    assert_eq!(
        pair.same_error(&[b"PFDEBUG", b"GETREG"]),
        "-ERR wrong number of arguments for 'pfdebug' command\r\n"
    );
    // Latch is still serving.
    pair.run("PING").unwrap();
}

#[test]
fn pfdebug_and_the_cached_count_match_redis() {
    let mut pair = Pair::start(&[]);
    pair.pfadd("h", &elements("v", 0..20));
    pair.run("PFDEBUG ENCODING h").unwrap();
    let decoded = pair.run("PFDEBUG DECODE h").unwrap();
    let redis::Value::BulkString(text) = decoded else {
        panic!("{decoded:?}")
    };
    assert!(text.starts_with(b"Z:") || text.starts_with(b"z:") || text.starts_with(b"v:"));
    // GETREG turns a sparse value dense.
    let registers = pair.run("PFDEBUG GETREG h").unwrap();
    let redis::Value::Array(registers) = registers else {
        panic!("{registers:?}")
    };
    assert_eq!(registers.len(), 16384);
    assert_eq!(pair.same_bytes("h").unwrap()[4], DENSE);
    assert_eq!(int(pair.run("PFDEBUG TODENSE h").unwrap()), 0);
    pair.pfadd("s", &elements("w", 0..5));
    assert_eq!(int(pair.run("PFDEBUG TODENSE s").unwrap()), 1);
    pair.same_bytes("s");

    // The cached count: valid after PFCOUNT, stale after a change, untouched otherwise.
    pair.pfadd("c", &elements("c", 0..3));
    assert_eq!(pair.same_bytes("c").unwrap()[15], 0x80);
    assert_eq!(int(pair.run("PFCOUNT c").unwrap()), 3);
    let counted = pair.same_bytes("c").unwrap();
    assert_eq!(&counted[8..16], &[3, 0, 0, 0, 0, 0, 0, 0]);
    pair.pfadd("c", &elements("c", 0..3));
    assert_eq!(pair.same_bytes("c").unwrap(), counted);
    pair.pfadd("c", &elements("c", 3..6));
    assert_eq!(pair.same_bytes("c").unwrap()[15], 0x80);

    // Storing the count is a change WATCH sees, as in Redis.
    pair.run("PFADD watched a").unwrap();
    for conn in [&mut pair.on_latch, &mut pair.on_redis] {
        let _: () = redis::cmd("WATCH").arg("watched").query(conn).unwrap();
        let _: () = redis::cmd("MULTI").query(conn).unwrap();
        let _: () = redis::cmd("PING").query(conn).unwrap();
    }
    for port in [pair.latch.port, pair.redis_port] {
        assert_eq!(raw_line(port, &[b"PFCOUNT", b"watched"]), ":1\r\n");
    }
    for conn in [&mut pair.on_latch, &mut pair.on_redis] {
        let exec: redis::Value = redis::cmd("EXEC").query(conn).unwrap();
        assert_eq!(exec, redis::Value::Nil, "the transaction must fail");
    }

    // Seconds in a debug build: the redis crate waits as long as it takes.
    let selftest: redis::Value = redis::cmd("PFSELFTEST").query(&mut pair.on_latch).unwrap();
    assert_eq!(selftest, redis::Value::Okay);
}

#[test]
fn command_metadata_matches_redis() {
    let mut pair = Pair::start(&[]);
    for name in ["pfadd", "pfcount", "pfmerge", "pfdebug", "pfselftest"] {
        pair.run(&format!("COMMAND INFO {name}")).unwrap();
        // Every field of COMMAND DOCS but the summary, which is Latch's own.
        let mut docs = Vec::new();
        for conn in [&mut pair.on_latch, &mut pair.on_redis] {
            let value: redis::Value = redis::cmd("COMMAND")
                .arg("DOCS")
                .arg(name)
                .query(conn)
                .unwrap();
            let text = format!("{value:?}");
            let summary_at = text.find("summary").expect("a summary");
            let after = text[summary_at..].find("since").expect("since after it");
            docs.push(format!(
                "{}{}",
                &text[..summary_at],
                &text[summary_at + after..]
            ));
        }
        assert_eq!(docs[0], docs[1], "COMMAND DOCS {name}");
    }
    pair.run("COMMAND GETKEYSANDFLAGS pfmerge d s1 s2").unwrap();
    pair.run("COMMAND GETKEYSANDFLAGS pfcount a b").unwrap();
    pair.run("PFADD").unwrap_err();
}

#[test]
fn the_aof_keeps_adds_and_cached_counts() {
    let latch = TestServer::start(&["--appendonly", "yes"]);
    let mut conn = latch.client();
    let mut cmd = redis::cmd("PFADD");
    cmd.arg("k");
    for element in elements("a", 0..500) {
        cmd.arg(element);
    }
    let _: i64 = cmd.query(&mut conn).unwrap();
    let _: i64 = redis::cmd("PFCOUNT").arg("k").query(&mut conn).unwrap();
    let _: () = redis::cmd("PFMERGE")
        .arg("m")
        .arg("k")
        .query(&mut conn)
        .unwrap();
    let _: i64 = redis::cmd("PFDEBUG")
        .arg("TODENSE")
        .arg("m")
        .query(&mut conn)
        .unwrap();
    let before: Vec<Vec<u8>> = redis::cmd("MGET")
        .arg("k")
        .arg("m")
        .query(&mut conn)
        .unwrap();
    assert_eq!(before[0][15] & 0x80, 0, "counted");
    assert_eq!(before[1][4], DENSE);
    drop(conn);
    let dir = latch.shutdown_keep_files("NOSAVE");
    let restarted = TestServer::start_in(Some(&dir), &["--appendonly", "yes"]);
    let mut conn = restarted.client();
    let after: Vec<Vec<u8>> = redis::cmd("MGET")
        .arg("k")
        .arg("m")
        .query(&mut conn)
        .unwrap();
    assert_eq!(after, before, "the AOF replays to the same bytes");
}
