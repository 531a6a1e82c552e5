//! Keyspace notifications (`notify-keyspace-events`): what commands, expiry and lookups
//! publish about the keys they touch.
//!
//! An event has a class (the bits below, with the values Redis gives its `NOTIFY_*`
//! flags), a name (`set`, `lpush`, `expired`...) and a key in a database. When the
//! configuration enables its class and at least one of `K` and `E`, it is published to
//! `__keyspace@<db>__:<key>` (the message is the event's name) and/or
//! `__keyevent@<db>__:<event>` (the message is the key), through [`Hub::publish`], so
//! subscribers and pattern subscribers get it like any message.
//!
//! Handlers report their changes with [`Ctx::notify`](crate::commands::Ctx::notify) right
//! where they signal the change. Events that happen inside the keyspace's lookups and
//! insertions (a key found expired, a read that missed, a key created) are recorded by the
//! view ([`Locked::take_key_events`]) and published, in order, before the next event the handler
//! reports and at the end of the command ([`flush`]). The active expiry publishes
//! `expired` for what it removes ([`expired`]). Everything is published while the command
//! (or the sweep) still holds its shard locks, so subscribers see the events of one key in
//! the order the changes took effect, and before the command's reply goes out.
//!
//! With notifications off (the default), a handler's report costs one relaxed load of
//! [`Hub::notify_flags`], and so does each command's set-up.

use std::sync::atomic::Ordering;

use latch_keyspace::{record, KeyEvent, Locked};

use super::{Hub, Kind};
use crate::server::Server;
use crate::spec::{flag, CommandSpec};

/// `K`: publish to `__keyspace@<db>__:<key>`.
pub const KEYSPACE: u32 = 1 << 0;
/// `E`: publish to `__keyevent@<db>__:<event>`.
pub const KEYEVENT: u32 = 1 << 1;
/// `g`: commands not specific to a type (DEL, EXPIRE, RENAME...).
pub const GENERIC: u32 = 1 << 2;
/// `$`: string commands.
pub const STRING: u32 = 1 << 3;
/// `l`: list commands.
pub const LIST: u32 = 1 << 4;
/// `s`: set commands.
pub const SET: u32 = 1 << 5;
/// `h`: hash commands.
pub const HASH: u32 = 1 << 6;
/// `z`: sorted set commands.
pub const ZSET: u32 = 1 << 7;
/// `x`: a key removed because its deadline passed.
pub const EXPIRED: u32 = 1 << 8;
/// `e`: a key evicted for `maxmemory`.
pub const EVICTED: u32 = 1 << 9;
/// `t`: stream commands.
pub const STREAM: u32 = 1 << 10;
/// `m`: a read that found no key (not part of `A`).
pub const KEY_MISS: u32 = 1 << 11;
/// `d`: module events (Latch has no modules; accepted and shown).
pub const MODULE: u32 = 1 << 13;
/// `n`: a key created (not part of `A`).
pub const NEW: u32 = 1 << 14;

impl Hub {
    /// Takes the configured `notify-keyspace-events` flags. What is kept is zero unless `K`
    /// or `E` is on: then a class test alone tells whether anything is published.
    pub fn set_notify_flags(&self, configured: i64) {
        let configured = configured as u32;
        let kept = if configured & (KEYSPACE | KEYEVENT) == 0 {
            0
        } else {
            configured
        };
        self.notify_flags.store(kept, Ordering::Relaxed);
    }

    /// The classes that are published (zero when nothing is).
    #[inline]
    pub fn notify_flags(&self) -> u32 {
        self.notify_flags.load(Ordering::Relaxed)
    }
}

/// Sets what a command's view records for notifications ([`Locked::record`]): expiries
/// and new keys when those classes are on, and misses for commands whose lookups are reads
/// (Redis sends `keymiss` from its read lookups only). With notifications off the view is
/// left as it is (what it records then is dropped unpublished): one load and one branch.
#[inline]
pub fn set_record(server: &Server, spec: &CommandSpec, keys: &mut Locked<'_>) {
    let flags = server.pubsub.notify_flags();
    if flags != 0 {
        keys.record = record_bits(flags, spec.has_flag(flag::READONLY));
    }
}

/// The [`record`] bits for `flags`, given whether lookups are read lookups.
#[cold]
pub fn record_bits(flags: u32, reads: bool) -> u8 {
    let mut bits = 0;
    if flags & EXPIRED != 0 {
        bits |= record::EXPIRED;
    }
    if flags & NEW != 0 {
        bits |= record::NEW;
    }
    if reads && flags & KEY_MISS != 0 {
        bits |= record::MISS;
    }
    bits
}

/// Publishes what the view recorded since the last call (expiries, misses, new keys), in
/// order, and forgets it.
#[cold]
pub fn flush(server: &Server, keys: &mut Locked<'_>) {
    if !keys.has_key_events() {
        return;
    }
    let flags = server.pubsub.notify_flags();
    for (event, db, key) in keys.take_key_events() {
        let (class, name) = match event {
            KeyEvent::Expired => (EXPIRED, "expired"),
            KeyEvent::Miss => (KEY_MISS, "keymiss"),
            KeyEvent::New => (NEW, "new"),
        };
        if flags & class != 0 {
            publish(server, flags, name, &key, db);
        }
    }
}

/// The active expiry removed these keys: `expired` for each, in order.
pub fn expired(server: &Server, removed: &[(usize, Box<[u8]>)]) {
    let flags = server.pubsub.notify_flags();
    if flags & EXPIRED == 0 {
        return;
    }
    for (db, key) in removed {
        publish(server, flags, "expired", key, *db);
    }
}

/// Publishes `event` about `key` of database `db` to the channels `flags` enable (the
/// caller checked its class).
#[cold]
pub fn publish(server: &Server, flags: u32, event: &str, key: &[u8], db: usize) {
    let mut digits = itoa::Buffer::new();
    let db = digits.format(db).as_bytes();
    if flags & KEYSPACE != 0 {
        let channel = channel(b"__keyspace@", db, key);
        server
            .pubsub
            .publish(server, Kind::Channel, &channel, event.as_bytes());
    }
    if flags & KEYEVENT != 0 {
        let channel = channel(b"__keyevent@", db, event.as_bytes());
        server.pubsub.publish(server, Kind::Channel, &channel, key);
    }
}

fn channel(prefix: &[u8], db: &[u8], tail: &[u8]) -> Vec<u8> {
    let mut channel = Vec::with_capacity(prefix.len() + db.len() + 3 + tail.len());
    channel.extend_from_slice(prefix);
    channel.extend_from_slice(db);
    channel.extend_from_slice(b"__:");
    channel.extend_from_slice(tail);
    channel
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_published_without_k_or_e() {
        let hub = Hub::new();
        hub.set_notify_flags(i64::from(GENERIC | STRING));
        assert_eq!(hub.notify_flags(), 0);
        hub.set_notify_flags(i64::from(KEYEVENT | STRING));
        assert_eq!(hub.notify_flags() & STRING, STRING);
        assert_eq!(hub.notify_flags() & GENERIC, 0);
        hub.set_notify_flags(0);
        assert_eq!(hub.notify_flags(), 0);
    }

    #[test]
    fn misses_are_recorded_for_reads_only() {
        let flags = KEYSPACE | KEY_MISS | EXPIRED | NEW;
        assert_eq!(
            record_bits(flags, true),
            record::MISS | record::EXPIRED | record::NEW
        );
        assert_eq!(record_bits(flags, false), record::EXPIRED | record::NEW);
        assert_eq!(record_bits(KEYSPACE | GENERIC, true), 0);
    }
}
