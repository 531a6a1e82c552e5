//! COMMAND, DEBUG, SLOWLOG, LATENCY, MEMORY, TIME, LASTSAVE, MONITOR, FUNCTION and SHUTDOWN.

mod common;

use std::time::Duration;

use common::{encode, read_line, RawConn, TestServer};

/// The RESP3 handshake, whose reply (with the connection id) is skipped.
fn hello3(conn: &mut RawConn) {
    conn.send(&encode(&[b"HELLO", b"3"]));
    // %7 header, then 7 pairs; `modules` (an empty array) ends it.
    loop {
        let line = read_line(conn);
        assert!(!line.is_empty(), "connection closed during HELLO");
        if line == "modules\r\n" {
            assert_eq!(read_line(conn), "*0\r\n");
            return;
        }
    }
}

const GET_INFO: &[u8] = b"*1\r\n*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n*3\r\n+@read\r\n+@string\r\n+@fast\r\n*0\r\n*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+RO\r\n+access\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n";

const SETNX_INFO_RESP3: &[u8] = b"*1\r\n*10\r\n$5\r\nsetnx\r\n:3\r\n~3\r\n+write\r\n+denyoom\r\n+fast\r\n:1\r\n:1\r\n:1\r\n~3\r\n+@write\r\n+@string\r\n+@fast\r\n~0\r\n~1\r\n%3\r\n$5\r\nflags\r\n~2\r\n+OW\r\n+insert\r\n$12\r\nbegin_search\r\n%2\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n%1\r\n$5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n%2\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n%3\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n~0\r\n";

/// COMMAND DOCS setnx: the summary is ours, every other field is Redis' (7.2 deprecation).
fn setnx_docs(resp3: bool) -> Vec<u8> {
    let (outer, docs, set1, key_arg, value_arg) = if resp3 {
        ("%1", "%8", "~1", "%3", "%2")
    } else {
        ("*2", "*16", "*1", "*6", "*4")
    };
    format!(
        "{outer}\r\n$5\r\nsetnx\r\n{docs}\r\n$7\r\nsummary\r\n$62\r\nStores a string at a key only when the key does not exist yet.\r\n$5\r\nsince\r\n$5\r\n1.0.0\r\n$5\r\ngroup\r\n$6\r\nstring\r\n$10\r\ncomplexity\r\n$4\r\nO(1)\r\n$9\r\ndoc_flags\r\n{set1}\r\n+deprecated\r\n$16\r\ndeprecated_since\r\n$6\r\n2.6.12\r\n$11\r\nreplaced_by\r\n$28\r\n`SET` with the `NX` argument\r\n$9\r\narguments\r\n*2\r\n{key_arg}\r\n$4\r\nname\r\n$3\r\nkey\r\n$4\r\ntype\r\n$3\r\nkey\r\n$14\r\nkey_spec_index\r\n:0\r\n{value_arg}\r\n$4\r\nname\r\n$5\r\nvalue\r\n$4\r\ntype\r\n$6\r\nstring\r\n"
    )
    .into_bytes()
}

#[test]
fn command_info_and_docs_exact() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(&[b"COMMAND", b"INFO", b"get"], GET_INFO);
    raw.expect(&[b"COMMAND", b"INFO", b"GET"], GET_INFO);
    raw.expect(
        &[
            b"COMMAND",
            b"INFO",
            b"nosuch",
            b"get|key",
            b"config|get|key",
        ],
        b"*3\r\n$-1\r\n$-1\r\n$-1\r\n",
    );
    raw.expect(&[b"COMMAND", b"DOCS", b"setnx"], &setnx_docs(false));
    raw.expect(&[b"COMMAND", b"DOCS", b"nosuch"], b"*0\r\n");
    hello3(&mut raw);
    raw.expect(&[b"COMMAND", b"INFO", b"setnx"], SETNX_INFO_RESP3);
    raw.expect(
        &[b"COMMAND", b"DOCS", b"setnx", b"nosuch"],
        &setnx_docs(true),
    );
    raw.expect(&[b"COMMAND", b"INFO", b"nosuch"], b"*1\r\n_\r\n");
}

