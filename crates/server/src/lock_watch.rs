//! `LOCK.ACQUIRE ... NOTIFY`: the holder is told, as a RESP3 push, when its lock runs out
//! or is taken from it: `>3 "lock" <name> "expired"` at the deadline of a lease it did not
//! renew, `>3 "lock" <name> "lost"` when it finds the key gone or holding another token
//! before then (a client that does not follow the protocol deleted or overwrote it).
//!
//! Each such grant has a watch: a task that sleeps until the lock's deadline, or until the
//! key changes (the watch observes it, as blocked clients are woken, without a place in
//! their line), then looks at the key without changing it (passed keys
//! are seen as they are, so looking never expires one: the lazy expiry of a real lookup
//! and its `DEL` stay the commands' business). A release by the holder ends the watch
//! quietly; so does the holder's connection closing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::client::ClientShared;
use crate::server::Server;

/// A lock: its database and name.
type LockName = (usize, Box<[u8]>);

#[derive(Default)]
pub struct LockWatches {
    watches: Mutex<HashMap<LockName, Arc<Watch>>>,
}

#[derive(Debug)]
struct Watch {
    token: Vec<u8>,
    /// The holder extended or released the lock: look again.
    changed: Notify,
    /// Released by its holder (or replaced by a newer watch): end without a word.
    ended: AtomicBool,
}

/// A watch observes its key (`Locked::observe`): any change wakes it to look again.
impl latch_keyspace::KeyWaiter for Watch {
    fn wake(&self) -> u64 {
        self.changed.notify_one();
        0
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// What the key holds, seen without expiring it.
enum Seen {
    /// Our token, with milliseconds left (negative once passed; None: no TTL).
    Ours(Option<i64>),
    /// Gone, or another token or type.
    NotOurs,
}

impl LockWatches {
    /// Starts watching the grant of `name` to `token` for `holder`. Returns the watch, for
    /// the caller to register as an observer of the key (it holds the key's shard).
    pub fn start(
        &self,
        server: &Arc<Server>,
        holder: Arc<ClientShared>,
        db: usize,
        name: &[u8],
        token: &[u8],
    ) -> Arc<dyn latch_keyspace::KeyWaiter> {
        let watch = Arc::new(Watch {
            token: token.to_vec(),
            changed: Notify::new(),
            ended: AtomicBool::new(false),
        });
        let key = (db, Box::<[u8]>::from(name));
        if let Some(before) = self.watches.lock().insert(key, Arc::clone(&watch)) {
            before.ended.store(true, Ordering::SeqCst);
            before.changed.notify_one();
        }
        let server = Arc::downgrade(server);
        let name = name.to_vec();
        let observer: Arc<dyn latch_keyspace::KeyWaiter> = watch.clone();
        tokio::spawn(async move { run(server, holder, db, name, watch).await });
        observer
    }

    /// The holder extended its lock (or asked for it again): the deadline moved.
    pub fn extended(&self, db: usize, name: &[u8], token: &[u8]) {
        if let Some(watch) = self.get(db, name, token) {
            watch.changed.notify_one();
        }
    }

    /// The holder released its lock: its watch ends without a push.
    pub fn released(&self, db: usize, name: &[u8], token: &[u8]) {
        let key = (db, Box::<[u8]>::from(name));
        let mut watches = self.watches.lock();
        if watches.get(&key).is_some_and(|watch| watch.token == token) {
            if let Some(watch) = watches.remove(&key) {
                watch.ended.store(true, Ordering::SeqCst);
                watch.changed.notify_one();
            }
        }
    }

    fn get(&self, db: usize, name: &[u8], token: &[u8]) -> Option<Arc<Watch>> {
        let key = (db, Box::<[u8]>::from(name));
        self.watches
            .lock()
            .get(&key)
            .filter(|watch| watch.token == token)
            .cloned()
    }

    fn finish(&self, db: usize, name: &[u8], watch: &Arc<Watch>) {
        let key = (db, Box::<[u8]>::from(name));
        let mut watches = self.watches.lock();
        if watches
            .get(&key)
            .is_some_and(|current| Arc::ptr_eq(current, watch))
        {
            watches.remove(&key);
        }
    }

    /// Watches running now (for tests and INFO).
    pub fn len(&self) -> usize {
        self.watches.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn look(server: &Server, db: usize, name: &[u8], token: &[u8]) -> Seen {
    let mut keys = server.keyspace.lock_keys(&[name]);
    // The real clock for the deadline; lookups that see passed keys as they are.
    let now = keys.now();
    keys.see_passed_keys();
    match keys.get_slot_untouched(db, name) {
        Some(slot) => match slot.value() {
            latch_keyspace::Value::Str(value) if value[..] == *token => {
                Seen::Ours(slot.deadline().map(|deadline| deadline.remaining_ms(now)))
            }
            // A shared lock or semaphore: our lease's own deadline.
            latch_keyspace::Value::ZSet(set) => match set.score(token) {
                Some(until) => Seen::Ours(Some(until as i64 - now.wall_ms)),
                None => Seen::NotOurs,
            },
            _ => Seen::NotOurs,
        },
        None => Seen::NotOurs,
    }
}

async fn run(
    server: std::sync::Weak<Server>,
    holder: Arc<ClientShared>,
    db: usize,
    name: Vec<u8>,
    watch: Arc<Watch>,
) {
    // When the lease last seen runs out (None: no TTL seen yet).
    let mut runs_out: Option<tokio::time::Instant> = None;
    let reason: &[u8] = loop {
        let Some(server) = server.upgrade() else {
            return;
        };
        if watch.ended.load(Ordering::SeqCst) || server.clients.get(holder.id).is_none() {
            server.lock_watches.finish(db, &name, &watch);
            return;
        }
        let changed = watch.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        match look(&server, db, &name, &watch.token) {
            Seen::Ours(Some(left)) if left >= 0 => {
                // Passed once its deadline is behind: a millisecond after it.
                let at = tokio::time::Instant::now() + Duration::from_millis(left as u64 + 1);
                runs_out = Some(at);
                drop(server);
                tokio::select! {
                    _ = tokio::time::sleep_until(at) => {}
                    _ = &mut changed => {}
                }
            }
            Seen::Ours(Some(_)) => break b"expired",
            Seen::Ours(None) => {
                runs_out = None;
                drop(server);
                // No TTL (someone PERSISTed it): only a change can end it. Look again now
                // and then, so a closed connection's watch ends too.
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = &mut changed => {}
                }
            }
            Seen::NotOurs => {
                let expired = runs_out.is_some_and(|at| tokio::time::Instant::now() >= at);
                break if expired { b"expired" } else { b"lost" };
            }
        }
    };
    let Some(server) = server.upgrade() else {
        return;
    };
    server.lock_watches.finish(db, &name, &watch);
    if watch.ended.load(Ordering::SeqCst) {
        return;
    }
    let mut push = Vec::with_capacity(32 + name.len());
    push.extend_from_slice(b">3\r\n$4\r\nlock\r\n");
    push.extend_from_slice(format!("${}\r\n", name.len()).as_bytes());
    push.extend_from_slice(&name);
    push.extend_from_slice(format!("\r\n${}\r\n", reason.len()).as_bytes());
    push.extend_from_slice(reason);
    push.extend_from_slice(b"\r\n");
    holder.outbox.push_own(&push);
}
