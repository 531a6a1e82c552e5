//! The shape of one entry of the command table.
//!
//! Every command and subcommand is one `CommandSpec` value, declared next to its handler.
//! Dispatch, arity errors, `COMMAND` (INFO, DOCS, LIST, COUNT, GETKEYS), key locking and
//! (later) ACL and scripting all read these values; nothing keeps a second list.

use bytes::Bytes;

use crate::commands::Ctx;

/// A command's implementation: `args[0]` is the command name as sent (for a subcommand,
/// `args[1]` is the subcommand name). The handler writes exactly one reply.
pub type Handler = fn(&mut Ctx<'_, '_>, &[Bytes]);

/// Command flags, as `COMMAND INFO` names them.
pub mod flag {
    pub const WRITE: u32 = 1 << 0;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const PUBSUB: u32 = 1 << 4;
    pub const NOSCRIPT: u32 = 1 << 5;
    pub const BLOCKING: u32 = 1 << 6;
    pub const LOADING: u32 = 1 << 7;
    pub const STALE: u32 = 1 << 8;
    pub const SKIP_MONITOR: u32 = 1 << 9;
    pub const SKIP_SLOWLOG: u32 = 1 << 10;
    pub const ASKING: u32 = 1 << 11;
    pub const FAST: u32 = 1 << 12;
    pub const NO_AUTH: u32 = 1 << 13;
    pub const MAY_REPLICATE: u32 = 1 << 14;
    pub const NO_MANDATORY_KEYS: u32 = 1 << 15;
    pub const NO_ASYNC_LOADING: u32 = 1 << 16;
    pub const NO_MULTI: u32 = 1 << 17;
    pub const MOVABLE_KEYS: u32 = 1 << 18;
    pub const ALLOW_BUSY: u32 = 1 << 19;
    pub const PROTECTED: u32 = 1 << 20;

