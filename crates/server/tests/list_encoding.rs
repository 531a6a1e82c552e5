//! Lists in their packed form (`latch_keyspace::List`, packs in a deque): every list
//! command's reply compared with redis-server 7.0's (Debian's package) while nodes split
//! and merge under small `list-max-listpack-size` values, with elements larger than a
//! node; lists surviving SAVE and a restart; DUMP payloads crossing between the two
//! servers both ways; and the memory a small list takes.

use latch_testkit::Server;

fn connect(server: &Server) -> redis::Connection {
    redis::Client::open(server.url())
        .and_then(|client| client.get_connection())
        .unwrap()
}

/// A reply as comparable text: errors too (their message is part of the reply).
fn call(conn: &mut redis::Connection, args: &[Vec<u8>]) -> String {
    let mut cmd = redis::cmd(std::str::from_utf8(&args[0]).unwrap());
    for arg in &args[1..] {
        cmd.arg(&arg[..]);
    }
    match cmd.query::<redis::Value>(conn) {
        Ok(value) => format!("{value:?}"),
        Err(e) => format!("error: {e}"),
    }
}

fn args(parts: &[&str]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.as_bytes().to_vec()).collect()
}

/// A small deterministic generator (the same script for both servers).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.next(items.len() as u64) as usize]
    }
}

/// An element: mostly small (integers and short strings, so LREM/LPOS find matches), some
/// of hundreds of bytes, a few larger than any node.
fn element(rng: &mut Lcg) -> String {
    match rng.next(20) {
        0 => "L".repeat(9000 + rng.next(3) as usize),
        1..=2 => format!("{}{}", "m".repeat(300), rng.next(4)),
        3..=9 => rng.next(8).to_string(),
        10 => (-70000 - rng.next(3) as i64).to_string(),
        _ => ["a", "b", "c", "0x1", "007"][rng.next(5) as usize].to_string(),
    }
}

fn index(rng: &mut Lcg) -> String {
    (rng.next(60) as i64 - 30).to_string()
}

/// One random list command on `l1` or `l2`.
fn command(rng: &mut Lcg) -> Vec<Vec<u8>> {
    let key = rng.pick(&["l1", "l2"]);
    let other = rng.pick(&["l1", "l2", "l3"]);
    let mut cmd: Vec<String> = match rng.next(22) {
        0..=2 => vec!["RPUSH".into(), key.into()],
        3..=5 => vec!["LPUSH".into(), key.into()],
        6 => vec!["LPOP".into(), key.into()],
        7 => vec!["RPOP".into(), key.into(), rng.next(4).to_string()],
        8 => vec!["LINDEX".into(), key.into(), index(rng)],
        9 => vec!["LSET".into(), key.into(), index(rng), element(rng)],
        10 => vec![
            "LINSERT".into(),
            key.into(),
            rng.pick(&["BEFORE", "AFTER"]).into(),
            element(rng),
            element(rng),
        ],
        11 => vec![
            "LREM".into(),
            key.into(),
            (rng.next(7) as i64 - 3).to_string(),
            element(rng),
        ],
        12 => vec!["LTRIM".into(), key.into(), index(rng), index(rng)],
        13 | 14 => vec!["LRANGE".into(), key.into(), index(rng), index(rng)],
        15 => {
            let mut c = vec!["LPOS".into(), key.into(), element(rng)];
            if rng.next(2) == 0 {
                c.extend(["RANK".into(), (rng.next(7) as i64 - 3).to_string()]);
            }
            if rng.next(2) == 0 {
                c.extend(["COUNT".into(), rng.next(4).to_string()]);
            }
            if rng.next(2) == 0 {
                c.extend(["MAXLEN".into(), rng.next(30).to_string()]);
            }
            c
        }
        16 => vec![
            "LMOVE".into(),
            key.into(),
            other.into(),
            rng.pick(&["LEFT", "RIGHT"]).into(),
            rng.pick(&["LEFT", "RIGHT"]).into(),
        ],
        17 => vec!["LLEN".into(), key.into()],
        18 => vec!["SORT".into(), key.into(), "ALPHA".into()],
        19 => vec![
            "LMPOP".into(),
            "2".into(),
            key.into(),
            other.into(),
            rng.pick(&["LEFT", "RIGHT"]).into(),
            "COUNT".into(),
            (rng.next(5) + 1).to_string(),
        ],
        20 => vec!["OBJECT".into(), "ENCODING".into(), key.into()],
        _ => vec!["LRANGE".into(), key.into(), "0".into(), "-1".into()],
    };
    if matches!(cmd[0].as_str(), "RPUSH" | "LPUSH") {
        for _ in 0..=rng.next(6) {
            cmd.push(element(rng));
        }
    }
    cmd.into_iter().map(String::into_bytes).collect()
}

