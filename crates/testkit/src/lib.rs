//! Servers for the tests of the crates that are clients of Latch (the lock library, the CLI).
//!
//! [`Server::latch`] starts the workspace's own `latch-server` (built on first use with the
//! same `cargo` that runs the tests, so it is never stale), [`Server::redis`] Debian's
//! `redis-server`. Each runs on a free port in a scratch directory, and can be killed,
//! paused (SIGSTOP) and restarted on the same port over the same files. [`Sentinel`] starts
//! Debian's `redis-server --sentinel` watching a primary.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Which program a [`Server`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Program {
    /// This workspace's `latch-server` (debug build).
    Latch,
    /// Debian's `redis-server` (`.ci/run` installs it).
    Redis,
}

/// The workspace's `latch-server`, built once per test process.
pub fn latch_server_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .current_dir(&workspace)
            .args([
                "build",
                "--quiet",
                "-p",
                "latch-server",
                "--bin",
                "latch-server",
            ])
            .status()
            .expect("run cargo build -p latch-server");
        assert!(status.success(), "cargo build -p latch-server failed");
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace.join("target"));
        let bin = target.join("debug").join("latch-server");
        assert!(bin.exists(), "no {}", bin.display());
        bin
    })
}

/// Debian's `redis-server`. The tests that compare with it need it: `.ci/run` installs the
/// package, and a machine without it fails those tests rather than skipping them.
pub fn redis_server_bin() -> PathBuf {
    for candidate in ["/usr/bin/redis-server", "/usr/local/bin/redis-server"] {
        if Path::new(candidate).exists() {
            return PathBuf::from(candidate);
        }
    }
    panic!("redis-server is not installed (apt-get install redis-server; .ci/run does it)");
}

/// A server process on 127.0.0.1 with its own directory. Dropping it kills the process and
/// removes the directory.
pub struct Server {
    pub program: Program,
    pub port: u16,
    pub dir: PathBuf,
    args: Vec<String>,
    child: Option<Child>,
    /// Whether dropping the server removes `dir` (not when the caller handed it over).
    owns_dir: bool,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("free port")
}

