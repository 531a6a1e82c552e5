//! What the AOF holds for commands that cannot be logged as they came: relative times made
//! absolute, random and time-dependent choices made explicit, blocking forms made plain, as
//! Redis 7.0 logs them. Each test checks the exact logged commands, then restarts the server
//! over its log and checks that the replay rebuilt the same state (no TTL extended).

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::TestServer;
use latch_persist::aof::CommandReader;
use redis::Value;

const AOF: &[&str] = &[
    "--appendonly",
    "yes",
    "--appendfsync",
    "always",
    "--save",
    "",
];

/// Reads the commands a server logged, a batch at a time.
struct Log {
    file: PathBuf,
    seen: usize,
}

impl Log {
    fn of(server: &TestServer) -> Log {
        Log {
            file: server
                .dir
                .join("appendonlydir")
                .join("appendonly.aof.1.incr.aof"),
            seen: 0,
        }
    }

    /// The commands logged since the last call, SELECTs left out.
    fn take(&mut self) -> Vec<Vec<String>> {
        let data = std::fs::read(&self.file).unwrap_or_default();
        let mut reader = CommandReader::new(&data, 0);
        let mut all = Vec::new();
        while let Some(args) = reader.next().expect("a well-formed log") {
            let args: Vec<String> = args
                .iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            if !args[0].eq_ignore_ascii_case("select") {
                all.push(args);
            }
        }
        let new = all.split_off(self.seen.min(all.len()));
        self.seen += new.len();
        new
    }
}

/// A command written as space-separated words.
fn words(text: &str) -> Vec<String> {
    text.split(' ').map(str::to_owned).collect()
}

/// Several commands, one a line.
fn lines(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(words)
        .collect()
}

