//! HELLO, AUTH, RESET and CLIENT: exact replies in RESP2 and RESP3.

mod common;

use std::io::Read;
use std::time::Duration;

use common::{encode, read_line, RawConn, TestServer};

/// Sends a command and reads one integer reply.
fn integer(conn: &mut RawConn, args: &[&[u8]]) -> i64 {
    conn.send(&encode(args));
    let line = read_line(conn);
    line.trim_end()
        .strip_prefix(':')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not an integer: {line:?}"))
}

/// Sends a command whose reply is one bulk string (RESP2) and returns it.
fn bulk(conn: &mut RawConn, args: &[&[u8]]) -> String {
    conn.send(&encode(args));
    let header = read_line(conn);
    let len: usize = header
        .trim_end()
        .trim_start_matches(['$', '='])
        .parse()
        .expect("bulk header");
    let body = conn.read_n(len + 2);
    String::from_utf8_lossy(&body[..len]).into_owned()
}

fn hello_map(resp3: bool, proto: u8, id: i64) -> Vec<u8> {
    let header = if resp3 { "%7" } else { "*14" };
    format!(
        "{header}\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n$5\r\nproto\r\n:{proto}\r\n$2\r\nid\r\n:{id}\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n"
    )
    .into_bytes()
}

#[test]
fn hello_switches_protocol_and_describes_the_server() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    let id = integer(&mut raw, &[b"CLIENT", b"ID"]);
    raw.expect(&[b"HELLO"], &hello_map(false, 2, id));
    raw.expect(&[b"HELLO", b"3"], &hello_map(true, 3, id));
    // RESP3 from now on: a null is `_`.
    raw.expect(&[b"CLIENT", b"GETNAME"], b"_\r\n");
    raw.expect(&[b"HELLO"], &hello_map(true, 3, id));
    raw.expect(
        &[b"HELLO", b"2", b"SETNAME", b"conn1"],
        &hello_map(false, 2, id),
    );
    raw.expect(&[b"CLIENT", b"GETNAME"], b"$5\r\nconn1\r\n");
    raw.expect(
        &[b"HELLO", b"4"],
        b"-NOPROTO unsupported protocol version\r\n",
    );
    raw.expect(
        &[b"HELLO", b"1"],
        b"-NOPROTO unsupported protocol version\r\n",
    );
    raw.expect(
        &[b"HELLO", b"x"],
        b"-ERR Protocol version is not an integer or out of range\r\n",
    );
    raw.expect(
        &[b"HELLO", b"3", b"FOO"],
        b"-ERR Syntax error in HELLO option 'FOO'\r\n",
    );
    raw.expect(
        &[b"HELLO", b"3", b"AUTH", b"bob", b"pw"],
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    // The default user takes any password when none is configured.
    raw.expect(
        &[b"HELLO", b"2", b"AUTH", b"default", b"anything"],
        &hello_map(false, 2, id),
    );
    raw.expect(
        &[b"HELLO", b"2", b"SETNAME", b"bad name"],
        b"-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
    );
}

#[test]
fn auth_without_a_password_configured() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(
        &[b"AUTH", b"secret"],
        b"-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n",
    );
    raw.expect(&[b"AUTH", b"default", b"x"], b"+OK\r\n");
    raw.expect(
        &[b"AUTH", b"someone", b"x"],
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    raw.expect(&[b"AUTH", b"a", b"b", b"c"], b"-ERR syntax error\r\n");
}

