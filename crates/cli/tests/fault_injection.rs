//! Many processes contend for one lock through `latch lock run`, on one Latch server and on
//! three (Redlock), while faults are injected: a holder paused past its TTL (SIGSTOP, then
//! SIGCONT), a lock server killed and restarted (with `appendfsync always`, and without
//! persistence but with `restart-delay`), and a jump of the servers' wall clock.
//!
//! Every holder's command writes to a fenced resource (a separate server, where a script
//! accepts a write only if its fencing token is at least the largest seen) and logs its
//! section there: `begin`, three `write`s, `end`, in the resource's own total order. The
//! checker then asserts:
//! - no two grants share a fencing token;
//! - two holders' sections overlap only when the earlier holder was paused by the test, the
//!   later holder's token is larger, and no write of the earlier holder was accepted after the
//!   later holder's first accepted write (the fenced resource refused them);
//! - sections that do not overlap carry tokens that grow in the order they ran.
//!
//! `cargo test -p latch-cli --test fault_injection -- --nocapture` prints the tally.

use std::collections::{HashMap, HashSet};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use latch_testkit::{send_signal, send_signal_to_group, Server};

const LATCH: &str = env!("CARGO_BIN_EXE_latch");
/// The client the sections and the checker use to talk to the servers: `latch` itself.
const CLIENT: &str = LATCH;
const LOCK: &str = "fi-lock";
const TTL_MS: u64 = 1_000;
const WORKERS: usize = 5;

/// The fenced resource: logs every event, and accepts a write only when its fencing token is
/// at least the largest accepted so far.
const RESOURCE_SCRIPT: &str = r#"
local verdict = 'logged'
if ARGV[1] == 'write' then
    local seen = tonumber(redis.call('GET', KEYS[1]) or '0')
    if tonumber(ARGV[3]) < seen then
        verdict = 'refused'
    else
        redis.call('SET', KEYS[1], ARGV[3])
        verdict = 'accepted'
    end
end
redis.call('RPUSH', KEYS[2], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. ARGV[4] .. ' ' .. verdict)
return verdict
"#;

/// A holder's critical section, run by `latch lock run` with the lock held. `$PPID` is the
/// `latch lock run` process.
const SECTION: &str = r#"
ev() { "$LATCH" -p "$RESOURCE_PORT" EVAL "$RESOURCE_SCRIPT" 2 max-fence events "$1" "$LATCH_LOCK_TOKEN" "$LATCH_FENCING_TOKEN" "$PPID" >/dev/null; }
ev begin
for i in 1 2 3; do sleep 0.05; ev write; done
ev end
"#;

#[derive(Debug, Default)]
struct Tally {
    attempts: usize,
    exit_codes: HashMap<i32, usize>,
    faults: Vec<String>,
    paused_pids: HashSet<u32>,
    /// `latch lock run` processes that exited 76: told that their lock was lost.
    lost_pids: HashSet<u32>,
}

#[derive(Debug, Clone)]
struct Event {
    kind: String,
    token: String,
    fence: u64,
    pid: u32,
    verdict: String,
}

fn resource_events(resource: &Server) -> Vec<Event> {
    let out = Command::new(CLIENT)
        .args([
            "-p",
            &resource.port.to_string(),
            "LRANGE",
            "events",
            "0",
            "-1",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("latch LRANGE");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|line| !line.is_empty())
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            assert_eq!(fields.len(), 5, "event {line:?}");
            Event {
                kind: fields[0].to_string(),
                token: fields[1].to_string(),
                fence: fields[2].parse().expect("fence"),
                pid: fields[3].parse().expect("pid"),
                verdict: fields[4].to_string(),
            }
        })
        .collect()
}

/// The `latch lock run` pid of the holder currently inside its section, if any.
fn current_holder(resource: &Server) -> Option<u32> {
    let events = resource_events(resource);
    let last = events.last()?;
    (last.kind != "end").then_some(last.pid)
}

fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn redis_cmd(server: &Server, args: &[&str]) {
    let out = Command::new(CLIENT)
        .args(["-p", &server.port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("latch");
    assert!(out.status.success(), "{args:?}: {out:?}");
}

/// Runs the contention with faults against `lock_servers`; returns the tally and the events.
fn contend(lock_servers: &mut [Server], resource: &Server) -> (Tally, Vec<Event>) {
    let urls: Vec<String> = lock_servers.iter().map(Server::url).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let running = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (stop, tally, urls, running) =
                (stop.clone(), tally.clone(), urls.clone(), running.clone());
            let resource_port = resource.port.to_string();
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let mut command = Command::new(LATCH);
                    command.args(["lock", "run", "--name", LOCK]);
                    for url in &urls {
                        command.args(["--server", url]);
                    }
                    command
                        .args([
                            "--ttl",
                            &format!("{TTL_MS}ms"),
                            "--wait",
                            "20s",
                            "--grace",
                            "300ms",
                        ])
                        .args(["--", "sh", "-c", SECTION])
                        .env("LATCH", CLIENT)
                        .env("RESOURCE_PORT", &resource_port)
                        .env("RESOURCE_SCRIPT", RESOURCE_SCRIPT)
                        .stdin(Stdio::null())
                        .stderr(Stdio::null());
                    running.fetch_add(1, Ordering::Relaxed);
                    let mut child = command.spawn().expect("run latch lock run");
                    let status = child.wait().expect("wait for latch lock run");
                    running.fetch_sub(1, Ordering::Relaxed);
                    let mut tally = tally.lock().unwrap();
                    tally.attempts += 1;
                    let code = status.code().unwrap_or(-1);
                    *tally.exit_codes.entry(code).or_default() += 1;
                    if code == 76 {
                        tally.lost_pids.insert(child.id());
                    }
                }
            })
        })
        .collect();

    let fault = |text: String| {
        eprintln!("fault: {text}");
        tally.lock().unwrap().faults.push(text);
    };
    let pause_holder = || {
        let deadline = Instant::now() + Duration::from_secs(10);
        let (pid, children) = loop {
            assert!(Instant::now() < deadline, "no holder to pause");
            let Some(pid) = current_holder(resource) else {
                thread::sleep(Duration::from_millis(10));
                continue;
            };
            let children = children_of(pid);
            send_signal(pid, libc::SIGSTOP);
            for child in &children {
                send_signal_to_group(*child, libc::SIGSTOP);
            }
            // Stopped inside its section, or did it end the section just before the signal?
            let finished = resource_events(resource)
                .iter()
                .any(|event| event.pid == pid && event.kind == "end");
            if !finished {
                break (pid, children);
            }
            send_signal(pid, libc::SIGCONT);
            for child in &children {
                send_signal_to_group(*child, libc::SIGCONT);
            }
        };
        tally.lock().unwrap().paused_pids.insert(pid);
        thread::sleep(Duration::from_millis(TTL_MS * 5 / 2));
        send_signal(pid, libc::SIGCONT);
        for child in &children {
            send_signal_to_group(*child, libc::SIGCONT);
        }
        fault(format!(
            "holder {pid} paused (SIGSTOP) inside its section for {} ms",
            TTL_MS * 5 / 2
        ));
    };

    thread::sleep(Duration::from_secs(2));
    pause_holder();
    thread::sleep(Duration::from_secs(2));

    let victim = lock_servers.len() - 1;
    lock_servers[victim].kill();
    lock_servers[victim].restart(&[]);
    fault(format!(
        "lock server {} killed (SIGKILL) and restarted from its AOF (appendfsync always)",
        lock_servers[victim].port
    ));
    thread::sleep(Duration::from_secs(2));

    let delay_ms = (TTL_MS * 2).to_string();
    lock_servers[0].kill();
    lock_servers[0].restart(&["--appendonly", "no", "--restart-delay", &delay_ms]);
    fault(format!(
        "lock server {} killed (SIGKILL) and restarted without its data, with restart-delay {delay_ms} ms",
        lock_servers[0].port
    ));
    thread::sleep(Duration::from_secs(4));

    pause_holder();
    thread::sleep(Duration::from_secs(1));

    // Last: a jump forward makes the server's clock, and with it the floor of its fencing
    // counter, run ahead; a later restart without data on a clock set right would issue
    // smaller tokens (the documented limit of the floor), so nothing restarts after it.
    // Jump the clocks while a holder is inside its section: its lock must still be there
    // afterwards (Redis, which measures TTLs on the wall clock, would expire it at once).
    let deadline = Instant::now() + Duration::from_secs(10);
    let token = loop {
        let events = resource_events(resource);
        match events.last() {
            Some(last) if last.kind != "end" => break last.token.clone(),
            _ => {
                assert!(Instant::now() < deadline, "no holder for the clock jump");
                thread::sleep(Duration::from_millis(5));
            }
        }
    };
    for server in lock_servers.iter() {
        redis_cmd(server, &["DEBUG", "JUMP-CLOCK", "3600000"]);
    }
    let holders_after: Vec<String> = lock_servers
        .iter()
        .map(|server| {
            let out = Command::new(CLIENT)
                .args(["-p", &server.port.to_string(), "GET", LOCK])
                .stdin(Stdio::null())
                .output()
                .expect("latch GET");
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        })
        .collect();
    let still = holders_after.iter().filter(|h| **h == token).count();
    // The section may have ended (and released) between the two reads; then the lock is free
    // or another holder's, never expired under a live holder: check that case by the events.
    let ended = resource_events(resource)
        .iter()
        .any(|e| e.kind == "end" && e.token == token);
    assert!(
        still > lock_servers.len() / 2 || ended,
        "the clock jump expired the lock of a live holder: {holders_after:?} vs {token}"
    );
    fault("wall clock of every lock server jumped 1 h forward during a section".into());
    thread::sleep(Duration::from_secs(3));

    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join().expect("worker");
    }
    assert_eq!(running.load(Ordering::Relaxed), 0);
    let tally = Arc::try_unwrap(tally).unwrap().into_inner().unwrap();
    (tally, resource_events(resource))
}

