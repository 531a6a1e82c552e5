//! Command-table entries of the list family. Facts (arity, flags, key specs, arguments,
//! since, complexity) follow Redis 7.0.15's command
//! descriptions; summaries and history notes are our own.

use crate::spec::{
    acl, docflag, flag, keyflag, Arg, ArgType, BeginSearch, CommandSpec, FindKeys, Group, KeySpec,
};

use super::{edit, pop, push, read};

pub static COMMANDS: &[CommandSpec] = &[
    LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP, LRANGE, LLEN, LINDEX, LSET, LREM, LTRIM, LINSERT,
    LPOS, LMOVE, RPOPLPUSH, LMPOP, BLPOP, BRPOP, BRPOPLPUSH, BLMOVE, BLMPOP,
];

pub const LPUSH: CommandSpec = CommandSpec {
    name: "lpush",
    group: Group::List,
    summary: "Inserts one or more elements at the head of a list, creating the list if needed.",
    since: "1.0.0",
    complexity: "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
    arity: -3,
    flags: flag::WRITE | flag::DENYOOM | flag::FAST,
    acl: acl::LIST,
    key_specs: &[
        KeySpec { flags: keyflag::RW | keyflag::INSERT, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("key", 0),
        Arg::string("element").multiple(),
    ],
    history: &[
        ("2.4.0", "Several elements may be given at once."),
    ],
    handler: Some(push::lpush),
    ..CommandSpec::BASE
};

pub const RPUSH: CommandSpec = CommandSpec {
    name: "rpush",
    group: Group::List,
    summary: "Appends one or more elements at the tail of a list, creating the list if needed.",
    since: "1.0.0",
    complexity: "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
    arity: -3,
    flags: flag::WRITE | flag::DENYOOM | flag::FAST,
    acl: acl::LIST,
    key_specs: &[
        KeySpec { flags: keyflag::RW | keyflag::INSERT, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("key", 0),
        Arg::string("element").multiple(),
    ],
    history: &[
        ("2.4.0", "Several elements may be given at once."),
    ],
    handler: Some(push::rpush),
    ..CommandSpec::BASE
};

pub const LPUSHX: CommandSpec = CommandSpec {
    name: "lpushx",
    group: Group::List,
    summary: "Inserts elements at the head of a list, but only when the list already exists.",
    since: "2.2.0",
    complexity: "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
    arity: -3,
    flags: flag::WRITE | flag::DENYOOM | flag::FAST,
    acl: acl::LIST,
    key_specs: &[
        KeySpec { flags: keyflag::RW | keyflag::INSERT, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("key", 0),
        Arg::string("element").multiple(),
    ],
    history: &[
        ("4.0.0", "Several elements may be given at once."),
    ],
    handler: Some(push::lpushx),
    ..CommandSpec::BASE
};

pub const RPUSHX: CommandSpec = CommandSpec {
    name: "rpushx",
    group: Group::List,
    summary: "Appends elements at the tail of a list, but only when the list already exists.",
    since: "2.2.0",
    complexity: "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
    arity: -3,
    flags: flag::WRITE | flag::DENYOOM | flag::FAST,
    acl: acl::LIST,
    key_specs: &[
        KeySpec { flags: keyflag::RW | keyflag::INSERT, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("key", 0),
        Arg::string("element").multiple(),
    ],
    history: &[
        ("4.0.0", "Several elements may be given at once."),
    ],
    handler: Some(push::rpushx),
    ..CommandSpec::BASE
};

pub const LPOP: CommandSpec = CommandSpec {
    name: "lpop",
    group: Group::List,
    summary: "Removes and returns the first element of a list, or the first few with a count.",
    since: "1.0.0",
    complexity: "O(N) where N is the number of elements returned",
    arity: -2,
    flags: flag::WRITE | flag::FAST,
    acl: acl::LIST,
    key_specs: &[KeySpec {
        flags: keyflag::RW | keyflag::ACCESS | keyflag::DELETE,
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
        Arg::integer("count").optional().since("6.2.0"),
    ],
    history: &[("6.2.0", "The optional count was introduced.")],
    handler: Some(pop::lpop),
    ..CommandSpec::BASE
};

pub const RPOP: CommandSpec = CommandSpec {
    name: "rpop",
    group: Group::List,
    summary: "Removes and returns the last element of a list, or the last few with a count.",
    since: "1.0.0",
    complexity: "O(N) where N is the number of elements returned",
    arity: -2,
    flags: flag::WRITE | flag::FAST,
    acl: acl::LIST,
    key_specs: &[KeySpec {
        flags: keyflag::RW | keyflag::ACCESS | keyflag::DELETE,
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
        Arg::integer("count").optional().since("6.2.0"),
    ],
    history: &[("6.2.0", "The optional count was introduced.")],
    handler: Some(pop::rpop),
    ..CommandSpec::BASE
};

pub const LRANGE: CommandSpec = CommandSpec {
    name: "lrange",
    group: Group::List,
    summary: "Returns the elements of a list between two indexes (negative indexes count from the tail).",
    since: "1.0.0",
    complexity: "O(S+N) where S is the distance of start offset from HEAD for small lists, from nearest end (HEAD or TAIL) for large lists; and N is the number of elements in the specified range.",
    arity: 4,
    flags: flag::READONLY,
    acl: acl::LIST,
    key_specs: &[
        KeySpec { flags: keyflag::RO | keyflag::ACCESS, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("key", 0),
        Arg::integer("start"),
        Arg::integer("stop"),
    ],
    handler: Some(read::lrange),
    ..CommandSpec::BASE
};

pub const LLEN: CommandSpec = CommandSpec {
    name: "llen",
    group: Group::List,
    summary: "Returns how many elements a list holds.",
    since: "1.0.0",
    complexity: "O(1)",
    arity: 2,
    flags: flag::READONLY | flag::FAST,
    acl: acl::LIST,
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
    handler: Some(read::llen),
    ..CommandSpec::BASE
};

pub const LINDEX: CommandSpec = CommandSpec {
    name: "lindex",
    group: Group::List,
    summary: "Returns the element at an index of a list.",
    since: "1.0.0",
    complexity: "O(N) where N is the number of elements to traverse to get to the element at index. This makes asking for the first or the last element of the list O(1).",
    arity: 3,
    flags: flag::READONLY,
    acl: acl::LIST,
    key_specs: &[
        KeySpec { flags: keyflag::RO | keyflag::ACCESS, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("key", 0),
        Arg::integer("index"),
    ],
    handler: Some(read::lindex),
    ..CommandSpec::BASE
};

pub const LSET: CommandSpec = CommandSpec {
    name: "lset",
    group: Group::List,
    summary: "Overwrites the element at an index of a list.",
    since: "1.0.0",
    complexity: "O(N) where N is the length of the list. Setting either the first or the last element of the list is O(1).",
    arity: 4,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::LIST,
    key_specs: &[
        KeySpec { flags: keyflag::RW | keyflag::UPDATE, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("key", 0),
        Arg::integer("index"),
        Arg::string("element"),
    ],
    handler: Some(edit::lset),
    ..CommandSpec::BASE
};

pub const LREM: CommandSpec = CommandSpec {
    name: "lrem",
    group: Group::List,
    summary:
        "Removes occurrences of an element from a list, from the head, the tail, or everywhere.",
    since: "1.0.0",
    complexity: "O(N+M) where N is the length of the list and M is the number of elements removed.",
    arity: 4,
    flags: flag::WRITE,
    acl: acl::LIST,
    key_specs: &[KeySpec {
        flags: keyflag::RW | keyflag::DELETE,
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
        Arg::integer("count"),
        Arg::string("element"),
    ],
    handler: Some(edit::lrem),
    ..CommandSpec::BASE
};

pub const LTRIM: CommandSpec = CommandSpec {
    name: "ltrim",
    group: Group::List,
    summary: "Keeps only the elements of a list between two indexes and drops the rest.",
    since: "1.0.0",
    complexity: "O(N) where N is the number of elements to be removed by the operation.",
    arity: 4,
    flags: flag::WRITE,
    acl: acl::LIST,
    key_specs: &[KeySpec {
        flags: keyflag::RW | keyflag::DELETE,
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
        Arg::integer("start"),
        Arg::integer("stop"),
    ],
    handler: Some(edit::ltrim),
    ..CommandSpec::BASE
};

pub const LINSERT: CommandSpec = CommandSpec {
    name: "linsert",
    group: Group::List,
    summary: "Inserts an element right before or right after a reference element of a list.",
    since: "2.2.0",
    complexity: "O(N) where N is the number of elements to traverse before seeing the value pivot. This means that inserting somewhere on the left end on the list (head) can be considered O(1) and inserting somewhere on the right end (tail) is O(N).",
    arity: 5,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::LIST,
    key_specs: &[
        KeySpec { flags: keyflag::RW | keyflag::INSERT, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("key", 0),
        Arg::oneof("where", &[
            Arg::token("before", "BEFORE"),
            Arg::token("after", "AFTER"),
        ]),
        Arg::string("pivot"),
        Arg::string("element"),
    ],
    handler: Some(edit::linsert),
    ..CommandSpec::BASE
};

pub const LPOS: CommandSpec = CommandSpec {
    name: "lpos",
    group: Group::List,
    summary: "Finds the index (or indexes) at which an element occurs in a list.",
    since: "6.0.6",
    complexity: "O(N) where N is the number of elements in the list, for the average case. When searching for elements near the head or the tail of the list, or when the MAXLEN option is provided, the command may run in constant time.",
    arity: -3,
    flags: flag::READONLY,
    acl: acl::LIST,
    key_specs: &[
        KeySpec { flags: keyflag::RO | keyflag::ACCESS, begin: BeginSearch::Index(1), find: FindKeys::Range { last_key: 0, key_step: 1, limit: 0 }, notes: None },
    ],
    arguments: &[
        Arg::key("key", 0),
        Arg::string("element"),
        Arg::integer("rank").with_token("RANK").optional(),
        Arg::integer("num-matches").with_token("COUNT").optional(),
        Arg::integer("len").with_token("MAXLEN").optional(),
    ],
    handler: Some(read::lpos),
    ..CommandSpec::BASE
};

pub const LMOVE: CommandSpec = CommandSpec {
    name: "lmove",
    group: Group::List,
    summary:
        "Atomically moves an element from one end of a list to an end of another and returns it.",
    since: "6.2.0",
    complexity: "O(1)",
    arity: 5,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::LIST,
    key_specs: &[
        KeySpec {
            flags: keyflag::RW | keyflag::ACCESS | keyflag::DELETE,
            begin: BeginSearch::Index(1),
            find: FindKeys::Range {
                last_key: 0,
                key_step: 1,
                limit: 0,
            },
            notes: None,
        },
        KeySpec {
            flags: keyflag::RW | keyflag::INSERT,
            begin: BeginSearch::Index(2),
            find: FindKeys::Range {
                last_key: 0,
                key_step: 1,
                limit: 0,
            },
            notes: None,
        },
    ],
    arguments: &[
        Arg::key("source", 0),
        Arg::key("destination", 1),
        Arg::oneof(
            "wherefrom",
            &[Arg::token("left", "LEFT"), Arg::token("right", "RIGHT")],
        ),
        Arg::oneof(
            "whereto",
            &[Arg::token("left", "LEFT"), Arg::token("right", "RIGHT")],
        ),
    ],
    handler: Some(pop::lmove),
    ..CommandSpec::BASE
};

pub const RPOPLPUSH: CommandSpec = CommandSpec {
    name: "rpoplpush",
    group: Group::List,
    summary: "Atomically moves the last element of one list to the head of another and returns it.",
    since: "1.2.0",
    complexity: "O(1)",
    arity: 3,
    flags: flag::WRITE | flag::DENYOOM,
    acl: acl::LIST,
    key_specs: &[
        KeySpec {
            flags: keyflag::RW | keyflag::ACCESS | keyflag::DELETE,
            begin: BeginSearch::Index(1),
            find: FindKeys::Range {
                last_key: 0,
                key_step: 1,
                limit: 0,
            },
            notes: None,
        },
        KeySpec {
            flags: keyflag::RW | keyflag::INSERT,
            begin: BeginSearch::Index(2),
            find: FindKeys::Range {
                last_key: 0,
                key_step: 1,
                limit: 0,
            },
            notes: None,
        },
    ],
    arguments: &[Arg::key("source", 0), Arg::key("destination", 1)],
    doc_flags: docflag::DEPRECATED,
    deprecated_since: Some("6.2.0"),
    replaced_by: Some("`LMOVE` with the `RIGHT` and `LEFT` arguments"),
    handler: Some(pop::rpoplpush),
    ..CommandSpec::BASE
};

pub const LMPOP: CommandSpec = CommandSpec {
    name: "lmpop",
    group: Group::List,
    summary: "Pops one or more elements from the first non-empty list among several keys.",
    since: "7.0.0",
    complexity:
        "O(N+M) where N is the number of provided keys and M is the number of elements returned.",
    arity: -4,
    flags: flag::WRITE,
    acl: acl::LIST,
    key_specs: &[KeySpec {
        flags: keyflag::RW | keyflag::ACCESS | keyflag::DELETE,
        begin: BeginSearch::Index(1),
        find: FindKeys::Keynum {
            key_num_index: 0,
            first_key: 1,
            key_step: 1,
        },
        notes: None,
    }],
    arguments: &[
        Arg::integer("numkeys"),
        Arg::key("key", 0).multiple(),
        Arg::oneof(
            "where",
            &[Arg::token("left", "LEFT"), Arg::token("right", "RIGHT")],
        ),
        Arg::integer("count").with_token("COUNT").optional(),
    ],
    handler: Some(pop::lmpop),
    ..CommandSpec::BASE
};

/// The one key spec of BLPOP/BRPOP: every argument but the last (the timeout) is a key.
const BPOP_KEYS: &[KeySpec] = &[KeySpec {
    flags: keyflag::RW | keyflag::ACCESS | keyflag::DELETE,
    begin: BeginSearch::Index(1),
    find: FindKeys::Range {
        last_key: -2,
        key_step: 1,
        limit: 0,
    },
    notes: None,
}];

/// BLMOVE/BRPOPLPUSH: a source to pop from and a destination to push to.
const BMOVE_KEYS: &[KeySpec] = &[
    KeySpec {
        flags: keyflag::RW | keyflag::ACCESS | keyflag::DELETE,
        begin: BeginSearch::Index(1),
        find: FindKeys::Range {
            last_key: 0,
            key_step: 1,
            limit: 0,
        },
        notes: None,
    },
    KeySpec {
        flags: keyflag::RW | keyflag::INSERT,
        begin: BeginSearch::Index(2),
        find: FindKeys::Range {
            last_key: 0,
            key_step: 1,
            limit: 0,
        },
        notes: None,
    },
];

const TIMEOUT_AS_DOUBLE: &[(&str, &str)] = &[(
    "6.0.0",
    "The timeout may be fractional (it is read as a double, no longer an integer).",
)];

pub const BLPOP: CommandSpec = CommandSpec {
    name: "blpop",
    group: Group::List,
    summary: "Removes and returns the first element of the first non-empty list among several keys, waiting for one when all are empty.",
    since: "2.0.0",
    complexity: "O(N) where N is the number of provided keys.",
    arity: -3,
    flags: flag::WRITE | flag::NOSCRIPT | flag::BLOCKING,
    acl: acl::LIST,
    key_specs: BPOP_KEYS,
    arguments: &[
        Arg::key("key", 0).multiple(),
        Arg::new("timeout", ArgType::Double),
    ],
    history: TIMEOUT_AS_DOUBLE,
    handler: Some(pop::blpop),
    ..CommandSpec::BASE
};

pub const BRPOP: CommandSpec = CommandSpec {
    name: "brpop",
    group: Group::List,
    summary: "Removes and returns the last element of the first non-empty list among several keys, waiting for one when all are empty.",
    since: "2.0.0",
    complexity: "O(N) where N is the number of provided keys.",
    arity: -3,
    flags: flag::WRITE | flag::NOSCRIPT | flag::BLOCKING,
    acl: acl::LIST,
    key_specs: BPOP_KEYS,
    arguments: &[
        Arg::key("key", 0).multiple(),
        Arg::new("timeout", ArgType::Double),
    ],
    history: TIMEOUT_AS_DOUBLE,
    handler: Some(pop::brpop),
    ..CommandSpec::BASE
};

pub const BRPOPLPUSH: CommandSpec = CommandSpec {
    name: "brpoplpush",
    group: Group::List,
    summary: "Moves the last element of one list to the head of another and returns it, waiting for one when the source is empty.",
    since: "2.2.0",
    complexity: "O(1)",
    arity: 4,
    flags: flag::WRITE | flag::DENYOOM | flag::NOSCRIPT | flag::BLOCKING,
    acl: acl::LIST,
    key_specs: BMOVE_KEYS,
    arguments: &[
        Arg::key("source", 0),
        Arg::key("destination", 1),
        Arg::new("timeout", ArgType::Double),
    ],
    history: TIMEOUT_AS_DOUBLE,
    doc_flags: docflag::DEPRECATED,
    deprecated_since: Some("6.2.0"),
    replaced_by: Some("`BLMOVE` with the `RIGHT` and `LEFT` arguments"),
    handler: Some(pop::brpoplpush),
    ..CommandSpec::BASE
};

pub const BLMOVE: CommandSpec = CommandSpec {
    name: "blmove",
    group: Group::List,
    summary: "Moves an element from one end of a list to an end of another and returns it, waiting for one when the source is empty.",
    since: "6.2.0",
    complexity: "O(1)",
    arity: 6,
    flags: flag::WRITE | flag::DENYOOM | flag::NOSCRIPT | flag::BLOCKING,
    acl: acl::LIST,
    key_specs: BMOVE_KEYS,
    arguments: &[
        Arg::key("source", 0),
        Arg::key("destination", 1),
        Arg::oneof(
            "wherefrom",
            &[Arg::token("left", "LEFT"), Arg::token("right", "RIGHT")],
        ),
        Arg::oneof(
            "whereto",
            &[Arg::token("left", "LEFT"), Arg::token("right", "RIGHT")],
        ),
        Arg::new("timeout", ArgType::Double),
    ],
    handler: Some(pop::blmove),
    ..CommandSpec::BASE
};

pub const BLMPOP: CommandSpec = CommandSpec {
    name: "blmpop",
    group: Group::List,
    summary: "Pops one or more elements from the first non-empty list among several keys, waiting for one when all are empty.",
    since: "7.0.0",
    complexity:
        "O(N+M) where N is the number of provided keys and M is the number of elements returned.",
    arity: -5,
    flags: flag::WRITE | flag::BLOCKING,
    acl: acl::LIST,
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
        Arg::oneof(
            "where",
            &[Arg::token("left", "LEFT"), Arg::token("right", "RIGHT")],
        ),
        Arg::integer("count").with_token("COUNT").optional(),
    ],
    handler: Some(pop::blmpop),
    ..CommandSpec::BASE
};