#[test]
fn auth_with_requirepass() {
    let server = TestServer::start(&["--requirepass", "s3cret"]);
    let mut raw = server.raw();
    raw.expect(&[b"PING"], b"-NOAUTH Authentication required.\r\n");
    raw.expect(
        &[b"HELLO", b"3"],
        b"-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n",
    );
    raw.expect(
        &[b"AUTH", b"wrong"],
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    raw.expect(&[b"AUTH", b"s3cret"], b"+OK\r\n");
    raw.expect(&[b"PING"], b"+PONG\r\n");
    // RESET forgets the authentication when a password is required.
    raw.expect(&[b"RESET"], b"+RESET\r\n");
    raw.expect(&[b"PING"], b"-NOAUTH Authentication required.\r\n");

    let mut other = server.raw();
    other.expect(
        &[b"HELLO", b"3", b"AUTH", b"default", b"nope"],
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    other.send(&encode(&[b"HELLO", b"3", b"AUTH", b"default", b"s3cret"]));
    assert_eq!(read_line(&mut other), "%7\r\n");
}

#[test]
fn reset_restores_a_fresh_connection() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    let id = integer(&mut raw, &[b"CLIENT", b"ID"]);
    raw.expect(&[b"HELLO", b"3", b"SETNAME", b"n"], &hello_map(true, 3, id));
    raw.expect(&[b"SELECT", b"3"], b"+OK\r\n");
    raw.expect(&[b"CLIENT", b"NO-TOUCH", b"ON"], b"+OK\r\n");
    raw.expect(&[b"RESET"], b"+RESET\r\n");
    // Back to RESP2, no name, database 0, no flags.
    raw.expect(&[b"CLIENT", b"GETNAME"], b"$-1\r\n");
    let info = bulk(&mut raw, &[b"CLIENT", b"INFO"]);
    assert!(info.contains(" db=0 "), "{info}");
    assert!(info.contains(" flags=N "), "{info}");
    assert!(info.contains(" resp=2 "), "{info}");
    assert!(info.contains(" name= "), "{info}");
    raw.expect(
        &[b"RESET", b"x"],
        b"-ERR wrong number of arguments for 'reset' command\r\n",
    );
}

#[test]
fn client_id_name_info_and_list() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    let id = integer(&mut raw, &[b"CLIENT", b"ID"]);
    assert!(id > 0);
    raw.expect(&[b"CLIENT", b"GETNAME"], b"$-1\r\n");
    raw.expect(&[b"CLIENT", b"SETNAME", b"my-conn"], b"+OK\r\n");
    raw.expect(&[b"CLIENT", b"GETNAME"], b"$7\r\nmy-conn\r\n");
    raw.expect(
        &[b"CLIENT", b"SETNAME", b"has space"],
        b"-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
    );
    raw.expect(
        &[b"CLIENT", b"SETNAME", b"new\nline"],
        b"-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
    );
    raw.expect(&[b"CLIENT", b"SETNAME", b""], b"+OK\r\n");
    raw.expect(&[b"CLIENT", b"GETNAME"], b"$-1\r\n");
    raw.expect(&[b"CLIENT", b"SETNAME", b"my-conn"], b"+OK\r\n");

    let info = bulk(&mut raw, &[b"CLIENT", b"INFO"]);
    assert!(
        info.starts_with(&format!("id={id} addr=127.0.0.1:")),
        "{info}"
    );
    assert!(info.contains(" name=my-conn "), "{info}");
    assert!(info.contains(" cmd=client|info "), "{info}");
    assert!(info.ends_with("lib-name= lib-ver=\n"), "{info}");

    let mut other = server.raw();
    let other_id = integer(&mut other, &[b"CLIENT", b"ID"]);
    let list = bulk(&mut raw, &[b"CLIENT", b"LIST"]);
    assert_eq!(list.lines().count(), 2, "{list}");
    assert!(list.contains(&format!("id={other_id} ")), "{list}");
    let by_id = bulk(
        &mut raw,
        &[
            b"CLIENT",
            b"LIST",
            b"ID",
            other_id.to_string().as_bytes(),
            b"99999",
        ],
    );
    assert_eq!(by_id.lines().count(), 1, "{by_id}");
    assert!(by_id.starts_with(&format!("id={other_id} ")), "{by_id}");
    let normal = bulk(&mut raw, &[b"CLIENT", b"LIST", b"TYPE", b"normal"]);
    assert_eq!(normal.lines().count(), 2);
    raw.expect(&[b"CLIENT", b"LIST", b"TYPE", b"pubsub"], b"$0\r\n\r\n");
    raw.expect(
        &[b"CLIENT", b"LIST", b"TYPE", b"nope"],
        b"-ERR Unknown client type 'nope'\r\n",
    );
    raw.expect(
        &[b"CLIENT", b"LIST", b"ID", b"x"],
        b"-ERR Invalid client ID\r\n",
    );
    raw.expect(&[b"CLIENT", b"LIST", b"bad"], b"-ERR syntax error\r\n");
    raw.expect(
        &[b"CLIENT", b"NOPE"],
        b"-ERR unknown subcommand 'NOPE'. Try CLIENT HELP.\r\n",
    );
    raw.expect(
        &[b"CLIENT"],
        b"-ERR wrong number of arguments for 'client' command\r\n",
    );

    // CLIENT INFO in RESP3 is a verbatim string.
    raw.expect(&[b"HELLO", b"3"], &hello_map(true, 3, id));
    raw.send(&encode(&[b"CLIENT", b"INFO"]));
    let header = read_line(&mut raw);
    assert!(header.starts_with('='), "{header}");
    let len: usize = header.trim_end()[1..].parse().unwrap();
    let body = raw.read_n(len + 2);
    assert!(body.starts_with(b"txt:id="));
}

