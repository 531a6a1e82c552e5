//! INFO: sections, the fields clients and Redis' test suite read, RESP2 and RESP3 shapes.

mod common;

use common::{encode, read_line, TestServer};

fn info(conn: &mut redis::Connection, sections: &[&str]) -> String {
    let mut cmd = redis::cmd("INFO");
    for section in sections {
        cmd.arg(*section);
    }
    cmd.query(conn).unwrap()
}

/// The value of `name:` in an INFO text.
fn field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.split("\r\n").find_map(|line| {
        line.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(':'))
    })
}

fn headings(text: &str) -> Vec<&str> {
    text.split("\r\n")
        .filter(|line| line.starts_with("# "))
        .collect()
}

#[test]
fn default_all_and_single_sections() {
    let server = TestServer::start(&[]);
    let mut conn = server.client();
    let default = info(&mut conn, &[]);
    assert_eq!(
        headings(&default),
        [
            "# Server",
            "# Clients",
            "# Memory",
            "# Persistence",
            "# Stats",
            "# Replication",
            "# CPU",
            "# Modules",
            "# Errorstats",
            "# Cluster",
            "# Keyspace"
        ]
    );
    assert_eq!(
        info(&mut conn, &["default"]).split("\r\n").count(),
        default.split("\r\n").count()
    );
    // Sections are separated by one empty line; the text ends with CRLF.
    assert!(default.contains("\r\n\r\n# Clients\r\n"));
    assert!(default.ends_with("\r\n"));
    assert!(!default.contains("rejected_calls"));

    for everything in ["all", "everything", "ALL"] {
        let text = info(&mut conn, &[everything]);
        assert!(headings(&text).contains(&"# Commandstats"), "{everything}");
        assert!(headings(&text).contains(&"# Latencystats"), "{everything}");
        assert!(text.contains("rejected_calls"));
    }
    let cpu = info(&mut conn, &["cpu"]);
    assert_eq!(headings(&cpu), ["# CPU"]);
    assert!(field(&cpu, "used_cpu_user").is_some());
    assert_eq!(info(&mut conn, &["sentinel"]), "");
    // Several sections, each once, in Redis' order whatever the order asked.
    let two = info(&mut conn, &["keyspace", "CPU", "cpu", "server"]);
    assert_eq!(headings(&two), ["# Server", "# CPU", "# Keyspace"]);
    let mixed = info(&mut conn, &["cpu", "default"]);
    assert_eq!(mixed.matches("used_cpu_user_children").count(), 1);
}

#[test]
fn server_clients_and_replication_fields() {
    let server = TestServer::start(&[]);
    let mut conn = server.client();
    let text = info(&mut conn, &["server", "clients", "replication", "memory"]);
    assert_eq!(field(&text, "redis_version"), Some("7.0.15"));
    assert_eq!(field(&text, "redis_mode"), Some("standalone"));
    assert_eq!(
        field(&text, "tcp_port"),
        Some(server.port.to_string().as_str())
    );
    assert_eq!(
        field(&text, "process_id"),
        Some(server.pid().to_string().as_str())
    );
    assert_eq!(field(&text, "run_id").map(str::len), Some(40));
    assert!(field(&text, "executable").is_some_and(|e| e.ends_with("latch-server")));
    assert_eq!(field(&text, "connected_clients"), Some("1"));
    assert_eq!(field(&text, "role"), Some("master"));
    assert_eq!(field(&text, "connected_slaves"), Some("0"));
    assert_eq!(field(&text, "master_replid").map(str::len), Some(40));
    let used: u64 = field(&text, "used_memory").unwrap().parse().unwrap();
    assert!(used > 0);
    assert!(field(&text, "used_memory_human").is_some_and(|h| h.ends_with(['K', 'M', 'G'])));
    assert_eq!(field(&text, "maxmemory"), Some("0"));
    assert!(field(&text, "mem_fragmentation_ratio").is_some());
    let _other = server.client();
    let text = info(&mut conn, &["clients"]);
    assert_eq!(field(&text, "connected_clients"), Some("2"));
}

#[test]
fn stats_commandstats_and_errorstats() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(&[b"CONFIG", b"RESETSTAT"], b"+OK\r\n");
    raw.expect(&[b"SET", b"k", b"v"], b"+OK\r\n");
    raw.expect(&[b"GET", b"k"], b"$1\r\nv\r\n");
    raw.expect(&[b"GET", b"missing"], b"$-1\r\n");
    raw.expect(
        &[b"GET"],
        b"-ERR wrong number of arguments for 'get' command\r\n",
    );
    raw.expect(
        &[b"INCR", b"k"],
        b"-ERR value is not an integer or out of range\r\n",
    );
    raw.expect(
        &[b"CONFIG", b"GET", b"maxmemory"],
        b"*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n",
    );
    let mut conn = server.client();
    let text = info(&mut conn, &["commandstats"]);
    let get = field(&text, "cmdstat_get").expect("cmdstat_get");
    assert!(get.starts_with("calls=2,usec="), "{get}");
    assert!(get.ends_with(",rejected_calls=1,failed_calls=0"), "{get}");
    let incr = field(&text, "cmdstat_incr").expect("cmdstat_incr");
    assert!(incr.ends_with(",rejected_calls=0,failed_calls=1"), "{incr}");
    assert!(field(&text, "cmdstat_config|get").is_some(), "{text}");
    assert!(field(&text, "cmdstat_zadd").is_none());

    let text = info(&mut conn, &["errorstats", "stats"]);
    assert_eq!(field(&text, "errorstat_ERR"), Some("count=2"));
    assert_eq!(field(&text, "total_error_replies"), Some("2"));
    assert_eq!(field(&text, "keyspace_hits"), Some("1"));
    assert_eq!(field(&text, "keyspace_misses"), Some("1"));
    let processed: u64 = field(&text, "total_commands_processed")
        .unwrap()
        .parse()
        .unwrap();
    assert!(processed >= 5);
    assert!(field(&text, "instantaneous_ops_per_sec").is_some());
}