    /// Names in the order Redis lists them.
    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (ASKING, "asking"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (MAY_REPLICATE, "may_replicate"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (MOVABLE_KEYS, "movablekeys"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// ACL categories.
pub mod acl {
    pub const KEYSPACE: u32 = 1 << 0;
    pub const READ: u32 = 1 << 1;
    pub const WRITE: u32 = 1 << 2;
    pub const SET: u32 = 1 << 3;
    pub const SORTEDSET: u32 = 1 << 4;
    pub const LIST: u32 = 1 << 5;
    pub const HASH: u32 = 1 << 6;
    pub const STRING: u32 = 1 << 7;
    pub const BITMAP: u32 = 1 << 8;
    pub const HYPERLOGLOG: u32 = 1 << 9;
    pub const GEO: u32 = 1 << 10;
    pub const STREAM: u32 = 1 << 11;
    pub const PUBSUB: u32 = 1 << 12;
    pub const ADMIN: u32 = 1 << 13;
    pub const FAST: u32 = 1 << 14;
    pub const SLOW: u32 = 1 << 15;
    pub const BLOCKING: u32 = 1 << 16;
    pub const DANGEROUS: u32 = 1 << 17;
    pub const CONNECTION: u32 = 1 << 18;
    pub const TRANSACTION: u32 = 1 << 19;
    pub const SCRIPTING: u32 = 1 << 20;

    pub const NAMES: &[(u32, &str)] = &[
        (KEYSPACE, "@keyspace"),
        (READ, "@read"),
        (WRITE, "@write"),
        (SET, "@set"),
        (SORTEDSET, "@sortedset"),
        (LIST, "@list"),
        (HASH, "@hash"),
        (STRING, "@string"),
        (BITMAP, "@bitmap"),
        (HYPERLOGLOG, "@hyperloglog"),
        (GEO, "@geo"),
        (STREAM, "@stream"),
        (PUBSUB, "@pubsub"),
        (ADMIN, "@admin"),
        (FAST, "@fast"),
        (SLOW, "@slow"),
        (BLOCKING, "@blocking"),
        (DANGEROUS, "@dangerous"),
        (CONNECTION, "@connection"),
        (TRANSACTION, "@transaction"),
        (SCRIPTING, "@scripting"),
    ];
}

/// Key-spec flags (`COMMAND INFO` key specifications).
pub mod keyflag {
    pub const RO: u16 = 1 << 0;
    pub const RW: u16 = 1 << 1;
    pub const OW: u16 = 1 << 2;
    pub const RM: u16 = 1 << 3;
    pub const ACCESS: u16 = 1 << 4;
    pub const UPDATE: u16 = 1 << 5;
    pub const INSERT: u16 = 1 << 6;
    pub const DELETE: u16 = 1 << 7;
    pub const NOT_KEY: u16 = 1 << 8;
    pub const INCOMPLETE: u16 = 1 << 9;
    pub const VARIABLE_FLAGS: u16 = 1 << 10;

    pub const NAMES: &[(u16, &str)] = &[
        (RO, "RO"),
        (RW, "RW"),
        (OW, "OW"),
        (RM, "RM"),
        (ACCESS, "access"),
        (UPDATE, "update"),
        (INSERT, "insert"),
        (DELETE, "delete"),
        (NOT_KEY, "not_key"),
        (INCOMPLETE, "incomplete"),
        (VARIABLE_FLAGS, "variable_flags"),
    ];
}

/// Where the search for a command's keys begins.
#[derive(Clone, Copy, Debug)]
pub enum BeginSearch {
    /// At a fixed argument index.
    Index(i32),
    /// After the first `keyword` found searching from `start_from` (negative: from the end).
    Keyword {
        keyword: &'static str,
        start_from: i32,
    },
    /// The keys cannot be found from the arguments' positions alone (SORT's BY/GET patterns
    /// and STORE): `COMMAND INFO` says "unknown", and key extraction needs the command's own
    /// parser (see `commands::command`'s getkeys).
    Unknown,
}

/// How keys are found once the search has begun.
#[derive(Clone, Copy, Debug)]
pub enum FindKeys {
    /// Keys from the begin index to `last_key` (relative; -1 is the last argument, or when
    /// `limit` > 1 the range is cut to 1/limit of the remaining arguments), stepping `key_step`.
    Range {
        last_key: i32,
        key_step: i32,
        limit: i32,
    },
    /// The argument at `key_num_index` (relative) holds the number of keys, which start at
    /// `first_key` (relative) and step `key_step`.
    Keynum {
        key_num_index: i32,
        first_key: i32,
        key_step: i32,
    },
    /// Pairs with [`BeginSearch::Unknown`].
    Unknown,
}

#[derive(Clone, Copy, Debug)]
pub struct KeySpec {
    pub flags: u16,
    pub begin: BeginSearch,
    pub find: FindKeys,
    pub notes: Option<&'static str>,
}

impl KeySpec {
    /// The common case: one key at argument `index`.
    pub const fn single(index: i32, flags: u16) -> KeySpec {
        KeySpec {
            flags,
            begin: BeginSearch::Index(index),
            find: FindKeys::Range {
                last_key: 0,
                key_step: 1,
                limit: 0,
            },
            notes: None,
        }
    }

    /// Keys from `index` to the end of the arguments, every `step`.
    pub const fn to_end(index: i32, step: i32, flags: u16) -> KeySpec {
        KeySpec {
            flags,
            begin: BeginSearch::Index(index),
            find: FindKeys::Range {
                last_key: -1,
                key_step: step,
                limit: 0,
            },
            notes: None,
        }
    }
}

/// Argument types, as `COMMAND DOCS` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgType {
    String,
    Integer,
    Double,
    Key,
    Pattern,
    UnixTime,
    PureToken,
    Oneof,
    Block,
}

impl ArgType {
    pub fn name(self) -> &'static str {
        match self {
            ArgType::String => "string",
            ArgType::Integer => "integer",
            ArgType::Double => "double",
            ArgType::Key => "key",
            ArgType::Pattern => "pattern",
            ArgType::UnixTime => "unix-time",
            ArgType::PureToken => "pure-token",
            ArgType::Oneof => "oneof",
            ArgType::Block => "block",
        }
    }
}

pub mod argflag {
    pub const OPTIONAL: u8 = 1 << 0;
    pub const MULTIPLE: u8 = 1 << 1;
    pub const MULTIPLE_TOKEN: u8 = 1 << 2;
}

/// One argument of a command, for `COMMAND DOCS`.
#[derive(Clone, Copy, Debug)]
pub struct Arg {
    pub name: &'static str,
    pub kind: ArgType,
    pub token: Option<&'static str>,
    pub display: Option<&'static str>,
    pub key_spec_index: Option<u8>,
    pub flags: u8,
    pub since: Option<&'static str>,
    pub summary: Option<&'static str>,
    pub deprecated_since: Option<&'static str>,
    pub children: &'static [Arg],
}

impl Arg {
    pub const fn new(name: &'static str, kind: ArgType) -> Arg {
        Arg {
            name,
            kind,
            token: None,
            display: None,
            key_spec_index: None,
            flags: 0,
            since: None,
            summary: None,
            deprecated_since: None,
            children: &[],
        }
    }
    pub const fn key(name: &'static str, key_spec_index: u8) -> Arg {
        let mut a = Arg::new(name, ArgType::Key);
        a.key_spec_index = Some(key_spec_index);
        a
    }
    pub const fn string(name: &'static str) -> Arg {
        Arg::new(name, ArgType::String)
    }
    pub const fn integer(name: &'static str) -> Arg {
        Arg::new(name, ArgType::Integer)
    }
    /// A keyword that stands alone (`NX`): name is lower-case, token upper-case.
    pub const fn token(name: &'static str, token: &'static str) -> Arg {
        let mut a = Arg::new(name, ArgType::PureToken);
        a.token = Some(token);
        a
    }
    pub const fn oneof(name: &'static str, children: &'static [Arg]) -> Arg {
        let mut a = Arg::new(name, ArgType::Oneof);
        a.children = children;
        a
    }
    pub const fn block(name: &'static str, children: &'static [Arg]) -> Arg {
        let mut a = Arg::new(name, ArgType::Block);
        a.children = children;
        a
    }
    pub const fn with_token(mut self, token: &'static str) -> Arg {
        self.token = Some(token);
        self
    }
    pub const fn display(mut self, text: &'static str) -> Arg {
        self.display = Some(text);
        self
    }
    pub const fn optional(mut self) -> Arg {
        self.flags |= argflag::OPTIONAL;
        self
    }
    pub const fn multiple(mut self) -> Arg {
        self.flags |= argflag::MULTIPLE;
        self
    }
    pub const fn multiple_token(mut self) -> Arg {
        self.flags |= argflag::MULTIPLE_TOKEN;
        self
    }
    pub const fn since(mut self, version: &'static str) -> Arg {
        self.since = Some(version);
        self
    }
    pub const fn kind(mut self, kind: ArgType) -> Arg {
        self.kind = kind;
        self
    }
}

/// Command groups, as `COMMAND DOCS` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    Generic,
    String,
    List,
    Set,
    SortedSet,
    Hash,
    Pubsub,
    Transactions,
    Connection,
    Server,
    Scripting,
    Hyperloglog,
    Cluster,
    Geo,
    Stream,
    Bitmap,
    /// Latch's own lock commands (LOCK.*).
    Lock,
}

impl Group {
    pub fn name(self) -> &'static str {
        match self {
            Group::Generic => "generic",
            Group::String => "string",
            Group::List => "list",
            Group::Set => "set",
            Group::SortedSet => "sorted-set",
            Group::Hash => "hash",
            Group::Pubsub => "pubsub",
            Group::Transactions => "transactions",
            Group::Connection => "connection",
            Group::Server => "server",
            Group::Scripting => "scripting",
            Group::Hyperloglog => "hyperloglog",
            Group::Cluster => "cluster",
            Group::Geo => "geo",
            Group::Stream => "stream",
            Group::Bitmap => "bitmap",
            Group::Lock => "lock",
        }
    }
}

