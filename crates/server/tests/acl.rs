//! ACL users against the real binary: SETUSER rules, AUTH as a user, NOPERM for commands
//! and keys (also from scripts), GETUSER/LIST/DRYRUN texts, DELUSER closing connections.

mod common;

use common::{bulk, check, TestServer};

#[test]
fn users_rules_and_refusals() {
    let server = TestServer::start(&[]);
    let mut admin = server.raw();
    check(
        &mut admin,
        "ACL SETUSER bob on >123 +@scripting +set +get ~x* %R~r*",
        "+OK\r\n",
    );
    check(
        &mut admin,
        "ACL SETUSER bob bogus",
        "-ERR Error in ACL SETUSER modifier 'bogus': Syntax error\r\n",
    );
    check(
        &mut admin,
        "ACL SETUSER bob +nosuch",
        "-ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL\r\n",
    );
    let mut conn = server.client();
    let list: Vec<String> = redis::cmd("ACL").arg("LIST").query(&mut conn).unwrap();
    assert_eq!(
        list,
        [
            "user bob on #a665a45920422f9d417e4867efdc4fb8a04a1f3fff1fa07e998e86f7f7a27ae3 ~x* %R~r* resetchannels -@all +@scripting +set +get",
            "user default on nopass ~* &* +@all",
        ]
    );
    check(
        &mut admin,
        "ACL DRYRUN bob set z 1",
        &bulk("This user has no permissions to access the 'z' key"),
    );
    check(&mut admin, "ACL DRYRUN bob set xx 1", "+OK\r\n");

    let mut bob = server.raw();
    check(
        &mut bob,
        "AUTH bob wrong",
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    check(&mut bob, "AUTH bob 123", "+OK\r\n");
    check(&mut bob, "SET xx 1", "+OK\r\n");
    check(
        &mut bob,
        "SET yy 1",
        "-NOPERM this user has no permissions to access one of the keys used as arguments\r\n",
    );
    check(
        &mut bob,
        "HSET xx f 1",
        "-NOPERM this user has no permissions to run the 'hset' command\r\n",
    );
    // Read-only pattern: GET allowed, SET refused.
    check(&mut bob, "GET r1", "$-1\r\n");
    check(
        &mut bob,
        "SET r1 v",
        "-NOPERM this user has no permissions to access one of the keys used as arguments\r\n",
    );
    bob.expect(
        &[
            b"EVAL",
            b"return redis.acl_check_cmd('hset','xx','f',1)",
            b"0",
        ],
        b"$-1\r\n",
    );
    bob.expect(
        &[b"EVAL", b"return redis.acl_check_cmd('set','xx',1)", b"0"],
        b":1\r\n",
    );
    bob.expect(
        &[b"EVAL", b"return redis.call('hset','xx','f',1)", b"0"],
        b"-ERR The user executing the script can't run this command or subcommand script: ba9f4061dd5c8eb1ba3ecfa5a31b4108de6e1edf, on @user_script:1.\r\n",
    );
    // Deleting the user closes its connections.
    check(&mut admin, "ACL DELUSER bob nobody", ":1\r\n");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    bob.stream
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    assert!(bob.is_closed(), "bob's connection stays open");
    assert!(std::time::Instant::now() < deadline);
    check(
        &mut admin,
        "ACL DELUSER default",
        "-ERR The 'default' user cannot be removed\r\n",
    );
}

/// One whole reply, as the server sent it (any RESP2 or RESP3 type).
fn read_reply(reader: &mut impl std::io::BufRead) -> String {
    let mut line = String::new();
    reader.read_line(&mut line).expect("read a reply");
    assert!(line.ends_with("\r\n"), "cut reply: {line:?}");
    let count = |line: &str| line[1..line.len() - 2].parse::<i64>().expect("a length");
    let mut reply = line.clone();
    match line.as_bytes()[0] {
        b'$' | b'=' | b'!' if count(&line) >= 0 => {
            let mut data = vec![0u8; count(&line) as usize + 2];
            reader.read_exact(&mut data).expect("read a bulk");
            reply.push_str(&String::from_utf8_lossy(&data));
        }
        b'*' | b'~' | b'>' | b'%' => {
            let items = count(&line).max(0) * if line.starts_with('%') { 2 } else { 1 };
            for _ in 0..items {
                reply.push_str(&read_reply(reader));
            }
        }
        _ => {}
    }
    reply
}

/// Sends a command (space-separated words) and returns its reply.
fn call(conn: &mut std::io::BufReader<std::net::TcpStream>, command: &str) -> String {
    let args: Vec<&[u8]> = command.split(' ').map(str::as_bytes).collect();
    std::io::Write::write_all(conn.get_mut(), &common::encode(&args)).expect("send");
    read_reply(conn)
}

/// A HELLO reply with what differs between servers and connections (name, version, id)
/// left out: its field names, and the protocol.
fn hello_shape(reply: &str) -> String {
    let lines: Vec<&str> = reply.split("\r\n").collect();
    let mut shape = vec![lines[0].to_string()];
    for (at, line) in lines.iter().enumerate() {
        if matches!(
            *line,
            "server" | "version" | "proto" | "id" | "mode" | "role" | "modules"
        ) {
            shape.push(line.to_string());
        }
        if *line == "proto" {
            shape.push(lines[at + 1].to_string());
        }
    }
    shape.join(" ")
}

/// AUTH, HELLO, QUIT and RESET are flagged `no-auth`: Redis lets every user run them,
/// whatever its command rules (`ACLSelectorCheckCmd` skips the command bits for them), so a
/// user without `+auth` can log in again or switch users. Run against Latch and Debian's
/// redis-server, the replies are the same.
#[test]
fn no_auth_commands_pass_any_command_rules() {
    let latch = TestServer::start(&[]);
    let redis = latch_testkit::Server::redis(&[]);
    let mut transcripts = Vec::new();
    for port in [latch.port, redis.port] {
        let connect = || {
            std::io::BufReader::new(
                std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect"),
            )
        };
        let mut admin = connect();
        let mut user = connect();
        let mut transcript = Vec::new();
        let mut step = |conn: &mut std::io::BufReader<std::net::TcpStream>, command: &str| {
            let mut reply = call(conn, command);
            if command.starts_with("HELLO") && !reply.starts_with('-') {
                reply = hello_shape(&reply);
            }
            transcript.push(format!("{command} -> {reply}"));
            reply
        };
        assert_eq!(
            step(&mut admin, "ACL SETUSER u on >pw -@all +get"),
            "+OK\r\n"
        );
        assert_eq!(step(&mut user, "AUTH u pw"), "+OK\r\n");
        // Now running as u, which has no +auth and no +hello.
        assert_eq!(step(&mut user, "AUTH u pw"), "+OK\r\n");
        assert_eq!(
            step(&mut user, "HELLO 2 AUTH u pw"),
            "*14 server version proto :2 id mode role modules"
        );
        assert_eq!(
            step(&mut user, "HELLO 3 AUTH u pw"),
            "%7 server version proto :3 id mode role modules"
        );
        assert_eq!(
            step(&mut user, "HELLO 2"),
            "*14 server version proto :2 id mode role modules"
        );
        assert_eq!(
            step(&mut user, "AUTH u wrong"),
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
        );
        // The command rules still hold for everything else.
        assert_eq!(
            step(&mut user, "SET a b"),
            "-NOPERM this user has no permissions to run the 'set' command\r\n"
        );
        assert_eq!(
            step(&mut user, "ACL WHOAMI"),
            "-NOPERM this user has no permissions to run the 'acl|whoami' command\r\n"
        );
        // RESET is no-auth too: back to the default user.
        assert_eq!(step(&mut user, "RESET"), "+RESET\r\n");
        assert_eq!(step(&mut user, "ACL WHOAMI"), "$7\r\ndefault\r\n");
        for command in ["AUTH u pw", "HELLO 2", "RESET", "QUIT"] {
            assert_eq!(
                step(&mut admin, &format!("ACL DRYRUN u {command}")),
                "+OK\r\n",
                "{command}"
            );
        }
        assert_eq!(
            step(&mut admin, "ACL DRYRUN u SET a b"),
            bulk("This user has no permissions to run the 'set' command")
        );
        transcripts.push(transcript);
    }
    assert_eq!(transcripts[0], transcripts[1], "Latch, then redis-server");
}

/// ACL LOG's entries as (field -> value) maps, values rendered as text.
fn acl_log(
    conn: &mut redis::Connection,
    count: Option<i64>,
) -> Vec<std::collections::HashMap<String, String>> {
    let mut cmd = redis::cmd("ACL");
    cmd.arg("LOG");
    if let Some(count) = count {
        cmd.arg(count);
    }
    let entries: Vec<Vec<redis::Value>> = cmd.query(conn).unwrap();
    entries
        .into_iter()
        .map(|fields| {
            fields
                .chunks(2)
                .map(|pair| {
                    let text = |v: &redis::Value| match v {
                        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                        redis::Value::Int(n) => n.to_string(),
                        other => format!("{other:?}"),
                    };
                    (text(&pair[0]), text(&pair[1]))
                })
                .collect()
        })
        .collect()
}

#[test]
fn acl_log_records_refusals_and_failed_logins() {
    let server = TestServer::start(&[]);
    let mut admin = server.client();
    let mut raw = server.raw();
    check(
        &mut raw,
        "ACL SETUSER eve on >pw +set +incr +multi +exec +eval +publish ~allowed resetchannels",
        "+OK\r\n",
    );
    let mut eve = server.raw();
    check(&mut eve, "AUTH eve pw", "+OK\r\n");
    let refused = |conn: &mut common::RawConn, command: &str| {
        let line = {
            conn.send(&common::encode(
                &command.split(' ').map(str::as_bytes).collect::<Vec<_>>(),
            ));
            common::read_line(conn)
        };
        assert!(line.starts_with("-NOPERM"), "{command}: {line}");
    };
    refused(&mut eve, "GET allowed");
    refused(&mut eve, "GET allowed");
    refused(&mut eve, "SET secret 1");
    refused(&mut eve, "PUBLISH news hi");
    let log = acl_log(&mut admin, None);
    let shape: Vec<(&str, &str, &str, &str)> = log
        .iter()
        .map(|e| {
            (
                e["reason"].as_str(),
                e["context"].as_str(),
                e["object"].as_str(),
                e["count"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            ("channel", "toplevel", "news", "1"),
            ("key", "toplevel", "secret", "1"),
            ("command", "toplevel", "get", "2"),
        ]
    );
    assert_eq!(log[0]["username"], "eve");
    assert!(log[0]["client-info"].starts_with("id="), "{:?}", log[0]);
    assert_eq!(acl_log(&mut admin, Some(1)).len(), 1);

    // In MULTI, at EXEC once the rules changed, in a script, and a failed login.
    check(&mut raw, "ACL LOG RESET", "+OK\r\n");
    check(&mut eve, "MULTI", "+OK\r\n");
    check(&mut eve, "INCR allowed", "+QUEUED\r\n");
    check(&mut raw, "ACL SETUSER eve -incr", "+OK\r\n");
    check(
        &mut eve,
        "EXEC",
        "*1\r\n-NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: no permission to execute the command or subcommand\r\n",
    );
    eve.send(&common::encode(&[
        b"EVAL",
        b"return redis.pcall('incr','allowed')",
        b"0",
    ]));
    let line = common::read_line(&mut eve);
    assert!(
        line.contains("The user executing the script can't run"),
        "{line}"
    );
    let mut stranger = server.raw();
    check(
        &mut stranger,
        "auth eve wrong",
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    let log = acl_log(&mut admin, None);
    let shape: Vec<(&str, &str, &str)> = log
        .iter()
        .map(|e| {
            (
                e["reason"].as_str(),
                e["context"].as_str(),
                e["object"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            ("auth", "toplevel", "auth"),
            ("command", "lua", "incr"),
            ("command", "multi", "incr"),
        ]
    );

    // At most acllog-max-len entries.
    check(&mut raw, "CONFIG SET acllog-max-len 2", "+OK\r\n");
    for key in ["a", "b", "c"] {
        refused(&mut eve, &format!("SET {key} 1"));
    }
    assert_eq!(acl_log(&mut admin, None).len(), 2);
}
