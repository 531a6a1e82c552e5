//! Users and what they may do: Redis 7.0's ACL rules (`on`, `>password`, `+@category`,
//! `-command`, `~pattern`, `%R~pattern`, `&channel`, `reset`...), the checks the gatekeeper
//! runs before a command, and the texts `ACL GETUSER`/`ACL LIST` show.
//!
//! A connection holds an `Arc<User>`: the name never changes, the rules sit behind a lock
//! that `ACL SETUSER` takes for writing, so a change reaches connections already logged in
//! (as in Redis). Most connections run as `default` with every permission: for them the
//! check is one relaxed load of `unrestricted`. Selectors (`(...)`) are not supported yet.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::RwLock;
use sha2::{Digest, Sha256};

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

/// One user's rules.
#[derive(Clone, Debug)]
pub struct Rules {
    pub enabled: bool,
    pub nopass: bool,
    /// SHA-256 of each password, as Redis keeps them.
    pub passwords: Vec<[u8; 32]>,
    /// Allowed, by command table id (subcommands have their own ids).
    allowed: Vec<bool>,
    /// `+@all` or `-@all`, then the command rules in the order given (for GETUSER).
    all_commands_base: bool,
    command_rules: Vec<String>,
    /// `+select|0`: first arguments with which an otherwise denied command (one without
    /// subcommands) is allowed, by command id (Redis' `allowed_firstargs`).
    first_args: std::collections::HashMap<usize, Vec<Vec<u8>>>,
    pub all_keys: bool,
    pub keys: Vec<KeyPattern>,
    pub all_channels: bool,
    pub channels: Vec<Vec<u8>>,
}

impl Rules {
    /// A new user's rules: off, no password, no commands, no keys, no channels.
    fn empty() -> Rules {
        Rules {
            enabled: false,
            nopass: false,
            passwords: Vec::new(),
            allowed: vec![false; table().len()],
            all_commands_base: false,
            command_rules: Vec::new(),
            first_args: std::collections::HashMap::new(),
            all_keys: false,
            keys: Vec::new(),
            all_channels: false,
            channels: Vec::new(),
        }
    }

    fn unrestricted(&self) -> bool {
        self.enabled && self.all_keys && self.all_channels && self.allowed.iter().all(|&a| a)
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

    /// Whether every channel the command publishes or subscribes to passes the rules.
    pub fn channels_allowed(&self, command: &Command, args: &[Bytes]) -> bool {
        self.first_denied_channel(command, args).is_none()
    }

    /// The first channel (or pattern) the command publishes or subscribes to that the rules
    /// refuse. Unsubscribing is never refused.
    pub fn first_denied_channel<'a>(
        &self,
        command: &Command,
        args: &'a [Bytes],
    ) -> Option<&'a Bytes> {
        if self.all_channels || !command.spec.has_flag(crate::spec::flag::PUBSUB) {
            return None;
        }
        let (channels, is_pattern) = match command.full_name.as_str() {
            "publish" | "spublish" => (args.get(1..2).unwrap_or(&[]), false),
            "subscribe" | "ssubscribe" => (args.get(1..).unwrap_or(&[]), false),
            "psubscribe" => (args.get(1..).unwrap_or(&[]), true),
            _ => return None,
        };
        channels
            .iter()
            .find(|channel| !self.channel_allowed(channel, is_pattern))
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

    /// The whole user as one `ACL LIST` line (after `user <name> `).
    pub fn describe(&self) -> String {
        let mut parts = vec![if self.enabled { "on" } else { "off" }.to_string()];
        if self.nopass {
            parts.push("nopass".to_string());
        }
        for hash in &self.passwords {
            parts.push(format!("#{}", hex(hash)));
        }
        // As Redis writes it: key patterns as they are (none: nothing), channels after
        // `resetchannels` unless all are allowed.
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

    /// Applies one rule (`ACL SETUSER` applies them left to right). The error is the
    /// reason Redis gives after "Error in ACL SETUSER modifier '...': ".
    pub fn apply(&mut self, op: &[u8]) -> Result<(), &'static str> {
        let lower = op.to_ascii_lowercase();
        match &lower[..] {
            b"on" => self.enabled = true,
            b"off" => self.enabled = false,
            b"nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            b"resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            b"allkeys" => {
                self.all_keys = true;
                self.keys.clear();
            }
            b"resetkeys" => {
                self.all_keys = false;
                self.keys.clear();
            }
            b"allchannels" => {
                self.all_channels = true;
                self.channels.clear();
            }
            b"resetchannels" => {
                self.all_channels = false;
                self.channels.clear();
            }
            b"allcommands" => self.set_all(true),
            b"nocommands" => self.set_all(false),
            b"reset" => {
                for rule in [
                    &b"resetpass"[..],
                    b"resetkeys",
                    b"resetchannels",
                    b"off",
                    b"-@all",
                ] {
                    self.apply(rule)?;
                }
            }
            _ => return self.apply_prefixed(op, &lower),
        }
        Ok(())
    }

