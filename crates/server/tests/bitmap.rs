//! The bitmap commands against the real binary: replies byte for byte, RESP2 and RESP3.

mod common;

use common::replies::{NOT_INTEGER, SYNTAX, WRONGTYPE};
use common::{check, resp3, RawConn, TestServer};

/// Sends a command given as separate (binary) arguments and asserts the exact reply.
fn check_args(conn: &mut RawConn, args: &[&[u8]], expected: &str) {
    conn.expect(args, expected.as_bytes());
}

fn int(n: i64) -> String {
    format!(":{n}\r\n")
}

/// An array reply of integers.
fn ints(values: &[i64]) -> String {
    let mut out = format!("*{}\r\n", values.len());
    for v in values {
        out.push_str(&int(*v));
    }
    out
}

const BAD_OFFSET: &str = "-ERR bit offset is not an integer or out of range\r\n";
const BAD_BIT: &str = "-ERR bit is not an integer or out of range\r\n";
const BAD_TYPE: &str = "-ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.\r\n";

#[test]
fn setbit_and_getbit() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "SETBIT k 7 1", &int(0));
    check(&mut c, "GET k", "$1\r\n\x01\r\n");
    check(&mut c, "SETBIT k 7 1", &int(1));
    check(&mut c, "SETBIT k 7 0", &int(1));
    check(&mut c, "GETBIT k 7", &int(0));
    // Writing far away pads with zero bytes.
    check(&mut c, "SETBIT k 17 1", &int(0));
    check(&mut c, "STRLEN k", &int(3));
    check(&mut c, "GETBIT k 17", &int(1));
    check(&mut c, "GETBIT k 16", &int(0));
    check(&mut c, "GETBIT k 1000", &int(0));
    check(&mut c, "GETBIT missing 3", &int(0));
    // Bits of an existing string, most significant first ('`' is 0b0110_0000).
    check(&mut c, "SET s `", "+OK\r\n");
    check(&mut c, "GETBIT s 0", &int(0));
    check(&mut c, "GETBIT s 1", &int(1));
    check(&mut c, "GETBIT s 2", &int(1));
    check(&mut c, "GETBIT s 3", &int(0));
    // Offsets: strict integers, not negative, within 512MB of bytes.
    check(&mut c, "SETBIT k -1 1", BAD_OFFSET);
    check(&mut c, "SETBIT k 4294967296 1", BAD_OFFSET);
    check(&mut c, "SETBIT k 1.5 1", BAD_OFFSET);
    check(&mut c, "GETBIT k 4294967296", BAD_OFFSET);
    check(&mut c, "GETBIT k abc", BAD_OFFSET);
    check(&mut c, "SETBIT k 0 2", BAD_BIT);
    check(&mut c, "SETBIT k 0 -1", BAD_BIT);
    check(&mut c, "SETBIT k 0 x", BAD_BIT);
    check(
        &mut c,
        "SETBIT k 0",
        "-ERR wrong number of arguments for 'setbit' command\r\n",
    );
    check(&mut c, "RPUSH l a", &int(1));
    check(&mut c, "SETBIT l 0 1", WRONGTYPE);
    check(&mut c, "GETBIT l 0", WRONGTYPE);
}

#[test]
fn setbit_at_the_size_limit_follows_proto_max_bulk_len() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "CONFIG SET proto-max-bulk-len 1048576", "+OK\r\n");
    check(&mut c, "SETBIT k 8388608 1", BAD_OFFSET);
    check(&mut c, "SETBIT k 8388607 1", &int(0));
    check(&mut c, "STRLEN k", &int(1048576));
    check(&mut c, "BITCOUNT k", &int(1));
    check(&mut c, "BITPOS k 1", &int(8388607));
}

#[test]
fn bitcount_byte_and_bit_ranges() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "SET k foobar", "+OK\r\n");
    check(&mut c, "BITCOUNT k", &int(26));
    check(&mut c, "BITCOUNT k 0 0", &int(4));
    check(&mut c, "BITCOUNT k 1 1", &int(6));
    check(&mut c, "BITCOUNT k 1 1 BYTE", &int(6));
    check(&mut c, "BITCOUNT k 5 30 bit", &int(17));
    check(&mut c, "BITCOUNT k 0 -1 BIT", &int(26));
    check(&mut c, "BITCOUNT k -2 -1", &int(7));
    check(&mut c, "BITCOUNT k -1 -2", &int(0));
    check(&mut c, "BITCOUNT k 100 200", &int(0));
    check(&mut c, "BITCOUNT k -100 100", &int(26));
    check(&mut c, "BITCOUNT missing", &int(0));
    // A missing key answers 0 before its arguments are looked at.
    check(&mut c, "BITCOUNT missing 0", &int(0));
    check(&mut c, "BITCOUNT k 0", SYNTAX);
    check(&mut c, "BITCOUNT k 0 1 BIT x", SYNTAX);
    check(&mut c, "BITCOUNT k 0 1 bits", SYNTAX);
    check(&mut c, "BITCOUNT k a 1", NOT_INTEGER);
    check(&mut c, "BITCOUNT k 0 b", NOT_INTEGER);
    check(&mut c, "RPUSH l a", &int(1));
    check(&mut c, "BITCOUNT l", WRONGTYPE);
}

