//! The stream commands against the real binary: replies byte for byte, RESP2 and RESP3.

mod common;

use common::replies::{NIL, NIL_ARRAY, NOT_INTEGER, NULL3, SYNTAX, WRONGTYPE};
use common::{bulk, bulks, check, encode, read_line, resp3, RawConn, TestServer};

const INVALID_ID: &str = "-ERR Invalid stream ID specified as stream command argument\r\n";

/// One entry as XRANGE shows it.
fn entry(id: &str, fields: &[&str]) -> String {
    format!("*2\r\n{}{}", bulk(id), bulks(fields))
}

/// An array of already encoded elements.
fn array(items: &[String]) -> String {
    format!("*{}\r\n{}", items.len(), items.concat())
}

#[test]
fn xadd_ids_and_errors() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "XADD s 1-1 a 1 b 2", &bulk("1-1"));
    check(
        &mut c,
        "XADD s 1-1 a 1",
        "-ERR The ID specified in XADD is equal or smaller than the target stream top item\r\n",
    );
    check(&mut c, "XADD s 1-* c 3", &bulk("1-2"));
    check(&mut c, "XADD s 2 d 4", &bulk("2-0"));
    check(
        &mut c,
        "XADD s0 0-0 a 1",
        "-ERR The ID specified in XADD must be greater than 0-0\r\n",
    );
    check(&mut c, "EXISTS s0", ":0\r\n");
    check(&mut c, "XADD s0 0-* a 1", &bulk("0-1"));
    for bad in [
        "XADD s",
        "XADD s *",
        "XADD s * a",
        "XADD s 5 a",
        "XADD s MAXLEN 5",
    ] {
        check(
            &mut c,
            bad,
            "-ERR wrong number of arguments for 'xadd' command\r\n",
        );
    }
    check(&mut c, "XADD s - a b", INVALID_ID);
    check(&mut c, "XADD s 3-x a b", INVALID_ID);
    check(&mut c, "XADD s maxlen * a b", NOT_INTEGER);
    check(
        &mut c,
        "XADD s MAXLEN -1 * a b",
        "-ERR The MAXLEN argument must be >= 0.\r\n",
    );
    check(
        &mut c,
        "XADD s MAXLEN 1 MINID 1 * a b",
        "-ERR syntax error, MAXLEN and MINID options at the same time are not compatible\r\n",
    );
    check(
        &mut c,
        "XADD s LIMIT 5 * a b",
        "-ERR syntax error, LIMIT cannot be used without specifying a trimming strategy\r\n",
    );
    check(
        &mut c,
        "XADD s MAXLEN 5 LIMIT 5 3 a b",
        "-ERR syntax error, LIMIT cannot be used without the special ~ option\r\n",
    );
    check(&mut c, "XADD nos NOMKSTREAM * a b", NIL);
    check(&mut c, "EXISTS nos", ":0\r\n");
    check(
        &mut c,
        "XADD s 18446744073709551615-18446744073709551614 a b",
        &bulk("18446744073709551615-18446744073709551614"),
    );
    check(
        &mut c,
        "XADD s * a b",
        &bulk("18446744073709551615-18446744073709551615"),
    );
    check(
        &mut c,
        "XADD s * a b",
        "-ERR The stream has exhausted the last possible ID, unable to add more items\r\n",
    );
    check(
        &mut c,
        "XADD t 1-18446744073709551615 a b",
        &bulk("1-18446744073709551615"),
    );
    check(
        &mut c,
        "XADD t 1-* a b",
        "-ERR Elements are too large to be stored\r\n",
    );
    check(&mut c, "SET str x", "+OK\r\n");
    for command in [
        "XADD str * a b",
        "XLEN str",
        "XRANGE str - +",
        "XREVRANGE str + -",
        "XDEL str 1",
        "XTRIM str MAXLEN 1",
        "XREAD STREAMS str 0",
        "XGROUP CREATE str g 0",
        "XACK str g 1",
        "XPENDING str g",
        "XCLAIM str g c 0 1",
        "XINFO STREAM str",
        "XSETID str 1",
    ] {
        check(&mut c, command, WRONGTYPE);
    }
    check(&mut c, "TYPE s", "+stream\r\n");
    check(&mut c, "OBJECT ENCODING s", &bulk("stream"));
}