pub mod docflag {
    pub const DEPRECATED: u8 = 1 << 0;
    pub const SYSCALL: u8 = 1 << 1;
}

/// Which shards a command locks before it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockPlan {
    /// The shards of the keys its key specs name (none if it names none).
    Keys,
    /// Every shard: the command sees (or changes) the whole keyspace.
    All,
    /// Every shard, exclusively, under the scripting claim: EVAL, FCALL and their kin.
    Script,
    /// The scripting claim and no shard: SCRIPT LOAD/FLUSH, FUNCTION LOAD...
    Engine,
    /// A lock's key (the first key) and its fencing counter `{key}:fence` (LOCK.*): the
    /// counter is not an argument, so the key specs cannot name it. Their effects are
    /// logged as one transaction.
    LockAndFence,
}

#[derive(Clone, Copy, Debug)]
pub struct CommandSpec {
    /// Lower-case name (a subcommand's own name, e.g. "get" under "config").
    pub name: &'static str,
    pub group: Group,
    /// One line in our own words.
    pub summary: &'static str,
    pub since: &'static str,
    pub complexity: &'static str,
    /// Positive: exactly that many arguments (name included); negative: at least that many.
    pub arity: i32,
    pub flags: u32,
    pub acl: u32,
    pub key_specs: &'static [KeySpec],
    pub arguments: &'static [Arg],
    /// (version, what changed).
    pub history: &'static [(&'static str, &'static str)],
    pub tips: &'static [&'static str],
    pub doc_flags: u8,
    pub deprecated_since: Option<&'static str>,
    pub replaced_by: Option<&'static str>,
    pub subcommands: &'static [CommandSpec],
    pub handler: Option<Handler>,
    pub lock: LockPlan,
}

