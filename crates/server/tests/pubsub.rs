//! Pub/sub against Latch, most of it compared byte for byte with Debian's redis-server:
//! the same exchanges on both, the same bytes back. Then what Redis' suite does not check:
//! order across threads, a subscriber that never reads, 10,000 subscribers and patterns,
//! and ACL channel rules.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use latch_testkit::{Program, Server};

/// A raw connection that records every byte the server sent.
struct Conn {
    stream: TcpStream,
    seen: Vec<u8>,
}

impl Conn {
    fn open(server: &Server) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Conn {
            stream,
            seen: Vec::new(),
        }
    }

    fn send(&mut self, words: &[&str]) {
        let args: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
        self.stream.write_all(&encode(&args)).expect("write");
    }

    /// Reads until what arrived ends with `marker` (the reply to a PING sent last, which
    /// the server answers after everything sent to this connection before).
    fn read_through(&mut self, marker: &[u8]) -> String {
        let start = self.seen.len();
        let mut chunk = [0u8; 65536];
        while !self.seen[start..].ends_with(marker) {
            match self.stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => self.seen.extend_from_slice(&chunk[..n]),
                Err(e) => panic!(
                    "waiting for {:?}: {e}; got {:?}",
                    String::from_utf8_lossy(marker),
                    String::from_utf8_lossy(&self.seen[start..])
                ),
            }
        }
        String::from_utf8_lossy(&self.seen[start..]).into_owned()
    }

    /// Sends a command, then `PING tag`, and returns everything up to PING's reply:
    /// the command's reply and every message that came before the PING ran.
    fn step(&mut self, words: &[&str], tag: &str, subscribed_resp2: bool) -> String {
        self.send(words);
        self.send(&["PING", tag]);
        let marker = if subscribed_resp2 {
            format!("*2\r\n$4\r\npong\r\n${}\r\n{tag}\r\n", tag.len())
        } else {
            format!("${}\r\n{tag}\r\n", tag.len())
        };
        self.read_through(marker.as_bytes())
    }

    /// One command and its whole reply (read until a PING sent after it is answered).
    fn call(&mut self, words: &[&str]) -> String {
        let out = self.step(words, "sync", false);
        out.strip_suffix("$4\r\nsync\r\n")
            .unwrap_or(&out)
            .to_string()
    }
}

fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// The whole exchange of `script` against one server, as text.
fn transcript(server: &Server) -> Vec<String> {
    let mut out = Vec::new();
    let mut sub = Conn::open(server);
    let mut publisher = Conn::open(server);
    let mut n = 0;
    let mut step = |conn: &mut Conn, words: &[&str], subscribed: bool, out: &mut Vec<String>| {
        n += 1;
        let tag = format!("t{n}");
        let text = conn.step(words, &tag, subscribed);
        out.push(format!("{words:?} -> {text:?}"));
    };
    // RESP2: subscribed mode and its limits.
    step(&mut sub, &["SUBSCRIBE", "news", "sports"], true, &mut out);
    step(&mut sub, &["SUBSCRIBE", "news"], true, &mut out);
    step(&mut sub, &["PSUBSCRIBE", "ne*", "sp?rts"], true, &mut out);
    step(&mut sub, &["SSUBSCRIBE", "shard1"], true, &mut out);
    step(
        &mut publisher,
        &["PUBLISH", "news", "hello"],
        false,
        &mut out,
    );
    step(&mut publisher, &["PUBLISH", "sports", ""], false, &mut out);
    step(&mut publisher, &["PUBLISH", "nobody", "x"], false, &mut out);
    step(
        &mut publisher,
        &["SPUBLISH", "shard1", "s-msg"],
        false,
        &mut out,
    );
    step(
        &mut publisher,
        &["SPUBLISH", "news", "not-for-channels"],
        false,
        &mut out,
    );
    step(&mut sub, &["PING"], true, &mut out);
    step(&mut sub, &["GET", "k"], true, &mut out);
    step(&mut sub, &["CLIENT", "ID"], true, &mut out);
    step(
        &mut publisher,
        &["PUBSUB", "NUMSUB", "news", "sports", "x"],
        false,
        &mut out,
    );
    step(&mut publisher, &["PUBSUB", "NUMPAT"], false, &mut out);
    step(
        &mut publisher,
        &["PUBSUB", "CHANNELS", "n*"],
        false,
        &mut out,
    );
    step(
        &mut publisher,
        &["PUBSUB", "SHARDCHANNELS"],
        false,
        &mut out,
    );
    step(
        &mut publisher,
        &["PUBSUB", "SHARDNUMSUB", "shard1", "none"],
        false,
        &mut out,
    );
    step(
        &mut publisher,
        &["PUBSUB", "CHANNELS", "a", "b"],
        false,
        &mut out,
    );
    step(&mut publisher, &["PUBSUB", "NOSUCH"], false, &mut out);
    step(&mut publisher, &["PUBLISH", "news"], false, &mut out);
    step(&mut sub, &["UNSUBSCRIBE", "news", "never"], true, &mut out);
    step(&mut sub, &["PUNSUBSCRIBE", "ne*"], true, &mut out);
    step(&mut sub, &["PUNSUBSCRIBE", "sp?rts"], true, &mut out);
    step(&mut sub, &["SUNSUBSCRIBE"], true, &mut out);
    step(&mut sub, &["SUNSUBSCRIBE"], true, &mut out);
    step(&mut sub, &["UNSUBSCRIBE"], false, &mut out);
    step(&mut sub, &["UNSUBSCRIBE"], false, &mut out);
    step(&mut sub, &["PUNSUBSCRIBE"], false, &mut out);
    step(&mut sub, &["GET", "k"], false, &mut out);
    // RESP3: pushes, and every command allowed.
    let mut sub3 = Conn::open(server);
    sub3.call(&["HELLO", "3"]);
    step(&mut sub3, &["SUBSCRIBE", "news"], false, &mut out);
    step(&mut sub3, &["PSUBSCRIBE", "n*"], false, &mut out);
    step(&mut sub3, &["SET", "k", "v"], false, &mut out);
    step(
        &mut publisher,
        &["PUBLISH", "news", "to-resp3"],
        false,
        &mut out,
    );
    step(&mut sub3, &["GET", "k"], false, &mut out);
    step(&mut sub3, &["UNSUBSCRIBE"], false, &mut out);
    step(&mut sub3, &["PUNSUBSCRIBE"], false, &mut out);
    step(&mut sub3, &["UNSUBSCRIBE"], false, &mut out);
    // Confirmations and messages reach a client whose replies are off.
    let mut quiet = Conn::open(server);
    quiet.call(&["HELLO", "3"]);
    quiet.send(&["CLIENT", "REPLY", "OFF"]);
    quiet.send(&["SUBSCRIBE", "q"]);
    step(
        &mut publisher,
        &["PUBLISH", "q", "still-delivered"],
        false,
        &mut out,
    );
    quiet.send(&["CLIENT", "REPLY", "ON"]);
    out.push(format!("reply off -> {:?}", quiet.read_through(b"+OK\r\n")));
    // Publishing from a script and inside a transaction.
    let mut sub4 = Conn::open(server);
    step(&mut sub4, &["SUBSCRIBE", "ev"], true, &mut out);
    step(
        &mut publisher,
        &[
            "EVAL",
            "return redis.call('publish', KEYS[1], ARGV[1])",
            "0",
            "ev",
            "from-lua",
        ],
        false,
        &mut out,
    );
    step(
        &mut publisher,
        &["EVAL", "return redis.call('publish', 'ev', 'lua2')", "0"],
        false,
        &mut out,
    );
    publisher.send(&["MULTI"]);
    publisher.send(&["PUBLISH", "ev", "in-multi"]);
    step(&mut publisher, &["EXEC"], false, &mut out);
    step(&mut sub4, &["PING"], true, &mut out);
    step(
        &mut publisher,
        &["EVAL", "return redis.call('subscribe', 'x')", "0"],
        false,
        &mut out,
    );
    // SUBSCRIBE inside a transaction: its confirmation is an element of EXEC's reply.
    let mut in_multi = Conn::open(server);
    in_multi.send(&["MULTI"]);
    in_multi.send(&["SUBSCRIBE", "m1", "m2"]);
    step(&mut in_multi, &["EXEC"], true, &mut out);
    step(
        &mut publisher,
        &["PUBLISH", "m2", "after-exec"],
        false,
        &mut out,
    );
    step(&mut in_multi, &["RESET"], false, &mut out);
    out
}