#[test]
fn command_info_of_containers_and_subcommands() {
    let server = TestServer::start(&[]);
    let mut conn = server.client();
    let info: redis::Value = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("client|kill")
        .query(&mut conn)
        .unwrap();
    let redis::Value::Array(entries) = info else {
        panic!("{info:?}")
    };
    let redis::Value::Array(entry) = &entries[0] else {
        panic!()
    };
    assert_eq!(entry[0], redis::Value::BulkString(b"client|kill".to_vec()));
    assert_eq!(entry[1], redis::Value::Int(-3));
    // A container lists its subcommands' entries.
    let info: redis::Value = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("client")
        .query(&mut conn)
        .unwrap();
    let redis::Value::Array(entries) = info else {
        panic!()
    };
    let redis::Value::Array(entry) = &entries[0] else {
        panic!()
    };
    let redis::Value::Array(subs) = &entry[9] else {
        panic!("{:?}", entry[9])
    };
    assert!(subs.len() >= 14);
    // Every command's entry has 10 fields.
    let all: Vec<redis::Value> = redis::cmd("COMMAND").arg("INFO").query(&mut conn).unwrap();
    let count: usize = redis::cmd("COMMAND").arg("COUNT").query(&mut conn).unwrap();
    assert_eq!(all.len(), count);
    for entry in &all {
        let redis::Value::Array(fields) = entry else {
            panic!()
        };
        assert_eq!(fields.len(), 10);
    }
}

#[test]
fn command_list_and_getkeys() {
    let server = TestServer::start(&[]);
    let mut conn = server.client();
    let all: Vec<String> = redis::cmd("COMMAND").arg("LIST").query(&mut conn).unwrap();
    assert!(all.iter().any(|c| c == "get"));
    assert!(all.iter().any(|c| c == "client|list"));
    let clients: Vec<String> = redis::cmd("COMMAND")
        .arg("LIST")
        .arg("FILTERBY")
        .arg("PATTERN")
        .arg("client|*")
        .query(&mut conn)
        .unwrap();
    assert!(clients.iter().all(|c| c.starts_with("client|")));
    assert!(clients.iter().any(|c| c == "client|kill"));
    let exact: Vec<String> = redis::cmd("COMMAND")
        .arg("LIST")
        .arg("FILTERBY")
        .arg("pattern")
        .arg("GET")
        .query(&mut conn)
        .unwrap();
    assert_eq!(exact, vec!["get".to_string()]);
    let connection: Vec<String> = redis::cmd("COMMAND")
        .arg("LIST")
        .arg("FILTERBY")
        .arg("ACLCAT")
        .arg("Connection")
        .query(&mut conn)
        .unwrap();
    assert!(connection.iter().any(|c| c == "hello"));
    assert!(!connection.iter().any(|c| c == "get"));

    let mut raw = server.raw();
    raw.expect(
        &[b"COMMAND", b"LIST", b"FILTERBY", b"ACLCAT", b"nope"],
        b"*0\r\n",
    );
    raw.expect(
        &[b"COMMAND", b"LIST", b"FILTERBY", b"MODULE", b"any"],
        b"*0\r\n",
    );
    raw.expect(&[b"COMMAND", b"LIST", b"bad"], b"-ERR syntax error\r\n");
    raw.expect(
        &[b"COMMAND", b"LIST", b"FILTERBY", b"bad", b"x"],
        b"-ERR syntax error\r\n",
    );
    raw.expect(
        &[b"COMMAND", b"LIST", b"FILTERBY", b"PATTERN"],
        b"-ERR syntax error\r\n",
    );

    raw.expect(
        &[b"COMMAND", b"GETKEYS", b"get", b"key"],
        b"*1\r\n$3\r\nkey\r\n",
    );
    raw.expect(
        &[b"COMMAND", b"GETKEYS", b"MEMORY", b"USAGE", b"key"],
        b"*1\r\n$3\r\nkey\r\n",
    );
    raw.expect(
        &[b"COMMAND", b"GETKEYS", b"mset", b"a", b"1", b"b", b"2"],
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
    );
    raw.expect(
        &[b"COMMAND", b"GETKEYS", b"nosuch", b"x"],
        b"-ERR Invalid command specified\r\n",
    );
    raw.expect(
        &[b"COMMAND", b"GETKEYS", b"ping", b"x"],
        b"-ERR The command has no key arguments\r\n",
    );
    raw.expect(
        &[b"COMMAND", b"GETKEYS", b"get", b"a", b"b"],
        b"-ERR Invalid number of arguments specified for command\r\n",
    );
    raw.expect(
        &[b"COMMAND", b"GETKEYS", b"get"],
        b"-ERR wrong number of arguments for 'command|getkeys' command\r\n",
    );
    raw.expect(
        &[b"COMMAND", b"GETKEYSANDFLAGS", b"set", b"k1", b"v1"],
        b"*1\r\n*2\r\n$2\r\nk1\r\n*2\r\n+OW\r\n+update\r\n",
    );
    raw.expect(
        &[b"COMMAND", b"GETKEYSANDFLAGS", b"set", b"k1", b"v1", b"get"],
        b"*1\r\n*2\r\n$2\r\nk1\r\n*3\r\n+RW\r\n+access\r\n+update\r\n",
    );
    raw.expect(
        &[b"COMMAND", b"GETKEYSANDFLAGS", b"mset", b"k1", b"v1", b"k2", b"v2"],
        b"*2\r\n*2\r\n$2\r\nk1\r\n*2\r\n+OW\r\n+update\r\n*2\r\n$2\r\nk2\r\n*2\r\n+OW\r\n+update\r\n",
    );
    raw.send(&encode(&[b"COMMAND", b"HELP"]));
    assert!(read_line(&mut raw).starts_with('*'));
    assert_eq!(
        read_line(&mut raw),
        "+COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n"
    );
}

