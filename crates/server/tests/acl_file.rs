//! Users from files, side by side with Debian's redis-server 7.0: the same `aclfile` must
//! give the same users (ACL LIST, ACL GETUSER with selectors, ACL DRYRUN), ACL SAVE must
//! write the same file, and a broken file must be refused with the same words. Also the
//! config file's `user` lines, and the rule that a server takes one source or the other.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use latch_testkit::{latch_server_bin, Program, Server};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("latch-aclfile-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn client(server: &Server) -> redis::Connection {
    redis::Client::open(server.url())
        .and_then(|client| client.get_connection())
        .unwrap()
}

fn query(conn: &mut redis::Connection, words: &[&str]) -> redis::Value {
    let mut cmd = redis::cmd(words[0]);
    for word in &words[1..] {
        cmd.arg(*word);
    }
    match cmd.query::<redis::Value>(conn) {
        Ok(value) => value,
        // Errors compared as their text.
        Err(error) => redis::Value::SimpleString(format!("error: {error}")),
    }
}

const USERS: &str = "\
user alice on #a665a45920422f9d417e4867efdc4fb8a04a1f3fff1fa07e998e86f7f7a27ae3 ~app:* %R~shared:* resetchannels &news.* -@all +@read +@string -append
user bob on nopass (+set %W~w*) (+get %R~r*) (~x* &chat +publish)
user carol off skip-sanitize-payload resetchannels +@all -@dangerous -debug +debug|object ~*
user dave on nopass ~* &* -@all +select|0 +client|id +config|get
user default on nopass ~* &* +@all
";

/// A reply with the words of each string sorted: redis-server lists single-command rules
/// in its command table's hash order, which a random seed picks at each start, so only
/// the rules themselves can be compared, not their order.
fn words_sorted(value: redis::Value) -> redis::Value {
    use redis::Value;
    let sort = |text: &str| {
        let mut words: Vec<&str> = text.split(' ').collect();
        words.sort_unstable();
        words.join(" ")
    };
    match value {
        Value::BulkString(bytes) => {
            Value::BulkString(sort(&String::from_utf8_lossy(&bytes)).into_bytes())
        }
        Value::SimpleString(text) => Value::SimpleString(sort(&text)),
        Value::Array(items) => Value::Array(items.into_iter().map(words_sorted).collect()),
        Value::Map(pairs) => Value::Map(
            pairs
                .into_iter()
                .map(|(k, v)| (words_sorted(k), words_sorted(v)))
                .collect(),
        ),
        other => other,
    }
}

/// What each server says about its users and what they may do.
fn describe(conn: &mut redis::Connection) -> Vec<(String, redis::Value)> {
    let mut seen = vec![(
        "list".to_string(),
        words_sorted(query(conn, &["ACL", "LIST"])),
    )];
    for user in ["alice", "bob", "carol", "dave", "default", "nobody"] {
        let described = words_sorted(query(conn, &["ACL", "GETUSER", user]));
        seen.push((format!("getuser {user}"), described));
    }
    let tries: &[&[&str]] = &[
        &["alice", "get", "app:1"],
        &["alice", "set", "shared:1", "v"],
        &["alice", "append", "app:1", "v"],
        &["alice", "publish", "news.today", "m"],
        &["alice", "publish", "sports", "m"],
        &["bob", "set", "w1", "v"],
        &["bob", "get", "w1"],
        &["bob", "get", "r1"],
        &["bob", "copy", "r1", "w1"],
        &["bob", "publish", "chat", "m"],
        &["bob", "publish", "other", "m"],
        &["bob", "mget", "r1", "x1", "y1"],
        &["carol", "flushall"],
        &["carol", "debug", "object", "k"],
        &["carol", "debug", "sleep", "0"],
        &["dave", "select", "0"],
        &["dave", "select", "1"],
        &["dave", "client", "id"],
        &["dave", "client", "kill", "x"],
        &["dave", "config", "get", "port"],
    ];
    for words in tries {
        let mut args = vec!["ACL", "DRYRUN"];
        args.extend_from_slice(words);
        seen.push((words.join(" "), query(conn, &args)));
    }
    seen
}

fn start(program: Program, dir: &Path, extra: &[&str]) -> Server {
    let server = Server::start_in(program, dir, extra);
    server.wait_for_pong();
    server
}