#[test]
fn ranges() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    for id in ["1-1", "1-2", "2-0", "3-5"] {
        check(&mut c, &format!("XADD s {id} f {id}"), &bulk(id));
    }
    let all = [
        entry("1-1", &["f", "1-1"]),
        entry("1-2", &["f", "1-2"]),
        entry("2-0", &["f", "2-0"]),
        entry("3-5", &["f", "3-5"]),
    ];
    check(&mut c, "XRANGE s - +", &array(&all));
    check(&mut c, "XRANGE s - + COUNT 2", &array(&all[..2]));
    // A negative count reads as 0, which answers a null.
    check(&mut c, "XRANGE s - + COUNT -1", NIL_ARRAY);
    check(&mut c, "XRANGE s - + COUNT 0", NIL_ARRAY);
    check(&mut c, "XRANGE nokey - + COUNT 0", "*0\r\n");
    check(&mut c, "XRANGE s 1 1", &array(&all[..2]));
    check(&mut c, "XRANGE s (1-1 (3-5", &array(&all[1..3]));
    check(&mut c, "XRANGE s 3 1", "*0\r\n");
    check(&mut c, "XRANGE s - + FOO 1", SYNTAX);
    check(&mut c, "XRANGE s - + COUNT", SYNTAX);
    check(&mut c, "XRANGE s (- +", INVALID_ID);
    check(
        &mut c,
        "XRANGE s (18446744073709551615-18446744073709551615 +",
        "-ERR invalid start ID for the interval\r\n",
    );
    check(
        &mut c,
        "XRANGE s - (0-0",
        "-ERR invalid end ID for the interval\r\n",
    );
    let reversed: Vec<String> = all.iter().rev().cloned().collect();
    check(&mut c, "XREVRANGE s + -", &array(&reversed));
    check(&mut c, "XREVRANGE s (3-5 - COUNT 1", &array(&all[2..3]));
    check(&mut c, "XLEN s", ":4\r\n");
    check(&mut c, "XLEN nokey", ":0\r\n");
    // XDEL looks at the key first, then the IDs.
    check(&mut c, "XDEL nokey bad", ":0\r\n");
    check(&mut c, "XDEL s bad", INVALID_ID);
    check(&mut c, "XDEL s 1-1 9", ":1\r\n");
    check(&mut c, "XRANGE s - + COUNT 1", &array(&all[1..2]));
}

#[test]
fn trimming_follows_node_boundaries() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "CONFIG SET stream-node-max-entries 10", "+OK\r\n");
    for i in 1..=100 {
        check(&mut c, &format!("XADD s {i} f v"), &bulk(&format!("{i}-0")));
    }
    // Approximate trimming removes whole nodes of 10, at most LIMIT entries.
    check(
        &mut c,
        "XADD s MAXLEN ~ 55 LIMIT 30 101 f v",
        &bulk("101-0"),
    );
    check(&mut c, "XLEN s", ":71\r\n");
    check(&mut c, "XTRIM s MAXLEN ~ 55", ":10\r\n");
    check(&mut c, "XLEN s", ":61\r\n");
    check(&mut c, "XTRIM s MAXLEN = 55", ":6\r\n");
    check(&mut c, "XTRIM s MINID 50", ":3\r\n");
    check(
        &mut c,
        "XRANGE s - + COUNT 1",
        &array(&[entry("50-0", &["f", "v"])]),
    );
    check(&mut c, "XTRIM s MAXLEN ~ 0 LIMIT 1", ":1\r\n");
    check(&mut c, "XTRIM s MAXLEN ~ 0 LIMIT 9", ":0\r\n");
    check(&mut c, "XTRIM nokey MAXLEN 1", ":0\r\n");
    check(
        &mut c,
        "XTRIM s",
        "-ERR wrong number of arguments for 'xtrim' command\r\n",
    );
    check(&mut c, "XTRIM s FOO 1", SYNTAX);
    check(
        &mut c,
        "XTRIM s LIMIT 0",
        "-ERR syntax error, XTRIM must be called with a trimming strategy\r\n",
    );
    // A stream trimmed to nothing stays, empty.
    let mut redis = server.client();
    let _: String = redis::cmd("XADD")
        .arg(&["e", "MAXLEN", "0", "*", "a", "b"])
        .query(&mut redis)
        .unwrap();
    let len: i64 = redis::cmd("XLEN").arg("e").query(&mut redis).unwrap();
    let exists: i64 = redis::cmd("EXISTS").arg("e").query(&mut redis).unwrap();
    assert_eq!((len, exists), (0, 1));
}