#[test]
fn keyspace_and_persistence() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    let mut conn = server.client();
    let before: u64 = field(
        &info(&mut conn, &["persistence"]),
        "rdb_changes_since_last_save",
    )
    .unwrap()
    .parse()
    .unwrap();
    raw.expect(&[b"SET", b"a", b"1"], b"+OK\r\n");
    raw.expect(&[b"SET", b"b", b"2", b"EX", b"100"], b"+OK\r\n");
    raw.expect(&[b"SELECT", b"3"], b"+OK\r\n");
    raw.expect(&[b"SET", b"c", b"3"], b"+OK\r\n");
    let after: u64 = field(
        &info(&mut conn, &["persistence"]),
        "rdb_changes_since_last_save",
    )
    .unwrap()
    .parse()
    .unwrap();
    assert_eq!(after, before + 3);
    let text = info(&mut conn, &["keyspace"]);
    let db0 = field(&text, "db0").expect("db0");
    assert!(db0.starts_with("keys=2,expires=1,avg_ttl="), "{db0}");
    let avg_ttl: i64 = db0.rsplit('=').next().unwrap().parse().unwrap();
    assert!((90_000..=100_000).contains(&avg_ttl), "{avg_ttl}");
    assert_eq!(field(&text, "db3"), Some("keys=1,expires=0,avg_ttl=0"));
    assert!(field(&text, "db1").is_none());
}

#[test]
fn info_is_verbatim_in_resp3() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.send(&encode(&[b"INFO", b"cluster"]));
    assert_eq!(read_line(&mut raw), "$30\r\n");
    assert_eq!(raw.read_n(32), b"# Cluster\r\ncluster_enabled:0\r\n\r\n");
    raw.send(&encode(&[b"HELLO", b"3"]));
    while read_line(&mut raw) != "modules\r\n" {}
    assert_eq!(read_line(&mut raw), "*0\r\n");
    raw.expect(
        &[b"INFO", b"cluster"],
        b"=34\r\ntxt:# Cluster\r\ncluster_enabled:0\r\n\r\n",
    );
}

/// A key found expired (or a hit, or a miss) by a command run inside another one, a script's
/// `redis.call` or a queued command of EXEC, counts once, as in redis-server 7.0.15 (Latch
/// counted it again for the command around it).
#[test]
fn lookups_inside_scripts_and_transactions_count_once() {
    let server = TestServer::start(&[]);
    let mut c = server.client();
    let stat = |c: &mut redis::Connection, name: &str| -> u64 {
        field(&info(c, &["stats"]), name).unwrap().parse().unwrap()
    };
    redis::cmd("DEBUG")
        .arg("SET-ACTIVE-EXPIRE")
        .arg(0)
        .query::<()>(&mut c)
        .unwrap();
    for key in ["in-script", "in-script-ro", "in-multi"] {
        redis::cmd("SET")
            .arg(key)
            .arg("v")
            .arg("PX")
            .arg(1)
            .query::<()>(&mut c)
            .unwrap();
    }
    redis::cmd("SET")
        .arg("live")
        .arg("v")
        .query::<()>(&mut c)
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let get = "return redis.call('GET', KEYS[1])";
    let _: Option<String> = redis::cmd("EVAL")
        .arg(get)
        .arg(1)
        .arg("in-script")
        .query(&mut c)
        .unwrap();
    assert_eq!(stat(&mut c, "expired_keys"), 1);
    let (hits, misses) = (
        stat(&mut c, "keyspace_hits"),
        stat(&mut c, "keyspace_misses"),
    );
    // EVAL_RO is a read-only command, whose own hits and misses Redis counts.
    let _: Option<String> = redis::cmd("EVAL_RO")
        .arg(get)
        .arg(1)
        .arg("in-script-ro")
        .query(&mut c)
        .unwrap();
    let _: Option<String> = redis::cmd("EVAL_RO")
        .arg(get)
        .arg(1)
        .arg("live")
        .query(&mut c)
        .unwrap();
    assert_eq!(stat(&mut c, "expired_keys"), 2);
    assert_eq!(stat(&mut c, "keyspace_misses"), misses + 1);
    assert_eq!(stat(&mut c, "keyspace_hits"), hits + 1);
    let _: Vec<Option<String>> = redis::pipe()
        .atomic()
        .cmd("GET")
        .arg("in-multi")
        .query(&mut c)
        .unwrap();
    assert_eq!(stat(&mut c, "expired_keys"), 3);
}