#[test]
fn replies_and_messages_match_redis_byte_for_byte() {
    let latch = Server::latch(&[]);
    let redis = Server::redis(&[]);
    let ours = transcript(&latch);
    let theirs = transcript(&redis);
    assert_eq!(ours.len(), theirs.len());
    for (ours, theirs) in ours.iter().zip(&theirs) {
        assert_eq!(ours, theirs);
    }
}

/// Reads RESP2 `message` pushes off `conn` until `count` have come; returns their payloads.
fn read_messages(conn: &mut Conn, count: usize) -> Vec<String> {
    let mut payloads = Vec::new();
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 65536];
    let mut at = 0;
    while payloads.len() < count {
        // Parse what we have: *3 $7 message $len channel $len payload.
        if let Some((payload, used)) = parse_message(&buffer[at..]) {
            payloads.push(payload);
            at += used;
            continue;
        }
        let n = conn.stream.read(&mut chunk).expect("read message");
        assert!(n > 0, "closed after {} messages", payloads.len());
        buffer.extend_from_slice(&chunk[..n]);
    }
    payloads
}

fn parse_message(bytes: &[u8]) -> Option<(String, usize)> {
    fn line(bytes: &[u8], at: &mut usize) -> Option<Vec<u8>> {
        let end = bytes[*at..].windows(2).position(|w| w == b"\r\n")? + *at;
        let line = bytes[*at..end].to_vec();
        *at = end + 2;
        Some(line)
    }
    let mut at = 0;
    assert_eq!(line(bytes, &mut at)?, b"*3");
    let mut parts = Vec::new();
    for _ in 0..3 {
        let header = line(bytes, &mut at)?;
        let len: usize = std::str::from_utf8(&header[1..]).unwrap().parse().unwrap();
        if bytes.len() < at + len + 2 {
            return None;
        }
        parts.push(String::from_utf8_lossy(&bytes[at..at + len]).into_owned());
        at += len + 2;
    }
    Some((parts.pop().unwrap(), at))
}

/// Two publishers on two worker threads send to one channel at once; two subscribers must
/// see the same sequence, and each publisher's messages in the order it sent them.
#[test]
fn one_channel_keeps_one_order_across_threads() {
    let latch = Server::latch(&["--io-threads", "2"]);
    let mut subscribers: Vec<Conn> = (0..2).map(|_| Conn::open(&latch)).collect();
    for sub in &mut subscribers {
        sub.step(&["SUBSCRIBE", "ordered"], "ready", true);
    }
    const EACH: usize = 2000;
    let publishers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|name| {
            let port = latch.port;
            std::thread::spawn(move || {
                let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
                let mut batch = Vec::new();
                for i in 0..EACH {
                    let payload = format!("{name}{i}");
                    batch.extend(encode(&[b"PUBLISH", b"ordered", payload.as_bytes()]));
                    if batch.len() > 8192 {
                        conn.write_all(&batch).unwrap();
                        batch.clear();
                    }
                }
                conn.write_all(&batch).unwrap();
                // Every reply is `:2\r\n`: wait for all of them.
                let mut replies = vec![0u8; EACH * 4];
                conn.read_exact(&mut replies).unwrap();
                assert!(replies.chunks(4).all(|r| r == b":2\r\n"));
            })
        })
        .collect();
    for publisher in publishers {
        publisher.join().unwrap();
    }
    let first = read_messages(&mut subscribers[0], 2 * EACH);
    let second = read_messages(&mut subscribers[1], 2 * EACH);
    assert_eq!(first, second);
    for name in ["a", "b"] {
        let own: Vec<usize> = first
            .iter()
            .filter_map(|p| p.strip_prefix(name))
            .map(|n| n.parse().unwrap())
            .collect();
        assert_eq!(own, (0..EACH).collect::<Vec<_>>());
    }
}

fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn info_field(conn: &mut Conn, name: &str) -> u64 {
    let text = conn.call(&["INFO", "stats"]);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name}"))
}

