//! The geo commands against the real binary: scores, coordinates and distances byte for
//! byte as Redis 7.0 answers them, RESP2 and RESP3.

mod common;

use common::replies::{NIL, NOT_FLOAT, NULL3, SYNTAX, WRONGTYPE};
use common::{bulk, bulks, check, resp3, TestServer};

const PALERMO_POS: &str = "*2\r\n$20\r\n13.36138933897018433\r\n$20\r\n38.11555639549629859\r\n";
const CATANIA_POS: &str = "*2\r\n$20\r\n15.08726745843887329\r\n$20\r\n37.50266842333162032\r\n";

fn sicily(c: &mut common::RawConn) {
    check(
        c,
        "GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
        ":2\r\n",
    );
}

#[test]
fn add_scores_positions_hashes_and_distances() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    sicily(&mut c);
    check(
        &mut c,
        "ZRANGE Sicily 0 -1 WITHSCORES",
        &bulks(&["Palermo", "3479099956230698", "Catania", "3479447370796909"]),
    );
    check(
        &mut c,
        "GEOPOS Sicily Palermo nope",
        &format!("*2\r\n{PALERMO_POS}*-1\r\n"),
    );
    check(&mut c, "GEOPOS missing a", "*1\r\n*-1\r\n");
    check(
        &mut c,
        "GEODIST Sicily Palermo Catania",
        &bulk("166274.1516"),
    );
    check(
        &mut c,
        "GEODIST Sicily Palermo Catania km",
        &bulk("166.2742"),
    );
    check(
        &mut c,
        "GEODIST Sicily Palermo Catania MI",
        &bulk("103.3182"),
    );
    check(
        &mut c,
        "GEODIST Sicily Palermo Catania ft",
        &bulk("545518.8700"),
    );
    check(&mut c, "GEODIST Sicily Palermo Palermo", &bulk("0.0000"));
    check(&mut c, "GEODIST Sicily Palermo nope", NIL);
    check(&mut c, "GEODIST missing a b", NIL);
    check(&mut c, "GEODIST Sicily a b km x", SYNTAX);
    check(
        &mut c,
        "GEODIST Sicily a b yd",
        "-ERR unsupported unit provided. please use M, KM, FT, MI\r\n",
    );
    check(
        &mut c,
        "GEOHASH Sicily Palermo Catania nope",
        "*3\r\n$11\r\nsqc8b49rny0\r\n$11\r\nsqdtr74hyu0\r\n$-1\r\n",
    );
    check(&mut c, "GEOADD points -5.6 42.6 test", ":1\r\n");
    check(
        &mut c,
        "GEOHASH points test",
        "*1\r\n$11\r\nezs42e44yx0\r\n",
    );
}

#[test]
fn add_options_and_errors() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    sicily(&mut c);
    check(
        &mut c,
        "GEOADD Sicily 13.361389 38.115556 Palermo",
        ":0\r\n",
    );
    check(
        &mut c,
        "GEOADD Sicily CH XX 13.361389 38 Palermo 1 1 newone",
        ":1\r\n",
    );
    check(&mut c, "ZSCORE Sicily newone", NIL);
    check(
        &mut c,
        "GEOADD Sicily NX CH 1 1 Palermo 2 2 other",
        ":1\r\n",
    );
    check(&mut c, "GEOADD missing XX 1 1 a", ":0\r\n");
    check(&mut c, "EXISTS missing", ":0\r\n");
    check(&mut c, "GEOADD Sicily NX XX 1 1 a", SYNTAX);
    check(&mut c, "GEOADD Sicily CH foo 1 1 a", SYNTAX);
    check(&mut c, "GEOADD Sicily CH CH CH", SYNTAX);
    check(&mut c, "GEOADD Sicily 1 1 a 2 2", SYNTAX);
    check(&mut c, "GEOADD Sicily x 1 a", NOT_FLOAT);
    check(&mut c, "GEOADD Sicily 1e400 1 a", NOT_FLOAT);
    check(
        &mut c,
        "GEOADD Sicily 200 10 x",
        "-ERR invalid longitude,latitude pair 200.000000,10.000000\r\n",
    );
    check(
        &mut c,
        "GEOADD Sicily 10 86 x",
        "-ERR invalid longitude,latitude pair 10.000000,86.000000\r\n",
    );
    check(&mut c, "SET str v", "+OK\r\n");
    for command in [
        "GEOADD str 1 1 a",
        "GEOPOS str a",
        "GEODIST str a b",
        "GEOHASH str a",
        "GEORADIUS str 1 1 1 km",
        "GEORADIUSBYMEMBER str a 1 km",
        "GEOSEARCH str FROMLONLAT 1 1 BYRADIUS 1 km",
        "GEOSEARCHSTORE d str FROMLONLAT 1 1 BYRADIUS 1 km",
    ] {
        check(&mut c, command, WRONGTYPE);
    }
}

