//! The command table: every family's `COMMANDS` gathered once, with ids for statistics and
//! case-insensitive lookup.

use std::ops::Range;
use std::sync::OnceLock;

use crate::commands;
use crate::spec::{keyflag, BeginSearch, CommandSpec, FindKeys, KeySpec};

/// Every family's entries. Adding a family means adding it here, and nowhere else.
const FAMILIES: &[&[CommandSpec]] = &[
    commands::connection::COMMANDS,
    commands::acl::COMMANDS,
    commands::client::COMMANDS,
    commands::string::COMMANDS,
    commands::bitmap::COMMANDS,
    commands::hyperloglog::COMMANDS,
    commands::list::COMMANDS,
    commands::set::COMMANDS,
    commands::hash::COMMANDS,
    commands::zset::COMMANDS,
    commands::geo::COMMANDS,
    commands::stream::COMMANDS,
    commands::keys::COMMANDS,
    commands::sort::COMMANDS,
    commands::databases::COMMANDS,
    commands::server::COMMANDS,
    commands::lolwut::COMMANDS,
    commands::module::COMMANDS,
    commands::persistence::COMMANDS,
    commands::config::COMMANDS,
    commands::cluster::COMMANDS,
    commands::info::COMMANDS,
    commands::command::COMMANDS,
    commands::debug::COMMANDS,
    commands::function::COMMANDS,
    commands::scripting::COMMANDS,
    commands::transaction::COMMANDS,
    commands::pubsub::COMMANDS,
    commands::replication::COMMANDS,
    commands::locks::COMMANDS,
];

/// One resolved entry: a command or a subcommand.
#[derive(Debug)]
pub struct Command {
    pub spec: &'static CommandSpec,
    /// Index into the table, for per-command statistics.
    pub id: usize,
    /// `get`, or `config|get` for a subcommand.
    pub full_name: String,
    pub parent: Option<usize>,
    /// The ids of a container's subcommands, in declaration order: they follow it in the
    /// table.
    subcommands: Range<usize>,
    /// The argument holding the command's one key, when its key specs name exactly one at
    /// a fixed place (GET, SET, INCR...): the prefetch and the gatekeeper's locking take it
    /// from there without walking the specs.
    pub only_key_at: Option<usize>,
}

impl Command {
    /// The keys `args` name, as [`crate::spec::visit_keys`] finds them (with each key's
    /// spec flags), straight from [`Command::only_key_at`] when the command has one.
    #[inline]
    pub fn visit_keys(
        &self,
        args: &[bytes::Bytes],
        mut visit: impl FnMut(usize, u16),
    ) -> Result<(), crate::spec::KeysError> {
        match self.only_key_at {
            Some(at) => {
                if at < args.len() {
                    visit(at, self.spec.key_specs[0].flags);
                }
                Ok(())
            }
            None => crate::spec::visit_keys(self.spec, args, visit),
        }
    }
}

/// See [`Command::only_key_at`]: a lone spec of one key at a fixed index (`last_key` 0
/// visits the begin index only, whatever the step), which is what `visit_keys` finds.
fn only_key_at(spec: &CommandSpec) -> Option<usize> {
    match spec.key_specs {
        [KeySpec {
            flags,
            begin: BeginSearch::Index(at),
            find: FindKeys::Range { last_key: 0, .. },
            ..
        }] if flags & keyflag::NOT_KEY == 0 && *at >= 1 => Some(*at as usize),
        _ => None,
    }
}

#[derive(Debug)]
pub struct CommandTable {
    commands: Vec<Command>,
    top: NameIndex,
}

/// Top-level names to ids, any case. Every request looks its name up here (twice, with
/// the prefetch), so a lookup neither copies the name to the heap nor compares it byte by
/// byte: the name is read as three 8-byte words, lower-cased a word at a time, hashed with
/// one multiply and compared as words. Command names are at most [`NAME_WORDS`] words long.
/// The slots stay at most a quarter full, so no choice of names a client sends can make
/// a probe run longer than the longest run of the built table.
#[derive(Debug)]
struct NameIndex {
    /// An empty slot has length 0. A power-of-two count.
    slots: Vec<NameSlot>,
}

#[derive(Clone, Copy, Debug, Default)]
struct NameSlot {
    /// The name, lower-case, zero-padded.
    words: [u64; NAME_WORDS],
    len: usize,
    id: usize,
}

/// Words of the longest command name (`georadiusbymember_ro` is 20 bytes).
const NAME_WORDS: usize = 3;

