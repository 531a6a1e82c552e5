//! `latch` as a redis-cli: for the same commands against the same server, its output is
//! byte for byte what Debian's redis-cli prints, raw (piped) and readable (`--no-raw`).

use std::process::{Command, Output, Stdio};

use latch_testkit::Server;

const LATCH: &str = env!("CARGO_BIN_EXE_latch");

fn run(program: &str, port: u16, args: &[&str], stdin: Option<&str>) -> Output {
    let mut command = Command::new(program);
    command
        .args(["-p", &port.to_string()])
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawn");
    if let Some(input) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    child.wait_with_output().expect("wait")
}

fn setup(port: u16) {
    for args in [
        &["RPUSH", "list", "a", "b c", ""][..],
        &["HSET", "h", "f", "v", "g", "w"],
        &["SADD", "s", "one"],
        &["ZADD", "z", "1.5", "m"],
        &["SET", "bin", "a\u{1}\"\\\n\t\u{7f}é"],
    ] {
        assert!(run("redis-cli", port, args, None).status.success());
    }
}

const COMMANDS: &[&[&str]] = &[
    &["SET", "k", "v"],
    &["GET", "k"],
    &["GET", "missing"],
    &["INCRBY", "n", "0"],
    &["GET", "bin"],
    &["LRANGE", "list", "0", "-1"],
    &["LRANGE", "missing", "0", "-1"],
    &["HGETALL", "h"],
    &["SMEMBERS", "s"],
    &["ZSCORE", "z", "m"],
    &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
    &["NOSUCHCOMMAND", "x"],
    &[
        "EVAL",
        "return {1, {2, 'x', {}}, false, {err='inner'}}",
        "0",
    ],
    &["EVAL", "return {1,2,3,4,5,6,7,8,9,10,11}", "0"],
    &[
        "EVAL",
        "redis.setresp(3); return {map={a={1,2}, b='c'}}",
        "0",
    ],
    &["EVAL", "redis.setresp(3); return {double=0.1}", "0"],
    &["EVAL", "redis.setresp(3); return true", "0"],
    &["EVAL", "return redis.error_reply('MY failure')", "0"],
    &["CONFIG", "GET", "maxmemory-policy"],
    &["OBJECT", "ENCODING", "list"],
    &["INFO", "keyspace"],
];

fn compare(server: &Server, extra: &[&str]) {
    for command in COMMANDS {
        let args: Vec<&str> = extra.iter().chain(command.iter()).copied().collect();
        let ours = run(LATCH, server.port, &args, None);
        let theirs = run("redis-cli", server.port, &args, None);
        assert_eq!(
            String::from_utf8_lossy(&ours.stdout),
            String::from_utf8_lossy(&theirs.stdout),
            "stdout of {args:?}"
        );
        assert_eq!(
            ours.status.code(),
            theirs.status.code(),
            "status of {args:?}"
        );
    }
}

#[test]
fn one_shot_output_matches_redis_cli() {
    for server in [Server::latch(&[]), Server::redis(&[])] {
        setup(server.port);
        compare(&server, &[]);
        compare(&server, &["--no-raw"]);
        compare(&server, &["-3"]);
        compare(&server, &["-3", "--no-raw"]);
        compare(&server, &["-n", "3", "--no-raw"]);
    }
}

#[test]
fn lines_from_stdin_match_redis_cli() {
    let server = Server::latch(&[]);
    let input = "SET a 1\nGET a\n\"quoted arg\" x\nSET 'b c' \"\\x41\\n\"\nGET \"b c\"\nGET \"unbalanced\nSELECT 2\nSET x y\nquit\nGET a\n";
    for extra in [&[][..], &["--no-raw"]] {
        let ours = run(LATCH, server.port, extra, Some(input));
        let theirs = run("redis-cli", server.port, extra, Some(input));
        assert_eq!(
            String::from_utf8_lossy(&ours.stdout),
            String::from_utf8_lossy(&theirs.stdout)
        );
    }
}

#[test]
fn connection_errors_and_urls() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = run(LATCH, port, &["PING"], None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("Could not connect to Redis at 127.0.0.1:{port}: Connection refused\n")
    );

    let server = Server::latch(&["--requirepass", "s3cr:t"]);
    let url = format!("redis://:s3cr%3At@127.0.0.1:{}/4", server.port);
    let out = Command::new(LATCH)
        .args(["-u", &url, "SET", "in4", "yes"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "OK\n");
    let out = Command::new(LATCH)
        .args([
            "-p",
            &server.port.to_string(),
            "-a",
            "s3cr:t",
            "-n",
            "4",
            "GET",
            "in4",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "yes\n");
    // A refused AUTH is reported, and the command still goes out (and is refused), as with
    // redis-cli.
    for program in [LATCH, "redis-cli"] {
        let out = Command::new(program)
            .args([
                "-p",
                &server.port.to_string(),
                "-a",
                "wrong",
                "--no-auth-warning",
                "PING",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{program}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.starts_with("AUTH failed: WRONGPASS"),
            "{program}: {stderr}"
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).starts_with("NOAUTH"),
            "{program}: {out:?}"
        );
    }
}

/// The prompt at a terminal (a pseudo-terminal from util-linux's `script`): readable replies,
/// the database in the prompt after SELECT, and the history file.
#[test]
fn interactive_prompt_at_a_terminal() {
    let server = Server::latch(&[]);
    let history = std::env::temp_dir().join(format!("latch-history-{}", std::process::id()));
    let _ = std::fs::remove_file(&history);
    let mut child = Command::new("script")
        .args([
            "-qfec",
            &format!("exec {LATCH} -p {}", server.port),
            "/dev/null",
        ])
        .env("SHELL", "/bin/sh")
        .env("LATCH_HISTFILE", &history)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("script(1) from util-linux");
    let mut stdin = child.stdin.take().unwrap();
    for line in [
        "SET a \"x y\"",
        "GET a",
        "SELECT 3",
        "LRANGE nope 0 -1",
        "quit",
    ] {
        std::thread::sleep(std::time::Duration::from_millis(300));
        use std::io::Write;
        stdin.write_all(format!("{line}\r").as_bytes()).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let screen = String::from_utf8_lossy(&out.stdout);
    let prompt = format!("127.0.0.1:{}> ", server.port);
    assert!(screen.contains(&prompt), "{screen}");
    assert!(screen.contains("\"x y\"\r\n"), "{screen}");
    assert!(
        screen.contains(&format!("127.0.0.1:{}[3]> ", server.port)),
        "{screen}"
    );
    assert!(screen.contains("(empty array)\r\n"), "{screen}");
    let saved = std::fs::read_to_string(&history).unwrap();
    assert!(saved.contains("SET a \"x y\"\nGET a\n"), "{saved}");
    let _ = std::fs::remove_file(&history);
}
