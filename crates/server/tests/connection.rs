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

/// The server's CPU time so far (user + system), in clock ticks (/proc/PID/stat).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // Fields after the command name (which is in parentheses): state is field 3, so utime
    // (14) and stime (15) are the 12th and 13th after it.
    let after_name = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = after_name.split(' ').collect();
    fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
}

/// Share of one core the server used over `period` (1.0: a whole core).
fn core_share(pid: u32, period: std::time::Duration) -> f64 {
    let ticks_per_second = 100.0; // USER_HZ, 100 on Linux
    let before = cpu_ticks(pid);
    std::thread::sleep(period);
    (cpu_ticks(pid) - before) as f64 / ticks_per_second / period.as_secs_f64()
}

#[test]
fn busy_polling_polls_after_input_and_sleeps_when_idle() {
    let server = TestServer::start(&["--busy-poll-us", "1000000"]);
    let mut raw = server.raw();
    raw.expect(
        &[b"CONFIG", b"GET", b"busy-poll-us"],
        b"*2\r\n$12\r\nbusy-poll-us\r\n$7\r\n1000000\r\n",
    );
    // A one-second window after this PING: the runtime keeps polling, using its core (a
    // loaded machine gives it less than all of it, never as little as a tenth).
    raw.expect(&[b"PING"], b"+PONG\r\n");
    let polling = core_share(server.pid(), std::time::Duration::from_millis(500));
    assert!(polling > 0.1, "polling used {polling:.2} of a core");

    // A 1 ms window: after it the server sleeps until the next request.
    raw.expect(&[b"CONFIG", b"SET", b"busy-poll-us", b"1000"], b"+OK\r\n");
    raw.expect(&[b"PING"], b"+PONG\r\n");
    std::thread::sleep(std::time::Duration::from_millis(100));
    let idle = core_share(server.pid(), std::time::Duration::from_millis(1000));
    assert!(idle < 0.05, "idle server used {idle:.2} of a core");
    raw.expect(&[b"PING"], b"+PONG\r\n");

    raw.send(&common::encode(&[
        b"CONFIG",
        b"SET",
        b"busy-poll-us",
        b"-1",
    ]));
    let refused = common::read_line(&mut raw);
    assert!(
        refused.starts_with("-ERR CONFIG SET failed")
            && refused.contains("must be between 0 and 1000000 inclusive"),
        "{refused}"
    );
}
