//! Users from outside: `user` lines in the config file, and the ACL file (`aclfile`) that
//! ACL LOAD reads and ACL SAVE writes, in Redis 7.0's format (`user <name> <rules...>` per
//! line, the rules `ACL LIST` shows). Both load all or nothing.

use std::sync::Arc;

use bytes::Bytes;

use super::{merge_selector_args, Acl, Rules, User};
use crate::acl::selector::ERR_UNKNOWN;

/// A `user` line of the config file, checked when the file is read (Redis'
/// `ACLAppendUserForLoading`): the error is the config error's text. Unknown commands are
/// let through, as Redis does (they are refused when the users are created).
pub fn check_config_user(argv: &[String], earlier: &[Vec<String>]) -> Result<(), String> {
    let declaration =
        |arg: &str, reason: &str| format!("Error in user declaration '{arg}': {reason}");
    if earlier.iter().any(|user| user[0] == argv[1]) {
        return Err(declaration(
            &argv[1],
            "Duplicate user found. A user can only be defined once in config files",
        ));
    }
    let ops: Vec<Bytes> = argv[2..]
        .iter()
        .map(|a| Bytes::copy_from_slice(a.as_bytes()))
        .collect();
    let ops = merge_selector_args(&ops).map_err(|at| declaration(&argv[2 + at], "Syntax error"))?;
    let mut rules = Rules::empty(false);
    for op in &ops {
        match rules.apply(op, false) {
            Ok(()) | Err(ERR_UNKNOWN) => {}
            Err(reason) => return Err(declaration(&String::from_utf8_lossy(op), reason)),
        }
    }
    Ok(())
}

/// Parses an ACL file's text into users, or answers every problem found, as Redis words
/// them (`path:line: ...`), ending with Redis' "no change" warning.
pub fn parse(
    path: &str,
    text: &str,
    all_channels_by_default: bool,
) -> Result<Vec<(String, Rules)>, String> {
    let mut users: Vec<(String, Rules)> = Vec::new();
    let mut errors = String::new();
    for (index, raw) in text.split('\n').enumerate() {
        let number = index + 1;
        let line = raw.trim_matches([' ', '\t', '\r', '\n']);
        if line.is_empty() {
            continue;
        }
        let argv: Vec<&str> = line.split(' ').collect();
        if argv[0] != "user" || argv.len() < 2 {
            errors.push_str(&format!(
                "{path}:{number} should start with user keyword followed by the username. "
            ));
            continue;
        }
        let name = argv[1];
        if name
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b == 0 || b == 0x0b)
        {
            errors.push_str(&format!(
                "'{path}:{number}: username '{name}' contains invalid characters. "
            ));
            continue;
        }
        if users.iter().any(|(existing, _)| existing == name) {
            errors.push_str(&format!(
                "WARNING: Duplicate user '{name}' found on line {number}. "
            ));
            continue;
        }
        let ops: Vec<Bytes> = argv[2..]
            .iter()
            .map(|a| Bytes::copy_from_slice(a.trim_matches(['\t', '\r', '\n']).as_bytes()))
            .collect();
        let Ok(ops) = merge_selector_args(&ops) else {
            errors.push_str(&format!(
                "{path}:{number}: Unmatched parenthesis in selector definition."
            ));
            continue;
        };
        let mut rules = Rules::empty(all_channels_by_default);
        let mut reported = false;
        for op in &ops {
            match rules.apply(op, all_channels_by_default) {
                Ok(()) => {}
                Err(ERR_UNKNOWN) => errors.push_str(&format!(
                    "{path}:{number}: Error in applying operation '{}': {ERR_UNKNOWN}. ",
                    String::from_utf8_lossy(op)
                )),
                Err(reason) if !reported => {
                    errors.push_str(&format!("{path}:{number}: {reason}. "));
                    reported = true;
                }
                Err(_) => {}
            }
        }
        users.push((name.to_string(), rules));
    }
    if errors.is_empty() {
        Ok(users)
    } else {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
        );
        Err(errors)
    }
}

/// Reads the ACL file. An unreadable file is Redis' error.
pub fn read(path: &str, all_channels_by_default: bool) -> Result<Vec<(String, Rules)>, String> {
    let text = std::fs::read(path).map_err(|e| {
        format!(
            "Error loading ACLs, opening file '{path}': {}",
            crate::config::strerror(&e)
        )
    })?;
    parse(
        path,
        &String::from_utf8_lossy(&text),
        all_channels_by_default,
    )
}

/// Every user as the ACL file (and CONFIG REWRITE) writes it, by name.
pub fn user_lines(acl: &Acl) -> Vec<String> {
    acl.users()
        .iter()
        .map(|user| format!("user {} {}", user.name, user.rules().describe()))
        .collect()
}

/// ACL SAVE: writes every user to the file, replacing it at once.
pub fn save(acl: &Acl, path: &str) -> std::io::Result<()> {
    let mut text = String::new();
    for line in user_lines(acl) {
        text.push_str(&line);
        text.push('\n');
    }
    crate::config::overwrite_file(std::path::Path::new(path), text.as_bytes())
}