impl CommandSpec {
    /// A base to fill in with struct-update syntax: `CommandSpec { name: "get", ..CommandSpec::BASE }`.
    pub const BASE: CommandSpec = CommandSpec {
        name: "",
        group: Group::Generic,
        summary: "",
        since: "1.0.0",
        complexity: "O(1)",
        arity: 1,
        flags: 0,
        acl: 0,
        key_specs: &[],
        arguments: &[],
        history: &[],
        tips: &[],
        doc_flags: 0,
        deprecated_since: None,
        replaced_by: None,
        subcommands: &[],
        handler: None,
        lock: LockPlan::Keys,
    };

    pub fn has_flag(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    /// Whether `argc` arguments (name included) satisfy the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let arity = self.arity as i64;
        if arity >= 0 {
            argc == arity
        } else {
            argc >= -arity
        }
    }

    /// ACL categories implied by flags, as Redis adds them (write → @write, ...).
    pub fn acl_categories(&self) -> u32 {
        let mut categories = self.acl;
        if self.has_flag(flag::WRITE) {
            categories |= acl::WRITE;
        }
        if self.has_flag(flag::READONLY) && self.group != Group::Scripting {
            categories |= acl::READ;
        }
        if self.has_flag(flag::ADMIN) {
            categories |= acl::ADMIN | acl::DANGEROUS;
        }
        if self.has_flag(flag::PUBSUB) {
            categories |= acl::PUBSUB;
        }
        if self.has_flag(flag::FAST) {
            categories |= acl::FAST;
        }
        if self.has_flag(flag::BLOCKING) {
            categories |= acl::BLOCKING;
        }
        if categories & acl::FAST == 0 {
            categories |= acl::SLOW;
        }
        categories
    }

