//! Client-side caching: which clients may hold which keys, and the invalidations they get
//! when those keys change (CLIENT TRACKING, as Redis 7.0 does it).
//!
//! In the default mode, the keys a tracking client reads with a read-only command are
//! remembered in the [`Tracking`] table (key -> ids of the clients that read it, in stripes
//! by the key's hash; keys only, whatever the database, as in Redis). When a key changes,
//! its entry is taken out of the table and every client in it that still tracks gets one
//! invalidation: a RESP3 push `invalidate [key]`, or, redirected (`REDIRECT id`) to a
//! RESP2 client in pub/sub mode, a message on `__redis__:invalidate`. In BCAST mode a client
//! registers prefixes instead, and hears of every changed key that starts with one of them:
//! changed keys collect per prefix, and go out in one message per prefix when the command
//! that changed them ends (a transaction or a script counts as one command), or at the end
//! of an active-expiry step. Redis sends them once per event-loop iteration; per command
//! gives the same batches for commands that wait for their replies, and never holds an
//! invalidation back for a cron tick.
//!
//! How a change reaches this module: while anyone tracks (or the table still holds
//! entries), the keyspace's views record what they change ([`latch_keyspace::Tracked`]):
//! every `signal_modified`, every lazy expiry and each FLUSHDB/FLUSHALL. The gatekeeper
//! hands that list here after each command ([`after_command`]), while the command's view
//! still holds its shards, so two writes of a key invalidate in the order they happened,
//! and a read is remembered before any writer of the key can get in. The active expiry
//! calls [`Tracking::expired`] under the swept shard's lock. With nobody tracking, a write
//! pays one relaxed load (the keyspace's flag), a read nothing.
//!
//! Messages go through the receiving client's outbox (`pubsub::Outbox`): its connection
//! writes them after the command it is running, so the invalidations a client's own command
//! causes arrive after that command's reply, as in Redis 7.0.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use hashbrown::HashMap;
use latch_keyspace::{Locked, Tracked};
use parking_lot::{Mutex, RwLock};

use crate::client::{Client, ClientShared};
use crate::config::BufferLimit;
use crate::pubsub::{encode_bulk, put_decimal};
use crate::server::Server;
use crate::spec::flag;
use crate::table::Command;

/// Bits of [`SharedTracking::flags`] (Redis' `CLIENT_TRACKING*` client flags).
pub mod flags {
    pub const ON: u8 = 1 << 0;
    pub const BCAST: u8 = 1 << 1;
    pub const OPTIN: u8 = 1 << 2;
    pub const OPTOUT: u8 = 1 << 3;
    pub const NOLOOP: u8 = 1 << 4;
    /// The client it redirects to was gone when an invalidation was due.
    pub const BROKEN_REDIRECT: u8 = 1 << 5;
}

/// Stripes of the key table, locked independently.
const STRIPES: usize = 64;

/// The pub/sub channel invalidations go to for a RESP2 client redirected to.
const CHANNEL: &[u8] = b"__redis__:invalidate";

/// What other clients need to know of a client's tracking: its flags and where its
/// invalidations go. Written by the client's own commands (and `BROKEN_REDIRECT` by whoever
/// finds its redirection gone).
#[derive(Debug, Default)]
pub struct SharedTracking {
    pub flags: AtomicU8,
    /// The client id invalidations are redirected to; 0 for none.
    pub redirect: AtomicU64,
}

impl SharedTracking {
    pub fn flags(&self) -> u8 {
        self.flags.load(Ordering::Relaxed)
    }

    pub fn is_on(&self) -> bool {
        self.flags() & flags::ON != 0
    }
}

/// A connection's own tracking state (its copy of the flags, its prefixes), read by its
/// commands without atomics.
#[derive(Debug, Default)]
pub struct ClientTracking {
    pub on: bool,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// CLIENT CACHING YES (OPTIN) or NO (OPTOUT) was given for the next command (or
    /// transaction).
    pub caching: bool,
    pub redirect: u64,
    /// The prefixes it is registered for in BCAST mode.
    pub prefixes: BTreeSet<Bytes>,
    /// While a script of this client runs: the keys the script declared, which a read-only
    /// command the script calls makes the client track (Redis remembers the caller's keys).
    pub script_keys: Option<Vec<Bytes>>,
    /// A command inside a transaction or script left broadcast keys: the command around it
    /// sends them when it ends.
    pub broadcast_due: bool,
}