/// The users at start-up, as Redis' `ACLLoadUsersAtStartup`: the config file's `user`
/// lines, or the ACL file, never both. The error is the log line before the exit.
pub fn load_at_startup(acl: &Acl, config: &crate::config::Config) -> Result<(), String> {
    let path = config.get("aclfile").unwrap_or_default();
    if !path.is_empty() && !config.users().is_empty() {
        return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".to_string());
    }
    let all_channels_by_default = config.get_i64("acl-pubsub-default") == 1;
    acl.load_config_users(config.users(), all_channels_by_default)
        .map_err(|why| format!("{why}\nCritical error while loading ACLs. Exiting."))?;
    if !path.is_empty() {
        let users = read(&path, all_channels_by_default)
            .map_err(|errors| format!("Aborting Redis startup because of ACL errors: {errors}"))?;
        acl.replace_all(users);
    }
    Ok(())
}

impl Acl {
    /// ACL LOAD (and the file at start-up): the file's users replace all others. The
    /// default user keeps its identity (connections logged in as it stay) and takes the
    /// file's rules, or every permission if the file has none for it. Returns the users
    /// that went: their connections are closed, as Redis frees them.
    pub fn replace_all(&self, loaded: Vec<(String, Rules)>) -> Vec<Arc<User>> {
        let default = self.default_user();
        let mut default_rules = Acl::default_rules(None);
        let mut users = std::collections::BTreeMap::new();
        for (name, rules) in loaded {
            if name == "default" {
                default_rules = rules;
            } else {
                users.insert(name.clone(), Arc::new(User::new(&name, rules)));
            }
        }
        default.set_rules(default_rules);
        users.insert("default".to_string(), default);
        let old = std::mem::replace(&mut *self.users.write(), users);
        old.into_values()
            .filter(|user| user.name != "default")
            .inspect(|user| {
                user.deleted
                    .store(true, std::sync::atomic::Ordering::Relaxed)
            })
            .collect()
    }

    /// The config file's `user` lines, at start-up: the default user is reset before its
    /// rules apply. The error is Redis' log line for a rule that cannot apply.
    pub fn load_config_users(
        &self,
        users: &[Vec<String>],
        all_channels_by_default: bool,
    ) -> Result<(), String> {
        for argv in users {
            let name = &argv[0];
            let existing = self.get(name);
            let mut rules = match &existing {
                Some(user) => {
                    let mut rules = user.rules();
                    let _ = rules.apply(b"reset", all_channels_by_default);
                    rules
                }
                None => Rules::empty(all_channels_by_default),
            };
            let ops: Vec<Bytes> = argv[1..]
                .iter()
                .map(|a| Bytes::copy_from_slice(a.as_bytes()))
                .collect();
            let ops = merge_selector_args(&ops).map_err(|at| {
                format!(
                    "Unmatched parenthesis in acl selector starting at '{}'.",
                    argv[1 + at]
                )
            })?;
            for op in &ops {
                rules.apply(op, all_channels_by_default).map_err(|reason| {
                    format!(
                        "Error loading ACL rule '{}' for the user named '{name}': {reason}",
                        String::from_utf8_lossy(op)
                    )
                })?;
            }
            if !rules.enabled {
                tracing::warn!("The user '{name}' is disabled (there is no 'on' modifier in the user description). Make sure this is not a configuration error.");
            }
            match existing {
                Some(user) => user.set_rules(rules),
                None => {
                    self.users
                        .write()
                        .insert(name.clone(), Arc::new(User::new(name, rules)));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_acl_file_loads_users_with_selectors() {
        let text = "user alice on (+get ~rw*)\nuser bob on (+set %W~w*) (+get %R~r*)\n\n";
        let users = parse("users.acl", text, false).unwrap();
        assert_eq!(users.len(), 2);
        assert_eq!(users[1].1.selectors.len(), 2);
        assert_eq!(users[1].1.selectors[0].describe_keys(), "%W~w*");
        let acl = Acl::new(None);
        acl.set_user("carol", &[Bytes::from_static(b"on")], false)
            .unwrap();
        let gone = acl.replace_all(users);
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].name, "carol");
        assert_eq!(acl.names(), ["alice", "bob", "default"]);
        // No default line: the default user gets every permission.
        assert!(acl.default_user().is_unrestricted());
    }

    #[test]
    fn a_bad_acl_file_names_every_problem() {
        let text = "# comment\nuser alice on\nuser alice off\nuser bob +nosuch ~a ~b allkeys ~c\nuser eve (+get\n";
        let errors = parse("u.acl", text, false).unwrap_err();
        assert_eq!(
            errors,
            "u.acl:1 should start with user keyword followed by the username. \
             WARNING: Duplicate user 'alice' found on line 3. \
             u.acl:4: Error in applying operation '+nosuch': Unknown command or category name in ACL. \
             u.acl:4: Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns. \
             u.acl:5: Unmatched parenthesis in selector definition.\
             WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
        );
    }

    #[test]
    fn config_users_are_checked_when_read() {
        let line = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        assert!(check_config_user(&line(&["user", "a", "on", "+nosuch"]), &[]).is_ok());
        assert_eq!(
            check_config_user(&line(&["user", "a", "on"]), &[line(&["a"])]).unwrap_err(),
            "Error in user declaration 'a': Duplicate user found. A user can only be defined once in config files"
        );
        assert!(check_config_user(&line(&["user", "a", "bogus"]), &[])
            .unwrap_err()
            .contains("Syntax error"));
        let acl = Acl::new(Some(b"secret"));
        acl.load_config_users(&[line(&["default", "on", "nopass", "~*", "+@all"])], false)
            .unwrap();
        let default = acl.default_user().rules();
        assert!(default.nopass);
        assert!(!default.all_channels());
    }
}
