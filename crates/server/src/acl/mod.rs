//! Users and what they may do: Redis 7.0's ACL rules (`on`, `>password`, `+@category`,
//! `-command`, `~pattern`, `%R~pattern`, `&channel`, `(...)` selectors, `reset`...), the
//! checks the gatekeeper runs before a command, the texts `ACL GETUSER`/`ACL LIST` show,
//! and the ACL file (`file`).
//!
//! A connection holds an `Arc<User>`: the name never changes, the rules sit behind a lock
//! that `ACL SETUSER` takes for writing, so a change reaches connections already logged in
//! (as in Redis). Most connections run as `default` with every permission: for them the
//! check is one relaxed load of `unrestricted`.

pub mod file;
pub mod selector;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::RwLock;
use sha2::{Digest, Sha256};

pub use selector::{category_bits, KeyPattern, Selector, ERR_SYNTAX};
#[cfg(test)]
use selector::{ERR_FIRST_ARG_OF_SUBCOMMAND, ERR_UNKNOWN};

use crate::table::Command;

/// One user's rules: its flags and passwords, the root selector, and the selectors added
/// with `(...)`.
#[derive(Clone, Debug)]
pub struct Rules {
    pub enabled: bool,
    pub nopass: bool,
    /// `sanitize-payload` (true) or `skip-sanitize-payload` (false), if either was given.
    pub sanitize_payload: Option<bool>,
    /// SHA-256 of each password, as Redis keeps them.
    pub passwords: Vec<[u8; 32]>,
    pub root: Selector,
    pub selectors: Vec<Selector>,
}

impl Rules {
    /// A new user's rules: off, no password, no commands, no keys, channels as
    /// `acl-pubsub-default` says.
    fn empty(all_channels: bool) -> Rules {
        Rules {
            enabled: false,
            nopass: false,
            sanitize_payload: None,
            passwords: Vec::new(),
            root: Selector::empty(all_channels),
            selectors: Vec::new(),
        }
    }

    fn unrestricted(&self) -> bool {
        self.enabled && self.all_selectors().any(Selector::unrestricted)
    }

    /// The root selector, then the added ones.
    pub fn all_selectors(&self) -> impl Iterator<Item = &Selector> {
        std::iter::once(&self.root).chain(&self.selectors)
    }

    /// Whether some selector allows every channel.
    pub fn all_channels(&self) -> bool {
        self.all_selectors().any(|s| s.all_channels)
    }

    /// Whether some selector allows `channel` (a pattern must be one of the rules).
    pub fn channel_allowed(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.all_selectors()
            .any(|s| s.channel_allowed(channel, is_pattern))
    }

    /// Redis' `ACLCheckAllUserCommandPerm`: allowed when one selector allows the whole
    /// command. Otherwise the denial is the most telling one: a channel over a key over
    /// the command, and among equals the one furthest into the arguments.
    pub fn check(&self, command: &Command, args: &[Bytes]) -> Result<(), (Denied, usize)> {
        let mut keys = None;
        let mut worst: Option<(Denied, usize)> = None;
        for selector in self.all_selectors() {
            match selector.check(command, args, &mut keys) {
                Ok(()) => return Ok(()),
                Err(denial) => {
                    if worst.is_none_or(|w| (denial.0.rank(), denial.1) > (w.0.rank(), w.1)) {
                        worst = Some(denial);
                    }
                }
            }
        }
        Err(worst.unwrap_or((Denied::Command, 0)))
    }

    /// The whole user as one `ACL LIST` line (after `user <name> `).
    pub fn describe(&self) -> String {
        let mut parts = self.flags();
        for hash in &self.passwords {
            parts.push(format!("#{}", hex(hash)));
        }
        parts.push(self.root.describe());
        for selector in &self.selectors {
            parts.push(format!("({})", selector.describe()));
        }
        parts.join(" ")
    }