#[test]
fn xsetid() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "XSETID nokey 1", "-ERR no such key\r\n");
    check(&mut c, "XADD s 5 a b", &bulk("5-0"));
    check(
        &mut c,
        "XSETID s 1",
        "-ERR The ID specified in XSETID is smaller than the target stream top item\r\n",
    );
    check(&mut c, "XSETID s 1 0", SYNTAX);
    check(
        &mut c,
        "XSETID s 9 ENTRIESADDED -1",
        "-ERR entries_added must be positive\r\n",
    );
    check(
        &mut c,
        "XSETID s 9 MAXDELETEDID 10",
        "-ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id\r\n",
    );
    check(
        &mut c,
        "XSETID s 9 ENTRIESADDED 0",
        "-ERR The entries_added specified in XSETID is smaller than the target stream length\r\n",
    );
    check(
        &mut c,
        "XSETID s 9 ENTRIESADDED 7 MAXDELETEDID 3",
        "+OK\r\n",
    );
    check(
        &mut c,
        "XADD s 9 a b",
        "-ERR The ID specified in XADD is equal or smaller than the target stream top item\r\n",
    );
    // Auto IDs use the clock, far past 9 ms; the counters carry on from the ones set.
    let mut redis = server.client();
    let id: String = redis::cmd("XADD")
        .arg(&["s", "*", "a", "b"])
        .query(&mut redis)
        .unwrap();
    assert!(id.split('-').next().unwrap().parse::<u64>().unwrap() > 9);
    let info: Vec<redis::Value> = redis::cmd("XINFO")
        .arg(&["STREAM", "s"])
        .query(&mut redis)
        .unwrap();
    assert_eq!(info[9], redis::Value::BulkString(b"3-0".to_vec()));
    assert_eq!(info[11], redis::Value::Int(8));
}

#[test]
fn xinfo_stream_shapes() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "XADD s 1-0 a 1", &bulk("1-0"));
    check(&mut c, "XADD s 2-0 b 2", &bulk("2-0"));
    check(&mut c, "XDEL s 1-0", ":1\r\n");
    let fields = |entries: &str, groups: &str| -> Vec<String> {
        vec![
            bulk("length"),
            ":1\r\n".into(),
            bulk("radix-tree-keys"),
            ":1\r\n".into(),
            bulk("radix-tree-nodes"),
            ":2\r\n".into(),
            bulk("last-generated-id"),
            bulk("2-0"),
            bulk("max-deleted-entry-id"),
            bulk("1-0"),
            bulk("entries-added"),
            ":2\r\n".into(),
            bulk("recorded-first-entry-id"),
            bulk("2-0"),
            entries.into(),
            groups.into(),
        ]
    };
    let plain = fields(
        &format!(
            "{}:0\r\n{}{}",
            bulk("groups"),
            bulk("first-entry"),
            entry("2-0", &["b", "2"])
        ),
        &format!("{}{}", bulk("last-entry"), entry("2-0", &["b", "2"])),
    )
    .concat();
    check(&mut c, "XINFO STREAM s", &format!("*20\r\n{plain}"));
    let full = fields(
        &format!("{}*1\r\n{}", bulk("entries"), entry("2-0", &["b", "2"])),
        &format!("{}*0\r\n", bulk("groups")),
    )
    .concat();
    check(&mut c, "XINFO STREAM s FULL", &format!("*18\r\n{full}"));
    let mut c3 = resp3(&server);
    check(&mut c3, "XINFO STREAM s", &format!("%10\r\n{plain}"));
    check(
        &mut c3,
        "XINFO STREAM s FULL COUNT 0",
        &format!("%9\r\n{full}"),
    );
    check(&mut c, "XINFO STREAM nokey", "-ERR no such key\r\n");
    check(
        &mut c,
        "XINFO STREAM s FOO",
        "-ERR unknown subcommand or wrong number of arguments for 'STREAM'. Try XINFO HELP.\r\n",
    );
    check(&mut c, "XINFO STREAM s FULL COUNT x", NOT_INTEGER);
    check(
        &mut c,
        "XINFO HELP x",
        "-ERR wrong number of arguments for 'xinfo|help' command\r\n",
    );
    check(
        &mut c,
        "XGROUP HELP x",
        "-ERR wrong number of arguments for 'xgroup|help' command\r\n",
    );
    // An empty stream's first and last entries are nulls.
    check(&mut c, "XDEL s 2-0", ":1\r\n");
    let mut redis = server.client();
    let info: Vec<redis::Value> = redis::cmd("XINFO")
        .arg("STREAM")
        .arg("s")
        .query(&mut redis)
        .unwrap();
    assert_eq!(info.len(), 20);
    assert_eq!(info[17], redis::Value::Nil);
    assert_eq!(info[19], redis::Value::Nil);
}