#[test]
fn bitpos_finds_set_and_clear_bits() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check_args(&mut c, &[b"SET", b"k", b"\xff\xf0\x00"], "+OK\r\n");
    check(&mut c, "BITPOS k 0", &int(12));
    check(&mut c, "BITPOS k 1", &int(0));
    check(&mut c, "BITPOS k 1 2", &int(-1));
    check(&mut c, "BITPOS k 0 2", &int(16));
    check(&mut c, "BITPOS k 1 1 -1", &int(8));
    check(&mut c, "BITPOS k 1 7 15 BIT", &int(7));
    check(&mut c, "BITPOS k 1 12 23 bit", &int(-1));
    check(&mut c, "BITPOS k 0 2 5 byte", &int(16));
    check(&mut c, "BITPOS k 0 0 1 byte", &int(12));
    check(&mut c, "BITPOS k 1 2 1", &int(-1));
    // All ones: without an end, the first clear bit is the one past the string; with an
    // explicit end there is none.
    check_args(&mut c, &[b"SET", b"ones", b"\xff\xff"], "+OK\r\n");
    check(&mut c, "BITPOS ones 0", &int(16));
    check(&mut c, "BITPOS ones 0 1", &int(16));
    check(&mut c, "BITPOS ones 0 0 -1", &int(-1));
    check(&mut c, "BITPOS ones 0 0 -1 BIT", &int(-1));
    check(&mut c, "BITPOS missing 0", &int(0));
    check(&mut c, "BITPOS missing 1", &int(-1));
    check_args(&mut c, &[b"SET", b"empty", b""], "+OK\r\n");
    check(&mut c, "BITPOS empty 0", &int(-1));
    check(&mut c, "BITPOS empty 1", &int(-1));
    check(
        &mut c,
        "BITPOS k 2",
        "-ERR The bit argument must be 1 or 0.\r\n",
    );
    check(&mut c, "BITPOS k x", NOT_INTEGER);
    check(&mut c, "BITPOS k 1 a", NOT_INTEGER);
    check(&mut c, "BITPOS k 1 0 a", NOT_INTEGER);
    // The unit is checked before the end.
    check(&mut c, "BITPOS k 1 0 a bits", SYNTAX);
    check(&mut c, "BITPOS k 1 0 1 bit x", SYNTAX);
    check(&mut c, "RPUSH l a", &int(1));
    check(&mut c, "BITPOS l 1", WRONGTYPE);
}

#[test]
fn bitop_combines_and_stores() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "SET a foobar", "+OK\r\n");
    check(&mut c, "SET b abcdef", "+OK\r\n");
    check(&mut c, "BITOP AND dest a b", &int(6));
    check(&mut c, "GET dest", "$6\r\n`bc`ab\r\n");
    check(&mut c, "BITOP or dest a b", &int(6));
    check(&mut c, "GET dest", "$6\r\ngoofev\r\n");
    check(&mut c, "BITOP XOR dest a a", &int(6));
    check(&mut c, "GET dest", "$6\r\n\0\0\0\0\0\0\r\n");
    // Shorter and missing sources count as zeros.
    check(&mut c, "SET short \x01", "+OK\r\n");
    check_args(&mut c, &[b"SET", b"x", b"\x03\x03"], "+OK\r\n");
    check(&mut c, "BITOP AND dest x short", &int(2));
    check(&mut c, "GET dest", "$2\r\n\x01\0\r\n");
    check(&mut c, "BITOP OR dest short x missing", &int(2));
    check(&mut c, "GET dest", "$2\r\n\x03\x03\r\n");
    check_args(&mut c, &[b"SET", b"n", b"\x0f\xf0"], "+OK\r\n");
    check(&mut c, "BITOP NOT n n", &int(2));
    c.expect(&[b"GET", b"n"], b"$2\r\n\xf0\x0f\r\n");
    // The destination loses its TTL; an empty result deletes it.
    check(&mut c, "EXPIRE dest 100", &int(1));
    check(&mut c, "BITOP OR dest a", &int(6));
    check(&mut c, "TTL dest", &int(-1));
    check(&mut c, "BITOP AND dest missing other", &int(0));
    check(&mut c, "EXISTS dest", &int(0));
    check(
        &mut c,
        "BITOP NOT dest a b",
        "-ERR BITOP NOT must be called with a single source key.\r\n",
    );
    check(&mut c, "BITOP NAND dest a b", SYNTAX);
    check(&mut c, "RPUSH l a", &int(1));
    check(&mut c, "BITOP AND dest a l", WRONGTYPE);
    check(&mut c, "GET dest", "$-1\r\n");
    // A list destination is simply replaced.
    check(&mut c, "BITOP OR l a", &int(6));
    check(&mut c, "GET l", "$6\r\nfoobar\r\n");
}