    /// The flags `ACL GETUSER` lists, in Redis' order.
    pub fn flags(&self) -> Vec<String> {
        let mut flags = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            flags.push("nopass");
        }
        match self.sanitize_payload {
            Some(false) => flags.push("skip-sanitize-payload"),
            Some(true) => flags.push("sanitize-payload"),
            None => {}
        }
        flags.into_iter().map(String::from).collect()
    }

    /// Applies one rule (`ACL SETUSER` applies them left to right). The error is the
    /// reason Redis gives after "Error in ACL SETUSER modifier '...': ".
    /// `all_channels_by_default` is `acl-pubsub-default allchannels`: new selectors, and a
    /// user after `reset`, may then use every channel.
    pub fn apply(&mut self, op: &[u8], all_channels_by_default: bool) -> Result<(), &'static str> {
        let lower = op.to_ascii_lowercase();
        match &lower[..] {
            b"" => {}
            b"on" => self.enabled = true,
            b"off" => self.enabled = false,
            b"skip-sanitize-payload" => self.sanitize_payload = Some(false),
            b"sanitize-payload" => self.sanitize_payload = Some(true),
            b"nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            b"resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            b"clearselectors" => self.selectors.clear(),
            b"reset" => {
                self.nopass = false;
                self.passwords.clear();
                for rule in [&b"resetkeys"[..], b"resetchannels", b"-@all"] {
                    self.root.apply(rule)?;
                }
                if all_channels_by_default {
                    self.root.apply(b"allchannels")?;
                }
                self.enabled = false;
                self.sanitize_payload = Some(true);
                self.selectors.clear();
            }
            _ => return self.apply_prefixed(op, all_channels_by_default),
        }
        Ok(())
    }

    fn apply_prefixed(
        &mut self,
        op: &[u8],
        all_channels_by_default: bool,
    ) -> Result<(), &'static str> {
        match op[0] {
            b'>' | b'#' => {
                let hash = if op[0] == b'>' {
                    Sha256::digest(&op[1..]).into()
                } else {
                    parse_hash(&op[1..]).ok_or(ERR_BAD_HASH)?
                };
                if !self.passwords.contains(&hash) {
                    self.passwords.push(hash);
                }
                self.nopass = false;
            }
            b'<' | b'!' => {
                let hash = if op[0] == b'<' {
                    Sha256::digest(&op[1..]).into()
                } else {
                    parse_hash(&op[1..]).ok_or(ERR_BAD_HASH)?
                };
                let before = self.passwords.len();
                self.passwords.retain(|p| *p != hash);
                if self.passwords.len() == before {
                    return Err(ERR_NO_PASSWORD);
                }
            }
            b'(' if op.len() > 1 && op[op.len() - 1] == b')' => {
                let mut selector = Selector::empty(all_channels_by_default);
                let inner = &op[1..op.len() - 1];
                for rule in inner
                    .split(|b| b.is_ascii_whitespace())
                    .filter(|rule| !rule.is_empty())
                {
                    selector.apply(rule)?;
                }
                self.selectors.push(selector);
            }
            _ => self.root.apply(op)?,
        }
        Ok(())
    }
}

/// Joins a selector written across several arguments (`(~key +get` `)`) into one, as
/// Redis does before applying rules. The error names where an unclosed one starts.
pub fn merge_selector_args(args: &[Bytes]) -> Result<Vec<Bytes>, usize> {
    let mut merged = Vec::with_capacity(args.len());
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (at, arg) in args.iter().enumerate() {
        if let Some((_, selector)) = &mut open {
            selector.push(b' ');
            selector.extend_from_slice(arg);
            if arg.last() == Some(&b')') {
                merged.push(Bytes::from(std::mem::take(selector)));
                open = None;
            }
            continue;
        }
        if arg.first() == Some(&b'(') && arg.last() != Some(&b')') {
            open = Some((at, arg.to_vec()));
            continue;
        }
        merged.push(arg.clone());
    }
    match open {
        Some((at, _)) => Err(at),
        None => Ok(merged),
    }
}

const ERR_BAD_HASH: &str =
    "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters";