#[test]
fn xread_resp2_and_resp3() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "XADD a 1 f 1", &bulk("1-0"));
    check(&mut c, "XADD a 2 f 2", &bulk("2-0"));
    check(&mut c, "XADD b 3 g 3", &bulk("3-0"));
    let a_entries = array(&[entry("1-0", &["f", "1"]), entry("2-0", &["f", "2"])]);
    let b_entries = array(&[entry("3-0", &["g", "3"])]);
    check(
        &mut c,
        "XREAD STREAMS a nokey b 0 0 0",
        &format!(
            "*2\r\n*2\r\n{}{a_entries}*2\r\n{}{b_entries}",
            bulk("a"),
            bulk("b")
        ),
    );
    check(
        &mut c,
        "XREAD COUNT 1 STREAMS a 1",
        &format!(
            "*1\r\n*2\r\n{}{}",
            bulk("a"),
            array(&[entry("2-0", &["f", "2"])])
        ),
    );
    check(&mut c, "XREAD STREAMS a $", NIL_ARRAY);
    // Nothing comes within the 10 ms: the timeout's null array.
    check(&mut c, "XREAD BLOCK 10 STREAMS a $", NIL_ARRAY);
    check(
        &mut c,
        "XREAD BLOCK 0 STREAMS a 1",
        &format!(
            "*1\r\n*2\r\n{}{}",
            bulk("a"),
            array(&[entry("2-0", &["f", "2"])])
        ),
    );
    check(
        &mut c,
        "XREAD BLOCK -1 STREAMS a 1",
        "-ERR timeout is negative\r\n",
    );
    check(
        &mut c,
        "XREAD BLOCK x STREAMS a 1",
        "-ERR timeout is not an integer or out of range\r\n",
    );
    check(
        &mut c,
        "XREAD STREAMS a b 0",
        "-ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.\r\n",
    );
    check(&mut c, "XREAD COUNT 1 a 0", SYNTAX);
    check(&mut c, "XREAD STREAMS a >", "-ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.\r\n");
    check(
        &mut c,
        "XREAD GROUP g c STREAMS a 0",
        "-ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.\r\n",
    );
    check(&mut c, "XREAD STREAMS a bad", INVALID_ID);
    let mut c3 = resp3(&server);
    check(
        &mut c3,
        "XREAD STREAMS a b 0 0",
        &format!("%2\r\n{}{a_entries}{}{b_entries}", bulk("a"), bulk("b")),
    );
    check(&mut c3, "XREAD STREAMS a $", NULL3);
}