#[test]
fn client_setinfo_no_evict_no_touch_and_tracking_stubs() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(
        &[b"CLIENT", b"SETINFO", b"LIB-NAME", b"redis-py"],
        b"+OK\r\n",
    );
    raw.expect(&[b"CLIENT", b"SETINFO", b"lib-ver", b"5.0.1"], b"+OK\r\n");
    raw.expect(
        &[b"CLIENT", b"SETINFO", b"lib-name", b"a b"],
        b"-ERR lib-name cannot contain spaces, newlines or special characters.\r\n",
    );
    raw.expect(
        &[b"CLIENT", b"SETINFO", b"color", b"red"],
        b"-ERR Unrecognized option 'color'\r\n",
    );
    let info = bulk(&mut raw, &[b"CLIENT", b"INFO"]);
    assert!(
        info.ends_with("lib-name=redis-py lib-ver=5.0.1\n"),
        "{info}"
    );

    raw.expect(&[b"CLIENT", b"NO-EVICT", b"ON"], b"+OK\r\n");
    raw.expect(&[b"CLIENT", b"NO-TOUCH", b"on"], b"+OK\r\n");
    let info = bulk(&mut raw, &[b"CLIENT", b"INFO"]);
    assert!(info.contains(" flags=eT "), "{info}");
    raw.expect(
        &[b"CLIENT", b"NO-EVICT", b"maybe"],
        b"-ERR syntax error\r\n",
    );
    raw.expect(
        &[b"CLIENT", b"NO-TOUCH", b"maybe"],
        b"-ERR syntax error\r\n",
    );
    raw.expect(&[b"CLIENT", b"NO-EVICT", b"OFF"], b"+OK\r\n");
    raw.expect(&[b"CLIENT", b"NO-TOUCH", b"OFF"], b"+OK\r\n");

    raw.expect(&[b"CLIENT", b"GETREDIR"], b":-1\r\n");
    raw.expect(
        &[b"CLIENT", b"TRACKINGINFO"],
        b"*6\r\n$5\r\nflags\r\n*1\r\n$3\r\noff\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n",
    );
    raw.expect(&[b"CLIENT", b"UNBLOCK", b"12345"], b":0\r\n");
    raw.expect(
        &[b"CLIENT", b"UNBLOCK", b"1", b"later"],
        b"-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR\r\n",
    );
    raw.expect(
        &[b"CLIENT", b"UNBLOCK", b"x"],
        b"-ERR value is not an integer or out of range\r\n",
    );
    raw.send(&encode(&[b"CLIENT", b"HELP"]));
    let header = read_line(&mut raw);
    assert!(header.starts_with('*'), "{header}");
    assert_eq!(
        read_line(&mut raw),
        "+CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n"
    );
}

