//! Durability: the AOF and RDB snapshots across restarts and crashes, torn and corrupted
//! files, `restart-delay`, and DUMP/RESTORE.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::TestServer;
use latch_testkit::{Program, Server};
use redis::Commands;

const AOF_ALWAYS: &[&str] = &[
    "--appendonly",
    "yes",
    "--appendfsync",
    "always",
    "--save",
    "",
];

fn incr_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir.join("appendonlydir"))
        .expect("appendonlydir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .collect();
    files.sort();
    files
}

/// Runs latch-server on `dir` expecting it to refuse to start; returns its output.
fn start_expecting_failure(dir: &Path, extra: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_latch-server"))
        .args([
            "--port",
            "0",
            "--unixsocket",
            "latch.sock",
            "--dir",
            dir.to_str().unwrap(),
        ])
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .expect("run latch-server");
    assert!(!output.status.success(), "the server started on a bad file");
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn acknowledged_writes_survive_sigkill_and_nothing_is_half_applied() {
    acknowledged_writes_survive_sigkill(false);
}

/// With one worker, `always` syncs on the worker itself (with several, on the fsync thread).
#[test]
fn acknowledged_writes_survive_sigkill_on_a_single_worker() {
    acknowledged_writes_survive_sigkill(true);
}

fn acknowledged_writes_survive_sigkill(one_core: bool) {
    let server = TestServer::start_with(one_core, None, AOF_ALWAYS);
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..6)
        .map(|writer| {
            let url = server.url();
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
                let mut acked = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let step = acked + 1;
                    let result: redis::RedisResult<()> = match writer % 3 {
                        // A counter: its final value is exactly the acknowledged count, or
                        // one more (a write in flight at the kill).
                        0 => conn.incr(format!("counter:{writer}"), 1),
                        // A transaction of two keys: both or neither after the crash.
                        1 => redis::pipe()
                            .atomic()
                            .set(format!("tx:{writer}:{step}:a"), step)
                            .set(format!("tx:{writer}:{step}:b"), step)
                            .query(&mut conn),
                        // A script writing two keys: both or neither.
                        _ => redis::Script::new(
                            "redis.call('set', KEYS[1], ARGV[1]); redis.call('set', KEYS[2], ARGV[1])",
                        )
                        .key(format!("lua:{writer}:{step}:a"))
                        .key(format!("lua:{writer}:{step}:b"))
                        .arg(step)
                        .invoke(&mut conn),
                    };
                    if result.is_err() {
                        break;
                    }
                    acked = step;
                }
                (writer, acked)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    let dir = server.kill_keep_files();
    stop.store(true, Ordering::Relaxed);
    let acked: Vec<(usize, u64)> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    let server = TestServer::start_with(one_core, Some(&dir), AOF_ALWAYS);
    let mut conn = server.client();
    for (writer, acked) in acked {
        assert!(acked > 0, "writer {writer} got nothing acknowledged");
        match writer % 3 {
            0 => {
                let value: u64 = conn.get(format!("counter:{writer}")).unwrap();
                assert!(
                    value == acked || value == acked + 1,
                    "counter {writer}: {value} after {acked} acknowledged increments"
                );
            }
            kind => {
                let prefix = if kind == 1 { "tx" } else { "lua" };
                // Every acknowledged step, and one in flight, whole or absent.
                for step in 1..=acked + 1 {
                    let a: Option<u64> = conn.get(format!("{prefix}:{writer}:{step}:a")).unwrap();
                    let b: Option<u64> = conn.get(format!("{prefix}:{writer}:{step}:b")).unwrap();
                    assert_eq!(a, b, "{prefix} {writer} step {step} half applied");
                    if step <= acked {
                        assert_eq!(a, Some(step), "{prefix} {writer} step {step} lost");
                    }
                }
            }
        }
    }
}

#[test]
fn a_px_key_keeps_its_remaining_ttl_across_restarts() {
    for extra in [AOF_ALWAYS, &["--save", ""][..]] {
        let server = TestServer::start(extra);
        let mut conn = server.client();
        let _: () = redis::cmd("SET")
            .arg("lock")
            .arg("token")
            .arg("NX")
            .arg("PX")
            .arg(5000)
            .query(&mut conn)
            .unwrap();
        if !extra.contains(&"--appendonly") {
            let _: () = redis::cmd("SAVE").query(&mut conn).unwrap();
        }
        std::thread::sleep(Duration::from_millis(1200));
        let dir = server.kill_keep_files();
        let server = TestServer::start_in(Some(&dir), extra);
        let mut conn = server.client();
        let pttl: i64 = conn.pttl("lock").unwrap();
        assert!(
            (1000..=3850).contains(&pttl),
            "remaining TTL {pttl} after 1.2 s of a 5 s lock ({extra:?})"
        );
        let token: String = conn.get("lock").unwrap();
        assert_eq!(token, "token");
    }
}

#[test]
fn rewrite_under_load_loses_nothing() {
    let server = TestServer::start(&["--appendonly", "yes", "--save", ""]);
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|writer| {
            let url = server.url();
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
                let mut count = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let _: u64 = conn.incr(format!("n:{writer}"), 1).unwrap();
                    let _: () = conn.set(format!("k:{writer}:{count}"), count).unwrap();
                    count += 1;
                }
                (writer, count)
            })
        })
        .collect();
    let mut conn = server.client();
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(150));
        let reply: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
        assert!(reply.contains("rewriting"), "{reply}");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let info: String = redis::cmd("INFO")
                .arg("persistence")
                .query(&mut conn)
                .unwrap();
            if info.contains("aof_rewrite_in_progress:0") {
                break;
            }
            assert!(Instant::now() < deadline, "rewrite never finished");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let counts: Vec<(usize, u64)> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    let info: String = redis::cmd("INFO")
        .arg("persistence")
        .query(&mut conn)
        .unwrap();
    assert!(info.contains("aof_rewrites:3"), "{info}");
    assert!(info.contains("aof_last_bgrewrite_status:ok"), "{info}");
    // One base and one incremental file after the rewrites.
    let dir = server.kill_keep_files();
    assert_eq!(incr_files(&dir).len(), 1);
    let server = TestServer::start_in(Some(&dir), &["--appendonly", "yes", "--save", ""]);
    let mut conn = server.client();
    for (writer, count) in counts {
        let n: u64 = conn.get(format!("n:{writer}")).unwrap();
        assert_eq!(n, count, "writer {writer}");
        let last: u64 = conn.get(format!("k:{writer}:{}", count - 1)).unwrap();
        assert_eq!(last, count - 1);
    }
    let keys: u64 = redis::cmd("DBSIZE").query(&mut conn).unwrap();
    assert!(keys > 3);
}

