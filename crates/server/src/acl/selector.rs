//! One set of permissions: the commands, keys and channels a user may use together.
//! Every user has a root selector (the rules outside parentheses); `(...)` in ACL SETUSER
//! adds more, and a command runs when any one selector allows all of it (command, keys
//! and channels), as in Redis 7.0.

use std::collections::HashMap;

use bytes::Bytes;

use super::Denied;
use crate::spec::{self, acl, keyflag, CommandSpec};
use crate::table::{table, Command};

/// A key pattern and whether it grants reads, writes or both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPattern {
    pub pattern: Vec<u8>,
    pub read: bool,
    pub write: bool,
}

impl KeyPattern {
    fn describe(&self) -> String {
        let prefix = match (self.read, self.write) {
            (true, true) => "~",
            (true, false) => "%R~",
            _ => "%W~",
        };
        format!("{prefix}{}", String::from_utf8_lossy(&self.pattern))
    }
}

/// The keys a command names, with the flags of each (what this call does to it).
pub type CommandKeys = Vec<(usize, u16)>;

/// The keys `args` name as `spec` finds them. A call whose keys cannot be found (a
/// numkeys beyond the arguments) names none: the command itself refuses it, as in Redis.
pub fn command_keys(spec: &CommandSpec, args: &[Bytes]) -> CommandKeys {
    if let Some(keys) = crate::commands::parsed_keys(spec.name, args) {
        return keys;
    }
    let mut keys = Vec::new();
    let resolved = spec::visit_keys(spec, args, |at, flags| {
        keys.push((at, actual_key_flags(spec, args, flags)));
    });
    if resolved.is_err() {
        keys.clear();
    }
    keys
}

/// Key specs marked `variable_flags` name the most a command may do; its arguments say
/// what this call does (Redis asks the command's getkeys hook). SET reads its key only
/// with GET; BITFIELD writes only with SET or INCRBY (or arguments it cannot parse).
fn actual_key_flags(spec: &CommandSpec, args: &[Bytes], flags: u16) -> u16 {
    if flags & keyflag::VARIABLE_FLAGS == 0 {
        return flags;
    }
    match spec.name {
        "set" if !args.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get")) => {
            (flags & !(keyflag::RW | keyflag::ACCESS)) | keyflag::OW
        }
        "bitfield" if bitfield_reads_only(args) => {
            (flags & !(keyflag::RW | keyflag::UPDATE | keyflag::INSERT | keyflag::DELETE))
                | keyflag::RO
                | keyflag::ACCESS
        }
        _ => flags,
    }
}

/// Whether a BITFIELD call only has GET (and OVERFLOW) operations.
fn bitfield_reads_only(args: &[Bytes]) -> bool {
    let mut i = 2;
    while i < args.len() {
        let left = args.len() - i - 1;
        let arg = &args[i];
        if arg.eq_ignore_ascii_case(b"get") && left >= 2 {
            i += 3;
        } else if arg.eq_ignore_ascii_case(b"overflow") && left >= 1 {
            i += 2;
        } else {
            return false;
        }
    }
    true
}

/// One selector's rules.
#[derive(Clone, Debug)]
pub struct Selector {
    /// Allowed, by command table id (subcommands have their own ids).
    allowed: Vec<bool>,
    /// `+@all` or `-@all`, then the command rules in the order given (for GETUSER).
    all_commands_base: bool,
    command_rules: Vec<String>,
    /// `+select|0`: first arguments with which an otherwise denied command (one without
    /// subcommands) is allowed, by command id (Redis' `allowed_firstargs`).
    first_args: HashMap<usize, Vec<Vec<u8>>>,
    pub all_keys: bool,
    pub keys: Vec<KeyPattern>,
    pub all_channels: bool,
    pub channels: Vec<Vec<u8>>,
}

impl Selector {
    /// No commands, no keys; every channel only under `acl-pubsub-default allchannels`.
    pub fn empty(all_channels: bool) -> Selector {
        Selector {
            allowed: vec![false; table().len()],
            all_commands_base: false,
            command_rules: Vec::new(),
            first_args: HashMap::new(),
            all_keys: false,
            keys: Vec::new(),
            all_channels,
            channels: Vec::new(),
        }
    }

    pub fn unrestricted(&self) -> bool {
        self.all_keys && self.all_channels && self.allowed.iter().all(|&a| a)
    }