#[test]
fn debug_protocol_replies() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    let cases: &[(&[u8], &[u8], &[u8])] = &[
        (b"string", b"$11\r\nHello World\r\n", b"$11\r\nHello World\r\n"),
        (b"integer", b":12345\r\n", b":12345\r\n"),
        (b"double", b"$5\r\n3.141\r\n", b",3.141\r\n"),
        (b"bignum", b"$37\r\n1234567999999999999999999999999999999\r\n", b"(1234567999999999999999999999999999999\r\n"),
        (b"null", b"$-1\r\n", b"_\r\n"),
        (b"array", b"*3\r\n:0\r\n:1\r\n:2\r\n", b"*3\r\n:0\r\n:1\r\n:2\r\n"),
        (b"set", b"*3\r\n:0\r\n:1\r\n:2\r\n", b"~3\r\n:0\r\n:1\r\n:2\r\n"),
        (b"map", b"*6\r\n:0\r\n:0\r\n:1\r\n:1\r\n:2\r\n:0\r\n", b"%3\r\n:0\r\n#f\r\n:1\r\n#t\r\n:2\r\n#f\r\n"),
        (
            b"attrib",
            b"$39\r\nSome real reply following the attribute\r\n",
            b"|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n$39\r\nSome real reply following the attribute\r\n",
        ),
        (b"true", b":1\r\n", b"#t\r\n"),
        (b"false", b":0\r\n", b"#f\r\n"),
        (b"verbatim", b"$25\r\nThis is a verbatim\nstring\r\n", b"=29\r\ntxt:This is a verbatim\nstring\r\n"),
        (
            b"push",
            b"-ERR RESP2 is not supported by this command\r\n",
            b">2\r\n$16\r\nserver-cpu-usage\r\n:42\r\n$40\r\nSome real reply following the push reply\r\n",
        ),
    ];
    for (name, resp2, _) in cases {
        raw.expect(&[b"DEBUG", b"PROTOCOL", name], resp2);
    }
    hello3(&mut raw);
    for (name, _, resp3) in cases {
        raw.expect(&[b"DEBUG", b"PROTOCOL", name], resp3);
    }
    raw.expect(&[b"DEBUG", b"PROTOCOL", b"nope"], b"-ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false\r\n");
}