#[test]
fn bitfield_get_set_incrby() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(
        &mut c,
        "BITFIELD k SET i8 0 -100 GET i8 0",
        &ints(&[0, -100]),
    );
    check(
        &mut c,
        "BITFIELD k SET u8 0 255 GET u8 0",
        &ints(&[156, 255]),
    );
    check(
        &mut c,
        "BITFIELD k GET i8 0 GET u4 0 GET u4 4",
        &ints(&[-1, 15, 15]),
    );
    check(&mut c, "DEL k", &int(1));
    // The example from Redis' documentation: a 5-bit field at offset 7.
    check(&mut c, "BITFIELD k SET u5 7 23", &ints(&[0]));
    check(&mut c, "GET k", "$2\r\n\x01p\r\n");
    check(
        &mut c,
        "BITFIELD k INCRBY u5 7 1 GET u5 7",
        &ints(&[24, 24]),
    );
    // `#N` addresses the N-th field of the given width.
    check(&mut c, "DEL k", &int(1));
    check(
        &mut c,
        "BITFIELD k SET u8 #1 65 SET u8 #2 66 GET u16 #0",
        &ints(&[0, 0, 65]),
    );
    check(&mut c, "GET k", "$3\r\n\0AB\r\n");
    check(&mut c, "BITFIELD k", "*0\r\n");
    check(&mut c, "BITFIELD missing", "*0\r\n");
    check(&mut c, "BITFIELD missing GET i64 100", &ints(&[0]));
    check(&mut c, "EXISTS missing", &int(0));
    check(
        &mut c,
        "BITFIELD k SET i64 0 -9223372036854775808 GET i64 0 INCRBY i64 0 -1",
        &ints(&[0x0041_4200_0000_0000, i64::MIN, i64::MAX]),
    );
    check(
        &mut c,
        "BITFIELD k GET u63 0 GET u63 1",
        &ints(&[i64::MAX >> 1, i64::MAX]),
    );
}

#[test]
fn bitfield_overflow_modes() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(
        &mut c,
        "BITFIELD k SET u8 0 250 INCRBY u8 0 10",
        &ints(&[0, 4]),
    );
    check(
        &mut c,
        "BITFIELD k OVERFLOW SAT INCRBY u8 0 300 INCRBY u8 0 -1000",
        &ints(&[255, 0]),
    );
    check(&mut c, "BITFIELD k OVERFLOW sat SET u8 0 -1", &ints(&[0]));
    check(&mut c, "BITFIELD k GET u8 0", &ints(&[255]));
    check(
        &mut c,
        "BITFIELD k SET i8 0 127 INCRBY i8 0 1",
        &ints(&[-1, -128]),
    );
    check(
        &mut c,
        "BITFIELD k OVERFLOW SAT INCRBY i8 0 -1 SET i8 0 1000",
        &ints(&[-128, -128]),
    );
    check(&mut c, "BITFIELD k GET i8 0", &ints(&[127]));
    // FAIL refuses the write and answers a null; the mode lasts until changed.
    check(
        &mut c,
        "BITFIELD k OVERFLOW FAIL INCRBY i8 0 1 SET u2 0 4 OVERFLOW WRAP INCRBY i8 0 1",
        "*3\r\n$-1\r\n$-1\r\n:-128\r\n",
    );
    let mut c3 = resp3(&server);
    check(
        &mut c3,
        "BITFIELD k OVERFLOW FAIL INCRBY u8 0 -1000 GET u8 0",
        "*2\r\n_\r\n:128\r\n",
    );
    // A write that fails still creates the key (zero-filled up to the field).
    check(
        &mut c,
        "BITFIELD new OVERFLOW FAIL INCRBY u2 9 10",
        "*1\r\n$-1\r\n",
    );
    check(&mut c, "GET new", "$2\r\n\0\0\r\n");
}

