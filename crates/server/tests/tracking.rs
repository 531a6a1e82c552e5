//! Client-side caching (CLIENT TRACKING) against Debian's redis-server 7.0: each scenario
//! runs, command for command, on a fresh Latch and a fresh redis-server, and everything the
//! connections receive (replies and invalidation pushes, byte for byte) must be the same.
//!
//! Scenarios are driven from one thread and every command waits for its reply, so their
//! order is fixed. To see what a connection was sent meanwhile, [`Conn::pending`] sends a
//! PING and collects whatever arrives before its answer: both servers write a message queued
//! for a connection before the reply to input that came after it.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use latch_protocol::frame::decode;
use latch_testkit::Server;

/// One connection, reading whole frames.
struct Conn {
    stream: TcpStream,
    buffer: Vec<u8>,
}

impl Conn {
    fn open(port: u16) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream.set_nodelay(true).unwrap();
        Conn {
            stream,
            buffer: Vec::new(),
        }
    }

    fn send(&mut self, command: &str) {
        let args: Vec<&str> = command.split(' ').collect();
        self.send_args(&args);
    }

    fn send_args(&mut self, args: &[&str]) {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            out.extend_from_slice(format!("${}\r\n{arg}\r\n", arg.len()).as_bytes());
        }
        self.stream.write_all(&out).expect("write");
    }

    /// The next frame's bytes, waiting at most `timeout`.
    fn read_within(&mut self, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some((_, used)) = decode(&self.buffer).expect("valid RESP") {
                let frame: Vec<u8> = self.buffer.drain(..used).collect();
                return Some(String::from_utf8_lossy(&frame).into_owned());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buffer.extend_from_slice(&chunk[..n]),
                Err(_) => return None,
            }
        }
    }

    fn read(&mut self) -> String {
        self.read_within(Duration::from_secs(5))
            .expect("a frame within 5 s")
    }

    /// Sends a command (words split on spaces) and returns its reply.
    fn cmd(&mut self, command: &str) -> String {
        self.send(command);
        self.read()
    }

    /// What the connection was sent that it has not read, ended by a PING's answer.
    fn pending(&mut self) -> Vec<String> {
        self.send("PING");
        let mut seen = Vec::new();
        loop {
            let frame = self.read();
            if frame == "+PONG\r\n" || frame == "*2\r\n$4\r\npong\r\n$0\r\n\r\n" {
                return seen;
            }
            seen.push(frame);
        }
    }

    /// The connection's id (CLIENT ID).
    fn id(&mut self) -> i64 {
        let reply = self.cmd("CLIENT ID");
        reply.trim()[1..].parse().expect("an id")
    }
}

/// A scenario's transcript: every reply and push, with client ids replaced by names.
#[derive(Default)]
struct Log {
    lines: Vec<String>,
    ids: Vec<(i64, &'static str)>,
}

impl Log {
    fn name_id(&mut self, id: i64, name: &'static str) {
        self.ids.push((id, name));
    }

    fn add(&mut self, what: &str, got: impl AsRef<str>) {
        let mut got = got.as_ref().to_string();
        let mut what = what.to_string();
        for (id, name) in &self.ids {
            got = got.replace(&format!(":{id}\r\n"), &format!(":<{name}>\r\n"));
            got = got.replace(&format!("redir={id} "), &format!("redir=<{name}> "));
            what = what.replace(&format!("REDIRECT {id}"), &format!("REDIRECT <{name}>"));
        }
        self.lines.push(format!("{what} => {got:?}"));
    }

    /// Sends `command` on `conn` and logs the reply.
    fn cmd(&mut self, conn: &mut Conn, command: &str) {
        let reply = conn.cmd(command);
        self.add(command, reply);
    }