/// A subscriber that never reads while a publisher sends 1 GB: it is closed at the pubsub
/// hard limit (32 MB by default), the server's memory stays bounded, and the publisher is
/// never held up (every PUBLISH answers).
#[test]
fn a_subscriber_that_never_reads_is_closed_at_the_pubsub_limit() {
    let latch = Server::latch(&[]);
    let mut sleeper = Conn::open(&latch);
    sleeper.step(&["SUBSCRIBE", "firehose"], "ready", true);
    // Now never read from `sleeper`.
    let mut publisher = Conn::open(&latch);
    let message = vec![b'x'; 1 << 20];
    let mut peak_rss_kb = 0;
    let mut delivered = 0;
    for round in 0..1024 {
        publisher
            .stream
            .write_all(&encode(&[b"PUBLISH", b"firehose", &message]))
            .unwrap();
        let mut reply = [0u8; 4];
        publisher.stream.read_exact(&mut reply).unwrap();
        match &reply {
            b":1\r\n" => delivered += 1,
            b":0\r\n" => {}
            other => panic!("PUBLISH answered {:?}", String::from_utf8_lossy(other)),
        }
        if round % 64 == 0 {
            peak_rss_kb = peak_rss_kb.max(rss_kb(latch.pid()));
        }
    }
    // Everything past the limit (and what the socket buffers took) was not delivered.
    assert!(
        delivered < 200,
        "delivered {delivered} MB to a client that never reads"
    );
    assert!(peak_rss_kb < 400 * 1024, "peak RSS {peak_rss_kb} kB");
    assert_eq!(
        info_field(&mut publisher, "client_output_buffer_limit_disconnections"),
        1
    );
    let numsub = publisher.call(&["PUBSUB", "NUMSUB", "firehose"]);
    assert!(numsub.ends_with(":0\r\n"), "{numsub:?}");
    // The sleeper's socket was closed by the server.
    sleeper
        .stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut sink = vec![0u8; 1 << 20];
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match sleeper.stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(_) => assert!(Instant::now() < deadline, "never closed"),
        }
    }
}

/// 10,000 connections on one channel, and 10,000 patterns on one connection.
#[test]
fn ten_thousand_subscribers_and_ten_thousand_patterns() {
    let latch = Server::latch(&["--maxclients", "10100"]);
    const SUBSCRIBERS: usize = 10_000;
    let mut subscribers: Vec<TcpStream> = Vec::with_capacity(SUBSCRIBERS);
    let subscribe = encode(&[b"SUBSCRIBE", b"crowd"]);
    for _ in 0..SUBSCRIBERS {
        let mut stream = TcpStream::connect(("127.0.0.1", latch.port)).expect("connect");
        stream.write_all(&subscribe).unwrap();
        subscribers.push(stream);
    }
    let confirmation = b"*3\r\n$9\r\nsubscribe\r\n$5\r\ncrowd\r\n:1\r\n";
    for stream in &mut subscribers {
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut got = vec![0u8; confirmation.len()];
        stream.read_exact(&mut got).unwrap();
        assert_eq!(&got[..], &confirmation[..]);
    }
    let mut publisher = Conn::open(&latch);
    let replied = publisher.call(&["PUBLISH", "crowd", "hi"]);
    assert_eq!(replied, format!(":{SUBSCRIBERS}\r\n"));
    let message = b"*3\r\n$7\r\nmessage\r\n$5\r\ncrowd\r\n$2\r\nhi\r\n";
    for stream in &mut subscribers {
        let mut got = vec![0u8; message.len()];
        stream.read_exact(&mut got).unwrap();
        assert_eq!(&got[..], &message[..]);
    }
    drop(subscribers);

    let mut patterns = Conn::open(&latch);
    let names: Vec<String> = (0..10_000).map(|i| format!("p{i}.*")).collect();
    let mut words = vec!["PSUBSCRIBE"];
    words.extend(names.iter().map(String::as_str));
    patterns.send(&words);
    let last = "$7\r\np9999.*\r\n:10000\r\n";
    patterns.read_through(last.as_bytes());
    assert_eq!(publisher.call(&["PUBSUB", "NUMPAT"]), ":10000\r\n");
    assert_eq!(publisher.call(&["PUBLISH", "p42.x", "m"]), ":1\r\n");
    let pmessage = "*4\r\n$8\r\npmessage\r\n$5\r\np42.*\r\n$5\r\np42.x\r\n$1\r\nm\r\n";
    assert_eq!(patterns.read_through(pmessage.as_bytes()), pmessage);
}