fn scratch_dir(port: u16) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("latch-testkit-{}-{port}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

impl Server {
    /// Starts `latch-server` with extra redis-server style options (`["--appendonly", "yes"]`).
    pub fn latch(extra: &[&str]) -> Server {
        Server::start(Program::Latch, extra)
    }

    /// Starts Debian's `redis-server` with extra options.
    pub fn redis(extra: &[&str]) -> Server {
        Server::start(Program::Redis, extra)
    }

    /// Starts `program`, retrying on another port if the first one was taken meanwhile.
    pub fn start(program: Program, extra: &[&str]) -> Server {
        Server::start_with_dir(program, None, extra)
    }

    /// Starts `program` in `dir`, an existing directory (whose files it loads), which the
    /// server leaves in place when dropped: the caller owns it. The log goes to
    /// `dir/server.log`, as with a scratch directory.
    pub fn start_in(program: Program, dir: &Path, extra: &[&str]) -> Server {
        Server::start_with_dir(program, Some(dir), extra)
    }

    fn start_with_dir(program: Program, dir: Option<&Path>, extra: &[&str]) -> Server {
        let mut last_log = String::new();
        for _ in 0..5 {
            let port = free_port();
            let mut server = Server {
                program,
                port,
                dir: dir.map_or_else(|| scratch_dir(port), Path::to_path_buf),
                args: extra.iter().map(|s| s.to_string()).collect(),
                child: None,
                owns_dir: dir.is_none(),
            };
            if server.spawn_and_wait() {
                return server;
            }
            last_log = server.log();
        }
        panic!("{program:?} server did not start; last log:\n{last_log}");
    }

    fn spawn_and_wait(&mut self) -> bool {
        let bin = match self.program {
            Program::Latch => latch_server_bin().to_path_buf(),
            Program::Redis => redis_server_bin(),
        };
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("server.log"))
            .expect("server log");
        let mut command = Command::new(bin);
        command
            .current_dir(&self.dir)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--dir", self.dir.to_str().expect("utf-8 temp dir")])
            .args(["--save", ""])
            .args(["--enable-debug-command", "yes"])
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(
                log.try_clone()
                    .map(Stdio::from)
                    .unwrap_or_else(|_| Stdio::null()),
            )
            .stderr(Stdio::from(log));
        let mut child = command.spawn().expect("spawn server");
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return false;
            }
            // Our own process must hold the port: another test's server may have taken
            // the port the OS handed us, and a connect alone would not tell them apart.
            // Both servers answer while they load their files: ready is a PING answered
            // with anything but LOADING (NOAUTH, with a password).
            if listens_on(child.id(), self.port) && answers_loaded(self.port) {
                self.child = Some(child);
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The process id (panics when the server is not running).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("server is running").id()
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// Waits until the server answers PING with PONG (not `-LOADING`, nor an error such as
    /// NOAUTH; `start` already waited for the end of the load): a server listens
    /// before it has loaded its files. Panics after 20 seconds.
    pub fn wait_for_pong(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(mut conn) = TcpStream::connect(("127.0.0.1", self.port)) {
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let mut reply = [0u8; 7];
                if conn.write_all(b"PING\r\n").is_ok()
                    && conn.read_exact(&mut reply).is_ok()
                    && &reply == b"+PONG\r\n"
                {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "{:?} server never answered PONG:\n{}",
                self.program,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SHUTDOWN NOSAVE (an AOF is still synced), then waits for the process to exit.
    /// Panics when it does not within 20 seconds.
    pub fn shutdown_nosave(&mut self) {
        let mut conn = TcpStream::connect(("127.0.0.1", self.port)).expect("connect for SHUTDOWN");
        conn.write_all(b"*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n")
            .expect("send SHUTDOWN");
        let status = self.wait_exit(Duration::from_secs(20));
        assert!(
            status.is_some(),
            "{:?} server did not exit after SHUTDOWN:\n{}",
            self.program,
            self.log()
        );
    }

    /// Waits up to `timeout` for the process to exit: its status, `None` if it still runs
    /// (or was not running).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            let child = self.child.as_mut()?;
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGKILL: the process dies at once, its files stay.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the same program again on the same port, over the same files, with the same
    /// options plus `extra`.
    pub fn restart(&mut self, extra: &[&str]) {
        self.kill();
        self.args.extend(extra.iter().map(|s| s.to_string()));
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.spawn_and_wait() {
            assert!(
                Instant::now() < deadline,
                "server did not restart on port {}:\n{}",
                self.port,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGSTOP: the process stops answering but keeps its sockets.
    pub fn pause(&self) {
        send_signal(self.pid(), libc::SIGSTOP);
    }

    /// SIGCONT after [`Server::pause`].
    pub fn resume(&self) {
        send_signal(self.pid(), libc::SIGCONT);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        if self.owns_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A Redis Sentinel (`redis-server <dir>/sentinel.conf --sentinel`, Debian's) watching the
/// service [`Sentinel::SERVICE`] on 127.0.0.1, in a scratch directory of its own (it rewrites
/// its `sentinel.conf`; its log is `sentinel.log`). Quorum 2, `down-after-milliseconds 1000`,
/// `failover-timeout 5000`. Dropping it kills it (SIGKILL to its own pid) and removes the
/// directory (kept when the thread is panicking, for the log).
pub struct Sentinel {
    pub port: u16,
    pub dir: PathBuf,
    child: Option<Child>,
}

impl Sentinel {
    /// The service name the sentinels monitor.
    pub const SERVICE: &'static str = "mymaster";

    /// Starts a sentinel watching the primary on `primary_port`.
    pub fn start(primary_port: u16) -> Sentinel {
        let mut last_log = String::new();
        for _ in 0..5 {
            let port = free_port();
            let dir = scratch_dir(port);
            let conf = dir.join("sentinel.conf");
            std::fs::write(
                &conf,
                format!(
                    "port {port}\n\
                     bind 127.0.0.1\n\
                     dir \"{dir}\"\n\
                     sentinel monitor {service} 127.0.0.1 {primary_port} 2\n\
                     sentinel down-after-milliseconds {service} 1000\n\
                     sentinel failover-timeout {service} 5000\n\
                     sentinel parallel-syncs {service} 1\n",
                    dir = dir.display(),
                    service = Sentinel::SERVICE,
                ),
            )
            .expect("write sentinel.conf");
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join("sentinel.log"))
                .expect("sentinel log");
            let mut child = Command::new(redis_server_bin())
                .current_dir(&dir)
                .arg(&conf)
                .arg("--sentinel")
                .stdin(Stdio::null())
                .stdout(
                    log.try_clone()
                        .map(Stdio::from)
                        .unwrap_or_else(|_| Stdio::null()),
                )
                .stderr(Stdio::from(log))
                .spawn()
                .expect("spawn redis-server --sentinel");
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if listens_on(child.id(), port) && TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Sentinel {
                        port,
                        dir,
                        child: Some(child),
                    };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            last_log = std::fs::read_to_string(dir.join("sentinel.log")).unwrap_or_default();
            let _ = std::fs::remove_dir_all(&dir);
        }
        panic!("sentinel did not start; last log:\n{last_log}");
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The sentinel's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("sentinel.log")).unwrap_or_default()
    }

    /// The port of the primary this sentinel names now (`SENTINEL get-master-addr-by-name`),
    /// or None when it cannot be asked.
    pub fn primary_port(&self) -> Option<u16> {
        let mut conn = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        let service = Sentinel::SERVICE;
        let request = format!(
            "*3\r\n$8\r\nSENTINEL\r\n$23\r\nget-master-addr-by-name\r\n${}\r\n{service}\r\n",
            service.len()
        );
        conn.write_all(request.as_bytes()).ok()?;
        // *2 $<n> host $<n> port: read until the fifth line.
        let mut reply = Vec::new();
        let mut byte = [0u8; 1];
        while reply.iter().filter(|b| **b == b'\n').count() < 5 {
            if conn.read(&mut byte).ok()? == 0 {
                return None;
            }
            reply.push(byte[0]);
            if reply.starts_with(b"*-1") || reply.starts_with(b"-") {
                return None;
            }
        }
        let text = String::from_utf8_lossy(&reply);
        text.lines().nth(4)?.trim().parse().ok()
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Child::kill is SIGKILL to this child's own pid.
            let _ = child.kill();
            let _ = child.wait();
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Sends `signal` to process `pid` (a negative pid: to that process group).
pub fn send_signal(pid: u32, signal: i32) {
    let pid = i32::try_from(pid).expect("pid fits in pid_t");
    send_signal_raw(pid, signal);
}

/// Sends `signal` to the process group `pgid`.
pub fn send_signal_to_group(pgid: u32, signal: i32) {
    let pgid = i32::try_from(pgid).expect("pgid fits in pid_t");
    send_signal_raw(-pgid, signal);
}

#[allow(unsafe_code)]
fn send_signal_raw(pid: i32, signal: i32) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe {
        libc::kill(pid, signal);
    }
}

/// Whether the server on `port` answers a PING with anything but `-LOADING`.
fn answers_loaded(port: u16) -> bool {
    let Ok(mut conn) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reply = [0u8; 8];
    conn.write_all(b"PING\r\n").is_ok()
        && conn.read(&mut reply).is_ok_and(|n| n > 0)
        && !reply.starts_with(b"-LOADING")
}

/// Whether process `pid` holds a listening TCP socket on `port` (from /proc: the socket
/// inodes of /proc/net/tcp{,6} entries in LISTEN state, among the process' descriptors).
pub fn listens_on(pid: u32, port: u16) -> bool {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let listening = fields.get(3) == Some(&"0A");
            let local_port = fields
                .get(1)
                .and_then(|addr| addr.rsplit(':').next())
                .and_then(|hex| u16::from_str_radix(hex, 16).ok());
            if listening && local_port == Some(port) {
                if let Some(inode) = fields.get(9) {
                    inodes.push(format!("socket:[{inode}]"));
                }
            }
        }
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|target| {
            inodes
                .iter()
                .any(|inode| target.to_string_lossy() == *inode)
        })
    })
}