    /// Applies one rule about commands, keys or channels. The error is the reason Redis
    /// gives after "Error in ACL SETUSER modifier '...': ".
    pub fn apply(&mut self, op: &[u8]) -> Result<(), &'static str> {
        let lower = op.to_ascii_lowercase();
        match &lower[..] {
            b"allkeys" | b"~*" => {
                self.all_keys = true;
                self.keys.clear();
            }
            b"resetkeys" => {
                self.all_keys = false;
                self.keys.clear();
            }
            b"allchannels" | b"&*" => {
                self.all_channels = true;
                self.channels.clear();
            }
            b"resetchannels" => {
                self.all_channels = false;
                self.channels.clear();
            }
            b"allcommands" | b"+@all" => self.set_all(true),
            b"nocommands" | b"-@all" => self.set_all(false),
            _ => return self.apply_prefixed(op, &lower),
        }
        Ok(())
    }

    fn apply_prefixed(&mut self, op: &[u8], lower: &[u8]) -> Result<(), &'static str> {
        match op.first() {
            Some(b'~') => self.add_key_pattern(&op[1..], true, true)?,
            Some(b'%') => {
                if self.all_keys {
                    return Err(ERR_AFTER_STAR);
                }
                let tilde = op.iter().position(|&b| b == b'~').ok_or(ERR_SYNTAX)?;
                let (mut read, mut write) = (false, false);
                for &flag in &lower[1..tilde] {
                    match flag {
                        b'r' if !read => read = true,
                        b'w' if !write => write = true,
                        _ => return Err(ERR_SYNTAX),
                    }
                }
                if !read && !write {
                    return Err(ERR_SYNTAX);
                }
                self.add_key_pattern(&op[tilde + 1..], read, write)?;
            }
            Some(b'&') => {
                if self.all_channels {
                    return Err(ERR_AFTER_STAR_CHANNELS);
                }
                if has_spaces(&op[1..]) {
                    return Err(ERR_SYNTAX);
                }
                if !self.channels.iter().any(|c| c[..] == op[1..]) {
                    self.channels.push(op[1..].to_vec());
                }
            }
            Some(b'+') | Some(b'-') => {
                let allow = op[0] == b'+';
                let before = (self.allowed.clone(), self.first_args.clone());
                let name = &lower[1..];
                if let Some(category) = name.strip_prefix(b"@") {
                    let bits = category_bits(category).ok_or(ERR_UNKNOWN)?;
                    self.set_category(bits, allow);
                } else if let Some(ids) = command_ids(name) {
                    for id in ids {
                        self.set_command(id, allow);
                    }
                } else {
                    // `+cmd|arg`: a first argument, for commands without subcommands
                    // (`-cmd|arg` names no command).
                    if !allow {
                        return Err(ERR_UNKNOWN);
                    }
                    let (command, arg) = first_arg_rule(name)?;
                    let args = self.first_args.entry(command.id).or_default();
                    if !args.iter().any(|a| a.eq_ignore_ascii_case(arg)) {
                        args.push(arg.to_vec());
                    }
                }
                // A rule that changes nothing is not shown (`+@all +client|id` is `+@all`).
                if (&self.allowed, &self.first_args) != (&before.0, &before.1) {
                    self.note_command_rule(op[0], &String::from_utf8_lossy(name));
                }
            }
            _ => return Err(ERR_SYNTAX),
        }
        Ok(())
    }

    fn add_key_pattern(
        &mut self,
        pattern: &[u8],
        read: bool,
        write: bool,
    ) -> Result<(), &'static str> {
        if self.all_keys {
            return Err(ERR_AFTER_STAR);
        }
        if has_spaces(pattern) {
            return Err(ERR_SYNTAX);
        }
        match self.keys.iter_mut().find(|k| k.pattern == pattern) {
            Some(existing) => {
                existing.read |= read;
                existing.write |= write;
            }
            None => self.keys.push(KeyPattern {
                pattern: pattern.to_vec(),
                read,
                write,
            }),
        }
        Ok(())
    }

    fn set_all(&mut self, allow: bool) {
        self.allowed.iter_mut().for_each(|a| *a = allow);
        self.all_commands_base = allow;
        self.command_rules.clear();
        self.first_args.clear();
    }

    fn set_category(&mut self, bits: u32, allow: bool) {
        for command in table().all() {
            if command.spec.acl_categories() & bits != 0 {
                self.set_command(command.id, allow);
            }
        }
    }

    /// Allows or denies one command; its first-argument rules go, as in Redis.
    fn set_command(&mut self, id: usize, allow: bool) {
        self.allowed[id] = allow;
        if self.first_args.remove(&id).is_some() {
            let prefix = format!("{}|", table().all()[id].full_name);
            self.command_rules
                .retain(|rule| !rule.get(1..).is_some_and(|r| r.starts_with(&prefix)));
        }
    }

    /// Keeps the rule list short as Redis 7.0 does: a later rule for the same command
    /// replaces an earlier one, and a rule for a whole command those for its subcommands.
    fn note_command_rule(&mut self, sign: u8, name: &str) {
        let subcommands = format!("{name}|");
        self.command_rules.retain(|rule| {
            rule.get(1..)
                .is_some_and(|r| r != name && !r.starts_with(&subcommands))
        });
        self.command_rules.push(format!("{}{name}", sign as char));
    }

    pub fn command_allowed(&self, command: &Command) -> bool {
        self.allowed[command.id]
    }

    /// Whether a denied command is allowed with this first argument (`+select|0`).
    fn first_arg_allowed(&self, command: &Command, args: &[Bytes]) -> bool {
        let Some(allowed) = self.first_args.get(&command.id) else {
            return false;
        };
        args.get(1)
            .is_some_and(|arg| allowed.iter().any(|a| a.eq_ignore_ascii_case(arg)))
    }

    /// Redis' `ACLSelectorCheckCmd`: the command, then each key, then each channel; the
    /// denial carries the refused argument's position (0 for the command). Commands
    /// flagged `no-auth` (AUTH, HELLO, QUIT, RESET) pass the command rules whatever they
    /// say, so a user without `+auth` can still log in again or switch users. `keys` is
    /// computed once for all of a user's selectors.
    pub fn check(
        &self,
        command: &Command,
        args: &[Bytes],
        keys: &mut Option<CommandKeys>,
    ) -> Result<(), (Denied, usize)> {
        if !command.spec.has_flag(spec::flag::NO_AUTH)
            && !self.command_allowed(command)
            && !self.first_arg_allowed(command, args)
        {
            return Err((Denied::Command, 0));
        }
        if !self.all_keys && !command.spec.key_specs.is_empty() {
            let keys = keys.get_or_insert_with(|| command_keys(command.spec, args));
            if let Some(&(at, _)) = keys
                .iter()
                .find(|&&(at, flags)| !self.key_allowed(&args[at], flags))
            {
                return Err((Denied::Key, at));
            }
        }
        if let Some(at) = self.first_denied_channel(command, args) {
            return Err((Denied::Channel, at));
        }
        Ok(())
    }

    /// Whether this selector lets the command run and reach every key with the given
    /// access (`~*` or `%R~*`: Redis' test before SORT's BY and GET patterns).
    pub fn unrestricted_key_access(&self, read: bool, write: bool) -> bool {
        self.all_keys
            || self.keys.iter().any(|pattern| {
                pattern.pattern == b"*" && (!read || pattern.read) && (!write || pattern.write)
            })
    }

    fn key_allowed(&self, key: &[u8], flags: u16) -> bool {
        let read = flags & keyflag::ACCESS != 0;
        let write = flags & (keyflag::INSERT | keyflag::DELETE | keyflag::UPDATE) != 0;
        self.keys.iter().any(|pattern| {
            (!read || pattern.read)
                && (!write || pattern.write)
                && latch_keyspace::glob::glob_match(&pattern.pattern, key, false)
        })
    }

    /// Whether `channel` passes the channel rules. A pattern (PSUBSCRIBE's argument) must
    /// be one of the rules exactly; a channel must match one of them as a glob.
    pub fn channel_allowed(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.all_channels
            || self.channels.iter().any(|rule| {
                if is_pattern {
                    rule[..] == channel[..]
                } else {
                    latch_keyspace::glob::glob_match(rule, channel, false)
                }
            })
    }

    /// The position of the first channel (or pattern) the command publishes or subscribes
    /// to that the rules refuse. Unsubscribing is never refused.
    fn first_denied_channel(&self, command: &Command, args: &[Bytes]) -> Option<usize> {
        if self.all_channels || !command.spec.has_flag(spec::flag::PUBSUB) {
            return None;
        }
        let (first, last, is_pattern) = match command.full_name.as_str() {
            "publish" | "spublish" => (1, 2.min(args.len()), false),
            "subscribe" | "ssubscribe" => (1, args.len(), false),
            "psubscribe" => (1, args.len(), true),
            _ => return None,
        };
        (first..last).find(|&at| !self.channel_allowed(&args[at], is_pattern))
    }

    /// `+@all`/`-@all` followed by the command rules, as `ACL GETUSER` shows them.
    pub fn describe_commands(&self) -> String {
        let mut out = String::from(if self.all_commands_base {
            "+@all"
        } else {
            "-@all"
        });
        for rule in &self.command_rules {
            out.push(' ');
            out.push_str(rule);
        }
        out
    }

    pub fn describe_keys(&self) -> String {
        if self.all_keys {
            return "~*".to_string();
        }
        let patterns: Vec<String> = self.keys.iter().map(KeyPattern::describe).collect();
        patterns.join(" ")
    }

    pub fn describe_channels(&self) -> String {
        if self.all_channels {
            return "&*".to_string();
        }
        let patterns: Vec<String> = self
            .channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect();
        patterns.join(" ")
    }

    /// Keys, channels (after `resetchannels` unless all are allowed), then commands: the
    /// rules that recreate this selector, as `ACL LIST` writes them.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        let keys = self.describe_keys();
        if !keys.is_empty() {
            parts.push(keys);
        }
        if !self.all_channels {
            parts.push("resetchannels".to_string());
        }
        let channels = self.describe_channels();
        if !channels.is_empty() {
            parts.push(channels);
        }
        parts.push(self.describe_commands());
        parts.join(" ")
    }
}