#[test]
fn an_acl_file_gives_the_same_users_as_redis_server() {
    let mut described = Vec::new();
    let mut saved = Vec::new();
    let mut load_errors = Vec::new();
    for program in [Program::Redis, Program::Latch] {
        let dir = temp_dir(&format!("{program:?}"));
        std::fs::write(dir.join("users.acl"), USERS).unwrap();
        let mut server = start(program, &dir, &["--aclfile", "users.acl"]);
        let mut conn = client(&server);
        described.push(describe(&mut conn));

        // ACL SAVE writes what ACL LIST shows; ACL LOAD reads it back to the same users.
        let _: () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg("erin")
            .arg("on")
            .arg(">pw")
            .arg("(+get ~e*)")
            .query(&mut conn)
            .unwrap();
        let _: () = redis::cmd("ACL").arg("SAVE").query(&mut conn).unwrap();
        let file = std::fs::read_to_string(dir.join("users.acl")).unwrap();
        saved.push(file);

        // A connection logged in as a user the file replaces is closed by ACL LOAD.
        let mut erin = client(&server);
        let _: () = redis::cmd("AUTH")
            .arg("erin")
            .arg("pw")
            .query(&mut erin)
            .unwrap();
        let _: () = redis::cmd("ACL").arg("LOAD").query(&mut conn).unwrap();
        assert!(
            redis::cmd("PING").query::<String>(&mut erin).is_err(),
            "{program:?}"
        );
        let before: Vec<_> = described.last().unwrap()[1..].to_vec();
        assert_eq!(describe(&mut conn)[1..], before[..], "{program:?}");

        // A broken file changes nothing and each problem is named.
        std::fs::write(
            dir.join("users.acl"),
            "user alice on\nuser alice off\n# note\nuser frank +nosuch ~a allkeys ~b\nuser gina (+get\n",
        )
        .unwrap();
        load_errors.push(query(&mut conn, &["ACL", "LOAD"]));
        let users: Vec<String> = redis::cmd("ACL").arg("USERS").query(&mut conn).unwrap();
        assert_eq!(users, ["alice", "bob", "carol", "dave", "default", "erin"]);
        server.shutdown_nosave();
    }
    for (redis, latch) in described[0].iter().zip(&described[1]) {
        assert_eq!(redis, latch, "redis-server and Latch differ");
    }
    let sorted_lines = |text: &str| -> Vec<String> {
        text.lines()
            .map(|line| {
                let mut words: Vec<&str> = line.split(' ').collect();
                words.sort_unstable();
                words.join(" ")
            })
            .collect()
    };
    assert_eq!(sorted_lines(&saved[0]), sorted_lines(&saved[1]));
    assert_eq!(load_errors[0], load_errors[1]);
}

/// A Latch server started on a config file (which must come first), killed on drop.
struct ConfigServer {
    child: std::process::Child,
    port: u16,
}

impl ConfigServer {
    fn start(dir: &Path, conf: &Path) -> ConfigServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let child = Command::new(latch_server_bin())
            .current_dir(dir)
            .arg(conf)
            .args(["--port", &port.to_string(), "--save", ""])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let server = ConfigServer { child, port };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "latch-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    fn client(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}", self.port))
            .and_then(|client| client.get_connection())
            .unwrap()
    }
}

impl Drop for ConfigServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs latch-server with these arguments, expecting it to refuse to start; answers what
/// it wrote. Killed (and the test failed) if it is still running after 20 seconds.
fn refused_start(dir: &Path, args: &[&str]) -> String {
    let mut child = Command::new(latch_server_bin())
        .current_dir(dir)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(
                !status.success(),
                "latch-server {args:?} exited with success"
            );
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("latch-server {args:?} started");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn config_users_and_an_acl_file_are_one_or_the_other() {
    let dir = temp_dir("config-users");
    let conf = dir.join("latch.conf");
    std::fs::write(
        &conf,
        "user default on nopass ~* &* +@all -flushdb\nuser ops on >secret (+info ~*) +ping\n",
    )
    .unwrap();
    let server = ConfigServer::start(&dir, &conf);
    let mut conn = server.client();
    let refused = redis::cmd("FLUSHDB").query::<()>(&mut conn).unwrap_err();
    assert_eq!(refused.code(), Some("NOPERM"));
    let ops = query(&mut conn, &["ACL", "GETUSER", "ops"]);
    assert!(format!("{ops:?}").contains("+info"), "{ops:?}");
    // CONFIG REWRITE keeps the users, and a restart reads them back.
    let _: () = redis::cmd("CONFIG")
        .arg("REWRITE")
        .query(&mut conn)
        .unwrap();
    drop(server);
    let rewritten = std::fs::read_to_string(&conf).unwrap();
    // As redis-server 7.0.15 writes it (a config user is reset first: sanitize-payload).
    assert!(
        rewritten.contains("user default on nopass sanitize-payload ~* &* +@all -flushdb"),
        "{rewritten}"
    );
    assert!(
        rewritten.contains("(~* resetchannels -@all +info)"),
        "{rewritten}"
    );
    let server = ConfigServer::start(&dir, &conf);
    let mut conn = server.client();
    assert!(redis::cmd("FLUSHDB").query::<()>(&mut conn).is_err());
    let users: Vec<String> = redis::cmd("ACL").arg("USERS").query(&mut conn).unwrap();
    assert_eq!(users, ["default", "ops"]);
    drop(server);

    // Two definitions of one user, users beside an ACL file, a missing ACL file: the
    // server does not start.
    let twice = refused_start(&dir, &["--port", "0", "--user", "foo", "--user", "foo"]);
    assert!(twice.contains("Duplicate user"), "{twice}");
    std::fs::write(dir.join("users.acl"), "user a on\n").unwrap();
    let both = refused_start(
        &dir,
        &["--port", "0", "--aclfile", "users.acl", "--user", "b", "on"],
    );
    assert!(both.contains("not both"), "{both}");
    let missing = refused_start(&dir, &["--port", "0", "--aclfile", "missing.acl"]);
    assert!(
        missing.contains("Error loading ACLs, opening file 'missing.acl'"),
        "{missing}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
