//! The log and the version line as redis-server writes them, which operators' tools and
//! Redis' own test suite read: every step runs against redis-server too, so the test shows
//! that both servers give what is asserted.

use std::process::Command;

use latch_testkit::{latch_server_bin, redis_server_bin, Program, Server};

/// Whether `line` starts like one of redis-server's: `pid:role dd Mon yyyy hh:mm:ss.mmm L `.
fn redis_shaped(line: &str, pid: u32, roles: &str) -> bool {
    let Some(rest) = line.strip_prefix(&format!("{pid}:")) else {
        return false;
    };
    let mut chars = rest.chars();
    let Some(role) = chars.next() else {
        return false;
    };
    let words: Vec<&str> = chars.as_str().split(' ').collect();
    let time = words.get(4).copied().unwrap_or("");
    roles.contains(role)
        && words.len() >= 6
        && words[0].is_empty()
        && words[1].len() == 2
        && words[1].bytes().all(|b| b.is_ascii_digit())
        && words[2].len() == 3
        && words[3].len() == 4
        && time.len() == 12
        && time.as_bytes()[2] == b':'
        && time.as_bytes()[8] == b'.'
        && [".", "-", "*", "#"].contains(&words[5])
}

#[test]
fn start_up_lines_are_in_redis_format() {
    for program in [Program::Latch, Program::Redis] {
        let mut server = Server::start(program, &["--always-show-logo", "yes"]);
        let pid = server.pid();
        let log = server.log();
        // The banner names the process id (the test suite waits for " PID: n").
        assert!(log.contains(&format!(" PID: {pid}")), "{program:?}:\n{log}");
        let ready = log
            .lines()
            .find(|l| l.ends_with("Ready to accept connections"))
            .unwrap_or_else(|| panic!("{program:?}: no ready line:\n{log}"));
        assert!(redis_shaped(ready, pid, "M"), "{program:?}: {ready}");
        let first = log.lines().next().unwrap_or_default();
        assert!(redis_shaped(first, pid, "MC"), "{program:?}: {first}");

        // A replica's lines say S.
        let mut con = redis::Client::open(server.url())
            .and_then(|c| c.get_connection())
            .expect("connect");
        let _: () = redis::cmd("REPLICAOF")
            .arg("127.0.0.1")
            .arg(1)
            .query(&mut con)
            .expect("replicaof");
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("loglevel")
            .arg("verbose")
            .query(&mut con)
            .expect("config set");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let log = server.log();
            if log.lines().any(|l| redis_shaped(l, pid, "S")) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{program:?}: no replica line:\n{log}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        server.shutdown_nosave();
    }
}

#[test]
fn a_taken_port_is_reported_as_redis_does() {
    for program in [Program::Latch, Program::Redis] {
        let holder = Server::start(program, &[]);
        let bin = match program {
            Program::Latch => latch_server_bin().to_path_buf(),
            Program::Redis => redis_server_bin(),
        };
        let out = Command::new(bin)
            .current_dir(&holder.dir)
            .args(["--port", &holder.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .output()
            .expect("run a second server");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{program:?} started twice on a port");
        assert!(
            text.contains(&format!(
                "Failed listening on port {} (TCP), aborting.",
                holder.port
            )),
            "{program:?}:\n{text}"
        );
    }
}

#[test]
fn version_names_the_redis_version_in_the_v_field() {
    for bin in [latch_server_bin().to_path_buf(), redis_server_bin()] {
        let out = Command::new(&bin).arg("--version").output().expect("run");
        let text = String::from_utf8_lossy(&out.stdout);
        // Tools take the third word, `v=7.0.15`, and split it on dots.
        let v = text.split_whitespace().nth(2).unwrap_or_default();
        assert_eq!(v, "v=7.0.15", "{bin:?}: {text}");
        assert!(text.starts_with("Redis server ") || text.starts_with("Latch server "));
    }
    let out = Command::new(latch_server_bin())
        .arg("-v")
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("latch={}", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
}