/// Redis' `ACLStringHasSpaces`: patterns may not hold spaces or control characters.
fn has_spaces(text: &[u8]) -> bool {
    text.iter()
        .any(|&b| b.is_ascii_whitespace() || b == 0 || b == 0x0b)
}

pub const ERR_SYNTAX: &str = "Syntax error";
pub const ERR_UNKNOWN: &str = "Unknown command or category name in ACL";
const ERR_AFTER_STAR: &str = "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns";
const ERR_AFTER_STAR_CHANNELS: &str = "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels";
pub const ERR_FIRST_ARG_OF_SUBCOMMAND: &str = "Allowing first-arg of a subcommand is not supported";

/// A category's bits; `u32::MAX` for `all`.
pub fn category_bits(name: &[u8]) -> Option<u32> {
    if name == b"all" {
        return Some(u32::MAX);
    }
    acl::NAMES
        .iter()
        .find(|(_, n)| n.as_bytes()[1..] == *name)
        .map(|(bits, _)| *bits)
}

/// A `cmd|arg` rule's command (one without subcommands) and first argument; the error is
/// Redis' for a subcommand's first argument, an empty one or an unknown command.
fn first_arg_rule(name: &[u8]) -> Result<(&'static Command, &[u8]), &'static str> {
    let bar = name.iter().rposition(|&b| b == b'|').ok_or(ERR_UNKNOWN)?;
    let (head, arg) = (&name[..bar], &name[bar + 1..]);
    let table = table();
    let command = match head.iter().position(|&b| b == b'|') {
        None => table.lookup(head).ok_or(ERR_UNKNOWN)?,
        Some(_) => {
            // `cmd|sub|arg`: the subcommand must exist, and is refused then.
            command_ids(head).ok_or(ERR_UNKNOWN)?;
            return Err(ERR_FIRST_ARG_OF_SUBCOMMAND);
        }
    };
    if arg.is_empty() {
        return Err(ERR_SYNTAX);
    }
    if table.subcommands_of(command).next().is_some() {
        // A container's `cmd|name` names a subcommand, and this one has none of that name.
        return Err(ERR_UNKNOWN);
    }
    Ok((command, arg))
}

/// The ids a `+name` rule covers: a command with all its subcommands, or `cmd|sub`.
fn command_ids(name: &[u8]) -> Option<Vec<usize>> {
    let table = table();
    let mut parts = name.splitn(2, |&b| b == b'|');
    let top = table.lookup(parts.next()?)?;
    match parts.next() {
        Some(sub) => Some(vec![table.subcommand(top, sub)?.id]),
        None => {
            let mut ids = vec![top.id];
            ids.extend(table.subcommands_of(top).map(|c| c.id));
            Some(ids)
        }
    }
}
