//! What one connection may cost the server: a panic in a command ends that connection
//! only, with an error reply and a log line, and every piece of bookkeeping is given back;
//! protected mode turns away clients from outside the loopback interface.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::{check, TestServer};

const PANICKED: &str =
    "-ERR internal error: the command panicked (see the server log); closing the connection\r\n";

fn connected_clients(server: &TestServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("clients")
        .query(&mut server.client())
        .expect("INFO");
    info.lines()
        .find_map(|line| line.strip_prefix("connected_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("connected_clients")
}

#[test]
fn a_panicking_command_costs_its_connection_only() {
    let server = TestServer::start(&["--maxclients", "4"]);
    let mut bystander = server.raw();
    check(&mut bystander, "SET k v", "+OK\r\n");
    check(&mut bystander, "CLIENT SETNAME bystander", "+OK\r\n");
    // More panics than maxclients allows connections: each must give its place back.
    for round in 0..6 {
        let mut victim = server.raw();
        check(
            &mut victim,
            &format!("CLIENT SETNAME victim{round}"),
            "+OK\r\n",
        );
        // Commands pipelined before the panic are answered; the ones after it are not run.
        victim.send(b"INCR n\r\nDEBUG PANIC-CONNECTION\r\nINCR n\r\n");
        let expected = format!(":{}\r\n{PANICKED}", round + 1);
        assert_eq!(
            String::from_utf8_lossy(&victim.read_n(expected.len())),
            expected
        );
        assert!(
            victim.is_closed(),
            "the connection stays open after a panic"
        );
    }
    check(&mut bystander, "GET n", "$1\r\n6\r\n");
    check(&mut bystander, "GET k", "$1\r\nv\r\n");
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut server.client())
        .unwrap();
    assert!(!list.contains("name=victim"), "{list}");
    // The bystander and INFO's own (the connections of the checks before may take a moment
    // to be seen closed).
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut connected = connected_clients(&server);
    while connected != 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        connected = connected_clients(&server);
    }
    assert_eq!(connected, 2, "the bystander and INFO's own");
    // The log says what happened.
    let log = std::fs::read_to_string(server.dir.join("stderr.log")).unwrap();
    assert!(log.contains("a command panicked"), "{log}");
    assert!(log.contains("DEBUG PANIC-CONNECTION"), "{log}");
}

#[test]
fn a_panic_inside_a_transaction_leaves_no_trace_of_the_client() {
    let server = TestServer::start(&[]);
    let mut victim = server.raw();
    check(&mut victim, "WATCH w", "+OK\r\n");
    check(&mut victim, "MULTI", "+OK\r\n");
    check(&mut victim, "SET in-multi 1", "+QUEUED\r\n");
    check(&mut victim, "DEBUG PANIC-CONNECTION", "+QUEUED\r\n");
    victim.send(b"EXEC\r\n");
    // EXEC's array header and the SET's reply are dropped with the rest of the EXEC
    // reply; what comes is the error.
    let mut got = Vec::new();
    victim
        .stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let _ = victim.stream.read_to_end(&mut got);
    assert_eq!(String::from_utf8_lossy(&got), PANICKED);
    let mut other = server.raw();
    // The server still locks and writes the keys the transaction held.
    check(&mut other, "SET w 1", "+OK\r\n");
    check(&mut other, "SET in-multi 2", "+OK\r\n");
    check(&mut other, "GET in-multi", "$1\r\n2\r\n");
}

/// A connection to `port` on 127.0.0.1 from another loopback address: not the loopback
/// client protected mode lets in (Redis accepts exactly 127.0.0.1 and ::1).
fn connect_from_127_0_0_2(port: u16) -> std::net::TcpStream {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        let stream = socket
            .connect(format!("127.0.0.1:{port}").parse().unwrap())
            .await
            .unwrap();
        stream.into_std().unwrap()
    })
}

fn ping_from_elsewhere(port: u16) -> String {
    let mut stream = connect_from_127_0_0_2(port);
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let _ = stream.write_all(b"PING\r\n");
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(n) = stream.read(&mut chunk) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&chunk[..n]);
        if got.ends_with(b"\r\n") {
            break;
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn protected_mode_turns_away_clients_from_other_addresses() {
    let server = TestServer::start(&["--protected-mode", "yes"]);
    let denied = ping_from_elsewhere(server.port);
    assert!(
        denied.starts_with("-DENIED Redis is running in protected mode"),
        "{denied}"
    );
    let mut local = server.raw();
    check(&mut local, "PING", "+PONG\r\n");
    // A password for the default user lets everyone connect (and AUTH).
    check(&mut local, "CONFIG SET requirepass secret", "+OK\r\n");
    let answered = ping_from_elsewhere(server.port);
    assert!(answered.starts_with("-NOAUTH"), "{answered}");
    check(&mut local, "AUTH secret", "+OK\r\n");
    local.expect(&[b"CONFIG", b"SET", b"requirepass", b""], b"+OK\r\n");
    check(&mut local, "CONFIG SET protected-mode no", "+OK\r\n");
    assert_eq!(ping_from_elsewhere(server.port), "+PONG\r\n");
}
