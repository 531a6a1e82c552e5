//! CLUSTER with cluster mode off, as Redis 7.0 answers it: every subcommand (HELP too)
//! refuses with the same error, while the table entries (arity, flags, categories, docs)
//! are Redis' own, so COMMAND INFO/DOCS and the scripting gatekeeper see what they would
//! see in Redis.

mod common;

use common::{check, TestServer};

const DISABLED: &str = "-ERR This instance has cluster support disabled\r\n";

/// Every subcommand in Redis 7.0.15's JSON files, each with arguments that satisfy its
/// arity, so that the reply comes from the handler and not from the arity check.
const SUBCOMMANDS: &[&str] = &[
    "ADDSLOTS 1",
    "ADDSLOTSRANGE 1 2",
    "BUMPEPOCH",
    "COUNT-FAILURE-REPORTS abc",
    "COUNTKEYSINSLOT 1",
    "DELSLOTS 1",
    "DELSLOTSRANGE 1 2",
    "FAILOVER",
    "FLUSHSLOTS",
    "FORGET abc",
    "GETKEYSINSLOT 1 10",
    "HELP",
    "INFO",
    "KEYSLOT foo",
    "LINKS",
    "MEET 127.0.0.1 7000",
    "MYID",
    "NODES",
    "REPLICAS abc",
    "REPLICATE abc",
    "RESET HARD",
    "SAVECONFIG",
    "SET-CONFIG-EPOCH 1",
    "SETSLOT 1 STABLE",
    "SHARDS",
    "SLAVES abc",
    "SLOTS",
];

#[test]
fn every_subcommand_says_cluster_support_is_disabled() {
    let server = TestServer::start(&[]);
    let mut conn = server.raw();
    check(&mut conn, "CLUSTER INFO", DISABLED);
    // HELP too: Redis checks for cluster mode before it looks at the subcommand.
    check(&mut conn, "CLUSTER HELP", DISABLED);
    check(&mut conn, "cluster help", DISABLED);
    for subcommand in SUBCOMMANDS {
        check(&mut conn, &format!("CLUSTER {subcommand}"), DISABLED);
    }
    // The keyspace is untouched and the connection still works.
    check(&mut conn, "DBSIZE", ":0\r\n");
}

#[test]
fn unknown_subcommands_and_arity_are_refused_by_the_dispatcher() {
    let server = TestServer::start(&[]);
    let mut conn = server.raw();
    // The same wording as any other container's (SCRIPT here), as Redis has it.
    check(
        &mut conn,
        "SCRIPT FOO",
        "-ERR unknown subcommand 'FOO'. Try SCRIPT HELP.\r\n",
    );
    check(
        &mut conn,
        "CLUSTER FOO",
        "-ERR unknown subcommand 'FOO'. Try CLUSTER HELP.\r\n",
    );
    check(
        &mut conn,
        "cluster foo bar",
        "-ERR unknown subcommand 'foo'. Try CLUSTER HELP.\r\n",
    );
    check(
        &mut conn,
        "CLUSTER",
        "-ERR wrong number of arguments for 'cluster' command\r\n",
    );
    check(
        &mut conn,
        "CLUSTER INFO extra",
        "-ERR wrong number of arguments for 'cluster|info' command\r\n",
    );
    check(
        &mut conn,
        "CLUSTER SETSLOT 1",
        "-ERR wrong number of arguments for 'cluster|setslot' command\r\n",
    );
}

#[test]
fn command_info_matches_redis() {
    let server = TestServer::start(&[]);
    let mut conn = server.raw();
    // Byte for byte what Redis 7.0.15 replies: NOSCRIPT among the flags, and the
    // categories the ADMIN flag implies.
    check(
        &mut conn,
        "COMMAND INFO cluster|reset",
        "*1\r\n*10\r\n$13\r\ncluster|reset\r\n:-2\r\n*3\r\n+admin\r\n+noscript\r\n+stale\r\n\
         :0\r\n:0\r\n:0\r\n*3\r\n+@admin\r\n+@slow\r\n+@dangerous\r\n*0\r\n*0\r\n*0\r\n",
    );
    check(
        &mut conn,
        "COMMAND INFO cluster|slaves",
        "*1\r\n*10\r\n$14\r\ncluster|slaves\r\n:3\r\n*2\r\n+admin\r\n+stale\r\n:0\r\n:0\r\n:0\r\n\
         *3\r\n+@admin\r\n+@slow\r\n+@dangerous\r\n*1\r\n$23\r\nnondeterministic_output\r\n\
         *0\r\n*0\r\n",
    );
    check(
        &mut conn,
        "COMMAND INFO cluster|forget",
        "*1\r\n*10\r\n$14\r\ncluster|forget\r\n:3\r\n*3\r\n+admin\r\n+stale\r\n\
         +no_async_loading\r\n:0\r\n:0\r\n:0\r\n*3\r\n+@admin\r\n+@slow\r\n+@dangerous\r\n\
         *0\r\n*0\r\n*0\r\n",
    );
    check(
        &mut conn,
        "COMMAND INFO cluster|info",
        "*1\r\n*10\r\n$12\r\ncluster|info\r\n:2\r\n*1\r\n+stale\r\n:0\r\n:0\r\n:0\r\n\
         *1\r\n+@slow\r\n*1\r\n$23\r\nnondeterministic_output\r\n*0\r\n*0\r\n",
    );
}

