//! `latch lock run` and `latch lock status` as a user runs them: real processes, a real server.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use latch_testkit::Server;

const LATCH: &str = env!("CARGO_BIN_EXE_latch");

fn latch(args: &[&str]) -> Output {
    Command::new(LATCH)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run latch")
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("latch-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Three processes started together run their commands one at a time, and the fencing tokens
/// they see grow in the order they ran.
#[test]
fn three_runs_take_turns_with_growing_fencing_tokens() {
    let server = Server::latch(&[]);
    let dir = scratch("turns");
    let log = dir.join("log");
    let script = format!(
        "echo \"start $LATCH_FENCING_TOKEN\" >> {log}; sleep 0.3; echo \"end $LATCH_FENCING_TOKEN\" >> {log}",
        log = log.display()
    );
    let url = server.url();
    let children: Vec<_> = (0..3)
        .map(|_| {
            Command::new(LATCH)
                .args(["lock", "run", "--server", &url, "--name", "turns"])
                .args(["--ttl", "5s", "--wait", "20s", "--", "sh", "-c", &script])
                .stdin(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<(&str, u64)> = text
        .lines()
        .map(|line| {
            let (kind, token) = line.split_once(' ').unwrap();
            (kind, token.parse().unwrap())
        })
        .collect();
    assert_eq!(lines.len(), 6, "{text}");
    let mut last = 0;
    for pair in lines.chunks(2) {
        assert_eq!(pair[0].0, "start", "{text}");
        assert_eq!(pair[1].0, "end", "{text}");
        assert_eq!(pair[0].1, pair[1].1, "one holder at a time:\n{text}");
        assert!(
            pair[0].1 > last,
            "tokens grow in the order the commands ran:\n{text}"
        );
        last = pair[0].1;
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn exit_statuses() {
    let server = Server::latch(&[]);
    let url = server.url();
    let run = |name: &str, extra: &[&str], command: &[&str]| {
        let mut args = vec![
            "lock", "run", "--server", &url, "--name", name, "--ttl", "5s",
        ];
        args.extend_from_slice(extra);
        args.push("--");
        args.extend_from_slice(command);
        latch(&args)
    };
    // The command's own status, and 128 + N for a signal.
    assert_eq!(
        run("a", &[], &["sh", "-c", "exit 7"]).status.code(),
        Some(7)
    );
    assert_eq!(
        run("a", &[], &["sh", "-c", "kill -9 $$"]).status.code(),
        Some(137)
    );
    assert_eq!(
        run("a", &[], &["/no/such/program"]).status.code(),
        Some(127)
    );

    // Held by another: 75 at once without --wait, 75 after the wait with it.
    let port = server.port.to_string();
    let mut holder = Command::new(LATCH)
        .args([
            "-p", &port, "lock", "run", "--name", "held", "--ttl", "5s", "--", "sleep", "3",
        ])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while latch(&["-p", &port, "lock", "status", "held"])
        .status
        .code()
        != Some(0)
    {
        assert!(Instant::now() < deadline, "the holder never took the lock");
        std::thread::sleep(Duration::from_millis(20));
    }
    let started = Instant::now();
    let busy = run("held", &[], &["true"]);
    assert_eq!(busy.status.code(), Some(75));
    assert!(started.elapsed() < Duration::from_secs(2));
    let started = Instant::now();
    assert_eq!(
        run("held", &["--wait", "300ms"], &["true"]).status.code(),
        Some(75)
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    // Waiting long enough gets it once the holder is done.
    assert_eq!(
        run("held", &["--wait", "10s"], &["true"]).status.code(),
        Some(0)
    );
    assert!(holder.wait().unwrap().success());

    // Unreachable servers: 69.
    let nobody = format!(
        "redis://127.0.0.1:{}",
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    );
    let out = latch(&[
        "lock", "run", "--server", &nobody, "--name", "x", "--ttl", "1s", "--", "true",
    ]);
    assert_eq!(out.status.code(), Some(69));
}

/// The lock is taken from under the command (its key overwritten): the command gets SIGTERM,
/// and latch exits 76.
#[test]
fn a_lost_lock_stops_the_command() {
    let server = Server::latch(&[]);
    let dir = scratch("lost");
    let marker = dir.join("terminated");
    let script = format!(
        "trap 'echo terminated > {marker}; exit 0' TERM; while true; do sleep 0.05; done",
        marker = marker.display()
    );
    let started = Instant::now();
    let mut run = Command::new(LATCH)
        .args(["lock", "run", "--server", &server.url(), "--name", "stolen"])
        .args(["--ttl", "900ms", "--grace", "5s", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let port = server.port.to_string();
    let set = latch(&["-p", &port, "SET", "stolen", "someone-else"]);
    assert!(set.status.success(), "{set:?}");
    let status = run.wait().unwrap();
    assert_eq!(status.code(), Some(76));
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(Path::new(&marker).exists(), "the command got SIGTERM");
    let _ = std::fs::remove_dir_all(dir);
}

/// latch itself is paused (SIGSTOP) past the TTL: once resumed it must not go on as if it held
/// the lock; the command is stopped (SIGKILL after the grace when it ignores SIGTERM).
#[test]
fn a_holder_paused_past_its_ttl_stops_the_command() {
    let server = Server::latch(&[]);
    let mut run = Command::new(LATCH)
        .args(["lock", "run", "--server", &server.url(), "--name", "paused"])
        .args(["--ttl", "600ms", "--grace", "200ms", "--"])
        .args(["sh", "-c", "trap '' TERM; while true; do sleep 0.05; done"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    latch_testkit::send_signal(run.id(), libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(1_000));
    // Meanwhile the lock ran out and another process takes it.
    let port = server.port.to_string();
    let other = latch(&[
        "-p", &port, "lock", "run", "--name", "paused", "--ttl", "5s", "--", "true",
    ]);
    assert_eq!(other.status.code(), Some(0));
    latch_testkit::send_signal(run.id(), libc::SIGCONT);
    let status = run.wait().unwrap();
    assert_eq!(status.code(), Some(76));
}

#[test]
fn status_shows_holder_fence_and_ttl() {
    let server = Server::latch(&[]);
    let port = server.port.to_string();
    let free = latch(&["-p", &port, "lock", "status", "report"]);
    assert_eq!(free.status.code(), Some(1));
    let text = String::from_utf8_lossy(&free.stdout);
    assert!(
        text.contains("(free)") && text.contains("never granted"),
        "{text}"
    );

    let script = "latch_status=$($LATCH -p $PORT lock status report); echo \"$latch_status\"; echo \"fence $LATCH_FENCING_TOKEN token $LATCH_LOCK_TOKEN\"";
    let out = Command::new(LATCH)
        .args([
            "-p", &port, "lock", "run", "--name", "report", "--ttl", "30s", "--", "sh", "-c",
            script,
        ])
        .env("LATCH", LATCH)
        .env("PORT", &port)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let last = text.lines().last().unwrap();
    let words: Vec<&str> = last.split(' ').collect();
    let (fence, token) = (words[1], words[3]);
    assert!(text.contains(&format!("holder token   {token}")), "{text}");
    assert!(text.contains(&format!("fencing token  {fence}")), "{text}");
    assert!(
        text.contains("remaining ttl  29.") || text.contains("remaining ttl  30."),
        "{text}"
    );
    assert!(text.contains("held by"), "{text}");
}