    fn apply_prefixed(&mut self, op: &[u8], lower: &[u8]) -> Result<(), &'static str> {
        match op.first() {
            Some(b'>') => {
                let hash: [u8; 32] = Sha256::digest(&op[1..]).into();
                if !self.passwords.contains(&hash) {
                    self.passwords.push(hash);
                }
                self.nopass = false;
            }
            Some(b'#') => {
                let hash = parse_hash(&op[1..]).ok_or(ERR_BAD_HASH)?;
                if !self.passwords.contains(&hash) {
                    self.passwords.push(hash);
                }
                self.nopass = false;
            }
            Some(b'<') => {
                let hash: [u8; 32] = Sha256::digest(&op[1..]).into();
                self.remove_password(&hash)?;
            }
            Some(b'!') => {
                let hash = parse_hash(&op[1..]).ok_or(ERR_BAD_HASH)?;
                self.remove_password(&hash)?;
            }
            Some(b'~') => self.add_key_pattern(&op[1..], true, true)?,
            Some(b'%') => {
                let tilde = op.iter().position(|&b| b == b'~').ok_or(ERR_SYNTAX)?;
                let (mut read, mut write) = (false, false);
                for &flag in &lower[1..tilde] {
                    match flag {
                        b'r' => read = true,
                        b'w' => write = true,
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
                    return Err(ERR_AFTER_STAR);
                }
                if &op[1..] == b"*" {
                    self.all_channels = true;
                    self.channels.clear();
                } else if !self.channels.iter().any(|c| c[..] == op[1..]) {
                    self.channels.push(op[1..].to_vec());
                }
            }
            Some(b'+') | Some(b'-') => {
                let allow = op[0] == b'+';
                let name = &lower[1..];
                if let Some(category) = name.strip_prefix(b"@") {
                    let bits = category_bits(category).ok_or(ERR_UNKNOWN)?;
                    if bits == u32::MAX {
                        self.set_all(allow);
                        return Ok(());
                    }
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
                self.note_command_rule(op[0], &String::from_utf8_lossy(name));
            }
            Some(b'(') => return Err(ERR_SELECTORS),
            _ => return Err(ERR_SYNTAX),
        }
        Ok(())
    }

    fn remove_password(&mut self, hash: &[u8; 32]) -> Result<(), &'static str> {
        let before = self.passwords.len();
        self.passwords.retain(|p| p != hash);
        if self.passwords.len() == before {
            return Err(ERR_NO_PASSWORD);
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
        if pattern == b"*" && read && write {
            self.all_keys = true;
            self.keys.clear();
            return Ok(());
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
    /// replaces an earlier one.
    fn note_command_rule(&mut self, sign: u8, name: &str) {
        self.command_rules
            .retain(|rule| rule.get(1..) != Some(name));
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

    /// Whether every key the command names passes the key patterns (reads against read
    /// patterns, writes against write patterns, as the key specs say).
    pub fn keys_allowed(&self, spec: &CommandSpec, args: &[Bytes]) -> bool {
        if self.all_keys {
            return true;
        }
        if let Some(keys) = crate::commands::parsed_keys(spec.name, args) {
            return keys
                .iter()
                .all(|&(at, flags)| self.key_allowed(&args[at], flags));
        }
        let mut ok = true;
        let resolved = spec::visit_keys(spec, args, |at, flags| {
            let flags = actual_key_flags(spec, args, flags);
            if ok && !self.key_allowed(&args[at], flags) {
                ok = false;
            }
        });
        resolved.is_ok() && ok
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
}

/// Key specs marked `variable_flags` name the most a command may do; its arguments say
/// what this call does. SET reads its key only with GET (Redis asks SET's getkeys hook).
fn actual_key_flags(spec: &CommandSpec, args: &[Bytes], flags: u16) -> u16 {
    if flags & keyflag::VARIABLE_FLAGS != 0
        && spec.name == "set"
        && !args.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get"))
    {
        return (flags & !(keyflag::RW | keyflag::ACCESS)) | keyflag::OW;
    }
    flags
}

pub const ERR_SYNTAX: &str = "Syntax error";
const ERR_UNKNOWN: &str = "Unknown command or category name in ACL";
const ERR_BAD_HASH: &str =
    "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters";
const ERR_NO_PASSWORD: &str = "The password you are trying to remove from the user does not exist";
const ERR_AFTER_STAR: &str = "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns";
const ERR_FIRST_ARG_OF_SUBCOMMAND: &str = "Allowing first-arg of a subcommand is not supported";
const ERR_SELECTORS: &str = "Selectors are not supported by Latch yet";

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

fn parse_hash(text: &[u8]) -> Option<[u8; 32]> {
    if text.len() != 64 || !text.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in text.chunks(2).enumerate() {
        let digit = |b: u8| if b <= b'9' { b - b'0' } else { b - b'a' + 10 };
        out[i] = digit(pair[0]) << 4 | digit(pair[1]);
    }
    Some(out)
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A user: a fixed name and rules that may change under connections logged in as it.
#[derive(Debug)]
pub struct User {
    pub name: String,
    rules: RwLock<Rules>,
    /// On, every command, every key: the gatekeeper skips its checks.
    unrestricted: AtomicBool,
    /// Deleted by `ACL DELUSER`: its connections are closed.
    pub deleted: AtomicBool,
}

impl User {
    fn new(name: &str, rules: Rules) -> User {
        let unrestricted = rules.unrestricted();
        User {
            name: name.to_string(),
            rules: RwLock::new(rules),
            unrestricted: AtomicBool::new(unrestricted),
            deleted: AtomicBool::new(false),
        }
    }

    pub fn rules(&self) -> Rules {
        self.rules.read().clone()
    }

    pub fn is_unrestricted(&self) -> bool {
        self.unrestricted.load(Ordering::Relaxed)
    }

    pub fn is_enabled(&self) -> bool {
        self.rules.read().enabled
    }

    /// Whether a new connection starts logged in as this user (Redis: `nopass` and on).
    pub fn logs_in_without_password(&self) -> bool {
        let rules = self.rules.read();
        rules.nopass && rules.enabled
    }

    /// Checks a password against the user (any password when `nopass`).
    pub fn password_matches(&self, password: &[u8]) -> bool {
        let rules = self.rules.read();
        if rules.nopass {
            return true;
        }
        let hash: [u8; 32] = Sha256::digest(password).into();
        rules.passwords.contains(&hash)
    }

    /// What the gatekeeper checks: `None` when allowed, else the denial. Commands flagged
    /// `no-auth` (AUTH, HELLO, QUIT, RESET) pass the command rules whatever they say, as in
    /// Redis' `ACLSelectorCheckCmd`: a user without `+auth` can still log in again or switch
    /// users (the key rules still apply, and these commands name no keys).
    pub fn check(&self, command: &Command, args: &[Bytes]) -> Option<Denied> {
        if self.is_unrestricted() {
            return None;
        }
        let rules = self.rules.read();
        if !command.spec.has_flag(spec::flag::NO_AUTH)
            && !rules.command_allowed(command)
            && !rules.first_arg_allowed(command, args)
        {
            return Some(Denied::Command);
        }
        if !rules.keys_allowed(command.spec, args) {
            return Some(Denied::Key);
        }
        if !rules.channels_allowed(command, args) {
            return Some(Denied::Channel);
        }
        None
    }

    /// The first key of the command the user may not touch (for ACL DRYRUN's reply).
    pub fn first_denied_key(&self, spec: &CommandSpec, args: &[Bytes]) -> Option<Bytes> {
        let rules = self.rules.read();
        if rules.all_keys {
            return None;
        }
        let mut denied = None;
        let _ = spec::visit_keys(spec, args, |at, flags| {
            let flags = actual_key_flags(spec, args, flags);
            if denied.is_none() && !rules.key_allowed(&args[at], flags) {
                denied = Some(args[at].clone());
            }
        });
        denied
    }

    /// The first channel of the command the user may not use (for ACL DRYRUN's reply).
    pub fn first_denied_channel(&self, command: &Command, args: &[Bytes]) -> Option<Bytes> {
        self.rules
            .read()
            .first_denied_channel(command, args)
            .cloned()
    }

    /// Replaces the rules (ACL SETUSER applies a whole list, or none of it).
    fn set_rules(&self, rules: Rules) {
        self.unrestricted
            .store(rules.unrestricted(), Ordering::Relaxed);
        *self.rules.write() = rules;
    }
}

/// Why a command was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    Command,
    Key,
    Channel,
}

impl Denied {
    /// The shorter wording Redis uses after "The user executing the script " (and in
    /// `ACL DRYRUN`-like places).
    pub fn short_reason(self) -> &'static str {
        match self {
            Denied::Command => "can't run this command or subcommand",
            Denied::Key => {
                "can't access at least one of the keys mentioned in the command arguments"
            }
            Denied::Channel => "can't publish to the channel mentioned in the command",
        }
    }

    /// Redis' text after "NOPERM " for a refused command.
    pub fn reason(self, command: &Command) -> String {
        match self {
            Denied::Command => format!(
                "this user has no permissions to run the '{}' command",
                command.full_name
            ),
            Denied::Key => {
                "this user has no permissions to access one of the keys used as arguments"
                    .to_string()
            }
            Denied::Channel => {
                "this user has no permissions to access one of the channels used as arguments"
                    .to_string()
            }
        }
    }
}

/// Every user, by name.
#[derive(Debug)]
pub struct Acl {
    users: RwLock<BTreeMap<String, Arc<User>>>,
}

impl Acl {
    /// The `default` user: on, every command, key and channel; `nopass` unless
    /// `requirepass` gives it a password.
    pub fn new(requirepass: Option<&[u8]>) -> Acl {
        let mut rules = Rules::empty();
        for rule in [&b"on"[..], b"allkeys", b"allchannels", b"+@all"] {
            let _ = rules.apply(rule);
        }
        match requirepass {
            Some(password) => {
                let mut op = b">".to_vec();
                op.extend_from_slice(password);
                let _ = rules.apply(&op);
            }
            None => rules.nopass = true,
        }
        let mut users = BTreeMap::new();
        users.insert("default".to_string(), Arc::new(User::new("default", rules)));
        Acl {
            users: RwLock::new(users),
        }
    }

    /// A user with every permission that is in no list: the primary's link on a replica
    /// (Redis' primary client has no user and passes every check).
    pub fn internal_user() -> Arc<User> {
        let mut rules = Rules::empty();
        for rule in [&b"on"[..], b"nopass", b"allkeys", b"allchannels", b"+@all"] {
            let _ = rules.apply(rule);
        }
        Arc::new(User::new("(superuser)", rules))
    }

    pub fn default_user(&self) -> Arc<User> {
        self.get("default").expect("the default user always exists")
    }

    pub fn get(&self, name: &str) -> Option<Arc<User>> {
        self.users.read().get(name).cloned()
    }

    pub fn names(&self) -> Vec<String> {
        self.users.read().keys().cloned().collect()
    }

    pub fn users(&self) -> Vec<Arc<User>> {
        self.users.read().values().cloned().collect()
    }

    /// ACL SETUSER: applies every rule to a copy, then stores it; an error leaves the user
    /// (or its absence) as it was. The error names the rule, as Redis' does.
    /// `all_channels_by_default` is `acl-pubsub-default allchannels`: a new user, and one
    /// `reset`, may then use every channel. Returns the user.
    pub fn set_user(
        &self,
        name: &str,
        ops: &[Bytes],
        all_channels_by_default: bool,
    ) -> Result<Arc<User>, String> {
        let existing = self.get(name);
        let mut rules = match &existing {
            Some(user) => user.rules(),
            None => {
                let mut rules = Rules::empty();
                rules.all_channels = all_channels_by_default;
                rules
            }
        };
        for op in ops {
            rules.apply(op).map_err(|reason| {
                format!(
                    "ERR Error in ACL SETUSER modifier '{}': {reason}",
                    String::from_utf8_lossy(op)
                )
            })?;
            if all_channels_by_default && op.eq_ignore_ascii_case(b"reset") {
                rules.all_channels = true;
            }
        }
        match existing {
            Some(user) => {
                user.set_rules(rules);
                Ok(user)
            }
            None => {
                let user = Arc::new(User::new(name, rules));
                self.users
                    .write()
                    .insert(name.to_string(), Arc::clone(&user));
                Ok(user)
            }
        }
    }

    /// `requirepass` set at run time: the default user's passwords become that one.
    pub fn set_default_password(&self, password: Option<&[u8]>) {
        let user = self.default_user();
        let mut rules = user.rules();
        rules.passwords.clear();
        match password {
            Some(password) => {
                rules.nopass = false;
                rules.passwords.push(Sha256::digest(password).into());
            }
            None => rules.nopass = true,
        }
        user.set_rules(rules);
    }

    /// ACL DELUSER: removes the users that exist; returns them (their connections close).
    pub fn delete(&self, names: &[String]) -> Vec<Arc<User>> {
        let mut users = self.users.write();
        names
            .iter()
            .filter_map(|name| users.remove(name))
            .inspect(|user| user.deleted.store(true, Ordering::Relaxed))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(ops: &[&str]) -> Rules {
        let mut rules = Rules::empty();
        for op in ops {
            rules.apply(op.as_bytes()).unwrap();
        }
        rules
    }

    #[test]
    fn rules_grant_commands_categories_and_keys() {
        let rules = user(&["on", ">123", "+@scripting", "+set", "~x*"]);
        let table = table();
        assert!(rules.command_allowed(table.lookup(b"eval").unwrap()));
        assert!(rules.command_allowed(table.lookup(b"set").unwrap()));
        assert!(!rules.command_allowed(table.lookup(b"hset").unwrap()));
        let set = table.lookup(b"set").unwrap().spec;
        let args = |words: &[&str]| -> Vec<Bytes> {
            words
                .iter()
                .map(|w| Bytes::copy_from_slice(w.as_bytes()))
                .collect()
        };
        assert!(rules.keys_allowed(set, &args(&["set", "xx", "1"])));
        assert!(!rules.keys_allowed(set, &args(&["set", "yy", "1"])));
        assert_eq!(rules.describe_commands(), "-@all +@scripting +set");
        assert_eq!(rules.describe_keys(), "~x*");
    }

    #[test]
    fn read_and_write_patterns_follow_the_key_specs() {
        let rules = user(&["on", "nopass", "+@all", "%R~r*", "%W~w*"]);
        let table = table();
        let args = |words: &[&str]| -> Vec<Bytes> {
            words
                .iter()
                .map(|w| Bytes::copy_from_slice(w.as_bytes()))
                .collect()
        };
        let get = table.lookup(b"get").unwrap().spec;
        let set = table.lookup(b"set").unwrap().spec;
        assert!(rules.keys_allowed(get, &args(&["get", "r1"])));
        assert!(!rules.keys_allowed(get, &args(&["get", "w1"])));
        assert!(rules.keys_allowed(set, &args(&["set", "w1", "v"])));
        assert!(!rules.keys_allowed(set, &args(&["set", "r1", "v"])));
    }

    #[test]
    fn first_arguments_allow_a_denied_command_with_that_argument() {
        let mut rules = user(&["on", "nopass", "-@all", "+select|0", "+select|2"]);
        let table = table();
        let select = table.lookup(b"select").unwrap();
        let args = |arg: &'static [u8]| [Bytes::from_static(b"select"), Bytes::from_static(arg)];
        assert!(rules.first_arg_allowed(select, &args(b"0")));
        assert!(rules.first_arg_allowed(select, &args(b"2")));
        assert!(!rules.first_arg_allowed(select, &args(b"1")));
        assert_eq!(rules.describe_commands(), "-@all +select|0 +select|2");
        // Allowing or denying the command drops its first arguments, as in Redis.
        rules.apply(b"-select").unwrap();
        assert!(!rules.first_arg_allowed(select, &args(b"0")));
        assert_eq!(rules.describe_commands(), "-@all -select");
        assert_eq!(
            rules.apply(b"+config|get|appendonly"),
            Err(ERR_FIRST_ARG_OF_SUBCOMMAND)
        );
        assert_eq!(rules.apply(b"-select|0"), Err(ERR_UNKNOWN));
        assert_eq!(rules.apply(b"+select|"), Err(ERR_SYNTAX));
        assert_eq!(rules.apply(b"+config|nosuchsub"), Err(ERR_UNKNOWN));
        // ACL LIST: channels after resetchannels, no key part when there are no patterns.
        let listed = user(&["on", "nopass", "resetchannels", "&foo", "+@all"]);
        assert_eq!(listed.describe(), "on nopass resetchannels &foo +@all");
    }

    #[test]
    fn errors_and_passwords() {
        let mut rules = Rules::empty();
        assert_eq!(rules.apply(b"bogus"), Err(ERR_SYNTAX));
        assert_eq!(rules.apply(b"+nosuchcommand"), Err(ERR_UNKNOWN));
        assert_eq!(rules.apply(b"+@nosuchcategory"), Err(ERR_UNKNOWN));
        assert_eq!(rules.apply(b"#abc"), Err(ERR_BAD_HASH));
        assert_eq!(rules.apply(b"<nope"), Err(ERR_NO_PASSWORD));
        rules.apply(b"allkeys").unwrap();
        assert_eq!(rules.apply(b"~foo"), Err(ERR_AFTER_STAR));
        let acl = Acl::new(None);
        acl.set_user(
            "bob",
            &[Bytes::from_static(b"on"), Bytes::from_static(b">pw")],
            false,
        )
        .unwrap();
        let bob = acl.get("bob").unwrap();
        assert!(bob.password_matches(b"pw"));
        assert!(!bob.password_matches(b"other"));
        // A failing list changes nothing.
        let failed = acl.set_user(
            "bob",
            &[Bytes::from_static(b"off"), Bytes::from_static(b"bad")],
            false,
        );
        assert!(failed.unwrap_err().contains("modifier 'bad': Syntax error"));
        assert!(bob.is_enabled());
        assert!(acl.default_user().is_unrestricted());
    }

    #[test]
    fn channel_rules_match_channels_as_globs_and_patterns_literally() {
        let rules = user(&["on", "nopass", "+@all", "~*", "&news.*", "&alerts"]);
        assert!(rules.channel_allowed(b"news.today", false));
        assert!(rules.channel_allowed(b"alerts", false));
        assert!(!rules.channel_allowed(b"sports", false));
        assert!(rules.channel_allowed(b"news.*", true));
        assert!(!rules.channel_allowed(b"news.t*", true));
        assert!(!rules.channel_allowed(b"*", true));
        let table = table();
        let args = |words: &[&str]| -> Vec<Bytes> {
            words
                .iter()
                .map(|w| Bytes::copy_from_slice(w.as_bytes()))
                .collect()
        };
        let publish = table.lookup(b"publish").unwrap();
        let psubscribe = table.lookup(b"psubscribe").unwrap();
        let unsubscribe = table.lookup(b"unsubscribe").unwrap();
        assert!(rules.channels_allowed(publish, &args(&["publish", "news.x", "m"])));
        assert!(!rules.channels_allowed(publish, &args(&["publish", "other", "m"])));
        assert!(!rules.channels_allowed(psubscribe, &args(&["psubscribe", "news.*", "a*"])));
        assert!(rules.channels_allowed(unsubscribe, &args(&["unsubscribe", "anything"])));
        let acl = Acl::new(None);
        let fresh = acl.set_user("fresh", &[], false).unwrap();
        assert!(!fresh.rules().all_channels);
        let open = acl.set_user("open", &[], true).unwrap();
        assert!(open.rules().all_channels);
        let reset = acl
            .set_user("fresh", &[Bytes::from_static(b"reset")], true)
            .unwrap();
        assert!(reset.rules().all_channels);
    }
}