const ERR_NO_PASSWORD: &str = "The password you are trying to remove from the user does not exist";

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

    /// What the gatekeeper checks: `None` when allowed, else the denial.
    pub fn check(&self, command: &Command, args: &[Bytes]) -> Option<Denied> {
        self.denial(command, args).map(|(denied, _)| denied)
    }

    /// The denial with the position of the refused argument (0 for the command itself):
    /// what ACL LOG and ACL DRYRUN name.
    pub fn denial(&self, command: &Command, args: &[Bytes]) -> Option<(Denied, usize)> {
        if self.is_unrestricted() {
            return None;
        }
        self.rules.read().check(command, args).err()
    }

    /// Redis' `ACLUserCheckCmdWithUnrestrictedKeyAccess`: whether a selector that allows
    /// this command also reaches every key for reading (SORT's BY and GET need it).
    pub fn reads_any_key(&self, command: &Command, args: &[Bytes]) -> bool {
        if self.is_unrestricted() {
            return true;
        }
        let rules = self.rules.read();
        let mut keys = None;
        let found = rules.all_selectors().any(|selector| {
            selector.check(command, args, &mut keys).is_ok()
                && selector.unrestricted_key_access(true, false)
        });
        found
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
    /// Which denial to report when no selector allows a command (Redis' ACL_DENIED_*
    /// order: a channel over a key over the command).
    fn rank(self) -> u8 {
        match self {
            Denied::Command => 1,
            Denied::Key => 2,
            Denied::Channel => 4,
        }
    }

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
        let mut users = BTreeMap::new();
        users.insert(
            "default".to_string(),
            Arc::new(User::new("default", Acl::default_rules(requirepass))),
        );
        Acl {
            users: RwLock::new(users),
        }
    }

    /// The default user's rules before any configuration: every permission, `nopass`
    /// unless `requirepass` gives a password.
    fn default_rules(requirepass: Option<&[u8]>) -> Rules {
        let mut rules = Rules::empty(true);
        for rule in [&b"on"[..], b"allkeys", b"allchannels", b"+@all"] {
            let _ = rules.apply(rule, true);
        }
        match requirepass {
            Some(password) => {
                let mut op = b">".to_vec();
                op.extend_from_slice(password);
                let _ = rules.apply(&op, true);
            }
            None => rules.nopass = true,
        }
        rules
    }

    /// A user with every permission that is in no list: the primary's link on a replica
    /// (Redis' primary client has no user and passes every check).
    pub fn internal_user() -> Arc<User> {
        let mut rules = Rules::empty(true);
        for rule in [&b"on"[..], b"nopass", b"allkeys", b"allchannels", b"+@all"] {
            let _ = rules.apply(rule, true);
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
            None => Rules::empty(all_channels_by_default),
        };
        let ops = merge_selector_args(ops).map_err(|at| {
            format!(
                "ERR Unmatched parenthesis in acl selector starting at '{}'.",
                String::from_utf8_lossy(&ops[at])
            )
        })?;
        for op in &ops {
            rules.apply(op, all_channels_by_default).map_err(|reason| {
                format!(
                    "ERR Error in ACL SETUSER modifier '{}': {reason}",
                    String::from_utf8_lossy(op)
                )
            })?;
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
    use crate::table::table;

    fn user(ops: &[&str]) -> Rules {
        let mut rules = Rules::empty(false);
        for op in ops {
            rules.apply(op.as_bytes(), false).unwrap();
        }
        rules
    }

    fn args(words: &[&str]) -> Vec<Bytes> {
        words
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    fn allowed(rules: &Rules, words: &[&str]) -> Result<(), (Denied, usize)> {
        let args = args(words);
        let command = table().lookup(args[0].as_ref()).unwrap();
        rules.check(command, &args)
    }

    #[test]
    fn rules_grant_commands_categories_and_keys() {
        let rules = user(&["on", ">123", "+@scripting", "+set", "~x*"]);
        assert!(allowed(&rules, &["eval", "return 1", "0"]).is_ok());
        assert_eq!(
            allowed(&rules, &["hset", "x", "f", "v"]),
            Err((Denied::Command, 0))
        );
        assert!(allowed(&rules, &["set", "xx", "1"]).is_ok());
        assert_eq!(allowed(&rules, &["set", "yy", "1"]), Err((Denied::Key, 1)));
        assert_eq!(rules.root.describe_commands(), "-@all +@scripting +set");
        assert_eq!(rules.root.describe_keys(), "~x*");
    }

    #[test]
    fn read_and_write_patterns_follow_the_key_specs() {
        let rules = user(&["on", "nopass", "+@all", "%R~r*", "%W~w*"]);
        assert!(allowed(&rules, &["get", "r1"]).is_ok());
        assert!(allowed(&rules, &["get", "w1"]).is_err());
        assert!(allowed(&rules, &["set", "w1", "v"]).is_ok());
        assert!(allowed(&rules, &["set", "r1", "v"]).is_err());
        // SET reads only with GET; BITFIELD writes only with SET or INCRBY.
        assert!(allowed(&rules, &["set", "w1", "v", "get"]).is_err());
        assert!(allowed(&rules, &["bitfield", "r1", "get", "u4", "0"]).is_ok());
        assert!(allowed(&rules, &["bitfield", "r1", "incrby", "u4", "0", "1"]).is_err());
        assert!(allowed(&rules, &["bitfield", "w1", "get", "u4", "0"]).is_err());
        // Keys that cannot be found (numkeys past the end) are the command's error.
        assert!(allowed(&rules, &["eval", "", "3", "r1", "x"]).is_ok());
    }

    #[test]
    fn selectors_allow_a_command_when_one_of_them_allows_all_of_it() {
        let mut rules = user(&["on", "nopass", "-@all", "resetkeys"]);
        rules.apply(b"(+@write ~write::*)", false).unwrap();
        rules.apply(b"(+@read ~read::*)", false).unwrap();
        assert!(allowed(&rules, &["set", "write::a", "1"]).is_ok());
        assert!(allowed(&rules, &["get", "read::a"]).is_ok());
        assert_eq!(allowed(&rules, &["ping"]), Err((Denied::Command, 0)));
        assert_eq!(allowed(&rules, &["get", "write::a"]), Err((Denied::Key, 1)));
        // Read in one selector and write in another do not add up.
        let rules = user(&["on", "nopass", "(%R~read* +@all)", "(%W~write* +@all)"]);
        assert_eq!(
            allowed(&rules, &["copy", "read", "write"]).map_err(|d| d.0),
            Err(Denied::Key)
        );
        // The denial reported is the key furthest into the arguments any selector refused.
        let rules = user(&["on", "nopass", "+mget", "~key", "(+mget ~key ~otherkey)"]);
        assert_eq!(
            allowed(&rules, &["mget", "otherkey", "someother"]),
            Err((Denied::Key, 2))
        );
        assert_eq!(allowed(&rules, &["get", "key"]), Err((Denied::Command, 0)));
        assert_eq!(
            rules.describe(),
            "on nopass ~key resetchannels -@all +mget (~key ~otherkey resetchannels -@all +mget)"
        );
        let mut cleared = rules.clone();
        cleared.apply(b"clearselectors", false).unwrap();
        assert!(cleared.selectors.is_empty());
    }

    #[test]
    fn selectors_spread_over_arguments_are_joined() {
        let split = args(&["(~key5", "+get", ")", "(", "~key6", "+get", ")", "on"]);
        let merged = merge_selector_args(&split).unwrap();
        assert_eq!(merged, args(&["(~key5 +get )", "( ~key6 +get )", "on"]));
        assert_eq!(merge_selector_args(&args(&["on", "(", "+get"])), Err(1));
        let acl = Acl::new(None);
        let error = acl
            .set_user("u", &args(&["on", "(this-is-invalid)"]), false)
            .unwrap_err();
        assert_eq!(
            error,
            "ERR Error in ACL SETUSER modifier '(this-is-invalid)': Syntax error"
        );
        assert!(acl.get("u").is_none());
        let error = acl.set_user("u", &args(&["("]), false).unwrap_err();
        assert_eq!(
            error,
            "ERR Unmatched parenthesis in acl selector starting at '('."
        );
        let user = acl.set_user("u", &args(&["reset", "()"]), false).unwrap();
        assert_eq!(user.rules().selectors[0].describe(), "resetchannels -@all");
        assert_eq!(user.rules().flags(), ["off", "sanitize-payload"]);
    }

    #[test]
    fn first_arguments_allow_a_denied_command_with_that_argument() {
        let mut rules = user(&["on", "nopass", "-@all", "+select|0", "+select|2"]);
        assert!(allowed(&rules, &["select", "0"]).is_ok());
        assert!(allowed(&rules, &["select", "2"]).is_ok());
        assert!(allowed(&rules, &["select", "1"]).is_err());
        assert_eq!(rules.root.describe_commands(), "-@all +select|0 +select|2");
        // Allowing or denying the command drops its first arguments, as in Redis.
        rules.apply(b"-select", false).unwrap();
        assert!(allowed(&rules, &["select", "0"]).is_err());
        assert_eq!(rules.root.describe_commands(), "-@all -select");
        assert_eq!(
            rules.apply(b"+config|get|appendonly", false),
            Err(ERR_FIRST_ARG_OF_SUBCOMMAND)
        );
        assert_eq!(rules.apply(b"-select|0", false), Err(ERR_UNKNOWN));
        assert_eq!(rules.apply(b"+select|", false), Err(ERR_SYNTAX));
        assert_eq!(rules.apply(b"+config|nosuchsub", false), Err(ERR_UNKNOWN));
        // ACL LIST: channels after resetchannels, no key part when there are no patterns.
        let listed = user(&["on", "nopass", "resetchannels", "&foo", "+@all"]);
        assert_eq!(listed.describe(), "on nopass resetchannels &foo +@all");
    }

    #[test]
    fn errors_and_passwords() {
        let mut rules = Rules::empty(false);
        assert_eq!(rules.apply(b"bogus", false), Err(ERR_SYNTAX));
        assert_eq!(rules.apply(b"+nosuchcommand", false), Err(ERR_UNKNOWN));
        assert_eq!(rules.apply(b"+@nosuchcategory", false), Err(ERR_UNKNOWN));
        assert_eq!(rules.apply(b"#abc", false), Err(ERR_BAD_HASH));
        assert_eq!(rules.apply(b"<nope", false), Err(ERR_NO_PASSWORD));
        assert_eq!(rules.apply(b"~a b", false), Err(ERR_SYNTAX));
        rules.apply(b"allkeys", false).unwrap();
        assert!(rules
            .apply(b"~foo", false)
            .unwrap_err()
            .contains("'allkeys'"));
        rules.apply(b"~*", false).unwrap();
        rules.apply(b"allchannels", false).unwrap();
        assert!(rules
            .apply(b"&foo", false)
            .unwrap_err()
            .contains("'allchannels'"));
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
        assert!(allowed(&rules, &["publish", "news.x", "m"]).is_ok());
        assert_eq!(
            allowed(&rules, &["publish", "other", "m"]),
            Err((Denied::Channel, 1))
        );
        assert_eq!(
            allowed(&rules, &["psubscribe", "news.*", "a*"]),
            Err((Denied::Channel, 2))
        );
        assert!(allowed(&rules, &["unsubscribe", "anything"]).is_ok());
        let acl = Acl::new(None);
        let fresh = acl.set_user("fresh", &[], false).unwrap();
        assert!(!fresh.rules().all_channels());
        let open = acl.set_user("open", &[], true).unwrap();
        assert!(open.rules().all_channels());
        let reset = acl
            .set_user("fresh", &[Bytes::from_static(b"reset")], true)
            .unwrap();
        assert!(reset.rules().all_channels());
    }
}
