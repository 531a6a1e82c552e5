//! Configuration: start-up parsing and errors, config files, CONFIG GET/SET/REWRITE/RESETSTAT.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{RawConn, TestServer};

const BINARY: &str = env!("CARGO_BIN_EXE_latch-server");

/// A scratch directory unique to one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("latch-config-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Runs the binary expecting it to refuse to start; returns its standard error.
fn start_fails(args: &[&str]) -> String {
    let mut child = Command::new(BINARY)
        // Files a server leaves behind (its running marker) go to a scratch place, not the
        // source tree.
        .current_dir(std::env::temp_dir())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            assert!(!status.success(), "{args:?} should fail");
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{args:?} did not exit");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    stderr
}

/// A server started with a config file (first argument), killed on drop.
struct FileServer {
    child: Child,
    port: u16,
}

impl FileServer {
    fn start(args: &[&str], port: u16) -> FileServer {
        let child = Command::new(BINARY)
            // Files a server leaves behind (its running marker) go to a scratch place, not the
            // source tree.
            .current_dir(std::env::temp_dir())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let mut server = FileServer { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            // Our own process must hold the port: another test's server may have been
            // handed the same free port, and a connect alone would reach that one.
            if common::listens_on(server.child.id(), port)
                && TcpStream::connect(("127.0.0.1", port)).is_ok()
            {
                return server;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("server exited: {status}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("server did not start");
    }

    fn raw(&self) -> RawConn {
        let stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        RawConn { stream }
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("port")
}

fn bulk(text: &str) -> String {
    format!("${}\r\n{}\r\n", text.len(), text)
}

/// CONFIG GET's reply for one option, RESP2.
fn pair2(name: &str, value: &str) -> String {
    format!("*2\r\n{}{}", bulk(name), bulk(value))
}

fn config_get(conn: &mut RawConn, name: &str, value: &str) {
    conn.expect(
        &[b"CONFIG", b"GET", name.as_bytes()],
        pair2(name, value).as_bytes(),
    );
}

#[test]
fn start_up_errors_name_the_option() {
    let error = start_fails(&["--port", "6379", "--no-such-option", "1"]);
    assert!(
        error.contains("*** FATAL CONFIG FILE ERROR (Latch "),
        "{error}"
    );
    assert!(error.contains("Reading the configuration file, at line 3\n>>> 'no-such-option \"1\"'\nBad directive or wrong number of arguments"), "{error}");

    let error = start_fails(&["--port", "abc"]);
    assert!(
        error.contains(">>> 'port \"abc\"'\nargument couldn't be parsed into an integer"),
        "{error}"
    );

    let error = start_fails(&["--port"]);
    assert!(
        error.contains(">>> 'port'\nwrong number of arguments"),
        "{error}"
    );

    let error = start_fails(&["--port", "6379", "6380"]);
    assert!(
        error.contains(">>> 'port \"6379\" \"6380\"'\nwrong number of arguments"),
        "{error}"
    );

    let error = start_fails(&["--maxmemory", "lots"]);
    assert!(error.contains("argument must be a memory value"), "{error}");

    let error = start_fails(&["--loglevel", "--bla"]);
    assert!(
        error.contains(
            ">>> 'loglevel \"--bla\"'\nargument(s) must be one of the following: debug, verbose"
        ),
        "{error}"
    );

    let error = start_fails(&["--save", "10"]);
    assert!(error.contains("Invalid save parameters"), "{error}");

    let error = start_fails(&["/no/such/latch.conf"]);
    assert!(
        error.contains("can't open config file '/no/such/latch.conf'"),
        "{error}"
    );
}

#[test]
fn config_file_errors_give_the_file_line() {
    let dir = scratch("file-errors");
    let file = dir.join("bad.conf");
    std::fs::write(&file, "# a comment\n\nport 1234\ntimeout soon\n").unwrap();
    let error = start_fails(&[file.to_str().unwrap()]);
    assert!(
        error
            .contains("at line 4\n>>> 'timeout soon'\nargument couldn't be parsed into an integer"),
        "{error}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn arguments_override_the_config_file() {
    let dir = scratch("precedence");
    let port = free_port();
    let file = dir.join("latch.conf");
    std::fs::write(
        &file,
        format!("port {port}\nbind 127.0.0.1\nhz 20\nmaxmemory 100mb\nsave 900 1\nsave 300 10\nlua-time-limit 250\n"),
    )
    .unwrap();
    let server = FileServer::start(
        &[
            file.to_str().unwrap(),
            "--hz",
            "30",
            "--maxmemory-policy",
            "allkeys-lru",
        ],
        port,
    );
    let mut conn = server.raw();
    config_get(&mut conn, "hz", "30");
    config_get(&mut conn, "maxmemory", "104857600");
    config_get(&mut conn, "maxmemory-policy", "allkeys-lru");
    config_get(&mut conn, "save", "900 1 300 10");
    config_get(&mut conn, "busy-reply-threshold", "250");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn multi_value_options_from_arguments() {
    let server = TestServer::start(&[
        "--save",
        "900",
        "1",
        "300",
        "10",
        "--shutdown-on-sigint",
        "nosave",
        "force",
        "now",
    ]);
    let mut conn = server.raw();
    config_get(&mut conn, "save", "900 1 300 10");
    config_get(&mut conn, "shutdown-on-sigint", "nosave now force");
    drop(server);

    let server = TestServer::start(&["--save", "--loglevel", "warning"]);
    let mut conn = server.raw();
    config_get(&mut conn, "save", "");
    config_get(&mut conn, "loglevel", "warning");
    drop(server);

    let server = TestServer::start(&["--save", "", "--appendonly", "no"]);
    let mut conn = server.raw();
    config_get(&mut conn, "save", "");
}

#[test]
fn config_get_patterns_and_aliases() {
    let server = TestServer::start(&[]);
    let mut conn = server.raw();
    // An alias answers under its own name; an exact name under the name as sent.
    config_get(&mut conn, "lua-time-limit", "5000");
    config_get(&mut conn, "busy-reply-threshold", "5000");
    config_get(&mut conn, "MAXMEMORY", "0");
    conn.expect(&[b"CONFIG", b"GET", b"no-such-option"], b"*0\r\n");
    // Several patterns, each option once.
    let expected = format!(
        "*6\r\n{}{}{}{}{}{}",
        bulk("maxmemory"),
        bulk("0"),
        bulk("maxmemory-policy"),
        bulk("noeviction"),
        bulk("hz"),
        bulk("10")
    );
    conn.expect(
        &[
            b"CONFIG",
            b"GET",
            b"maxmemory",
            b"maxmemory-p*",
            b"MAXMEMORY",
            b"hz",
        ],
        expected.as_bytes(),
    );
    // Patterns match names and aliases alike, any case.
    let expected = format!(
        "*4\r\n{}{}{}{}",
        bulk("replicaof"),
        bulk(""),
        bulk("slaveof"),
        bulk("")
    );
    conn.expect(&[b"CONFIG", b"GET", b"*OF"], expected.as_bytes());
    // Hidden options only answer to their exact name.
    conn.expect(&[b"CONFIG", b"GET", b"key-load-dela?"], b"*0\r\n");
    config_get(&mut conn, "key-load-delay", "0");
    conn.expect(
        &[b"CONFIG", b"GET"],
        b"-ERR wrong number of arguments for 'config|get' command\r\n",
    );

    let mut client = server.client();
    let all: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("*")
        .query(&mut client)
        .unwrap();
    assert_eq!(all.len() % 2, 0);
    let names: Vec<&String> = all.iter().step_by(2).collect();
    let unique: std::collections::HashSet<&&String> = names.iter().collect();
    assert_eq!(names.len(), unique.len(), "each option once");
    assert!(names.len() > 150, "the whole table: {}", names.len());
}

#[test]
fn config_get_is_a_map_in_resp3() {
    let server = TestServer::start(&[]);
    let mut conn = server.raw();
    conn.send(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n");
    // Read and discard HELLO's map: wait until a PING answers after it.
    conn.send(b"*1\r\n$4\r\nPING\r\n");
    let mut seen = Vec::new();
    while !seen.ends_with(b"+PONG\r\n") {
        let mut buffer = [0u8; 4096];
        let n = conn.stream.read(&mut buffer).expect("read");
        assert!(n > 0, "closed");
        seen.extend_from_slice(&buffer[..n]);
    }
    let expected = format!(
        "%2\r\n{}{}{}{}",
        bulk("hz"),
        bulk("10"),
        bulk("timeout"),
        bulk("0")
    );
    conn.expect(&[b"CONFIG", b"GET", b"hz", b"timeout"], expected.as_bytes());
    conn.expect(&[b"CONFIG", b"GET", b"nothing-here"], b"%0\r\n");
}

#[test]
fn config_set_values_and_errors() {
    let server = TestServer::start(&[]);
    let mut conn = server.raw();
    conn.expect(&[b"CONFIG", b"SET", b"maxmemory", b"1gb"], b"+OK\r\n");
    config_get(&mut conn, "maxmemory", "1073741824");
    conn.expect(&[b"CONFIG", b"SET", b"maxmemory", b"512K"], b"+OK\r\n");
    config_get(&mut conn, "maxmemory", "512000");
    conn.expect(
        &[b"CONFIG", b"SET", b"maxmemory-clients", b"10%"],
        b"+OK\r\n",
    );
    config_get(&mut conn, "maxmemory-clients", "10%");
    conn.expect(&[b"CONFIG", b"SET", b"lua-time-limit", b"1234"], b"+OK\r\n");
    config_get(&mut conn, "busy-reply-threshold", "1234");
    conn.expect(&[b"CONFIG", b"SET", b"hz", b"100000"], b"+OK\r\n");
    config_get(&mut conn, "hz", "500");
    conn.expect(&[b"CONFIG", b"SET", b"save", b"100 10 20 5"], b"+OK\r\n");
    config_get(&mut conn, "save", "100 10 20 5");
    conn.expect(
        &[b"CONFIG", b"SET", b"notify-keyspace-events", b"KEA"],
        b"+OK\r\n",
    );
    config_get(&mut conn, "notify-keyspace-events", "AKE");
    conn.expect(
        &[
            b"CONFIG",
            b"SET",
            b"client-output-buffer-limit",
            b"pubsub 1mb 2mb 3",
        ],
        b"+OK\r\n",
    );
    config_get(
        &mut conn,
        "client-output-buffer-limit",
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 1048576 2097152 3",
    );
    conn.expect(&[b"CONFIG", b"SET", b"appendonly", b"YES"], b"+OK\r\n");
    config_get(&mut conn, "appendonly", "yes");

    conn.expect(
        &[b"CONFIG", b"SET", b"foo", b"bar"],
        b"-ERR Unknown option or number of arguments for CONFIG SET - 'foo'\r\n",
    );
    conn.expect(
        &[b"CONFIG", b"SET", b"Daemonize", b"yes"],
        b"-ERR CONFIG SET failed (possibly related to argument 'Daemonize') - can't set immutable config\r\n",
    );
    conn.expect(
        &[b"CONFIG", b"SET", b"dir", b"/tmp"],
        b"-ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config\r\n",
    );
    conn.expect(
        &[b"CONFIG", b"SET", b"maxmemory", b"1", b"maxmemory", b"2"],
        b"-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - duplicate parameter\r\n",
    );
    conn.expect(
        &[b"CONFIG", b"SET", b"maxmemory", b"1", b"hz"],
        b"-ERR syntax error\r\n",
    );
    conn.expect(
        &[b"CONFIG", b"SET", b"hz"],
        b"-ERR wrong number of arguments for 'config|set' command\r\n",
    );
    conn.expect(
        &[b"CONFIG", b"SET", b"timeout", b"soon"],
        b"-ERR CONFIG SET failed (possibly related to argument 'timeout') - argument couldn't be parsed into an integer\r\n",
    );
    conn.expect(
        &[b"CONFIG", b"SET", b"maxmemory", b"-1"],
        b"-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value\r\n",
    );
    conn.expect(
        &[b"CONFIG", b"SET", b"maxclients", b"0"],
        b"-ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument must be between 1 and 4294967295 inclusive\r\n",
    );
    conn.expect(
        &[b"CONFIG", b"SET", b"appendonly", b"maybe"],
        b"-ERR CONFIG SET failed (possibly related to argument 'appendonly') - argument must be 'yes' or 'no'\r\n",
    );
    conn.expect(
        &[b"CONFIG", b"SET", b"maxmemory-policy", b"sometimes"],
        b"-ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction\r\n",
    );
    conn.expect(
        &[b"CONFIG", b"SET", b"save", b"100"],
        b"-ERR CONFIG SET failed (possibly related to argument 'save') - Invalid save parameters\r\n",
    );
    conn.expect(
        &[b"CONFIG", b"SET", b"lua-time-limit", b"x"],
        b"-ERR CONFIG SET failed (possibly related to argument 'lua-time-limit') - argument couldn't be parsed into an integer\r\n",
    );
}

#[test]
fn config_set_is_all_or_nothing() {
    let server = TestServer::start(&[]);
    let mut conn = server.raw();
    conn.expect(&[b"CONFIG", b"SET", b"maxmemory", b"10000002"], b"+OK\r\n");
    conn.expect(
        &[b"CONFIG", b"SET", b"maxmemory", b"10000001", b"maxmemory-clients", b"200%", b"client-query-buffer-limit", b"invalid"],
        b"-ERR CONFIG SET failed (possibly related to argument 'maxmemory-clients') - percentage argument must be less or equal to 100\r\n",
    );
    config_get(&mut conn, "maxmemory", "10000002");
    config_get(&mut conn, "maxmemory-clients", "0");
    config_get(&mut conn, "client-query-buffer-limit", "1073741824");
    // Several at once, all applied.
    conn.expect(
        &[
            b"CONFIG",
            b"SET",
            b"hz",
            b"50",
            b"timeout",
            b"7",
            b"slowlog-max-len",
            b"5",
        ],
        b"+OK\r\n",
    );
    config_get(&mut conn, "hz", "50");
    config_get(&mut conn, "timeout", "7");
    config_get(&mut conn, "slowlog-max-len", "5");
    // Setting every option to the value it has is accepted (as Redis' CONFIG sanity test does).
    let mut client = server.client();
    let all: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("*")
        .query(&mut client)
        .unwrap();
    let skip = ["dir", "dbfilename", "requirepass"];
    for pair in all.chunks(2) {
        let (name, value) = (&pair[0], &pair[1]);
        if skip.contains(&name.as_str()) {
            continue;
        }
        let result: redis::RedisResult<String> = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query(&mut client);
        if let Err(error) = result {
            assert!(
                error.to_string().contains("immutable"),
                "CONFIG SET {name} {value:?}: {error}"
            );
        }
        let now: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg(name)
            .query(&mut client)
            .unwrap();
        assert_eq!(&now[1], value, "{name} changed by setting it to itself");
    }
}

#[test]
fn protected_options_when_enabled() {
    let server = TestServer::start(&["--enable-protected-configs", "yes"]);
    let mut conn = server.raw();
    let target = scratch("protected");
    let target_text = target.to_str().unwrap().to_string();
    conn.expect(
        &[b"CONFIG", b"SET", b"dir", target_text.as_bytes()],
        b"+OK\r\n",
    );
    config_get(&mut conn, "dir", &target_text);
    conn.expect(
        &[b"CONFIG", b"SET", b"dir", b"/no/such/place"],
        b"-ERR CONFIG SET failed (possibly related to argument 'dir') - No such file or directory\r\n",
    );
    config_get(&mut conn, "dir", &target_text);
    conn.expect(
        &[b"CONFIG", b"SET", b"dbfilename", b"a/b.rdb"],
        b"-ERR CONFIG SET failed (possibly related to argument 'dbfilename') - dbfilename can't be a path, just a filename\r\n",
    );
    let _ = std::fs::remove_dir_all(&target);
}

#[test]
fn rewrite_keeps_the_file_and_round_trips() {
    let dir = scratch("rewrite");
    let port = free_port();
    let file = dir.join("latch.conf");
    let original = format!(
        "# Latch test configuration\nport {port}\nbind 127.0.0.1\n\n# snapshots\nsave 900 1\nsave 300 10\nmaxmemory 100mb\nhz 10\n"
    );
    std::fs::write(&file, &original).unwrap();
    let file_text = file.to_str().unwrap().to_string();
    {
        let server = FileServer::start(&[&file_text], port);
        let mut conn = server.raw();
        conn.expect(
            &[
                b"CONFIG",
                b"SET",
                b"maxmemory",
                b"1gb",
                b"save",
                b"3600 1",
                b"hz",
                b"25",
            ],
            b"+OK\r\n",
        );
        conn.expect(
            &[
                b"CONFIG",
                b"SET",
                b"notify-keyspace-events",
                b"Ex",
                b"requirepass",
                b"p w\"d",
            ],
            b"+OK\r\n",
        );
        conn.expect(&[b"AUTH", b"p w\"d"], b"+OK\r\n");
        conn.expect(&[b"CONFIG", b"REWRITE"], b"+OK\r\n");
    }
    let rewritten = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = rewritten.lines().collect();
    assert_eq!(lines[0], "# Latch test configuration");
    assert_eq!(lines[1], format!("port {port}"));
    assert_eq!(lines[2], "bind 127.0.0.1");
    assert!(lines.contains(&"# snapshots"));
    assert!(lines.contains(&"save 3600 1"), "{rewritten}");
    assert!(!rewritten.contains("save 300 10"), "{rewritten}");
    assert!(lines.contains(&"maxmemory 1gb"), "{rewritten}");
    assert!(lines.contains(&"hz 25"), "{rewritten}");
    assert!(
        lines.contains(&"# Generated by CONFIG REWRITE"),
        "{rewritten}"
    );
    assert!(
        lines.contains(&"notify-keyspace-events \"xE\""),
        "{rewritten}"
    );
    assert!(lines.contains(&"requirepass \"p w\\\"d\""), "{rewritten}");
    // Options at their defaults that the file never named stay out.
    assert!(!rewritten.contains("maxmemory-policy"), "{rewritten}");

    // The rewritten file starts a server with the same values.
    let server = FileServer::start(&[&file_text], port);
    let mut conn = server.raw();
    conn.expect(&[b"AUTH", b"p w\"d"], b"+OK\r\n");
    config_get(&mut conn, "maxmemory", "1073741824");
    config_get(&mut conn, "save", "3600 1");
    config_get(&mut conn, "hz", "25");
    config_get(&mut conn, "notify-keyspace-events", "xE");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rewrite_without_a_config_file() {
    let server = TestServer::start(&[]);
    let mut conn = server.raw();
    conn.expect(
        &[b"CONFIG", b"REWRITE"],
        b"-ERR The server is running without a config file\r\n",
    );
}

#[test]
fn config_from_stdin() {
    let port = free_port();
    let mut child = Command::new(BINARY)
        // Files a server leaves behind (its running marker) go to a scratch place, not the
        // source tree.
        .current_dir(std::env::temp_dir())
        .args(["-", "--hz", "42"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    {
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(format!("port {port}\nbind 127.0.0.1\nhz 7\ntimeout 9\n").as_bytes())
            .unwrap();
    }
    let server = FileServer { child, port };
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut conn = server.raw();
    config_get(&mut conn, "hz", "42");
    config_get(&mut conn, "timeout", "9");
}

#[test]
fn port_zero_with_a_unix_socket() {
    let dir = scratch("unix");
    let socket = dir.join("latch.sock");
    let socket_text = socket.to_str().unwrap().to_string();
    let mut child = Command::new(BINARY)
        // Files a server leaves behind (its running marker) go to a scratch place, not the
        // source tree.
        .current_dir(std::env::temp_dir())
        .args([
            "--port",
            "0",
            "--unixsocket",
            &socket_text,
            "--unixsocketperm",
            "700",
            "--dir",
            dir.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut stream = loop {
        if let Ok(stream) = UnixStream::connect(&socket) {
            break stream;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("no unix socket");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let mut reply = [0u8; 7];
    stream.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"+PONG\r\n");
    let mut request = Vec::new();
    request.extend_from_slice(b"*3\r\n$6\r\nCONFIG\r\n$3\r\nGET\r\n$4\r\nport\r\n");
    stream.write_all(&request).unwrap();
    let expected = pair2("port", "0");
    let mut reply = vec![0u8; expected.len()];
    stream.read_exact(&mut reply).unwrap();
    assert_eq!(String::from_utf8_lossy(&reply), expected);
    let mode = std::fs::metadata(&socket)
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777);
    assert_eq!(mode.unwrap(), 0o700);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn resetstat_and_help() {
    let server = TestServer::start(&[]);
    let mut conn = server.raw();
    conn.expect(&[b"CONFIG", b"RESETSTAT"], b"+OK\r\n");
    let mut client = server.client();
    let help: Vec<String> = redis::cmd("CONFIG").arg("HELP").query(&mut client).unwrap();
    assert!(help[0].starts_with("CONFIG <subcommand>"));
    for subcommand in [
        "GET <pattern>",
        "SET <directive> <value>",
        "RESETSTAT",
        "REWRITE",
        "HELP",
    ] {
        assert!(
            help.iter().any(|line| line == subcommand),
            "{subcommand} missing"
        );
    }
    conn.expect(
        &[b"CONFIG", b"NOPE"],
        b"-ERR unknown subcommand 'NOPE'. Try CONFIG HELP.\r\n",
    );
}

/// The runtime's threads of a running server (workers, and the blocking pool's).
fn runtime_threads(pid: u32) -> usize {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the server's threads");
    tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("tokio-rt"))
        .count()
}

// io-threads is the number of runtime workers (Redis' name; its default, 1, is
// redis-server's single thread).
#[test]
fn io_threads_sets_the_number_of_runtime_workers() {
    let mut counts = Vec::new();
    for workers in ["1", "3"] {
        let server = TestServer::start(&["--io-threads", workers]);
        let mut c = server.raw();
        config_get(&mut c, "io-threads", workers);
        c.expect(&[b"PING"], b"+PONG\r\n");
        counts.push(runtime_threads(server.pid()));
    }
    assert_eq!(
        counts[1] - counts[0],
        2,
        "threads with 1 and 3 workers: {counts:?}"
    );
    // Without the option: one worker, as redis-server has one thread.
    let port = free_port();
    let server = FileServer::start(
        &[
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ],
        port,
    );
    let threads = runtime_threads(server.child.id());
    assert_eq!(threads, counts[0], "default threads against io-threads 1");
}

#[test]
fn config_set_port_and_bind_move_the_listeners() {
    let server = TestServer::start(&[]);
    let mut conn = server.raw();
    let old = conn.stream.peer_addr().unwrap().port();
    let new_port = free_port();
    conn.expect(
        &[b"CONFIG", b"SET", b"port", new_port.to_string().as_bytes()],
        b"+OK\r\n",
    );
    // The old port is closed, the new one answers.
    assert!(TcpStream::connect(("127.0.0.1", old)).is_err());
    let connect = |port: u16| {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        RawConn { stream }
    };
    let mut moved = connect(new_port);
    moved.expect(&[b"PING"], b"+PONG\r\n");
    // A port in use changes nothing.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_port = taken.local_addr().unwrap().port().to_string();
    moved.expect(
        &[b"CONFIG", b"SET", b"port", taken_port.as_bytes()],
        b"-ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port\r\n",
    );
    config_get(&mut moved, "port", &new_port.to_string());
    // An address that cannot be bound puts the old ones back.
    moved.expect(
        &[b"CONFIG", b"SET", b"bind", b"999.999.999.999"],
        b"-ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses.\r\n",
    );
    let mut again = connect(new_port);
    again.expect(&[b"PING"], b"+PONG\r\n");
    config_get(&mut again, "bind", "127.0.0.1");
    // Connections made before a move stay.
    conn.expect(&[b"PING"], b"+PONG\r\n");
}

#[test]
fn rename_command_renames_and_removes_commands() {
    let dir = scratch("rename-command");
    let conf = dir.join("latch.conf");
    let port = free_port();
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndir {}\nsave \"\"\nappendonly yes\n\
             rename-command flushdb badger\nrename-command debug \"\"\n",
            dir.display()
        ),
    )
    .unwrap();
    let conf_arg = conf.to_str().unwrap();
    let server = FileServer::start(&[conf_arg], port);
    let mut conn = server.raw();
    conn.expect(&[b"SET", b"k", b"v"], b"+OK\r\n");
    conn.expect(
        &[b"FLUSHDB"],
        b"-ERR unknown command 'FLUSHDB', with args beginning with: \r\n",
    );
    conn.expect(
        &[b"DEBUG", b"SLEEP", b"0"],
        b"-ERR unknown command 'DEBUG', with args beginning with: 'SLEEP' '0' \r\n",
    );
    conn.expect(
        &[b"EVAL", b"return redis.pcall('flushdb')", b"0"],
        b"-ERR Unknown Redis command called from script\r\n",
    );
    conn.expect(&[b"BADGER"], b"+OK\r\n");
    conn.expect(&[b"SET", b"after", b"1"], b"+OK\r\n");
    // CONFIG REWRITE keeps the lines; the AOF holds BADGER and loads back with them.
    conn.expect(&[b"CONFIG", b"REWRITE"], b"+OK\r\n");
    drop(conn);
    drop(server);
    let rewritten = std::fs::read_to_string(&conf).unwrap();
    assert!(
        rewritten.contains("rename-command flushdb badger"),
        "{rewritten}"
    );
    let server = FileServer::start(&[conf_arg], port);
    let mut conn = server.raw();
    conn.expect(&[b"DBSIZE"], b":1\r\n");
    conn.expect(&[b"GET", b"after"], b"$1\r\n1\r\n");
    drop(conn);
    drop(server);

    // Redis' errors for a name that is not a command, or one already taken.
    let error = start_fails(&["--rename-command", "nosuch", "x"]);
    assert!(
        error.contains("No such command in rename-command"),
        "{error}"
    );
    let error = start_fails(&["--rename-command", "get", "set"]);
    assert!(
        error.contains("Target command name already exists"),
        "{error}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