    /// Whether any key spec can only be resolved by looking at the arguments' values.
    pub fn movable_keys(&self) -> bool {
        self.key_specs.iter().any(|ks| {
            matches!(ks.begin, BeginSearch::Keyword { .. } | BeginSearch::Unknown)
                || matches!(ks.find, FindKeys::Keynum { .. } | FindKeys::Unknown)
                || ks.flags & keyflag::INCOMPLETE != 0
        })
    }
}

/// Resolves the positions of a command's keys from its key specs (what `COMMAND GETKEYS`
/// reports and what the gatekeeper locks). `Err` when the arguments contradict the specs
/// (e.g. a key count that is not a number or too large).
pub fn key_positions(
    spec: &CommandSpec,
    args: &[Bytes],
    out: &mut Vec<usize>,
) -> Result<(), KeysError> {
    out.clear();
    visit_keys(spec, args, |at, _| out.push(at))
}

/// Like [`key_positions`], with each key's spec flags (RO, RW, access, insert...), which
/// ACL key patterns (`%R~`, `%W~`) are checked against.
pub fn visit_keys(
    spec: &CommandSpec,
    args: &[Bytes],
    mut visit: impl FnMut(usize, u16),
) -> Result<(), KeysError> {
    let argc = args.len() as i64;
    for ks in spec.key_specs {
        if ks.flags & keyflag::NOT_KEY != 0 {
            continue;
        }
        let begin = match ks.begin {
            BeginSearch::Index(i) => i as i64,
            BeginSearch::Keyword {
                keyword,
                start_from,
            } => {
                let (mut i, end, step) = if start_from >= 0 {
                    (start_from as i64, argc, 1i64)
                } else {
                    (argc + start_from as i64, 0i64, -1i64)
                };
                let mut found = None;
                while (step > 0 && i < end) || (step < 0 && i > end) {
                    if i >= 1
                        && i < argc
                        && args[i as usize].eq_ignore_ascii_case(keyword.as_bytes())
                    {
                        found = Some(i + 1);
                        break;
                    }
                    i += step;
                }
                match found {
                    Some(i) => i,
                    None => continue,
                }
            }
            // Positions alone cannot say which keys these are (Redis calls the spec
            // invalid here too); callers fall back to locking everything.
            BeginSearch::Unknown => return Err(KeysError::Invalid),
        };
        if begin >= argc {
            continue;
        }
        match ks.find {
            FindKeys::Range {
                last_key,
                key_step,
                limit,
            } => {
                let last = if last_key >= 0 {
                    begin + last_key as i64
                } else if limit <= 1 {
                    argc + last_key as i64
                } else {
                    begin + (argc - begin) / limit as i64 + last_key as i64
                };
                let step = key_step.max(1) as i64;
                let mut i = begin;
                while i <= last && i < argc {
                    visit(i as usize, ks.flags);
                    i += step;
                }
                if last >= argc {
                    return Err(KeysError::Invalid);
                }
            }
            FindKeys::Keynum {
                key_num_index,
                first_key,
                key_step,
            } => {
                let num_at = begin + key_num_index as i64;
                if num_at >= argc {
                    return Err(KeysError::Invalid);
                }
                let numkeys = std::str::from_utf8(&args[num_at as usize])
                    .ok()
                    .and_then(|s| s.parse::<i64>().ok())
                    .ok_or(KeysError::Invalid)?;
                // More keys than arguments can never fit: refuse before any arithmetic
                // on a number the client chose.
                if numkeys < 0 || numkeys > argc {
                    return Err(KeysError::Invalid);
                }
                let first = begin + first_key as i64;
                let step = key_step.max(1) as i64;
                let last = first + (numkeys - 1) * step;
                if numkeys > 0 && last >= argc {
                    return Err(KeysError::Invalid);
                }
                let mut i = first;
                for _ in 0..numkeys {
                    visit(i as usize, ks.flags);
                    i += step;
                }
            }
            FindKeys::Unknown => return Err(KeysError::Invalid),
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeysError {
    Invalid,
}
