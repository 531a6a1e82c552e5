//! `SCRIPT DEBUG SYNC` and `YES`: Lua debugging sessions (Redis' LDB) over a real
//! connection: stops, stepping, breakpoints, variables, `eval` and `redis` from the
//! debugger, the session's end (its log, then the EVAL reply, then the connection closed),
//! what other clients see meanwhile, and YES's writes undone at the end.

mod common;

use std::io::Read;
use std::time::{Duration, Instant};

use common::{bulk, check, encode, read_line, RawConn, TestServer};

/// Sends a debugger command (or EVAL) and reads the session's answer: an array of simple
/// strings, returned without their `+`.
fn say(conn: &mut RawConn, args: &[&str]) -> Vec<String> {
    let words: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    conn.send(&encode(&words));
    log_lines(conn)
}

fn log_lines(conn: &mut RawConn) -> Vec<String> {
    let header = read_line(conn);
    let count: usize = header
        .strip_prefix('*')
        .and_then(|n| n.trim_end().parse().ok())
        .unwrap_or_else(|| panic!("expected a log array, got {header:?}"));
    (0..count)
        .map(|_| {
            let line = read_line(conn);
            line.strip_prefix('+')
                .unwrap_or_else(|| panic!("expected a log line, got {line:?}"))
                .trim_end()
                .to_string()
        })
        .collect()
}

fn start_session(server: &TestServer) -> RawConn {
    let mut c = server.raw();
    check(&mut c, "SCRIPT DEBUG SYNC", "+OK\r\n");
    c
}

const SCRIPT: &str = "local a = 1
local t = {1, 'two'}
redis.call('set', KEYS[1], 'v')
redis.debug('note', t)
local got = redis.call('get', KEYS[1])
return got";

