//! Server-wide limits that refuse commands: `maxmemory` (OOM) and `min-replicas-to-write`
//! (NOREPLICAS), for plain commands, transactions and scripts, with Redis' texts.

mod common;

use common::{bulk, check, RawConn, TestServer};

const OOM: &str = "-OOM command not allowed when used memory > 'maxmemory'.\r\n";

fn info(server: &TestServer, section: &str) -> String {
    redis::cmd("INFO")
        .arg(section)
        .query(&mut server.client())
        .expect("INFO")
}

fn eval(conn: &mut RawConn, script: &str, expected: &str) {
    conn.expect(&[b"EVAL", script.as_bytes(), b"0"], expected.as_bytes());
}

#[test]
fn over_maxmemory_commands_that_grow_memory_are_refused() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "SET k v", "+OK\r\n");
    check(&mut c, "CONFIG SET maxmemory 1", "+OK\r\n");
    // denyoom commands are refused; reads and deletes still run.
    check(&mut c, "SET k2 v", OOM);
    check(&mut c, "LPUSH l a", OOM);
    check(&mut c, "GET k", &bulk("v"));
    check(&mut c, "DEL k", ":1\r\n");
    // Inside MULTI anything but EXEC, DISCARD, QUIT and RESET is refused, and the
    // transaction is doomed.
    check(&mut c, "MULTI", "+OK\r\n");
    check(&mut c, "GET k", OOM);
    check(&mut c, "CONFIG SET maxmemory 0", OOM);
    check(
        &mut c,
        "EXEC",
        "-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    check(&mut c, "MULTI", "+OK\r\n");
    check(&mut c, "DISCARD", "+OK\r\n");
    // Queued before the limit, a transaction that writes is refused at EXEC.
    check(&mut c, "CONFIG SET maxmemory 0", "+OK\r\n");
    check(&mut c, "MULTI", "+OK\r\n");
    check(&mut c, "SET k3 v", "+QUEUED\r\n");
    let mut other = server.raw();
    check(&mut other, "CONFIG SET maxmemory 1", "+OK\r\n");
    check(
        &mut c,
        "EXEC",
        "-EXECABORT Transaction discarded because of: OOM command not allowed when used memory > 'maxmemory'.\r\n",
    );
    check(&mut c, "EXISTS k3", ":0\r\n");
    // The refusals are counted as Redis counts them (a refused EXEC as EXECABORT).
    check(&mut c, "CONFIG SET maxmemory 0", "+OK\r\n");
    let errors = info(&server, "errorstats");
    assert!(errors.contains("errorstat_OOM:count=4\r\n"), "{errors}");
}

#[test]
fn over_maxmemory_scripts_follow_their_flags() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "SET x 123", "+OK\r\n");
    check(&mut c, "CONFIG SET maxmemory 1", "+OK\r\n");
    // No shebang: the first write is refused with the OOM code kept; reads run.
    eval(
        &mut c,
        "redis.call('set','x',1) return 1",
        "-OOM command not allowed when used memory > 'maxmemory'. script: e50389d7724274719d9b4e35a25d4cc4ca908c7a, on @user_script:1.\r\n",
    );
    eval(&mut c, "return redis.call('get','x')", &bulk("123"));
    // A shebang without allow-oom or no-writes does not start; allow-oom writes.
    eval(&mut c, "#!lua flags=\nreturn 1", OOM);
    eval(
        &mut c,
        "#!lua flags=allow-oom\nredis.call('set','x',1) return 1",
        ":1\r\n",
    );
    eval(
        &mut c,
        "#!lua flags=no-writes\nreturn redis.call('get','x')",
        &bulk("1"),
    );
    // pcall hands the error back as a table; the error is counted once.
    check(&mut c, "CONFIG RESETSTAT", "+OK\r\n");
    eval(&mut c, "return redis.pcall('set','x','y')", OOM);
    let errors = info(&server, "errorstats");
    assert!(errors.contains("errorstat_OOM:count=1\r\n"), "{errors}");
    let stats = info(&server, "stats");
    assert!(stats.contains("total_error_replies:1\r\n"), "{stats}");
    check(&mut c, "CONFIG SET maxmemory 0", "+OK\r\n");
}

#[test]
fn without_enough_replicas_writes_are_refused() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    let noreplicas = "-NOREPLICAS Not enough good replicas to write.\r\n";
    check(&mut c, "SET x 1", "+OK\r\n");
    check(&mut c, "CONFIG SET min-replicas-to-write 1", "+OK\r\n");
    check(&mut c, "SET x 2", noreplicas);
    check(&mut c, "GET x", &bulk("1"));
    eval(&mut c, "return redis.call('get','x')", &bulk("1"));
    eval(&mut c, "#!lua\nreturn 1", noreplicas);
    eval(
        &mut c,
        "return redis.call('set','x',3)",
        "-NOREPLICAS Not enough good replicas to write. script: 259b99a34f43f8f78152d97f9bbd7348d2c7f549, on @user_script:1.\r\n",
    );
    // min-replicas-max-lag 0 turns the check off, as in Redis.
    check(&mut c, "CONFIG SET min-replicas-max-lag 0", "+OK\r\n");
    check(&mut c, "SET x 4", "+OK\r\n");
}