#[test]
fn a_torn_tail_is_cut_and_a_corrupted_middle_refuses_to_start() {
    let server = TestServer::start(AOF_ALWAYS);
    let mut conn = server.client();
    for i in 0..20 {
        let _: () = conn.set(format!("key:{i}"), i).unwrap();
    }
    let dir = server.kill_keep_files();
    let incr = incr_files(&dir).pop().unwrap();
    let data = std::fs::read(&incr).unwrap();
    // A crash in the middle of writing the last command.
    std::fs::write(&incr, &data[..data.len() - 5]).unwrap();
    let server = TestServer::start_in(Some(&dir), AOF_ALWAYS);
    let mut conn = server.client();
    let present: Vec<Option<u64>> = (0..20)
        .map(|i| conn.get(format!("key:{i}")).unwrap())
        .collect();
    assert!(present[..19].iter().all(Option::is_some), "{present:?}");
    assert_eq!(present[19], None, "the torn command was not cut");
    // The server keeps logging after the cut: new writes survive the next restart.
    let _: () = conn.set("after", 1).unwrap();
    let dir = server.kill_keep_files();
    let log = std::fs::read_to_string(dir.join("stderr.log")).unwrap();
    assert!(log.contains("aof-load-truncated"), "{log}");
    let server = TestServer::start_in(Some(&dir), AOF_ALWAYS);
    let mut conn = server.client();
    let after: u64 = conn.get("after").unwrap();
    assert_eq!(after, 1);
    let dir = server.kill_keep_files();

    // A damaged byte in the middle: refuse to start, naming the file and the offset.
    let incr = incr_files(&dir).pop().unwrap();
    let mut data = std::fs::read(&incr).unwrap();
    let at = data.iter().position(|&b| b == b'$').unwrap() + 40;
    let at = at + data[at..].iter().position(|&b| b == b'$').unwrap();
    data[at] = b'#';
    std::fs::write(&incr, &data).unwrap();
    let output = start_expecting_failure(&dir, AOF_ALWAYS);
    let name = incr.file_name().unwrap().to_string_lossy().into_owned();
    assert!(output.contains("Bad file format"), "{output}");
    assert!(output.contains(&name), "{output}");
    assert!(output.contains("offset"), "{output}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn restart_delay_refuses_writes_after_an_unclean_shutdown_only() {
    let options = ["--restart-delay", "1500", "--save", ""];
    let server = TestServer::start(&options);
    let dir = server.kill_keep_files();
    let server = TestServer::start_in(Some(&dir), &options);
    let mut conn = server.client();
    let refused: redis::RedisResult<()> = conn.set("lock", "me");
    let error = refused.unwrap_err();
    assert_eq!(error.code(), Some("RESTARTDELAY"), "{error:?}");
    let read: Option<String> = conn.get("lock").unwrap();
    assert_eq!(read, None, "reads are served during the delay");
    let info: String = redis::cmd("INFO")
        .arg("persistence")
        .query(&mut conn)
        .unwrap();
    assert!(info.contains("unclean_start:1"), "{info}");
    let left: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("restart_delay_remaining_ms:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    assert!(left > 0 && left <= 1500, "{left}");
    std::thread::sleep(Duration::from_millis(left + 50));
    let _: () = conn.set("lock", "me").unwrap();
    // A clean shutdown: no delay after it.
    drop(conn);
    let dir = server.shutdown_keep_files("");
    let server = TestServer::start_in(Some(&dir), &options);
    let mut conn = server.client();
    let _: () = conn.set("lock", "again").unwrap();
}

#[test]
fn save_bgsave_lastsave_and_the_snapshot_on_shutdown() {
    let server = TestServer::start(&["--save", "3600 1"]);
    let mut conn = server.client();
    let before: i64 = redis::cmd("LASTSAVE").query(&mut conn).unwrap();
    let _: () = conn.set("a", "1").unwrap();
    let _: () = conn.rpush("list", &["x", "y", "z"]).unwrap();
    let _: () = conn.hset("hash", "f", "v").unwrap();
    let _: () = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("#!lua name=lib\nredis.register_function('one', function() return 1 end)")
        .query(&mut conn)
        .unwrap();
    let info: String = redis::cmd("INFO")
        .arg("persistence")
        .query(&mut conn)
        .unwrap();
    assert!(!info.contains("rdb_changes_since_last_save:0"), "{info}");
    std::thread::sleep(Duration::from_millis(1100));
    let started: String = redis::cmd("BGSAVE").query(&mut conn).unwrap();
    assert_eq!(started, "Background saving started");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let last: i64 = redis::cmd("LASTSAVE").query(&mut conn).unwrap();
        if last > before {
            break;
        }
        assert!(Instant::now() < deadline, "BGSAVE never finished");
        std::thread::sleep(Duration::from_millis(20));
    }
    let info: String = redis::cmd("INFO")
        .arg("persistence")
        .query(&mut conn)
        .unwrap();
    assert!(info.contains("rdb_changes_since_last_save:0"), "{info}");
    assert!(info.contains("rdb_last_bgsave_status:ok"), "{info}");
    assert!(Path::new(&server.dir.join("dump.rdb")).exists());
    // Written after the BGSAVE: only the snapshot on SHUTDOWN keeps it.
    let _: () = conn.set("late", "yes").unwrap();
    let refused: redis::RedisResult<()> = redis::cmd("MULTI")
        .query(&mut conn)
        .and_then(|()| redis::cmd("SAVE").query(&mut conn));
    assert!(refused.is_err());
    let _: redis::RedisResult<()> = redis::cmd("DISCARD").query(&mut conn);
    drop(conn);
    let dir = server.shutdown_keep_files("");
    let server = TestServer::start_in(Some(&dir), &["--save", "3600 1"]);
    let mut conn = server.client();
    let late: String = conn.get("late").unwrap();
    assert_eq!(late, "yes");
    let list: Vec<String> = conn.lrange("list", 0, -1).unwrap();
    assert_eq!(list, ["x", "y", "z"]);
    let one: i64 = redis::cmd("FCALL")
        .arg("one")
        .arg(0)
        .query(&mut conn)
        .unwrap();
    assert_eq!(one, 1);
    // SHUTDOWN NOSAVE skips the snapshot.
    let _: () = conn.set("lost", "yes").unwrap();
    drop(conn);
    let dir = server.shutdown_keep_files("NOSAVE");
    let server = TestServer::start_in(Some(&dir), &["--save", "3600 1"]);
    let mut conn = server.client();
    let lost: Option<String> = conn.get("lost").unwrap();
    assert_eq!(lost, None);
}

#[test]
fn appendonly_turned_on_at_runtime_starts_from_the_data() {
    let server = TestServer::start(&["--save", ""]);
    let mut conn = server.client();
    let _: () = conn.set("before", "1").unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("appendonly")
        .arg("yes")
        .query(&mut conn)
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("INFO")
            .arg("persistence")
            .query(&mut conn)
            .unwrap();
        if info.contains("aof_enabled:1") && info.contains("aof_rewrite_in_progress:0") {
            break;
        }
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    let _: () = conn.set("after", "2").unwrap();
    let dir = server.kill_keep_files();
    let server = TestServer::start_in(Some(&dir), &["--appendonly", "yes", "--save", ""]);
    let mut conn = server.client();
    let values: Vec<Option<String>> = redis::cmd("MGET")
        .arg("before")
        .arg("after")
        .query(&mut conn)
        .unwrap();
    assert_eq!(values, [Some("1".into()), Some("2".into())]);
}

#[test]
fn dump_and_restore() {
    let server = TestServer::start(&["--save", ""]);
    let mut conn = server.client();
    let _: () = conn.rpush("list", &["a", "b"]).unwrap();
    let payload: Vec<u8> = redis::cmd("DUMP").arg("list").query(&mut conn).unwrap();
    let busy: redis::RedisResult<()> = redis::cmd("RESTORE")
        .arg("list")
        .arg(0)
        .arg(&payload)
        .query(&mut conn);
    assert_eq!(busy.unwrap_err().code(), Some("BUSYKEY"));
    let _: () = redis::cmd("RESTORE")
        .arg("copy")
        .arg(5000)
        .arg(&payload)
        .query(&mut conn)
        .unwrap();
    let copy: Vec<String> = conn.lrange("copy", 0, -1).unwrap();
    assert_eq!(copy, ["a", "b"]);
    let pttl: i64 = conn.pttl("copy").unwrap();
    assert!((4000..=5000).contains(&pttl), "{pttl}");
    let mut damaged = payload.clone();
    damaged[1] ^= 0x55;
    let error: redis::RedisResult<()> = redis::cmd("RESTORE")
        .arg("bad")
        .arg(0)
        .arg(&damaged)
        .query(&mut conn);
    assert!(
        format!("{:?}", error.unwrap_err()).contains("DUMP payload version or checksum are wrong")
    );
    let missing: Option<Vec<u8>> = redis::cmd("DUMP").arg("nothing").query(&mut conn).unwrap();
    assert_eq!(missing, None);
}

/// As redis-server: with save points, FLUSHALL saves the emptied data set at once, so a
/// server killed before its next save does not bring the flushed keys back.
#[test]
fn flushall_with_save_points_saves_the_empty_data_set() {
    for program in [Program::Redis, Program::Latch] {
        let mut server = Server::start(program, &["--save", "3600 1"]);
        let mut con = redis::Client::open(server.url())
            .and_then(|c| c.get_connection())
            .expect("connect");
        let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
        let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
        let _: () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
        let info: String = redis::cmd("INFO")
            .arg("persistence")
            .query(&mut con)
            .unwrap();
        assert!(
            info.contains("rdb_changes_since_last_save:0"),
            "{program:?}: {info}"
        );
        server.kill();
        server.restart(&[]);
        let mut con = redis::Client::open(server.url())
            .and_then(|c| c.get_connection())
            .expect("connect");
        let size: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
        assert_eq!(size, 0, "{program:?}: the flushed key came back");
    }
}

/// CONFIG SET appendonly yes on a primary that feeds a replica creates the AOF (the
/// replication stream's logging once made the server think the AOF was already on).
#[test]
fn appendonly_can_be_turned_on_while_replicas_are_fed() {
    let primary = Server::start(Program::Latch, &[]);
    let replica = Server::start(
        Program::Latch,
        &["--replicaof", "127.0.0.1", &primary.port.to_string()],
    );
    let mut con = redis::Client::open(primary.url())
        .and_then(|c| c.get_connection())
        .expect("connect");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut con)
            .unwrap();
        if info.contains("connected_slaves:1") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the replica never attached: {info}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("appendonly")
        .arg("yes")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    loop {
        let info: String = redis::cmd("INFO")
            .arg("persistence")
            .query(&mut con)
            .unwrap();
        if info.contains("aof_enabled:1") && info.contains("aof_rewrite_in_progress:0") {
            break;
        }
        assert!(Instant::now() < deadline, "the AOF never came on: {info}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let manifest = primary.dir.join("appendonlydir/appendonly.aof.manifest");
    assert!(
        manifest.exists(),
        "no AOF manifest at {}",
        manifest.display()
    );
    drop(replica);
}

/// Inside EXEC, BGSAVE, BGREWRITEAOF and CONFIG SET appendonly yes are scheduled (Redis'
/// replies), and the cron starts them after the transaction.
#[test]
fn saves_asked_for_inside_exec_are_scheduled() {
    let server = TestServer::start(&[]);
    let mut conn = server.client();
    let persistence = |conn: &mut redis::Connection, field: &str| -> String {
        let info: String = redis::cmd("INFO").arg("persistence").query(conn).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    let wait_for = |conn: &mut redis::Connection, field: &str, value: &str| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while persistence(conn, field) != value {
            assert!(Instant::now() < deadline, "{field} never became {value}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let _: () = conn.set("a", "1").unwrap();
    let replies: Vec<String> = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("b")
        .arg("2")
        .cmd("BGSAVE")
        .cmd("BGREWRITEAOF")
        .query(&mut conn)
        .unwrap();
    assert_eq!(
        replies,
        [
            "OK",
            "Background saving scheduled",
            "Background append only file rewriting scheduled"
        ]
    );
    wait_for(&mut conn, "rdb_changes_since_last_save", "0");
    assert!(server.dir.join("dump.rdb").exists());
    wait_for(&mut conn, "aof_rewrite_scheduled", "0");
    wait_for(&mut conn, "aof_rewrite_in_progress", "0");
    assert_eq!(persistence(&mut conn, "aof_last_bgrewrite_status"), "ok");

    // A BGSAVE while one runs is refused, SCHEDULE or not (as Redis, whose SCHEDULE only
    // waits for an AOF rewrite).
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("rdb-key-save-delay")
        .arg("100000")
        .query(&mut conn)
        .unwrap();
    let started: String = redis::cmd("BGSAVE").query(&mut conn).unwrap();
    assert_eq!(started, "Background saving started");
    for extra in [&[][..], &["SCHEDULE"][..]] {
        let refused: redis::RedisResult<String> = redis::cmd("BGSAVE").arg(extra).query(&mut conn);
        let error = refused.unwrap_err();
        assert_eq!(
            error.detail(),
            Some("Background save already in progress"),
            "{error:?}"
        );
    }
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("rdb-key-save-delay")
        .arg("0")
        .query(&mut conn)
        .unwrap();
    let _: () = redis::cmd("FLUSHALL").query(&mut conn).unwrap();
    wait_for(&mut conn, "rdb_bgsave_in_progress", "0");

    // appendonly yes inside EXEC: the AOF starts after the transaction.
    let _: Vec<String> = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("c")
        .arg("3")
        .cmd("CONFIG")
        .arg("SET")
        .arg("appendonly")
        .arg("yes")
        .query(&mut conn)
        .unwrap();
    wait_for(&mut conn, "aof_enabled", "1");
    wait_for(&mut conn, "aof_rewrite_in_progress", "0");
    let log = std::fs::read_to_string(server.dir.join("stderr.log")).unwrap();
    assert!(
        log.contains("AOF was enabled during a transaction. An AOF background was scheduled"),
        "{log}"
    );
}

/// An RDB file of version 9 holding `body` (a checksum of 0: not checked).
fn rdb_file(body: &[u8]) -> Vec<u8> {
    let mut data = b"REDIS0009\xfe\x00".to_vec();
    data.extend_from_slice(body);
    data.push(0xff);
    data.extend_from_slice(&[0; 8]);
    data
}

#[test]
fn corrupt_containers_are_logged_as_redis_logs_them() {
    // A hash ziplist (type 13) whose ziplist is five bytes of nonsense: the server refuses
    // to start, with the lines Redis' loader writes.
    let dir = std::env::temp_dir().join(format!("latch-test-{}-corrupt-rdb", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("dump.rdb"), rdb_file(b"\x0d\x01h\x05hello")).unwrap();
    let output = start_expecting_failure(&dir, &[]);
    assert!(
        output.contains("-> Hash ziplist integrity check failed."),
        "{output}"
    );
    assert_eq!(
        output
            .matches("Terminating server after rdb file reading failure.")
            .count(),
        1,
        "{output}"
    );

    // Empty collections (old versions wrote some) are skipped, each named.
    std::fs::write(
        dir.join("dump.rdb"),
        rdb_file(b"\x12\x05empty\x00\x00\x02kx\x01v"),
    )
    .unwrap();
    let server = TestServer::start_in(Some(&dir), &["--loglevel", "verbose"]);
    let mut conn = server.client();
    let keys: Vec<String> = conn.keys("*").unwrap();
    assert_eq!(keys, vec!["kx".to_string()]);

    // RESTORE of the same corrupt hash: the client gets Redis' short error, the verbose
    // log the reason.
    let mut payload = b"\x0d\x05hello\x0a\x00".to_vec();
    payload.extend_from_slice(&[0; 8]);
    let _: () = redis::cmd("DEBUG")
        .arg("set-skip-checksum-validation")
        .arg(1)
        .query(&mut conn)
        .unwrap();
    let refused: redis::RedisResult<()> = redis::cmd("RESTORE")
        .arg("h")
        .arg(0)
        .arg(payload)
        .query(&mut conn);
    assert!(
        refused.unwrap_err().to_string().contains("Bad data format"),
        "RESTORE took a corrupt ziplist"
    );
    let dir = server.kill_keep_files();
    let log = std::fs::read_to_string(dir.join("stderr.log")).unwrap();
    assert!(
        log.contains("rdbLoadObject skipping empty key: empty"),
        "{log}"
    );
    assert!(
        log.contains("keys loaded: 1, keys expired: 0, empty keys skipped: 1."),
        "{log}"
    );
    assert_eq!(
        log.matches("- Internal error in RDB reading offset")
            .count(),
        1,
        "{log}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
