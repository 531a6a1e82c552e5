//! Compatibility with the real Redis 7.0 tools: manifests and command files written by
//! `redis-server` are read and reproduced byte for byte, a directory written here is accepted
//! by `redis-check-aof` and loaded by `redis-server`, and truncation is reported at the offset
//! `redis-check-aof` names. The tools must be installed; a missing tool fails the test.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use latch_persist::aof::{
    base_name, encode_command, encode_select, encode_timestamp_annotation, incr_name,
    manifest_name, starts_with_rdb_preamble, write_manifest, AofReadError, CommandReader, FileKind,
    Manifest,
};
use latch_testkit::Program;

const AOF: &str = "appendonly.aof";

/// A directory removed when the test ends.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let path = std::env::temp_dir().join(format!(
            "latch-aof-compat-{}-{tag}-{nanos}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A running redis-server, started by the testkit (which checks the port is its own) in
/// the test's directory; killed when dropped.
struct Server(latch_testkit::Server);

impl Server {
    /// Starts redis-server on `dir` with AOF on and the extra options, and waits until it
    /// answers PING.
    fn start(dir: &Path, extra: &[&str]) -> Server {
        let mut args = vec!["--appendonly", "yes", "--appendfsync", "always"];
        args.extend_from_slice(extra);
        let server = latch_testkit::Server::start_in(Program::Redis, dir, &args);
        server.wait_for_pong();
        Server(server)
    }

    fn connect(&self) -> TcpStream {
        let conn = TcpStream::connect(("127.0.0.1", self.0.port)).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        conn
    }

    fn log_text(&self) -> String {
        self.0.log()
    }

    /// SHUTDOWN NOSAVE (which still fsyncs the AOF) and waits for the process to exit.
    fn shutdown(mut self) {
        self.0.shutdown_nosave();
    }
}

/// A RESP2 reply, as much of it as these tests look at.
#[derive(Debug, PartialEq)]
enum Resp {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Resp>),
}

fn read_reply(r: &mut impl BufRead) -> Resp {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let line = line.trim_end_matches("\r\n");
    let (kind, rest) = line.split_at(1);
    match kind {
        "+" => Resp::Simple(rest.into()),
        "-" => Resp::Error(rest.into()),
        ":" => Resp::Int(rest.parse().unwrap()),
        "$" => match rest.parse::<i64>().unwrap() {
            -1 => Resp::Bulk(None),
            n => {
                let mut body = vec![0; n as usize + 2];
                r.read_exact(&mut body).unwrap();
                body.truncate(n as usize);
                Resp::Bulk(Some(body))
            }
        },
        "*" => Resp::Array(
            (0..rest.parse::<usize>().unwrap())
                .map(|_| read_reply(r))
                .collect(),
        ),
        _ => panic!("unexpected reply line {line:?}"),
    }
}

/// Sends one command (encoded as an AOF entry, which is also valid RESP) and reads the reply.
fn call(conn: &mut TcpStream, args: &[&str]) -> Resp {
    let mut buf = Vec::new();
    encode_command(&mut buf, args);
    conn.write_all(&buf).unwrap();
    read_reply(&mut BufReader::new(conn))
}

fn bulk(s: &str) -> Resp {
    Resp::Bulk(Some(s.as_bytes().to_vec()))
}