/// `&pattern` rules: publishing and subscribing are checked (patterns literally), and a
/// subscriber whose user loses the channel is closed.
#[test]
fn acl_channel_rules_and_revocation() {
    for program in [Program::Latch, Program::Redis] {
        let server = Server::start(program, &[]);
        let mut admin = Conn::open(&server);
        admin.call(&[
            "ACL",
            "SETUSER",
            "reader",
            "on",
            ">pw",
            "+@all",
            "~*",
            "resetchannels",
            "&news.*",
        ]);
        let mut user = Conn::open(&server);
        assert_eq!(user.call(&["AUTH", "reader", "pw"]), "+OK\r\n");
        let denied = "-NOPERM this user has no permissions to access one of the channels used as arguments\r\n";
        assert_eq!(
            user.call(&["PUBLISH", "sports", "x"]),
            denied,
            "{program:?}"
        );
        assert_eq!(user.call(&["PUBLISH", "news.today", "x"]), ":0\r\n");
        assert_eq!(user.call(&["PSUBSCRIBE", "news.t*"]), denied);
        assert_eq!(user.call(&["SSUBSCRIBE", "other"]), denied);
        let text = user.step(&["SUBSCRIBE", "news.today"], "s", true);
        assert!(text.starts_with("*3\r\n$9\r\nsubscribe\r\n"), "{text:?}");
        let dryrun = admin.call(&["ACL", "DRYRUN", "reader", "PUBLISH", "sports", "x"]);
        let expected = "This user has no permissions to access the 'sports' channel";
        assert_eq!(dryrun, format!("${}\r\n{expected}\r\n", expected.len()));
        // Losing the channel closes the subscriber.
        assert_eq!(
            admin.call(&["ACL", "SETUSER", "reader", "resetchannels"]),
            "+OK\r\n"
        );
        let mut byte = [0u8; 1];
        user.stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        assert!(
            matches!(user.stream.read(&mut byte), Ok(0) | Err(_)),
            "{program:?}: subscriber still connected"
        );
        // acl-pubsub-default allchannels: a new user may use every channel.
        admin.call(&["CONFIG", "SET", "acl-pubsub-default", "allchannels"]);
        admin.call(&["ACL", "SETUSER", "open", "on", ">pw", "+@all", "~*"]);
        let mut open = Conn::open(&server);
        open.call(&["AUTH", "open", "pw"]);
        assert_eq!(open.call(&["PUBLISH", "anything", "x"]), ":0\r\n");
    }
}

/// A RESP3 subscriber blocked in BLPOP still gets its messages at once, then its reply.
#[test]
fn a_blocked_resp3_subscriber_gets_messages_while_it_waits() {
    let run = |server: &Server| -> Vec<String> {
        let mut sub = Conn::open(server);
        sub.call(&["HELLO", "3"]);
        sub.step(&["SUBSCRIBE", "ch"], "s", false);
        sub.send(&["BLPOP", "list", "0"]);
        let mut publisher = Conn::open(server);
        // Until BLPOP has blocked (CLIENT LIST shows the b flag), a PUBLISH would land
        // before it on Redis and after it on neither: wait for the block first.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !publisher.call(&["CLIENT", "LIST"]).contains("cmd=blpop") {
            assert!(Instant::now() < deadline, "BLPOP never blocked");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            publisher.call(&["PUBLISH", "ch", "while-blocked"]),
            ":1\r\n"
        );
        let push = ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$13\r\nwhile-blocked\r\n";
        let first = sub.read_through(push.as_bytes());
        publisher.call(&["RPUSH", "list", "v"]);
        let served = "*2\r\n$4\r\nlist\r\n$1\r\nv\r\n";
        let second = sub.read_through(served.as_bytes());
        vec![first, second]
    };
    let ours = run(&Server::latch(&[]));
    let theirs = run(&Server::redis(&[]));
    assert_eq!(ours, theirs);
}

