//! The lock release Latch runs without the Lua VM (`scripting/idiom.rs`) against the same
//! script run by the VM (a trailing comment keeps it from being recognized): two servers
//! meet every situation a release can, one through each, and must answer the same, count
//! the same and log the same AOF.

mod common;

use common::TestServer;
use redis::{Connection, Value};

/// The release as the SETNX page writes it.
const RELEASE: &str = "if redis.call(\"get\",KEYS[1]) == ARGV[1]\nthen\n    \
                       return redis.call(\"del\",KEYS[1])\nelse\n    return 0\nend\n";
/// The same script, which the comment leaves to the VM.
const RELEASE_IN_THE_VM: &str = "if redis.call(\"get\",KEYS[1]) == ARGV[1]\nthen\n    \
                                 return redis.call(\"del\",KEYS[1])\nelse\n    return 0\nend\n\
                                 -- left to the VM\n";
/// redis-py's `Lock` release.
const REDIS_PY_RELEASE: &str = "\n        local token = redis.call('get', KEYS[1])\n        \
                                if not token or token ~= ARGV[1] then\n            return 0\n        \
                                end\n        redis.call('del', KEYS[1])\n        return 1\n    ";

/// Releases the situations below take without the VM when the script is recognized.
const RUNS_WITHOUT_VM: i64 = 12;

/// A command's reply (or error) as text, with the script's SHA1 written as `<sha>`.
fn run(c: &mut Connection, sha: &str, args: &[&[u8]]) -> String {
    let mut command = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for arg in &args[1..] {
        command.arg(*arg);
    }
    let text = match command.query::<Value>(c) {
        Ok(value) => format!("{value:?}"),
        Err(error) => format!("error: {error}"),
    };
    text.replace(sha, "<sha>")
}

/// Every situation a release meets, through `script`; the replies in order.
fn situations(server: &TestServer, script: &str) -> Vec<String> {
    let mut c = server.client();
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(script)
        .query(&mut c)
        .unwrap();
    let s = sha.as_bytes();
    let mut replies = Vec::new();
    let mut go = |c: &mut Connection, args: &[&[u8]]| replies.push(run(c, &sha, args));
    // No such key; the holder's token; another token.
    go(&mut c, &[b"EVALSHA", s, b"1", b"missing", b"token"]);
    go(&mut c, &[b"SET", b"held", b"token"]);
    go(&mut c, &[b"EVALSHA", s, b"1", b"held", b"token"]);
    go(&mut c, &[b"EXISTS", b"held"]);
    go(&mut c, &[b"SET", b"other", b"theirs"]);
    go(&mut c, &[b"EVALSHA", s, b"1", b"other", b"token"]);
    go(&mut c, &[b"GET", b"other"]);
    // The holder's token on a key whose TTL passed (not swept yet): the GET expires it.
    go(&mut c, &[b"SET", b"late", b"token", b"PX", b"100"]);
    go(&mut c, &[b"DEBUG", b"ADVANCE-CLOCK", b"200"]);
    go(&mut c, &[b"EVALSHA", s, b"1", b"late", b"token"]);
    // Another type (WRONGTYPE from GET); no key; no token; empty and binary tokens.
    go(&mut c, &[b"RPUSH", b"list", b"token"]);
    go(&mut c, &[b"EVALSHA", s, b"1", b"list", b"token"]);
    go(&mut c, &[b"EVALSHA", s, b"0"]);
    go(&mut c, &[b"EVALSHA", s, b"1", b"missing"]);
    go(&mut c, &[b"SET", b"noarg", b"token"]);
    go(&mut c, &[b"EVALSHA", s, b"1", b"noarg"]);
    go(&mut c, &[b"SET", b"empty", b""]);
    go(&mut c, &[b"EVALSHA", s, b"1", b"empty", b""]);
    go(&mut c, &[b"SET", b"binary", b"a\r\n\0b"]);
    go(&mut c, &[b"EVALSHA", s, b"1", b"binary", b"a\r\n\0b"]);
    go(
        &mut c,
        &[b"EVALSHA", s, b"2", b"missing", b"held", b"token", b"extra"],
    );
    // Read-only: refused only when it gets to DEL.
    go(&mut c, &[b"SET", b"ro", b"token"]);
    go(&mut c, &[b"EVALSHA_RO", s, b"1", b"ro", b"token"]);
    go(&mut c, &[b"EVALSHA_RO", s, b"1", b"ro", b"nottoken"]);
    // In a transaction, and in another database.
    go(&mut c, &[b"SET", b"queued", b"token"]);
    go(&mut c, &[b"MULTI"]);
    go(&mut c, &[b"EVALSHA", s, b"1", b"queued", b"token"]);
    go(&mut c, &[b"EXEC"]);
    go(&mut c, &[b"SELECT", b"5"]);
    go(&mut c, &[b"SET", b"held", b"token"]);
    go(&mut c, &[b"EVALSHA", s, b"1", b"held", b"token"]);
    go(&mut c, &[b"SELECT", b"0"]);
    // A watcher of the key sees the release.
    let mut watcher = server.client();
    go(&mut c, &[b"SET", b"watched", b"token"]);
    go(&mut watcher, &[b"WATCH", b"watched"]);
    go(&mut c, &[b"EVALSHA", s, b"1", b"watched", b"token"]);
    go(&mut watcher, &[b"MULTI"]);
    go(&mut watcher, &[b"PING"]);
    go(&mut watcher, &[b"EXEC"]);
    // A user who may not DEL: refused when it gets to DEL.
    go(
        &mut c,
        &[
            b"ACL", b"SETUSER", b"nodel", b"on", b"nopass", b"+@all", b"-del", b"~*",
        ],
    );
    go(&mut c, &[b"SET", b"guarded", b"token"]);
    let mut limited = server.client();
    go(&mut limited, &[b"AUTH", b"nodel", b"any"]);
    go(&mut limited, &[b"EVALSHA", s, b"1", b"guarded", b"token"]);
    go(
        &mut limited,
        &[b"EVALSHA", s, b"1", b"guarded", b"nottoken"],
    );
    go(&mut c, &[b"GET", b"guarded"]);
    replies
}