#[test]
fn radius_searches() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    sicily(&mut c);
    check(
        &mut c,
        "GEORADIUS Sicily 15 37 200 km WITHDIST WITHCOORD WITHHASH ASC",
        &format!(
            "*2\r\n*4\r\n{}{}:3479447370796909\r\n{CATANIA_POS}*4\r\n{}{}:3479099956230698\r\n{PALERMO_POS}",
            bulk("Catania"),
            bulk("56.4413"),
            bulk("Palermo"),
            bulk("190.4424")
        ),
    );
    check(
        &mut c,
        "GEORADIUS Sicily 15 37 100 km",
        &bulks(&["Catania"]),
    );
    check(
        &mut c,
        "GEORADIUS Sicily 15 37 200 km COUNT 1 DESC",
        &bulks(&["Palermo"]),
    );
    check(&mut c, "GEORADIUS_RO Sicily 15 37 1 km", "*0\r\n");
    check(
        &mut c,
        "GEORADIUSBYMEMBER Sicily Palermo 200 km WITHDIST",
        &format!(
            "*2\r\n*2\r\n{}{}*2\r\n{}{}",
            bulk("Palermo"),
            bulk("0.0000"),
            bulk("Catania"),
            bulk("166.2742")
        ),
    );
    check(
        &mut c,
        "GEORADIUSBYMEMBER_RO Sicily Catania 1 km",
        &bulks(&["Catania"]),
    );
    check(&mut c, "GEORADIUS missing 1 1 1 km", "*0\r\n");
    check(&mut c, "GEORADIUSBYMEMBER missing a 1 km", "*0\r\n");
    check(
        &mut c,
        "GEORADIUSBYMEMBER Sicily nope 1 km",
        "-ERR could not decode requested zset member\r\n",
    );
    let errors = [
        (
            "GEORADIUS Sicily 15 37 1 yd",
            "-ERR unsupported unit provided. please use M, KM, FT, MI\r\n",
        ),
        (
            "GEORADIUS Sicily 15 37 -1 km",
            "-ERR radius cannot be negative\r\n",
        ),
        ("GEORADIUS Sicily 15 37 x km", "-ERR need numeric radius\r\n"),
        (
            "GEORADIUS Sicily 15 37 1 km COUNT 0",
            "-ERR COUNT must be > 0\r\n",
        ),
        ("GEORADIUS Sicily 15 37 1 km COUNT", SYNTAX),
        (
            "GEORADIUS Sicily 15 37 1 km ANY",
            "-ERR the ANY argument requires COUNT argument\r\n",
        ),
        (
            "GEORADIUS Sicily 15 37 1 km STORE d WITHDIST",
            "-ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options\r\n",
        ),
        ("GEORADIUS_RO Sicily 15 37 1 km STORE d", SYNTAX),
        ("GEORADIUS Sicily 15 37 1 km STORE", SYNTAX),
    ];
    for (command, reply) in errors {
        check(&mut c, command, reply);
    }
}

#[test]
fn searches_by_box_and_member() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    sicily(&mut c);
    check(
        &mut c,
        "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 400 400 km ASC WITHDIST",
        &format!(
            "*2\r\n*2\r\n{}{}*2\r\n{}{}",
            bulk("Catania"),
            bulk("56.4413"),
            bulk("Palermo"),
            bulk("190.4424")
        ),
    );
    check(
        &mut c,
        "GEOSEARCH Sicily FROMMEMBER Palermo BYRADIUS 100 km",
        &bulks(&["Palermo"]),
    );
    let errors = [
        (
            "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX -1 1 km",
            "-ERR height or width cannot be negative\r\n",
        ),
        (
            "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX x 1 km",
            "-ERR need numeric width\r\n",
        ),
        (
            "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 1 x km",
            "-ERR need numeric height\r\n",
        ),
        (
            "geosearch Sicily BYBOX 1 1 km ASC",
            "-ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for geosearch\r\n",
        ),
        (
            "GEOSEARCH Sicily FROMLONLAT 1 1 ASC DESC",
            "-ERR exactly one of BYRADIUS and BYBOX can be specified for GEOSEARCH\r\n",
        ),
        (
            "GEOSEARCH Sicily FROMLONLAT 1 1 FROMMEMBER Palermo BYRADIUS 1 km",
            SYNTAX,
        ),
        (
            "GEOSEARCH Sicily FROMLONLAT 1 1 BYRADIUS 1 km BYBOX 1 1 km",
            SYNTAX,
        ),
        ("GEOSEARCH Sicily FROMLONLAT 1 1 BYRADIUS 1 km STOREDIST", SYNTAX),
        (
            "GEOSEARCHSTORE d Sicily FROMLONLAT 15 37 BYRADIUS 1 km WITHCOORD",
            "-ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options\r\n",
        ),
        (
            "GEOSEARCHSTORE d Sicily FROMLONLAT 15 37 BYRADIUS 1 km STORE x",
            SYNTAX,
        ),
    ];
    for (command, reply) in errors {
        check(&mut c, command, reply);
    }
}

