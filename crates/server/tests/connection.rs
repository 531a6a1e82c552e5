mod common;

use common::TestServer;

#[test]
fn ping_echo_select_and_unknown_command() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(&[b"PING"], b"+PONG\r\n");
    raw.expect(&[b"ping", b"hello"], b"$5\r\nhello\r\n");
    raw.expect(&[b"ECHO", b"a\r\nb"], b"$4\r\na\r\nb\r\n");
    raw.expect(&[b"SELECT", b"16"], b"-ERR DB index is out of range\r\n");
    raw.expect(
        &[b"SELECT", b"x"],
        b"-ERR value is not an integer or out of range\r\n",
    );
    raw.expect(&[b"SELECT", b"15"], b"+OK\r\n");
    raw.expect(
        &[b"NOPE", b"a", b"b"],
        b"-ERR unknown command 'NOPE', with args beginning with: 'a' 'b' \r\n",
    );
    raw.expect(
        &[b"ECHO"],
        b"-ERR wrong number of arguments for 'echo' command\r\n",
    );
    // Inline commands work too, as typed into telnet.
    let got = raw.roundtrip(b"PING\r\n", 7);
    assert_eq!(got, b"+PONG\r\n");
}

#[test]
fn quit_closes_after_ok() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(&[b"QUIT"], b"+OK\r\n");
    assert!(raw.is_closed());
}
