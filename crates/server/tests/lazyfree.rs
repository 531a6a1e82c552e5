//! UNLINK, FLUSHALL/FLUSHDB ASYNC and `lazyfree-lazy-user-del/-user-flush/-expire/
//! -server-del`, against Latch and redis-server 7.0 side by side: the same replies, and the same counts in INFO's
//! `lazyfreed_objects` (big values go to the background, small ones are freed at once;
//! a flush counts its keys).

use std::time::{Duration, Instant};

use latch_testkit::Server;

fn connect(server: &Server) -> redis::Connection {
    redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap()
}

/// CONFIG SET of one option (the test fails on an error reply).
fn config_set(conn: &mut redis::Connection, name: &str, value: impl redis::ToRedisArgs) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query(conn)
        .unwrap();
}

/// `lazyfreed_objects` once nothing is pending any more.
fn settled_freed(conn: &mut redis::Connection) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    while info(conn, "memory", "lazyfree_pending_objects") != 0 {
        assert!(Instant::now() < deadline, "lazyfree never caught up");
        std::thread::sleep(Duration::from_millis(5));
    }
    info(conn, "memory", "lazyfreed_objects")
}

/// A set of 1,000 strings: a hash table in both servers, whose freeing walks every member
/// (a list of as many short items would be a few packed nodes in Redis, freed at once).
fn big_set(conn: &mut redis::Connection, key: &str) {
    let members: Vec<String> = (0..1000).map(|i| format!("member-{i}")).collect();
    let _: () = redis::cmd("SADD")
        .arg(key)
        .arg(&members)
        .query(conn)
        .unwrap();
}

