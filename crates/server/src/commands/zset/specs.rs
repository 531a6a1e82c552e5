//! Command-table entries of the sorted-set family. Facts (arity, flags, key specs, arguments,
//! since, complexity) follow Redis 7.0.15's command descriptions; summaries and history
//! notes are our own.

use crate::spec::{
    acl, docflag, flag, keyflag, Arg, ArgType, BeginSearch, CommandSpec, FindKeys, Group, KeySpec,
};

use super::{add, algebra, pop, range, scan};

pub static COMMANDS: &[CommandSpec] = &[
    BZPOPMIN,
    BZPOPMAX,
    BZMPOP,
    ZADD,
    ZSCORE,
    ZMSCORE,
    ZINCRBY,
    ZCARD,
    ZREM,
    ZRANGE,
    ZRANGESTORE,
    ZRANGEBYSCORE,
    ZREVRANGE,
    ZREVRANGEBYSCORE,
    ZRANGEBYLEX,
    ZREVRANGEBYLEX,
    ZRANK,
    ZREVRANK,
    ZCOUNT,
    ZLEXCOUNT,
    ZSCAN,
    ZPOPMIN,
    ZPOPMAX,
    ZMPOP,
    ZREMRANGEBYRANK,
    ZREMRANGEBYSCORE,
    ZREMRANGEBYLEX,
    ZUNIONSTORE,
    ZINTERSTORE,
    ZUNION,
    ZINTER,
    ZINTERCARD,
    ZDIFF,
    ZDIFFSTORE,
    ZRANDMEMBER,
];

pub const ZADD: CommandSpec = CommandSpec {
    name: "zadd",
    group: Group::SortedSet,
    summary:
        "Adds members with scores to a sorted set, or updates the scores of members already there.",
    since: "1.2.0",
    complexity:
        "O(log(N)) for each item added, where N is the number of elements in the sorted set.",
    arity: -4,
    flags: flag::WRITE | flag::DENYOOM | flag::FAST,
    acl: acl::SORTEDSET,
    key_specs: &[KeySpec {
        flags: keyflag::RW | keyflag::UPDATE,
        begin: BeginSearch::Index(1),
        find: FindKeys::Range {
            last_key: 0,
            key_step: 1,
            limit: 0,
        },
        notes: None,
    }],
    arguments: &[
        Arg::key("key", 0),
        Arg::oneof(
            "condition",
            &[Arg::token("nx", "NX"), Arg::token("xx", "XX")],
        )
        .optional()
        .since("3.0.2"),
        Arg::oneof(
            "comparison",
            &[Arg::token("gt", "GT"), Arg::token("lt", "LT")],
        )
        .optional()
        .since("6.2.0"),
        Arg::token("change", "CH").optional().since("3.0.2"),
        Arg::token("increment", "INCR").optional().since("3.0.2"),
        Arg::block(
            "score_member",
            &[Arg::new("score", ArgType::Double), Arg::string("member")],
        )
        .multiple(),
    ],
    history: &[
        ("2.4.0", "Several score/member pairs may be given at once."),
        (
            "3.0.2",
            "The XX, NX, CH and INCR modifiers were introduced.",
        ),
        ("6.2.0", "The GT and LT modifiers were introduced."),
    ],
    handler: Some(add::zadd),
    ..CommandSpec::BASE
};

pub const ZSCORE: CommandSpec = CommandSpec {
    name: "zscore",
    group: Group::SortedSet,
    summary: "Returns the score of one member of a sorted set.",
    since: "1.2.0",
    complexity: "O(1)",
    arity: 3,
    flags: flag::READONLY | flag::FAST,
    acl: acl::SORTEDSET,
    key_specs: &[KeySpec {
        flags: keyflag::RO | keyflag::ACCESS,
        begin: BeginSearch::Index(1),
        find: FindKeys::Range {
            last_key: 0,
            key_step: 1,
            limit: 0,
        },
        notes: None,
    }],
    arguments: &[Arg::key("key", 0), Arg::string("member")],
    handler: Some(add::zscore),
    ..CommandSpec::BASE
};

