//! DEBUG DIGEST / DIGEST-VALUE give redis-server's digests for the same data, and DEBUG
//! RELOAD keeps a data set (its digest) and, in Latch, refuses duplicates unless told to
//! merge.

use latch_testkit::{Program, Server};

fn connect(server: &Server) -> redis::Connection {
    redis::Client::open(server.url())
        .and_then(|c| c.get_connection())
        .expect("connect")
}

/// The same data on any server: every type, small and large encodings, integers, a TTL,
/// a stream with a deleted entry, a second database.
fn load(con: &mut redis::Connection) {
    let mut pipe = redis::pipe();
    pipe.cmd("SET").arg("s").arg("hello").ignore();
    pipe.cmd("SET").arg("n").arg(12345).ignore();
    pipe.cmd("SET")
        .arg("e")
        .arg("v")
        .arg("EX")
        .arg(1000)
        .ignore();
    pipe.cmd("RPUSH")
        .arg("l")
        .arg(&["a", "b", "3", "c"])
        .ignore();
    pipe.cmd("SADD").arg("si").arg(&[1, 2, 3]).ignore();
    pipe.cmd("SADD").arg("ss").arg(&["x", "y", "1"]).ignore();
    pipe.cmd("ZADD")
        .arg(&[
            "zs", "1", "a", "2.5", "b", "-3", "c", "1e20", "d", "0.1", "e",
        ])
        .ignore();
    for i in 0..200 {
        pipe.cmd("ZADD")
            .arg("zl")
            .arg(format!("{i}.{i}"))
            .arg(format!("m{i}"))
            .ignore();
        pipe.cmd("HSET")
            .arg("hl")
            .arg(format!("f{i}"))
            .arg(format!("v{i}"))
            .ignore();
        pipe.cmd("SADD").arg("sl").arg(format!("m{i}")).ignore();
        pipe.cmd("RPUSH").arg("ll").arg(format!("e{i}")).ignore();
    }
    pipe.cmd("HSET")
        .arg(&["hs", "f1", "v1", "f2", "2"])
        .ignore();
    pipe.cmd("XADD")
        .arg(&["st", "1-1", "a", "1", "b", "2"])
        .ignore();
    pipe.cmd("XADD").arg(&["st", "2-0", "a", "3"]).ignore();
    pipe.cmd("XADD").arg(&["st", "3-0", "c", "5"]).ignore();
    pipe.cmd("XDEL").arg(&["st", "2-0"]).ignore();
    pipe.cmd("SELECT").arg(3).ignore();
    pipe.cmd("SET").arg("other").arg(1).ignore();
    pipe.cmd("SELECT").arg(0).ignore();
    let _: () = pipe.query(con).expect("load");
}

const KEYS: &[&str] = &[
    "s", "n", "e", "l", "si", "ss", "zs", "zl", "hl", "sl", "ll", "hs", "st", "missing",
];

fn digests(con: &mut redis::Connection) -> (String, Vec<String>) {
    let all: String = redis::cmd("DEBUG")
        .arg("DIGEST")
        .query(con)
        .expect("digest");
    let values: Vec<String> = redis::cmd("DEBUG")
        .arg("DIGEST-VALUE")
        .arg(KEYS)
        .query(con)
        .expect("digest-value");
    (all, values)
}

#[test]
fn digests_match_redis_server() {
    let mut seen = Vec::new();
    for program in [Program::Redis, Program::Latch] {
        let server = Server::start(program, &[]);
        let mut con = connect(&server);
        let empty: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut con).unwrap();
        assert_eq!(empty, "0".repeat(40), "{program:?}");
        load(&mut con);
        let (all, values) = digests(&mut con);
        assert_eq!(values.len(), KEYS.len());
        assert_eq!(values.last().unwrap(), &"0".repeat(40), "{program:?}");
        // Every value differs from every other.
        let mut distinct = values.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), values.len(), "{program:?}: {values:?}");
        seen.push((program, all, values));
    }
    let (_, redis_all, redis_values) = &seen[0];
    let (_, latch_all, latch_values) = &seen[1];
    for (key, (r, l)) in KEYS.iter().zip(redis_values.iter().zip(latch_values)) {
        assert_eq!(r, l, "DIGEST-VALUE of {key}");
    }
    assert_eq!(redis_all, latch_all, "DEBUG DIGEST");
}

