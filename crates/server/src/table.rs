//! The command table: every family's `COMMANDS` gathered once, with ids for statistics and
//! case-insensitive lookup.

use std::ops::Range;
use std::sync::OnceLock;

use crate::commands;
use crate::spec::CommandSpec;

/// Every family's entries. Adding a family means adding it here, and nowhere else.
const FAMILIES: &[&[CommandSpec]] = &[
    commands::connection::COMMANDS,
    commands::acl::COMMANDS,
    commands::client::COMMANDS,
    commands::string::COMMANDS,
    commands::bitmap::COMMANDS,
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
    commands::persistence::COMMANDS,
    commands::config::COMMANDS,
    commands::cluster::COMMANDS,
    commands::info::COMMANDS,
    commands::command::COMMANDS,
    commands::debug::COMMANDS,
    commands::function::COMMANDS,
    commands::scripting::COMMANDS,
    commands::transaction::COMMANDS,
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
}

#[derive(Debug)]
pub struct CommandTable {
    commands: Vec<Command>,
    top: NameIndex,
}

/// Top-level names to ids, any case. Every request looks its name up here (twice, with
/// the prefetch), so the lookup neither copies nor lower-cases the name and uses a cheap
/// case-folding hash rather than SipHash: the names are fixed when the table is built and
/// the slots stay at most a quarter full, so no choice of names a client sends can make a
/// probe run longer than the longest run of the built table.
#[derive(Debug)]
struct NameIndex {
    /// `(name, id)`; an empty name marks a free slot. A power-of-two count.
    slots: Vec<(&'static str, usize)>,
}

impl NameIndex {
    fn new(names: &[(&'static str, usize)]) -> NameIndex {
        let size = (names.len() * 4).next_power_of_two().max(8);
        let mut index = NameIndex {
            slots: vec![("", 0); size],
        };
        for &(name, id) in names {
            assert!(!name.is_empty(), "a command without a name");
            assert!(
                index.get(name.as_bytes()).is_none(),
                "command {name} declared twice"
            );
            let mut at = index.home(name.as_bytes());
            while !index.slots[at].0.is_empty() {
                at = (at + 1) & (size - 1);
            }
            index.slots[at] = (name, id);
        }
        index
    }

    /// FNV-1a over the bytes with the ASCII case bit set, so `GET` and `get` meet.
    fn home(&self, name: &[u8]) -> usize {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for &byte in name {
            hash = (hash ^ u64::from(byte | 0x20)).wrapping_mul(0x0100_0000_01b3);
        }
        (hash as usize) & (self.slots.len() - 1)
    }

    fn get(&self, name: &[u8]) -> Option<usize> {
        let mask = self.slots.len() - 1;
        let mut at = self.home(name);
        loop {
            let (entry, id) = self.slots[at];
            if entry.is_empty() {
                return None;
            }
            if entry.len() == name.len() && entry.as_bytes().eq_ignore_ascii_case(name) {
                return Some(id);
            }
            at = (at + 1) & mask;
        }
    }
}

/// The table, built on first use.
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

    /// How many slots a lookup of `name` reads before it finds it or a free slot.
    fn probes(index: &NameIndex, name: &[u8]) -> usize {
        let mask = index.slots.len() - 1;
        let mut at = index.home(name);
        let mut count = 1;
        while !index.slots[at].0.is_empty()
            && !index.slots[at].0.as_bytes().eq_ignore_ascii_case(name)
        {
            at = (at + 1) & mask;
            count += 1;
        }
        count
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
