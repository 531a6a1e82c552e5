//! Command-table entries of the geo family. Facts (arity, flags, key specs, arguments,
//! since, complexity) follow Redis 7.0.15's command descriptions; summaries and history
//! notes are our own.

use crate::spec::{
    acl, docflag, flag, keyflag, Arg, ArgType, BeginSearch, CommandSpec, FindKeys, Group, KeySpec,
    LockPlan,
};

use super::{points, search};

pub static COMMANDS: &[CommandSpec] = &[
    GEOADD,
    GEOPOS,
    GEODIST,
    GEOHASH,
    GEORADIUS,
    GEORADIUS_RO,
    GEORADIUSBYMEMBER,
    GEORADIUSBYMEMBER_RO,
    GEOSEARCH,
    GEOSEARCHSTORE,
];

const SOURCE: KeySpec = KeySpec::single(1, keyflag::RO | keyflag::ACCESS);

const fn store_key(keyword: &'static str, start_from: i32) -> KeySpec {
    KeySpec {
        flags: keyflag::OW | keyflag::UPDATE,
        begin: BeginSearch::Keyword {
            keyword,
            start_from,
        },
        find: FindKeys::Range {
            last_key: 0,
            key_step: 1,
            limit: 0,
        },
        notes: None,
    }
}

/// Redis lists the unit tokens in upper case (they are matched in any case).
const UNIT: Arg = Arg::oneof(
    "unit",
    &[
        Arg::token("m", "M"),
        Arg::token("km", "KM"),
        Arg::token("ft", "FT"),
        Arg::token("mi", "MI"),
    ],
);

const fn double(name: &'static str) -> Arg {
    Arg::new(name, ArgType::Double)
}

const WITHCOORD: Arg = Arg::token("withcoord", "WITHCOORD").optional();
const WITHDIST: Arg = Arg::token("withdist", "WITHDIST").optional();
const WITHHASH: Arg = Arg::token("withhash", "WITHHASH").optional();
const ORDER: Arg = Arg::oneof(
    "order",
    &[Arg::token("asc", "ASC"), Arg::token("desc", "DESC")],
)
.optional();
const COUNT: Arg = Arg::block(
    "count",
    &[
        Arg::integer("count").with_token("COUNT"),
        Arg::token("any", "ANY").optional(),
    ],
)
.optional();
/// GEORADIUS's COUNT block: ANY is marked as added in 6.2.0 there.
const COUNT_SINCE: Arg = Arg::block(
    "count",
    &[
        Arg::integer("count").with_token("COUNT"),
        Arg::token("any", "ANY").optional().since("6.2.0"),
    ],
)
.optional();
const STORE: Arg = Arg {
    key_spec_index: Some(1),
    ..Arg::new("key", ArgType::Key).with_token("STORE").optional()
};
const STOREDIST: Arg = Arg {
    key_spec_index: Some(2),
    ..Arg::new("key", ArgType::Key)
        .with_token("STOREDIST")
        .optional()
};
const FROM: Arg = Arg::oneof(
    "from",
    &[
        Arg::string("member").with_token("FROMMEMBER"),
        Arg::block(
            "longitude_latitude",
            &[double("longitude"), double("latitude")],
        )
        .with_token("FROMLONLAT"),
    ],
);
const BY: Arg = Arg::oneof(
    "by",
    &[
        Arg::block("circle", &[double("radius").with_token("BYRADIUS"), UNIT]),
        Arg::block(
            "box",
            &[double("width").with_token("BYBOX"), double("height"), UNIT],
        ),
    ],
);

const RADIUS_COMPLEXITY: &str = "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.";
const SEARCH_COMPLEXITY: &str = "O(N+log(M)) where N is the number of elements in the grid-aligned bounding box area around the shape provided as the filter and M is the number of items inside the shape";
const UPPERCASE_UNITS: (&str, &str) = ("7.0.0", "Unit names may be given in upper case.");