/// Sends a command written as space-separated words.
fn run(conn: &mut redis::Connection, text: &str) -> Value {
    let mut parts = text.split(' ');
    let mut command = redis::cmd(parts.next().unwrap_or_default());
    for part in parts {
        command.arg(part);
    }
    command
        .query(conn)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn int(conn: &mut redis::Connection, text: &str) -> i64 {
    match run(conn, text) {
        Value::Int(n) => n,
        other => panic!("{text}: not an integer: {other:?}"),
    }
}

/// The reply as text, for comparing states before and after a restart.
fn shown(conn: &mut redis::Connection, text: &str) -> String {
    format!("{:?}", run(conn, text))
}

fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

/// Kills the server (its log was synced at every write) and starts another over its files.
fn restart(server: TestServer, extra: &[&str]) -> TestServer {
    let dir = server.kill_keep_files();
    let args: Vec<&str> = AOF.iter().chain(extra).copied().collect();
    TestServer::start_in(Some(&dir), &args)
}

/// Runs `text` on a connection of its own in a thread and returns once it is blocked, with
/// the handle to its reply.
fn blocked(server: &TestServer, text: &str) -> std::thread::JoinHandle<Value> {
    let url = server.url();
    let owned = text.to_owned();
    let handle = std::thread::spawn(move || {
        let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
        run(&mut conn, &owned)
    });
    let mut control = server.client();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let info: String = redis::cmd("INFO")
            .arg("clients")
            .query(&mut control)
            .unwrap();
        if info.contains("blocked_clients:1\r") {
            return handle;
        }
        assert!(Instant::now() < deadline, "{text} never blocked");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The time a logged `SET ... PXAT ms` or `PEXPIREAT key ms [...]` gives its key.
fn logged_ms(logged: &[String]) -> i64 {
    let at = if logged[0] == "SET" { 4 } else { 2 };
    logged[at].parse().expect("a time in milliseconds")
}

#[test]
fn relative_expiries_are_logged_as_the_unix_time_they_end_at() {
    let server = TestServer::start(AOF);
    let mut conn = server.client();
    let mut log = Log::of(&server);
    // The wall clock 50 s behind the real one: a key given 100 s ends 50 s from the real
    // now, which a restart must keep (logged as given, the replay would grant 100 s again).
    run(&mut conn, "DEBUG JUMP-CLOCK -50000");
    let ends = |conn: &mut redis::Connection, key: &str| int(conn, &format!("PEXPIRETIME {key}"));
    // What each key's deadline was logged as.
    let mut deadlines: Vec<(&str, i64)> = Vec::new();
    // A relative TTL is kept on the monotonic clock: read back in unix time it may differ
    // from the logged time by the millisecond the two clocks' readings can drift apart.
    let mut check =
        |log: &mut Log, conn: &mut redis::Connection, key: &'static str, expected: &str| {
            let mut logged = log.take();
            assert_eq!(logged.len(), 1, "{logged:?}");
            let logged = logged.remove(0);
            let ms = logged_ms(&logged);
            assert_eq!(logged, words(&expected.replace("MS", &ms.to_string())));
            assert!((ends(conn, key) - ms).abs() <= 2, "{logged:?}");
            deadlines.push((key, ms));
        };

    run(&mut conn, "SET a v EX 100");
    check(&mut log, &mut conn, "a", "SET a v PXAT MS");
    run(&mut conn, "SETEX b 100 v");
    check(&mut log, &mut conn, "b", "SET b v PXAT MS");
    run(&mut conn, "PSETEX c 100000 v");
    check(&mut log, &mut conn, "c", "SET c v PXAT MS");
    run(&mut conn, "SET d v PX 100000 GET");
    check(&mut log, &mut conn, "d", "SET d v PXAT MS");
    run(&mut conn, "SET e v EXAT 4000000000 NX");
    check(&mut log, &mut conn, "e", "SET e v PXAT 4000000000000");
    // Without an expiry, only GET (which changes nothing) goes.
    run(&mut conn, "SET d w XX GET KEEPTTL get");
    assert_eq!(log.take(), lines("SET d w XX KEEPTTL"));
    run(&mut conn, "SET plain v");
    assert_eq!(log.take(), lines("SET plain v"));

    // The EXPIRE family becomes PEXPIREAT, conditions kept.
    run(&mut conn, "EXPIRE plain 100");
    check(&mut log, &mut conn, "plain", "PEXPIREAT plain MS");
    run(&mut conn, "PEXPIRE plain 200000 GT");
    check(&mut log, &mut conn, "plain", "PEXPIREAT plain MS GT");
    run(&mut conn, "EXPIREAT plain 4000000001 XX");
    check(
        &mut log,
        &mut conn,
        "plain",
        "PEXPIREAT plain 4000000001000 XX",
    );
    run(&mut conn, "PEXPIREAT plain 4000000002000");
    check(
        &mut log,
        &mut conn,
        "plain",
        "PEXPIREAT plain 4000000002000",
    );
    // A time already past deletes the key: logged as the DEL it was.
    run(&mut conn, "SET gone1 v");
    run(&mut conn, "SET gone2 v");
    run(&mut conn, "EXPIRE gone1 -1");
    run(&mut conn, "PEXPIREAT gone2 1");
    assert_eq!(
        log.take(),
        lines("SET gone1 v\nSET gone2 v\nDEL gone1\nDEL gone2")
    );

    // GETEX is logged as the change it made, and nothing when it made none.
    run(&mut conn, "SET x1 v");
    run(&mut conn, "SET x2 v EX 100");
    run(&mut conn, "SET x3 v");
    log.take();
    run(&mut conn, "GETEX plain");
    run(&mut conn, "GETEX x1 EX 100");
    check(&mut log, &mut conn, "x1", "PEXPIREAT x1 MS");
    run(&mut conn, "GETEX x2 PERSIST");
    run(&mut conn, "GETEX x3 PXAT 1");
    assert_eq!(log.take(), lines("PERSIST x2\nDEL x3"));
    run(&mut conn, "GETSET x2 w");
    run(&mut conn, "GETDEL x2");
    assert_eq!(log.take(), lines("SET x2 w\nDEL x2"));

    // A key whose logged end is already past when the server restarts is gone, though the
    // clock it was set by gave it 100 s.
    run(&mut conn, "DEBUG JUMP-CLOCK -150000");
    run(&mut conn, "SET short v EX 100");
    assert!(int(&mut conn, "PTTL short") > 90_000);

    drop(conn);
    let server = restart(server, &[]);
    let mut conn = server.client();
    // Each key ends exactly when the log said (for `plain`, its last change).
    deadlines.retain(|(key, _)| *key != "plain");
    deadlines.push(("plain", 4_000_000_002_000));
    for (key, ms) in deadlines {
        assert_eq!(ends(&mut conn, key), ms, "{key}");
    }
    // Less than the 100 s it was given: 50 s at most, the wall clock being right again.
    let ttl = int(&mut conn, "PTTL a");
    assert!((1..=50_000).contains(&ttl), "PTTL a is {ttl}");
    assert_eq!(int(&mut conn, "EXISTS short gone1 gone2 x2 x3"), 0);
    let ttl = int(&mut conn, "TTL x1");
    assert!((40..=50).contains(&ttl), "TTL x1 is {ttl}");
    assert_eq!(shown(&mut conn, "GET d"), shown(&mut conn, "ECHO w"));
}

#[test]
fn float_increments_are_logged_as_the_values_they_stored() {
    let server = TestServer::start(AOF);
    let mut conn = server.client();
    let mut log = Log::of(&server);
    run(&mut conn, "SET n 10.5 EX 1000");
    let ends = logged_ms(&log.take()[0]);
    run(&mut conn, "INCRBYFLOAT n 0.1");
    run(&mut conn, "INCRBYFLOAT m 3.0e3");
    run(&mut conn, "HINCRBYFLOAT h f 1.5");
    run(&mut conn, "HINCRBYFLOAT h f -0.25");
    assert_eq!(
        log.take(),
        lines("SET n 10.6 KEEPTTL\nSET m 3000 KEEPTTL\nHSET h f 1.5\nHSET h f 1.25")
    );
    drop(conn);
    let server = restart(server, &[]);
    let mut conn = server.client();
    assert_eq!(shown(&mut conn, "GET n"), shown(&mut conn, "ECHO 10.6"));
    assert_eq!(int(&mut conn, "PEXPIRETIME n"), ends);
    assert_eq!(shown(&mut conn, "HGET h f"), shown(&mut conn, "ECHO 1.25"));
}

#[test]
fn spop_is_logged_as_the_members_it_removed() {
    let server = TestServer::start(AOF);
    let mut conn = server.client();
    let mut log = Log::of(&server);
    run(&mut conn, "SADD s 1 2 3 4 5 6 7 8 a b");
    run(&mut conn, "SADD t x y");
    log.take();

    let one: String = redis::cmd("SPOP").arg("s").query(&mut conn).unwrap();
    assert_eq!(log.take(), vec![words(&format!("SREM s {one}"))]);
    let some: Vec<String> = redis::cmd("SPOP").arg("s").arg(3).query(&mut conn).unwrap();
    let mut logged = log.take();
    logged.sort();
    let mut expected: Vec<Vec<String>> =
        some.iter().map(|m| words(&format!("SREM s {m}"))).collect();
    expected.sort();
    assert_eq!(logged, expected);
    // A count that takes everything deletes the set.
    run(&mut conn, "SPOP t 5");
    assert_eq!(log.take(), lines("DEL t"));
    run(&mut conn, "SPOP t 5");
    run(&mut conn, "SPOP s 0");
    assert_eq!(log.take(), Vec::<Vec<String>>::new());

    let before = shown(&mut conn, "SORT s ALPHA");
    drop(conn);
    let server = restart(server, &[]);
    let mut conn = server.client();
    assert_eq!(shown(&mut conn, "SORT s ALPHA"), before);
    assert_eq!(int(&mut conn, "EXISTS t"), 0);
}

#[test]
fn blocking_list_pops_are_logged_as_plain_pops() {
    let server = TestServer::start(AOF);
    let mut conn = server.client();
    let mut log = Log::of(&server);
    run(&mut conn, "RPUSH l a b c d e f g h i");
    log.take();
    run(&mut conn, "BLPOP none l 0");
    run(&mut conn, "BRPOP l 0");
    run(&mut conn, "LMPOP 2 none l RIGHT COUNT 2");
    run(&mut conn, "BLMPOP 0 1 l LEFT COUNT 1");
    run(&mut conn, "BLMOVE l dst Left RIGHT 0");
    run(&mut conn, "BRPOPLPUSH l dst 0");
    run(&mut conn, "LMOVE l dst LEFT LEFT");
    run(&mut conn, "LPOP l 5");
    assert_eq!(
        log.take(),
        lines(
            "LPOP l
            RPOP l
            RPOP l 2
            LPOP l 1
            LMOVE l dst Left RIGHT
            RPOPLPUSH l dst
            LMOVE l dst LEFT LEFT
            LPOP l 5"
        )
    );

    // Served after blocking: the same, with Redis' own words for the directions.
    let waiter = blocked(&server, "BLPOP q 5");
    run(&mut conn, "RPUSH q x");
    waiter.join().unwrap();
    let waiter = blocked(&server, "BLMPOP 5 1 q RIGHT COUNT 5");
    run(&mut conn, "RPUSH q x y");
    waiter.join().unwrap();
    let waiter = blocked(&server, "BLMOVE q dst RIGHT LEFT 5");
    run(&mut conn, "RPUSH q z");
    waiter.join().unwrap();
    let waiter = blocked(&server, "BRPOPLPUSH q dst 5");
    run(&mut conn, "RPUSH q w");
    waiter.join().unwrap();
    assert_eq!(
        log.take(),
        lines(
            "RPUSH q x
            LPOP q
            RPUSH q x y
            RPOP q 2
            RPUSH q z
            LMOVE q dst right left
            RPUSH q w
            RPOPLPUSH q dst"
        )
    );

    let before = shown(&mut conn, "LRANGE dst 0 -1");
    drop(conn);
    let server = restart(server, &[]);
    let mut conn = server.client();
    assert_eq!(shown(&mut conn, "LRANGE dst 0 -1"), before);
    assert_eq!(int(&mut conn, "EXISTS l q"), 0);
}

#[test]
fn blocking_zset_pops_are_logged_as_plain_pops() {
    let server = TestServer::start(AOF);
    let mut conn = server.client();
    let mut log = Log::of(&server);
    run(&mut conn, "ZADD z 1 a 2 b 3 c 4 d 5 e 6 f");
    log.take();
    run(&mut conn, "BZPOPMIN none z 0");
    run(&mut conn, "BZPOPMAX z 0");
    run(&mut conn, "ZMPOP 1 z MIN COUNT 2");
    run(&mut conn, "BZMPOP 0 2 none z MAX");
    run(&mut conn, "ZPOPMIN z 1");
    assert_eq!(
        log.take(),
        lines("ZPOPMIN z\nZPOPMAX z\nZPOPMIN z 2\nZPOPMAX z 1\nZPOPMIN z 1")
    );
    let waiter = blocked(&server, "BZMPOP 5 1 w MIN COUNT 10");
    run(&mut conn, "ZADD w 1 a 2 b");
    waiter.join().unwrap();
    let waiter = blocked(&server, "BZPOPMAX w 5");
    run(&mut conn, "ZADD w 1 a 2 b");
    waiter.join().unwrap();
    assert_eq!(
        log.take(),
        lines("ZADD w 1 a 2 b\nZPOPMIN w 2\nZADD w 1 a 2 b\nZPOPMAX w")
    );
    let before = shown(&mut conn, "ZRANGE w 0 -1 WITHSCORES");
    drop(conn);
    let server = restart(server, &[]);
    let mut conn = server.client();
    assert_eq!(shown(&mut conn, "ZRANGE w 0 -1 WITHSCORES"), before);
    assert_eq!(int(&mut conn, "EXISTS z"), 0);
}

#[test]
fn geoadd_is_logged_as_zadd() {
    let server = TestServer::start(AOF);
    let mut conn = server.client();
    let mut log = Log::of(&server);
    run(
        &mut conn,
        "GEOADD g CH 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
    );
    run(&mut conn, "GEOADD g NX 13.361389 38.115556 Palermo");
    let logged = log.take();
    assert_eq!(logged.len(), 1, "{logged:?}");
    let logged = &logged[0];
    assert_eq!(logged[..3], words("zadd g CH")[..]);
    assert_eq!(logged[4], "Palermo");
    assert_eq!(logged[6], "Catania");
    for (at, member) in [(3, "Palermo"), (5, "Catania")] {
        let score: f64 = redis::cmd("ZSCORE")
            .arg("g")
            .arg(member)
            .query(&mut conn)
            .unwrap();
        assert_eq!(logged[at].parse::<u64>().unwrap() as f64, score);
    }
    let before = shown(&mut conn, "ZRANGE g 0 -1 WITHSCORES");
    drop(conn);
    let server = restart(server, &[]);
    let mut conn = server.client();
    assert_eq!(shown(&mut conn, "ZRANGE g 0 -1 WITHSCORES"), before);
}

/// A logged command with an XCLAIM's TIME checked against `from..=now` and then blanked
/// (it is a reading of the server's clock); other commands as they are.
fn time_checked(mut logged: Vec<String>, from: i64) -> Vec<String> {
    if logged[0] == "XCLAIM" {
        let time: i64 = logged[7].parse().expect("TIME");
        assert!((from..=wall_ms()).contains(&time), "TIME {time}");
        logged[7] = "T".into();
    }
    logged
}

#[test]
fn stream_ids_and_approximate_trims_are_logged_exactly() {
    let extra = ["--stream-node-max-entries", "2"];
    let args: Vec<&str> = AOF.iter().chain(&extra).copied().collect();
    let server = TestServer::start(&args);
    let mut conn = server.client();
    let mut log = Log::of(&server);
    let from = wall_ms();
    let id: String = redis::cmd("XADD")
        .arg("s")
        .arg("*")
        .arg("f")
        .arg("v")
        .query(&mut conn)
        .unwrap();
    let ms: i64 = id.split('-').next().unwrap().parse().unwrap();
    assert!((from..=wall_ms()).contains(&ms));
    run(&mut conn, "XADD s 9999999999999-* f v");
    run(&mut conn, "XADD s 9999999999999-* f v");
    run(&mut conn, "XADD s 9999999999999-5 f v");
    assert_eq!(
        log.take(),
        lines(&format!(
            "XADD s {id} f v
            XADD s 9999999999999-0 f v
            XADD s 9999999999999-1 f v
            XADD s 9999999999999-5 f v"
        ))
    );
    for seq in 6..10 {
        run(&mut conn, &format!("XADD s 9999999999999-{seq} f v"));
    }
    log.take();
    // Nine entries in nodes of two (the last alone): `~ 4` drops whole nodes only, so
    // five entries stay, which the log says exactly.
    run(&mut conn, "XADD s MAXLEN ~ 4 9999999999999-10 f v");
    assert_eq!(int(&mut conn, "XLEN s"), 5);
    // Only the node ending before -9 goes: the log names the first entry kept.
    run(&mut conn, "XTRIM s MINID ~ 9999999999999-9");
    // LIMIT stays (a replay ignores it, as Redis' does).
    run(&mut conn, "XTRIM s MAXLEN ~ 0 LIMIT 2");
    assert_eq!(int(&mut conn, "XLEN s"), 1);
    // Nothing trimmed: nothing logged.
    run(&mut conn, "XTRIM s MAXLEN ~ 5");
    assert_eq!(
        log.take(),
        lines(
            "XADD s MAXLEN = 5 9999999999999-10 f v
            XTRIM s MINID = 9999999999999-8
            XTRIM s MAXLEN = 1 LIMIT 2"
        )
    );
    let before = shown(&mut conn, "XRANGE s - +");
    let info = shown(&mut conn, "XINFO STREAM s");
    drop(conn);
    let server = restart(server, &extra);
    let mut conn = server.client();
    assert_eq!(shown(&mut conn, "XRANGE s - +"), before);
    assert_eq!(shown(&mut conn, "XINFO STREAM s"), info);
}

#[test]
fn consumer_group_reads_and_claims_are_logged_as_xclaims() {
    let server = TestServer::start(AOF);
    let mut conn = server.client();
    let mut log = Log::of(&server);
    for seq in 1..=6 {
        run(&mut conn, &format!("XADD s 1-{seq} f v{seq}"));
    }
    run(&mut conn, "XGROUP CREATE s g 0");
    run(&mut conn, "XGROUP CREATE s quiet 0");
    log.take();
    let from = wall_ms();

    run(&mut conn, "XREADGROUP GROUP g alice COUNT 2 STREAMS s >");
    let logged: Vec<Vec<String>> = log
        .take()
        .into_iter()
        .map(|c| time_checked(c, from))
        .collect();
    assert_eq!(
        logged,
        lines(
            "XCLAIM s g alice 0 1-1 TIME T RETRYCOUNT 1 FORCE JUSTID LASTID 1-1
            XCLAIM s g alice 0 1-2 TIME T RETRYCOUNT 1 FORCE JUSTID LASTID 1-2
            XGROUP SETID s g 1-2 ENTRIESREAD 2"
        )
    );
    // NOACK makes nothing pending: the new consumer and the group's position are logged.
    run(
        &mut conn,
        "XREADGROUP GROUP quiet bob NOACK COUNT 3 STREAMS s >",
    );
    assert_eq!(
        log.take(),
        lines(
            "XGROUP CREATECONSUMER s quiet bob
            XGROUP SETID s quiet 1-3 ENTRIESREAD 3"
        )
    );
    // A history read is not logged (as in Redis).
    run(&mut conn, "XREADGROUP GROUP g alice STREAMS s 0");
    assert_eq!(log.take(), Vec::<Vec<String>>::new());

    // A claim gets its delivery time and count written out; LASTID moves the group.
    run(&mut conn, "XCLAIM s g carol 0 1-1 LASTID 1-3");
    run(&mut conn, "XCLAIM s g carol 0 1-2 JUSTID");
    run(&mut conn, "XCLAIM s g carol 0 1-5 LASTID 1-6");
    let logged: Vec<Vec<String>> = log.take();
    let (claims, setid) = logged.split_at(2);
    let claims: Vec<Vec<String>> = claims
        .iter()
        .map(|c| time_checked(c.clone(), from))
        .collect();
    assert_eq!(
        claims,
        lines(
            "XCLAIM s g carol 0 1-1 TIME T RETRYCOUNT 3 FORCE JUSTID LASTID 1-3
            XCLAIM s g carol 0 1-2 TIME T RETRYCOUNT 2 FORCE JUSTID LASTID 1-3"
        )
    );
    // Nothing claimed carries the new last ID: it is logged on its own.
    assert_eq!(setid, lines("XGROUP SETID s g 1-6 ENTRIESREAD 2"));

    // XAUTOCLAIM: the same, and an entry deleted meanwhile is dropped from the pending list
    // (logged as an XCLAIM for its owner, which a replay finds gone too).
    run(&mut conn, "XDEL s 1-2");
    log.take();
    run(&mut conn, "XAUTOCLAIM s g dave 0 0 COUNT 2");
    let logged: Vec<Vec<String>> = log
        .take()
        .into_iter()
        .map(|c| time_checked(c, from))
        .collect();
    assert_eq!(
        logged,
        lines(
            "XCLAIM s g dave 0 1-1 TIME T RETRYCOUNT 4 FORCE JUSTID LASTID 1-6
            XCLAIM s g carol 0 1-2 TIME T RETRYCOUNT 2 FORCE JUSTID LASTID 1-6"
        )
    );

    // Served after blocking: the XADD that woke it, then its XCLAIM.
    let waiter = blocked(&server, "XREADGROUP GROUP g erin BLOCK 5000 STREAMS s >");
    run(&mut conn, "XADD s 2-1 f w");
    waiter.join().unwrap();
    let logged: Vec<Vec<String>> = log
        .take()
        .into_iter()
        .map(|c| time_checked(c, from))
        .collect();
    assert_eq!(
        logged,
        lines(
            "XADD s 2-1 f w
            XCLAIM s g erin 0 2-1 TIME T RETRYCOUNT 1 FORCE JUSTID LASTID 2-1
            XGROUP SETID s g 2-1 ENTRIESREAD 3"
        )
    );

    // The pending entries (with owners and counts) and the groups come back as they were.
    let pending = |conn: &mut redis::Connection| -> Vec<(String, String, i64)> {
        let rows: Vec<(String, String, i64, i64)> = redis::cmd("XPENDING")
            .arg("s")
            .arg("g")
            .arg("-")
            .arg("+")
            .arg(100)
            .query(conn)
            .unwrap();
        rows.into_iter()
            .map(|(id, owner, _idle, count)| (id, owner, count))
            .collect()
    };
    let groups = |conn: &mut redis::Connection| -> Vec<String> {
        let Value::Array(groups) = run(conn, "XINFO GROUPS s") else {
            panic!("XINFO GROUPS");
        };
        groups.iter().map(|g| format!("{g:?}")).collect()
    };
    let before = (pending(&mut conn), groups(&mut conn));
    assert_eq!(
        before.0,
        vec![
            ("1-1".to_owned(), "dave".to_owned(), 4),
            ("2-1".to_owned(), "erin".to_owned(), 1),
        ]
    );
    drop(conn);
    let server = restart(server, &[]);
    let mut conn = server.client();
    assert_eq!((pending(&mut conn), groups(&mut conn)), before);
}

#[test]
fn transactions_and_scripts_are_logged_as_their_effects_inside_multi_exec() {
    let server = TestServer::start(AOF);
    let mut conn = server.client();
    let mut log = Log::of(&server);
    run(&mut conn, "SET a 1");
    assert_eq!(log.take(), lines("SET a 1"));
    // A transaction: its writes, wrapped; its reads and its no-op writes left out.
    let _: () = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("a")
        .cmd("GET")
        .arg("a")
        .cmd("SET")
        .arg("a")
        .arg("x")
        .arg("NX")
        .cmd("RPUSH")
        .arg("l")
        .arg("v")
        .query(&mut conn)
        .unwrap();
    assert_eq!(log.take(), lines("MULTI\nINCR a\nRPUSH l v\nEXEC"));
    // A script: what it did, not the script (EVAL is never logged).
    let _: () = redis::Script::new(
        "redis.call('set', KEYS[1], 'y'); redis.call('get', KEYS[1]); redis.call('del', 'missing'); redis.call('incr', KEYS[2])",
    )
    .key("b")
    .key("a")
    .invoke(&mut conn)
    .unwrap();
    assert_eq!(log.take(), lines("MULTI\nset b y\nincr a\nEXEC"));
    // One effect needs no wrapping; a command that changes nothing is not logged.
    let _: () = redis::Script::new("redis.call('set', KEYS[1], 'z')")
        .key("c")
        .invoke(&mut conn)
        .unwrap();
    run(&mut conn, "DEL nothing-here");
    assert_eq!(log.take(), lines("set c z"));
    // A key found expired is logged as the DEL it was, before the command that found it.
    run(&mut conn, "SET short v PX 1");
    std::thread::sleep(std::time::Duration::from_millis(5));
    run(&mut conn, "INCR short");
    let logged = log.take();
    assert_eq!(logged.len(), 3, "{logged:?}");
    assert_eq!(logged[1], words("DEL short"));
    assert_eq!(logged[2], words("INCR short"));
    // Replay gives the same state.
    let before: Vec<String> = ["a", "b", "c", "l", "short"]
        .iter()
        .map(|key| shown(&mut conn, &format!("DUMP {key}")))
        .collect();
    drop(conn);
    let server = restart(server, &[]);
    let mut conn = server.client();
    let after: Vec<String> = ["a", "b", "c", "l", "short"]
        .iter()
        .map(|key| shown(&mut conn, &format!("DUMP {key}")))
        .collect();
    assert_eq!(before, after);
}