#[test]
fn a_session_steps_prints_and_stops_at_breakpoints() {
    let server = TestServer::start(&[]);
    let mut c = start_session(&server);
    let first = say(&mut c, &["EVAL", SCRIPT, "1", "k"]);
    assert_eq!(
        first,
        vec![
            "* Stopped at 1, stop reason = step over",
            "-> 1   local a = 1"
        ]
    );
    assert_eq!(
        say(&mut c, &["step"]),
        vec![
            "* Stopped at 2, stop reason = step over",
            "-> 2   local t = {1, 'two'}"
        ]
    );
    assert_eq!(say(&mut c, &["print"]), vec!["<value> a = 1"]);
    assert_eq!(say(&mut c, &["p", "KEYS"]), vec![r#"<value> {"k"}"#]);
    assert_eq!(say(&mut c, &["p", "nothing"]), vec!["No such variable."]);
    // Stepping over a line with redis.call logs the command and its reply.
    say(&mut c, &["n"]);
    assert_eq!(
        say(&mut c, &["s"]),
        vec![
            "<redis> set k v",
            r#"<reply> "+OK""#,
            "* Stopped at 4, stop reason = step over",
            "-> 4   redis.debug('note', t)"
        ]
    );
    assert_eq!(say(&mut c, &["p", "t"]), vec![r#"<value> {1; "two"}"#]);
    assert_eq!(
        say(&mut c, &["b", "6"]),
        vec![
            "   5   local got = redis.call('get', KEYS[1])",
            "  #6   return got"
        ]
    );
    assert_eq!(
        say(&mut c, &["b"]),
        vec!["1 breakpoints set:", "  #6   return got"]
    );
    assert_eq!(say(&mut c, &["b", "99"]), vec!["Wrong line number."]);
    assert_eq!(
        say(&mut c, &["list", "1", "1"]),
        vec!["   1   local a = 1", "   2   local t = {1, 'two'}"]
    );
    assert_eq!(say(&mut c, &["whole"]).len(), 6);
    assert_eq!(say(&mut c, &["eval", "1 + 41"]), vec!["<retval> 42"]);
    assert_eq!(
        say(&mut c, &["redis", "incr", "counter"]),
        vec!["<redis> incr counter", "<reply> 1"]
    );
    assert_eq!(say(&mut c, &["trace"])[0], "In top level:");
    // Continue: no logging of line 5's command, redis.debug's line, the breakpoint.
    assert_eq!(
        say(&mut c, &["c"]),
        vec![
            r#"<debug> line 4: "note", {1; "two"}"#,
            "* Stopped at 6, stop reason = break point",
            "->#6   return got"
        ]
    );
    // The end: the session's last log, the EVAL's own reply, the connection closed.
    assert_eq!(say(&mut c, &["continue"]), vec!["<endsession>"]);
    assert_eq!(read_line(&mut c), "$1\r\n");
    assert_eq!(read_line(&mut c), "v\r\n");
    assert!(c.is_closed(), "the session's connection stays open");
    let mut other = server.raw();
    check(&mut other, "GET counter", &bulk("1"));
}

#[test]
fn bad_commands_maxlen_and_abort() {
    let server = TestServer::start(&[]);
    let mut c = start_session(&server);
    say(
        &mut c,
        &["EVAL", "redis.call('set','written','yes')\nreturn 1", "0"],
    );
    for bad in ["hello\0world", "\0hello", "nope"] {
        assert_eq!(
            say(&mut c, &[bad]),
            vec!["<error> Unknown Redis Lua debugger command or wrong number of arguments."]
        );
    }
    // `redis` needs a command.
    assert_eq!(say(&mut c, &["redis"]).len(), 1);
    assert!(say(&mut c, &["help"]).len() > 10);
    assert_eq!(
        say(&mut c, &["maxlen", "10"]),
        vec!["<value> replies are truncated at 60 bytes."]
    );
    assert_eq!(
        say(&mut c, &["maxlen", "0"]),
        vec!["<value> replies are unlimited."]
    );
    // A command with many arguments reaches redis.call (and is refused there); the log
    // shows ten words, and as "more" Redis' count (one short of what was left out).
    let mut many = vec!["redis", "nosuchcommand"];
    many.extend(std::iter::repeat_n("x", 100));
    let logged = say(&mut c, &many);
    assert!(
        logged[0].starts_with("<redis> nosuchcommand x") && logged[0].ends_with("(90 more)"),
        "{logged:?}"
    );
    assert!(
        logged[1].contains("Unknown Redis command called from script"),
        "{logged:?}"
    );
    assert_eq!(
        say(&mut c, &["s"]),
        vec![
            "<redis> set written yes",
            r#"<reply> "+OK""#,
            "* Stopped at 2, stop reason = step over",
            "-> 2   return 1"
        ]
    );
    assert_eq!(say(&mut c, &["abort"]), vec!["<endsession>"]);
    let error = read_line(&mut c);
    assert!(
        error.starts_with("-ERR script aborted for user request"),
        "{error:?}"
    );
    assert!(c.is_closed());
    // SYNC keeps what the script wrote before the abort.
    check(&mut server.raw(), "GET written", &bulk("yes"));
}

#[test]
fn evalsha_and_multi_are_refused() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(
        &mut c,
        "SCRIPT DEBUG MAYBE",
        "-ERR Use SCRIPT DEBUG YES/SYNC/NO\r\n",
    );
    // Queued like any command; EXEC runs it inside the transaction, where it is refused.
    check(&mut c, "MULTI", "+OK\r\n");
    check(&mut c, "SCRIPT DEBUG SYNC", "+QUEUED\r\n");
    check(
        &mut c,
        "EXEC",
        "*1\r\n-ERR SCRIPT DEBUG must be called outside MULTI\r\n",
    );
    check(&mut c, "SCRIPT DEBUG SYNC", "+OK\r\n");
    check(
        &mut c,
        "EVALSHA e0e1f9fabfc9d4800c877a703b823ac0578ff8db 0",
        "-ERR Please use EVAL instead of EVALSHA for debugging\r\n",
    );
    check(&mut c, "SCRIPT DEBUG NO", "+OK\r\n");
    c.expect(&[b"EVAL", b"return 7", b"0"], b":7\r\n");
    // Outside a session the debugger's functions do nothing.
    c.expect(
        &[
            b"EVAL",
            b"redis.debug('x'); return redis.breakpoint()",
            b"0",
        ],
        b"$-1\r\n",
    );
}

#[test]
fn a_script_runs_on_when_its_debugger_leaves_and_others_can_kill_it() {
    let server = TestServer::start(&["--busy-reply-threshold", "200"]);
    // The debugging client goes away at the first stop: the script finishes on its own.
    let mut c = start_session(&server);
    say(
        &mut c,
        &[
            "EVAL",
            "redis.call('set','left','1')\nredis.breakpoint()\nreturn 1",
            "0",
        ],
    );
    drop(c);
    let mut other = server.raw();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        other.send(&encode(&[b"GET", b"left"]));
        let line = read_line(&mut other);
        if line == "$1\r\n" {
            assert_eq!(read_line(&mut other), "1\r\n");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the script never finished: {line:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // A session that waits holds the script: others get BUSY past the threshold and may
    // kill it (it has not written); the debugging client then gets the kill's error.
    let mut c = start_session(&server);
    say(&mut c, &["EVAL", "return redis.call('get','left')", "0"]);
    std::thread::sleep(Duration::from_millis(300));
    other.send(&encode(&[b"PING"]));
    assert!(read_line(&mut other).starts_with("-BUSY"));
    check(&mut other, "SCRIPT KILL", "+OK\r\n");
    assert_eq!(log_lines(&mut c), vec!["<endsession>"]);
    let error = read_line(&mut c);
    assert!(
        error.contains("Script killed by user with SCRIPT KILL"),
        "{error:?}"
    );
    let mut rest = Vec::new();
    let _ = c.stream.read_to_end(&mut rest);
    assert!(rest.is_empty());
    check(&mut other, "PING", "+PONG\r\n");
}

#[test]
fn redis_breakpoint_stops_at_the_next_line() {
    let server = TestServer::start(&[]);
    let mut c = start_session(&server);
    say(
        &mut c,
        &[
            "EVAL",
            "local n = 0\nfor i = 1, 3 do\n  n = n + i\nend\nif redis.breakpoint() then n = n * 10 end\nreturn n",
            "0",
        ],
    );
    assert_eq!(
        say(&mut c, &["c"]),
        vec![
            "* Stopped at 6, stop reason = redis.breakpoint() called",
            "-> 6   return n"
        ]
    );
    assert_eq!(say(&mut c, &["p", "n"]), vec!["<value> 60"]);
    assert_eq!(say(&mut c, &["c"]), vec!["<endsession>"]);
    assert_eq!(read_line(&mut c), ":60\r\n");
}

#[test]
fn yes_undoes_every_write_of_the_session_and_logs_none() {
    let server = TestServer::start(&["--appendonly", "yes"]);
    let mut setup = server.raw();
    check(&mut setup, "SET a 1 PX 600000", "+OK\r\n");
    check(&mut setup, "RPUSH list x y", ":2\r\n");
    check(&mut setup, "HSET h f v", ":1\r\n");
    check(&mut setup, "SELECT 1", "+OK\r\n");
    check(&mut setup, "SET other o", "+OK\r\n");
    check(&mut setup, "SELECT 4", "+OK\r\n");
    check(&mut setup, "SET four 4", "+OK\r\n");
    check(&mut setup, "SELECT 0", "+OK\r\n");

    let mut c = server.raw();
    check(&mut c, "SCRIPT DEBUG YES", "+OK\r\n");
    let script = "redis.call('set', KEYS[1], 'changed')
redis.call('del', 'list')
redis.call('set', 'fresh', 'new')
redis.call('hset', 'h', 'f2', 'v2')
redis.call('copy', KEYS[1], 'c', 'db', 3)
redis.call('move', 'fresh', 2)
redis.call('select', 1)
redis.call('flushdb')
redis.call('set', 'in1', 'x')
redis.call('swapdb', 0, 4)
redis.call('set', 'a', 'after-swap')
return 'done'";
    let first = say(&mut c, &["EVAL", script, "1", "a"]);
    assert_eq!(first[0], "* Stopped at 1, stop reason = step over");
    // The debugger's own `redis` command writes too, and is undone with the rest.
    assert_eq!(
        say(&mut c, &["redis", "set", "from-prompt", "p"]),
        vec!["<redis> set from-prompt p", r#"<reply> "+OK""#]
    );
    assert_eq!(say(&mut c, &["continue"]), vec!["<endsession>"]);
    assert_eq!(read_line(&mut c), "$4\r\n");
    assert_eq!(read_line(&mut c), "done\r\n");
    assert!(c.is_closed(), "the session's connection stays open");

    let mut after = server.raw();
    check(&mut after, "GET a", &bulk("1"));
    let ttl = {
        after.send(&encode(&[b"PTTL", b"a"]));
        read_line(&mut after)
    };
    let ttl: i64 = ttl.trim_start_matches(':').trim_end().parse().unwrap();
    assert!(ttl > 500_000, "the TTL was not kept: {ttl}");
    check(&mut after, "LRANGE list 0 -1", &common::bulks(&["x", "y"]));
    check(&mut after, "HGETALL h", &common::bulks(&["f", "v"]));
    check(&mut after, "EXISTS fresh from-prompt c", ":0\r\n");
    check(&mut after, "DBSIZE", ":3\r\n");
    for (db, size) in [
        ("1", ":1\r\n"),
        ("2", ":0\r\n"),
        ("3", ":0\r\n"),
        ("4", ":1\r\n"),
    ] {
        check(&mut after, &format!("SELECT {db}"), "+OK\r\n");
        check(&mut after, "DBSIZE", size);
    }
    check(&mut after, "GET four", &bulk("4"));
    check(&mut after, "SELECT 1", "+OK\r\n");
    check(&mut after, "GET other", &bulk("o"));
    check(&mut after, "SET marker m", "+OK\r\n");

    // Nothing of the session reached the AOF; what came after did.
    let dir = server.shutdown_keep_files("NOSAVE");
    let mut logged = Vec::new();
    for file in std::fs::read_dir(dir.join("appendonlydir")).unwrap() {
        logged.extend(std::fs::read(file.unwrap().path()).unwrap());
    }
    let logged = String::from_utf8_lossy(&logged);
    assert!(
        logged.contains("marker"),
        "the AOF was not written: {logged:?}"
    );
    for written in [
        "changed",
        "fresh",
        "from-prompt",
        "swapdb",
        "flushdb",
        "after-swap",
    ] {
        assert!(
            !logged.to_lowercase().contains(written),
            "{written} in the AOF: {logged:?}"
        );
    }
}
