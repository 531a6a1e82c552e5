//! `OBJECT ENCODING` of strings against redis-server 7.0 (Debian's package): the same
//! commands on both servers, and after each one the encoding of every key it may have
//! touched must match. A string set whole is `int`, `embstr` or `raw` by its bytes; one
//! changed in place (APPEND, SETRANGE, SETBIT, BITFIELD, BITOP's result, the
//! HyperLogLog commands) is `raw` until something sets it whole again, and keeps that
//! through RENAME, MOVE and COPY.

use latch_testkit::Server;
use redis::Value;

fn connect(server: &Server) -> redis::Connection {
    redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap()
}

fn run(conn: &mut redis::Connection, args: &[&str]) -> Value {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query::<Value>(conn)
        .unwrap_or_else(|e| Value::SimpleString(format!("error: {e}")))
}

#[test]
fn string_encodings_follow_redis() {
    let latch_server = Server::latch(&[]);
    let redis_server = Server::redis(&[]);
    let mut latch = connect(&latch_server);
    let mut redis = connect(&redis_server);
    let long = "x".repeat(60);
    let steps: &[&[&str]] = &[
        &["SET", "k", "1234"],
        &["SETRANGE", "k", "0", ""],
        &["SETRANGE", "k", "1", "3"],
        &["INCR", "k"],
        &["APPEND", "k", ""],
        &["SET", "k", "hello"],
        &["APPEND", "k", " world"],
        &["GETRANGE", "k", "0", "2"],
        &["SET", "k", "again"],
        &["APPEND", "new", "abc"],
        &["APPEND", "num", "12"],
        &["SETRANGE", "fresh", "3", "ab"],
        &["SETRANGE", "none", "3", ""],
        &["SETBIT", "bits", "7", "1"],
        &["SET", "bits2", "a"],
        &["SETBIT", "bits2", "1", "1"],
        &["SET", "bf", "b"],
        &["BITFIELD", "bf", "GET", "u8", "0"],
        &["BITFIELD", "bf", "SET", "u8", "0", "200"],
        &["SET", "src1", "abc"],
        &["BITOP", "OR", "dest", "src1", "bits"],
        &["RENAME", "k", "renamed"],
        &["APPEND", "renamed", "!"],
        &["RENAME", "renamed", "k"],
        &["COPY", "k", "copied"],
        &["COPY", "src1", "copied2"],
        &["MOVE", "k", "1"],
        &["SET", "counter", "10"],
        &["APPEND", "counter", "0"],
        &["INCRBY", "counter", "5"],
        &["INCRBYFLOAT", "counter", "0.5"],
        &["SET", "long", &long],
        &["APPEND", "long", "y"],
        &["PFADD", "hll", "a", "b", "c"],
        &["PFCOUNT", "hll"],
        &["PFMERGE", "hll2", "hll"],
        &["GETSET", "hll", "plain"],
        &["SET", "k2", "v", "EX", "100"],
        &["APPEND", "k2", "w"],
        &["EXPIRE", "k2", "200"],
        &["GETEX", "k2", "PERSIST"],
    ];
    let keys = [
        "k", "new", "num", "fresh", "none", "bits", "bits2", "bf", "dest", "renamed", "copied",
        "copied2", "counter", "long", "hll", "hll2", "k2",
    ];
    for step in steps {
        let (ours, theirs) = (run(&mut latch, step), run(&mut redis, step));
        assert_eq!(ours, theirs, "{step:?}");
        for key in keys {
            let ask = ["OBJECT", "ENCODING", key];
            assert_eq!(
                run(&mut latch, &ask),
                run(&mut redis, &ask),
                "OBJECT ENCODING {key} after {step:?}"
            );
        }
    }
    // In the other database, after MOVE.
    for conn in [&mut latch, &mut redis] {
        run(conn, &["SELECT", "1"]);
    }
    let ask = ["OBJECT", "ENCODING", "k"];
    assert_eq!(run(&mut latch, &ask), run(&mut redis, &ask));
    assert_eq!(run(&mut latch, &ask), Value::BulkString(b"raw".to_vec()));
}