/// The INFO fields a release changes, one per line.
fn counters(server: &TestServer) -> String {
    let mut c = server.client();
    let info: String = redis::cmd("INFO").arg("everything").query(&mut c).unwrap();
    info.lines()
        .filter(|line| {
            [
                "cmdstat_",
                "errorstat_",
                "keyspace_hits:",
                "keyspace_misses:",
                "expired_keys:",
                "total_error_replies:",
                "db0:",
                "db5:",
            ]
            .iter()
            .any(|prefix| line.starts_with(prefix))
        })
        // Durations differ from run to run.
        .map(|line| {
            line.split(',')
                .filter(|field| !field.starts_with("usec"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn runs_without_vm(server: &TestServer) -> i64 {
    let mut c = server.client();
    let info: String = redis::cmd("INFO").arg("stats").query(&mut c).unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("scripts_run_without_vm:"))
        .expect("INFO stats has scripts_run_without_vm")
        .trim()
        .parse()
        .unwrap()
}

/// The AOF's commands, with absolute times (PXAT) written as `<ms>`.
fn aof(server: &TestServer) -> String {
    let dir = server.dir.join("appendonlydir");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("appendonlydir")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.to_string_lossy().ends_with(".incr.aof"))
        .collect();
    files.sort();
    let mut text = String::new();
    for file in files {
        text.push_str(&String::from_utf8_lossy(&std::fs::read(file).unwrap()));
    }
    text.split("\r\n")
        .map(|line| {
            if line.len() >= 12 && line.bytes().all(|b| b.is_ascii_digit()) {
                "<ms>"
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\r\n")
}

fn start() -> TestServer {
    TestServer::start(&["--appendonly", "yes", "--appendfsync", "always"])
}

#[test]
fn the_release_without_the_vm_leaves_what_the_vm_leaves() {
    let recognized = start();
    let in_the_vm = start();
    let replies = situations(&recognized, RELEASE);
    assert_eq!(replies, situations(&in_the_vm, RELEASE_IN_THE_VM));
    // The situations did what they say (the comparison above would pass for two servers
    // that both got them wrong).
    assert_eq!(replies[2], "int(1)", "the holder's release");
    assert_eq!(replies[3], "int(0)", "the key is gone");
    assert_eq!(replies[5], "int(0)");
    assert_eq!(replies[6], "bulk-string('\"theirs\"')");
    assert!(replies[11].contains("WRONGTYPE"), "{}", replies[11]);
    assert!(replies[22].contains("read-only"), "{}", replies[22]);
    assert_eq!(replies[23], "int(0)");
    assert!(replies.last().unwrap().contains("token"), "{replies:?}");
    assert_eq!(counters(&recognized), counters(&in_the_vm));
    assert_eq!(aof(&recognized), aof(&in_the_vm));
    assert_eq!(runs_without_vm(&recognized), RUNS_WITHOUT_VM);
    assert_eq!(runs_without_vm(&in_the_vm), 0);
}

#[test]
fn redis_pys_release_without_the_vm_answers_as_in_the_vm() {
    let recognized = start();
    let in_the_vm = start();
    let replies = situations(&recognized, REDIS_PY_RELEASE);
    let twin = format!("{REDIS_PY_RELEASE}\n-- left to the VM");
    assert_eq!(replies, situations(&in_the_vm, &twin));
    assert_eq!(replies[2], "int(1)");
    assert_eq!(counters(&recognized), counters(&in_the_vm));
    assert_eq!(aof(&recognized), aof(&in_the_vm));
    assert_eq!(runs_without_vm(&recognized), RUNS_WITHOUT_VM);
    assert_eq!(runs_without_vm(&in_the_vm), 0);
}
