//! The gatekeeper's checks, in Redis' words.

mod common;

use std::io::Read;
use std::time::Duration;

use common::TestServer;

#[test]
fn debug_is_refused_unless_enabled() {
    let server = TestServer::start(&["--enable-debug-command", "no"]);
    let mut raw = server.raw();
    raw.expect(
        &[b"DEBUG", b"SLEEP", b"0"],
        b"-ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.\r\n",
    );
    let local = TestServer::start(&["--enable-debug-command", "local"]);
    local.raw().expect(&[b"DEBUG", b"SLEEP", b"0"], b"+OK\r\n");
}

#[test]
fn command_without_subcommand_lists_every_command() {
    let server = TestServer::start(&[]);
    let mut conn = server.client();
    let all: Vec<redis::Value> = redis::cmd("COMMAND").query(&mut conn).unwrap();
    let count: usize = redis::cmd("COMMAND").arg("COUNT").query(&mut conn).unwrap();
    assert_eq!(all.len(), count);
    let mut raw = server.raw();
    raw.expect(
        &[b"COMMAND", b"NOPE"],
        b"-ERR unknown subcommand 'NOPE'. Try COMMAND HELP.\r\n",
    );
    raw.expect(
        &[b"CONFIG"],
        b"-ERR wrong number of arguments for 'config' command\r\n",
    );
    raw.expect(
        &[b"CONFIG", b"GET"],
        b"-ERR wrong number of arguments for 'config|get' command\r\n",
    );
}

#[test]
fn noauth_before_auth_and_passwords_hidden_from_monitor() {
    let server = TestServer::start(&["--requirepass", "hunter2"]);
    let mut watcher = server.raw();
    watcher.expect(&[b"GET", b"k"], b"-NOAUTH Authentication required.\r\n");
    watcher.expect(&[b"AUTH", b"hunter2"], b"+OK\r\n");
    watcher.expect(&[b"MONITOR"], b"+OK\r\n");
    let mut other = server.raw();
    other.expect(&[b"AUTH", b"hunter2"], b"+OK\r\n");
    other.expect(&[b"SET", b"k", b"v"], b"+OK\r\n");
    watcher
        .stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut seen = String::new();
    let mut chunk = [0u8; 4096];
    while !seen.contains("\"SET\" \"k\" \"v\"") {
        let n = watcher.stream.read(&mut chunk).unwrap();
        assert!(n > 0);
        seen.push_str(&String::from_utf8_lossy(&chunk[..n]));
    }
    assert!(seen.contains("\"AUTH\" \"(redacted)\""), "{seen}");
    assert!(!seen.contains("hunter2"), "{seen}");
}

#[test]
fn client_reply_off_skip_on() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    // SKIP drops its own reply and the next one; OFF drops everything until ON, which answers.
    raw.send(b"*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$4\r\nSKIP\r\n*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$1\r\na\r\n");
    assert_eq!(raw.read_n(7), b"$1\r\na\r\n");
    raw.send(b"*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$3\r\nOFF\r\n*1\r\n$4\r\nPING\r\n*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$2\r\nON\r\n");
    assert_eq!(raw.read_n(5), b"+OK\r\n");
    raw.expect(&[b"PING"], b"+PONG\r\n");
}