/// Runs the scenario on one server and returns what a client could see of it.
fn scenario(server: &Server) -> Vec<String> {
    let mut conn = connect(server);
    let mut seen = Vec::new();
    let step = |seen: &mut Vec<String>, conn: &mut redis::Connection, what: &str| {
        seen.push(format!("{what}: lazyfreed_objects={}", settled_freed(conn)));
    };
    step(&mut seen, &mut conn, "start");

    // UNLINK: a big value goes to the background, a small one does not.
    big_set(&mut conn, "big");
    let _: () = redis::cmd("SET")
        .arg("small")
        .arg("v")
        .query(&mut conn)
        .unwrap();
    let removed: i64 = redis::cmd("UNLINK")
        .arg("big")
        .arg("small")
        .arg("missing")
        .query(&mut conn)
        .unwrap();
    seen.push(format!("UNLINK removed {removed}"));
    let exists: i64 = redis::cmd("EXISTS").arg("big").query(&mut conn).unwrap();
    seen.push(format!("EXISTS big after UNLINK: {exists}"));
    step(&mut seen, &mut conn, "after UNLINK");

    // Packed values are one allocation or a few nodes however many elements they hold:
    // an intset of 500 integers and a list of 1,000 short items are freed at once.
    let ints: Vec<i64> = (0..500).collect();
    let _: () = redis::cmd("SADD")
        .arg("ints")
        .arg(&ints)
        .query(&mut conn)
        .unwrap();
    let items: Vec<String> = (0..1000).map(|i| format!("item-{i}")).collect();
    let _: () = redis::cmd("RPUSH")
        .arg("items")
        .arg(&items)
        .query(&mut conn)
        .unwrap();
    let _: i64 = redis::cmd("UNLINK")
        .arg("ints")
        .arg("items")
        .query(&mut conn)
        .unwrap();
    step(&mut seen, &mut conn, "after UNLINK of packed values");

    // DEL frees in place, unless lazyfree-lazy-user-del.
    big_set(&mut conn, "big");
    let _: i64 = redis::cmd("DEL").arg("big").query(&mut conn).unwrap();
    step(&mut seen, &mut conn, "after DEL");
    config_set(&mut conn, "lazyfree-lazy-user-del", "yes");
    big_set(&mut conn, "big");
    let _: i64 = redis::cmd("DEL").arg("big").query(&mut conn).unwrap();
    step(
        &mut seen,
        &mut conn,
        "after DEL with lazyfree-lazy-user-del",
    );

    // Flushes: ASYNC counts every key; SYNC none; no mode follows lazyfree-lazy-user-flush.
    for (i, flush) in [
        "FLUSHALL ASYNC",
        "FLUSHDB SYNC",
        "FLUSHDB",
        "CONFIG SET lazyfree-lazy-user-flush yes",
        "FLUSHDB",
        "FLUSHALL",
    ]
    .into_iter()
    .enumerate()
    {
        for k in 0..5 {
            let _: () = redis::cmd("SET")
                .arg(format!("k{i}-{k}"))
                .arg("v")
                .query(&mut conn)
                .unwrap();
        }
        let mut cmd = redis::cmd(flush.split(' ').next().unwrap());
        for arg in flush.split(' ').skip(1) {
            cmd.arg(arg);
        }
        let reply: String = cmd.query(&mut conn).unwrap();
        let size: i64 = redis::cmd("DBSIZE").query(&mut conn).unwrap();
        seen.push(format!("{flush}: {reply}, DBSIZE {size}"));
        step(&mut seen, &mut conn, flush);
        let _: i64 = redis::cmd("DEL")
            .arg((0..5).map(|k| format!("k{i}-{k}")).collect::<Vec<_>>())
            .query(&mut conn)
            .unwrap();
    }
    let bad = redis::cmd("FLUSHALL")
        .arg("LATER")
        .query::<String>(&mut conn);
    seen.push(format!("FLUSHALL LATER: {:?}", bad.unwrap_err().detail()));

    // Expiry frees in place, unless lazyfree-lazy-expire.
    for lazy in ["no", "yes"] {
        config_set(&mut conn, "lazyfree-lazy-expire", lazy);
        big_set(&mut conn, "big");
        let _: i64 = redis::cmd("PEXPIRE")
            .arg("big")
            .arg(1)
            .query(&mut conn)
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let exists: i64 = redis::cmd("EXISTS").arg("big").query(&mut conn).unwrap();
        seen.push(format!("EXISTS big after its TTL: {exists}"));
        step(
            &mut seen,
            &mut conn,
            &format!("after expiry, lazyfree-lazy-expire {lazy}"),
        );
    }

    // A command's own deletions (an overwrite, RENAME's and a STORE's destination, RESTORE
    // REPLACE) free in place, unless lazyfree-lazy-server-del.
    let _: () = redis::cmd("SADD")
        .arg("src")
        .arg("a")
        .arg("b")
        .query(&mut conn)
        .unwrap();
    let payload: Vec<u8> = redis::cmd("DUMP").arg("src").query(&mut conn).unwrap();
    for lazy in ["no", "yes"] {
        config_set(&mut conn, "lazyfree-lazy-server-del", lazy);
        let run =
            |seen: &mut Vec<String>, conn: &mut redis::Connection, what: &str, args: &[&[u8]]| {
                let _: i64 = redis::cmd("UNLINK").arg("big").query(conn).unwrap();
                step(seen, conn, &format!("before {what}"));
                big_set(conn, "big");
                let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
                for arg in &args[1..] {
                    cmd.arg(*arg);
                }
                let reply: redis::Value = cmd.query(conn).unwrap();
                seen.push(format!("{what}: {reply:?}"));
                step(
                    seen,
                    conn,
                    &format!("after {what}, lazyfree-lazy-server-del {lazy}"),
                );
            };
        run(&mut seen, &mut conn, "SET over it", &[b"SET", b"big", b"v"]);
        big_set(&mut conn, "big2");
        run(
            &mut seen,
            &mut conn,
            "RENAME onto it",
            &[b"RENAME", b"big2", b"big"],
        );
        run(
            &mut seen,
            &mut conn,
            "SUNIONSTORE into it",
            &[b"SUNIONSTORE", b"big", b"src"],
        );
        run(
            &mut seen,
            &mut conn,
            "SINTERSTORE of nothing into it",
            &[b"SINTERSTORE", b"big", b"src", b"missing"],
        );
        run(
            &mut seen,
            &mut conn,
            "RESTORE REPLACE over it",
            &[b"RESTORE", b"big", b"0", &payload, b"REPLACE"],
        );
        let _: i64 = redis::cmd("DEL")
            .arg("big")
            .arg("big2")
            .query(&mut conn)
            .unwrap();
    }

    // CONFIG RESETSTAT zeroes the count.
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut conn)
        .unwrap();
    step(&mut seen, &mut conn, "after RESETSTAT");
    seen
}

