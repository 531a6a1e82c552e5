//! Redis Sentinel (Debian's redis-server 7.0 run as `redis-server <sentinel.conf>
//! --sentinel`) managing Latch servers: Sentinel discovers Latch replicas from the primary's
//! INFO and the other sentinels from hello messages on `__sentinel__:hello`, fails over
//! when a Latch primary is SIGKILLed (promotes a replica, repoints the other one, and turns
//! the restarted old primary into a replica), sends its reconfiguration transaction
//! (`MULTI`, `SLAVEOF`, `CONFIG REWRITE`, `CLIENT KILL TYPE normal|pubsub`, `EXEC`), and
//! kills a script that keeps a primary BUSY with `SCRIPT KILL`.
//!
//! Sentinels watch with `down-after-milliseconds 1000`, so a failover takes a few seconds.
//! Each sentinel runs in a scratch directory of its own, with its `sentinel.conf` (which it
//! rewrites) and its log, `sentinel.log`. When a test fails, the logs of its servers and
//! sentinels are printed.
//!
//! Debugging aid: with `SENTINEL_TESTS_ALL_REDIS=1` in the environment every server these
//! tests would run as Latch runs as redis-server instead, which checks the tests' own
//! expectations against Redis 7.0 (they were written that way and all pass so).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use latch_testkit::{Program, Server};
use redis::{Connection, Value};

const MASTER_NAME: &str = "mymaster";

/// Options of every data server: any of them may become a primary, and Redis' default
/// diskless sync waits 5 seconds for more replicas before it starts a transfer.
const SERVER_ARGS: &[&str] = &["--repl-diskless-sync-delay", "0"];

/// The keys written before a failover.
const KEYS: usize = 100;

