//! ACL LOG: the latest refusals of the ACL rules (commands, keys and channels a user may not
//! use) and failed logins, newest first, at most `acllog-max-len` of them. A refusal like one
//! of the ten newest (same reason, context, object and user, within a minute) counts on that
//! entry instead of adding one, as Redis groups them.

use std::collections::VecDeque;

use parking_lot::Mutex;

use crate::acl::Denied;

/// Entries this close in time (ms) are one entry, counted.
const GROUPING_MS: i64 = 60_000;
/// How many of the newest entries a refusal is compared with.
const GROUPING_SCAN: usize = 10;

/// Why an entry was logged (Redis' `reason` field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Denied(Denied),
    Auth,
}

impl Reason {
    fn name(self) -> &'static str {
        match self {
            Reason::Denied(Denied::Command) => "command",
            Reason::Denied(Denied::Key) => "key",
            Reason::Denied(Denied::Channel) => "channel",
            Reason::Auth => "auth",
        }
    }
}

/// Where the refused command came from (Redis' `context` field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    TopLevel,
    Multi,
    Lua,
}

impl Context {
    fn name(self) -> &'static str {
        match self {
            Context::TopLevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// One entry, as ACL LOG shows it.
#[derive(Clone, Debug)]
pub struct Entry {
    pub count: u64,
    pub reason: Reason,
    pub context: Context,
    /// The command's full name, the key, the channel, or for a login the command typed.
    pub object: Vec<u8>,
    pub username: String,
    /// Unix ms of the latest refusal the entry counts.
    pub updated_ms: i64,
    /// CLIENT LIST's line for the latest client refused.
    pub client_info: String,
}

impl Entry {
    /// The fields ACL LOG replies with, in Redis' order, with the age at `now_ms`.
    pub fn fields(&self, now_ms: i64) -> [(&'static str, Field<'_>); 7] {
        [
            ("count", Field::Int(self.count as i64)),
            ("reason", Field::Text(self.reason.name().as_bytes())),
            ("context", Field::Text(self.context.name().as_bytes())),
            ("object", Field::Text(&self.object)),
            ("username", Field::Text(self.username.as_bytes())),
            (
                "age-seconds",
                Field::Double((now_ms - self.updated_ms).max(0) as f64 / 1000.0),
            ),
            ("client-info", Field::Text(self.client_info.as_bytes())),
        ]
    }

    fn same_event(&self, other: &Entry) -> bool {
        self.reason == other.reason
            && self.context == other.context
            && (self.updated_ms - other.updated_ms).abs() <= GROUPING_MS
            && self.object == other.object
            && self.username == other.username
    }
}

/// A field's value in an ACL LOG reply.
pub enum Field<'a> {
    Int(i64),
    Double(f64),
    Text(&'a [u8]),
}

#[derive(Debug, Default)]
pub struct AclLog {
    entries: Mutex<VecDeque<Entry>>,
}

impl AclLog {
    /// Logs a refusal, keeping at most `max_len` entries.
    pub fn add(&self, entry: Entry, max_len: usize) {
        let mut entries = self.entries.lock();
        let found = entries
            .iter()
            .take(GROUPING_SCAN)
            .position(|old| old.same_event(&entry));
        if let Some(at) = found {
            let mut old = entries.remove(at).expect("found above");
            old.count += 1;
            old.updated_ms = entry.updated_ms;
            old.client_info = entry.client_info;
            entries.push_front(old);
            return;
        }
        entries.push_front(entry);
        entries.truncate(max_len);
    }

    /// The newest `count` entries, newest first.
    pub fn newest(&self, count: usize) -> Vec<Entry> {
        self.entries.lock().iter().take(count).cloned().collect()
    }

    /// ACL LOG RESET.
    pub fn clear(&self) {
        self.entries.lock().clear();
    }
}

/// Logs a refusal of `client` (logged in as `username`, or trying to log in as it).
pub fn log(
    server: &crate::server::Server,
    client: &crate::client::Client,
    username: &str,
    reason: Reason,
    context: Context,
    object: Vec<u8>,
) {
    let updated_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let entry = Entry {
        count: 1,
        reason,
        context,
        object,
        username: username.to_string(),
        updated_ms,
        client_info: client.shared.describe(),
    };
    let max_len = server.config.get_i64("acllog-max-len").max(0) as usize;
    server.acl_log.add(entry, max_len);
}

/// Logs the ACL rules' refusal of `command` (the key or channel refused named, as Redis).
pub fn log_denied(
    server: &crate::server::Server,
    client: &crate::client::Client,
    denied: Denied,
    context: Context,
    command: &crate::table::Command,
    args: &[bytes::Bytes],
) {
    let user = &client.user;
    let object = match user.denial(command, args) {
        Some((Denied::Key | Denied::Channel, at)) if denied != Denied::Command => args[at].to_vec(),
        _ => command.full_name.as_bytes().to_vec(),
    };
    log(
        server,
        client,
        &user.name,
        Reason::Denied(denied),
        context,
        object,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(object: &str, at_ms: i64) -> Entry {
        Entry {
            count: 1,
            reason: Reason::Denied(Denied::Command),
            context: Context::TopLevel,
            object: object.as_bytes().to_vec(),
            username: "u".to_string(),
            updated_ms: at_ms,
            client_info: format!("at={at_ms}"),
        }
    }

    #[test]
    fn similar_refusals_within_a_minute_are_counted_on_one_entry() {
        let log = AclLog::default();
        log.add(entry("get", 0), 128);
        log.add(entry("set", 10), 128);
        log.add(entry("get", 20), 128);
        let newest = log.newest(10);
        assert_eq!(newest.len(), 2);
        assert_eq!(newest[0].object, b"get");
        assert_eq!(newest[0].count, 2);
        assert_eq!(newest[0].client_info, "at=20");
        // A minute and more later: a new entry.
        log.add(entry("get", 20 + GROUPING_MS + 1), 128);
        assert_eq!(log.newest(10).len(), 3);
    }

    #[test]
    fn the_log_keeps_its_maximum_length() {
        let log = AclLog::default();
        for i in 0..10 {
            log.add(entry(&format!("k{i}"), i), 5);
        }
        let newest = log.newest(100);
        assert_eq!(newest.len(), 5);
        assert_eq!(newest[0].object, b"k9");
        log.clear();
        assert!(log.newest(10).is_empty());
    }
}