#[test]
fn consumer_groups() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    for (id, f) in [("100", "a"), ("101", "b"), ("102", "c"), ("103", "e")] {
        check(
            &mut c,
            &format!("XADD x {id} {f} 1"),
            &bulk(&format!("{id}-0")),
        );
    }
    check(&mut c, "XGROUP CREATE x g1 0", "+OK\r\n");
    check(
        &mut c,
        "XGROUP CREATE x g1 0",
        "-BUSYGROUP Consumer Group name already exists\r\n",
    );
    check(
        &mut c,
        "XGROUP CREATE nokey g 0",
        "-ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.\r\n",
    );
    check(&mut c, "XGROUP CREATE made g $ MKSTREAM", "+OK\r\n");
    check(&mut c, "XLEN made", ":0\r\n");
    check(
        &mut c,
        "XGROUP SETID x nog 0",
        "-NOGROUP No such consumer group 'nog' for key name 'x'\r\n",
    );
    check(
        &mut c,
        "XGROUP CREATE x g2 0 ENTRIESREAD -2",
        "-ERR value for ENTRIESREAD must be positive or -1\r\n",
    );
    check(
        &mut c,
        "XGROUP CREATE x g2 0 FOO",
        "-ERR unknown subcommand or wrong number of arguments for 'CREATE'. Try XGROUP HELP.\r\n",
    );
    check(
        &mut c,
        "XREADGROUP GROUP g1 alice COUNT 1 STREAMS x >",
        &format!(
            "*1\r\n*2\r\n{}{}",
            bulk("x"),
            array(&[entry("100-0", &["a", "1"])])
        ),
    );
    check(
        &mut c,
        "XREADGROUP GROUP g1 bob NOACK COUNT 1 STREAMS x >",
        &format!(
            "*1\r\n*2\r\n{}{}",
            bulk("x"),
            array(&[entry("101-0", &["b", "1"])])
        ),
    );
    check(
        &mut c,
        "XREADGROUP GROUP g1 bob COUNT 1 STREAMS x >",
        &format!(
            "*1\r\n*2\r\n{}{}",
            bulk("x"),
            array(&[entry("102-0", &["c", "1"])])
        ),
    );
    // History: the consumer's own pending entries; deleted ones show a null.
    check(&mut c, "XDEL x 102", ":1\r\n");
    check(
        &mut c,
        "XREADGROUP GROUP g1 bob STREAMS x 0",
        &format!(
            "*1\r\n*2\r\n{}*1\r\n*2\r\n{}{NIL_ARRAY}",
            bulk("x"),
            bulk("102-0")
        ),
    );
    check(
        &mut c,
        "XREADGROUP GROUP g1 nobody STREAMS x 0",
        &format!("*1\r\n*2\r\n{}*0\r\n", bulk("x")),
    );
    check(&mut c, "XREADGROUP GROUP g1 alice STREAMS x $", "-ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.\r\n");
    check(
        &mut c,
        "XREADGROUP GROUP nog alice STREAMS x >",
        "-NOGROUP No such key 'x' or consumer group 'nog' in XREADGROUP with GROUP option\r\n",
    );
    check(
        &mut c,
        "XREADGROUP GROUP g1 alice STREAMS x",
        "-ERR wrong number of arguments for 'xreadgroup' command\r\n",
    );
    check(
        &mut c,
        "XPENDING x g1",
        &format!(
            "*4\r\n:2\r\n{}{}*2\r\n*2\r\n{}{}*2\r\n{}{}",
            bulk("100-0"),
            bulk("102-0"),
            bulk("alice"),
            bulk("1"),
            bulk("bob"),
            bulk("1")
        ),
    );
    check(
        &mut c,
        "XPENDING made g",
        &format!("*4\r\n:0\r\n{NIL}{NIL}{NIL_ARRAY}"),
    );
    check(
        &mut c,
        "XPENDING x nog",
        "-NOGROUP No such key 'x' or consumer group 'nog'\r\n",
    );
    check(&mut c, "XPENDING x g1 -", SYNTAX);
    check(&mut c, "XPENDING x g1 - + 10 nobody", "*0\r\n");
    // Idle times follow the server clock, which tests move instead of sleeping.
    check(&mut c, "DEBUG ADVANCE-CLOCK 5000", "+OK\r\n");
    let mut redis = server.client();
    let pending: Vec<(String, String, i64, i64)> = redis::cmd("XPENDING")
        .arg(&["x", "g1", "IDLE", "4000", "-", "+", "10"])
        .query(&mut redis)
        .unwrap();
    assert_eq!(pending.len(), 2);
    assert_eq!(
        (&pending[0].0[..], &pending[0].1[..], pending[0].3),
        ("100-0", "alice", 1)
    );
    assert!(pending[0].2 >= 5000);
    check(&mut c, "XPENDING x g1 IDLE 99999999 - + 10", "*0\r\n");
    check(&mut c, "XACK x g1 100-0 bad", INVALID_ID);
    check(&mut c, "XACK x nog bad", ":0\r\n");
    check(&mut c, "XACK x g1 100-0 100-0 9", ":1\r\n");
    // Claiming: a deleted entry drops out of the pending list.
    check(&mut c, "XCLAIM x g1 carol 1000 102-0", "*0\r\n");
    check(&mut c, "XPENDING x g1 - + 10", "*0\r\n");
    check(
        &mut c,
        "XCLAIM x g1 carol 0 103-0 FORCE JUSTID",
        &bulks(&["103-0"]),
    );
    check(
        &mut c,
        "XCLAIM x g1 dave 0 103-0 RETRYCOUNT 7",
        &array(&[entry("103-0", &["e", "1"])]),
    );
    check(
        &mut c,
        "XCLAIM x nog c 0 1",
        "-NOGROUP No such key 'x' or consumer group 'nog'\r\n",
    );
    check(
        &mut c,
        "XCLAIM x g1 c x 1",
        "-ERR Invalid min-idle-time argument for XCLAIM\r\n",
    );
    check(
        &mut c,
        "XCLAIM x g1 c 0 1 FOO",
        "-ERR Unrecognized XCLAIM option 'FOO'\r\n",
    );
    check(
        &mut c,
        "XAUTOCLAIM x g1 erin 0 - JUSTID",
        &format!("*3\r\n{}{}*0\r\n", bulk("0-0"), bulks(&["103-0"])),
    );
    check(
        &mut c,
        "XAUTOCLAIM x g1 erin 0 - COUNT 0",
        "-ERR COUNT must be > 0\r\n",
    );
    check(&mut c, "XAUTOCLAIM x g1 erin 0 - FOO", SYNTAX);
    check(
        &mut c,
        "XAUTOCLAIM x nog erin 0 -",
        "-NOGROUP No such key 'x' or consumer group 'nog'\r\n",
    );
    check(&mut c, "XGROUP CREATECONSUMER x g1 zed", ":1\r\n");
    check(&mut c, "XGROUP CREATECONSUMER x g1 zed", ":0\r\n");
    check(&mut c, "XGROUP DELCONSUMER x g1 erin", ":1\r\n");
    check(&mut c, "XGROUP DELCONSUMER x g1 erin", ":0\r\n");
    check(&mut c, "XGROUP DESTROY x g1", ":1\r\n");
    check(&mut c, "XGROUP DESTROY x g1", ":0\r\n");
    check(&mut c, "XINFO GROUPS x", "*0\r\n");
}