#[test]
fn debug_object_sleep_and_unknown() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(&[b"SET", b"s", b"hello"], b"+OK\r\n");
    raw.expect(&[b"SET", b"n", b"123"], b"+OK\r\n");
    raw.send(&encode(&[b"DEBUG", b"OBJECT", b"s"]));
    let line = read_line(&mut raw);
    assert!(line.starts_with("+Value at:0x"), "{line}");
    assert!(
        line.contains(" refcount:1 encoding:embstr serializedlength:6 lru:"),
        "{line}"
    );
    assert!(line.ends_with(" lru_seconds_idle:0\r\n"), "{line}");
    raw.send(&encode(&[b"DEBUG", b"OBJECT", b"n"]));
    let line = read_line(&mut raw);
    assert!(
        line.contains(" refcount:2147483647 encoding:int serializedlength:2 "),
        "{line}"
    );
    raw.expect(&[b"DEBUG", b"OBJECT", b"missing"], b"-ERR no such key\r\n");
    raw.expect(&[b"DEBUG", b"SLEEP", b"0"], b"+OK\r\n");
    raw.expect(&[b"DEBUG", b"SLEEP", b"0.01"], b"+OK\r\n");
    raw.expect(&[b"DEBUG", b"SET-ACTIVE-EXPIRE", b"0"], b"+OK\r\n");
    raw.expect(&[b"DEBUG", b"SET-ACTIVE-EXPIRE", b"1"], b"+OK\r\n");
    raw.expect(&[b"DEBUG", b"CHANGE-REPL-ID"], b"+OK\r\n");
    raw.expect(&[b"DEBUG", b"LOG", b"hello"], b"+OK\r\n");
    raw.expect(
        &[b"DEBUG", b"NOPE"],
        b"-ERR unknown subcommand or wrong number of arguments for 'NOPE'. Try DEBUG HELP.\r\n",
    );
    raw.expect(
        &[b"DEBUG", b"SLEEP"],
        b"-ERR unknown subcommand or wrong number of arguments for 'SLEEP'. Try DEBUG HELP.\r\n",
    );
}

#[test]
fn debug_clocks_move_ttls() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(&[b"SET", b"relative", b"v", b"PX", b"10000"], b"+OK\r\n");
    let mut conn = server.client();
    let (now_s, _): (i64, i64) = redis::cmd("TIME").query(&mut conn).unwrap();
    let at = (now_s + 10).to_string();
    raw.expect(
        &[b"SET", b"absolute", b"v", b"EXAT", at.as_bytes()],
        b"+OK\r\n",
    );
    // The wall clock jumps a minute: only the absolute deadline passes.
    raw.expect(&[b"DEBUG", b"JUMP-CLOCK", b"60000"], b"+OK\r\n");
    raw.expect(&[b"GET", b"absolute"], b"$-1\r\n");
    raw.expect(&[b"GET", b"relative"], b"$1\r\nv\r\n");
    // TIME follows the wall clock.
    let (later_s, _): (i64, i64) = redis::cmd("TIME").query(&mut conn).unwrap();
    assert!(later_s >= now_s + 59, "{later_s} vs {now_s}");
    // Time passing moves both clocks.
    raw.expect(&[b"DEBUG", b"ADVANCE-CLOCK", b"10001"], b"+OK\r\n");
    raw.expect(&[b"GET", b"relative"], b"$-1\r\n");
    raw.expect(
        &[b"DEBUG", b"ADVANCE-CLOCK", b"soon"],
        b"-ERR value is not an integer or out of range\r\n",
    );
}