#[test]
fn bitfield_errors_and_read_only_variant() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(&mut c, "BITFIELD k GET u64 0", BAD_TYPE);
    check(&mut c, "BITFIELD k GET i65 0", BAD_TYPE);
    check(&mut c, "BITFIELD k GET i0 0", BAD_TYPE);
    check(&mut c, "BITFIELD k GET x8 0", BAD_TYPE);
    check(&mut c, "BITFIELD k GET i8 -1", BAD_OFFSET);
    check(&mut c, "BITFIELD k GET i8 #", BAD_OFFSET);
    check(&mut c, "BITFIELD k GET u8 #536870912", BAD_OFFSET);
    check(&mut c, "BITFIELD k GET u8 #536870911", &ints(&[0]));
    check(&mut c, "BITFIELD k SET i8 0 x", NOT_INTEGER);
    check(
        &mut c,
        "BITFIELD k OVERFLOW maybe",
        "-ERR Invalid OVERFLOW type specified\r\n",
    );
    check(&mut c, "BITFIELD k GET i8", SYNTAX);
    check(&mut c, "BITFIELD k FROB i8 0", SYNTAX);
    // Every argument is checked before anything is written.
    check(&mut c, "BITFIELD k SET i8 0 1 GET u64 0", BAD_TYPE);
    check(&mut c, "EXISTS k", &int(0));
    check(&mut c, "BITFIELD_RO k GET u8 0 GET i4 #1", &ints(&[0, 0]));
    check(&mut c, "BITFIELD_RO k", "*0\r\n");
    check(
        &mut c,
        "BITFIELD_RO k GET u8 0 SET u8 0 1",
        "-ERR BITFIELD_RO only supports the GET subcommand\r\n",
    );
    check(&mut c, "BITFIELD_RO k INCRBY u8 0 x", NOT_INTEGER);
    check(&mut c, "RPUSH l a", &int(1));
    check(&mut c, "BITFIELD l GET u8 0", WRONGTYPE);
    check(&mut c, "BITFIELD l SET u8 0 1", WRONGTYPE);
    check(&mut c, "BITFIELD_RO l GET u8 0", WRONGTYPE);
}

/// INFO's change counter: a bitmap write counts only when it changes something.
#[test]
fn writes_count_only_real_changes() {
    let server = TestServer::start(&[]);
    let mut conn = server.client();
    let changes = |conn: &mut redis::Connection| -> i64 {
        let info: String = redis::cmd("INFO").arg("persistence").query(conn).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("rdb_changes_since_last_save")
    };
    let run = |conn: &mut redis::Connection, words: &str| {
        let mut parts = words.split(' ');
        let mut cmd = redis::cmd(parts.next().unwrap());
        for p in parts {
            cmd.arg(p);
        }
        let _: redis::Value = cmd.query(conn).unwrap();
    };
    let start = changes(&mut conn);
    run(&mut conn, "SETBIT a 0 0");
    run(&mut conn, "BITFIELD b SET i5 0 0");
    assert_eq!(changes(&mut conn), start + 2, "creating keys");
    run(&mut conn, "SETBIT a 0 0");
    run(&mut conn, "BITFIELD b SET i5 0 0");
    run(&mut conn, "BITFIELD b GET i5 0");
    assert_eq!(changes(&mut conn), start + 2, "no change");
    run(&mut conn, "SETBIT a 0 1");
    run(&mut conn, "BITFIELD b SET i5 0 1 SET i5 5 1 SET i5 0 1");
    // The string grew for the second field, so each of the three writes counts.
    assert_eq!(changes(&mut conn), start + 6, "one bit, three fields");
    run(&mut conn, "BITFIELD b SET i5 0 1 SET i5 5 0 INCRBY i5 0 0");
    assert_eq!(changes(&mut conn), start + 7, "one field of three");
    run(&mut conn, "SETBIT a 90 0");
    assert_eq!(changes(&mut conn), start + 8, "growing");
    run(&mut conn, "BITOP AND c missing");
    assert_eq!(changes(&mut conn), start + 8, "deleting nothing");
    run(&mut conn, "BITOP OR c a");
    assert_eq!(changes(&mut conn), start + 9, "storing");
}

#[test]
fn command_metadata_and_keys() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(
        &mut c,
        "COMMAND GETKEYS BITOP AND dest a b",
        "*3\r\n$4\r\ndest\r\n$1\r\na\r\n$1\r\nb\r\n",
    );
    check(
        &mut c,
        "COMMAND GETKEYSANDFLAGS BITFIELD k GET u8 0 OVERFLOW SAT",
        "*1\r\n*2\r\n$1\r\nk\r\n*2\r\n+RO\r\n+access\r\n",
    );
    check(
        &mut c,
        "COMMAND GETKEYSANDFLAGS BITFIELD k INCRBY u8 0 1",
        "*1\r\n*2\r\n$1\r\nk\r\n*3\r\n+RW\r\n+access\r\n+update\r\n",
    );
    let mut conn = server.client();
    let info: redis::Value = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("bitfield")
        .query(&mut conn)
        .unwrap();
    let text = format!("{info:?}");
    for word in [
        "write",
        "denyoom",
        "@bitmap",
        "variable_flags",
        "This command allows",
    ] {
        assert!(text.contains(word), "{word} missing from {text}");
    }
}