#[test]
fn unlink_and_async_flushes_free_in_the_background_as_in_redis() {
    let latch = scenario(&Server::latch(&[]));
    let redis = scenario(&Server::redis(&[]));
    assert_eq!(latch, redis);
    // And the scenario did see background frees (it would pass vacuously otherwise).
    assert!(
        latch
            .iter()
            .any(|line| line == "after UNLINK: lazyfreed_objects=1"),
        "{latch:#?}"
    );
}

/// UNLINK of a 1,000,000-member set answers at once: the freeing is the thread's.
#[test]
fn unlinking_a_huge_set_answers_at_once() {
    let server = Server::latch(&[]);
    let mut conn = connect(&server);
    for batch in 0..100 {
        let members: Vec<String> = (0..10_000).map(|i| format!("member-{batch}-{i}")).collect();
        let _: () = redis::cmd("SADD")
            .arg("huge")
            .arg(&members)
            .query(&mut conn)
            .unwrap();
    }
    let before = settled_freed(&mut conn);
    let started = Instant::now();
    let removed: i64 = redis::cmd("UNLINK").arg("huge").query(&mut conn).unwrap();
    let took = started.elapsed();
    assert_eq!(removed, 1);
    assert_eq!(settled_freed(&mut conn), before + 1);
    // Generous: a loaded test machine.
    assert!(took < Duration::from_millis(250), "UNLINK took {took:?}");
}

fn info(conn: &mut redis::Connection, section: &str, name: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg(section).query(conn).unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in INFO {section}"))
        .trim()
        .parse()
        .unwrap()
}

/// `lazyfree-lazy-eviction`: keys evicted under maxmemory go to the background thread
/// when it is on, and are freed in place when it is off.
#[test]
fn eviction_frees_in_the_background_with_lazyfree_lazy_eviction() {
    let server = Server::latch(&[]);
    let mut conn = connect(&server);
    for lazy in ["no", "yes"] {
        config_set(&mut conn, "maxmemory", 0);
        for i in 0..20 {
            big_set(&mut conn, &format!("set:{lazy}:{i}"));
        }
        let used = info(&mut conn, "memory", "used_memory");
        let freed_before = settled_freed(&mut conn);
        let evicted_before = info(&mut conn, "stats", "evicted_keys");
        for (name, value) in [
            ("lazyfree-lazy-eviction", lazy.to_string()),
            ("maxmemory-policy", "allkeys-random".to_string()),
            ("maxmemory", (used - 300_000).to_string()),
        ] {
            config_set(&mut conn, name, value);
        }
        // A write makes room first (with lazy frees it may take a few: a command whose
        // eviction ran out of time while frees were under way is refused).
        let deadline = Instant::now() + Duration::from_secs(5);
        while redis::cmd("SET")
            .arg("trigger")
            .arg("x")
            .query::<()>(&mut conn)
            .is_err()
        {
            assert!(Instant::now() < deadline, "still OOM (lazy {lazy})");
            std::thread::sleep(Duration::from_millis(5));
        }
        let evicted = info(&mut conn, "stats", "evicted_keys") - evicted_before;
        // About 300 KB over, in sets of about 30 KB: some evicted, not all 20 (the memory
        // they free must be seen as freed).
        assert!(
            (1..20).contains(&evicted),
            "{evicted} evicted (lazy {lazy})"
        );
        let freed = settled_freed(&mut conn) - freed_before;
        if lazy == "yes" {
            assert!(freed > 0, "{evicted} evicted, none freed in the background");
        } else {
            assert_eq!(freed, 0, "{evicted} evicted in place, yet lazily freed");
        }
    }
}