#[test]
fn store_forms() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    sicily(&mut c);
    check(
        &mut c,
        "GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 km STOREDIST",
        ":2\r\n",
    );
    check(
        &mut c,
        "ZRANGE dst 0 -1 WITHSCORES",
        &bulks(&[
            "Catania",
            "56.441257870158204",
            "Palermo",
            "190.44242984775784",
        ]),
    );
    check(&mut c, "GEORADIUS Sicily 15 37 200 km STORE dst2", ":2\r\n");
    check(
        &mut c,
        "ZRANGE dst2 0 -1 WITHSCORES",
        &bulks(&["Palermo", "3479099956230698", "Catania", "3479447370796909"]),
    );
    // An empty result deletes the destination; a missing source too.
    check(&mut c, "GEORADIUS Sicily 15 37 1 km STORE dst2", ":0\r\n");
    check(&mut c, "EXISTS dst2", ":0\r\n");
    check(
        &mut c,
        "GEOSEARCHSTORE dst missing FROMMEMBER x BYRADIUS 1 km",
        ":0\r\n",
    );
    check(&mut c, "EXISTS dst", ":0\r\n");
    // With STORE given twice, the last destination is the one written.
    check(
        &mut c,
        "GEORADIUSBYMEMBER Sicily Palermo 500 km STORE a STOREDIST b COUNT 1",
        ":1\r\n",
    );
    check(&mut c, "EXISTS a", ":0\r\n");
    check(
        &mut c,
        "ZRANGE b 0 -1 WITHSCORES",
        &bulks(&["Palermo", "0"]),
    );
    // The source itself can be the destination.
    check(
        &mut c,
        "GEORADIUS Sicily 15 37 100 km STORE Sicily",
        ":1\r\n",
    );
    check(&mut c, "ZRANGE Sicily 0 -1", &bulks(&["Catania"]));
}

#[test]
fn any_count_and_neighbour_order() {
    // Redis' own test data: ANY stops at the first matches in cell-scan order.
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    c.expect(
        &[
            b"GEOADD",
            b"nyc",
            b"-73.9454966",
            b"40.747533",
            b"lic market",
            b"-73.9733487",
            b"40.7648057",
            b"central park n/q/r",
            b"-73.9903085",
            b"40.7362513",
            b"union square",
            b"-74.0131604",
            b"40.7126674",
            b"wtc one",
            b"-73.7858139",
            b"40.6428986",
            b"jfk",
            b"-73.9375699",
            b"40.7498929",
            b"q4",
            b"-73.9564142",
            b"40.7480973",
            b"4545",
        ],
        b":7\r\n",
    );
    check(
        &mut c,
        "GEORADIUS nyc -73.9798091 40.7598464 10 km COUNT 3 ANY",
        &bulks(&["wtc one", "union square", "central park n/q/r"]),
    );
    check(
        &mut c,
        "GEORADIUS nyc -73.9798091 40.7598464 10 km COUNT 3",
        &bulks(&["central park n/q/r", "4545", "union square"]),
    );
    check(
        &mut c,
        "GEORADIUS nyc -73.9798091 40.7598464 10 km COUNT 2 DESC",
        &bulks(&["wtc one", "q4"]),
    );
    // A radius bigger than the Earth still finds everything once.
    check(
        &mut c,
        "GEOADD users -47.271613776683807 -54.534504198047678 u",
        ":1\r\n",
    );
    check(&mut c, "GEORADIUS users 0 0 50000 km", &bulks(&["u"]));
}

#[test]
fn resp3_replies() {
    let server = TestServer::start(&[]);
    let mut c = resp3(&server);
    sicily(&mut c);
    check(
        &mut c,
        "GEOPOS Sicily Palermo nope",
        "*2\r\n*2\r\n,13.36138933897018433\r\n,38.11555639549629859\r\n_\r\n",
    );
    check(
        &mut c,
        "GEORADIUS Sicily 15 37 100 km WITHCOORD WITHDIST",
        &format!(
            "*1\r\n*3\r\n{}{}*2\r\n,15.08726745843887329\r\n,37.50266842333162032\r\n",
            bulk("Catania"),
            bulk("56.4413")
        ),
    );
    check(&mut c, "GEODIST Sicily Palermo nope", NULL3);
    check(
        &mut c,
        "GEODIST Sicily Palermo Catania km",
        &bulk("166.2742"),
    );
    check(&mut c, "GEOHASH Sicily nope", "*1\r\n_\r\n");
}

#[test]
fn command_introspection() {
    let server = TestServer::start(&[]);
    let mut c = server.raw();
    check(
        &mut c,
        "COMMAND GETKEYS GEORADIUS k 1 2 3 km STORE a STOREDIST b",
        &bulks(&["k", "a", "b"]),
    );
    check(
        &mut c,
        "COMMAND GETKEYS GEOSEARCHSTORE dst src FROMMEMBER m BYRADIUS 1 km",
        &bulks(&["dst", "src"]),
    );
    let mut redis = server.client();
    for (command, movable) in [
        ("georadius", true),
        ("georadiusbymember", true),
        ("georadius_ro", false),
        ("geosearch", false),
    ] {
        let info: redis::Value = redis::cmd("COMMAND")
            .arg("INFO")
            .arg(command)
            .query(&mut redis)
            .unwrap();
        let text = format!("{info:?}");
        assert_eq!(text.contains("movablekeys"), movable, "{command}: {text}");
    }
}
