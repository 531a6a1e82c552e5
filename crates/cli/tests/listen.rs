//! `latch SUBSCRIBE/PSUBSCRIBE/SSUBSCRIBE/MONITOR`: the client keeps printing what the
//! server sends until SIGINT, as redis-cli does. Each scenario runs against latch-server
//! and against Debian's redis-server, with `latch`, then with redis-cli: latch's output is
//! the one written here, and byte for byte redis-cli's; both die of the SIGINT.

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use latch_testkit::{send_signal, Program, Server};

const LATCH: &str = env!("CARGO_BIN_EXE_latch");
const TIMEOUT: Duration = Duration::from_secs(10);

/// A client process (started here, stopped by its pid), its stdout collected as it comes.
struct Running {
    child: Child,
    stdout: Arc<Mutex<Vec<u8>>>,
    reader: Option<JoinHandle<()>>,
}

/// How a client process ended.
struct Finished {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// SIGINT with its default action in the child: a shell without job control starts
/// background jobs with SIGINT ignored, and that would be inherited by the client, which
/// (like redis-cli) leaves the disposition it was given.
#[allow(unsafe_code)]
fn default_sigint(command: &mut Command) {
    // SAFETY: signal(2) is async-signal-safe, which is all pre_exec asks for.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
}

impl Running {
    fn start(mut command: Command) -> Running {
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        default_sigint(&mut command);
        let mut child = command.spawn().expect("spawn the client");
        let mut out = child.stdout.take().unwrap();
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&stdout);
        let reader = std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n @ 1..) = out.read(&mut chunk) {
                sink.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });
        Running {
            child,
            stdout,
            reader: Some(reader),
        }
    }

    /// `program -p PORT args...`, stdin empty.
    fn client(program: &str, port: u16, args: &[&str]) -> Running {
        let mut command = Command::new(program);
        command
            .args(["-p", &port.to_string()])
            .args(args)
            .stdin(Stdio::null());
        Running::start(command)
    }

    fn output(&self) -> String {
        String::from_utf8_lossy(&self.stdout.lock().unwrap()).into_owned()
    }

    /// How much has been printed so far (for [`Running::wait_for_since`]).
    fn printed(&self) -> usize {
        self.stdout.lock().unwrap().len()
    }

    /// Waits until stdout contains `text`.
    fn wait_for(&self, text: &str) {
        self.wait_for_since(0, text);
    }

    /// Waits until what was printed after the first `since` bytes contains `text`.
    fn wait_for_since(&self, since: usize, text: &str) {
        let deadline = Instant::now() + TIMEOUT;
        let seen = || {
            let stdout = self.stdout.lock().unwrap();
            String::from_utf8_lossy(&stdout[since..]).contains(text)
        };
        while !seen() {
            assert!(
                Instant::now() < deadline,
                "no {text:?} in the output:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for the process to end by itself.
    fn finish(mut self) -> Finished {
        let deadline = Instant::now() + TIMEOUT;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for the client") {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "the client still runs; its output:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        let mut stderr = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            pipe.read_to_string(&mut stderr).unwrap();
        }
        Finished {
            status,
            stdout: self.output(),
            stderr,
        }
    }

    /// Ctrl-C: SIGINT to the process, which must then end.
    fn interrupt(self) -> Finished {
        send_signal(self.child.id(), libc::SIGINT);
        self.finish()
    }
}

impl Drop for Running {
    /// A failed test leaves no client behind.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn connect(server: &Server) -> redis::Connection {
    redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap()
}

fn query(conn: &mut redis::Connection, args: &[&str]) -> redis::Value {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query(conn)
        .unwrap_or_else(|err| panic!("{args:?}: {err}"))
}

fn integer(conn: &mut redis::Connection, args: &[&str]) -> i64 {
    match query(conn, args) {
        redis::Value::Int(n) => n,
        other => panic!("{args:?}: {other:?}"),
    }
}

/// Waits until `args` (PUBSUB NUMSUB ch, ...) answers `[name, wanted]` or `wanted`: the
/// client's subscription is in place.
fn wait_subscribed(conn: &mut redis::Connection, args: &[&str], wanted: i64) {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let count = match query(conn, args) {
            redis::Value::Int(n) => n,
            redis::Value::Array(items) => match items.last() {
                Some(redis::Value::Int(n)) => *n,
                other => panic!("{args:?}: {other:?}"),
            },
            other => panic!("{args:?}: {other:?}"),
        };
        if count == wanted {
            return;
        }
        assert!(Instant::now() < deadline, "{args:?} stays at {count}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until `conn` is the server's only client: the client of an earlier run is gone
/// (the server notices a closed connection a little later), with its subscriptions.
fn wait_alone(conn: &mut redis::Connection) {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let info: String = redis::cmd("INFO").arg("clients").query(conn).unwrap();
        if info.lines().any(|line| line == "connected_clients:1") {
            return;
        }
        assert!(Instant::now() < deadline, "other clients stay:\n{info}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `scenario` with latch then redis-cli; returns latch's ending after checking that
/// redis-cli's is the same.
fn like_redis_cli(
    server: &Server,
    args: &[&str],
    scenario: impl Fn(&Running, &mut redis::Connection),
) -> Finished {
    let mut endings = Vec::new();
    for program in [LATCH, "redis-cli"] {
        let mut conn = connect(server);
        wait_alone(&mut conn);
        let client = Running::client(program, server.port, args);
        scenario(&client, &mut conn);
        let ended = client.interrupt();
        assert_eq!(
            ended.status.signal(),
            Some(libc::SIGINT),
            "{program} {args:?}: {:?}\n{}",
            ended.status,
            ended.stdout
        );
        endings.push(ended);
    }
    let theirs = endings.pop().unwrap();
    let ours = endings.pop().unwrap();
    assert_eq!(
        ours.stdout, theirs.stdout,
        "{args:?}: latch, then redis-cli"
    );
    assert_eq!(
        ours.stderr, theirs.stderr,
        "{args:?}: latch, then redis-cli"
    );
    ours
}

const MESSAGES: &[(&str, &str)] = &[
    ("ch", "hello world"),
    ("ch2", "a\"b\\"),
    ("ch", ""),
    ("ch", "two\nlines"),
    ("nobody", "lost"),
    ("ch", "bye"),
];

fn publish_all(conn: &mut redis::Connection, publish: &str) {
    for (channel, message) in MESSAGES {
        let receivers = integer(conn, &[publish, channel, message]);
        assert_eq!(receivers, i64::from(*channel != "nobody"), "{channel}");
    }
}

const READING: &str = "Reading messages... (press Ctrl-C to quit)\n";

#[test]
fn subscribe_prints_messages_until_sigint() {
    for program in [Program::Latch, Program::Redis] {
        subscribe_prints_messages_until_sigint_against(&Server::start(program, &[]));
    }
}

fn subscribe_prints_messages_until_sigint_against(server: &Server) {
    let scenario = |client: &Running, conn: &mut redis::Connection| {
        wait_subscribed(conn, &["PUBSUB", "NUMSUB", "ch2"], 1);
        publish_all(conn, "PUBLISH");
        client.wait_for("bye");
    };
    // Piped: one line per element, no banner.
    let raw = "subscribe\nch\n1\nsubscribe\nch2\n2\nmessage\nch\nhello world\nmessage\nch2\na\"b\\\nmessage\nch\n\nmessage\nch\ntwo\nlines\nmessage\nch\nbye\n";
    let readable = [
        READING,
        "1) \"subscribe\"\n2) \"ch\"\n3) (integer) 1\n",
        "1) \"subscribe\"\n2) \"ch2\"\n3) (integer) 2\n",
        "1) \"message\"\n2) \"ch\"\n3) \"hello world\"\n",
        "1) \"message\"\n2) \"ch2\"\n3) \"a\\\"b\\\\\"\n",
        "1) \"message\"\n2) \"ch\"\n3) \"\"\n",
        "1) \"message\"\n2) \"ch\"\n3) \"two\\nlines\"\n",
        "1) \"message\"\n2) \"ch\"\n3) \"bye\"\n",
    ]
    .concat();
    // RESP3 pushes print as RESP2 arrays do.
    for (args, expected) in [
        (&["SUBSCRIBE", "ch", "ch2"][..], raw),
        (&["-3", "SUBSCRIBE", "ch", "ch2"], raw),
        (&["--no-raw", "SUBSCRIBE", "ch", "ch2"], &readable),
        (&["-3", "--no-raw", "subscribe", "ch", "ch2"], &readable),
    ] {
        let ended = like_redis_cli(server, args, scenario);
        assert_eq!(ended.stdout, expected, "{args:?}");
        assert_eq!(ended.stderr, "", "{args:?}");
    }
}

#[test]
fn psubscribe_and_ssubscribe_print_messages_until_sigint() {
    for program in [Program::Latch, Program::Redis] {
        psubscribe_and_ssubscribe_print_messages_until_sigint_against(&Server::start(program, &[]));
    }
}

fn psubscribe_and_ssubscribe_print_messages_until_sigint_against(server: &Server) {
    let patterns = |client: &Running, conn: &mut redis::Connection| {
        wait_subscribed(conn, &["PUBSUB", "NUMPAT"], 2);
        integer(conn, &["PUBLISH", "ch", "one"]);
        integer(conn, &["PUBLISH", "other", "two"]);
        integer(conn, &["PUBLISH", "xyz", "bye"]);
        client.wait_for("bye");
    };
    let ended = like_redis_cli(server, &["PSUBSCRIBE", "c*", "x?z"], patterns);
    assert_eq!(
        ended.stdout,
        "psubscribe\nc*\n1\npsubscribe\nx?z\n2\npmessage\nc*\nch\none\npmessage\nx?z\nxyz\nbye\n"
    );
    let ended = like_redis_cli(
        server,
        &["-3", "--no-raw", "PSUBSCRIBE", "c*", "x?z"],
        patterns,
    );
    assert_eq!(
        ended.stdout,
        [
            READING,
            "1) \"psubscribe\"\n2) \"c*\"\n3) (integer) 1\n",
            "1) \"psubscribe\"\n2) \"x?z\"\n3) (integer) 2\n",
            "1) \"pmessage\"\n2) \"c*\"\n3) \"ch\"\n4) \"one\"\n",
            "1) \"pmessage\"\n2) \"x?z\"\n3) \"xyz\"\n4) \"bye\"\n",
        ]
        .concat()
    );

    let shards = |client: &Running, conn: &mut redis::Connection| {
        wait_subscribed(conn, &["PUBSUB", "SHARDNUMSUB", "sch"], 1);
        integer(conn, &["SPUBLISH", "sch", "shard bye"]);
        client.wait_for("bye");
    };
    let ended = like_redis_cli(server, &["SSUBSCRIBE", "sch"], shards);
    assert_eq!(
        ended.stdout,
        "ssubscribe\nsch\n1\nsmessage\nsch\nshard bye\n"
    );
    let ended = like_redis_cli(server, &["--no-raw", "SSUBSCRIBE", "sch"], shards);
    assert_eq!(
        ended.stdout,
        format!("{READING}1) \"ssubscribe\"\n2) \"sch\"\n3) (integer) 1\n1) \"smessage\"\n2) \"sch\"\n3) \"shard bye\"\n")
    );
}

/// MONITOR lines without what changes from run to run: `1700000000.123456 [0
/// 127.0.0.1:PORT] "set" "k" "v"` becomes `[0 ADDR] "set" "k" "v"` (checking the shape).
fn monitor_lines(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .map(|line| {
            let Some((time, rest)) = line.split_once(" [0 127.0.0.1:") else {
                return line.to_string();
            };
            let (seconds, micros) = time.split_once('.').expect("a timestamp");
            assert!(seconds.bytes().all(|b| b.is_ascii_digit()), "{line}");
            assert!(
                micros.len() == 6 && micros.bytes().all(|b| b.is_ascii_digit()),
                "{line}"
            );
            let (port, command) = rest.split_once("] ").expect("the client's address");
            assert!(port.parse::<u16>().is_ok(), "{line}");
            format!("[0 ADDR] {command}")
        })
        .collect()
}

#[test]
fn monitor_prints_commands_until_sigint() {
    for program in [Program::Latch, Program::Redis] {
        monitor_prints_commands_until_sigint_against(&Server::start(program, &[]));
    }
}

fn monitor_prints_commands_until_sigint_against(server: &Server) {
    let scenario = |client: &Running, conn: &mut redis::Connection| {
        client.wait_for("OK\n");
        query(conn, &["SET", "k", "v w"]);
        integer(conn, &["PUBLISH", "ch", "x\"y"]);
        query(conn, &["ECHO", "bye"]);
        client.wait_for("bye");
    };
    let expected = [
        "OK",
        "[0 ADDR] \"SET\" \"k\" \"v w\"",
        "[0 ADDR] \"PUBLISH\" \"ch\" \"x\\\"y\"",
        "[0 ADDR] \"ECHO\" \"bye\"",
    ];
    for args in [
        &["MONITOR"][..],
        &["--no-raw", "monitor"],
        &["-3", "MONITOR"],
    ] {
        let mut endings = Vec::new();
        // The timestamps and ports differ: compare the lines without them.
        for program in [LATCH, "redis-cli"] {
            let mut conn = connect(server);
            wait_alone(&mut conn);
            let client = Running::client(program, server.port, args);
            scenario(&client, &mut conn);
            let ended = client.interrupt();
            assert_eq!(
                ended.status.signal(),
                Some(libc::SIGINT),
                "{program} {args:?}"
            );
            assert_eq!(ended.stderr, "", "{program} {args:?}");
            endings.push(monitor_lines(&ended.stdout));
        }
        assert_eq!(endings[0], expected, "{args:?}");
        assert_eq!(endings[0], endings[1], "{args:?}: latch, then redis-cli");
    }
}

/// Reading stops at an error reply (status 0, as redis-cli) and at a closed connection
/// ("Error: Server closed the connection", status 1).
#[test]
fn subscribe_ends_when_refused_or_disconnected() {
    for program in [Program::Latch, Program::Redis] {
        subscribe_ends_when_refused_or_disconnected_against(&Server::start(program, &[]));
    }
}

fn subscribe_ends_when_refused_or_disconnected_against(server: &Server) {
    for args in [&["SUBSCRIBE"][..], &["--no-raw", "SUBSCRIBE"]] {
        let mut endings = Vec::new();
        for program in [LATCH, "redis-cli"] {
            let ended = Running::client(program, server.port, args).finish();
            assert_eq!(ended.status.code(), Some(0), "{program} {args:?}");
            endings.push(ended.stdout);
        }
        assert_eq!(endings[0], endings[1], "{args:?}: latch, then redis-cli");
    }
    let ended = Running::client(LATCH, server.port, &["--no-raw", "SUBSCRIBE"]).finish();
    assert_eq!(
        ended.stdout,
        format!("{READING}(error) ERR wrong number of arguments for 'subscribe' command\n")
    );

    for program in [LATCH, "redis-cli"] {
        let mut conn = connect(server);
        wait_alone(&mut conn);
        let client = Running::client(program, server.port, &["SUBSCRIBE", "ch"]);
        wait_subscribed(&mut conn, &["PUBSUB", "NUMSUB", "ch"], 1);
        assert_eq!(integer(&mut conn, &["CLIENT", "KILL", "TYPE", "pubsub"]), 1);
        let ended = client.finish();
        assert_eq!(ended.status.code(), Some(1), "{program}");
        assert_eq!(ended.stdout, "subscribe\nch\n1\n", "{program}");
        assert_eq!(
            ended.stderr, "Error: Server closed the connection\n",
            "{program}"
        );
    }
}

/// At the prompt (a pseudo-terminal from util-linux's `script`), Ctrl-C ends the
/// subscription, not the session: a new connection, the same database, the prompt again.
#[test]
fn ctrl_c_at_the_prompt_ends_only_the_subscription() {
    for program in [Program::Latch, Program::Redis] {
        ctrl_c_at_the_prompt_ends_only_the_subscription_against(&Server::start(program, &[]));
    }
}

fn ctrl_c_at_the_prompt_ends_only_the_subscription_against(server: &Server) {
    let mut conn = connect(server);
    let mut command = Command::new("script");
    // `script` runs the command through $SHELL; dash stays as latch's parent and would
    // take the same SIGINT and re-raise it once latch exits (status 130), so exec.
    command
        .args([
            "-qfec",
            &format!("exec {LATCH} -p {}", server.port),
            "/dev/null",
        ])
        .env("SHELL", "/bin/sh")
        .env("LATCH_HISTFILE", "")
        .stdin(Stdio::piped());
    let mut terminal = Running::start(command);
    let mut keyboard = terminal.child.stdin.take().unwrap();
    let mut type_in = move |keys: &str| {
        use std::io::Write;
        keyboard.write_all(keys.as_bytes()).unwrap();
        keyboard.flush().unwrap();
    };
    let prompt = format!("127.0.0.1:{}[2]> ", server.port);
    terminal.wait_for(&format!("127.0.0.1:{}> ", server.port));
    type_in("SELECT 2\r");
    terminal.wait_for(&prompt);
    let subscribed_at = terminal.printed();
    type_in("SUBSCRIBE ch\r");
    wait_subscribed(&mut conn, &["PUBSUB", "NUMSUB", "ch"], 1);
    assert_eq!(integer(&mut conn, &["PUBLISH", "ch", "hi"]), 1);
    terminal.wait_for_since(subscribed_at, "3) \"hi\"\r\n");
    // The line discipline turns ^C into SIGINT for the foreground process: latch.
    let interrupted_at = terminal.printed();
    type_in("\x03");
    wait_subscribed(&mut conn, &["PUBSUB", "NUMSUB", "ch"], 0);
    // The prompt again, still in database 2 on the new connection.
    terminal.wait_for_since(interrupted_at, &prompt);
    let set_at = terminal.printed();
    type_in("SET k v\r");
    terminal.wait_for_since(set_at, "OK\r\n");
    type_in("quit\r");
    drop(type_in);
    let ended = terminal.finish();
    assert_eq!(ended.status.code(), Some(0), "{}", ended.stdout);
    let screen = &ended.stdout[subscribed_at..];
    assert!(
        screen.contains(
            "Reading messages... (press Ctrl-C to quit)\r\n1) \"subscribe\"\r\n2) \"ch\"\r\n3) (integer) 1\r\n1) \"message\"\r\n2) \"ch\"\r\n3) \"hi\"\r\n"
        ),
        "{screen}"
    );
    assert_eq!(integer(&mut conn, &["EXISTS", "k"]), 0);
    query(&mut conn, &["SELECT", "2"]);
    assert_eq!(integer(&mut conn, &["EXISTS", "k"]), 1);
}