impl ClientTracking {
    /// What the client's BCAST prefixes take (a B-tree entry each, about a third of a node
    /// spare), for `maxmemory-clients`.
    pub fn memory(&self) -> usize {
        self.prefixes.len() * (std::mem::size_of::<Bytes>() * 3 / 2)
    }
}

/// One stripe of the key table: key -> the ids of the clients that may cache it, sorted.
type Holders = HashMap<Box<[u8]>, Vec<u64>>;

/// One BCAST prefix: who registered it, and the keys changed since the last broadcast.
#[derive(Default)]
struct Prefix {
    clients: Vec<Arc<ClientShared>>,
    /// Changed keys (in key order, as Redis lists them) and the id of the client that
    /// changed each last (`None`: an expiry or a script, which no client's NOLOOP skips).
    keys: BTreeMap<Box<[u8]>, Option<u64>>,
}

/// Every tracking client, the key table and the BCAST prefixes.
pub struct Tracking {
    /// The clients with tracking on, in id order (Redis walks its clients in that order
    /// when a flush invalidates everything).
    clients: RwLock<BTreeMap<u64, Arc<ClientShared>>>,
    client_count: AtomicUsize,
    /// Key -> the ids of the clients that may cache it, sorted. Ids stay until the key
    /// changes (a client that stops tracking leaves them, as in Redis).
    stripes: Box<[Mutex<Holders>]>,
    hasher: ahash::RandomState,
    /// Keys in the table, and ids over all of them (INFO).
    keys: AtomicUsize,
    items: AtomicUsize,
    prefixes: Mutex<BTreeMap<Bytes, Prefix>>,
    prefix_count: AtomicUsize,
    /// Some prefix holds changed keys not broadcast yet.
    broadcast_pending: AtomicBool,
    /// Consecutive limit runs that ended still over `tracking-table-max-keys`: each one
    /// tries harder (Redis' `timeout_counter`).
    over_limit_runs: AtomicU32,
    limiting: Mutex<()>,
    /// Serializes turning the keyspace's recording on and off.
    flag_lock: Mutex<()>,
    /// `client-output-buffer-limit`, per configuration epoch.
    limits: RwLock<(u64, [BufferLimit; 3])>,
    /// `tracking-table-max-keys`, and the configuration epoch it was read at.
    max_keys: AtomicUsize,
    max_keys_epoch: AtomicU64,
}

impl Default for Tracking {
    fn default() -> Self {
        Tracking::new()
    }
}