/// `name` lower-cased (ASCII letters only) and zero-padded into words, or `None` when it
/// is empty or longer than any command name.
fn name_words(name: &[u8]) -> Option<[u64; NAME_WORDS]> {
    if name.is_empty() || name.len() > NAME_WORDS * 8 {
        return None;
    }
    let mut bytes = [0u8; NAME_WORDS * 8];
    bytes[..name.len()].copy_from_slice(name);
    let mut words = [0u64; NAME_WORDS];
    for (word, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(chunk);
        *word = ascii_lower(u64::from_le_bytes(eight));
    }
    Some(words)
}

/// Each byte of `word` in `A..=Z` gets its case bit; every other byte stays as it is.
fn ascii_lower(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Each byte's low seven bits plus a bias sets its top bit when it reaches the bound;
    // no byte carries into the next (127 + 0x3f < 256).
    let low = word & !HIGH;
    let at_least_a = low + ONES * u64::from(0x80 - b'A');
    let past_z = low + ONES * u64::from(0x80 - b'Z' - 1);
    let upper = at_least_a & !past_z & !word & HIGH;
    word | (upper >> 2)
}

impl NameIndex {
    fn new(names: &[(&'static str, usize)]) -> NameIndex {
        let size = (names.len() * 4).next_power_of_two().max(8);
        let mut index = NameIndex {
            slots: vec![NameSlot::default(); size],
        };
        for &(name, id) in names {
            let words = name_words(name.as_bytes())
                .unwrap_or_else(|| panic!("command name {name:?} is empty or too long"));
            assert!(
                index.get(name.as_bytes()).is_none(),
                "command {name} declared twice"
            );
            let mut at = index.home(&words);
            while index.slots[at].len != 0 {
                at = (at + 1) & (size - 1);
            }
            index.slots[at] = NameSlot {
                words,
                len: name.len(),
                id,
            };
        }
        index
    }

    fn home(&self, words: &[u64; NAME_WORDS]) -> usize {
        let mixed = words[0] ^ words[1].rotate_left(21) ^ words[2].rotate_left(42);
        let hash = mixed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (hash >> 32) as usize & (self.slots.len() - 1)
    }

    fn get(&self, name: &[u8]) -> Option<usize> {
        let words = name_words(name)?;
        let mask = self.slots.len() - 1;
        let mut at = self.home(&words);
        loop {
            let slot = &self.slots[at];
            if slot.len == 0 {
                return None;
            }
            if slot.len == name.len() && slot.words == words {
                return Some(slot.id);
            }
            at = (at + 1) & mask;
        }
    }
}

/// The table, built on first use.
/// Names whose meaning `rename-command` changed, each with the command id it now stands
/// for (`None`: unknown).
pub type Renamed = Vec<(Vec<u8>, Option<usize>)>;

/// `rename-command` from the config file, set once at start-up. Empty in most servers.
static RENAMED: OnceLock<Renamed> = OnceLock::new();

/// The names `rename-command old new` lines give, applied in order (an empty new name
/// removes the command); the error is Redis' reason for the line that cannot apply.
pub fn resolve_renames(renames: &[(String, String)]) -> Result<Renamed, String> {
    let table = table();
    let mut renamed: Renamed = Vec::new();
    let current = |renamed: &Renamed, name: &[u8]| -> Option<usize> {
        match renamed.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
            Some((_, id)) => *id,
            None => table.lookup(name).map(|command| command.id),
        }
    };
    let set = |renamed: &mut Renamed, name: &[u8], id| {
        renamed.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        renamed.push((name.to_ascii_lowercase(), id));
    };
    for (old, new) in renames {
        let Some(id) = current(&renamed, old.as_bytes()) else {
            return Err("No such command in rename-command".to_string());
        };
        set(&mut renamed, old.as_bytes(), None);
        if !new.is_empty() {
            if current(&renamed, new.as_bytes()).is_some() {
                return Err("Target command name already exists".to_string());
            }
            set(&mut renamed, new.as_bytes(), Some(id));
        }
    }
    Ok(renamed)
}

/// Puts the config file's renames in force (once, at start-up).
pub fn install_renames(renames: &[(String, String)]) -> Result<(), String> {
    let renamed = resolve_renames(renames)?;
    if !renamed.is_empty() {
        let _ = RENAMED.set(renamed);
    }
    Ok(())
}

pub fn table() -> &'static CommandTable {
    static TABLE: OnceLock<CommandTable> = OnceLock::new();
    TABLE.get_or_init(CommandTable::build)
}