#[test]
fn group_counters_and_lag() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    for i in 1..=5 {
        check(
            &mut c,
            &format!("XADD x {i}-0 d {i}"),
            &bulk(&format!("{i}-0")),
        );
    }
    check(&mut c, "XGROUP CREATE x g1 0", "+OK\r\n");
    let group = |read: &str, lag: &str, last: &str, consumers: i64, pending: i64| {
        format!(
            "*1\r\n*12\r\n{}{}{}:{consumers}\r\n{}:{pending}\r\n{}{}{}{read}{}{lag}",
            bulk("name"),
            bulk("g1"),
            bulk("consumers"),
            bulk("pending"),
            bulk("last-delivered-id"),
            bulk(last),
            bulk("entries-read"),
            bulk("lag"),
        )
    };
    check(&mut c, "XINFO GROUPS x", &group(NIL, ":5\r\n", "0-0", 0, 0));
    check(
        &mut c,
        "XREADGROUP GROUP g1 c COUNT 2 STREAMS x >",
        &format!(
            "*1\r\n*2\r\n{}{}",
            bulk("x"),
            array(&[entry("1-0", &["d", "1"]), entry("2-0", &["d", "2"])])
        ),
    );
    check(
        &mut c,
        "XINFO GROUPS x",
        &group(":2\r\n", ":3\r\n", "2-0", 1, 2),
    );
    // A deletion ahead of the group makes its counters unknowable.
    check(&mut c, "XDEL x 4-0", ":1\r\n");
    check(&mut c, "XINFO GROUPS x", &group(":2\r\n", NIL, "2-0", 1, 2));
    let mut c3 = resp3(&server);
    check(
        &mut c3,
        "XINFO GROUPS x",
        &group(":2\r\n", NULL3, "2-0", 1, 2).replacen("*12\r\n", "%6\r\n", 1),
    );
    check(&mut c, "XGROUP SETID x g1 $ ENTRIESREAD 5", "+OK\r\n");
    check(
        &mut c,
        "XINFO GROUPS x",
        &group(":5\r\n", ":0\r\n", "5-0", 1, 2),
    );
}

