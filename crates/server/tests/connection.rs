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

/// INFO stats' `busy_poll_window_us`: how long the server polls after input now.
fn poll_window_us(con: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(con).expect("INFO");
    info.lines()
        .find_map(|line| line.strip_prefix("busy_poll_window_us:"))
        .expect("busy_poll_window_us")
        .trim()
        .parse()
        .expect("a number")
}

#[test]
fn busy_polling_stops_for_a_client_that_pauses_and_resumes_for_one_that_does_not() {
    use latch_server::busy_poll::{CREDIT_MAX, PROBE_EVERY};
    let server = TestServer::start(&["--busy-poll-us", "2000"]);
    let mut con = server.client();
    assert_eq!(poll_window_us(&mut con), 2000);
    let ping = |con: &mut redis::Connection| {
        let pong: String = redis::cmd("PING").query(con).expect("PING");
        assert_eq!(pong, "PONG");
    };
    // A client that pauses 10 ms between requests: every 2 ms window passes without input.
    // Polling through each would take a fifth of a core; once its credit is spent the
    // server stops polling, and probes none (its sleeps last more than 4 windows).
    let pause = std::time::Duration::from_millis(10);
    for _ in 0..CREDIT_MAX + 8 {
        ping(&mut con);
        std::thread::sleep(pause);
    }
    let before = cpu_ticks(server.pid());
    let started = std::time::Instant::now();
    for _ in 0..100 {
        ping(&mut con);
        std::thread::sleep(pause);
    }
    let share = (cpu_ticks(server.pid()) - before) as f64 / 100.0 / started.elapsed().as_secs_f64();
    assert!(
        share < 0.1,
        "pausing client: the server used {share:.3} of a core"
    );
    assert_eq!(poll_window_us(&mut con), 0);

    // Requests back to back: wake-ups that come soon after the sleep start a probe, which
    // catches the next request, and polling is on again: after PROBE_EVERY of them on a
    // quiet machine; on a loaded one a probe may miss, and the next comes later.
    let mut requests = 0;
    while poll_window_us(&mut con) != 2000 {
        ping(&mut con);
        requests += 2;
        assert!(requests < 200 * PROBE_EVERY, "still not polling");
    }
    // No lower bound here: on a loaded machine a wake-up of the pausing phase can come
    // within the near-miss bound (the server went to sleep late) and count toward the
    // probe, so it may come before PROBE_EVERY back-to-back requests. The spacing of
    // probes is checked with exact ticks by busy_poll.rs's unit tests.
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