#[test]
fn replies_match_redis_across_node_boundaries() {
    let latch = Server::latch(&[]);
    let redis = Server::redis(&[]);
    let (mut l, mut r) = (connect(&latch), connect(&redis));
    let rounds = [
        ("1", "0"),
        ("2", "0"),
        ("3", "0"),
        ("-1", "0"),
        ("7", "0"),
        ("-2", "0"),
        // Inner nodes compressed (list-compress-depth), with nodes of several sizes.
        ("-1", "1"),
        ("7", "2"),
        ("-2", "1"),
    ];
    for (round, (size, depth)) in rounds.iter().enumerate() {
        let setup = [
            args(&["FLUSHALL"]),
            args(&["CONFIG", "SET", "list-max-listpack-size", size]),
            args(&["CONFIG", "SET", "list-compress-depth", depth]),
        ];
        for cmd in &setup {
            assert_eq!(call(&mut l, cmd), call(&mut r, cmd));
        }
        let mut rng = Lcg(round as u64 * 7919 + 1);
        for step in 0..1500 {
            let cmd = command(&mut rng);
            let (want, have) = (call(&mut r, &cmd), call(&mut l, &cmd));
            assert_eq!(
                have,
                want,
                "size {size}, depth {depth}, step {step}: {:?}",
                cmd.iter()
                    .map(|a| String::from_utf8_lossy(&a[..a.len().min(40)]).into_owned())
                    .collect::<Vec<_>>()
            );
        }
        // Whole lists agree at the end, too.
        for key in ["l1", "l2", "l3"] {
            let cmd = args(&["LRANGE", key, "0", "-1"]);
            assert_eq!(call(&mut l, &cmd), call(&mut r, &cmd), "size {size}");
        }
    }
}

/// Lists of every shape: small, many nodes, elements larger than a node.
fn fill(conn: &mut redis::Connection) -> Vec<(String, Vec<Vec<u8>>)> {
    let mut lists = Vec::new();
    let shapes: Vec<(&str, Vec<String>)> = vec![
        ("small", (0..10).map(|i| format!("item-{i}")).collect()),
        (
            "ints",
            (0..3000).map(|i| (i * 37 - 5000).to_string()).collect(),
        ),
        (
            "mixed",
            (0..1000)
                .map(|i| match i % 5 {
                    0 => "big".repeat(4000 + i),
                    1 => i.to_string(),
                    _ => format!("element {i} {}", "x".repeat(i % 90)),
                })
                .collect(),
        ),
        ("huge", vec!["h".repeat(100_000)]),
    ];
    for (key, items) in shapes {
        let mut cmd = redis::cmd("RPUSH");
        cmd.arg(key);
        for item in &items {
            cmd.arg(item);
        }
        let len: usize = cmd.query(conn).unwrap();
        assert_eq!(len, items.len());
        lists.push((
            key.to_string(),
            items.into_iter().map(String::into_bytes).collect(),
        ));
    }
    lists
}