#[test]
fn reload_keeps_the_data_set_and_refuses_duplicates() {
    for program in [Program::Redis, Program::Latch] {
        let server = Server::start(program, &[]);
        let mut con = connect(&server);
        load(&mut con);
        let before = digests(&mut con);
        let ok: String = redis::cmd("DEBUG").arg("RELOAD").query(&mut con).unwrap();
        assert_eq!(ok, "OK");
        assert_eq!(
            digests(&mut con),
            before,
            "{program:?}: RELOAD changed the data"
        );
        if program == Program::Latch {
            // redis-server stops with a panic on a key the file holds twice; Latch refuses
            // the load with the error Redis gives for a duplicate function library.
            let dup = redis::cmd("DEBUG")
                .arg("RELOAD")
                .arg("NOFLUSH")
                .query::<String>(&mut con)
                .unwrap_err();
            assert!(
                dup.to_string()
                    .contains("Error trying to load the RDB dump"),
                "{program:?}: {dup}"
            );
        }
        let merged: String = redis::cmd("DEBUG")
            .arg("RELOAD")
            .arg("NOFLUSH")
            .arg("MERGE")
            .query(&mut con)
            .unwrap();
        assert_eq!(merged, "OK");
        assert_eq!(
            digests(&mut con),
            before,
            "{program:?}: MERGE changed the data"
        );
        let bad = redis::cmd("DEBUG")
            .arg("RELOAD")
            .arg("SOMETIMES")
            .query::<String>(&mut con)
            .unwrap_err();
        assert!(
            bad.to_string()
                .contains("only supports the MERGE, NOFLUSH and NOSAVE"),
            "{program:?}: {bad}"
        );
    }
}

#[test]
fn loadaof_loads_the_data_set_back_from_the_aof() {
    for program in [Program::Redis, Program::Latch] {
        let server = Server::start(program, &["--appendonly", "yes"]);
        let mut con = connect(&server);
        load(&mut con);
        let before = digests(&mut con);
        let ok: String = redis::cmd("DEBUG").arg("LOADAOF").query(&mut con).unwrap();
        assert_eq!(ok, "OK");
        assert_eq!(
            digests(&mut con),
            before,
            "{program:?}: LOADAOF changed the data"
        );
        // Written after the reload, logged to the same file: a second reload keeps it.
        let _: () = redis::cmd("SET")
            .arg("after")
            .arg("x")
            .query(&mut con)
            .unwrap();
        let ok: String = redis::cmd("DEBUG").arg("LOADAOF").query(&mut con).unwrap();
        assert_eq!(ok, "OK");
        let after: Option<String> = redis::cmd("GET").arg("after").query(&mut con).unwrap();
        assert_eq!(after.as_deref(), Some("x"), "{program:?}");
    }
}

#[test]
fn populate_makes_the_keys_redis_makes() {
    let mut seen = Vec::new();
    for program in [Program::Redis, Program::Latch] {
        let server = Server::start(program, &[]);
        let mut con = connect(&server);
        let _: () = redis::cmd("SET")
            .arg("p:3")
            .arg("mine")
            .query(&mut con)
            .unwrap();
        for args in [&["50"][..], &["20", "p", "12"], &["5", "short", "3"]] {
            let ok: String = redis::cmd("DEBUG")
                .arg("POPULATE")
                .arg(args)
                .query(&mut con)
                .unwrap();
            assert_eq!(ok, "OK");
        }
        let kept: String = redis::cmd("GET").arg("p:3").query(&mut con).unwrap();
        assert_eq!(kept, "mine", "{program:?}: an existing key was overwritten");
        let size: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
        assert_eq!(size, 75, "{program:?}");
        let bad = redis::cmd("DEBUG")
            .arg("POPULATE")
            .arg("-1")
            .query::<String>(&mut con)
            .unwrap_err();
        assert!(
            bad.to_string().contains("must be positive"),
            "{program:?}: {bad}"
        );
        seen.push(digests(&mut con).0);
    }
    assert_eq!(seen[0], seen[1], "the same keys and values on both servers");
}