#[test]
fn memory_usage_matches_redis_estimates() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    // The numbers Redis 7.0 (jemalloc) reports for the same keys.
    let long45 = vec![b'x'; 45];
    let long1000 = vec![b'x'; 1000];
    let embstr44 = vec![b'x'; 44];
    let cases: &[(&[u8], &[u8], &[u8])] = &[
        (b"foo", b"bar", b":64\r\n"),
        (b"foo", b"12345", b":48\r\n"),
        (b"foo", &embstr44, b":96\r\n"),
        (b"foo", &long45, b":112\r\n"),
        (b"foo", &long1000, b":1072\r\n"),
        (b"k12345678901", b"bar", b":72\r\n"),
    ];
    for (key, value, expected) in cases {
        raw.expect(&[b"SET", key, value], b"+OK\r\n");
        raw.expect(&[b"MEMORY", b"USAGE", key], expected);
    }
    raw.expect(&[b"MEMORY", b"USAGE", b"nokey"], b"$-1\r\n");
    raw.expect(&[b"SET", b"foo", b"bar"], b"+OK\r\n");
    raw.expect(&[b"MEMORY", b"USAGE", b"foo", b"SAMPLES", b"5"], b":64\r\n");
    raw.expect(
        &[b"MEMORY", b"USAGE", b"foo", b"SAMPLES", b"-1"],
        b"-ERR syntax error\r\n",
    );
    raw.expect(
        &[b"MEMORY", b"USAGE", b"foo", b"bar"],
        b"-ERR syntax error\r\n",
    );
    raw.expect(&[b"MEMORY", b"PURGE"], b"+OK\r\n");
    let mut conn = server.client();
    let stats: redis::Value = redis::cmd("MEMORY").arg("STATS").query(&mut conn).unwrap();
    let redis::Value::Array(fields) = stats else {
        panic!()
    };
    assert_eq!(
        fields[0],
        redis::Value::BulkString(b"peak.allocated".to_vec())
    );
    assert!(fields.contains(&redis::Value::BulkString(b"keys.count".to_vec())));
    assert!(fields.contains(&redis::Value::BulkString(b"db.0".to_vec())));
}

#[test]
fn slowlog_records_and_resets() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(
        &[b"CONFIG", b"SET", b"slowlog-log-slower-than", b"0"],
        b"+OK\r\n",
    );
    raw.expect(&[b"SLOWLOG", b"RESET"], b"+OK\r\n");
    // The redis crate's connection sends its own commands on connect: open it first.
    let mut conn = server.client();
    raw.expect(&[b"CLIENT", b"SETNAME", b"slowpoke"], b"+OK\r\n");
    raw.expect(&[b"ECHO", b"hi"], b"$2\r\nhi\r\n");
    let entries: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg("1")
        .query(&mut conn)
        .unwrap();
    assert_eq!(entries.len(), 1);
    let redis::Value::Array(entry) = &entries[0] else {
        panic!()
    };
    assert_eq!(entry.len(), 6);
    assert_eq!(
        entry[3],
        redis::Value::Array(vec![
            redis::Value::BulkString(b"ECHO".to_vec()),
            redis::Value::BulkString(b"hi".to_vec())
        ])
    );
    let peer = raw.stream.local_addr().unwrap().to_string();
    assert_eq!(entry[4], redis::Value::BulkString(peer.into_bytes()));
    assert_eq!(entry[5], redis::Value::BulkString(b"slowpoke".to_vec()));
    let len: i64 = redis::cmd("SLOWLOG").arg("LEN").query(&mut conn).unwrap();
    assert!(len >= 3);
    let all: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg("-1")
        .query(&mut conn)
        .unwrap();
    assert!(all.len() as i64 >= len);
    raw.expect(
        &[b"SLOWLOG", b"GET", b"-2"],
        b"-ERR count should be greater than or equal to -1\r\n",
    );
    raw.expect(
        &[b"SLOWLOG", b"GET", b"x"],
        b"-ERR count should be greater than or equal to -1\r\n",
    );
    raw.expect(
        &[b"CONFIG", b"SET", b"slowlog-log-slower-than", b"-1"],
        b"+OK\r\n",
    );
    raw.expect(&[b"SLOWLOG", b"RESET"], b"+OK\r\n");
    raw.expect(&[b"SLOWLOG", b"LEN"], b":0\r\n");
    raw.expect(&[b"SLOWLOG", b"GET"], b"*0\r\n");
}