/// An unpipelined publisher's messages are written by its own connection into the
/// sockets of subscribers that wait for input (`pubsub::Outbox::idle`). Big messages to a
/// subscriber that does not read for a while (its socket fills: partial writes, the rest
/// queued) and to a RESP3 subscriber that sends commands of its own between them must
/// arrive whole, in order, with each reply in its place.
#[test]
fn direct_writes_keep_messages_whole_and_in_order() {
    const COUNT: usize = 300;
    const SIZE: usize = 60_000;
    let payload = |i: usize| {
        let mut p = format!("{i}:").into_bytes();
        p.resize(SIZE, b'a' + (i % 26) as u8);
        p
    };
    let latch = Server::latch(&["--io-threads", "2"]);
    let mut slow = Conn::open(&latch);
    slow.step(&["SUBSCRIBE", "big"], "ready", true);
    let mut chatty = Conn::open(&latch);
    chatty.call(&["HELLO", "3"]);
    chatty.step(&["SUBSCRIBE", "big"], "ready", false);
    let port = latch.port;
    let publisher = std::thread::spawn(move || {
        let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
        for i in 0..COUNT {
            conn.write_all(&encode(&[b"PUBLISH", b"big", &payload(i)]))
                .unwrap();
            let mut reply = [0u8; 4];
            conn.read_exact(&mut reply).unwrap();
            assert_eq!(&reply, b":2\r\n", "PUBLISH {i}");
        }
    });
    // The RESP3 subscriber: after every 10th message it sends `PING n`; the reply must
    // come whole, between pushes, in the order the PINGs went out.
    let mut stream = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    let (mut at, mut messages, mut pings_sent, mut pongs) = (0, 0, 0, 0);
    while messages < COUNT || pongs < pings_sent {
        let rest = &stream[at..];
        if let Some((push, used)) = parse_push(rest) {
            assert_eq!(push, payload(messages), "message {messages}");
            messages += 1;
            at += used;
            if messages % 10 == 0 {
                chatty.send(&["PING", &pings_sent.to_string()]);
                pings_sent += 1;
            }
            continue;
        }
        let pong = format!("${}\r\n{pongs}\r\n", pongs.to_string().len());
        if rest.starts_with(pong.as_bytes()) {
            at += pong.len();
            pongs += 1;
            continue;
        }
        let n = chatty.stream.read(&mut chunk).expect("read");
        assert!(n > 0, "closed after {messages} messages");
        stream.extend_from_slice(&chunk[..n]);
        // Anything that is neither a push nor the next PING's reply is corruption.
        let rest = &stream[at..];
        assert!(
            rest.starts_with(b">") || rest.starts_with(b"$") || rest.len() < 3,
            "unexpected bytes after {messages} messages: {:?}",
            String::from_utf8_lossy(&rest[..rest.len().min(40)])
        );
    }
    assert_eq!(stream.len(), at, "bytes left over");
    // The slow subscriber reads only once the publisher is done.
    publisher.join().unwrap();
    let got = read_messages(&mut slow, COUNT);
    for (i, message) in got.iter().enumerate() {
        assert_eq!(
            message.as_bytes(),
            payload(i),
            "slow subscriber's message {i}"
        );
    }
    // Nothing after the messages but the replies to two PINGs (`step` sends the second).
    let tail = slow.step(&["PING", "last"], "end", true);
    assert_eq!(
        tail,
        "*2\r\n$4\r\npong\r\n$4\r\nlast\r\n*2\r\n$4\r\npong\r\n$3\r\nend\r\n"
    );
}

/// A RESP3 `>3 message channel payload` push at the start of `bytes`: its payload and
/// length.
fn parse_push(bytes: &[u8]) -> Option<(Vec<u8>, usize)> {
    let header = b">3\r\n$7\r\nmessage\r\n$3\r\nbig\r\n$";
    if bytes.len() < header.len() {
        return None;
    }
    if !bytes.starts_with(header) {
        return None;
    }
    let mut at = header.len();
    let end = bytes[at..].windows(2).position(|w| w == b"\r\n")? + at;
    let len: usize = std::str::from_utf8(&bytes[at..end]).ok()?.parse().ok()?;
    at = end + 2;
    if bytes.len() < at + len + 2 {
        return None;
    }
    Some((bytes[at..at + len].to_vec(), at + len + 2))
}
