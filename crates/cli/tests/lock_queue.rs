//! `latch lock run --wait` against a server with native locks, as a user runs it: the
//! processes wait in line in the server (LOCK.ACQUIRE ... WAIT), each is granted the lock
//! the moment the one before releases it, in the order they arrived, and a holder killed
//! with SIGKILL is followed as soon as its TTL runs out.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use latch_testkit::Server;
use redis::{Connection, Value};

const LATCH: &str = env!("CARGO_BIN_EXE_latch");

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("latch-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn connect(server: &Server) -> Connection {
    redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap()
}

fn waiters(conn: &mut Connection, name: &str) -> usize {
    let reply: Value = redis::cmd("LOCK.INFO").arg(name).query(conn).unwrap();
    let Value::Array(items) = reply else {
        panic!("LOCK.INFO answered {reply:?}")
    };
    let at = items
        .iter()
        .position(|item| *item == Value::BulkString(b"waiters".to_vec()))
        .expect("LOCK.INFO lists the waiters");
    match &items[at + 1] {
        Value::Array(waiters) => waiters.len(),
        other => panic!("waiters {other:?}"),
    }
}

fn wait_for_waiters(conn: &mut Connection, name: &str, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while waiters(conn, name) != count {
        assert!(Instant::now() < deadline, "{count} waiters never queued");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `latch lock run` of a section that logs `start <n> <unix seconds> <pid>` and `end ...` around
/// `hold` seconds of sleep (bash's clock, so no extra process measures it).
fn section(url: &str, name: &str, ttl: &str, log: &std::path::Path, n: usize, hold: &str) -> Child {
    let script = format!(
        "echo \"start {n} $EPOCHREALTIME $$\" >> {log}; sleep {hold}; echo \"end {n} $EPOCHREALTIME $$\" >> {log}",
        log = log.display()
    );
    Command::new(LATCH)
        .args(["lock", "run", "--server", url, "--name", name])
        .args(["--ttl", ttl, "--wait", "60s", "--", "bash", "-c", &script])
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
}

/// The log's lines as (kind, section, unix seconds).
fn read_log(log: &std::path::Path) -> Vec<(String, usize, f64)> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|line| {
            let parts: Vec<&str> = line.split(' ').collect();
            (
                parts[0].to_string(),
                parts[1].parse().unwrap(),
                parts[2].parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn ten_queued_runs_are_granted_in_order_without_idle_gaps() {
    let server = Server::latch(&[]);
    let url = server.url();
    let mut conn = connect(&server);
    let dir = scratch("queue");
    let log = dir.join("log");
    // Held while the ten line up, so that they arrive one by one.
    let _: () = redis::cmd("SET")
        .arg("q")
        .arg("gate")
        .query(&mut conn)
        .unwrap();
    let mut children = Vec::new();
    for n in 0..10 {
        children.push(section(&url, "q", "5s", &log, n, "0.02"));
        wait_for_waiters(&mut conn, "q", n + 1);
    }
    // `latch lock status` shows the line.
    let status = Command::new(LATCH)
        .args(["lock", "status", "--server", &url, "q"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("holder token   gate"), "{text}");
    assert!(text.contains("waiters        10"), "{text}");
    assert!(
        text.contains("  1. client ") && text.contains(" 10. client "),
        "{text}"
    );
    let _: () = redis::cmd("DEL").arg("q").query(&mut conn).unwrap();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let lines = read_log(&log);
    assert_eq!(lines.len(), 20, "{lines:?}");
    let mut gaps = Vec::new();
    for (n, pair) in lines.chunks(2).enumerate() {
        assert_eq!((pair[0].0.as_str(), pair[0].1), ("start", n), "{lines:?}");
        assert_eq!((pair[1].0.as_str(), pair[1].1), ("end", n), "{lines:?}");
        if n > 0 {
            gaps.push((pair[0].2 - lines[2 * n - 1].2) * 1000.0);
        }
    }
    gaps.sort_by(f64::total_cmp);
    let median = gaps[gaps.len() / 2];
    let worst = gaps[gaps.len() - 1];
    eprintln!("gaps between sections, ms: {gaps:.1?}");
    // Loose bounds, for a shared machine: polling clients leave gaps of tens to hundreds
    // of milliseconds. bench/locks.py measures the figures.
    assert!(median <= 20.0, "median gap {median:.1} ms: {gaps:.1?}");
    assert!(worst <= 100.0, "worst gap {worst:.1} ms: {gaps:.1?}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_next_run_starts_when_a_killed_holders_ttl_runs_out() {
    let server = Server::latch(&[]);
    let url = server.url();
    let mut conn = connect(&server);
    let dir = scratch("killed");
    let log = dir.join("log");
    let mut holder = section(&url, "k", "500ms", &log, 0, "30");
    let started = Instant::now();
    while std::fs::read_to_string(&log).map_or(true, |text| text.is_empty()) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the holder never started"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut next = section(&url, "k", "5s", &log, 1, "0");
    wait_for_waiters(&mut conn, "k", 1);
    holder.kill().unwrap();
    holder.wait().unwrap();
    // When the TTL runs out: PTTL now, on the wall clock.
    let pttl: i64 = redis::cmd("PTTL").arg("k").query(&mut conn).unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(pttl > 0, "the killed holder's lock has a TTL left: {pttl}");
    let expires = now + pttl as f64 / 1000.0;
    assert!(next.wait().unwrap().success());
    let lines = read_log(&log);
    let (_, _, began) = lines
        .iter()
        .find(|(kind, n, _)| kind == "start" && *n == 1)
        .cloned()
        .unwrap();
    let late = (began - expires) * 1000.0;
    eprintln!("the next section started {late:.1} ms after the TTL ran out");
    assert!(late <= 100.0, "started {late:.1} ms after the TTL ran out");
    assert!(late >= -2.0, "started {late:.1} ms before the TTL ran out");
    // The killed holder's command (its own process group) is still sleeping: stop it.
    let text = std::fs::read_to_string(&log).unwrap();
    let pid: i32 = text
        .lines()
        .find(|line| line.starts_with("start 0 "))
        .and_then(|line| line.split(' ').nth(3))
        .and_then(|pid| pid.parse().ok())
        .expect("the holder's pid");
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pid}")])
        .status();
    let _ = std::fs::remove_dir_all(dir);
}

/// Most sections running at once in a log of `start`/`end` lines.
fn most_at_once(lines: &[(String, usize, f64)]) -> usize {
    let mut events: Vec<(f64, i32)> = lines
        .iter()
        .map(|(kind, _, at)| (*at, if kind == "start" { 1 } else { -1 }))
        .collect();
    // An end and a start at the same instant: the end first.
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut now, mut most) = (0, 0);
    for (_, step) in events {
        now += step;
        most = most.max(now);
    }
    most as usize
}

/// `--permits 2`: five runs, never more than two at once and two at once at some point,
/// on Latch (native) and on redis-server (the scripts); `--shared` runs overlap while an
/// exclusive run waits for them all.
#[test]
fn semaphores_and_shared_runs() {
    for (program, label) in [
        (latch_testkit::Program::Latch, "latch"),
        (latch_testkit::Program::Redis, "redis"),
    ] {
        let server = Server::start(program, &[]);
        let url = server.url();
        let dir = scratch(&format!("sem-{label}"));
        let log = dir.join("log");
        let children: Vec<Child> = (0..5)
            .map(|n| {
                let script = format!(
                    "echo \"start {n} $EPOCHREALTIME $$\" >> {log}; sleep 0.2; echo \"end {n} $EPOCHREALTIME $$\" >> {log}",
                    log = log.display()
                );
                Command::new(LATCH)
                    .args(["lock", "run", "--server", &url, "--name", "sem", "--permits", "2"])
                    .args(["--ttl", "5s", "--wait", "60s", "--", "bash", "-c", &script])
                    .stdin(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut child in children {
            assert!(child.wait().unwrap().success(), "{label}");
        }
        let lines = read_log(&log);
        assert_eq!(lines.len(), 10, "{label}: {lines:?}");
        assert_eq!(most_at_once(&lines), 2, "{label}: {lines:?}");
        let _ = std::fs::remove_dir_all(dir);
    }

    let server = Server::latch(&[]);
    let url = server.url();
    let dir = scratch("shared");
    let log = dir.join("log");
    let run = |n: usize, shared: bool, hold: &str| {
        let script = format!(
            "echo \"start {n} $EPOCHREALTIME $$\" >> {log}; sleep {hold}; echo \"end {n} $EPOCHREALTIME $$\" >> {log}",
            log = log.display()
        );
        let mut command = Command::new(LATCH);
        command.args(["lock", "run", "--server", &url, "--name", "rw"]);
        if shared {
            command.arg("--shared");
        }
        command
            .args(["--ttl", "5s", "--wait", "60s", "--", "bash", "-c", &script])
            .stdin(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut conn = connect(&server);
    let readers: Vec<Child> = (0..3).map(|n| run(n, true, "0.3")).collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&log).map_or(0, |text| text.lines().count()) < 3 {
        assert!(
            Instant::now() < deadline,
            "three readers never ran together"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let writer = run(3, false, "0");
    wait_for_waiters(&mut conn, "rw", 1);
    for mut child in readers.into_iter().chain([writer]) {
        assert!(child.wait().unwrap().success());
    }
    let lines = read_log(&log);
    assert_eq!(most_at_once(&lines), 3, "{lines:?}");
    let writer_start = lines
        .iter()
        .find(|(kind, n, _)| kind == "start" && *n == 3)
        .unwrap()
        .2;
    let last_reader_end = lines
        .iter()
        .filter(|(kind, n, _)| kind == "end" && *n < 3)
        .map(|(_, _, at)| *at)
        .fold(0.0, f64::max);
    assert!(writer_start >= last_reader_end, "{lines:?}");
    let _ = std::fs::remove_dir_all(dir);
}

/// `latch lock status` on a semaphore: its holders and their time left, on Latch (taken
/// with LOCK.ACQUIRE ... PERMITS) and on redis-server (the same sorted set, as latch-lock's
/// scripts leave it).
#[test]
fn status_shows_a_semaphores_holders() {
    for program in [latch_testkit::Program::Latch, latch_testkit::Program::Redis] {
        let server = Server::start(program, &[]);
        let mut conn = connect(&server);
        let until = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
            + 60_000;
        for token in ["t1", "t2"] {
            if program == latch_testkit::Program::Latch {
                let _: Value = redis::cmd("LOCK.ACQUIRE")
                    .arg("s")
                    .arg(token)
                    .arg(60_000)
                    .arg("PERMITS")
                    .arg(3)
                    .query(&mut conn)
                    .unwrap();
            } else {
                let _: () = redis::cmd("ZADD")
                    .arg("s")
                    .arg(until)
                    .arg(token)
                    .query(&mut conn)
                    .unwrap();
            }
        }
        let out = Command::new(LATCH)
            .args(["lock", "status", "--server", &server.url(), "s"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{program:?}: {text}");
        assert!(
            text.contains("shared by      2 holders"),
            "{program:?}: {text}"
        );
        assert!(
            text.contains("    t1  ") && text.contains("    t2  "),
            "{program:?}: {text}"
        );
        assert!(
            text.contains("lock \"s\": shared by 2 holders"),
            "{program:?}: {text}"
        );
    }
}