#[test]
fn latency_monitor_records_slow_commands() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(&[b"LATENCY", b"LATEST"], b"*0\r\n");
    raw.expect(
        &[b"CONFIG", b"SET", b"latency-monitor-threshold", b"10"],
        b"+OK\r\n",
    );
    raw.expect(&[b"DEBUG", b"SLEEP", b"0.05"], b"+OK\r\n");
    let mut conn = server.client();
    let latest: Vec<(String, i64, i64, i64)> = redis::cmd("LATENCY")
        .arg("LATEST")
        .query(&mut conn)
        .unwrap();
    assert_eq!(latest.len(), 1, "{latest:?}");
    assert_eq!(latest[0].0, "command");
    assert!(latest[0].2 >= 50 && latest[0].3 >= 50, "{latest:?}");
    let history: Vec<(i64, i64)> = redis::cmd("LATENCY")
        .arg("HISTORY")
        .arg("command")
        .query(&mut conn)
        .unwrap();
    assert_eq!(history.len(), 1);
    raw.expect(&[b"LATENCY", b"HISTORY", b"nothing"], b"*0\r\n");
    raw.expect(
        &[b"LATENCY", b"GRAPH", b"nothing"],
        b"-ERR No samples available for event 'nothing'\r\n",
    );
    raw.expect(&[b"LATENCY", b"RESET", b"nothing"], b":0\r\n");
    raw.expect(&[b"LATENCY", b"RESET"], b":1\r\n");
    raw.expect(&[b"LATENCY", b"LATEST"], b"*0\r\n");
}

#[test]
fn time_and_lastsave() {
    let server = TestServer::start(&[]);
    let mut conn = server.client();
    let (seconds, micros): (i64, i64) = redis::cmd("TIME").query(&mut conn).unwrap();
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!((seconds - wall).abs() <= 2);
    assert!((0..1_000_000).contains(&micros));
    let lastsave: i64 = redis::cmd("LASTSAVE").query(&mut conn).unwrap();
    assert!((lastsave - wall).abs() <= 60);
}

#[test]
fn function_flush_and_help() {
    let server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(&[b"FUNCTION", b"FLUSH"], b"+OK\r\n");
    raw.expect(&[b"FUNCTION", b"FLUSH", b"async"], b"+OK\r\n");
    raw.expect(&[b"FUNCTION", b"FLUSH", b"SYNC"], b"+OK\r\n");
    raw.expect(
        &[b"FUNCTION", b"FLUSH", b"later"],
        b"-ERR FUNCTION FLUSH only supports SYNC|ASYNC option\r\n",
    );
    raw.expect(
        &[b"FUNCTION", b"FLUSH", b"SYNC", b"x"],
        b"-ERR unknown subcommand or wrong number of arguments for 'FLUSH'. Try FUNCTION HELP.\r\n",
    );
}

#[test]
fn monitor_streams_other_clients_commands() {
    let server = TestServer::start(&[]);
    let mut watcher = server.raw();
    watcher.expect(&[b"MONITOR"], b"+OK\r\n");
    let mut other = server.raw();
    other.expect(&[b"SET", b"greeting", b"hi \"there\""], b"+OK\r\n");
    let line = read_line(&mut watcher);
    let peer = other.stream.local_addr().unwrap().to_string();
    assert!(line.starts_with('+'), "{line}");
    assert!(
        line.ends_with(&format!(
            " [0 {peer}] \"SET\" \"greeting\" \"hi \\\"there\\\"\"\r\n"
        )),
        "{line}"
    );
    let mut conn = server.client();
    let info: String = redis::cmd("CLIENT").arg("LIST").query(&mut conn).unwrap();
    assert!(info.contains("flags=O"), "{info}");

    // Lines are stamped to the microsecond, on the clock TIME reads (Redis' ustime).
    let micros = |(s, us): (i64, i64)| s * 1_000_000 + us;
    let read_line_of = |watcher: &mut RawConn, command: &str| loop {
        let line = read_line(watcher);
        if line.contains(command) {
            break line;
        }
    };
    let before = micros(redis::cmd("TIME").query(&mut conn).unwrap());
    let mut stamps = Vec::new();
    for n in 0..20 {
        let word = format!("n{n:02}");
        other.expect(
            &[b"ECHO", word.as_bytes()],
            format!("$3\r\n{word}\r\n").as_bytes(),
        );
        let line = read_line_of(&mut watcher, &format!("\"{word}\""));
        let stamp = &line[1..line.find(' ').unwrap()];
        let (s, us) = stamp.split_once('.').expect(stamp);
        assert_eq!(us.len(), 6, "{line}");
        stamps.push(s.parse::<i64>().unwrap() * 1_000_000 + us.parse::<i64>().unwrap());
    }
    let after = micros(redis::cmd("TIME").query(&mut conn).unwrap());
    assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "{stamps:?}");
    assert!(
        before <= stamps[0] && stamps[19] <= after,
        "{before} {stamps:?} {after}"
    );
    assert!(
        stamps.iter().any(|us| us % 1000 != 0),
        "whole milliseconds: {stamps:?}"
    );
}