pub const ZMSCORE: CommandSpec = CommandSpec {
    name: "zmscore",
    group: Group::SortedSet,
    summary: "Returns the scores of several members of a sorted set, nil for each one missing.",
    since: "6.2.0",
    complexity: "O(N) where N is the number of members being requested.",
    arity: -3,
    flags: flag::READONLY | flag::FAST,
    acl: acl::SORTEDSET,
    key_specs: &[KeySpec {
        flags: keyflag::RO | keyflag::ACCESS,
        begin: BeginSearch::Index(1),
        find: FindKeys::Range {
            last_key: 0,
            key_step: 1,
            limit: 0,
        },
        notes: None,
    }],
    arguments: &[Arg::key("key", 0), Arg::string("member").multiple()],
    handler: Some(add::zmscore),
    ..CommandSpec::BASE
};

pub const ZINCRBY: CommandSpec = CommandSpec {
    name: "zincrby",
    group: Group::SortedSet,
    summary: "Adds an increment to a member's score (a missing member starts at 0) and returns the new score.",
    since: "1.2.0",
    complexity: "O(log(N)) where N is the number of elements in the sorted set.",
    arity: 4,
    flags: flag::WRITE | flag::DENYOOM | flag::FAST,
    acl: acl::SORTEDSET,
    key_specs: &[
        KeySpec { flags: keyflag::RW | keyflag::ACCESS | keyflag::UPDATE, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("key", 0),
        Arg::integer("increment"),
        Arg::string("member"),
    ],
    handler: Some(add::zincrby),
    ..CommandSpec::BASE
};

pub const ZCARD: CommandSpec = CommandSpec {
    name: "zcard",
    group: Group::SortedSet,
    summary: "Returns how many members a sorted set holds.",
    since: "1.2.0",
    complexity: "O(1)",
    arity: 2,
    flags: flag::READONLY | flag::FAST,
    acl: acl::SORTEDSET,
    key_specs: &[KeySpec {
        flags: keyflag::RO,
        begin: BeginSearch::Index(1),
        find: FindKeys::Range {
            last_key: 0,
            key_step: 1,
            limit: 0,
        },
        notes: None,
    }],
    arguments: &[Arg::key("key", 0)],
    handler: Some(add::zcard),
    ..CommandSpec::BASE
};

pub const ZREM: CommandSpec = CommandSpec {
    name: "zrem",
    group: Group::SortedSet,
    summary: "Removes members from a sorted set and returns how many were there.",
    since: "1.2.0",
    complexity: "O(M*log(N)) with N being the number of elements in the sorted set and M the number of elements to be removed.",
    arity: -3,
    flags: flag::WRITE | flag::FAST,
    acl: acl::SORTEDSET,
    key_specs: &[
        KeySpec { flags: keyflag::RW | keyflag::DELETE, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("key", 0),
        Arg::string("member").multiple(),
    ],
    history: &[
        ("2.4.0", "Several members may be given at once."),
    ],
    handler: Some(add::zrem),
    ..CommandSpec::BASE
};

pub const ZRANGE: CommandSpec = CommandSpec {
    name: "zrange",
    group: Group::SortedSet,
    summary: "Returns the members of a sorted set within a range of ranks, scores or names, in either order.",
    since: "1.2.0",
    complexity: "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.",
    arity: -4,
    flags: flag::READONLY,
    acl: acl::SORTEDSET,
    key_specs: &[
        KeySpec { flags: keyflag::RO | keyflag::ACCESS, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("key", 0),
        Arg::string("start"),
        Arg::string("stop"),
        Arg::oneof("sortby", &[
            Arg::token("byscore", "BYSCORE"),
            Arg::token("bylex", "BYLEX"),
        ]).optional().since("6.2.0"),
        Arg::token("rev", "REV").optional().since("6.2.0"),
        Arg::block("offset_count", &[
            Arg::integer("offset"),
            Arg::integer("count"),
        ]).with_token("LIMIT").optional().since("6.2.0"),
        Arg::token("withscores", "WITHSCORES").optional(),
    ],
    history: &[
        ("6.2.0", "The REV, BYSCORE, BYLEX and LIMIT modifiers were introduced."),
    ],
    handler: Some(range::zrange),
    ..CommandSpec::BASE
};

pub const ZRANGESTORE: CommandSpec = CommandSpec {
    name: "zrangestore",
    group: Group::SortedSet,
    summary: "Stores the members of a sorted set within a range of ranks, scores or names into another key.",
    since: "6.2.0",
    complexity: "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements stored into the destination key.",
    arity: -5,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::SORTEDSET,
    key_specs: &[
        KeySpec { flags: keyflag::OW | keyflag::UPDATE, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
        KeySpec { flags: keyflag::RO | keyflag::ACCESS, begin: BeginSearch::Index(2), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("dst", 0),
        Arg::key("src", 1),
        Arg::string("min"),
        Arg::string("max"),
        Arg::oneof("sortby", &[
            Arg::token("byscore", "BYSCORE"),
            Arg::token("bylex", "BYLEX"),
        ]).optional(),
        Arg::token("rev", "REV").optional(),
        Arg::block("offset_count", &[
            Arg::integer("offset"),
            Arg::integer("count"),
        ]).with_token("LIMIT").optional(),
    ],
    handler: Some(range::zrangestore),
    ..CommandSpec::BASE
};

pub const ZRANGEBYSCORE: CommandSpec = CommandSpec {
    name: "zrangebyscore",
    group: Group::SortedSet,
    summary: "Returns the members of a sorted set whose scores lie in an interval, lowest first.",
    since: "1.0.5",
    complexity: "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).",
    arity: -4,
    flags: flag::READONLY,
    acl: acl::SORTEDSET,
    key_specs: &[
        KeySpec { flags: keyflag::RO | keyflag::ACCESS, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("key", 0),
        Arg::new("min", ArgType::Double),
        Arg::new("max", ArgType::Double),
        Arg::token("withscores", "WITHSCORES").optional().since("2.0.0"),
        Arg::block("offset_count", &[
            Arg::integer("offset"),
            Arg::integer("count"),
        ]).with_token("LIMIT").optional(),
    ],
    history: &[
        ("2.0.0", "The WITHSCORES modifier was introduced."),
    ],
    doc_flags: docflag::DEPRECATED,
    deprecated_since: Some("6.2.0"),
    replaced_by: Some("`ZRANGE` with the `BYSCORE` argument"),
    handler: Some(range::zrangebyscore),
    ..CommandSpec::BASE
};

pub const ZREVRANGE: CommandSpec = CommandSpec {
    name: "zrevrange",
    group: Group::SortedSet,
    summary: "Returns the members of a sorted set within a range of ranks counted from the highest score.",
    since: "1.2.0",
    complexity: "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.",
    arity: -4,
    flags: flag::READONLY,
    acl: acl::SORTEDSET,
    key_specs: &[
        KeySpec { flags: keyflag::RO | keyflag::ACCESS, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("key", 0),
        Arg::integer("start"),
        Arg::integer("stop"),
        Arg::token("withscores", "WITHSCORES").optional(),
    ],
    doc_flags: docflag::DEPRECATED,
    deprecated_since: Some("6.2.0"),
    replaced_by: Some("`ZRANGE` with the `REV` argument"),
    handler: Some(range::zrevrange),
    ..CommandSpec::BASE
};

pub const ZREVRANGEBYSCORE: CommandSpec = CommandSpec {
    name: "zrevrangebyscore",
    group: Group::SortedSet,
    summary: "Returns the members of a sorted set whose scores lie in an interval, highest first.",
    since: "2.2.0",
    complexity: "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).",
    arity: -4,
    flags: flag::READONLY,
    acl: acl::SORTEDSET,
    key_specs: &[
        KeySpec { flags: keyflag::RO | keyflag::ACCESS, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("key", 0),
        Arg::new("max", ArgType::Double),
        Arg::new("min", ArgType::Double),
        Arg::token("withscores", "WITHSCORES").optional(),
        Arg::block("offset_count", &[
            Arg::integer("offset"),
            Arg::integer("count"),
        ]).with_token("LIMIT").optional(),
    ],
    history: &[
        ("2.1.6", "Either bound may be made exclusive with a '(' prefix."),
    ],
    doc_flags: docflag::DEPRECATED,
    deprecated_since: Some("6.2.0"),
    replaced_by: Some("`ZRANGE` with the `REV` and `BYSCORE` arguments"),
    handler: Some(range::zrevrangebyscore),
    ..CommandSpec::BASE
};

pub const ZRANGEBYLEX: CommandSpec = CommandSpec {
    name: "zrangebylex",
    group: Group::SortedSet,
    summary: "Returns the members of a sorted set between two names, when all scores are equal.",
    since: "2.8.9",
    complexity: "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).",
    arity: -4,
    flags: flag::READONLY,
    acl: acl::SORTEDSET,
    key_specs: &[
        KeySpec { flags: keyflag::RO | keyflag::ACCESS, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("key", 0),
        Arg::string("min"),
        Arg::string("max"),
        Arg::block("offset_count", &[
            Arg::integer("offset"),
            Arg::integer("count"),
        ]).with_token("LIMIT").optional(),
    ],
    doc_flags: docflag::DEPRECATED,
    deprecated_since: Some("6.2.0"),
    replaced_by: Some("`ZRANGE` with the `BYLEX` argument"),
    handler: Some(range::zrangebylex),
    ..CommandSpec::BASE
};

pub const ZREVRANGEBYLEX: CommandSpec = CommandSpec {
    name: "zrevrangebylex",
    group: Group::SortedSet,
    summary: "Returns the members of a sorted set between two names in descending order, when all scores are equal.",
    since: "2.8.9",
    complexity: "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).",
    arity: -4,
    flags: flag::READONLY,
    acl: acl::SORTEDSET,
    key_specs: &[
        KeySpec { flags: keyflag::RO | keyflag::ACCESS, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("key", 0),
        Arg::string("max"),
        Arg::string("min"),
        Arg::block("offset_count", &[
            Arg::integer("offset"),
            Arg::integer("count"),
        ]).with_token("LIMIT").optional(),
    ],
    doc_flags: docflag::DEPRECATED,
    deprecated_since: Some("6.2.0"),
    replaced_by: Some("`ZRANGE` with the `REV` and `BYLEX` arguments"),
    handler: Some(range::zrevrangebylex),
    ..CommandSpec::BASE
};

pub const ZRANK: CommandSpec = CommandSpec {
    name: "zrank",
    group: Group::SortedSet,
    summary:
        "Returns the 0-based position of a member in a sorted set ordered from the lowest score.",
    since: "2.0.0",
    complexity: "O(log(N))",
    arity: 3,
    flags: flag::READONLY | flag::FAST,
    acl: acl::SORTEDSET,
    key_specs: &[KeySpec {
        flags: keyflag::RO | keyflag::ACCESS,
        begin: BeginSearch::Index(1),
        find: FindKeys::Range {
            last_key: 0,
            key_step: 1,
            limit: 0,
        },
        notes: None,
    }],
    arguments: &[Arg::key("key", 0), Arg::string("member")],
    handler: Some(range::zrank),
    ..CommandSpec::BASE
};

pub const ZREVRANK: CommandSpec = CommandSpec {
    name: "zrevrank",
    group: Group::SortedSet,
    summary:
        "Returns the 0-based position of a member in a sorted set ordered from the highest score.",
    since: "2.0.0",
    complexity: "O(log(N))",
    arity: 3,
    flags: flag::READONLY | flag::FAST,
    acl: acl::SORTEDSET,
    key_specs: &[KeySpec {
        flags: keyflag::RO | keyflag::ACCESS,
        begin: BeginSearch::Index(1),
        find: FindKeys::Range {
            last_key: 0,
            key_step: 1,
            limit: 0,
        },
        notes: None,
    }],
    arguments: &[Arg::key("key", 0), Arg::string("member")],
    handler: Some(range::zrevrank),
    ..CommandSpec::BASE
};

pub const ZCOUNT: CommandSpec = CommandSpec {
    name: "zcount",
    group: Group::SortedSet,
    summary: "Counts the members of a sorted set whose scores lie in an interval.",
    since: "2.0.0",
    complexity: "O(log(N)) with N being the number of elements in the sorted set.",
    arity: 4,
    flags: flag::READONLY | flag::FAST,
    acl: acl::SORTEDSET,
    key_specs: &[KeySpec {
        flags: keyflag::RO | keyflag::ACCESS,
        begin: BeginSearch::Index(1),
        find: FindKeys::Range {
            last_key: 0,
            key_step: 1,
            limit: 0,
        },
        notes: None,
    }],
    arguments: &[
        Arg::key("key", 0),
        Arg::new("min", ArgType::Double),
        Arg::new("max", ArgType::Double),
    ],
    handler: Some(range::zcount),
    ..CommandSpec::BASE
};

pub const ZLEXCOUNT: CommandSpec = CommandSpec {
    name: "zlexcount",
    group: Group::SortedSet,
    summary: "Counts the members of a sorted set between two names, when all scores are equal.",
    since: "2.8.9",
    complexity: "O(log(N)) with N being the number of elements in the sorted set.",
    arity: 4,
    flags: flag::READONLY | flag::FAST,
    acl: acl::SORTEDSET,
    key_specs: &[KeySpec {
        flags: keyflag::RO | keyflag::ACCESS,
        begin: BeginSearch::Index(1),
        find: FindKeys::Range {
            last_key: 0,
            key_step: 1,
            limit: 0,
        },
        notes: None,
    }],
    arguments: &[Arg::key("key", 0), Arg::string("min"), Arg::string("max")],
    handler: Some(range::zlexcount),
    ..CommandSpec::BASE
};

pub const ZSCAN: CommandSpec = CommandSpec {
    name: "zscan",
    group: Group::SortedSet,
    summary: "Walks the members of a sorted set with their scores a few at a time, resuming from a cursor.",
    since: "2.8.0",
    complexity: "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..",
    arity: -3,
    flags: flag::READONLY,
    acl: acl::SORTEDSET,
    key_specs: &[
        KeySpec { flags: keyflag::RO | keyflag::ACCESS, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("key", 0),
        Arg::integer("cursor"),
        Arg::new("pattern", ArgType::Pattern).with_token("MATCH").optional(),
        Arg::integer("count").with_token("COUNT").optional(),
    ],
    tips: &["nondeterministic_output"],
    handler: Some(scan::zscan),
    ..CommandSpec::BASE
};

pub const ZPOPMIN: CommandSpec = CommandSpec {
    name: "zpopmin",
    group: Group::SortedSet,
    summary: "Removes and returns the members with the lowest scores of a sorted set.",
    since: "5.0.0",
    complexity: "O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.",
    arity: -2,
    flags: flag::WRITE | flag::FAST,
    acl: acl::SORTEDSET,
    key_specs: &[
        KeySpec { flags: keyflag::RW | keyflag::ACCESS | keyflag::DELETE, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("key", 0),
        Arg::integer("count").optional(),
    ],
    handler: Some(pop::zpopmin),
    ..CommandSpec::BASE
};

pub const ZPOPMAX: CommandSpec = CommandSpec {
    name: "zpopmax",
    group: Group::SortedSet,
    summary: "Removes and returns the members with the highest scores of a sorted set.",
    since: "5.0.0",
    complexity: "O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.",
    arity: -2,
    flags: flag::WRITE | flag::FAST,
    acl: acl::SORTEDSET,
    key_specs: &[
        KeySpec { flags: keyflag::RW | keyflag::ACCESS | keyflag::DELETE, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("key", 0),
        Arg::integer("count").optional(),
    ],
    handler: Some(pop::zpopmax),
    ..CommandSpec::BASE
};

pub const ZMPOP: CommandSpec = CommandSpec {
    name: "zmpop",
    group: Group::SortedSet,
    summary: "Removes and returns the lowest- or highest-scored members of the first non-empty sorted set among several keys.",
    since: "7.0.0",
    complexity: "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.",
    arity: -4,
    flags: flag::WRITE,
    acl: acl::SORTEDSET,
    key_specs: &[
        KeySpec { flags: keyflag::RW | keyflag::ACCESS | keyflag::DELETE, begin: BeginSearch::Index(1), find: FindKeys::Keynum { key_num_index: 0, first_key: 1, key_step: 1 }, notes: None },
    ],
    arguments: &[
        Arg::integer("numkeys"),
        Arg::key("key", 0).multiple(),
        Arg::oneof("where", &[
            Arg::token("min", "MIN"),
            Arg::token("max", "MAX"),
        ]),
        Arg::integer("count").with_token("COUNT").optional(),
    ],
    handler: Some(pop::zmpop),
    ..CommandSpec::BASE
};

pub const ZREMRANGEBYRANK: CommandSpec = CommandSpec {
    name: "zremrangebyrank",
    group: Group::SortedSet,
    summary: "Removes the members of a sorted set within a range of ranks.",
    since: "2.0.0",
    complexity: "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.",
    arity: 4,
    flags: flag::WRITE,
    acl: acl::SORTEDSET,
    key_specs: &[
        KeySpec { flags: keyflag::RW | keyflag::DELETE, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("key", 0),
        Arg::integer("start"),
        Arg::integer("stop"),
    ],
    handler: Some(range::zremrangebyrank),
    ..CommandSpec::BASE
};

pub const ZREMRANGEBYSCORE: CommandSpec = CommandSpec {
    name: "zremrangebyscore",
    group: Group::SortedSet,
    summary: "Removes the members of a sorted set whose scores lie in an interval.",
    since: "1.2.0",
    complexity: "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.",
    arity: 4,
    flags: flag::WRITE,
    acl: acl::SORTEDSET,
    key_specs: &[
        KeySpec { flags: keyflag::RW | keyflag::DELETE, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("key", 0),
        Arg::new("min", ArgType::Double),
        Arg::new("max", ArgType::Double),
    ],
    handler: Some(range::zremrangebyscore),
    ..CommandSpec::BASE
};

pub const ZREMRANGEBYLEX: CommandSpec = CommandSpec {
    name: "zremrangebylex",
    group: Group::SortedSet,
    summary: "Removes the members of a sorted set between two names, when all scores are equal.",
    since: "2.8.9",
    complexity: "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.",
    arity: 4,
    flags: flag::WRITE,
    acl: acl::SORTEDSET,
    key_specs: &[
        KeySpec { flags: keyflag::RW | keyflag::DELETE, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("key", 0),
        Arg::string("min"),
        Arg::string("max"),
    ],
    handler: Some(range::zremrangebylex),
    ..CommandSpec::BASE
};

pub const ZUNIONSTORE: CommandSpec = CommandSpec {
    name: "zunionstore",
    group: Group::SortedSet,
    summary: "Stores the union of several sorted sets (scores combined) into a key.",
    since: "2.0.0",
    complexity: "O(N)+O(M log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.",
    arity: -4,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::SORTEDSET,
    key_specs: &[
        KeySpec { flags: keyflag::OW | keyflag::UPDATE, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
        KeySpec { flags: keyflag::RO | keyflag::ACCESS, begin: BeginSearch::Index(2), find: FindKeys::Keynum { key_num_index: 0, first_key: 1, key_step: 1 }, notes: None },
    ],
    arguments: &[
        Arg::key("destination", 0),
        Arg::integer("numkeys"),
        Arg::key("key", 1).multiple(),
        Arg::integer("weight").with_token("WEIGHTS").optional().multiple(),
        Arg::oneof("aggregate", &[
            Arg::token("sum", "SUM"),
            Arg::token("min", "MIN"),
            Arg::token("max", "MAX"),
        ]).with_token("AGGREGATE").optional(),
    ],
    handler: Some(algebra::zunionstore),
    ..CommandSpec::BASE
};

pub const ZINTERSTORE: CommandSpec = CommandSpec {
    name: "zinterstore",
    group: Group::SortedSet,
    summary: "Stores the intersection of several sorted sets (scores combined) into a key.",
    since: "2.0.0",
    complexity: "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.",
    arity: -4,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::SORTEDSET,
    key_specs: &[
        KeySpec { flags: keyflag::OW | keyflag::UPDATE, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
        KeySpec { flags: keyflag::RO | keyflag::ACCESS, begin: BeginSearch::Index(2), find: FindKeys::Keynum { key_num_index: 0, first_key: 1, key_step: 1 }, notes: None },
    ],
    arguments: &[
        Arg::key("destination", 0),
        Arg::integer("numkeys"),
        Arg::key("key", 1).multiple(),
        Arg::integer("weight").with_token("WEIGHTS").optional().multiple(),
        Arg::oneof("aggregate", &[
            Arg::token("sum", "SUM"),
            Arg::token("min", "MIN"),
            Arg::token("max", "MAX"),
        ]).with_token("AGGREGATE").optional(),
    ],
    handler: Some(algebra::zinterstore),
    ..CommandSpec::BASE
};

pub const ZUNION: CommandSpec = CommandSpec {
    name: "zunion",
    group: Group::SortedSet,
    summary: "Returns the union of several sorted sets, scores combined.",
    since: "6.2.0",
    complexity: "O(N)+O(M*log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.",
    arity: -3,
    flags: flag::READONLY,
    acl: acl::SORTEDSET,
    key_specs: &[
        KeySpec { flags: keyflag::RO | keyflag::ACCESS, begin: BeginSearch::Index(1), find: FindKeys::Keynum { key_num_index: 0, first_key: 1, key_step: 1 }, notes: None },
    ],
    arguments: &[
        Arg::integer("numkeys"),
        Arg::key("key", 0).multiple(),
        Arg::integer("weight").with_token("WEIGHTS").optional().multiple(),
        Arg::oneof("aggregate", &[
            Arg::token("sum", "SUM"),
            Arg::token("min", "MIN"),
            Arg::token("max", "MAX"),
        ]).with_token("AGGREGATE").optional(),
        Arg::token("withscores", "WITHSCORES").optional(),
    ],
    handler: Some(algebra::zunion),
    ..CommandSpec::BASE
};

pub const ZINTER: CommandSpec = CommandSpec {
    name: "zinter",
    group: Group::SortedSet,
    summary: "Returns the intersection of several sorted sets, scores combined.",
    since: "6.2.0",
    complexity: "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.",
    arity: -3,
    flags: flag::READONLY,
    acl: acl::SORTEDSET,
    key_specs: &[
        KeySpec { flags: keyflag::RO | keyflag::ACCESS, begin: BeginSearch::Index(1), find: FindKeys::Keynum { key_num_index: 0, first_key: 1, key_step: 1 }, notes: None },
    ],
    arguments: &[
        Arg::integer("numkeys"),
        Arg::key("key", 0).multiple(),
        Arg::integer("weight").with_token("WEIGHTS").optional().multiple(),
        Arg::oneof("aggregate", &[
            Arg::token("sum", "SUM"),
            Arg::token("min", "MIN"),
            Arg::token("max", "MAX"),
        ]).with_token("AGGREGATE").optional(),
        Arg::token("withscores", "WITHSCORES").optional(),
    ],
    handler: Some(algebra::zinter),
    ..CommandSpec::BASE
};

pub const ZINTERCARD: CommandSpec = CommandSpec {
    name: "zintercard",
    group: Group::SortedSet,
    summary: "Counts the members the intersection of several sorted sets would hold, optionally stopping at a limit.",
    since: "7.0.0",
    complexity: "O(N*K) worst case with N being the smallest input sorted set, K being the number of input sorted sets.",
    arity: -3,
    flags: flag::READONLY,
    acl: acl::SORTEDSET,
    key_specs: &[
        KeySpec { flags: keyflag::RO | keyflag::ACCESS, begin: BeginSearch::Index(1), find: FindKeys::Keynum { key_num_index: 0, first_key: 1, key_step: 1 }, notes: None },
    ],
    arguments: &[
        Arg::integer("numkeys"),
        Arg::key("key", 0).multiple(),
        Arg::integer("limit").with_token("LIMIT").optional(),
    ],
    handler: Some(algebra::zintercard),
    ..CommandSpec::BASE
};

pub const ZDIFF: CommandSpec = CommandSpec {
    name: "zdiff",
    group: Group::SortedSet,
    summary: "Returns the members of the first sorted set that none of the others hold.",
    since: "6.2.0",
    complexity: "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.",
    arity: -3,
    flags: flag::READONLY,
    acl: acl::SORTEDSET,
    key_specs: &[
        KeySpec { flags: keyflag::RO | keyflag::ACCESS, begin: BeginSearch::Index(1), find: FindKeys::Keynum { key_num_index: 0, first_key: 1, key_step: 1 }, notes: None },
    ],
    arguments: &[
        Arg::integer("numkeys"),
        Arg::key("key", 0).multiple(),
        Arg::token("withscores", "WITHSCORES").optional(),
    ],
    handler: Some(algebra::zdiff),
    ..CommandSpec::BASE
};

pub const ZDIFFSTORE: CommandSpec = CommandSpec {
    name: "zdiffstore",
    group: Group::SortedSet,
    summary: "Stores the members of the first sorted set that none of the others hold into a key.",
    since: "6.2.0",
    complexity: "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.",
    arity: -4,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::SORTEDSET,
    key_specs: &[
        KeySpec { flags: keyflag::OW | keyflag::UPDATE, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
        KeySpec { flags: keyflag::RO | keyflag::ACCESS, begin: BeginSearch::Index(2), find: FindKeys::Keynum { key_num_index: 0, first_key: 1, key_step: 1 }, notes: None },
    ],
    arguments: &[
        Arg::key("destination", 0),
        Arg::integer("numkeys"),
        Arg::key("key", 1).multiple(),
    ],
    handler: Some(algebra::zdiffstore),
    ..CommandSpec::BASE
};

pub const ZRANDMEMBER: CommandSpec = CommandSpec {
    name: "zrandmember",
    group: Group::SortedSet,
    summary: "Returns one or more random members of a sorted set, optionally with their scores.",
    since: "6.2.0",
    complexity: "O(N) where N is the number of elements returned",
    arity: -2,
    flags: flag::READONLY,
    acl: acl::SORTEDSET,
    key_specs: &[KeySpec {
        flags: keyflag::RO | keyflag::ACCESS,
        begin: BeginSearch::Index(1),
        find: FindKeys::Range {
            last_key: 0,
            key_step: 1,
            limit: 0,
        },
        notes: None,
    }],
    arguments: &[
        Arg::key("key", 0),
        Arg::block(
            "options",
            &[
                Arg::integer("count"),
                Arg::token("withscores", "WITHSCORES").optional(),
            ],
        )
        .optional(),
    ],
    tips: &["nondeterministic_output"],
    handler: Some(pop::zrandmember),
    ..CommandSpec::BASE
};

/// The one key spec of BZPOPMIN/BZPOPMAX: every argument but the last (the timeout).
const BZPOP_KEYS: &[KeySpec] = &[KeySpec {
    flags: keyflag::RW | keyflag::ACCESS | keyflag::DELETE,
    begin: BeginSearch::Index(1),
    find: FindKeys::Range {
        last_key: -2,
        key_step: 1,
        limit: 0,
    },
    notes: None,
}];

const BZPOP_HISTORY: &[(&str, &str)] = &[(
    "6.0.0",
    "The timeout may be fractional (it is read as a double, no longer an integer).",
)];

pub const BZPOPMIN: CommandSpec = CommandSpec {
    name: "bzpopmin",
    group: Group::SortedSet,
    summary: "Removes and returns the lowest-scored member of the first non-empty sorted set among several keys, waiting for one when all are empty.",
    since: "5.0.0",
    complexity: "O(log(N)) with N being the number of elements in the sorted set.",
    arity: -3,
    flags: flag::WRITE | flag::NOSCRIPT | flag::FAST | flag::BLOCKING,
    acl: acl::SORTEDSET,
    key_specs: BZPOP_KEYS,
    arguments: &[
        Arg::key("key", 0).multiple(),
        Arg::new("timeout", ArgType::Double),
    ],
    history: BZPOP_HISTORY,
    handler: Some(pop::bzpopmin),
    ..CommandSpec::BASE
};

pub const BZPOPMAX: CommandSpec = CommandSpec {
    name: "bzpopmax",
    group: Group::SortedSet,
    summary: "Removes and returns the highest-scored member of the first non-empty sorted set among several keys, waiting for one when all are empty.",
    since: "5.0.0",
    complexity: "O(log(N)) with N being the number of elements in the sorted set.",
    arity: -3,
    flags: flag::WRITE | flag::NOSCRIPT | flag::FAST | flag::BLOCKING,
    acl: acl::SORTEDSET,
    key_specs: BZPOP_KEYS,
    arguments: &[
        Arg::key("key", 0).multiple(),
        Arg::new("timeout", ArgType::Double),
    ],
    history: BZPOP_HISTORY,
    handler: Some(pop::bzpopmax),
    ..CommandSpec::BASE
};

pub const BZMPOP: CommandSpec = CommandSpec {
    name: "bzmpop",
    group: Group::SortedSet,
    summary: "Removes and returns the lowest- or highest-scored members of the first non-empty sorted set among several keys, waiting for one when all are empty.",
    since: "7.0.0",
    complexity: "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.",
    arity: -5,
    flags: flag::WRITE | flag::BLOCKING,
    acl: acl::SORTEDSET,
    key_specs: &[KeySpec {
        flags: keyflag::RW | keyflag::ACCESS | keyflag::DELETE,
        begin: BeginSearch::Index(2),
        find: FindKeys::Keynum {
            key_num_index: 0,
            first_key: 1,
            key_step: 1,
        },
        notes: None,
    }],
    arguments: &[
        Arg::new("timeout", ArgType::Double),
        Arg::integer("numkeys"),
        Arg::key("key", 0).multiple(),
        Arg::oneof("where", &[Arg::token("min", "MIN"), Arg::token("max", "MAX")]),
        Arg::integer("count").with_token("COUNT").optional(),
    ],
    handler: Some(pop::bzmpop),
    ..CommandSpec::BASE
};
