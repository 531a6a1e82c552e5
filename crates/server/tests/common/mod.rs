//! Starts the real `latch-server` binary on a free port for integration tests.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct TestServer {
    pub port: u16,
    child: Child,
    pub dir: std::path::PathBuf,
    /// Leave `dir` behind on drop (another server restarts over it).
    keep_dir: bool,
}

pub use latch_testkit::listens_on;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

impl TestServer {
    /// Starts a server with extra redis-server style options (`["--hz", "100"]`).
    pub fn start(extra: &[&str]) -> TestServer {
        TestServer::start_in(None, extra)
    }

    /// Starts a server whose `dir` is `dir` (a restart over an earlier server's files), or a
    /// fresh temporary directory.
    pub fn start_in(dir: Option<&std::path::Path>, extra: &[&str]) -> TestServer {
        TestServer::start_with(false, dir, extra)
    }

    /// Starts a server confined to one core (`taskset -c 0`), so it runs a single worker.
    #[allow(dead_code)]
    pub fn start_on_one_core(extra: &[&str]) -> TestServer {
        TestServer::start_with(true, None, extra)
    }

    /// `start_in`, confined to one core when `one_core`.
    #[allow(dead_code)]
    pub fn start_with(one_core: bool, dir: Option<&std::path::Path>, extra: &[&str]) -> TestServer {
        TestServer::launch(one_core, dir, extra, probe_serves)
    }

    /// Starts a server in `dir` and returns as soon as it answers, before its data set is
    /// loaded (`start_in` waits for that too).
    pub fn start_loading(dir: &std::path::Path, extra: &[&str]) -> TestServer {
        TestServer::launch(false, Some(dir), extra, probe_quits)
    }