/// Appends a command or subcommand, checking what every entry must hold; its id.
fn push(
    commands: &mut Vec<Command>,
    spec: &'static CommandSpec,
    full_name: String,
    parent: Option<usize>,
) -> usize {
    assert!(
        spec.name.bytes().all(|b| !b.is_ascii_uppercase()),
        "names are lower-case: {}",
        spec.name
    );
    assert!(spec.arity != 0, "arity 0 for {full_name}");
    assert!(
        spec.handler.is_some() || !spec.subcommands.is_empty(),
        "{full_name}: a command needs a handler unless it is a container"
    );
    let id = commands.len();
    commands.push(Command {
        spec,
        id,
        full_name,
        parent,
        subcommands: 0..0,
        only_key_at: only_key_at(spec),
    });
    id
}

impl CommandTable {
    fn build() -> CommandTable {
        let mut commands = Vec::new();
        let mut top = Vec::new();
        for family in FAMILIES {
            for spec in family.iter() {
                let id = push(&mut commands, spec, spec.name.to_string(), None);
                top.push((spec.name, id));
                for sub in spec.subcommands {
                    let full_name = format!("{}|{}", spec.name, sub.name);
                    let sub_id = push(&mut commands, sub, full_name, Some(id));
                    let previous = commands[id + 1..sub_id]
                        .iter()
                        .any(|c: &Command| c.spec.name == sub.name);
                    assert!(
                        !previous,
                        "subcommand {}|{} declared twice",
                        spec.name, sub.name
                    );
                }
                commands[id].subcommands = id + 1..commands.len();
            }
        }
        CommandTable {
            commands,
            top: NameIndex::new(&top),
        }
    }

    /// A top-level command by name, any case.
    pub fn lookup(&self, name: &[u8]) -> Option<&Command> {
        self.top.get(name).map(|id| &self.commands[id])
    }