struct Section {
    token: String,
    fence: u64,
    pid: u32,
    first: usize,
    last: usize,
    first_accepted_write: Option<usize>,
    accepted_writes: Vec<usize>,
}

/// Checks the events; returns the violations (each a sentence) and the number of fenced
/// overlaps (a paused holder overlapped by the next one, its late writes refused).
fn check(events: &[Event], lost: &HashSet<u32>) -> (Vec<String>, usize) {
    let mut sections: Vec<Section> = Vec::new();
    let mut by_token: HashMap<&str, usize> = HashMap::new();
    for (position, event) in events.iter().enumerate() {
        let index = *by_token.entry(&event.token).or_insert_with(|| {
            sections.push(Section {
                token: event.token.clone(),
                fence: event.fence,
                pid: event.pid,
                first: position,
                last: position,
                first_accepted_write: None,
                accepted_writes: Vec::new(),
            });
            sections.len() - 1
        });
        let section = &mut sections[index];
        section.last = position;
        if event.kind == "write" && event.verdict == "accepted" {
            section.first_accepted_write.get_or_insert(position);
            section.accepted_writes.push(position);
        }
    }
    let mut violations = Vec::new();
    let mut seen_fences: HashMap<u64, &str> = HashMap::new();
    for section in &sections {
        if let Some(other) = seen_fences.insert(section.fence, &section.token) {
            violations.push(format!(
                "fencing token {} granted twice ({other} and {})",
                section.fence, section.token
            ));
        }
    }
    let mut fenced_overlaps = 0;
    for (i, x) in sections.iter().enumerate() {
        for y in &sections[i + 1..] {
            let (earlier, later) = if x.fence < y.fence { (x, y) } else { (y, x) };
            // In order: the smaller token's section ended before the larger one's began.
            if earlier.last < later.first {
                continue;
            }
            // Otherwise the smaller token's holder was still going after the larger one began
            // (or began after it): allowed only for a holder told it had lost the lock, whose
            // late writes the fenced resource refused.
            if !lost.contains(&earlier.pid) {
                violations.push(format!(
                    "sections with tokens {} and {} overlap, and holder {} was never told its lock was lost",
                    earlier.fence, later.fence, earlier.pid
                ));
                continue;
            }
            if let Some(cut) = later.first_accepted_write {
                if earlier.accepted_writes.iter().any(|&w| w > cut) {
                    violations.push(format!(
                        "a write of token {} was accepted after token {} had written",
                        earlier.fence, later.fence
                    ));
                    continue;
                }
            }
            fenced_overlaps += 1;
        }
    }
    (violations, fenced_overlaps)
}

fn run_topology(servers: usize) {
    let mut lock_servers: Vec<Server> = (0..servers)
        .map(|_| Server::latch(&["--appendonly", "yes", "--appendfsync", "always"]))
        .collect();
    let resource = Server::latch(&[]);
    redis_cmd(&resource, &["PING"]);
    let (tally, events) = contend(&mut lock_servers, &resource);
    let (violations, fenced_overlaps) = check(&events, &tally.lost_pids);

    let grants = events.iter().filter(|e| e.kind == "begin").count();
    let writes_accepted = events.iter().filter(|e| e.verdict == "accepted").count();
    let writes_refused = events.iter().filter(|e| e.verdict == "refused").count();
    let mut codes: Vec<_> = tally.exit_codes.iter().collect();
    codes.sort();
    eprintln!(
        "fault-injection: {servers} server(s): attempts {}, grants {grants}, faults {}, \
         writes accepted {writes_accepted}, refused {writes_refused}, fenced overlaps \
         {fenced_overlaps}, violations {}; exit codes {codes:?}",
        tally.attempts,
        tally.faults.len(),
        violations.len()
    );
    assert!(violations.is_empty(), "violations: {violations:#?}");
    assert!(grants >= 10, "too few grants to mean anything: {grants}");
    // The paused holders were inside their sections: they woke to a lost lock (exit 76).
    for pid in &tally.paused_pids {
        assert!(
            tally.lost_pids.contains(pid),
            "paused holder {pid} did not exit 76"
        );
    }
    assert_eq!(tally.faults.len(), 5);
}

/// One topology after the other: run side by side they would share the two cores, and the
/// point is the faults, not the load.
#[test]
fn contention_under_faults_on_one_and_three_servers() {
    run_topology(1);
    run_topology(3);
}