#[test]
fn copy_rename_and_move_keep_groups() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "XADD x 1 a 1", &bulk("1-0"));
    check(&mut c, "XADD x 2 b 2", &bulk("2-0"));
    check(&mut c, "XGROUP CREATE x g 0", "+OK\r\n");
    check(
        &mut c,
        "XREADGROUP GROUP g alice COUNT 1 STREAMS x >",
        &format!(
            "*1\r\n*2\r\n{}{}",
            bulk("x"),
            array(&[entry("1-0", &["a", "1"])])
        ),
    );
    let mut redis = server.client();
    let full = |redis: &mut redis::Connection, key: &str| -> redis::Value {
        redis::cmd("XINFO")
            .arg(&["STREAM", key, "FULL"])
            .query(redis)
            .unwrap()
    };
    let original = full(&mut redis, "x");
    check(&mut c, "COPY x y", ":1\r\n");
    assert_eq!(full(&mut redis, "y"), original);
    check(&mut c, "DEL x", ":1\r\n");
    assert_eq!(full(&mut redis, "y"), original);
    check(&mut c, "RENAME y z", "+OK\r\n");
    assert_eq!(full(&mut redis, "z"), original);
    check(&mut c, "MOVE z 1", ":1\r\n");
    let () = redis::cmd("SELECT").arg(1).query(&mut redis).unwrap();
    assert_eq!(full(&mut redis, "z"), original);
    let pending: Vec<(String, String, i64, i64)> = redis::cmd("XPENDING")
        .arg(&["z", "g", "-", "+", "10"])
        .query(&mut redis)
        .unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].1, "alice");
}

/// Sends a command written as space-separated words without reading the reply.
fn send(conn: &mut RawConn, command: &str) {
    let args: Vec<&[u8]> = command.split(' ').map(str::as_bytes).collect();
    conn.send(&encode(&args));
}

/// Reads exactly `expected.len()` bytes and asserts they are `expected`.
fn expect_reply(conn: &mut RawConn, expected: &str) {
    let got = conn.read_n(expected.len());
    assert_eq!(String::from_utf8_lossy(&got), expected);
}