    fn launch(
        one_core: bool,
        dir: Option<&std::path::Path>,
        extra: &[&str],
        ready: fn(u16) -> bool,
    ) -> TestServer {
        let dir_given = dir.is_some();
        for _ in 0..5 {
            let port = free_port();
            let dir = match dir {
                Some(dir) => dir.to_path_buf(),
                None => {
                    std::env::temp_dir().join(format!("latch-test-{}-{port}", std::process::id()))
                }
            };
            std::fs::create_dir_all(&dir).expect("temp dir");
            let mut command = if one_core {
                let mut taskset = Command::new("taskset");
                taskset.args(["-c", "0", env!("CARGO_BIN_EXE_latch-server")]);
                taskset
            } else {
                Command::new(env!("CARGO_BIN_EXE_latch-server"))
            };
            let child = command
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--dir",
                    dir.to_str().unwrap(),
                ])
                // DEBUG is on, as in Redis' own test configuration (its default is off).
                .args(["--enable-debug-command", "yes"])
                // Two workers (one is the default), so that commands of different clients
                // really run in parallel in these tests; on one core, one.
                .args(["--io-threads", if one_core { "1" } else { "2" }])
                .args(extra)
                // The log (stdout, as redis-server's) goes to the same file.
                .stdout(
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(dir.join("stderr.log"))
                        .map(Stdio::from)
                        .unwrap_or_else(|_| Stdio::null()),
                )
                // The server's own log stays in its directory: a test that sees the
                // connection drop can be explained from it.
                .stderr(
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(dir.join("stderr.log"))
                        .map(Stdio::from)
                        .unwrap_or_else(|_| Stdio::null()),
                )
                .spawn()
                .expect("start latch-server");
            let mut server = TestServer {
                port,
                child,
                dir,
                keep_dir: false,
            };
            // A failed attempt must not delete a directory the caller handed in: the next
            // attempt would start over an empty one.
            let callers_dir = dir_given;
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                // Our own process must hold the listening socket: a port the OS handed out
                // free can still be taken by another test's server in between, and a
                // successful connect alone would not tell the two apart.
                if listens_on(server.child.id(), port) && ready(port) {
                    return server;
                }
                if let Ok(Some(_)) = server.child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = server.child.kill();
            server.keep_dir = callers_dir;
        }
        panic!("latch-server did not start (args {extra:?})");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A `redis` crate connection.
    pub fn client(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .expect("client")
            .get_connection()
            .expect("connection")
    }

    /// A raw socket, for exact-bytes tests.
    pub fn raw(&self) -> RawConn {
        let stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        RawConn { stream }
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits up to `timeout` for the process to exit; its exit status if it did.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL (a crash): the process dies at once; its directory is kept for a restart.
    pub fn kill_keep_files(mut self) -> std::path::PathBuf {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.keep_dir = true;
        self.dir.clone()
    }

    /// A clean `SHUTDOWN` (with `how`, e.g. "NOSAVE", or "" for the default); the directory
    /// is kept for a restart.
    pub fn shutdown_keep_files(mut self, how: &str) -> std::path::PathBuf {
        let mut conn = self.raw();
        let mut command = vec![&b"SHUTDOWN"[..]];
        if !how.is_empty() {
            command.push(how.as_bytes());
        }
        conn.send(&encode(&command));
        let status = self.wait_exit(Duration::from_secs(30));
        assert!(status.is_some(), "the server did not exit after SHUTDOWN");
        self.keep_dir = true;
        self.dir.clone()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        // A server that died under a test is the failure to explain: show its log.
        // So is a panic in one of its connection tasks.
        let log = std::fs::read_to_string(self.dir.join("stderr.log")).unwrap_or_default();
        if self.keep_dir {
            // Stopped on purpose by the test.
        } else if let Ok(Some(status)) = self.child.try_wait() {
            eprintln!("latch-server exited early ({status}); its log:\n{log}");
        } else if log.contains("panicked") {
            eprintln!("latch-server panicked; its log:\n{log}");
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !self.keep_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Whether the server answers PING with anything but LOADING (its data set is in; a
/// server with a password answers NOAUTH). Like [`probe_quits`], it ends with QUIT and
/// reads until the server closes.
fn probe_serves(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    if stream.write_all(b"PING\r\nQUIT\r\n").is_err() {
        return false;
    }
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).is_ok()
        && !answer.starts_with(b"-LOADING")
        && answer.ends_with(b"+OK\r\n")
}

/// Connects, sends QUIT and reads until the server closes: true once the server answers
/// (QUIT runs while it loads). Waiting for the close keeps the probe out of CLIENT LIST
/// when the test starts (a probe that only connected and dropped could still be listed
/// there, and was, in CI).
fn probe_quits(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    if stream.write_all(b"QUIT\r\n").is_err() {
        return false;
    }
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).is_ok() && answer.starts_with(b"+OK")
}

/// A command as a RESP array of bulk strings.
pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Reads one `\r\n`-terminated line (bounded to 64 KiB; shorter if the connection ends).
pub fn read_line(conn: &mut RawConn) -> String {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while line.len() < 64 * 1024 && !line.ends_with(b"\r\n") {
        match conn.stream.read(&mut byte) {
            Ok(1) => line.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&line).into_owned()
}

/// Sends a command written as space-separated words and asserts the exact reply.
pub fn check(conn: &mut RawConn, command: &str, expected: &str) {
    let args: Vec<&[u8]> = command.split(' ').map(str::as_bytes).collect();
    conn.expect(&args, expected.as_bytes());
}

/// A connection switched to RESP3 (HELLO's map reply is read and dropped).
pub fn resp3(server: &TestServer) -> RawConn {
    let mut conn = server.raw();
    conn.send(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n*1\r\n$4\r\nPING\r\n");
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !seen.ends_with(b"+PONG\r\n") {
        match conn.stream.read(&mut byte) {
            Ok(1) => seen.push(byte[0]),
            _ => panic!("no reply to HELLO 3: {:?}", String::from_utf8_lossy(&seen)),
        }
    }
    conn
}

/// A bulk string reply.
pub fn bulk(text: &str) -> String {
    format!("${}\r\n{}\r\n", text.len(), text)
}

/// An array reply of bulk strings, in the given order.
pub fn bulks(items: &[&str]) -> String {
    let mut out = format!("*{}\r\n", items.len());
    for item in items {
        out.push_str(&bulk(item));
    }
    out
}

/// Replies many tests expect, byte for byte.
pub mod replies {
    pub const NIL: &str = "$-1\r\n";
    pub const NIL_ARRAY: &str = "*-1\r\n";
    pub const NULL3: &str = "_\r\n";
    pub const SYNTAX: &str = "-ERR syntax error\r\n";
    pub const NOT_INTEGER: &str = "-ERR value is not an integer or out of range\r\n";
    pub const NOT_FLOAT: &str = "-ERR value is not a valid float\r\n";
    pub const WRONGTYPE: &str =
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
}

pub struct RawConn {
    pub stream: TcpStream,
}

impl RawConn {
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    /// Sends `bytes` and reads until exactly `expected.len()` bytes came back (or timeout),
    /// returning what was read.
    pub fn roundtrip(&mut self, bytes: &[u8], expected_len: usize) -> Vec<u8> {
        self.send(bytes);
        self.read_n(expected_len)
    }

    pub fn read_n(&mut self, n: usize) -> Vec<u8> {
        let mut out = vec![0u8; n];
        let mut filled = 0;
        while filled < n {
            match self.stream.read(&mut out[filled..]) {
                Ok(0) | Err(_) => break,
                Ok(k) => filled += k,
            }
        }
        out.truncate(filled);
        out
    }

    /// Sends a command as a RESP array and returns the reply bytes (read until `expected`
    /// bytes arrived); asserts they equal `expected`.
    pub fn expect(&mut self, args: &[&[u8]], expected: &[u8]) {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        let got = self.roundtrip(&out, expected.len());
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(expected),
            "reply to {:?}",
            args.iter()
                .map(|a| String::from_utf8_lossy(a))
                .collect::<Vec<_>>()
        );
    }

    /// True when the server closed the connection (read returns 0).
    pub fn is_closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        matches!(self.stream.read(&mut byte), Ok(0))
    }
}