fn lrange(conn: &mut redis::Connection, key: &str) -> Vec<Vec<u8>> {
    redis::cmd("LRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query(conn)
        .unwrap()
}

/// DUMP of `key` on `from`, RESTOREd as `copy` on `to`.
fn copy_by_dump(from: &mut redis::Connection, key: &str, to: &mut redis::Connection, copy: &str) {
    let payload: Vec<u8> = redis::cmd("DUMP").arg(key).query(from).unwrap();
    let _: () = redis::cmd("RESTORE")
        .arg(copy)
        .arg(0)
        .arg(payload)
        .query(to)
        .unwrap();
}

#[test]
fn lists_survive_save_and_restart() {
    for depth in ["0", "1"] {
        let mut latch = Server::latch(&[]);
        let mut conn = connect(&latch);
        for (name, value) in [
            ("list-max-listpack-size", "5"),
            ("list-compress-depth", depth),
        ] {
            let _: () = redis::cmd("CONFIG")
                .arg("SET")
                .arg(name)
                .arg(value)
                .query(&mut conn)
                .unwrap();
        }
        let lists = fill(&mut conn);
        let _: () = redis::cmd("SAVE").query(&mut conn).unwrap();
        drop(conn);
        // Loaded back with compression on, too.
        latch.restart(&["--list-compress-depth", "2"]);
        let mut conn = connect(&latch);
        for (key, items) in &lists {
            assert_eq!(&lrange(&mut conn, key), items, "depth {depth}: {key}");
        }
    }
}

/// `list-compress-depth`: inner nodes of a long list take a fraction of their bytes, the
/// nodes at the ends stay as they are, and a file written from compressed nodes loads in
/// redis-server.
#[test]
fn compressed_lists_are_smaller_and_load_in_redis() {
    let latch = Server::latch(&[]);
    let redis = Server::redis(&[]);
    let (mut l, mut r) = (connect(&latch), connect(&redis));
    let items: Vec<String> = (0..20_000).map(|i| format!("event:{i}:ok")).collect();
    let mut usage = Vec::new();
    for depth in ["0", "1"] {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("list-compress-depth")
            .arg(depth)
            .query(&mut l)
            .unwrap();
        let key = format!("events:{depth}");
        let mut cmd = redis::cmd("RPUSH");
        cmd.arg(&key).arg(&items);
        let _: usize = cmd.query(&mut l).unwrap();
        let bytes: usize = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(&key)
            .arg("SAMPLES")
            .arg(0)
            .query(&mut l)
            .unwrap();
        usage.push(bytes);
        // Reads at both ends and in the middle.
        let middle: String = redis::cmd("LINDEX")
            .arg(&key)
            .arg(10_000)
            .query(&mut l)
            .unwrap();
        assert_eq!(middle, items[10_000]);
        let range: Vec<String> = redis::cmd("LRANGE")
            .arg(&key)
            .arg(9_990)
            .arg(10_009)
            .query(&mut l)
            .unwrap();
        assert_eq!(range, items[9_990..10_010]);
        copy_by_dump(&mut l, &key, &mut r, &key);
        let copied = lrange(&mut r, &key);
        assert!(
            copied.iter().eq(items.iter().map(|item| item.as_bytes())),
            "depth {depth}"
        );
    }
    assert!(usage[1] * 2 < usage[0], "MEMORY USAGE {usage:?}");
}

#[test]
fn dump_payloads_cross_between_latch_and_redis() {
    let latch = Server::latch(&[]);
    let redis = Server::redis(&[]);
    let (mut l, mut r) = (connect(&latch), connect(&redis));
    let lists = fill(&mut l);
    for (key, items) in &lists {
        let copy = format!("{key}:copy");
        copy_by_dump(&mut l, key, &mut r, &copy);
        assert_eq!(&lrange(&mut r, &copy), items, "latch to redis: {key}");
    }
    let lists = fill(&mut r);
    for (key, items) in &lists {
        let copy = format!("{key}:back");
        copy_by_dump(&mut r, key, &mut l, &copy);
        assert_eq!(&lrange(&mut l, &copy), items, "redis to latch: {key}");
        // And the restored list works on: pops from both ends, then an edit inside.
        let head: Option<Vec<u8>> = redis::cmd("LPOP").arg(&copy).query(&mut l).unwrap();
        assert_eq!(head.as_ref(), items.first());
        let len: usize = redis::cmd("LLEN").arg(&copy).query(&mut l).unwrap();
        assert_eq!(len, items.len() - 1);
    }
}

#[test]
fn a_small_list_is_one_small_allocation() {
    let latch = Server::latch(&[]);
    let mut conn = connect(&latch);
    let mut cmd = redis::cmd("RPUSH");
    cmd.arg("list:12345");
    for i in 0..10 {
        cmd.arg(format!("item-{i}-12345"));
    }
    let _: usize = cmd.query(&mut conn).unwrap();
    let usage: usize = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("list:12345")
        .query(&mut conn)
        .unwrap();
    // The pack is 8 bytes of header and 13 per item; the rest is the key's slot.
    assert!(usage < 250, "MEMORY USAGE {usage}");
    let encoding: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg("list:12345")
        .query(&mut conn)
        .unwrap();
    assert_eq!(encoding, "quicklist");
}