/// The program for the servers the test names as Latch: redis-server when
/// `SENTINEL_TESTS_ALL_REDIS=1` (to check the expectations against Redis 7.0).
fn latch() -> Program {
    if std::env::var("SENTINEL_TESTS_ALL_REDIS").is_ok_and(|v| v == "1") {
        Program::Redis
    } else {
        Program::Latch
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("free port")
}

fn scratch_dir(what: &str, port: u16) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "latch-sentinel-test-{}-{what}-{port}-{n}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// The last `lines` lines of `text`.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Polls `probe` every 50 ms until it says done; panics with `what` and the last value it
/// saw after `timeout`. Returns that last value.
fn wait_until<V: Debug>(timeout: Duration, what: &str, mut probe: impl FnMut() -> (bool, V)) -> V {
    let deadline = Instant::now() + timeout;
    loop {
        let (done, value) = probe();
        if done {
            return value;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}; last value: {value:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A process of ours, started with `Command`, stopped (SIGKILL to its own pid) when dropped.
struct Process {
    child: Child,
}

impl Process {
    fn spawn(mut command: Command, log: &Path) -> Process {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("log file");
        command
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone().expect("log file")))
            .stderr(Stdio::from(log));
        Process {
            child: command.spawn().expect("spawn"),
        }
    }

    /// Waits until the process listens on `port`: false when it exited or took too long.
    fn wait_listening(&mut self, port: u16) -> bool {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if latch_testkit::listens_on(self.child.id(), port)
                && TcpStream::connect(("127.0.0.1", port)).is_ok()
            {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // Child::kill is SIGKILL to this child's own pid.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A sentinel: `redis-server <dir>/sentinel.conf --sentinel`, watching `mymaster`.
struct Sentinel {
    port: u16,
    dir: PathBuf,
    process: Option<Process>,
}

impl Sentinel {
    fn start(primary_port: u16) -> Sentinel {
        let mut last_log = String::new();
        for _ in 0..5 {
            let port = free_port();
            let dir = scratch_dir("sentinel", port);
            let conf = dir.join("sentinel.conf");
            std::fs::write(
                &conf,
                format!(
                    "port {port}\n\
                     bind 127.0.0.1\n\
                     dir \"{dir}\"\n\
                     sentinel monitor {MASTER_NAME} 127.0.0.1 {primary_port} 2\n\
                     sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                     sentinel failover-timeout {MASTER_NAME} 5000\n\
                     sentinel parallel-syncs {MASTER_NAME} 1\n",
                    dir = dir.display()
                ),
            )
            .expect("write sentinel.conf");
            let mut command = Command::new(latch_testkit::redis_server_bin());
            command.current_dir(&dir).arg(&conf).arg("--sentinel");
            let mut process = Process::spawn(command, &dir.join("sentinel.log"));
            let mut sentinel = Sentinel {
                port,
                dir,
                process: None,
            };
            if process.wait_listening(port) {
                sentinel.process = Some(process);
                return sentinel;
            }
            drop(process);
            last_log = sentinel.log();
        }
        panic!("sentinel did not start; last log:\n{last_log}");
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("sentinel.log")).unwrap_or_default()
    }

    fn connect(&self) -> Connection {
        let conn = redis::Client::open(format!("redis://127.0.0.1:{}", self.port))
            .unwrap()
            .get_connection()
            .unwrap_or_else(|e| panic!("connect to the sentinel on {}: {e}", self.port));
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        conn
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.process.take();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Flat `name value name value ...` arrays (SENTINEL MASTER, REPLICAS, SENTINELS) as maps.
fn sentinel_maps(conn: &mut Connection, subcommand: &str) -> Vec<BTreeMap<String, String>> {
    redis::cmd("SENTINEL")
        .arg(subcommand)
        .arg(MASTER_NAME)
        .query(conn)
        .unwrap_or_else(|e| panic!("SENTINEL {subcommand} {MASTER_NAME}: {e}"))
}

fn sentinel_master(conn: &mut Connection) -> BTreeMap<String, String> {
    redis::cmd("SENTINEL")
        .arg("MASTER")
        .arg(MASTER_NAME)
        .query(conn)
        .unwrap_or_else(|e| panic!("SENTINEL MASTER {MASTER_NAME}: {e}"))
}

/// `SENTINEL get-master-addr-by-name mymaster`: the primary's port as this sentinel sees it.
fn master_port(conn: &mut Connection) -> u16 {
    let (host, port): (String, String) = redis::cmd("SENTINEL")
        .arg("get-master-addr-by-name")
        .arg(MASTER_NAME)
        .query(conn)
        .expect("SENTINEL get-master-addr-by-name");
    assert_eq!(host, "127.0.0.1");
    port.parse().expect("port")
}

fn connect(server: &Server) -> Connection {
    let conn = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap_or_else(|e| panic!("connect to {:?} on {}: {e}", server.program, server.port));
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    conn
}

fn try_connect(port: u16) -> Option<Connection> {
    let conn = redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .ok()?
        .get_connection()
        .ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    Some(conn)
}

fn info_field(conn: &mut Connection, section: &str, field: &str) -> Option<String> {
    let text: String = redis::cmd("INFO").arg(section).query(conn).ok()?;
    text.lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| *name == field)
        .map(|(_, value)| value.trim_end().to_string())
}

/// ROLE, summarised: `master`, or `slave <host>:<port> <state>`.
fn role(conn: &mut Connection) -> String {
    let reply: Value = match redis::cmd("ROLE").query(conn) {
        Ok(reply) => reply,
        Err(e) => return format!("error: {e}"),
    };
    let Value::Array(items) = &reply else {
        return format!("unexpected ROLE reply {reply:?}");
    };
    let text = |value: &Value| match value {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::SimpleString(text) => text.clone(),
        Value::Int(n) => n.to_string(),
        other => format!("{other:?}"),
    };
    match items.first().map(text).as_deref() {
        Some("master") => "master".to_string(),
        Some("slave") if items.len() >= 4 => format!(
            "slave {}:{} {}",
            text(&items[1]),
            text(&items[2]),
            text(&items[3])
        ),
        _ => format!("unexpected ROLE reply {reply:?}"),
    }
}

fn key(i: usize) -> String {
    format!("key:{i}")
}

fn value(i: usize) -> String {
    format!("value-{i}")
}

fn write_keys(conn: &mut Connection) {
    for i in 0..KEYS {
        redis::cmd("SET")
            .arg(key(i))
            .arg(value(i))
            .query::<()>(conn)
            .unwrap();
    }
}

/// How many of the [`KEYS`] keys the server holds with their values (0 on any error).
fn keys_present(conn: &mut Connection) -> usize {
    let mut mget = redis::cmd("MGET");
    for i in 0..KEYS {
        mget.arg(key(i));
    }
    let Ok(values) = mget.query::<Vec<Option<String>>>(conn) else {
        return 0;
    };
    values
        .iter()
        .enumerate()
        .filter(|(i, v)| v.as_deref() == Some(value(*i).as_str()))
        .count()
}

/// A primary, its replicas and the sentinels watching them. When the test fails, dropping
/// it prints the tail of every log.
struct Group {
    primary: Server,
    replicas: Vec<Server>,
    sentinels: Vec<Sentinel>,
}

impl Group {
    /// A primary of `primary`'s program with replicas of the `replicas` programs (and their
    /// extra options), and three sentinels watching.
    fn start(primary: Program, primary_extra: &[&str], replicas: &[(Program, &[&str])]) -> Group {
        let mut args = SERVER_ARGS.to_vec();
        args.extend_from_slice(primary_extra);
        let primary = Server::start(primary, &args);
        let port = primary.port.to_string();
        let replicas = replicas
            .iter()
            .map(|(program, extra)| {
                let mut args = SERVER_ARGS.to_vec();
                args.extend_from_slice(&["--replicaof", "127.0.0.1", &port]);
                args.extend_from_slice(extra);
                Server::start(*program, &args)
            })
            .collect();
        let sentinels = (0..3).map(|_| Sentinel::start(primary.port)).collect();
        Group {
            primary,
            replicas,
            sentinels,
        }
    }

    /// Every server, primary first.
    fn servers(&self) -> impl Iterator<Item = &Server> {
        std::iter::once(&self.primary).chain(&self.replicas)
    }

    /// Waits until every sentinel lists every replica with flags `slave` and
    /// `master-link-status ok`, and the other two sentinels.
    fn wait_discovery(&self, timeout: Duration) {
        let mut expected_ports: Vec<String> =
            self.replicas.iter().map(|r| r.port.to_string()).collect();
        expected_ports.sort();
        for sentinel in &self.sentinels {
            let mut conn = sentinel.connect();
            let what = format!(
                "sentinel {} to list replicas {expected_ports:?} (flags slave, link ok) \
                 and 2 other sentinels",
                sentinel.port
            );
            wait_until(timeout, &what, || {
                let replicas = sentinel_maps(&mut conn, "REPLICAS");
                let sentinels = sentinel_maps(&mut conn, "SENTINELS");
                let mut ports: Vec<String> = replicas
                    .iter()
                    .filter(|r| {
                        r.get("flags").map(String::as_str) == Some("slave")
                            && r.get("master-link-status").map(String::as_str) == Some("ok")
                            && r.get("ip").map(String::as_str) == Some("127.0.0.1")
                    })
                    .filter_map(|r| r.get("port").cloned())
                    .collect();
                ports.sort();
                let other_sentinels = sentinels.len();
                (
                    ports == expected_ports
                        && replicas.len() == expected_ports.len()
                        && other_sentinels == 2,
                    (replicas, sentinels),
                )
            });
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        for server in self.servers() {
            eprintln!(
                "----- {:?} server on port {} ({}), last lines of server.log:\n{}",
                server.program,
                server.port,
                server.dir.display(),
                tail(&server.log(), 60)
            );
        }
        for sentinel in &self.sentinels {
            eprintln!(
                "----- sentinel on port {} ({}), last lines of sentinel.log:\n{}",
                sentinel.port,
                sentinel.dir.display(),
                tail(&sentinel.log(), 60)
            );
        }
    }
}

#[test]
fn sentinels_discover_latch_replicas_and_each_other() {
    let started = Instant::now();
    let group = Group::start(latch(), &[], &[(latch(), &[]), (latch(), &[])]);
    group.wait_discovery(Duration::from_secs(20));
    for sentinel in &group.sentinels {
        let mut conn = sentinel.connect();
        let master = sentinel_master(&mut conn);
        assert_eq!(
            master.get("flags").map(String::as_str),
            Some("master"),
            "{master:?}"
        );
        assert_eq!(master.get("port"), Some(&group.primary.port.to_string()));
        assert_eq!(
            master.get("num-slaves").map(String::as_str),
            Some("2"),
            "{master:?}"
        );
        assert_eq!(
            master.get("num-other-sentinels").map(String::as_str),
            Some("2"),
            "{master:?}"
        );
        let mut others: Vec<String> = sentinel_maps(&mut conn, "SENTINELS")
            .iter()
            .filter_map(|s| s.get("port").cloned())
            .collect();
        others.sort();
        let mut expected: Vec<String> = group
            .sentinels
            .iter()
            .filter(|s| s.port != sentinel.port)
            .map(|s| s.port.to_string())
            .collect();
        expected.sort();
        assert_eq!(others, expected);
        assert_eq!(master_port(&mut conn), group.primary.port);
    }
    println!("discovery took {:?}", started.elapsed());
}

/// The failover of a SIGKILLed primary: a replica is promoted (replica `preferred`, when
/// given, which gets `replica-priority 10` against the others' default 100), the other
/// follows it with every key, writes work, and (when `restart_old_primary`) the restarted,
/// empty old primary becomes a replica of the new one and gets the keys.
fn failover(
    primary: Program,
    replicas: [Program; 2],
    preferred: Option<usize>,
    restart_old_primary: bool,
) {
    const PREFERRED: &[&str] = &["--replica-priority", "10"];
    let replicas: Vec<(Program, &[&str])> = replicas
        .iter()
        .enumerate()
        .map(|(i, program)| {
            let extra: &[&str] = if preferred == Some(i) { PREFERRED } else { &[] };
            (*program, extra)
        })
        .collect();
    let began = Instant::now();
    let mut group = Group::start(primary, &[], &replicas);
    let old_port = group.primary.port;
    let mut primary_conn = connect(&group.primary);
    for replica in &group.replicas {
        let mut conn = connect(replica);
        wait_until(Duration::from_secs(10), "master_link_status:up", || {
            let status = info_field(&mut conn, "replication", "master_link_status");
            (status.as_deref() == Some("up"), status)
        });
    }
    write_keys(&mut primary_conn);
    let acked: i64 = redis::cmd("WAIT")
        .arg(2)
        .arg(2000)
        .query(&mut primary_conn)
        .unwrap();
    assert_eq!(acked, 2, "WAIT 2 2000");
    group.wait_discovery(Duration::from_secs(20));
    drop(primary_conn);
    println!(
        "{:?}: the group is up, the keys written and the sentinels ready",
        began.elapsed()
    );

    let mut sentinel_conn = group.sentinels[0].connect();
    let killed = Instant::now();
    group.primary.kill();
    let new_port = wait_until(
        Duration::from_secs(20),
        "SENTINEL get-master-addr-by-name to change",
        || {
            let port = master_port(&mut sentinel_conn);
            (port != old_port, port)
        },
    );
    println!(
        "get-master-addr-by-name switched from {old_port} to {new_port} {:?} after the SIGKILL",
        killed.elapsed()
    );
    let (promoted, other): (&Server, &Server) =
        match group.replicas.iter().position(|r| r.port == new_port) {
            Some(0) => (&group.replicas[0], &group.replicas[1]),
            Some(_) => (&group.replicas[1], &group.replicas[0]),
            None => panic!("sentinel promoted port {new_port}, not one of the replicas"),
        };
    if let Some(i) = preferred {
        assert_eq!(
            promoted.port, group.replicas[i].port,
            "sentinel did not promote the replica with the best replica-priority"
        );
    }
    println!(
        "promoted: {:?} on {new_port}; the other replica: {:?} on {}",
        promoted.program, other.program, other.port
    );

    let mut new_conn = connect(promoted);
    assert_eq!(role(&mut new_conn), "master");
    assert_eq!(keys_present(&mut new_conn), KEYS, "keys on the new primary");

    // The sentinels' reconfiguration ends with CLIENT KILL TYPE normal, which may close any
    // connection opened before it: every probe below connects afresh.
    let expected_role = format!("slave 127.0.0.1:{new_port} connected");
    wait_until(
        Duration::from_secs(10),
        "the other replica to follow the new primary with every key",
        || {
            let Some(mut conn) = try_connect(other.port) else {
                return (false, ("no connection".to_string(), None, 0));
            };
            let role = role(&mut conn);
            let link = info_field(&mut conn, "replication", "master_link_status");
            let n = keys_present(&mut conn);
            (
                role == expected_role && link.as_deref() == Some("up") && n == KEYS,
                (role, link, n),
            )
        },
    );

    println!(
        "{:?}: the other replica follows the new primary with every key",
        began.elapsed()
    );

    let mut new_conn = connect(promoted);
    redis::cmd("SET")
        .arg("after-failover")
        .arg("yes")
        .query::<()>(&mut new_conn)
        .expect("a write to the new primary");
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(2000)
        .query(&mut new_conn)
        .unwrap();
    assert_eq!(acked, 1, "WAIT 1 2000 on the new primary");
    let after: Option<String> = redis::cmd("GET")
        .arg("after-failover")
        .query(&mut connect(other))
        .unwrap();
    assert_eq!(
        after.as_deref(),
        Some("yes"),
        "the write on the other replica"
    );
    for sentinel in &group.sentinels {
        let mut conn = sentinel.connect();
        wait_until(
            Duration::from_secs(10),
            "every sentinel to name the new primary",
            || {
                let port = master_port(&mut conn);
                (port == new_port, port)
            },
        );
    }

    println!(
        "{:?}: every sentinel names the new primary",
        began.elapsed()
    );
    if !restart_old_primary {
        return;
    }
    // The old primary comes back empty (no persistence) on its port; the sentinels turn it
    // into a replica of the primary they name. (Usually the new one; on a loaded machine a
    // sentinel may find the new primary slow to answer in its first second and fail over
    // once more, which is Sentinel doing its job: the primary named now is the one.)
    let restarted = Instant::now();
    group.primary.restart(&[]);
    let mut sentinel = group.sentinels[0].connect();
    wait_until(
        Duration::from_secs(30),
        "the restarted old primary to become a replica of the new one with every key",
        || {
            let Some(mut conn) = try_connect(old_port) else {
                return (false, ("no connection".to_string(), None, 0, None));
            };
            let named = master_port(&mut sentinel);
            let expected_role = format!("slave 127.0.0.1:{named} connected");
            let role = role(&mut conn);
            let link = info_field(&mut conn, "replication", "master_link_status");
            let n = keys_present(&mut conn);
            let after: Option<String> = redis::cmd("GET")
                .arg("after-failover")
                .query(&mut conn)
                .unwrap_or(None);
            (
                role == expected_role
                    && link.as_deref() == Some("up")
                    && n == KEYS
                    && after.as_deref() == Some("yes"),
                (role, link, n, after),
            )
        },
    );
    println!(
        "the restarted old primary followed the new one {:?} after its restart",
        restarted.elapsed()
    );
}

#[test]
fn sigkill_of_a_latch_primary_fails_over() {
    let started = Instant::now();
    failover(latch(), [latch(), latch()], None, true);
    println!("test took {:?}", started.elapsed());
}

#[test]
fn mixed_group_with_a_redis_server_replica() {
    let started = Instant::now();
    // redis-server promoted: the Latch replica follows it, and the restarted Latch primary
    // becomes its replica.
    failover(latch(), [latch(), Program::Redis], Some(1), true);
    // Latch promoted: the redis-server replica follows it.
    failover(latch(), [latch(), Program::Redis], Some(0), false);
    println!("test took {:?}", started.elapsed());
}

/// Reads one complete RESP reply from `reader` and returns its raw text.
fn read_reply(reader: &mut impl BufRead) -> std::io::Result<String> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("connection closed after {line:?}"),
        ));
    }
    let mut text = line.clone();
    let body = line.trim_end();
    match body.as_bytes().first() {
        Some(b'*') | Some(b'>') | Some(b'~') => {
            let n: i64 = body[1..].parse().unwrap_or(0);
            for _ in 0..n.max(0) {
                text.push_str(&read_reply(reader)?);
            }
        }
        Some(b'%') => {
            let n: i64 = body[1..].parse().unwrap_or(0);
            for _ in 0..(2 * n.max(0)) {
                text.push_str(&read_reply(reader)?);
            }
        }
        Some(b'$') | Some(b'=') | Some(b'!') => {
            let n: i64 = body[1..].parse().unwrap_or(-1);
            if n >= 0 {
                let mut bytes = vec![0u8; n as usize + 2];
                reader.read_exact(&mut bytes)?;
                text.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
        _ => {}
    }
    Ok(text)
}

/// A raw connection: commands as inline text in, raw replies out.
struct Raw {
    reader: BufReader<TcpStream>,
}

impl Raw {
    fn connect(port: u16) -> Raw {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        Raw {
            reader: BufReader::new(stream),
        }
    }

    fn send(&mut self, commands: &[&[&str]]) {
        let mut request = String::new();
        for args in commands {
            request.push_str(&format!("*{}\r\n", args.len()));
            for arg in *args {
                request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
            }
        }
        self.reader
            .get_mut()
            .write_all(request.as_bytes())
            .expect("send");
    }

    fn reply(&mut self) -> String {
        read_reply(&mut self.reader).unwrap_or_else(|e| panic!("read a reply: {e}"))
    }

    fn call(&mut self, args: &[&str]) -> String {
        self.send(&[args]);
        self.reply()
    }

    /// Whether the server closed this connection (end of file or a reset within 5 s, not
    /// a timeout).
    fn closed_by_server(&mut self) -> Result<(), String> {
        let mut byte = [0u8; 1];
        match self.reader.read(&mut byte) {
            Ok(0) => Ok(()),
            Ok(_) => Err(format!("read {:?} instead of end of file", byte[0] as char)),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(format!("still open: {e}")),
        }
    }
}

/// A server started by hand with a config file as its first argument, as Sentinel's
/// CONFIG REWRITE needs one (the test kit passes options on the command line only).
struct ConfiguredServer {
    program: Program,
    port: u16,
    dir: PathBuf,
    conf: PathBuf,
    process: Option<Process>,
}

impl ConfiguredServer {
    fn start(program: Program) -> ConfiguredServer {
        let bin = match program {
            Program::Latch => latch_testkit::latch_server_bin().to_path_buf(),
            Program::Redis => latch_testkit::redis_server_bin(),
        };
        let mut last_log = String::new();
        for _ in 0..5 {
            let port = free_port();
            let dir = scratch_dir("configured", port);
            let conf = dir.join("server.conf");
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndir \"{}\"\nsave \"\"\nrepl-diskless-sync-delay 0\n",
                    dir.display()
                ),
            )
            .expect("write server.conf");
            let mut command = Command::new(&bin);
            command.current_dir(&dir).arg(&conf);
            let mut process = Process::spawn(command, &dir.join("server.log"));
            let mut server = ConfiguredServer {
                program,
                port,
                dir,
                conf,
                process: None,
            };
            if process.wait_listening(port) {
                server.process = Some(process);
                return server;
            }
            drop(process);
            last_log = server.log();
        }
        panic!("{program:?} server with a config file did not start; last log:\n{last_log}");
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }
}

impl Drop for ConfiguredServer {
    fn drop(&mut self) {
        self.process.take();
        if std::thread::panicking() {
            eprintln!(
                "----- {:?} server with {} on port {}, last lines of server.log:\n{}",
                self.program,
                self.conf.display(),
                self.port,
                tail(&self.log(), 60)
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// What a sentinel sends to reconfigure a server (sentinelSendSlaveOf in Redis 7.0's
/// sentinel.c), pipelined in one write as hiredis sends it, against a server of `program`
/// with a config file; the primary it is pointed at is Latch.
fn reconfiguration_transaction(program: Program) {
    let primary = Server::start(latch(), SERVER_ARGS);
    redis::cmd("SET")
        .arg("from-the-primary")
        .arg("1")
        .query::<()>(&mut connect(&primary))
        .unwrap();
    let server = ConfiguredServer::start(program);

    let mut normal = Raw::connect(server.port);
    assert_eq!(normal.call(&["PING"]), "+PONG\r\n");
    let mut subscriber = Raw::connect(server.port);
    assert_eq!(
        subscriber.call(&["SUBSCRIBE", "some-channel"]),
        "*3\r\n$9\r\nsubscribe\r\n$12\r\nsome-channel\r\n:1\r\n"
    );

    let mut sentinel = Raw::connect(server.port);
    let primary_port = primary.port.to_string();
    sentinel.send(&[
        &["MULTI"],
        &["SLAVEOF", "127.0.0.1", &primary_port],
        &["CONFIG", "REWRITE"],
        &["CLIENT", "KILL", "TYPE", "normal"],
        &["CLIENT", "KILL", "TYPE", "pubsub"],
        &["EXEC"],
    ]);
    let replies: Vec<String> = (0..6).map(|_| sentinel.reply()).collect();
    assert_eq!(
        replies,
        [
            "+OK\r\n",
            "+QUEUED\r\n",
            "+QUEUED\r\n",
            "+QUEUED\r\n",
            "+QUEUED\r\n",
            // SLAVEOF, CONFIG REWRITE, then one normal client and one subscriber killed
            // (CLIENT KILL with a filter spares the caller).
            "*4\r\n+OK\r\n+OK\r\n:1\r\n:1\r\n",
        ],
        "{program:?}: the replies to the transaction"
    );
    assert_eq!(
        sentinel.call(&["PING"]),
        "+PONG\r\n",
        "{program:?}: the connection that sent the transaction still works"
    );
    if let Err(state) = normal.closed_by_server() {
        panic!("{program:?}: the other normal client was not killed: {state}");
    }
    if let Err(state) = subscriber.closed_by_server() {
        panic!("{program:?}: the subscribed client was not killed: {state}");
    }

    let conf = std::fs::read_to_string(&server.conf).unwrap();
    let line = format!("replicaof 127.0.0.1 {primary_port}");
    assert!(
        conf.lines().any(|l| l == line),
        "{program:?}: no `{line}` line in the rewritten config file:\n{conf}"
    );

    wait_until(
        Duration::from_secs(10),
        "the reconfigured server to replicate the primary",
        || {
            let Some(mut conn) = try_connect(server.port) else {
                return (false, ("no connection".to_string(), None, None));
            };
            let role = role(&mut conn);
            let link = info_field(&mut conn, "replication", "master_link_status");
            let key: Option<String> = redis::cmd("GET")
                .arg("from-the-primary")
                .query(&mut conn)
                .unwrap_or(None);
            (
                role == format!("slave 127.0.0.1:{primary_port} connected")
                    && link.as_deref() == Some("up")
                    && key.as_deref() == Some("1"),
                (role, link, key),
            )
        },
    );
}

#[test]
fn sentinels_reconfiguration_transaction() {
    let started = Instant::now();
    // Redis first: the expectations are its replies.
    reconfiguration_transaction(Program::Redis);
    reconfiguration_transaction(latch());
    println!("test took {:?}", started.elapsed());
}

#[test]
fn sentinel_sends_script_kill_to_a_busy_primary() {
    let started = Instant::now();
    let group = Group::start(latch(), &["--busy-reply-threshold", "100"], &[]);
    // Every sentinel knows the other two: a quorum could start a failover (and would find
    // no replica to promote).
    group.wait_discovery(Duration::from_secs(20));
    let port = group.primary.port;

    let mut script_conn = connect(&group.primary);
    let (sender, receiver) = std::sync::mpsc::channel();
    let script = std::thread::spawn(move || {
        let began = Instant::now();
        let result: redis::RedisResult<Value> = redis::cmd("EVAL")
            .arg("while true do end")
            .arg(0)
            .query(&mut script_conn);
        let _ = sender.send((result, began.elapsed()));
    });
    let (result, took) = receiver
        .recv_timeout(Duration::from_secs(15))
        .expect("the busy script was not killed within 15 s");
    script.join().unwrap();
    println!("the script was killed after {took:?}");
    let error = match result {
        Ok(value) => panic!("EVAL of an endless script replied {value:?}"),
        Err(e) => e.to_string(),
    };
    println!("EVAL replied: {error}");
    assert!(
        error.contains("SCRIPT KILL"),
        "the EVAL caller's error does not mention SCRIPT KILL: {error}"
    );
    assert!(took < Duration::from_secs(10), "the kill took {took:?}");

    let mut conn = connect(&group.primary);
    let pong: String = redis::cmd("PING").query(&mut conn).unwrap();
    assert_eq!(pong, "PONG");
    // We sent no SCRIPT KILL ourselves: those counted came from sentinels (more than one
    // when two sentinels sent theirs; the later ones got NOTBUSY).
    let kills = info_field(&mut conn, "commandstats", "cmdstat_script|kill");
    let calls: u64 = kills
        .as_deref()
        .and_then(|s| s.strip_prefix("calls="))
        .and_then(|s| s.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        calls >= 1,
        "INFO commandstats cmdstat_script|kill: {kills:?}"
    );

    for sentinel in &group.sentinels {
        let mut conn = sentinel.connect();
        assert_eq!(master_port(&mut conn), port, "the sentinel failed over");
        wait_until(
            Duration::from_secs(10),
            "the sentinel to see the primary up again (flags master)",
            || {
                let master = sentinel_master(&mut conn);
                let flags = master.get("flags").cloned();
                (flags.as_deref() == Some("master"), flags)
            },
        );
        assert_eq!(master_port(&mut conn), port, "the sentinel failed over");
        let log = sentinel.log();
        assert!(
            !log.contains("+switch-master"),
            "the sentinel switched masters:\n{log}"
        );
    }
    // Sentinel sends SCRIPT KILL only on a BUSY reply from a primary it holds subjectively
    // down: the first sentinel to get there kills the script, the others may never see it.
    let sdown = format!("+sdown master {MASTER_NAME} 127.0.0.1 {port}");
    assert!(
        group.sentinels.iter().any(|s| s.log().contains(&sdown)),
        "no sentinel saw the busy primary down (`{sdown}`)"
    );
    assert_eq!(role(&mut conn), "master");
    println!("test took {:?}", started.elapsed());
}
