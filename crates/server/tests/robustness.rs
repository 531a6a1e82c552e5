//! Bad input never panics the server and never disturbs another client.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::TestServer;

/// A small deterministic generator, so a failure reproduces from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn bytes(&mut self, max: usize) -> Vec<u8> {
        let len = self.below(max + 1);
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// Arguments that exercise parsers: numbers at the edges, options, odd bytes.
fn interesting_arg(rng: &mut Rng) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "0",
        "1",
        "-1",
        "9223372036854775807",
        "-9223372036854775808",
        "9223372036854775808",
        "1.5",
        "-0",
        "inf",
        "-inf",
        "nan",
        "1e400",
        "",
        " ",
        "NX",
        "XX",
        "GT",
        "LT",
        "EX",
        "PX",
        "EXAT",
        "PXAT",
        "KEEPTTL",
        "GET",
        "PERSIST",
        "MATCH",
        "COUNT",
        "TYPE",
        "string",
        "*",
        "[",
        "\\",
        "k",
        "key",
        "DB",
        "REPLACE",
        "ASYNC",
        "SYNC",
        "LEN",
        "IDX",
        "MINMATCHLEN",
        "WITHMATCHLEN",
        "ID",
        "ADDR",
        "SKIPME",
        "yes",
        "no",
        "ON",
        "OFF",
        "SKIP",
        "FILTERBY",
        "ACLCAT",
        "PATTERN",
        "MODULE",
        "SAMPLES",
        "2",
        "3",
        "4294967296",
        "100000000000",
    ];
    match rng.below(4) {
        0 => rng.bytes(12),
        _ => WORDS[rng.below(WORDS.len())].as_bytes().to_vec(),
    }
}

/// Commands that would end the test's server, stall it on purpose, or (blocking commands)
/// legitimately wait as long as the random timeout says.
const SKIPPED: &[&str] = &[
    "shutdown",
    "debug",
    "monitor",
    "quit",
    "reset",
    "client",
    "config",
    "blpop",
    "brpop",
    "brpoplpush",
    "blmove",
    "blmpop",
    "bzpopmin",
    "bzpopmax",
    "bzmpop",
    "xread",
    "xreadgroup",
    // A lock request with WAIT blocks for its random timeout.
    "lock.acquire",
    // WAIT blocks for its timeout; PSYNC and SYNC make the connection a replica's (no
    // more replies, as in Redis); REPLICAOF, SLAVEOF and FAILOVER make the server a
    // replica of whatever the arguments name.
    "wait",
    "psync",
    "sync",
    "replicaof",
    "slaveof",
    "failover",
];

fn command_names(conn: &mut redis::Connection) -> Vec<String> {
    let names: Vec<String> = redis::cmd("COMMAND")
        .arg("LIST")
        .query(conn)
        .expect("COMMAND LIST");
    assert!(names.len() > 40, "the table lists the commands: {names:?}");
    names
        .into_iter()
        .filter(|n| !SKIPPED.contains(&n.as_str()))
        .collect()
}

/// Thousands of random commands built from the command table: every one gets a reply, the
/// connection survives, and a second client is served throughout.
#[test]
fn random_commands_never_break_the_connection() {
    let server = TestServer::start(&[]);
    let mut control = server.client();
    let names = command_names(&mut control);
    // LATCH_FUZZ_SEED / LATCH_FUZZ_ROUNDS explore further than the default run.
    let seed = std::env::var("LATCH_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_1a7c_4000_0001u64);
    let rounds = std::env::var("LATCH_FUZZ_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000usize);
    let mut rng = Rng(seed.max(1));
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut parser_buffer = Vec::new();
    for round in 0..rounds {
        let mut args = vec![names[rng.below(names.len())].clone().into_bytes()];
        if rng.below(3) == 0 {
            // A subcommand-looking second word.
            args.push(interesting_arg(&mut rng));
        }
        for _ in 0..rng.below(6) {
            args.push(interesting_arg(&mut rng));
        }
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        stream.write_all(&common::encode(&refs)).unwrap();
        // Read exactly one reply frame.
        loop {
            if let Ok(Some((_, used))) = latch_protocol::frame::decode(&parser_buffer) {
                parser_buffer.drain(..used);
                break;
            }
            let mut chunk = [0u8; 65536];
            let n = stream.read(&mut chunk).unwrap_or(0);
            assert!(
                n > 0,
                "connection closed after round {round}: {:?}",
                args.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
            );
            parser_buffer.extend_from_slice(&chunk[..n]);
        }
        if round % 500 == 0 {
            let pong: String = redis::cmd("PING")
                .query(&mut control)
                .expect("second client served");
            assert_eq!(pong, "PONG");
        }
    }
    let pong: String = redis::cmd("PING").query(&mut control).unwrap();
    assert_eq!(pong, "PONG");
}

/// Garbage on many connections at once: each is answered or closed, never the server.
#[test]
fn garbage_bytes_on_many_connections_leave_the_server_serving() {
    let server = TestServer::start(&[]);
    let port = server.port;
    let workers: Vec<_> = (0..8)
        .map(|seed| {
            std::thread::spawn(move || {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (seed + 1));
                for _ in 0..50 {
                    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
                        continue;
                    };
                    stream
                        .set_read_timeout(Some(Duration::from_millis(200)))
                        .unwrap();
                    let mut junk = rng.bytes(300);
                    if rng.below(2) == 0 {
                        junk.insert(0, b'*');
                    }
                    let _ = stream.write_all(&junk);
                    let mut sink = [0u8; 4096];
                    let _ = stream.read(&mut sink);
                }
            })
        })
        .collect();
    let mut control = server.client();
    for i in 0..200 {
        let _: () = redis::cmd("SET")
            .arg("k")
            .arg(i)
            .query(&mut control)
            .unwrap();
        let v: i64 = redis::cmd("GET").arg("k").query(&mut control).unwrap();
        assert_eq!(v, i);
    }
    for w in workers {
        w.join().unwrap();
    }
    let pong: String = redis::cmd("PING").query(&mut control).unwrap();
    assert_eq!(pong, "PONG");
}