/// What an invalidation says.
enum Payload<'a> {
    /// One key.
    Key(&'a [u8]),
    /// An array of keys, already encoded.
    Keys(&'a [u8]),
    /// Every key (a flush): a null, in the protocol of the tracking client (not of the one
    /// it redirects to), as Redis writes it.
    All { resp3: bool },
}

impl Tracking {
    pub fn new() -> Tracking {
        Tracking {
            clients: RwLock::new(BTreeMap::new()),
            client_count: AtomicUsize::new(0),
            stripes: (0..STRIPES).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: ahash::RandomState::new(),
            keys: AtomicUsize::new(0),
            items: AtomicUsize::new(0),
            prefixes: Mutex::new(BTreeMap::new()),
            prefix_count: AtomicUsize::new(0),
            broadcast_pending: AtomicBool::new(false),
            over_limit_runs: AtomicU32::new(0),
            limiting: Mutex::new(()),
            flag_lock: Mutex::new(()),
            limits: RwLock::new((u64::MAX, [BufferLimit::default(); 3])),
            max_keys: AtomicUsize::new(0),
            max_keys_epoch: AtomicU64::new(u64::MAX),
        }
    }

    /// Clients with tracking on (INFO `tracking_clients`).
    pub fn client_count(&self) -> usize {
        self.client_count.load(Ordering::Relaxed)
    }

    /// Keys in the table (INFO `tracking_total_keys`).
    pub fn key_count(&self) -> usize {
        self.keys.load(Ordering::Relaxed)
    }

    /// Client ids over every key of the table (INFO `tracking_total_items`).
    pub fn item_count(&self) -> usize {
        self.items.load(Ordering::Relaxed)
    }

    /// BCAST prefixes registered (INFO `tracking_total_prefixes`).
    pub fn prefix_count(&self) -> usize {
        self.prefix_count.load(Ordering::Relaxed)
    }

    fn stripe(&self, key: &[u8]) -> &Mutex<Holders> {
        let hash = self.hasher.hash_one(key);
        &self.stripes[(hash as usize) % STRIPES]
    }

    /// Turns the keyspace's recording of changes on while someone tracks or the table
    /// holds entries (a change of those keys still takes them out), off otherwise.
    fn refresh_flag(&self, server: &Server) {
        let _serial = self.flag_lock.lock();
        let on = self.client_count() > 0 || self.key_count() > 0;
        server.keyspace.set_tracking(on);
    }

    /// CLIENT TRACKING ON with options already checked (Redis' `enableTracking`): turning
    /// it on again changes the options and adds prefixes.
    pub fn enable(
        &self,
        server: &Server,
        client: &mut Client,
        redirect: u64,
        options: u8,
        prefixes: &[Bytes],
    ) {
        let shared = &client.shared;
        if !client.tracking.on {
            self.clients.write().insert(shared.id, Arc::clone(shared));
            self.client_count.fetch_add(1, Ordering::Relaxed);
            self.refresh_flag(server);
        }
        let state = &mut client.tracking;
        state.on = true;
        state.redirect = redirect;
        state.bcast = options & flags::BCAST != 0;
        state.optin = options & flags::OPTIN != 0;
        state.optout = options & flags::OPTOUT != 0;
        state.noloop = options & flags::NOLOOP != 0;
        if state.bcast {
            let mut table = self.prefixes.lock();
            let mut register = |prefix: &Bytes| {
                let entry = table.entry(prefix.clone()).or_insert_with(|| {
                    self.prefix_count.fetch_add(1, Ordering::Relaxed);
                    Prefix::default()
                });
                if state.prefixes.insert(prefix.clone()) {
                    entry.clients.push(Arc::clone(shared));
                }
            };
            if prefixes.is_empty() {
                register(&Bytes::new());
            }
            for prefix in prefixes {
                register(prefix);
            }
        }
        shared.tracking.redirect.store(redirect, Ordering::Relaxed);
        shared
            .tracking
            .flags
            .store(flags::ON | options, Ordering::Relaxed);
    }

    /// CLIENT TRACKING OFF, RESET, disconnection (Redis' `disableTracking`): the client
    /// leaves its prefixes; the ids it left in the key table go when their keys change.
    pub fn disable(&self, server: &Server, client: &mut Client) {
        let shared = &client.shared;
        let state = &mut client.tracking;
        if state.bcast {
            let mut table = self.prefixes.lock();
            for prefix in std::mem::take(&mut state.prefixes) {
                let Some(entry) = table.get_mut(&prefix) else {
                    continue;
                };
                entry.clients.retain(|c| c.id != shared.id);
                if entry.clients.is_empty() {
                    table.remove(&prefix);
                    self.prefix_count.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
        if state.on {
            self.clients.write().remove(&shared.id);
            self.client_count.fetch_sub(1, Ordering::Relaxed);
            shared.tracking.flags.store(0, Ordering::Relaxed);
            *state = ClientTracking::default();
            self.refresh_flag(server);
        }
    }

    /// Makes `client` (tracking in the default mode) a holder of `key`.
    fn remember(&self, key: &[u8], id: u64) {
        let mut stripe = self.stripe(key).lock();
        let ids = match stripe.get_mut(key) {
            Some(ids) => ids,
            None => {
                self.keys.fetch_add(1, Ordering::Relaxed);
                stripe.entry(key.into()).or_default()
            }
        };
        if let Err(at) = ids.binary_search(&id) {
            ids.insert(at, id);
            self.items.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Redis' `trackingInvalidateKey`: `key` changed (or is evicted from the table, then
    /// without `broadcast`). `current`: the client whose command changed it (its NOLOOP
    /// skips it); `by`: who changed it, for BCAST's NOLOOP.
    fn invalidate_key(
        &self,
        server: &Server,
        key: &[u8],
        current: Option<u64>,
        by: Option<u64>,
        broadcast: bool,
    ) {
        if broadcast && self.prefix_count() > 0 {
            self.note_for_broadcast(key, by);
        }
        let ids = self.stripe(key).lock().remove(key);
        let Some(ids) = ids else {
            return;
        };
        self.items.fetch_sub(ids.len(), Ordering::Relaxed);
        if self.keys.fetch_sub(1, Ordering::Relaxed) == 1 && self.client_count() == 0 {
            self.refresh_flag(server);
        }
        let clients = self.clients.read();
        for id in ids {
            let Some(target) = clients.get(&id) else {
                continue;
            };
            let target_flags = target.tracking.flags();
            if target_flags & flags::BCAST != 0 {
                continue;
            }
            if target_flags & flags::NOLOOP != 0 && current == Some(id) {
                continue;
            }
            self.send(server, target, Payload::Key(key));
        }
    }

    /// Adds a changed key to every prefix it starts with.
    fn note_for_broadcast(&self, key: &[u8], by: Option<u64>) {
        let mut table = self.prefixes.lock();
        let mut noted = false;
        for (prefix, entry) in table.iter_mut() {
            if key.starts_with(prefix) {
                entry.keys.insert(key.into(), by);
                noted = true;
            }
        }
        if noted {
            self.broadcast_pending.store(true, Ordering::Relaxed);
        }
    }

    /// Redis' `trackingBroadcastInvalidationMessages`: one message per prefix with changed
    /// keys to each of its clients (a NOLOOP client's without the keys it changed itself).
    pub fn broadcast(&self, server: &Server) {
        if !self.broadcast_pending.swap(false, Ordering::Relaxed) {
            return;
        }
        let mut table = self.prefixes.lock();
        for entry in table.values_mut() {
            if entry.keys.is_empty() {
                continue;
            }
            let keys = std::mem::take(&mut entry.keys);
            let all = encode_keys(&keys, None);
            for client in &entry.clients {
                if client.tracking.flags() & flags::NOLOOP != 0 {
                    if let Some(own) = encode_keys(&keys, Some(client.id)) {
                        self.send(server, client, Payload::Keys(&own));
                    }
                } else if let Some(all) = &all {
                    self.send(server, client, Payload::Keys(all));
                }
            }
        }
    }

    /// Redis' `trackingInvalidateKeysOnFlush`: every tracking client hears that all its
    /// keys are invalid, and the table empties.
    fn invalidate_all(&self, server: &Server) {
        {
            let clients = self.clients.read();
            for client in clients.values() {
                let resp3 = client.resp.load(Ordering::Relaxed) >= 3;
                self.send(server, client, Payload::All { resp3 });
            }
        }
        for stripe in self.stripes.iter() {
            let mut stripe = stripe.lock();
            let ids: usize = stripe.values().map(Vec::len).sum();
            self.keys.fetch_sub(stripe.len(), Ordering::Relaxed);
            self.items.fetch_sub(ids, Ordering::Relaxed);
            *stripe = HashMap::new();
        }
        if self.client_count() == 0 {
            self.refresh_flag(server);
        }
    }

    /// Redis' `sendTrackingMessage`: one invalidation for tracking client `target`, to it
    /// (RESP3) or to the client it redirects to (RESP3, or RESP2 in pub/sub mode: a message
    /// on `__redis__:invalidate`). A RESP2 client without a redirection gets nothing. A
    /// redirection to a client that is gone marks `target` and tells it (in RESP3).
    fn send(&self, server: &Server, target: &Arc<ClientShared>, payload: Payload<'_>) {
        let redirect = target.tracking.redirect.load(Ordering::Relaxed);
        let found;
        let receiver = if redirect == 0 {
            target
        } else {
            found = server.clients.get(redirect).filter(|c| !c.is_closing());
            match &found {
                Some(receiver) => receiver,
                None => {
                    target
                        .tracking
                        .flags
                        .fetch_or(flags::BROKEN_REDIRECT, Ordering::Relaxed);
                    if target.resp.load(Ordering::Relaxed) >= 3 {
                        let limit = self.limit_for(server, target);
                        target.outbox.deliver(server, target, &limit, |out, _| {
                            out.extend_from_slice(b">2\r\n");
                            encode_bulk(out, b"tracking-redir-broken");
                            out.put_u8(b':');
                            put_decimal(out, redirect);
                        });
                    }
                    return;
                }
            }
        };
        if receiver.resp.load(Ordering::Relaxed) < 3 && !(redirect != 0 && receiver.is_pubsub()) {
            return;
        }
        let limit = self.limit_for(server, receiver);
        receiver
            .outbox
            .deliver(server, receiver, &limit, |out, resp3| {
                if resp3 {
                    out.extend_from_slice(b">2\r\n");
                    encode_bulk(out, b"invalidate");
                } else {
                    out.extend_from_slice(b"*3\r\n");
                    encode_bulk(out, b"message");
                    encode_bulk(out, CHANNEL);
                }
                match payload {
                    Payload::Key(key) => {
                        out.extend_from_slice(b"*1\r\n");
                        encode_bulk(out, key);
                    }
                    Payload::Keys(encoded) => out.extend_from_slice(encoded),
                    Payload::All { resp3: true } => out.extend_from_slice(b"_\r\n"),
                    Payload::All { resp3: false } => out.extend_from_slice(b"$-1\r\n"),
                }
            });
    }

    /// The output limit of `client`'s class (pubsub when it subscribes to something).
    fn limit_for(&self, server: &Server, client: &ClientShared) -> BufferLimit {
        let epoch = server.config.epoch();
        let class = crate::pubsub::output_class(client.is_pubsub());
        {
            let cached = self.limits.read();
            if cached.0 == epoch {
                return cached.1[class];
            }
        }
        let limits = server.config.client_output_buffer_limits();
        *self.limits.write() = (epoch, limits);
        limits[class]
    }

    /// Keys the active expiry removed (under the swept shard's lock): their holders hear of
    /// it, and BCAST clients in one message per prefix.
    pub fn expired(&self, server: &Server, removed: &latch_keyspace::keyspace::RemovedKeys) {
        if !server.keyspace.is_tracking() {
            return;
        }
        for (_, key) in removed {
            self.invalidate_key(server, key, None, None, true);
        }
        self.broadcast(server);
    }

    /// A key eviction removed (under its shard's lock): as [`Tracking::expired`], for one.
    pub fn evicted(&self, server: &Server, key: &[u8]) {
        if !server.keyspace.is_tracking() {
            return;
        }
        self.invalidate_key(server, key, None, None, true);
        self.broadcast(server);
    }

    /// The clients' cron: keeps the table within `tracking-table-max-keys`.
    pub fn cron(&self, server: &Server) {
        if self.client_count() > 0 {
            self.limit_table(server);
        }
    }

    /// Redis' `trackingLimitUsedSlots`: over `tracking-table-max-keys`, drops keys (as if
    /// they had changed, so their holders stop caching them) until under it, trying 100
    /// keys more each time the last run ended still over it.
    pub fn limit_table(&self, server: &Server) {
        let max = self.max_keys(server);
        if max == 0 {
            return;
        }
        if self.key_count() <= max {
            if self.over_limit_runs.load(Ordering::Relaxed) != 0 {
                self.over_limit_runs.store(0, Ordering::Relaxed);
            }
            return;
        }
        let Some(_running) = self.limiting.try_lock() else {
            return;
        };
        let effort = 100 * (self.over_limit_runs.load(Ordering::Relaxed) as usize + 1);
        for _ in 0..effort {
            let Some(key) = self.some_key() else {
                break;
            };
            self.invalidate_key(server, &key, None, None, false);
            if self.key_count() <= max {
                self.over_limit_runs.store(0, Ordering::Relaxed);
                return;
            }
        }
        self.over_limit_runs.fetch_add(1, Ordering::Relaxed);
    }

    /// `tracking-table-max-keys`, read again when the configuration changed.
    fn max_keys(&self, server: &Server) -> usize {
        let epoch = server.config.epoch();
        if self.max_keys_epoch.load(Ordering::Acquire) != epoch {
            let max = server.config.tracking_table_max_keys();
            self.max_keys.store(max, Ordering::Relaxed);
            self.max_keys_epoch.store(epoch, Ordering::Release);
            return max;
        }
        self.max_keys.load(Ordering::Relaxed)
    }

    /// A key of the table, from a stripe picked at random.
    fn some_key(&self) -> Option<Box<[u8]>> {
        let start = rand::random::<usize>() % STRIPES;
        (0..STRIPES).find_map(|i| {
            let stripe = self.stripes[(start + i) % STRIPES].lock();
            stripe.keys().next().cloned()
        })
    }
}

/// `*N` and the keys of `keys` but those last changed by `skip`; `None` when that leaves
/// none.
fn encode_keys(keys: &BTreeMap<Box<[u8]>, Option<u64>>, skip: Option<u64>) -> Option<Vec<u8>> {
    let count = keys
        .values()
        .filter(|by| skip.is_none() || **by != skip)
        .count();
    if count == 0 {
        return None;
    }
    let mut out = BytesMut::with_capacity(count * 16);
    out.put_u8(b'*');
    put_decimal(&mut out, count as u64);
    for (key, by) in keys {
        if skip.is_some() && *by == skip {
            continue;
        }
        encode_bulk(&mut out, key);
    }
    Some(out.to_vec())
}

/// The gatekeeper's one call after each command ran (on its own, inside a transaction,
/// or from a script), while the command's view still holds its shards: invalidations for
/// what it changed, then the keys a tracking client read, then (at the outermost command)
/// the BCAST messages. Nothing to do, in the common case, costs three field reads.
#[inline]
pub fn after_command(
    server: &Server,
    client: &mut Client,
    command: &Command,
    args: &[Bytes],
    keys: &mut Locked<'_>,
) {
    if keys.tracked.is_empty() && !client.tracking.on && !client.tracking.broadcast_due {
        return;
    }
    after_command_slow(server, client, command, args, keys);
}

#[inline(never)]
fn after_command_slow(
    server: &Server,
    client: &mut Client,
    command: &Command,
    args: &[Bytes],
    keys: &mut Locked<'_>,
) {
    let tracking = &server.tracking;
    if !keys.tracked.is_empty() {
        // Redis' scripts write through a client of their own: BCAST's NOLOOP does not
        // recognize the caller there (the default mode's does: it looks at the caller).
        let by = (!client.in_script).then_some(client.id);
        for change in keys.tracked.take() {
            match change {
                Tracked::Key { key, expired, .. } => {
                    let by = if expired { None } else { by };
                    tracking.invalidate_key(server, &key, Some(client.id), by, true);
                }
                Tracked::Flush => tracking.invalidate_all(server),
            }
        }
    }
    if client.tracking.on && !client.tracking.bcast {
        remember_read(server, client, command, args);
    }
    if tracking.broadcast_pending.load(Ordering::Relaxed) {
        if client.in_script || client.deny_blocking {
            client.tracking.broadcast_due = true;
        } else {
            client.tracking.broadcast_due = false;
            tracking.broadcast(server);
        }
    } else if !(client.in_script || client.deny_blocking) {
        client.tracking.broadcast_due = false;
    }
}

/// Redis' `trackingRememberKeys`, for the keys of a read-only command a tracking client ran
/// (for a script's call, the keys the script declared).
fn remember_read(server: &Server, client: &Client, command: &Command, args: &[Bytes]) {
    let spec = command.spec;
    if !spec.has_flag(flag::READONLY) || spec.has_flag(flag::PUBSUB) {
        return;
    }
    let state = &client.tracking;
    if (state.optin && !state.caching) || (state.optout && state.caching) {
        return;
    }
    let tracking = &server.tracking;
    if client.in_script {
        if let Some(keys) = &state.script_keys {
            tracking.limit_table(server);
            for key in keys {
                tracking.remember(key, client.id);
            }
        }
        return;
    }
    // The read-only script commands track through what their script calls.
    if matches!(spec.name, "eval_ro" | "evalsha_ro" | "fcall_ro") {
        return;
    }
    tracking.limit_table(server);
    let _ = crate::spec::visit_keys(spec, args, |at, _| {
        tracking.remember(&args[at], client.id);
    });
}

/// After each command a client sent (run, queued or refused): CLIENT CACHING applies to
/// the next command only, or to the next transaction when given before MULTI (Redis
/// clears the flag in `resetClient` unless the command was CLIENT or the client is in
/// MULTI).
#[inline]
pub fn command_done(client: &mut Client, args: &[Bytes]) {
    if client.tracking.caching && client.multi.is_none() && !args[0].eq_ignore_ascii_case(b"client")
    {
        client.tracking.caching = false;
    }
}