    /// A top-level command by the name clients call it: `rename-command` applied (the old
    /// name is unknown, the new one stands for the command). Everything that takes a name
    /// from a client (or from the AOF, which logs what clients sent) looks up this way;
    /// ACL rules name the commands by their own names, as in Redis.
    pub fn lookup_called(&self, name: &[u8]) -> Option<&Command> {
        if let Some(renamed) = RENAMED.get() {
            if let Some((_, id)) = renamed.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
                return id.map(|id| &self.commands[id]);
            }
        }
        self.lookup(name)
    }

    /// A subcommand of `parent` by name, any case.
    pub fn subcommand(&self, parent: &Command, name: &[u8]) -> Option<&Command> {
        self.commands[parent.subcommands.clone()]
            .iter()
            .find(|sub| sub.spec.name.as_bytes().eq_ignore_ascii_case(name))
    }

    /// A command or subcommand by full name (`get`, `config|get`), any case.
    pub fn by_full_name(&self, name: &[u8]) -> Option<&Command> {
        match name.iter().position(|&b| b == b'|') {
            None => self.lookup(name),
            Some(bar) => {
                let parent = self.lookup(&name[..bar])?;
                self.subcommand(parent, &name[bar + 1..])
            }
        }
    }

    pub fn get(&self, id: usize) -> &Command {
        &self.commands[id]
    }

    /// Every command and subcommand.
    pub fn all(&self) -> &[Command] {
        &self.commands
    }

    /// Top-level commands.
    pub fn top_level(&self) -> impl Iterator<Item = &Command> {
        self.commands.iter().filter(|c| c.parent.is_none())
    }

    /// The subcommands of a container.
    pub fn subcommands_of<'a>(
        &'a self,
        parent: &'a Command,
    ) -> impl Iterator<Item = &'a Command> + 'a {
        self.commands[parent.subcommands.clone()].iter()
    }

    pub fn len(&self) -> usize {
        self.commands.len()
    }

    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `only_key_at` finds, for every command and subcommand it is set for, the keys
    /// `visit_keys` finds, with any number of arguments; and it is set for the common
    /// one-key commands.
    #[test]
    fn the_one_key_shortcut_finds_what_the_key_specs_find() {
        let table = table();
        let mut shortcuts = 0;
        for command in &table.commands {
            let Some(at) = command.only_key_at else {
                continue;
            };
            shortcuts += 1;
            for len in 0..8 {
                let args: Vec<bytes::Bytes> = (0..len)
                    .map(|i| bytes::Bytes::from(format!("arg{i}")))
                    .collect();
                let mut found = Vec::new();
                let walked = crate::spec::visit_keys(command.spec, &args, |index, flags| {
                    found.push((index, flags))
                });
                assert!(walked.is_ok(), "{} with {len} arguments", command.full_name);
                let shortcut: Vec<usize> = (at < len).then_some(at).into_iter().collect();
                let positions: Vec<usize> = found.iter().map(|&(index, _)| index).collect();
                assert_eq!(
                    positions, shortcut,
                    "{} with {len} arguments",
                    command.full_name
                );
                let mut visited = Vec::new();
                let taken = command.visit_keys(&args, |index, flags| visited.push((index, flags)));
                assert!(taken.is_ok());
                assert_eq!(visited, found, "{} with {len} arguments", command.full_name);
            }
        }
        for name in [
            "get", "set", "setnx", "incr", "ttl", "expire", "hset", "lpush",
        ] {
            assert_eq!(
                table.lookup(name.as_bytes()).unwrap().only_key_at,
                Some(1),
                "{name}"
            );
        }
        for name in ["del", "mset", "mget", "eval", "ping", "xread"] {
            let command = table.lookup(name.as_bytes()).unwrap();
            assert_eq!(command.only_key_at, None, "{name}");
        }
        assert!(shortcuts > 100, "{shortcuts} commands take the shortcut");
    }

    /// How many slots a lookup of `name` reads before it finds it or a free slot.
    fn probes(index: &NameIndex, name: &[u8]) -> usize {
        let mask = index.slots.len() - 1;
        let words = name_words(name).unwrap();
        let mut at = index.home(&words);
        let mut count = 1;
        while index.slots[at].len != 0 && index.slots[at].words != words {
            at = (at + 1) & mask;
            count += 1;
        }
        count
    }

    /// Word-wise lower-casing agrees with the byte-wise one on every byte value, and a
    /// name that differs from a command's only in a non-letter's case bit is not it.
    #[test]
    fn names_fold_exactly_as_ascii_lowercase() {
        for byte in 0..=255u8 {
            let word = u64::from_le_bytes([byte, b'Q', 0x7f, 0xc1, b'@', b'[', b'`', b'{']);
            let folded = ascii_lower(word).to_le_bytes();
            let expected =
                [byte, b'Q', 0x7f, 0xc1, b'@', b'[', b'`', b'{'].map(|b| b.to_ascii_lowercase());
            assert_eq!(folded, expected, "byte {byte:#04x}");
        }
        let table = table();
        for near in [
            &b"georadius\x7fro"[..],
            b"GEORADIUS_RO",
            b"set\0",
            b"SE\x14",
        ] {
            let expected = std::str::from_utf8(near)
                .ok()
                .map(str::to_ascii_lowercase)
                .and_then(|name| {
                    table
                        .top_level()
                        .find(|c| c.spec.name == name)
                        .map(|c| c.id)
                });
            assert_eq!(table.lookup(near).map(|c| c.id), expected, "{near:?}");
        }
        assert!(table.lookup(&[b'a'; 25]).is_none());
    }

    #[test]
    fn every_command_is_found_in_any_case_and_unknown_names_are_not() {
        let table = table();
        for command in table.top_level() {
            let name = command.spec.name;
            assert_eq!(
                table.lookup(name.as_bytes()).map(|c| c.id),
                Some(command.id)
            );
            let upper = name.to_ascii_uppercase();
            assert_eq!(
                table.lookup(upper.as_bytes()).map(|c| c.id),
                Some(command.id)
            );
        }
        for unknown in [
            &b""[..],
            b"gett",
            b"ge",
            b"s\xffet",
            b"get\0",
            b"config|get",
        ] {
            assert!(table.lookup(unknown).is_none(), "{unknown:?}");
        }
        let config = table.lookup(b"CONFIG").unwrap();
        assert_eq!(
            table.subcommand(config, b"GeT").unwrap().full_name,
            "config|get"
        );
        assert!(table.subcommand(config, b"gett").is_none());
        assert_eq!(
            table.subcommands_of(config).count(),
            config.spec.subcommands.len()
        );
    }

    /// The index stays a quarter full at most, so every probe run is short: the hot
    /// commands are found in their home slot, and no name takes more than a few reads.
    #[test]
    fn lookups_stay_short() {
        let table = table();
        let longest = table
            .top_level()
            .map(|c| probes(&table.top, c.spec.name.as_bytes()))
            .max()
            .unwrap();
        assert!(longest <= 4, "a probe run of {longest}");
        for hot in ["get", "set", "setnx", "incr", "mset", "evalsha"] {
            assert_eq!(probes(&table.top, hot.as_bytes()), 1, "{hot}");
        }
    }
}