    /// Logs what `conn` was sent meanwhile.
    fn pending(&mut self, conn: &mut Conn, who: &str) {
        let pending = conn.pending();
        self.add(&format!("pending on {who}"), pending.concat());
    }
}

/// A scenario: given a port, drives its connections and returns the transcript.
type Scenario = fn(u16) -> Log;

/// Runs `scenario` on redis-server and on Latch; the transcripts must match.
fn same_on_both(scenario: Scenario, latch_args: &[&str]) {
    let redis = Server::redis(&[]);
    let expected = scenario(redis.port).lines;
    drop(redis);
    let latch = common::TestServer::start(latch_args);
    let got = scenario(latch.port).lines;
    if std::env::var_os("TRACKING_TRANSCRIPT").is_some() {
        eprintln!("{}", expected.join("\n"));
    }
    for (at, (want, have)) in expected.iter().zip(&got).enumerate() {
        assert_eq!(have, want, "step {at} differs (Latch vs redis-server)");
    }
    assert_eq!(got.len(), expected.len(), "transcripts differ in length");
}

/// A RESP3 connection with tracking in the given mode.
fn tracking(port: u16, log: &mut Log, options: &str) -> Conn {
    let mut conn = Conn::open(port);
    conn.cmd("HELLO 3");
    log.cmd(&mut conn, &format!("CLIENT TRACKING on{options}"));
    conn
}

fn default_mode(port: u16) -> Log {
    let mut log = Log::default();
    let mut writer = Conn::open(port);
    let mut c = tracking(port, &mut log, "");
    log.cmd(&mut writer, "MSET a 1 b 2");
    log.cmd(&mut c, "GET a");
    log.cmd(&mut c, "MGET a b missing");
    log.cmd(&mut writer, "HSET h f v");
    log.cmd(&mut c, "HGET h f");
    log.cmd(&mut c, "STRLEN b");
    log.pending(&mut c, "c");
    log.cmd(&mut writer, "INCR a");
    log.pending(&mut c, "c");
    // Forgotten once invalidated, until read again.
    log.cmd(&mut writer, "INCR a");
    log.pending(&mut c, "c");
    log.cmd(&mut writer, "SET missing now");
    log.cmd(&mut writer, "DEL b");
    log.cmd(&mut writer, "HDEL h f");
    log.pending(&mut c, "c");
    // A write that changes nothing invalidates nothing.
    log.cmd(&mut c, "GET a");
    log.cmd(&mut writer, "DEL nothing-here");
    log.pending(&mut c, "c");
    // The client's own write: its invalidation comes after its reply.
    log.cmd(&mut c, "SET a mine");
    log.add("after own write", c.read());
    // Keys read in another database are the same keys.
    log.cmd(&mut c, "GET a");
    log.cmd(&mut writer, "SELECT 1");
    log.cmd(&mut writer, "SET a other-db");
    log.pending(&mut c, "c");
    // RESP2 without a redirection: nothing is sent.
    let mut old = Conn::open(port);
    log.cmd(&mut old, "CLIENT TRACKING on");
    log.cmd(&mut old, "GET k2");
    log.cmd(&mut writer, "SELECT 0");
    log.cmd(&mut writer, "SET k2 v");
    log.pending(&mut old, "old");
    log.cmd(&mut c, "CLIENT TRACKINGINFO");
    log.cmd(&mut old, "CLIENT TRACKINGINFO");
    log.cmd(&mut c, "CLIENT GETREDIR");
    log.cmd(&mut c, "CLIENT TRACKING off");
    log.cmd(&mut c, "CLIENT GETREDIR");
    log.cmd(&mut c, "CLIENT TRACKINGINFO");
    log
}

#[test]
fn default_mode_invalidates_what_was_read() {
    same_on_both(default_mode, &[]);
}

fn redirect_resp2(port: u16) -> Log {
    let mut log = Log::default();
    let mut writer = Conn::open(port);
    let mut sink = Conn::open(port);
    let sink_id = sink.id();
    log.name_id(sink_id, "sink");
    log.cmd(&mut sink, "SUBSCRIBE __redis__:invalidate");
    let mut c = Conn::open(port);
    log.cmd(&mut c, &format!("CLIENT TRACKING on REDIRECT {sink_id}"));
    log.cmd(&mut c, "GET x");
    log.cmd(&mut c, "MGET y z");
    log.cmd(&mut writer, "SET x 1");
    log.cmd(&mut writer, "MSET y 1 z 1");
    log.pending(&mut sink, "sink");
    log.cmd(&mut c, "CLIENT GETREDIR");
    log.cmd(&mut c, "CLIENT TRACKINGINFO");
    let list = c.cmd("CLIENT INFO");
    log.add("CLIENT INFO fields", fields(&list, &["flags", "redir"]));
    log.cmd(&mut c, "GET x");
    log.cmd(&mut writer, "FLUSHALL");
    log.pending(&mut sink, "sink");
    // A RESP3 client redirected to gets pushes, subscribed or not.
    let mut sink3 = Conn::open(port);
    let sink3_id = sink3.id();
    log.name_id(sink3_id, "sink3");
    sink3.cmd("HELLO 3");
    log.cmd(&mut c, &format!("CLIENT TRACKING on REDIRECT {sink3_id}"));
    log.cmd(&mut c, "GET x");
    log.cmd(&mut writer, "SET x 2");
    log.pending(&mut sink3, "sink3");
    // A RESP2 client not subscribed to anything gets nothing.
    let mut plain = Conn::open(port);
    let plain_id = plain.id();
    log.name_id(plain_id, "plain");
    log.cmd(&mut c, &format!("CLIENT TRACKING on REDIRECT {plain_id}"));
    log.cmd(&mut c, "GET x");
    log.cmd(&mut writer, "SET x 3");
    log.pending(&mut plain, "plain");
    // The redirection goes away: a RESP3 client hears of it, and says so.
    let mut c3 = tracking(port, &mut log, &format!(" REDIRECT {plain_id}"));
    log.cmd(&mut c3, "GET x");
    log.cmd(&mut plain, "QUIT");
    log.cmd(&mut writer, "SET x 4");
    log.pending(&mut c3, "c3");
    log.cmd(&mut c3, "CLIENT TRACKINGINFO");
    let info = c3.cmd("CLIENT INFO");
    log.add("CLIENT INFO fields", fields(&info, &["flags", "redir"]));
    log.cmd(&mut c3, "CLIENT TRACKING on");
    log.cmd(&mut c3, "CLIENT TRACKINGINFO");
    log
}

/// `name=value` of the given fields of a CLIENT INFO reply.
fn fields(info: &str, names: &[&str]) -> String {
    info.split([' ', '\n', '\r'])
        .filter(|field| names.iter().any(|n| field.starts_with(&format!("{n}="))))
        .collect::<Vec<_>>()
        .join(" ")
        + " "
}

#[test]
fn redirection_to_resp2_subscribers_and_resp3_clients() {
    same_on_both(redirect_resp2, &[]);
}

fn broadcast(port: u16) -> Log {
    let mut log = Log::default();
    let mut writer = Conn::open(port);
    let mut c = tracking(port, &mut log, " BCAST PREFIX a: PREFIX b:");
    log.cmd(&mut c, "CLIENT TRACKINGINFO");
    let info = c.cmd("CLIENT INFO");
    log.add("CLIENT INFO fields", fields(&info, &["flags", "redir"]));
    log.cmd(&mut writer, "MSET a:1 1 b:1 2 c:1 3");
    log.pending(&mut c, "c");
    // One message per prefix for a whole transaction, keys in order.
    log.cmd(&mut writer, "MULTI");
    for command in ["INCR b:2", "INCR a:2", "INCR a:1", "INCR c:2", "INCR a:2"] {
        log.cmd(&mut writer, command);
    }
    log.cmd(&mut writer, "EXEC");
    log.pending(&mut c, "c");
    // Scripts count as one command too.
    log.cmd(
        &mut writer,
        "EVAL redis.call('set','a:9','x');redis.call('set','b:9','y') 0",
    );
    log.pending(&mut c, "c");
    // More prefixes, and the overlap errors.
    log.cmd(&mut c, "CLIENT TRACKING on BCAST PREFIX c:");
    log.cmd(&mut c, "CLIENT TRACKING on BCAST PREFIX a:x");
    log.cmd(&mut c, "CLIENT TRACKING on BCAST PREFIX a");
    log.cmd(&mut c, "CLIENT TRACKING on BCAST PREFIX d: PREFIX d:e");
    log.cmd(&mut c, "CLIENT TRACKING on BCAST PREFIX e:f PREFIX e:");
    // Redis 7.0.15 answers a collision between two new prefixes that are not the first
    // with the error, and then goes on: tracking takes every prefix, and OK follows.
    log.cmd(
        &mut c,
        "CLIENT TRACKING on BCAST PREFIX f: PREFIX g: PREFIX g:h",
    );
    log.add("second reply", c.read());
    log.cmd(&mut c, "CLIENT TRACKING on");
    log.cmd(&mut c, "CLIENT TRACKINGINFO");
    log.cmd(&mut writer, "SET c:1 again");
    log.pending(&mut c, "c");
    // A second BCAST client on one of the prefixes, with NOLOOP.
    let mut other = tracking(port, &mut log, " BCAST NOLOOP PREFIX a:");
    log.cmd(&mut other, "SET a:own 1");
    log.cmd(&mut writer, "SET a:theirs 1");
    log.pending(&mut other, "other");
    log.pending(&mut c, "c");
    log.cmd(&mut other, "MULTI");
    log.cmd(&mut other, "SET a:m1 1");
    log.cmd(&mut other, "EXEC");
    log.pending(&mut other, "other");
    log.pending(&mut c, "c");
    // The empty prefix: every key. And a flush tells every tracking client.
    let mut all = tracking(port, &mut log, " BCAST");
    log.cmd(&mut all, "CLIENT TRACKINGINFO");
    log.cmd(&mut writer, "SET zzz 1");
    log.pending(&mut all, "all");
    log.cmd(&mut writer, "FLUSHDB");
    log.pending(&mut all, "all");
    log.pending(&mut c, "c");
    log.pending(&mut other, "other");
    log
}

#[test]
fn broadcast_mode_with_prefixes() {
    same_on_both(broadcast, &[]);
}

fn opt_in_out(port: u16) -> Log {
    let mut log = Log::default();
    let mut writer = Conn::open(port);
    let mut c = Conn::open(port);
    c.cmd("HELLO 3");
    log.cmd(&mut c, "CLIENT CACHING yes");
    log.cmd(&mut c, "CLIENT TRACKING on OPTIN OPTOUT");
    log.cmd(&mut c, "CLIENT TRACKING on OPTIN BCAST");
    log.cmd(&mut c, "CLIENT TRACKING on PREFIX x");
    log.cmd(&mut c, "CLIENT TRACKING on REDIRECT 999999");
    log.cmd(&mut c, "CLIENT TRACKING on REDIRECT 1 REDIRECT 2");
    log.cmd(&mut c, "CLIENT TRACKING on REDIRECT x");
    log.cmd(&mut c, "CLIENT TRACKING on FOO");
    log.cmd(&mut c, "CLIENT TRACKING maybe");
    log.cmd(&mut c, "CLIENT TRACKING on OPTIN");
    log.cmd(&mut c, "CLIENT TRACKING on OPTOUT");
    log.cmd(&mut c, "CLIENT TRACKING on BCAST");
    log.cmd(&mut c, "CLIENT CACHING no");
    log.cmd(&mut c, "CLIENT CACHING maybe");
    log.cmd(&mut c, "GET k1");
    log.cmd(&mut c, "CLIENT CACHING yes");
    log.cmd(&mut c, "CLIENT TRACKINGINFO");
    log.cmd(&mut c, "GET k2");
    log.cmd(&mut c, "GET k3");
    log.cmd(&mut writer, "MSET k1 1 k2 2 k3 3");
    log.pending(&mut c, "c");
    // Before MULTI, CACHING covers the whole transaction.
    log.cmd(&mut c, "CLIENT CACHING yes");
    log.cmd(&mut c, "MULTI");
    log.cmd(&mut c, "GET k1");
    log.cmd(&mut c, "GET k2");
    log.cmd(&mut c, "EXEC");
    log.cmd(&mut c, "CLIENT TRACKINGINFO");
    log.cmd(&mut writer, "MSET k1 1 k2 2");
    log.pending(&mut c, "c");
    // OPTOUT.
    log.cmd(&mut c, "CLIENT TRACKING off");
    log.cmd(&mut c, "CLIENT TRACKING on OPTOUT");
    log.cmd(&mut c, "CLIENT CACHING yes");
    log.cmd(&mut c, "CLIENT CACHING no");
    log.cmd(&mut c, "CLIENT TRACKINGINFO");
    log.cmd(&mut c, "GET k1");
    log.cmd(&mut c, "GET k2");
    log.cmd(&mut writer, "MSET k1 1 k2 2");
    log.pending(&mut c, "c");
    log.cmd(&mut c, "CLIENT TRACKING off");
    log.cmd(&mut c, "CLIENT CACHING no");
    log
}

#[test]
fn optin_and_optout_with_client_caching() {
    same_on_both(opt_in_out, &[]);
}

fn noloop_scripts_multi(port: u16) -> Log {
    let mut log = Log::default();
    let mut writer = Conn::open(port);
    let mut c = tracking(port, &mut log, " NOLOOP");
    log.cmd(&mut c, "MGET mine theirs");
    log.cmd(&mut c, "SET mine 1");
    log.cmd(&mut writer, "SET theirs 1");
    log.pending(&mut c, "c");
    log.cmd(&mut c, "CLIENT TRACKING on");
    // A script's read-only call tracks the keys the script declared.
    log.cmd(&mut c, "EVAL redis.call('get','other') 2 k1 k2");
    log.cmd(&mut writer, "MSET k2 1 k1 1 other 1");
    log.pending(&mut c, "c");
    log.cmd(&mut c, "EVAL redis.call('set','k3','x') 2 k3 k4");
    log.cmd(&mut c, "EVAL_RO redis.call('ping') 1 k5");
    log.cmd(&mut c, "EVAL_RO redis.call('get','k6') 1 k6");
    log.cmd(&mut writer, "MSET k3 1 k4 1 k5 1 k6 1");
    log.pending(&mut c, "c");
    // A script that reads a key, then writes it: the invalidation follows the reply.
    log.cmd(
        &mut c,
        "EVAL redis.call('get',KEYS[1]);redis.call('set',KEYS[1],'y') 1 k7",
    );
    log.add("after script", c.read());
    log.pending(&mut c, "c");
    // Transactions: invalidations of the client's own keys come after EXEC's reply.
    log.cmd(&mut c, "MSET a 1 b 2");
    log.cmd(&mut c, "GET a");
    log.cmd(&mut c, "MULTI");
    log.cmd(&mut c, "INCR a");
    log.cmd(&mut c, "GET b");
    log.cmd(&mut c, "EXEC");
    log.add("after EXEC", c.read());
    log.pending(&mut c, "c");
    // Written, then read, in one transaction: tracked afterwards.
    log.cmd(&mut c, "MULTI");
    log.cmd(&mut c, "SET d 1");
    log.cmd(&mut c, "GET d");
    log.cmd(&mut c, "EXEC");
    log.pending(&mut c, "c");
    log.cmd(&mut writer, "SET d 2");
    log.pending(&mut c, "c");
    // Another client's script and transaction.
    log.cmd(&mut c, "MGET e f");
    log.cmd(
        &mut writer,
        "EVAL redis.call('set','e','1');redis.call('set','f','1') 0",
    );
    log.pending(&mut c, "c");
    log.cmd(&mut c, "MGET e f");
    log.cmd(&mut writer, "MULTI");
    log.cmd(&mut writer, "SET f 2");
    log.cmd(&mut writer, "SET e 2");
    log.cmd(&mut writer, "EXEC");
    log.pending(&mut c, "c");
    // A blocked client's command writes when it is served.
    log.cmd(&mut c, "LRANGE dst 0 -1");
    let mut blocked = Conn::open(port);
    blocked.send("BLMOVE src dst LEFT LEFT 0");
    std::thread::sleep(Duration::from_millis(100));
    log.cmd(&mut writer, "RPUSH src v");
    log.add("BLMOVE", blocked.read());
    log.pending(&mut c, "c");
    log
}

#[test]
fn noloop_scripts_transactions_and_blocking() {
    same_on_both(noloop_scripts_multi, &[]);
}

fn expiry_and_flush(port: u16) -> Log {
    let mut log = Log::default();
    let mut writer = Conn::open(port);
    let mut c = tracking(port, &mut log, "");
    let mut bcast = tracking(port, &mut log, " BCAST PREFIX exp:");
    // Lazy expiry, found by another client's read.
    log.cmd(&mut writer, "DEBUG SET-ACTIVE-EXPIRE 0");
    log.cmd(&mut writer, "SET exp:lazy v PX 50");
    log.cmd(&mut c, "GET exp:lazy");
    log.pending(&mut bcast, "bcast");
    std::thread::sleep(Duration::from_millis(150));
    log.cmd(&mut writer, "GET exp:lazy");
    log.pending(&mut c, "c");
    log.pending(&mut bcast, "bcast");
    // Lazy expiry found by the tracking client's own read: after the reply.
    log.cmd(&mut writer, "SET exp:own v PX 50");
    log.cmd(&mut c, "GET exp:own");
    log.pending(&mut bcast, "bcast");
    std::thread::sleep(Duration::from_millis(150));
    log.cmd(&mut c, "MGET exp:own other");
    log.add("after MGET", c.read());
    log.pending(&mut bcast, "bcast");
    // Active expiry.
    log.cmd(&mut writer, "DEBUG SET-ACTIVE-EXPIRE 1");
    log.cmd(&mut writer, "SET exp:active v PX 50");
    log.cmd(&mut c, "GET exp:active");
    log.pending(&mut bcast, "bcast");
    log.add(
        "active expiry",
        c.read_within(Duration::from_secs(5)).unwrap_or_default(),
    );
    log.add(
        "active expiry",
        bcast
            .read_within(Duration::from_secs(5))
            .unwrap_or_default(),
    );
    // FLUSHALL: a null for everything, to every tracking client, and the table empties.
    log.cmd(&mut c, "MGET x y");
    log.add("keys", info_field(&mut writer, "tracking_total_keys"));
    log.cmd(&mut writer, "FLUSHALL");
    log.pending(&mut c, "c");
    log.pending(&mut bcast, "bcast");
    log.add("keys", info_field(&mut writer, "tracking_total_keys"));
    // The flushing client's own: after its reply; FLUSHDB in a transaction too.
    log.cmd(&mut c, "FLUSHALL");
    log.add("after FLUSHALL", c.read());
    log.cmd(&mut c, "MULTI");
    log.cmd(&mut c, "FLUSHDB");
    log.cmd(&mut c, "FLUSHDB");
    log.cmd(&mut c, "EXEC");
    log.add("after EXEC", c.read());
    log.add("after EXEC", c.read());
    log.pending(&mut c, "c");
    log
}

#[test]
fn expiry_and_flushes_invalidate() {
    same_on_both(expiry_and_flush, &[]);
}

fn info_field(conn: &mut Conn, name: &str) -> String {
    let info = conn.cmd("INFO");
    info.split("\r\n")
        .find(|line| line.starts_with(&format!("{name}:")))
        .unwrap_or("missing")
        .to_string()
}

fn info_and_list(port: u16) -> Log {
    let mut log = Log::default();
    let mut writer = Conn::open(port);
    let mut c = tracking(port, &mut log, "");
    let mut b = tracking(port, &mut log, " BCAST PREFIX p: PREFIX q:");
    let mut d = tracking(port, &mut log, " BCAST PREFIX p:");
    log.cmd(&mut c, "MGET k1 k2 k3");
    log.cmd(&mut writer, "SET k1 v");
    for name in [
        "tracking_clients",
        "tracking_total_keys",
        "tracking_total_items",
        "tracking_total_prefixes",
    ] {
        log.add("INFO", info_field(&mut writer, name));
    }
    log.cmd(&mut b, "CLIENT TRACKING off");
    log.cmd(&mut d, "RESET");
    log.cmd(&mut d, "CLIENT TRACKINGINFO");
    drop(c);
    std::thread::sleep(Duration::from_millis(200));
    for name in [
        "tracking_clients",
        "tracking_total_keys",
        "tracking_total_items",
        "tracking_total_prefixes",
    ] {
        log.add("INFO", info_field(&mut writer, name));
    }
    log
}

#[test]
fn info_counts_clients_keys_items_and_prefixes() {
    same_on_both(info_and_list, &[]);
}

/// The table limit drops keys at random (in both servers): the transcript records how many
/// invalidations arrive and what is left, not which keys.
fn table_limit(port: u16) -> Log {
    let mut log = Log::default();
    let mut writer = Conn::open(port);
    let mut c = tracking(port, &mut log, "");
    let keys: Vec<String> = (0..250).map(|i| format!("key:{i}")).collect();
    for key in &keys {
        c.cmd(&format!("GET {key}"));
    }
    log.add("keys", info_field(&mut writer, "tracking_total_keys"));
    log.cmd(&mut writer, "CONFIG SET tracking-table-max-keys 20");
    let mut dropped = 0;
    while dropped < 230 {
        let Some(frame) = c.read_within(Duration::from_secs(10)) else {
            break;
        };
        assert!(
            frame.starts_with(">2\r\n$10\r\ninvalidate\r\n*1\r\n$"),
            "{frame:?}"
        );
        dropped += 1;
    }
    log.add("dropped", dropped.to_string());
    log.add(
        "after",
        c.read_within(Duration::from_millis(300))
            .unwrap_or_default(),
    );
    log.add("keys", info_field(&mut writer, "tracking_total_keys"));
    log.cmd(&mut writer, "CONFIG SET tracking-table-max-keys 0");
    log.cmd(&mut writer, "CONFIG GET tracking-table-max-keys");
    log
}

#[test]
fn the_table_limit_invalidates_what_it_drops() {
    same_on_both(table_limit, &[]);
}