/// Protocol errors reply with Redis' text and close that connection only.
#[test]
fn protocol_errors_close_only_the_offender() {
    let server = TestServer::start(&[]);
    let mut control = server.client();
    for (input, expected) in [
        (
            &b"*abc\r\n"[..],
            &b"-ERR Protocol error: invalid multibulk length\r\n"[..],
        ),
        (
            b"*1\r\n$-5\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*1\r\nfoo\r\n",
            b"-ERR Protocol error: expected '$', got 'f'\r\n",
        ),
        (
            b"SET \"a\r\n",
            b"-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
    ] {
        let mut raw = server.raw();
        let got = raw.roundtrip(input, expected.len());
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(expected)
        );
        assert!(
            raw.is_closed(),
            "connection closed after {:?}",
            String::from_utf8_lossy(input)
        );
    }
    let pong: String = redis::cmd("PING").query(&mut control).unwrap();
    assert_eq!(pong, "PONG");
}

/// A bulk length over proto-max-bulk-len is refused from its header: nothing is allocated
/// and nothing waits for the promised bytes.
#[test]
fn oversized_bulk_is_refused_without_waiting_for_it() {
    let server = TestServer::start(&["--proto-max-bulk-len", "1mb"]);
    let mut raw = server.raw();
    let expected = b"-ERR Protocol error: invalid bulk length\r\n";
    let got = raw.roundtrip(b"*2\r\n$3\r\nGET\r\n$2000000\r\n", expected.len());
    assert_eq!(got, expected);
    assert!(raw.is_closed());
}

/// A client that stops in the middle of a command does not hold anyone else up.
#[test]
fn half_sent_command_does_not_stall_others() {
    let server = TestServer::start(&[]);
    let mut slow = server.raw();
    slow.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\nabc");
    let mut control = server.client();
    let _: () = redis::cmd("SET")
        .arg("other")
        .arg("v")
        .query(&mut control)
        .unwrap();
    let v: String = redis::cmd("GET").arg("other").query(&mut control).unwrap();
    assert_eq!(v, "v");
    slow.send(b"defghij\r\n");
    assert_eq!(slow.read_n(5), b"+OK\r\n");
}

/// Many clients incrementing the same and different keys: every increment counts.
#[test]
fn concurrent_increments_are_exact() {
    let server = TestServer::start(&[]);
    let url = server.url();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
                for i in 0..500 {
                    let mut pipe = redis::pipe();
                    pipe.cmd("INCR").arg("shared").ignore();
                    pipe.cmd("INCRBY").arg(format!("own:{t}")).arg(2).ignore();
                    pipe.cmd("MSET")
                        .arg(format!("m:{}", i % 7))
                        .arg(t)
                        .arg("shared-m")
                        .arg(i)
                        .ignore();
                    let _: () = pipe.query(&mut conn).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut conn = server.client();
    let shared: i64 = redis::cmd("GET").arg("shared").query(&mut conn).unwrap();
    assert_eq!(shared, 8 * 500);
    for t in 0..8 {
        let own: i64 = redis::cmd("GET")
            .arg(format!("own:{t}"))
            .query(&mut conn)
            .unwrap();
        assert_eq!(own, 1000);
    }
}

/// Regression: a huge key count made the key-spec resolver overflow (`SINTERCARD
/// 9223372036854775807 ...` dropped the connection); it now gets Redis' error.
#[test]
fn huge_numkeys_is_an_error_not_a_dropped_connection() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(
        &[b"SINTERCARD", b"9223372036854775807", b"a"],
        b"-ERR Number of keys can't be greater than number of args\r\n",
    );
    raw.expect(
        &[
            b"COMMAND",
            b"GETKEYS",
            b"SINTERCARD",
            b"9223372036854775807",
            b"a",
        ],
        b"-ERR Invalid arguments specified for command\r\n",
    );
    raw.expect(&[b"PING"], b"+PONG\r\n");
}