#[test]
fn shutdown_stops_the_server() {
    let mut server = TestServer::start(&[]);
    let mut raw = server.raw();
    raw.expect(&[b"SHUTDOWN", b"NOSAVE", b"SAVE"], b"-ERR syntax error\r\n");
    raw.expect(&[b"SHUTDOWN", b"ABORT", b"NOW"], b"-ERR syntax error\r\n");
    raw.expect(&[b"SHUTDOWN", b"PLEASE"], b"-ERR syntax error\r\n");
    raw.expect(
        &[b"SHUTDOWN", b"ABORT"],
        b"-ERR No shutdown in progress.\r\n",
    );
    raw.send(&encode(&[b"SHUTDOWN", b"NOSAVE"]));
    // No reply: the connection just closes, and the process exits.
    raw.stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert!(raw.is_closed());
    assert!(
        server.wait_exit(Duration::from_secs(5)).is_some(),
        "server still running after SHUTDOWN"
    );
}

/// The body of a bulk reply whose `$len` line was `header` (its CRLF read too).
fn bulk_body(conn: &mut RawConn, header: &str) -> String {
    let len: usize = header[1..header.len() - 2].parse().unwrap();
    let mut body = vec![0u8; len + 2];
    std::io::Read::read_exact(&mut conn.stream, &mut body).unwrap();
    String::from_utf8(body).unwrap()
}

/// Sends a command and reads its first reply line.
fn first_line(conn: &mut RawConn, args: &[&[u8]]) -> String {
    conn.send(&encode(args));
    read_line(conn)
}

#[test]
fn module_lolwut_and_debug_error() {
    let server = TestServer::start(&["--enable-debug-command", "yes"]);
    let mut c = server.raw();
    // No modules, and loading one is refused as Redis refuses it by default.
    assert_eq!(first_line(&mut c, &[b"MODULE", b"LIST"]), "*0\r\n");
    let refused = first_line(&mut c, &[b"MODULE", b"LOAD", b"/x.so"]);
    assert!(
        refused.starts_with("-ERR MODULE command not allowed. If the enable-module-command"),
        "{refused:?}"
    );
    let enabled = TestServer::start(&["--enable-module-command", "yes"]);
    let mut e = enabled.raw();
    assert_eq!(
        first_line(&mut e, &[b"MODULE", b"LOAD", b"/x.so"]),
        "-ERR Error loading the extension. Please check the server logs.\r\n"
    );
    assert_eq!(
        first_line(&mut e, &[b"MODULE", b"UNLOAD", b"x"]),
        "-ERR Error unloading module: no such module with that name\r\n"
    );
    // LOLWUT: the version line as Redis 7.0 writes it; VERSION 5 draws first.
    assert_eq!(first_line(&mut c, &[b"LOLWUT"]), "$18\r\n");
    assert_eq!(read_line(&mut c), "Redis ver. 7.0.15\n\r\n");
    let header = first_line(&mut c, &[b"LOLWUT", b"VERSION", b"5", b"10", b"2", b"2"]);
    let text = bulk_body(&mut c, &header);
    assert!(text.contains("Redis ver. 7.0.15"), "{text}");
    assert!(text
        .chars()
        .any(|ch| ('\u{2801}'..='\u{28ff}').contains(&ch)));
    assert_eq!(
        first_line(&mut c, &[b"LOLWUT", b"VERSION", b"x"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    // DEBUG ERROR: the text as the error, uncounted.
    assert_eq!(
        first_line(&mut c, &[b"DEBUG", b"ERROR", b"LOADING fake\nmessage"]),
        "-LOADING fake message\r\n"
    );
    let stats = first_line(&mut c, &[b"INFO", b"errorstats"]);
    assert!(!bulk_body(&mut c, &stats).contains("LOADING"));
}
