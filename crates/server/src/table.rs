//! The command table: every family's `COMMANDS` gathered once, with ids for statistics and
//! case-insensitive lookup.

use std::collections::HashMap;
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
    subcommands: HashMap<&'static str, usize>,
}

#[derive(Debug)]
pub struct CommandTable {
    commands: Vec<Command>,
    top: HashMap<&'static str, usize>,
}

/// The table, built on first use.
pub fn table() -> &'static CommandTable {
    static TABLE: OnceLock<CommandTable> = OnceLock::new();
    TABLE.get_or_init(CommandTable::build)
}

/// Names longer than this are never commands; lookups skip lower-casing them.
const MAX_NAME_LEN: usize = 64;

fn lower<'b>(name: &[u8], buffer: &'b mut [u8; MAX_NAME_LEN]) -> Option<&'b str> {
    if name.len() > MAX_NAME_LEN {
        return None;
    }
    for (slot, byte) in buffer.iter_mut().zip(name) {
        *slot = byte.to_ascii_lowercase();
    }
    std::str::from_utf8(&buffer[..name.len()]).ok()
}

impl CommandTable {
    fn build() -> CommandTable {
        let mut table = CommandTable {
            commands: Vec::new(),
            top: HashMap::new(),
        };
        for family in FAMILIES {
            for spec in family.iter() {
                let id = table.push(spec, spec.name.to_string(), None);
                let previous = table.top.insert(spec.name, id);
                assert!(previous.is_none(), "command {} declared twice", spec.name);
                for sub in spec.subcommands {
                    let sub_id = table.push(sub, format!("{}|{}", spec.name, sub.name), Some(id));
                    let previous = table.commands[id].subcommands.insert(sub.name, sub_id);
                    assert!(
                        previous.is_none(),
                        "subcommand {}|{} declared twice",
                        spec.name,
                        sub.name
                    );
                }
            }
        }
        table
    }

    fn push(
        &mut self,
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
        let id = self.commands.len();
        self.commands.push(Command {
            spec,
            id,
            full_name,
            parent,
            subcommands: HashMap::new(),
        });
        id
    }

    /// A top-level command by name, any case.
    pub fn lookup(&self, name: &[u8]) -> Option<&Command> {
        let mut buffer = [0u8; MAX_NAME_LEN];
        let name = lower(name, &mut buffer)?;
        self.top.get(name).map(|&id| &self.commands[id])
    }

    /// A subcommand of `parent` by name, any case.
    pub fn subcommand(&self, parent: &Command, name: &[u8]) -> Option<&Command> {
        let mut buffer = [0u8; MAX_NAME_LEN];
        let name = lower(name, &mut buffer)?;
        parent.subcommands.get(name).map(|&id| &self.commands[id])
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
        parent
            .spec
            .subcommands
            .iter()
            .map(move |sub| &self.commands[parent.subcommands[sub.name]])
    }

    pub fn len(&self) -> usize {
        self.commands.len()
    }

    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }
}
