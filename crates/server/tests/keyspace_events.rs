//! Keyspace notifications, compared with redis-server 7.0.15 (Debian's package): the same
//! long list of commands runs against both servers with `notify-keyspace-events` set, a
//! pattern subscriber on `__key*__:*` records what each publishes, and the two recordings
//! must be identical, command by command. That comparison is the specification: event
//! names, classes, order, databases, and when nothing is sent.
//!
//! After each step the test publishes a marker to `__keymark__:<step>` (the subscriber's
//! pattern matches it too), so the events are cut into one group per step and a
//! difference names the step that caused it. Lazy expiry runs with active expiry off
//! (`DEBUG SET-ACTIVE-EXPIRE 0`); active expiry has steps of its own that wait until the
//! key is gone.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use latch_testkit::Server;

/// One step of the script.
enum Step {
    /// A command on the main connection (its reply, error or not, is read and ignored).
    Cmd(&'static str),
    /// A command with arguments that contain spaces.
    Args(Vec<&'static str>),
    /// Sleep this many milliseconds (lets short TTLs pass).
    Sleep(u64),
    /// Send a (blocking) command on the second connection without reading its reply, and
    /// wait until the server counts a blocked client.
    Block(&'static str),
    /// Read the reply the second connection's blocked command got.
    Unblocked,
    /// Poll DBSIZE (which expires nothing) until it is this value: the active expiry
    /// removed what it had to.
    WaitDbsize(i64),
}

use Step::*;

/// A RESP connection kept raw: the subscriber, and the connection whose commands block.
struct Raw {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

/// A RESP value, as much as the test needs.
#[derive(Debug, Clone, PartialEq)]
enum Resp {
    Bulk(Option<Vec<u8>>),
    Simple(String),
    Error(String),
    Int(i64),
    Array(Option<Vec<Resp>>),
}

impl Raw {
    fn connect(port: u16) -> Raw {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Raw {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
        }
    }

    fn send(&mut self, args: &[&[u8]]) {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(arg);
            out.extend_from_slice(b"\r\n");
        }
        self.writer.write_all(&out).unwrap();
    }

    fn call(&mut self, args: &[&[u8]]) -> Resp {
        self.send(args);
        self.read()
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        assert!(line.ends_with("\r\n"), "short read: {line:?}");
        line.truncate(line.len() - 2);
        line
    }

    fn read(&mut self) -> Resp {
        let line = self.line();
        let (kind, rest) = line.split_at(1);
        match kind {
            "+" => Resp::Simple(rest.to_string()),
            "-" => Resp::Error(rest.to_string()),
            ":" => Resp::Int(rest.parse().unwrap()),
            "$" => {
                let len: i64 = rest.parse().unwrap();
                if len < 0 {
                    return Resp::Bulk(None);
                }
                let mut bytes = vec![0; len as usize + 2];
                std::io::Read::read_exact(&mut self.reader, &mut bytes).unwrap();
                bytes.truncate(len as usize);
                Resp::Bulk(Some(bytes))
            }
            "*" => {
                let len: i64 = rest.parse().unwrap();
                if len < 0 {
                    return Resp::Array(None);
                }
                Resp::Array(Some((0..len).map(|_| self.read()).collect()))
            }
            other => panic!("unexpected RESP type {other:?} in {line:?}"),
        }
    }
}

fn split(command: &str) -> Vec<&str> {
    command.split_whitespace().collect()
}

/// The events one step caused, as `channel message` lines.
type Recording = Vec<(String, Vec<String>)>;

/// Runs `steps` against `server` with `flags` and records what the subscriber gets.
fn record(server: &Server, flags: &str, steps: &[Step]) -> Recording {
    let mut main = Raw::connect(server.port);
    let mut blocker = Raw::connect(server.port);
    let mut subscriber = Raw::connect(server.port);
    for setup in [
        vec!["FLUSHALL"],
        vec!["DEBUG", "SET-ACTIVE-EXPIRE", "0"],
        vec!["CONFIG", "SET", "notify-keyspace-events", flags],
    ] {
        let args: Vec<&[u8]> = setup.iter().map(|a| a.as_bytes()).collect();
        let reply = main.call(&args);
        assert!(!matches!(reply, Resp::Error(_)), "{setup:?}: {reply:?}");
    }
    subscriber.call(&[b"PSUBSCRIBE", b"__key*__:*"]);
    let mut names = Vec::new();
    for (index, step) in steps.iter().enumerate() {
        let name = match step {
            Cmd(command) => {
                let args: Vec<&[u8]> = split(command).iter().map(|a| a.as_bytes()).collect();
                main.call(&args);
                command.to_string()
            }
            Args(args) => {
                let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
                main.call(&bytes);
                args.join(" ")
            }
            Sleep(ms) => {
                std::thread::sleep(Duration::from_millis(*ms));
                format!("(sleep {ms} ms)")
            }
            Block(command) => {
                let args: Vec<&[u8]> = split(command).iter().map(|a| a.as_bytes()).collect();
                blocker.send(&args);
                wait_until(&mut main, "blocked", || blocked_clients(server.port) == 1);
                format!("(blocked) {command}")
            }
            Unblocked => {
                let reply = blocker.read();
                format!("(unblocked: {reply:?})")
            }
            WaitDbsize(size) => {
                wait_until(&mut main, "dbsize", || dbsize(server.port) == *size);
                format!("(active expiry down to {size} keys)")
            }
        };
        let mark = index.to_string();
        main.call(&[
            b"PUBLISH",
            format!("__keymark__:{mark}").as_bytes(),
            mark.as_bytes(),
        ]);
        names.push(name);
    }
    let mut recording: Recording = names.into_iter().map(|n| (n, Vec::new())).collect();
    let mut step = 0;
    while step < recording.len() {
        let Resp::Array(Some(parts)) = subscriber.read() else {
            panic!("subscriber got a non-array");
        };
        let text = |resp: &Resp| match resp {
            Resp::Bulk(Some(bytes)) => String::from_utf8_lossy(bytes).into_owned(),
            other => format!("{other:?}"),
        };
        let channel = text(&parts[2]);
        let message = text(&parts[3]);
        if channel.starts_with("__keymark__:") {
            assert_eq!(message, step.to_string(), "markers out of order");
            step += 1;
        } else {
            recording[step].1.push(format!("{channel} {message}"));
        }
    }
    recording
}

fn wait_until(_main: &mut Raw, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn info_field(port: u16, section: &str, field: &str) -> i64 {
    let mut conn = Raw::connect(port);
    let Resp::Bulk(Some(info)) = conn.call(&[b"INFO", section.as_bytes()]) else {
        panic!("INFO");
    };
    let info = String::from_utf8(info).unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO"))
        .trim()
        .parse()
        .unwrap()
}

fn blocked_clients(port: u16) -> i64 {
    info_field(port, "clients", "blocked_clients")
}

fn dbsize(port: u16) -> i64 {
    let mut conn = Raw::connect(port);
    match conn.call(&[b"DBSIZE"]) {
        Resp::Int(n) => n,
        other => panic!("DBSIZE: {other:?}"),
    }
}

/// Runs the steps against both servers and compares.
fn compare(flags: &str, steps: &[Step]) {
    let latch = Server::latch(&[]);
    let redis = Server::redis(&[]);
    let expected = record(&redis, flags, steps);
    let got = record(&latch, flags, steps);
    let mut report = String::new();
    for ((name, want), (_, have)) in expected.iter().zip(&got) {
        if want != have {
            report.push_str(&format!(
                "step `{name}`:\n  redis-server: {want:?}\n  latch:        {have:?}\n"
            ));
        }
    }
    let total: usize = expected.iter().map(|(_, events)| events.len()).sum();
    assert!(
        report.is_empty(),
        "{flags}: events differ from redis-server's:\n{report}"
    );
    assert!(total > 0, "no events at all");
}

fn script() -> Vec<Step> {
    vec![
        // Strings.
        Cmd("SET s1 v"),
        Cmd("SET s1 v2"),
        Cmd("SET s2 v EX 100"),
        Cmd("SET s2 v PX 100000 GET"),
        Cmd("SET s3 v NX"),
        Cmd("SET s3 v NX"),
        Cmd("SET nokey v XX"),
        Cmd("SET s4 v GET"),
        Cmd("SET s5 v KEEPTTL"),
        Cmd("SETNX s6 v"),
        Cmd("SETNX s6 v"),
        Cmd("SETEX s7 100 v"),
        Cmd("PSETEX s8 100000 v"),
        Cmd("GETSET s1 v3"),
        Cmd("GETSET nokey2 v"),
        Cmd("MSET m1 a m2 b m1 c"),
        Cmd("MSETNX m3 a m4 b"),
        Cmd("MSETNX m3 a m5 b"),
        Cmd("GET s1"),
        Cmd("GET missing"),
        Cmd("MGET s1 missing s2"),
        Cmd("GETDEL s1"),
        Cmd("GETDEL missing"),
        Cmd("GETEX s2 EX 200"),
        Cmd("GETEX s2 PERSIST"),
        Cmd("GETEX s2 PERSIST"),
        Cmd("GETEX s2"),
        Cmd("GETEX s2 PXAT 1"),
        Cmd("GETEX missing EX 10"),
        Cmd("INCR c1"),
        Cmd("INCRBY c1 5"),
        Cmd("DECR c1"),
        Cmd("DECRBY c1 2"),
        Cmd("INCR s3"),
        Cmd("INCRBYFLOAT f1 1.5"),
        Cmd("INCRBYFLOAT f1 2"),
        Cmd("APPEND a1 x"),
        Cmd("APPEND a1 y"),
        Cmd("SETRANGE r1 3 abc"),
        Cmd("SETRANGE r1 0 z"),
        Cmd("SETRANGE r2 0 "),
        Cmd("PFADD hll1 a b c"),
        Cmd("PFADD hll1 a"),
        Cmd("PFADD hll2"),
        Cmd("PFADD hll2"),
        Cmd("PFMERGE hll3 hll1 hll2"),
        Cmd("PFMERGE hll3"),
        Cmd("PFCOUNT hll1 hll3"),
        Cmd("STRLEN a1"),
        Cmd("STRLEN missing"),
        Cmd("GETRANGE a1 0 -1"),
        Cmd("LCS a1 r1"),
        // Lists.
        Cmd("LPUSH l1 a b c"),
        Cmd("RPUSH l1 d e"),
        Cmd("LPUSHX l1 f"),
        Cmd("RPUSHX l1 g"),
        Cmd("LPUSHX nolist f"),
        Cmd("LPOP l1"),
        Cmd("RPOP l1 2"),
        Cmd("LPOP l1 0"),
        Cmd("LPOP nolist"),
        Cmd("LSET l1 0 x"),
        Cmd("LSET l1 100 x"),
        Cmd("LINSERT l1 BEFORE x y"),
        Cmd("LINSERT l1 BEFORE nothere y"),
        Cmd("LREM l1 0 y"),
        Cmd("LREM l1 0 nothere"),
        Cmd("LTRIM l1 0 1"),
        Cmd("LRANGE l1 0 -1"),
        Cmd("LLEN l1"),
        Cmd("LINDEX l1 0"),
        Cmd("LPOS l1 x"),
        Cmd("LRANGE nolist 0 -1"),
        Cmd("LMOVE l1 l2 LEFT RIGHT"),
        Cmd("LMOVE l1 l2 LEFT RIGHT"),
        Cmd("LMOVE l1 l2 LEFT RIGHT"),
        Cmd("RPOPLPUSH l2 l2"),
        Cmd("RPOPLPUSH l2 l3"),
        Cmd("LMPOP 2 nolist l2 LEFT COUNT 5"),
        Cmd("LMPOP 1 nolist LEFT"),
        Cmd("RPUSH l4 a b"),
        Cmd("LTRIM l4 5 10"),
        Cmd("RPUSH l4 a b"),
        Cmd("LREM l4 0 a"),
        Cmd("LREM l4 0 b"),
        Cmd("BLPOP l3 0"),
        Cmd("BLMPOP 0 1 l5 l3 LEFT"),
        Block("BLPOP bl1 0"),
        Cmd("RPUSH bl1 a b"),
        Unblocked,
        Block("BRPOP bl2 0"),
        Cmd("LPUSH bl2 a"),
        Unblocked,
        Block("BLMOVE bl3 bl4 LEFT RIGHT 0"),
        Cmd("RPUSH bl3 a"),
        Unblocked,
        Block("BRPOPLPUSH bl5 bl4 0"),
        Cmd("RPUSH bl5 a b"),
        Unblocked,
        Block("BLMPOP 0 1 bl6 RIGHT COUNT 3"),
        Cmd("RPUSH bl6 a b"),
        Unblocked,
        // Keys in general.
        Cmd("SET k1 v"),
        Cmd("SET k2 v"),
        Cmd("DEL k1 k2 nokey"),
        Cmd("UNLINK nokey"),
        Cmd("SET k1 v"),
        Cmd("UNLINK k1"),
        Cmd("SET k1 v"),
        Cmd("EXPIRE k1 100"),
        Cmd("PEXPIRE k1 100000 XX"),
        Cmd("EXPIRE k1 100 NX"),
        Cmd("EXPIREAT k1 99999999999"),
        Cmd("PEXPIREAT k1 99999999999000"),
        Cmd("EXPIRE nokey 100"),
        Cmd("TTL k1"),
        Cmd("PTTL nokey"),
        Cmd("EXPIRETIME nokey"),
        Cmd("PERSIST k1"),
        Cmd("PERSIST k1"),
        Cmd("PERSIST nokey"),
        Cmd("EXPIRE k1 -1"),
        Cmd("SET k1 v"),
        Cmd("PEXPIREAT k1 1"),
        Cmd("EXISTS k1 nokey"),
        Cmd("TYPE nokey"),
        Cmd("TOUCH nokey"),
        Cmd("OBJECT ENCODING nokey"),
        Cmd("DUMP nokey"),
        Cmd("SET r1 v"),
        Cmd("SET r2 v"),
        Cmd("RENAME r1 r3"),
        Cmd("RENAME r3 r2"),
        Cmd("RENAME r2 r2"),
        Cmd("RENAME nokey r2"),
        Cmd("SET r4 v"),
        Cmd("RENAMENX r2 r4"),
        Cmd("RENAMENX r2 r5"),
        Cmd("COPY r5 r6"),
        Cmd("COPY r5 r6"),
        Cmd("COPY r5 r6 REPLACE"),
        Cmd("COPY r5 r6 DB 3"),
        Cmd("COPY nokey r7"),
        Cmd("MOVE r6 4"),
        Cmd("MOVE r6 4"),
        Cmd("MOVE r5 3"),
        Cmd("SELECT 3"),
        Cmd("SET x3 v"),
        Cmd("RPUSH l3 a"),
        Cmd("DEL r6 x3"),
        Cmd("SELECT 0"),
        Cmd("SWAPDB 0 3"),
        Cmd("SET afterswap v"),
        Cmd("SWAPDB 0 3"),
        Cmd("SET ds v"),
        Args(vec!["RESTORE", "rs1", "0", "\x00\x01v\x0a\x00"]),
        Cmd("FLUSHDB"),
        Cmd("SET sc1 v"),
        Cmd("SCAN 0 COUNT 100"),
        Cmd("RANDOMKEY"),
        Cmd("KEYS *"),
        Cmd("DBSIZE"),
        // Hashes.
        Cmd("HSET h1 a 1 b 2"),
        Cmd("HSET h1 a 1"),
        Cmd("HMSET h1 c 3"),
        Cmd("HSETNX h1 a 1"),
        Cmd("HSETNX h1 d 4"),
        Cmd("HSETNX h2 a 1"),
        Cmd("HINCRBY h1 n 5"),
        Cmd("HINCRBY h3 n 5"),
        Cmd("HINCRBYFLOAT h1 f 1.5"),
        Cmd("HINCRBYFLOAT h4 f 1.5"),
        Cmd("HDEL h1 nofield"),
        Cmd("HDEL h1 a b"),
        Cmd("HDEL h2 a"),
        Cmd("HDEL nokey a"),
        Cmd("HGET nokey a"),
        Cmd("HGETALL h1"),
        Cmd("HLEN nokey"),
        Cmd("HRANDFIELD nokey"),
        Cmd("HSCAN nokey 0"),
        Cmd("HEXISTS nokey a"),
        Cmd("HSTRLEN h1 c"),
        // Sets.
        Cmd("SADD st1 a b c"),
        Cmd("SADD st1 a"),
        Cmd("SREM st1 x"),
        Cmd("SREM st1 a"),
        Cmd("SADD st2 a"),
        Cmd("SREM st2 a"),
        Cmd("SMOVE st1 st3 b"),
        Cmd("SMOVE st1 st3 c"),
        Cmd("SMOVE st3 st3 c"),
        Cmd("SMOVE nokey st3 c"),
        Cmd("SADD st4 1 2 3 4 5"),
        Cmd("SPOP st4"),
        Cmd("SPOP st4 0"),
        Cmd("SPOP st4 2"),
        Cmd("SPOP st4 10"),
        Cmd("SPOP nokey"),
        Cmd("SADD st5 a b c"),
        Cmd("SADD st6 b c d"),
        Cmd("SINTERSTORE st7 st5 st6"),
        Cmd("SINTERSTORE st7 st5 nokey"),
        Cmd("SUNIONSTORE st8 st5 st6 nokey"),
        Cmd("SDIFFSTORE st9 st5 st6"),
        Cmd("SDIFFSTORE st9 st5 st5"),
        Cmd("SINTER st5 nokey"),
        Cmd("SUNION st5 nokey"),
        Cmd("SDIFF nokey st5"),
        Cmd("SINTERCARD 2 st5 nokey"),
        Cmd("SMEMBERS nokey"),
        Cmd("SISMEMBER nokey a"),
        Cmd("SMISMEMBER nokey a"),
        Cmd("SCARD nokey"),
        Cmd("SRANDMEMBER nokey"),
        Cmd("SSCAN nokey 0"),
        // Sorted sets.
        Cmd("ZADD z1 1 a 2 b 3 c"),
        Cmd("ZADD z1 1 a"),
        Cmd("ZADD z1 XX 5 a"),
        Cmd("ZADD z1 NX 5 a"),
        Cmd("ZADD z1 INCR 2 a"),
        Cmd("ZADD z2 XX 1 a"),
        Cmd("ZINCRBY z1 1 b"),
        Cmd("ZINCRBY z3 1 b"),
        Cmd("ZREM z1 x"),
        Cmd("ZREM z3 b"),
        Cmd("ZADD z4 1 a 2 b 3 c 4 d 5 e 6 f"),
        Cmd("ZREMRANGEBYRANK z4 0 0"),
        Cmd("ZREMRANGEBYSCORE z4 2 2"),
        Cmd("ZREMRANGEBYLEX z4 [d [d"),
        Cmd("ZREMRANGEBYLEX z4 [x [y"),
        Cmd("ZPOPMIN z4"),
        Cmd("ZPOPMAX z4 0"),
        Cmd("ZPOPMAX z4 5"),
        Cmd("ZPOPMIN nokey"),
        Cmd("ZADD z5 1 a 2 b"),
        Cmd("ZADD z6 2 b 3 c"),
        Cmd("ZUNIONSTORE z7 2 z5 z6"),
        Cmd("ZINTERSTORE z7 2 z5 z6"),
        Cmd("ZINTERSTORE z7 2 z5 nokey"),
        Cmd("ZDIFFSTORE z8 2 z5 z6"),
        Cmd("ZDIFFSTORE z8 1 nokey"),
        Cmd("ZRANGESTORE z9 z5 0 -1"),
        Cmd("ZRANGESTORE z9 nokey 0 -1"),
        Cmd("ZMPOP 2 nokey z5 MIN COUNT 10"),
        Cmd("BZPOPMIN z6 0"),
        Cmd("BZMPOP 0 1 z6 MAX"),
        Block("BZPOPMIN bz1 0"),
        Cmd("ZADD bz1 1 a 2 b"),
        Unblocked,
        Block("BZMPOP 0 1 bz2 MAX COUNT 5"),
        Cmd("ZADD bz2 1 a 2 b"),
        Unblocked,
        Cmd("ZRANGE nokey 0 -1"),
        Cmd("ZSCORE nokey a"),
        Cmd("ZCARD nokey"),
        Cmd("ZRANK nokey a"),
        Cmd("ZUNION 2 nokey z1"),
        Cmd("ZRANDMEMBER nokey"),
        // Streams.
        Cmd("XADD x1 1-1 f v"),
        Cmd("XADD x1 2-1 f v"),
        Cmd("XADD x1 MAXLEN 1 3-1 f v"),
        Cmd("XADD x1 MAXLEN 5 4-1 f v"),
        Cmd("XADD x1 NOMKSTREAM 5-1 f v"),
        Cmd("XADD x2 NOMKSTREAM 5-1 f v"),
        Cmd("XADD x1 1-1 f v"),
        Cmd("XTRIM x1 MAXLEN 1"),
        Cmd("XTRIM x1 MAXLEN 1"),
        Cmd("XDEL x1 4-1"),
        Cmd("XDEL x1 1-1"),
        Cmd("XSETID x1 10-1"),
        Cmd("XSETID nokey 10-1"),
        Cmd("XGROUP CREATE x1 g1 0"),
        Cmd("XGROUP CREATE x1 g1 0"),
        Cmd("XGROUP CREATE x3 g1 $ MKSTREAM"),
        Cmd("XGROUP CREATE nokey g1 $"),
        Cmd("XGROUP SETID x1 g1 0"),
        Cmd("XGROUP CREATECONSUMER x1 g1 c1"),
        Cmd("XGROUP CREATECONSUMER x1 g1 c1"),
        Cmd("XADD x1 11-1 f v"),
        Cmd("XADD x1 12-1 f v"),
        Cmd("XREADGROUP GROUP g1 c2 COUNT 1 STREAMS x1 >"),
        Cmd("XREADGROUP GROUP g1 c2 STREAMS x1 0"),
        Cmd("XREADGROUP GROUP g1 c3 STREAMS x1 0"),
        Cmd("XREADGROUP GROUP g1 c2 STREAMS x1 >"),
        Cmd("XREADGROUP GROUP g1 c4 STREAMS x1 >"),
        Cmd("XACK x1 g1 11-1"),
        Cmd("XCLAIM x1 g1 c5 0 12-1"),
        Cmd("XCLAIM x1 g1 c6 0 11-1 FORCE"),
        Cmd("XCLAIM x1 g1 c6 0 99-1"),
        Cmd("XAUTOCLAIM x1 g1 c7 0 0"),
        Cmd("XAUTOCLAIM x1 g1 c7 0 0"),
        Cmd("XPENDING x1 g1"),
        Cmd("XGROUP DELCONSUMER x1 g1 c1"),
        Cmd("XGROUP DELCONSUMER x1 g1 nobody"),
        Cmd("XGROUP DESTROY x1 g1"),
        Cmd("XGROUP DESTROY x1 g1"),
        Cmd("XREAD STREAMS nokey x1 0 0"),
        Cmd("XRANGE nokey - +"),
        Cmd("XLEN nokey"),
        Cmd("XINFO STREAM nokey"),
        Cmd("XGROUP CREATE x4 g1 $ MKSTREAM"),
        Block("XREADGROUP GROUP g1 c1 BLOCK 0 STREAMS x4 >"),
        Cmd("XADD x4 1-1 f v"),
        Unblocked,
        Block("XREAD BLOCK 0 STREAMS x5 nokey2 $ $"),
        Cmd("XADD x5 1-1 f v"),
        Unblocked,
        // Geo.
        Cmd("GEOADD g1 13.361389 38.115556 Palermo 15.087269 37.502669 Catania"),
        Cmd("GEOADD g1 13.361389 38.115556 Palermo"),
        Cmd("GEOADD g1 XX 13.361389 38.115556 Nowhere"),
        Cmd("GEORADIUS g1 15 37 200 km STORE g2"),
        Cmd("GEORADIUS g1 15 37 200 km STOREDIST g3"),
        Cmd("GEORADIUS g1 0 0 1 km STORE g2"),
        Cmd("GEORADIUSBYMEMBER g1 Palermo 200 km STORE g4"),
        Cmd("GEOSEARCHSTORE g5 g1 FROMLONLAT 15 37 BYRADIUS 200 km"),
        Cmd("GEOSEARCHSTORE g5 nokey FROMLONLAT 15 37 BYRADIUS 200 km"),
        Cmd("GEOSEARCH nokey FROMLONLAT 15 37 BYRADIUS 200 km"),
        Cmd("GEOPOS nokey a"),
        Cmd("GEODIST nokey a b"),
        Cmd("GEOHASH nokey a"),
        // Sorting.
        Cmd("RPUSH so1 3 1 2"),
        Cmd("SORT so1 STORE so2"),
        Cmd("SORT so1 BY nosort GET w_* STORE so3"),
        Cmd("SORT nokey STORE so2"),
        Cmd("SORT so1"),
        Cmd("SORT_RO nokey"),
        // Bitmaps.
        Cmd("SETBIT b1 7 1"),
        Cmd("SETBIT b1 7 1"),
        Cmd("SETBIT b1 100 0"),
        Cmd("SETBIT b1 7 0"),
        Cmd("BITFIELD b2 SET u8 0 255"),
        Cmd("BITFIELD b2 SET u8 0 255"),
        Cmd("BITFIELD b2 INCRBY u8 0 1"),
        Cmd("BITFIELD b2 GET u8 0"),
        Cmd("BITFIELD nokey GET u8 0"),
        Cmd("BITFIELD_RO nokey GET u8 0"),
        Cmd("BITFIELD b3 OVERFLOW FAIL INCRBY u8 0 300"),
        Cmd("BITOP AND b4 b1 b2"),
        Cmd("BITOP OR b4 nokey nokey2"),
        Cmd("BITOP NOT b5 b2"),
        Cmd("BITCOUNT nokey"),
        Cmd("BITPOS nokey 1"),
        Cmd("GETBIT nokey 1"),
        // Transactions and scripts: each inner command's events.
        Cmd("MULTI"),
        Cmd("SET t1 v"),
        Cmd("LPUSH t2 a"),
        Cmd("GET nokey"),
        Cmd("DEL t1"),
        Cmd("EXEC"),
        Args(vec![
            "EVAL",
            "redis.call('set', KEYS[1], 'v'); redis.call('incr', KEYS[2]); redis.call('get', 'nokey'); return redis.call('del', KEYS[1])",
            "2",
            "ev1",
            "ev2",
        ]),
        Args(vec![
            "EVAL",
            "return redis.call('get', KEYS[1])",
            "1",
            "nokey",
        ]),
        Cmd("SET ro v"),
        Args(vec!["EVAL_RO", "return redis.call('get', KEYS[1])", "1", "nokey"]),
        Cmd("FLUSHALL"),
        // Eviction: every key when the limit cannot be met, only keys with a TTL for a
        // volatile policy.
        Cmd("CONFIG SET maxmemory-policy allkeys-lru"),
        Cmd("SET ev1 v"),
        Cmd("CONFIG SET maxmemory 1"),
        Cmd("CONFIG SET maxmemory 0"),
        Cmd("CONFIG SET maxmemory-policy volatile-ttl"),
        Cmd("SET ev2 v"),
        Cmd("SET ev3 v EX 1000"),
        Cmd("CONFIG SET maxmemory 1"),
        Cmd("SET ev4 v"),
        Cmd("CONFIG SET maxmemory 0"),
        Cmd("CONFIG SET maxmemory-policy noeviction"),
        Cmd("FLUSHALL"),
        // Lazy expiry.
        Cmd("SET e1 v PX 1"),
        Cmd("SET e2 v PX 1"),
        Cmd("SET e3 v PX 1"),
        Cmd("RPUSH e4 a"),
        Cmd("PEXPIRE e4 1"),
        Sleep(20),
        Cmd("GET e1"),
        Cmd("SET e2 again"),
        Cmd("EXISTS e3"),
        Cmd("LPUSH e4 b"),
        Cmd("SET e5 v PX 1"),
        Cmd("SET e6 v PX 1"),
        Cmd("SET e7 v PX 1"),
        Cmd("SET e8 v PX 1"),
        Cmd("SET e9 v PX 1"),
        Cmd("SADD e10 a"),
        Cmd("PEXPIRE e10 1"),
        Cmd("ZADD e11 1 a"),
        Cmd("PEXPIRE e11 1"),
        Cmd("SET e12 v PX 1"),
        Cmd("SET e13 v PX 1"),
        Cmd("SET e14 v PX 1"),
        Cmd("SET e15 v"),
        Cmd("SET e16 v PX 1"),
        Sleep(20),
        Cmd("MGET e5 nokey"),
        Cmd("RENAME e15 e6"),
        Cmd("TTL e7"),
        Cmd("DEL e8"),
        Cmd("APPEND e9 x"),
        Cmd("SINTERSTORE e12 e10 e11"),
        Cmd("TYPE e13"),
        Cmd("OBJECT ENCODING e16"),
        Cmd("SCAN 0 COUNT 1000"),
        // Another database.
        Cmd("SELECT 5"),
        Cmd("SET d5 v PX 1"),
        Cmd("LPUSH d5l a"),
        Sleep(20),
        Cmd("GET d5"),
        Cmd("MULTI"),
        Cmd("RPOP d5l"),
        Cmd("SELECT 6"),
        Cmd("SET d6 v"),
        Cmd("EXEC"),
        Cmd("SELECT 0"),
        Cmd("FLUSHALL"),
        // Active expiry.
        Cmd("DEBUG SET-ACTIVE-EXPIRE 1"),
        Cmd("FLUSHALL"),
        Cmd("SET ae1 v PX 50"),
        WaitDbsize(0),
        Cmd("HSET ae2 f v"),
        Cmd("PEXPIRE ae2 50"),
        WaitDbsize(0),
        Cmd("DEBUG SET-ACTIVE-EXPIRE 0"),
    ]
}

#[test]
fn the_same_events_as_redis_with_kea() {
    compare("KEA", &script());
}

#[test]
fn the_same_events_as_redis_with_new_and_keymiss() {
    compare("KEAnm", &script());
}