pub const GEOADD: CommandSpec = CommandSpec {
    name: "geoadd",
    group: Group::Geo,
    summary: "Adds members at given longitude/latitude positions to a geospatial index (a sorted set), or moves them.",
    since: "3.2.0",
    complexity:
        "O(log(N)) for each item added, where N is the number of elements in the sorted set.",
    arity: -5,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::GEO,
    key_specs: &[KeySpec::single(1, keyflag::RW | keyflag::UPDATE)],
    arguments: &[
        Arg::key("key", 0),
        Arg::oneof("condition", &[Arg::token("nx", "NX"), Arg::token("xx", "XX")])
            .optional()
            .since("6.2.0"),
        Arg::token("change", "CH").optional().since("6.2.0"),
        Arg::block(
            "longitude_latitude_member",
            &[double("longitude"), double("latitude"), Arg::string("member")],
        )
        .multiple(),
    ],
    history: &[("6.2.0", "The CH, NX and XX options were introduced.")],
    handler: Some(points::geoadd),
    ..CommandSpec::BASE
};

pub const GEOPOS: CommandSpec = CommandSpec {
    name: "geopos",
    group: Group::Geo,
    summary: "Returns the longitude and latitude of members of a geospatial index.",
    since: "3.2.0",
    complexity: "O(N) where N is the number of members requested.",
    arity: -2,
    flags: flag::READONLY,
    acl: acl::GEO,
    key_specs: &[SOURCE],
    arguments: &[Arg::key("key", 0), Arg::string("member").multiple()],
    handler: Some(points::geopos),
    ..CommandSpec::BASE
};

pub const GEODIST: CommandSpec = CommandSpec {
    name: "geodist",
    group: Group::Geo,
    summary: "Returns the distance between two members of a geospatial index.",
    since: "3.2.0",
    complexity: "O(log(N))",
    arity: -4,
    flags: flag::READONLY,
    acl: acl::GEO,
    key_specs: &[SOURCE],
    arguments: &[
        Arg::key("key", 0),
        Arg::string("member1"),
        Arg::string("member2"),
        UNIT.optional(),
    ],
    handler: Some(points::geodist),
    ..CommandSpec::BASE
};

pub const GEOHASH: CommandSpec = CommandSpec {
    name: "geohash",
    group: Group::Geo,
    summary: "Returns the standard geohash strings of members of a geospatial index.",
    since: "3.2.0",
    complexity:
        "O(log(N)) for each member requested, where N is the number of elements in the sorted set.",
    arity: -2,
    flags: flag::READONLY,
    acl: acl::GEO,
    key_specs: &[SOURCE],
    arguments: &[Arg::key("key", 0), Arg::string("member").multiple()],
    handler: Some(points::geohash),
    ..CommandSpec::BASE
};

pub const GEORADIUS: CommandSpec = CommandSpec {
    name: "georadius",
    group: Group::Geo,
    summary: "Finds members of a geospatial index within a radius of a position, optionally storing them.",
    since: "3.2.0",
    complexity: RADIUS_COMPLEXITY,
    arity: -6,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::GEO,
    key_specs: &[SOURCE, store_key("STORE", 6), store_key("STOREDIST", 6)],
    arguments: &[
        Arg::key("key", 0),
        double("longitude"),
        double("latitude"),
        double("radius"),
        UNIT,
        WITHCOORD,
        WITHDIST,
        WITHHASH,
        COUNT_SINCE,
        ORDER,
        STORE,
        STOREDIST,
    ],
    history: &[
        ("6.2.0", "The ANY option of COUNT was introduced."),
        UPPERCASE_UNITS,
    ],
    doc_flags: docflag::DEPRECATED,
    deprecated_since: Some("6.2.0"),
    replaced_by: Some("`GEOSEARCH` and `GEOSEARCHSTORE` with the `BYRADIUS` argument"),
    handler: Some(search::georadius),
    // With STORE repeated, the last destination wins while the key spec finds the first:
    // only the whole keyspace is sure to hold the key written.
    lock: LockPlan::All,
    ..CommandSpec::BASE
};