/// Streams with groups, a pending entry and an idle consumer, an empty stream, a library.
fn load_more(con: &mut redis::Connection) {
    let mut pipe = redis::pipe();
    pipe.cmd("XGROUP")
        .arg(&["CREATE", "st", "g1", "0"])
        .ignore();
    pipe.cmd("XREADGROUP")
        .arg(&["GROUP", "g1", "alice", "COUNT", "1", "STREAMS", "st", ">"])
        .ignore();
    pipe.cmd("XGROUP")
        .arg(&["CREATECONSUMER", "st", "g1", "bob"])
        .ignore();
    pipe.cmd("XADD")
        .arg(&["empty", "MAXLEN", "0", "5-5", "x", "y"])
        .ignore();
    pipe.cmd("FUNCTION")
        .arg("LOAD")
        .arg("#!lua name=lib1\nredis.register_function('f1', function() return 1 end)")
        .ignore();
    let _: () = pipe.query(con).expect("load more");
}

fn wait_rewrite_done(con: &mut redis::Connection) {
    for _ in 0..500 {
        let info: String = redis::cmd("INFO").arg("persistence").query(con).unwrap();
        if info.contains("aof_rewrite_in_progress:0") && !info.contains("aof_rewrite_scheduled:1") {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("the AOF rewrite did not finish");
}

#[test]
fn an_aof_base_in_command_form_rebuilds_the_data_set() {
    // aof-use-rdb-preamble no: the rewrite writes commands, stamped when asked; the
    // servers load their own and each other's.
    let mut written = Vec::new();
    let mut servers = Vec::new();
    for program in [Program::Redis, Program::Latch] {
        let server = Server::start(
            program,
            &[
                "--appendonly",
                "yes",
                "--aof-use-rdb-preamble",
                "no",
                "--aof-timestamp-enabled",
                "yes",
            ],
        );
        let mut con = connect(&server);
        load(&mut con);
        load_more(&mut con);
        let before = digests(&mut con);
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut con).unwrap();
        wait_rewrite_done(&mut con);
        let dir = server.dir.join("appendonlydir");
        let base = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .find(|path| path.to_string_lossy().ends_with(".base.aof"))
            .unwrap_or_else(|| panic!("{program:?}: no .base.aof in {}", dir.display()));
        let text = std::fs::read(&base).unwrap();
        assert!(
            text.starts_with(b"#TS:"),
            "{program:?}: the base starts {:?}",
            &text[..20]
        );
        assert!(
            text.windows(13).any(|w| w == b"FUNCTION\r\n$4\r"),
            "{program:?}: no FUNCTION LOAD in the base"
        );
        let ok: String = redis::cmd("DEBUG").arg("LOADAOF").query(&mut con).unwrap();
        assert_eq!(ok, "OK");
        assert_eq!(digests(&mut con), before, "{program:?}: the base lost data");
        let groups: Vec<redis::Value> = redis::cmd("XINFO")
            .arg(&["CONSUMERS", "st", "g1"])
            .query(&mut con)
            .unwrap();
        assert_eq!(groups.len(), 2, "{program:?}: consumers after the reload");
        written.push((before, dir));
        // Kept running (its files in place) for the cross-load below.
        servers.push(server);
    }
    // Each program's directory loaded by the other.
    for (index, ((before, dir), program)) in written
        .iter()
        .zip([Program::Latch, Program::Redis])
        .enumerate()
    {
        let copy =
            std::env::temp_dir().join(format!("latch-aof-base-{}-{index}", std::process::id()));
        let _ = std::fs::remove_dir_all(&copy);
        copy_aof_dir(dir, &copy);
        let server = Server::start_in(program, &copy, &["--appendonly", "yes"]);
        let mut con = connect(&server);
        assert_eq!(
            &digests(&mut con),
            before,
            "{program:?} loading the other's base"
        );
        drop(server);
        let _ = std::fs::remove_dir_all(&copy);
    }
}

/// Copies an AOF directory into `server_dir/appendonlydir`.
fn copy_aof_dir(aof_dir: &std::path::Path, server_dir: &std::path::Path) {
    let target = server_dir.join("appendonlydir");
    std::fs::create_dir_all(&target).unwrap();
    for entry in std::fs::read_dir(aof_dir).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, target.join(path.file_name().unwrap())).unwrap();
    }
}