/// Waits (bounded) until INFO reports `count` blocked clients.
fn wait_blocked(control: &mut RawConn, count: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        send(control, "INFO clients");
        let header = read_line(control);
        let len: usize = header.trim()[1..].parse().expect("bulk length");
        let body = String::from_utf8_lossy(&control.read_n(len + 2)).into_owned();
        let blocked = body
            .lines()
            .find_map(|l| l.strip_prefix("blocked_clients:"))
            .and_then(|v| v.trim().parse::<usize>().ok());
        if blocked == Some(count) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never saw {count} blocked clients"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// One stream's entries as XREAD answers them for a single key (RESP2).
fn one_stream(key: &str, entries: &[String]) -> String {
    format!("*1\r\n*2\r\n{}{}", bulk(key), array(entries))
}

#[test]
fn xread_block_is_woken_by_xadd_and_dollar_means_after_the_call() {
    let server = TestServer::start(&[]);
    let mut control = server.raw();
    let mut waiter = server.raw();
    check(&mut control, "XADD s 1 f 1", &bulk("1-0"));
    send(&mut waiter, "XREAD BLOCK 0 STREAMS s $");
    wait_blocked(&mut control, 1);
    check(&mut control, "XADD s 2 f 2", &bulk("2-0"));
    expect_reply(&mut waiter, &one_stream("s", &[entry("2-0", &["f", "2"])]));
    wait_blocked(&mut control, 0);

    // `$` stays what it meant when the call came: a write that wakes the client without
    // adding an entry (a new group) does not move it, so the next entry still serves it.
    send(&mut waiter, "XREAD BLOCK 0 STREAMS s $");
    wait_blocked(&mut control, 1);
    check(&mut control, "XGROUP CREATE s g $", "+OK\r\n");
    check(&mut control, "XADD s 3 f 3", &bulk("3-0"));
    expect_reply(&mut waiter, &one_stream("s", &[entry("3-0", &["f", "3"])]));

    // A missing stream: `$` is 0-0, so its first entry serves; a key of another type
    // meanwhile is waited through.
    send(&mut waiter, "XREAD COUNT 5 BLOCK 0 STREAMS nokey other $ $");
    wait_blocked(&mut control, 1);
    check(&mut control, "SET nokey x", "+OK\r\n");
    check(&mut control, "DEL nokey", ":1\r\n");
    check(&mut control, "XADD other 5 a b", &bulk("5-0"));
    expect_reply(
        &mut waiter,
        &one_stream("other", &[entry("5-0", &["a", "b"])]),
    );
    wait_blocked(&mut control, 0);
}

#[test]
fn blocking_timeouts_and_multi() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "XADD s 1 f 1", &bulk("1-0"));
    check(&mut c, "XGROUP CREATE s g $", "+OK\r\n");
    check(&mut c, "XREAD BLOCK 20 STREAMS s $", NIL_ARRAY);
    check(
        &mut c,
        "XREADGROUP GROUP g c BLOCK 20 STREAMS s >",
        NIL_ARRAY,
    );
    let mut c3 = resp3(&server);
    check(&mut c3, "XREAD BLOCK 20 STREAMS s $", NULL3);
    check(&mut c3, "XREADGROUP GROUP g c BLOCK 20 STREAMS s >", NULL3);
    // Inside MULTI: at once, as a timeout.
    check(&mut c, "MULTI", "+OK\r\n");
    check(&mut c, "XREAD BLOCK 0 STREAMS s $", "+QUEUED\r\n");
    check(
        &mut c,
        "XREADGROUP GROUP g c BLOCK 0 STREAMS s >",
        "+QUEUED\r\n",
    );
    check(&mut c, "EXEC", "*2\r\n*-1\r\n*-1\r\n");
    // A history ID never blocks: the consumer's (empty) pending list at once.
    check(
        &mut c,
        "XREADGROUP GROUP g c BLOCK 0 STREAMS s 0",
        &format!("*1\r\n*2\r\n{}*0\r\n", bulk("s")),
    );
}

#[test]
fn xreadgroup_block_served_once_and_ended_by_key_or_group_loss() {
    let server = TestServer::start(&[]);
    let mut control = server.raw();
    let mut alice = server.raw();
    let mut bob = server.raw();
    check(&mut control, "XGROUP CREATE s g $ MKSTREAM", "+OK\r\n");
    send(&mut alice, "XREADGROUP GROUP g alice BLOCK 0 STREAMS s >");
    wait_blocked(&mut control, 1);
    send(&mut bob, "XREADGROUP GROUP g bob BLOCK 0 STREAMS s >");
    wait_blocked(&mut control, 2);
    // One entry goes to the first waiter only; the second keeps waiting.
    check(&mut control, "XADD s 1 f 1", &bulk("1-0"));
    expect_reply(&mut alice, &one_stream("s", &[entry("1-0", &["f", "1"])]));
    wait_blocked(&mut control, 1);
    check(
        &mut control,
        "XPENDING s g",
        "*4\r\n:1\r\n$3\r\n1-0\r\n$3\r\n1-0\r\n*1\r\n*2\r\n$5\r\nalice\r\n$1\r\n1\r\n",
    );
    check(&mut control, "XADD s 2 f 2", &bulk("2-0"));
    expect_reply(&mut bob, &one_stream("s", &[entry("2-0", &["f", "2"])]));
    wait_blocked(&mut control, 0);

    send(&mut alice, "XREADGROUP GROUP g alice BLOCK 0 STREAMS s >");
    wait_blocked(&mut control, 1);
    check(&mut control, "XGROUP DESTROY s g", ":1\r\n");
    expect_reply(
        &mut alice,
        "-NOGROUP the consumer group this client was blocked on no longer exists\r\n",
    );

    check(&mut control, "XGROUP CREATE s g $", "+OK\r\n");
    send(&mut alice, "XREADGROUP GROUP g alice BLOCK 0 STREAMS s >");
    wait_blocked(&mut control, 1);
    check(&mut control, "SET s x", "+OK\r\n");
    expect_reply(&mut alice, "-UNBLOCKED the stream key no longer exists\r\n");
    wait_blocked(&mut control, 0);
}