pub const GEORADIUS_RO: CommandSpec = CommandSpec {
    name: "georadius_ro",
    summary: "Finds members of a geospatial index within a radius of a position.",
    since: "3.2.10",
    flags: flag::READONLY,
    key_specs: &[SOURCE],
    arguments: &[
        Arg::key("key", 0),
        double("longitude"),
        double("latitude"),
        double("radius"),
        UNIT,
        WITHCOORD,
        WITHDIST,
        WITHHASH,
        COUNT_SINCE,
        ORDER,
    ],
    history: &[("6.2.0", "The ANY option of COUNT was introduced.")],
    replaced_by: Some("`GEOSEARCH` with the `BYRADIUS` argument"),
    handler: Some(search::georadius_ro),
    lock: LockPlan::Keys,
    ..GEORADIUS
};

pub const GEORADIUSBYMEMBER: CommandSpec = CommandSpec {
    name: "georadiusbymember",
    group: Group::Geo,
    summary: "Finds members of a geospatial index within a radius of one of its members, optionally storing them.",
    since: "3.2.0",
    complexity: RADIUS_COMPLEXITY,
    arity: -5,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::GEO,
    key_specs: &[SOURCE, store_key("STORE", 5), store_key("STOREDIST", 5)],
    arguments: &[
        Arg::key("key", 0),
        Arg::string("member"),
        double("radius"),
        UNIT,
        WITHCOORD,
        WITHDIST,
        WITHHASH,
        COUNT,
        ORDER,
        STORE,
        STOREDIST,
    ],
    history: &[UPPERCASE_UNITS],
    doc_flags: docflag::DEPRECATED,
    deprecated_since: Some("6.2.0"),
    replaced_by: Some(
        "`GEOSEARCH` and `GEOSEARCHSTORE` with the `BYRADIUS` and `FROMMEMBER` arguments",
    ),
    handler: Some(search::georadiusbymember),
    // As GEORADIUS: a repeated STORE writes a key the key spec does not find.
    lock: LockPlan::All,
    ..CommandSpec::BASE
};

pub const GEORADIUSBYMEMBER_RO: CommandSpec = CommandSpec {
    name: "georadiusbymember_ro",
    summary: "Finds members of a geospatial index within a radius of one of its members.",
    since: "3.2.10",
    flags: flag::READONLY,
    key_specs: &[SOURCE],
    arguments: &[
        Arg::key("key", 0),
        Arg::string("member"),
        double("radius"),
        UNIT,
        WITHCOORD,
        WITHDIST,
        WITHHASH,
        COUNT,
        ORDER,
    ],
    history: &[],
    replaced_by: Some("`GEOSEARCH` with the `BYRADIUS` and `FROMMEMBER` arguments"),
    handler: Some(search::georadiusbymember_ro),
    lock: LockPlan::Keys,
    ..GEORADIUSBYMEMBER
};

pub const GEOSEARCH: CommandSpec = CommandSpec {
    name: "geosearch",
    group: Group::Geo,
    summary:
        "Finds members of a geospatial index inside a circle or box around a member or a position.",
    since: "6.2.0",
    complexity: SEARCH_COMPLEXITY,
    arity: -7,
    flags: flag::READONLY,
    acl: acl::GEO,
    key_specs: &[SOURCE],
    arguments: &[
        Arg::key("key", 0),
        FROM,
        BY,
        ORDER,
        COUNT,
        WITHCOORD,
        WITHDIST,
        WITHHASH,
    ],
    history: &[UPPERCASE_UNITS],
    handler: Some(search::geosearch),
    ..CommandSpec::BASE
};

pub const GEOSEARCHSTORE: CommandSpec = CommandSpec {
    name: "geosearchstore",
    group: Group::Geo,
    summary:
        "Stores the members of a geospatial index inside a circle or box in another sorted set.",
    since: "6.2.0",
    complexity: SEARCH_COMPLEXITY,
    arity: -8,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::GEO,
    key_specs: &[
        KeySpec::single(1, keyflag::OW | keyflag::UPDATE),
        KeySpec::single(2, keyflag::RO | keyflag::ACCESS),
    ],
    arguments: &[
        Arg::key("destination", 0),
        Arg::key("source", 1),
        FROM,
        BY,
        ORDER,
        COUNT,
        Arg::token("storedist", "STOREDIST").optional(),
    ],
    history: &[UPPERCASE_UNITS],
    handler: Some(search::geosearchstore),
    ..CommandSpec::BASE
};