/// Waits until no AOF rewrite is running or scheduled, and checks the last one succeeded.
fn wait_for_rewrite(conn: &mut TcpStream) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let Resp::Bulk(Some(info)) = call(conn, &["INFO", "persistence"]) else {
            panic!("INFO failed");
        };
        let info = String::from_utf8(info).unwrap();
        if info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrite_scheduled:0") {
            assert!(info.contains("aof_last_bgrewrite_status:ok"), "{info}");
            return;
        }
        assert!(Instant::now() < deadline, "rewrite did not finish: {info}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// All commands of a command file, which must end cleanly.
fn read_commands(data: &[u8]) -> Vec<Vec<String>> {
    let mut reader = CommandReader::new(data, 0);
    let mut out = Vec::new();
    while let Some(args) = reader.next().unwrap() {
        out.push(
            args.iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect(),
        );
    }
    assert_eq!(reader.offset(), data.len());
    out
}

fn contains_command(cmds: &[Vec<String>], expected: &[&str]) -> bool {
    cmds.iter()
        .any(|c| c.iter().map(String::as_str).eq(expected.iter().copied()))
}

/// Runs redis-server through writes, a rewrite and more writes, then checks what it left.
fn check_redis_written_directory(appendfilename: &str) {
    let tmp = TempDir::new("written");
    let server = Server::start(
        &tmp.0,
        &[
            "--appendfilename",
            appendfilename,
            "--aof-disable-auto-gc",
            "yes",
            "--aof-timestamp-enabled",
            "yes",
        ],
    );
    let mut conn = server.connect();
    assert_eq!(
        call(&mut conn, &["SET", "before", "1"]),
        Resp::Simple("OK".into())
    );
    assert_eq!(
        call(&mut conn, &["RPUSH", "list", "a", "b c", "\r\n"]),
        Resp::Int(3)
    );
    call(&mut conn, &["MULTI"]);
    call(&mut conn, &["INCR", "counter"]);
    call(&mut conn, &["INCR", "counter"]);
    assert_eq!(
        call(&mut conn, &["EXEC"]),
        Resp::Array(vec![Resp::Int(1), Resp::Int(2)])
    );
    call(&mut conn, &["BGREWRITEAOF"]);
    wait_for_rewrite(&mut conn);
    call(&mut conn, &["SELECT", "3"]);
    assert_eq!(
        call(&mut conn, &["SET", "after", "2"]),
        Resp::Simple("OK".into())
    );
    drop(conn);
    server.shutdown();

    let dir = tmp.0.join("appendonlydir");
    let text = fs::read(dir.join(manifest_name(appendfilename))).unwrap();
    let manifest = Manifest::parse(&text).unwrap();
    assert_eq!(manifest.to_text().as_bytes(), text.as_slice());

    // Start-up created base 1 and incr 1; the rewrite made base 2 and incr 2 and kept the old
    // ones as history, since automatic deletion was off.
    let base = manifest.base.as_ref().unwrap();
    assert_eq!(
        (base.name.clone(), base.seq),
        (base_name(appendfilename, 2, true), 2)
    );
    assert_eq!(manifest.incrs.len(), 1);
    assert_eq!(manifest.incrs[0].name, incr_name(appendfilename, 2));
    let history: Vec<_> = manifest.history.iter().map(|f| f.name.clone()).collect();
    assert_eq!(
        history,
        [
            incr_name(appendfilename, 1),
            base_name(appendfilename, 1, true)
        ]
    );
    assert!(manifest.history.iter().all(|f| f.kind == FileKind::History));
    assert_eq!((manifest.next_base_seq(), manifest.next_incr_seq()), (3, 3));

    let mut all = Vec::new();
    for file in manifest
        .base
        .iter()
        .chain(&manifest.history)
        .chain(&manifest.incrs)
    {
        let data = fs::read(dir.join(&file.name)).unwrap();
        if file.name.ends_with(".rdb") {
            assert!(starts_with_rdb_preamble(&data), "{}", file.name);
        } else {
            all.push(read_commands(&data));
        }
    }
    let (old_incr, new_incr) = (&all[0], &all[1]);
    assert!(contains_command(old_incr, &["SET", "before", "1"]));
    assert!(contains_command(
        old_incr,
        &["RPUSH", "list", "a", "b c", "\r\n"]
    ));
    assert!(contains_command(old_incr, &["MULTI"]));
    assert!(contains_command(old_incr, &["EXEC"]));
    assert!(contains_command(new_incr, &["SELECT", "3"]));
    assert!(contains_command(new_incr, &["SET", "after", "2"]));
    // With timestamps on, Redis starts the first incr file with an annotation, which the
    // reader skipped.
    let raw = fs::read(dir.join(&manifest.history[0].name)).unwrap();
    assert!(raw.starts_with(b"#TS:"));
}

#[test]
fn redis_written_directory_round_trips() {
    check_redis_written_directory(AOF);
}

#[test]
fn redis_written_manifest_with_quoted_names_round_trips() {
    check_redis_written_directory("my \"é\" file.aof");
}

/// A data set written here: a base file of commands and an incr file.
fn write_our_directory(root: &Path, incr: &[u8]) -> PathBuf {
    let dir = root.join("appendonlydir");
    fs::create_dir_all(&dir).unwrap();
    let mut manifest = Manifest::default();
    let base_file = manifest.replace_base(AOF, false).name.clone();
    let incr_file = manifest.add_incr(AOF).name.clone();

    let mut base = Vec::new();
    encode_command(&mut base, &["SET", "base", "from base"]);
    encode_command(&mut base, &["RPUSH", "list", "x", "y\r\nz"]);
    encode_select(&mut base, 1);
    encode_command(&mut base, &["SET", "db1", "one"]);
    fs::write(dir.join(&base_file), base).unwrap();
    fs::write(dir.join(&incr_file), incr).unwrap();
    write_manifest(&dir, AOF, &manifest).unwrap();
    dir
}

/// An incr file as Redis would write it: annotations, a SELECT, plain commands and a
/// transaction.
fn sample_incr() -> Vec<u8> {
    let mut incr = Vec::new();
    encode_timestamp_annotation(&mut incr, 1_700_000_000);
    encode_select(&mut incr, 0);
    encode_command(&mut incr, &["SET", "incr", "2"]);
    encode_command(&mut incr, &["MULTI"]);
    encode_command(&mut incr, &["INCRBY", "counter", "5"]);
    encode_command(&mut incr, &["INCRBY", "counter", "6"]);
    encode_command(&mut incr, &["EXEC"]);
    encode_timestamp_annotation(&mut incr, 1_700_000_001);
    encode_command(&mut incr, &["DEL", "base"]);
    encode_command(&mut incr, &["SET", "last", "value"]);
    incr
}

struct CheckAof {
    success: bool,
    output: String,
}

impl CheckAof {
    fn run(manifest: &Path) -> CheckAof {
        let out = Command::new("redis-check-aof")
            .arg(manifest)
            .stdin(Stdio::null())
            .output()
            .expect("redis-check-aof 7.0 must be installed for this test");
        CheckAof {
            success: out.status.success(),
            output: String::from_utf8_lossy(&out.stdout).into_owned(),
        }
    }

    /// The `ok_up_to` redis-check-aof reports for one file.
    fn ok_up_to(&self, file: &str) -> usize {
        let line = self
            .output
            .lines()
            .find(|l| l.starts_with("AOF analyzed: ") && l.contains(&format!("filename={file},")))
            .unwrap_or_else(|| panic!("no analysis of {file} in:\n{}", self.output));
        let value = line.split("ok_up_to=").nth(1).unwrap();
        value[..value.find(',').unwrap()].parse().unwrap()
    }
}

#[test]
fn redis_loads_our_directory() {
    let tmp = TempDir::new("ours");
    let dir = write_our_directory(&tmp.0, &sample_incr());
    let manifest_path = dir.join(manifest_name(AOF));
    let ours = fs::read(&manifest_path).unwrap();
    assert_eq!(
        ours,
        b"file appendonly.aof.1.base.aof seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
    );

    let check = CheckAof::run(&manifest_path);
    assert!(check.success, "{}", check.output);
    assert!(
        check
            .output
            .contains("All AOF files and manifest are valid"),
        "{}",
        check.output
    );

    let server = Server::start(&tmp.0, &[]);
    let mut conn = server.connect();
    assert_eq!(call(&mut conn, &["GET", "base"]), Resp::Bulk(None));
    assert_eq!(call(&mut conn, &["GET", "incr"]), bulk("2"));
    assert_eq!(call(&mut conn, &["GET", "counter"]), bulk("11"));
    assert_eq!(call(&mut conn, &["GET", "last"]), bulk("value"));
    assert_eq!(
        call(&mut conn, &["LRANGE", "list", "0", "-1"]),
        Resp::Array(vec![bulk("x"), bulk("y\r\nz")])
    );
    call(&mut conn, &["SELECT", "1"]);
    assert_eq!(call(&mut conn, &["GET", "db1"]), bulk("one"));
    drop(conn);
    server.shutdown();
    // Nothing needed changing, so Redis left our manifest as it was.
    assert_eq!(fs::read(&manifest_path).unwrap(), ours);
}

#[test]
fn truncation_offsets_match_redis_check_aof() {
    let tmp = TempDir::new("cut");
    let incr = sample_incr();
    let dir = write_our_directory(&tmp.0, &incr);
    let manifest_path = dir.join(manifest_name(AOF));
    let incr_file = incr_name(AOF, 1);

    // Every cut of the incr file: where the reader says the file ends cleanly, the tool
    // agrees; where it says truncated, the tool reports the same offset.
    for cut in 0..incr.len() {
        fs::write(dir.join(&incr_file), &incr[..cut]).unwrap();
        let check = CheckAof::run(&manifest_path);
        let mut reader = CommandReader::new(&incr[..cut], 0);
        let end = loop {
            match reader.next() {
                Ok(Some(_)) => continue,
                other => break other,
            }
        };
        match end {
            Ok(None) => assert!(check.success, "cut {cut}: tool refused:\n{}", check.output),
            Err(AofReadError::Truncated { valid_up_to }) => {
                assert!(!check.success, "cut {cut}: tool accepted a truncated file");
                assert_eq!(check.ok_up_to(&incr_file), valid_up_to, "cut {cut}");
            }
            other => panic!("cut {cut}: {other:?}"),
        }
    }
}

#[test]
fn redis_server_cuts_where_the_reader_says() {
    let tmp = TempDir::new("load-cut");
    let incr = sample_incr();
    let dir = write_our_directory(&tmp.0, &incr);
    let incr_path = dir.join(incr_name(AOF, 1));

    // Cut inside the last command: Redis (aof-load-truncated is on by default) shortens the
    // file to the end of the command before, which is where the reader says it is good.
    let cut = &incr[..incr.len() - 4];
    let Err(AofReadError::Truncated { valid_up_to }) = drain(cut) else {
        panic!("not truncated");
    };
    fs::write(&incr_path, cut).unwrap();
    let server = Server::start(&tmp.0, &[]);
    let mut conn = server.connect();
    assert_eq!(call(&mut conn, &["GET", "last"]), Resp::Bulk(None));
    assert_eq!(call(&mut conn, &["GET", "counter"]), bulk("11"));
    assert_eq!(
        fs::metadata(&incr_path).unwrap().len() as usize,
        valid_up_to
    );
    assert!(server
        .log_text()
        .contains(&format!("at offset {valid_up_to}")));
    drop(conn);
    server.shutdown();

    // A transaction without its EXEC: Redis drops it, cutting the file at the MULTI.
    let multi_at = find(&incr, b"*1\r\n$5\r\nMULTI\r\n");
    let exec_at = find(&incr, b"*1\r\n$4\r\nEXEC\r\n");
    let open = &incr[..exec_at];
    assert_eq!(
        drain(open),
        Err(AofReadError::Truncated {
            valid_up_to: multi_at
        })
    );
    fs::write(&incr_path, open).unwrap();
    let server = Server::start(&tmp.0, &[]);
    let mut conn = server.connect();
    assert_eq!(call(&mut conn, &["GET", "counter"]), Resp::Bulk(None));
    assert_eq!(call(&mut conn, &["GET", "incr"]), bulk("2"));
    assert_eq!(fs::metadata(&incr_path).unwrap().len() as usize, multi_at);
    drop(conn);
    server.shutdown();
}

#[test]
fn corruption_is_refused_by_both() {
    let tmp = TempDir::new("corrupt");
    let mut incr = sample_incr();
    // Damage the '$' of the second argument of `SET incr 2`.
    let set_at = find(&incr, b"*3\r\n$3\r\nSET\r\n$4\r\nincr");
    let dollar = set_at + "*3\r\n$3\r\nSET\r\n".len();
    incr[dollar] = b'%';
    let dir = write_our_directory(&tmp.0, &incr);

    match drain(&incr) {
        Err(AofReadError::Corrupt { offset, what }) => {
            assert_eq!(offset, dollar);
            assert!(
                what.contains(&format!("starting at offset {set_at}")),
                "{what}"
            );
        }
        other => panic!("{other:?}"),
    }
    let check = CheckAof::run(&dir.join(manifest_name(AOF)));
    assert!(!check.success, "{}", check.output);
    assert_eq!(check.ok_up_to(&incr_name(AOF, 1)), set_at);

    // redis-server refuses to start rather than cutting the file. It listens on a socket
    // in the test's directory only, so it takes no port another test might be using.
    let out = Command::new(latch_testkit::redis_server_bin())
        .args(["--port", "0", "--unixsocket"])
        .arg(tmp.0.join("redis.sock"))
        .arg("--dir")
        .arg(&tmp.0)
        .args(["--appendonly", "yes", "--save", ""])
        .stdin(Stdio::null())
        .output()
        .expect("redis-server 7.0 must be installed for this test");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("Bad file format"));
    assert_eq!(fs::read(dir.join(incr_name(AOF, 1))).unwrap(), incr);
}

fn drain(data: &[u8]) -> Result<Option<Vec<Bytes>>, AofReadError> {
    let mut reader = CommandReader::new(data, 0);
    loop {
        match reader.next() {
            Ok(Some(_)) => continue,
            other => return other,
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap()
}
