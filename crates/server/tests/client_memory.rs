//! What one client may hold: every byte counted (CLIENT LIST's `qbuf`, `argv-mem`,
//! `multi-mem`, `rbs`, `omem`, `tot-mem`), the limits that close a client that holds too
//! much (`client-query-buffer-limit`, `client-output-buffer-limit`, `maxmemory-clients`),
//! and idle buffers given back.

mod common;

use std::io::Read;
use std::time::{Duration, Instant};

use common::{check, encode, RawConn, TestServer};

/// The CLIENT LIST line of the client named `name`, if it is connected.
fn client_line(server: &TestServer, name: &str) -> Option<String> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut server.client())
        .expect("CLIENT LIST");
    list.lines()
        .find(|line| line.contains(&format!(" name={name} ")))
        .map(str::to_string)
}

/// A numeric field of a CLIENT LIST line.
fn field(line: &str, name: &str) -> u64 {
    let prefix = format!("{name}=");
    line.split(' ')
        .find_map(|part| part.strip_prefix(&prefix))
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}

/// Polls until `done` holds, for up to `seconds`.
fn eventually(seconds: u64, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
}

/// Whether the server closed `conn`: end of file, or a reset (a server that closes a socket
/// with unread input resets it). Waits up to 2 seconds for either, reading what comes.
fn closed_by_server(conn: &mut RawConn) -> bool {
    conn.stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut chunk = [0u8; 4096];
    loop {
        match conn.stream.read(&mut chunk) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

fn named(server: &TestServer, name: &str) -> RawConn {
    let mut conn = server.raw();
    check(&mut conn, &format!("CLIENT SETNAME {name}"), "+OK\r\n");
    conn
}

fn info_field(server: &TestServer, section: &str, name: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg(section)
        .query(&mut server.client())
        .expect("INFO");
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("{name}:")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in INFO {section}"))
}

/// The start of a multibulk request whose arguments arrive whole but whose last one never
/// comes: the arguments leave the input buffer for the parser (Redis' `argv-mem`).
fn unfinished_request(arguments: usize, each: usize) -> Vec<u8> {
    let mut out = format!("*{}\r\n$3\r\nSET\r\n", arguments + 2).into_bytes();
    let value = vec![b'x'; each];
    for _ in 0..arguments {
        out.extend_from_slice(format!("${each}\r\n").as_bytes());
        out.extend_from_slice(&value);
        out.extend_from_slice(b"\r\n");
    }
    out
}

#[test]
fn arguments_of_an_unfinished_request_are_counted_and_limited() {
    let server = TestServer::start(&["--client-query-buffer-limit", "2mb"]);
    let mut small = named(&server, "small");
    small.send(&unfinished_request(2, 300_000));
    assert!(eventually(5, || client_line(&server, "small")
        .is_some_and(|line| field(&line, "argv-mem") == 600_003)));
    let line = client_line(&server, "small").unwrap();
    assert!(field(&line, "tot-mem") > 600_000, "{line}");
    // Past the limit in arguments alone (the input buffer itself stays small).
    let mut big = named(&server, "big");
    // The server may close it before it has sent everything.
    let _ = std::io::Write::write_all(&mut big.stream, &unfinished_request(8, 300_000));
    assert!(
        closed_by_server(&mut big),
        "a client holding 2.4 MB of arguments stays"
    );
    assert!(client_line(&server, "big").is_none());
    assert_eq!(
        info_field(&server, "stats", "client_query_buffer_limit_disconnections"),
        1
    );
    // The other client goes on: its request completes.
    small.send(b"$1\r\nz\r\n");
    // SET with extra arguments is a syntax error, which still proves the request ran.
    check(&mut small, "PING", "-ERR syntax error\r\n+PONG\r\n");
}

#[test]
fn a_multi_queue_counts_and_is_limited_like_the_query_buffer() {
    let server = TestServer::start(&["--client-query-buffer-limit", "1mb"]);
    let mut conn = named(&server, "queuer");
    check(&mut conn, "MULTI", "+OK\r\n");
    let value = vec![b'v'; 300_000];
    conn.expect(&[b"SET", b"a", &value], b"+QUEUED\r\n");
    conn.expect(&[b"SET", b"b", &value], b"+QUEUED\r\n");
    let line = client_line(&server, "queuer").unwrap();
    assert_eq!(field(&line, "multi"), 2, "{line}");
    assert!(field(&line, "multi-mem") >= 600_000, "{line}");
    // tot-mem is counted once the connection is done with the read (its own thread).
    assert!(eventually(5, || client_line(&server, "queuer")
        .is_some_and(|line| field(&line, "tot-mem") > 600_000)));
    for key in [b"c", b"d"] {
        // The server may close it before it has sent everything.
        let _ = std::io::Write::write_all(&mut conn.stream, &encode(&[b"SET", key, &value]));
    }
    // The queue passed 1 MB: the client is closed (after the first QUEUED, perhaps).
    let mut rest = Vec::new();
    let _ = conn.stream.read_to_end(&mut rest);
    assert!(client_line(&server, "queuer").is_none());
    let mut other = server.raw();
    check(&mut other, "EXISTS a b c d", ":0\r\n");
}

#[test]
fn a_reply_over_the_hard_output_limit_closes_the_client_unanswered() {
    let server = TestServer::start(&[]);
    let mut admin = server.raw();
    admin.expect(
        &[
            b"CONFIG",
            b"SET",
            b"client-output-buffer-limit",
            b"normal 100000 0 0",
        ],
        b"+OK\r\n",
    );
    fill_list(&server, 150);
    let mut reader = named(&server, "reader");
    reader.send(&encode(&[b"LRANGE", b"big", b"0", b"-1"]));
    let mut got = Vec::new();
    let _ = reader.stream.read_to_end(&mut got);
    assert!(
        got.is_empty(),
        "{} bytes of a reply over the limit",
        got.len()
    );
    assert!(client_line(&server, "reader").is_none());
    assert_eq!(
        info_field(
            &server,
            "stats",
            "client_output_buffer_limit_disconnections"
        ),
        1
    );
    // Under the limit, a client gets its reply.
    let mut fine = named(&server, "fine");
    fine.send(&encode(&[b"LRANGE", b"big", b"0", b"10"]));
    assert_eq!(fine.read_n(11 * 1009 + 5).len(), 11 * 1009 + 5);
    check(&mut fine, "PING", "+PONG\r\n");
}

/// A random pick with a huge negative count stops once its reply passes the hard output
/// limit, and the client is closed unanswered (Redis' obuf-limits test, for SRANDMEMBER,
/// HRANDFIELD and ZRANDMEMBER); without a hard limit such a count is refused.
#[test]
fn huge_repeated_picks_stop_at_the_hard_output_limit() {
    let server = TestServer::start(&[]);
    let mut admin = server.raw();
    check(&mut admin, "SADD s a", ":1\r\n");
    check(&mut admin, "HSET h f v", ":1\r\n");
    check(&mut admin, "ZADD z 1 m", ":1\r\n");
    let picks = [
        "SRANDMEMBER s -999999999",
        "HRANDFIELD h -999999999",
        "HRANDFIELD h -999999999 WITHVALUES",
        "ZRANDMEMBER z -999999999",
        "ZRANDMEMBER z -999999999 WITHSCORES",
    ];
    for pick in picks {
        check(&mut admin, pick, "-ERR value is out of range\r\n");
    }
    admin.expect(
        &[
            b"CONFIG",
            b"SET",
            b"client-output-buffer-limit",
            b"normal 1000000 0 0",
        ],
        b"+OK\r\n",
    );
    let used_before = info_field(&server, "memory", "used_memory");
    for (i, pick) in picks.iter().enumerate() {
        let mut picker = named(&server, &format!("picker{i}"));
        let args: Vec<&[u8]> = pick.split(' ').map(str::as_bytes).collect();
        picker.send(&encode(&args));
        assert!(closed_by_server(&mut picker), "{pick}: not closed");
        assert!(client_line(&server, &format!("picker{i}")).is_none());
    }
    assert_eq!(
        info_field(
            &server,
            "stats",
            "client_output_buffer_limit_disconnections"
        ),
        picks.len() as u64
    );
    // Each stopped near the limit: nothing like the gigabytes asked for stayed allocated.
    let used_after = info_field(&server, "memory", "used_memory");
    assert!(
        used_after < used_before + 4_000_000,
        "{used_before} -> {used_after}"
    );
    // Under the usual bound, the picks are answered in full.
    check(
        &mut admin,
        "SRANDMEMBER s -3",
        "*3\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n",
    );
}

/// A client that sends requests for big replies and never reads: its replies wait in the
/// server until the socket drains.
fn flood_without_reading(server: &TestServer, name: &str, requests: usize) -> RawConn {
    let conn = named(server, name);
    let mut request = Vec::new();
    for _ in 0..requests {
        request.extend_from_slice(&encode(&[b"LRANGE", b"big", b"0", b"-1"]));
    }
    conn.stream
        .set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    // The server stops reading while it cannot write: sent from a thread, so that this
    // one is not stuck when both directions fill.
    let mut writer = conn.stream.try_clone().unwrap();
    std::thread::spawn(move || {
        use std::io::Write;
        let _ = writer.write_all(&request);
    });
    conn
}

/// `big`: a list of `items` items of 1000 bytes.
fn fill_list(server: &TestServer, items: usize) {
    let mut admin = server.raw();
    let item = vec![b'y'; 1000];
    let mut args: Vec<&[u8]> = vec![b"RPUSH", b"big"];
    // The reply to LRANGE big 0 -1 is about `items` KB.
    args.extend(std::iter::repeat_n(&item[..], items));
    admin.send(&encode(&args));
    let expected = format!(":{items}\r\n");
    assert_eq!(admin.read_n(expected.len()), expected.as_bytes());
}

#[test]
fn replies_stuck_over_the_soft_limit_close_the_client_after_its_seconds() {
    let server = TestServer::start(&[]);
    fill_list(&server, 5000);
    let mut admin = server.raw();
    admin.send(&encode(&[
        b"CONFIG",
        b"SET",
        b"client-output-buffer-limit",
        b"normal 0 500000 1",
    ]));
    assert_eq!(admin.read_n(5), b"+OK\r\n");
    let started = Instant::now();
    let _slow = flood_without_reading(&server, "slow", 200);
    // It shows what waits (omem), then is closed a second or two after that passed the
    // soft limit.
    assert!(eventually(5, || client_line(&server, "slow")
        .is_some_and(|line| field(&line, "omem") >= 500_000)));
    assert!(eventually(10, || client_line(&server, "slow").is_none()));
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(
        info_field(
            &server,
            "stats",
            "client_output_buffer_limit_disconnections"
        ),
        1
    );
    check(&mut admin, "PING", "+PONG\r\n");
}

#[test]
fn a_client_that_does_not_read_can_still_be_killed() {
    let server = TestServer::start(&[]);
    fill_list(&server, 5000);
    let _stuck = flood_without_reading(&server, "stuck", 200);
    assert!(eventually(5, || client_line(&server, "stuck")
        .is_some_and(|line| field(&line, "omem") > 0)));
    let id = field(&client_line(&server, "stuck").unwrap(), "id");
    let mut admin = server.raw();
    check(&mut admin, &format!("CLIENT KILL ID {id}"), ":1\r\n");
    assert!(eventually(5, || client_line(&server, "stuck").is_none()));
}

#[test]
fn maxmemory_clients_evicts_the_biggest_clients_and_spares_the_rest() {
    let server = TestServer::start(&["--maxmemory-clients", "4mb"]);
    let mut ordinary = named(&server, "ordinary");
    let mut spared = named(&server, "spared");
    check(&mut spared, "CLIENT NO-EVICT on", "+OK\r\n");
    spared.send(&unfinished_request(1, 1_500_000));
    assert!(eventually(5, || client_line(&server, "spared")
        .is_some_and(|line| field(&line, "argv-mem") == 1_500_003)));
    let mut abusers: Vec<RawConn> = (0..4)
        .map(|i| {
            let mut conn = named(&server, &format!("abuser{i}"));
            // The server may close it before it has sent everything.
            let _ = std::io::Write::write_all(&mut conn.stream, &unfinished_request(1, 1_500_000));
            conn
        })
        .collect();
    assert!(eventually(5, || info_field(
        &server,
        "stats",
        "evicted_clients"
    ) >= 2));
    let memory = info_field(&server, "memory", "mem_clients_normal");
    assert!(memory < 4 * 1024 * 1024, "clients still hold {memory}");
    let mut evicted = 0;
    for conn in &mut abusers {
        conn.stream
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        if closed_by_server(conn) {
            evicted += 1;
        }
    }
    assert!(evicted >= 2, "{evicted} abusers closed");
    assert!(client_line(&server, "spared").is_some());
    check(&mut ordinary, "PING", "+PONG\r\n");
}

/// SET and GET a 400 KB value on `conn`: its query and reply buffers grow to hold it.
fn set_and_get_a_big_value(conn: &mut RawConn) {
    let value = vec![b'v'; 400_000];
    conn.expect(&[b"SET", b"k", &value], b"+OK\r\n");
    let mut reply = b"$400000\r\n".to_vec();
    reply.extend_from_slice(&value);
    reply.extend_from_slice(b"\r\n");
    conn.expect(&[b"GET", b"k"], &reply);
}

#[test]
fn an_idle_client_gives_its_buffers_back() {
    let server = TestServer::start(&["--hz", "50"]);
    let mut conn = named(&server, "idler");
    set_and_get_a_big_value(&mut conn);
    // Counted once the connection is done with the read (on its own thread: polled).
    assert!(eventually(5, || client_line(&server, "idler")
        .is_some_and(|line| field(&line, "rbs") >= 400_000)));
    // Busy with small commands: the big buffers shrink to what they need.
    assert!(eventually(5, || {
        check(&mut conn, "PING", "+PONG\r\n");
        let line = client_line(&server, "idler").unwrap();
        field(&line, "rbs") < 100_000 && field(&line, "qbuf") + field(&line, "qbuf-free") < 100_000
    }));
    // Idle for two seconds: nothing left but the connection itself.
    assert!(eventually(6, || {
        let line = client_line(&server, "idler").unwrap();
        field(&line, "qbuf-free") == 0 && field(&line, "rbs") == 0
    }));
    let line = client_line(&server, "idler").unwrap();
    assert!(field(&line, "tot-mem") < 4096, "{line}");
    // And works as before.
    check(&mut conn, "PING", "+PONG\r\n");
}

#[test]
fn a_big_argument_takes_its_own_size_in_the_query_buffer_once() {
    // Redis sizes the query buffer for a big argument exactly; growing it by doubling
    // made a client with a 220 KB argument hold 470 KB, and maxmemory-clients evicted it
    // at half its limit (unit/client-eviction's percentage test).
    let server = TestServer::start(&[]);
    let mut conn = named(&server, "big");
    let size = 220_200;
    let mut request = format!("*1\r\n${size}\r\n").into_bytes();
    request.extend(std::iter::repeat_n(b'v', size));
    // In two pieces, the second small: room running low before the end of the argument
    // once made the buffer double.
    let (most, rest) = request.split_at(request.len() - 3_000);
    conn.send(most);
    std::thread::sleep(Duration::from_millis(100));
    conn.send(rest);
    let mut line = String::new();
    assert!(
        eventually(5, || {
            line = client_line(&server, "big").expect("still connected");
            field(&line, "qbuf") >= size as u64
        }),
        "the argument never arrived: {line}"
    );
    let held = field(&line, "qbuf") + field(&line, "qbuf-free");
    assert!(
        held < size as u64 + 16 * 1024,
        "{held} bytes held for a {size}-byte argument: {line}"
    );
}

#[test]
fn watched_keys_and_subscriptions_count_and_a_lower_limit_evicts_at_once() {
    let server = TestServer::start(&[]);
    let mut admin = named(&server, "admin");
    check(&mut admin, "CLIENT NO-EVICT on", "+OK\r\n");
    let mut watcher = named(&server, "watcher");
    let mut subscriber = named(&server, "subscriber");
    let before = field(&client_line(&server, "watcher").unwrap(), "tot-mem");
    for i in 0..2000 {
        check(&mut watcher, &format!("WATCH key:{i:08}"), "+OK\r\n");
    }
    let watching = field(&client_line(&server, "watcher").unwrap(), "tot-mem");
    assert!(
        watching > before + 2000 * 40,
        "2000 watched keys took {} bytes",
        watching - before
    );
    let mut request = Vec::new();
    for i in 0..2000 {
        request.extend_from_slice(&encode(&[b"SUBSCRIBE", format!("ch:{i}").as_bytes()]));
    }
    subscriber.send(&request);
    assert!(eventually(5, || client_line(&server, "subscriber")
        .is_some_and(|line| field(&line, "sub") == 2000)));
    let subscribed = field(&client_line(&server, "subscriber").unwrap(), "tot-mem");
    assert!(subscribed > before + 2000 * 32, "{subscribed}");

    // The caller's own line counts the command it runs (as Redis' argv-mem does).
    let mine: String = redis::cmd("CLIENT")
        .arg("INFO")
        .query(&mut server.client())
        .unwrap();
    assert_eq!(field(&mine, "argv-mem"), "CLIENTINFO".len() as u64);

    // A limit under what the two hold evicts the bigger at once: CLIENT LIST right after
    // the CONFIG SET no longer shows it.
    let limit = (watching.max(subscribed) + watching.min(subscribed) / 2).to_string();
    check(
        &mut admin,
        &format!("CONFIG SET maxmemory-clients {limit}"),
        "+OK\r\n",
    );
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut server.client())
        .unwrap();
    let bigger = if watching > subscribed {
        "watcher"
    } else {
        "subscriber"
    };
    let smaller = if watching > subscribed {
        "subscriber"
    } else {
        "watcher"
    };
    assert!(!list.contains(&format!("name={bigger} ")), "{list}");
    assert!(list.contains(&format!("name={smaller} ")), "{list}");
    assert_eq!(info_field(&server, "stats", "evicted_clients"), 1);
}

#[test]
fn requests_read_ahead_behind_stuck_replies_count_toward_eviction() {
    let server = TestServer::start(&["--maxmemory-clients", "3mb"]);
    fill_list(&server, 1000);
    // Its replies (1 MB each) fill the socket; what it keeps sending is read ahead and held,
    // and counted, until eviction closes it.
    let mut flooder = named(&server, "flooder");
    flooder
        .stream
        .set_write_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let one = encode(&[b"LRANGE", b"big", b"0", b"-1"]);
    let chunk: Vec<u8> = one
        .iter()
        .copied()
        .cycle()
        .take(one.len() * 10_000)
        .collect();
    let mut writer = flooder.stream.try_clone().unwrap();
    std::thread::spawn(move || {
        use std::io::Write;
        for _ in 0..100 {
            if writer.write_all(&chunk).is_err() {
                break;
            }
        }
    });
    assert!(eventually(20, || client_line(&server, "flooder").is_none()));
    assert!(closed_by_server(&mut flooder));
    assert_eq!(info_field(&server, "stats", "evicted_clients"), 1);
}

#[test]
fn debug_replybuffer_resizing_off_keeps_reply_buffers() {
    let server = TestServer::start(&["--hz", "50"]);
    let mut admin = server.raw();
    check(&mut admin, "DEBUG REPLYBUFFER RESIZING 0", "+OK\r\n");
    check(
        &mut admin,
        "DEBUG REPLYBUFFER PEAK-RESET-TIME never",
        "+OK\r\n",
    );
    let error = "-ERR unknown subcommand or wrong number of arguments for 'REPLYBUFFER'";
    admin.send(&encode(&[b"DEBUG", b"REPLYBUFFER", b"SIZE", b"1"]));
    let reply = String::from_utf8(admin.read_n(error.len())).unwrap();
    assert!(reply.eq_ignore_ascii_case(error), "{reply}");
    common::read_line(&mut admin);
    let mut conn = named(&server, "keeper");
    set_and_get_a_big_value(&mut conn);
    for _ in 0..20 {
        check(&mut conn, "PING", "+PONG\r\n");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_secs(3));
    let line = client_line(&server, "keeper").unwrap();
    assert!(field(&line, "rbs") >= 400_000, "{line}");
    // Back on: the idle client gives it back.
    check(&mut admin, "DEBUG REPLYBUFFER RESIZING 1", "+OK\r\n");
    check(
        &mut admin,
        "DEBUG REPLYBUFFER PEAK-RESET-TIME reset",
        "+OK\r\n",
    );
    check(&mut conn, "PING", "+PONG\r\n");
    assert!(eventually(8, || {
        let line = client_line(&server, "keeper").unwrap();
        field(&line, "rbs") < 100_000
    }));
}