/// The value following `key` in a RESP2 flattened map.
fn field<'v>(pairs: &'v [redis::Value], key: &str) -> Option<&'v redis::Value> {
    pairs
        .chunks(2)
        .find(|pair| pair[0] == redis::Value::BulkString(key.as_bytes().to_vec()))
        .map(|pair| &pair[1])
}

#[test]
fn command_docs_lists_every_subcommand() {
    let server = TestServer::start(&[]);
    let mut conn = server.client();
    let docs: redis::Value = redis::cmd("COMMAND")
        .arg("DOCS")
        .arg("cluster")
        .query(&mut conn)
        .unwrap();
    let redis::Value::Array(outer) = &docs else {
        panic!("{docs:?}")
    };
    assert_eq!(outer[0], redis::Value::BulkString(b"cluster".to_vec()));
    let redis::Value::Array(fields) = &outer[1] else {
        panic!("{:?}", outer[1])
    };
    assert_eq!(
        field(fields, "group"),
        Some(&redis::Value::BulkString(b"cluster".to_vec()))
    );
    assert_eq!(
        field(fields, "since"),
        Some(&redis::Value::BulkString(b"3.0.0".to_vec()))
    );
    let Some(redis::Value::Array(subs)) = field(fields, "subcommands") else {
        panic!("no subcommands in {fields:?}")
    };
    let mut names: Vec<String> = subs
        .chunks(2)
        .map(|pair| match &pair[0] {
            redis::Value::BulkString(name) => String::from_utf8(name.clone()).unwrap(),
            other => panic!("{other:?}"),
        })
        .collect();
    names.sort();
    let mut expected: Vec<String> = SUBCOMMANDS
        .iter()
        .map(|s| format!("cluster|{}", s.split(' ').next().unwrap().to_lowercase()))
        .collect();
    expected.sort();
    assert_eq!(names, expected);

    // The deprecated ones say so, and name their replacement.
    let slaves = subs
        .chunks(2)
        .find(|pair| pair[0] == redis::Value::BulkString(b"cluster|slaves".to_vec()))
        .map(|pair| &pair[1]);
    let Some(redis::Value::Array(slaves)) = slaves else {
        panic!("{slaves:?}")
    };
    assert_eq!(
        field(slaves, "replaced_by"),
        Some(&redis::Value::BulkString(b"`CLUSTER REPLICAS`".to_vec()))
    );
    assert_eq!(
        field(slaves, "deprecated_since"),
        Some(&redis::Value::BulkString(b"5.0.0".to_vec()))
    );
}

#[test]
fn scripts_may_not_reset_the_cluster() {
    let server = TestServer::start(&[]);
    let mut conn = server.raw();
    // RESET carries NOSCRIPT; Redis' reply, SHA1 of the script included.
    conn.expect(
        &[
            b"EVAL",
            b"return redis.call('cluster','reset','hard')",
            b"0",
        ],
        b"-ERR This Redis command is not allowed from script \
          script: cc1ece19697daeb65ef8cb9c07a31814e0e3b28a, on @user_script:1.\r\n",
    );
    // Subcommands without NOSCRIPT run, and answer as they do outside a script.
    conn.expect(
        &[b"EVAL", b"return redis.call('cluster','info')", b"0"],
        b"-ERR This instance has cluster support disabled \
          script: 080f2e8de25b3caf214921ec6c8c5af604cc9e4a, on @user_script:1.\r\n",
    );
}