#[test]
fn client_kill_closes_another_connection() {
    let server = TestServer::start(&[]);
    let mut killer = server.raw();
    let mut victim = server.raw();
    let victim_id = integer(&mut victim, &[b"CLIENT", b"ID"]);
    let killer_id = integer(&mut killer, &[b"CLIENT", b"ID"]);

    killer.expect(
        &[b"CLIENT", b"KILL", b"ID", b"0"],
        b"-ERR client-id should be greater than 0\r\n",
    );
    // Not a number: the same answer from redis-server 7.0.15 (and Redis' own
    // unit/introspection test).
    killer.expect(
        &[b"CLIENT", b"KILL", b"ID", b"x"],
        b"-ERR client-id should be greater than 0\r\n",
    );
    killer.expect(
        &[b"CLIENT", b"KILL", b"TYPE", b"odd"],
        b"-ERR Unknown client type 'odd'\r\n",
    );
    killer.expect(
        &[b"CLIENT", b"KILL", b"USER", b"bob"],
        b"-ERR No such user 'bob'\r\n",
    );
    killer.expect(
        &[b"CLIENT", b"KILL", b"SKIPME", b"maybe"],
        b"-ERR syntax error\r\n",
    );
    killer.expect(&[b"CLIENT", b"KILL", b"ID"], b"-ERR No such client\r\n");
    killer.expect(
        &[b"CLIENT", b"KILL", b"1.2.3.4:5"],
        b"-ERR No such client\r\n",
    );
    killer.expect(&[b"CLIENT", b"KILL", b"ID", b"999999"], b":0\r\n");
    // SKIPME defaults to yes: killing by our own id finds nobody.
    killer.expect(
        &[b"CLIENT", b"KILL", b"ID", killer_id.to_string().as_bytes()],
        b":0\r\n",
    );

    killer.expect(
        &[b"CLIENT", b"KILL", b"ID", victim_id.to_string().as_bytes()],
        b":1\r\n",
    );
    assert!(victim.is_closed());
    killer.expect(&[b"PING"], b"+PONG\r\n");

    // The old form, by address.
    let mut second = server.raw();
    let addr = second.stream.local_addr().unwrap().to_string();
    second.expect(&[b"PING"], b"+PONG\r\n");
    killer.expect(&[b"CLIENT", b"KILL", addr.as_bytes()], b"+OK\r\n");
    assert!(second.is_closed());

    // Filters combine: LADDR matches the listening address.
    let mut third = server.raw();
    third.expect(&[b"PING"], b"+PONG\r\n");
    let laddr = format!("127.0.0.1:{}", server.port);
    killer.expect(
        &[
            b"CLIENT",
            b"KILL",
            b"LADDR",
            laddr.as_bytes(),
            b"TYPE",
            b"normal",
        ],
        b":1\r\n",
    );
    assert!(third.is_closed());

    // SKIPME no closes our own connection too, after the reply.
    killer.expect(
        &[
            b"CLIENT",
            b"KILL",
            b"ADDR",
            killer.stream.local_addr().unwrap().to_string().as_bytes(),
            b"SKIPME",
            b"no",
        ],
        b":1\r\n",
    );
    assert!(killer.is_closed());
}

#[test]
fn client_reply_off_and_skip() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.send(&encode(&[b"CLIENT", b"REPLY", b"OFF"]));
    raw.send(&encode(&[b"SET", b"k", b"v"]));
    raw.send(&encode(&[b"PING"]));
    raw.expect(&[b"CLIENT", b"REPLY", b"ON"], b"+OK\r\n");
    raw.expect(&[b"GET", b"k"], b"$1\r\nv\r\n");

    raw.send(&encode(&[b"CLIENT", b"REPLY", b"SKIP"]));
    raw.send(&encode(&[b"ECHO", b"skipped"]));
    raw.expect(&[b"ECHO", b"shown"], b"$5\r\nshown\r\n");
    raw.expect(&[b"CLIENT", b"REPLY", b"maybe"], b"-ERR syntax error\r\n");

    // Nothing arrives while replies are off.
    raw.send(&encode(&[b"CLIENT", b"REPLY", b"OFF"]));
    raw.send(&encode(&[b"PING"]));
    raw.stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut byte = [0u8; 1];
    assert!(
        raw.stream.read(&mut byte).is_err(),
        "a reply arrived while replies were off"
    );
}

#[test]
fn redis_crate_handshake_works() {
    let server = TestServer::start(&[]);
    let mut conn = server.client();
    let name: Option<String> = redis::cmd("CLIENT")
        .arg("GETNAME")
        .query(&mut conn)
        .unwrap();
    assert_eq!(name, None);
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("crate")
        .query(&mut conn)
        .unwrap();
    let name: Option<String> = redis::cmd("CLIENT")
        .arg("GETNAME")
        .query(&mut conn)
        .unwrap();
    assert_eq!(name.as_deref(), Some("crate"));
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut conn).unwrap();
    assert!(id > 0);
}

/// CLIENT LIST's `idle` counts whole seconds since the client's last input, and input
/// sets it back to 0.
#[test]
fn client_list_idle_counts_from_the_last_input() {
    let server = TestServer::start(&[]);
    let mut quiet = server.raw();
    let id = integer(&mut quiet, &[b"CLIENT", b"ID"]);
    let mut watcher = server.raw();
    let idle_of = |watcher: &mut RawConn| -> u64 {
        let list = bulk(
            watcher,
            &[b"CLIENT", b"LIST", b"ID", id.to_string().as_bytes()],
        );
        list.split_whitespace()
            .find_map(|field| field.strip_prefix("idle="))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no idle field: {list}"))
    };
    assert_eq!(idle_of(&mut watcher), 0);
    std::thread::sleep(Duration::from_millis(1300));
    assert!((1..=3).contains(&idle_of(&mut watcher)));
    integer(&mut quiet, &[b"CLIENT", b"ID"]);
    assert_eq!(idle_of(&mut watcher), 0);
}
