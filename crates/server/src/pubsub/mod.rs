//! Pub/sub: who listens to which channel, and how a message gets to them.
//!
//! The [`Hub`] maps channels (and shard channels) to their subscribers, in stripes chosen
//! by the channel's hash, and keeps the pattern subscriptions apart. A publish locks the
//! stripe of its channel for as long as it delivers, so two publishes to one channel reach
//! every subscriber in the same order, whichever threads they ran on. Delivery never waits
//! for a subscriber: the message is encoded (RESP2 or RESP3, as the subscriber speaks) into
//! the subscriber's [`Outbox`], whose connection writes it out; a subscriber that lets its
//! outbox grow past `client-output-buffer-limit pubsub` is closed instead.

pub mod notify;
mod outbox;

pub use outbox::{in_flight, Deferred, Outbox};

use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use hashbrown::{HashMap, HashSet};
use latch_keyspace::glob::glob_match;
use parking_lot::{Mutex, RwLock};

use crate::client::ClientShared;
use crate::server::Server;

/// Channels are spread over this many independently locked stripes.
const STRIPES: usize = 64;

/// Ordinary channels (SUBSCRIBE/PUBLISH) or shard channels (SSUBSCRIBE/SPUBLISH): two
/// separate namespaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Channel,
    Shard,
}

impl Kind {
    /// The first element of a delivered message.
    fn message_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"message",
            Kind::Shard => b"smessage",
        }
    }
}

type Subscribers = Vec<Arc<ClientShared>>;

#[derive(Default)]
struct Stripe {
    channels: HashMap<Bytes, Subscribers>,
    shard_channels: HashMap<Bytes, Subscribers>,
}

impl Stripe {
    fn map(&mut self, kind: Kind) -> &mut HashMap<Bytes, Subscribers> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Shard => &mut self.shard_channels,
        }
    }
}

/// Every subscription on the server.
pub struct Hub {
    stripes: Box<[Mutex<Stripe>]>,
    hasher: ahash::RandomState,
    /// Pattern -> its subscribers. Read by every publish (while it holds its stripe).
    patterns: RwLock<HashMap<Bytes, Subscribers>>,
    /// Counts for INFO and for a publish to skip the patterns when there are none.
    pattern_count: AtomicUsize,
    channel_count: AtomicUsize,
    shard_channel_count: AtomicUsize,
    /// `client-output-buffer-limit pubsub`, read again when the configuration changes.
    limit_epoch: AtomicU64,
    hard_bytes: AtomicU64,
    soft_bytes: AtomicU64,
    soft_seconds: AtomicI64,
    /// `notify-keyspace-events` as [`notify`] reads it (see [`Hub::set_notify_flags`]).
    notify_flags: AtomicU32,
}

impl Default for Hub {
    fn default() -> Self {
        Hub::new()
    }
}

impl Hub {
    pub fn new() -> Hub {
        Hub {
            stripes: (0..STRIPES)
                .map(|_| Mutex::new(Stripe::default()))
                .collect(),
            hasher: ahash::RandomState::new(),
            patterns: RwLock::new(HashMap::new()),
            pattern_count: AtomicUsize::new(0),
            channel_count: AtomicUsize::new(0),
            shard_channel_count: AtomicUsize::new(0),
            limit_epoch: AtomicU64::new(u64::MAX),
            hard_bytes: AtomicU64::new(0),
            soft_bytes: AtomicU64::new(0),
            soft_seconds: AtomicI64::new(0),
            notify_flags: AtomicU32::new(0),
        }
    }

    fn stripe(&self, channel: &[u8]) -> &Mutex<Stripe> {
        let hash = self.hasher.hash_one(channel);
        &self.stripes[(hash as usize) % STRIPES]
    }

    fn count(&self, kind: Kind) -> &AtomicUsize {
        match kind {
            Kind::Channel => &self.channel_count,
            Kind::Shard => &self.shard_channel_count,
        }
    }

    /// Adds `client` to `channel`'s subscribers (the caller knows it was not one).
    pub fn subscribe(&self, kind: Kind, channel: &Bytes, client: &Arc<ClientShared>) {
        let mut stripe = self.stripe(channel).lock();
        let subscribers = stripe.map(kind).entry(channel.clone()).or_insert_with(|| {
            self.count(kind).fetch_add(1, Ordering::Relaxed);
            Vec::new()
        });
        subscribers.push(Arc::clone(client));
    }

    /// Takes client `id` off `channel`'s subscribers; a channel left without any goes.
    pub fn unsubscribe(&self, kind: Kind, channel: &[u8], id: u64) {
        let mut stripe = self.stripe(channel).lock();
        let map = stripe.map(kind);
        let Some(subscribers) = map.get_mut(channel) else {
            return;
        };
        subscribers.retain(|c| c.id != id);
        if subscribers.is_empty() {
            map.remove(channel);
            self.count(kind).fetch_sub(1, Ordering::Relaxed);
        }
    }

    pub fn psubscribe(&self, pattern: &Bytes, client: &Arc<ClientShared>) {
        let mut patterns = self.patterns.write();
        let subscribers = patterns.entry(pattern.clone()).or_insert_with(|| {
            self.pattern_count.fetch_add(1, Ordering::Relaxed);
            Vec::new()
        });
        subscribers.push(Arc::clone(client));
    }

    pub fn punsubscribe(&self, pattern: &[u8], id: u64) {
        let mut patterns = self.patterns.write();
        let Some(subscribers) = patterns.get_mut(pattern) else {
            return;
        };
        subscribers.retain(|c| c.id != id);
        if subscribers.is_empty() {
            patterns.remove(pattern);
            self.pattern_count.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Sends `message` to the subscribers of `channel` (and, for ordinary channels, of
    /// every matching pattern); returns how many received it.
    pub fn publish(&self, server: &Server, kind: Kind, channel: &[u8], message: &[u8]) -> usize {
        let limit = self.limit(server);
        let stripe = self.stripe(channel).lock();
        let mut receivers = 0;
        let map = match kind {
            Kind::Channel => &stripe.channels,
            Kind::Shard => &stripe.shard_channels,
        };
        if let Some(subscribers) = map.get(channel) {
            for subscriber in subscribers {
                subscriber
                    .outbox
                    .deliver(server, subscriber, &limit, |out, resp3| {
                        encode_push(out, resp3, &[kind.message_word(), channel, message]);
                    });
                receivers += 1;
            }
        }
        if kind == Kind::Channel && self.pattern_count.load(Ordering::Relaxed) > 0 {
            let patterns = self.patterns.read();
            for (pattern, subscribers) in patterns.iter() {
                if !glob_match(pattern, channel, false) {
                    continue;
                }
                for subscriber in subscribers {
                    subscriber
                        .outbox
                        .deliver(server, subscriber, &limit, |out, resp3| {
                            encode_push(out, resp3, &[b"pmessage", pattern, channel, message]);
                        });
                    receivers += 1;
                }
            }
        }
        drop(stripe);
        if receivers > 0 {
            DELIVERING_PUBLISHES.with(|count| count.set(count.get().saturating_add(1)));
        }
        receivers
    }

    /// The channels with at least one subscriber, matching `pattern` when one is given.
    pub fn channels(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Bytes> {
        let mut found = Vec::new();
        for stripe in self.stripes.iter() {
            let mut stripe = stripe.lock();
            for channel in stripe.map(kind).keys() {
                if pattern.is_none_or(|p| glob_match(p, channel, false)) {
                    found.push(channel.clone());
                }
            }
        }
        found
    }

    /// How many clients subscribe to `channel` (patterns not counted).
    pub fn subscriber_count(&self, kind: Kind, channel: &[u8]) -> usize {
        let mut stripe = self.stripe(channel).lock();
        stripe.map(kind).get(channel).map_or(0, Vec::len)
    }

    /// Every subscription of client `id`, found by going through all of them (for the
    /// rare ACL change that must check a client's channels).
    pub fn subscriptions_of(&self, id: u64) -> Subscriptions {
        let mut found = Subscriptions::default();
        for stripe in self.stripes.iter() {
            let stripe = stripe.lock();
            for (map, into) in [
                (&stripe.channels, &mut found.channels),
                (&stripe.shard_channels, &mut found.shard_channels),
            ] {
                for (channel, subscribers) in map {
                    if subscribers.iter().any(|c| c.id == id) {
                        into.insert(channel.clone());
                    }
                }
            }
        }
        for (pattern, subscribers) in self.patterns.read().iter() {
            if subscribers.iter().any(|c| c.id == id) {
                found.patterns.insert(pattern.clone());
            }
        }
        found
    }

    /// Distinct patterns subscribed to (PUBSUB NUMPAT, INFO pubsub_patterns).
    pub fn pattern_count(&self) -> usize {
        self.pattern_count.load(Ordering::Relaxed)
    }

    /// Channels with a subscriber (INFO pubsub_channels / pubsubshard_channels).
    pub fn channel_count(&self, kind: Kind) -> usize {
        self.count(kind).load(Ordering::Relaxed)
    }

    /// `client-output-buffer-limit pubsub`, cached per configuration epoch.
    fn limit(&self, server: &Server) -> crate::config::BufferLimit {
        let epoch = server.config.epoch();
        if self.limit_epoch.load(Ordering::Acquire) != epoch {
            let limit = server.config.client_output_buffer_limits()[PUBSUB_CLASS];
            self.hard_bytes.store(limit.hard_bytes, Ordering::Relaxed);
            self.soft_bytes.store(limit.soft_bytes, Ordering::Relaxed);
            self.soft_seconds
                .store(limit.soft_seconds, Ordering::Relaxed);
            self.limit_epoch.store(epoch, Ordering::Release);
        }
        crate::config::BufferLimit {
            hard_bytes: self.hard_bytes.load(Ordering::Relaxed),
            soft_bytes: self.soft_bytes.load(Ordering::Relaxed),
            soft_seconds: self.soft_seconds.load(Ordering::Relaxed),
        }
    }
}

thread_local! {
    /// Publishes on this thread that delivered something since the connection last asked.
    static DELIVERING_PUBLISHES: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// How many publishes on this thread delivered something since the last call (which
/// resets the count).
pub fn take_delivering_publishes() -> u32 {
    DELIVERING_PUBLISHES.with(|count| count.replace(0))
}

/// The pubsub class's index in `client-output-buffer-limit` (normal, replica, pubsub).
pub const PUBSUB_CLASS: usize = 2;

/// The `client-output-buffer-limit` class of a client: pubsub while it subscribes to
/// something, normal otherwise (replicas have theirs apart).
pub fn output_class(subscribed: bool) -> usize {
    if subscribed {
        PUBSUB_CLASS
    } else {
        0
    }
}

/// A connection's own subscriptions. Its connection owns them; the counts are mirrored on
/// [`ClientShared`] for CLIENT LIST.
#[derive(Debug, Default)]
pub struct Subscriptions {
    pub channels: HashSet<Bytes>,
    pub patterns: HashSet<Bytes>,
    pub shard_channels: HashSet<Bytes>,
}

impl Subscriptions {
    /// What the client's own sets take (the names are shared with the server's table, and
    /// not counted, as Redis counts only a client's entries): for `maxmemory-clients`.
    pub fn memory(&self) -> usize {
        let slot = std::mem::size_of::<Bytes>() + 1;
        (self.channels.capacity() + self.patterns.capacity() + self.shard_channels.capacity())
            * slot
    }

    pub fn of(&self, kind: Kind) -> &HashSet<Bytes> {
        match kind {
            Kind::Channel => &self.channels,
            Kind::Shard => &self.shard_channels,
        }
    }

    pub fn of_mut(&mut self, kind: Kind) -> &mut HashSet<Bytes> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Shard => &mut self.shard_channels,
        }
    }

    /// What SUBSCRIBE/PSUBSCRIBE replies count: channels and patterns (Redis'
    /// `clientSubscriptionsCount`); shard channels count apart.
    pub fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Channel => self.channels.len() + self.patterns.len(),
            Kind::Shard => self.shard_channels.len(),
        }
    }

    /// Subscribed to anything: the client is in pub/sub mode (RESP2 restricts its commands,
    /// its output falls under the pubsub buffer limits).
    pub fn any(&self) -> bool {
        !(self.channels.is_empty() && self.patterns.is_empty() && self.shard_channels.is_empty())
    }
}

/// Writes a push of bulk strings: `>n` in RESP3, `*n` in RESP2.
pub fn encode_push(out: &mut BytesMut, resp3: bool, parts: &[&[u8]]) {
    out.put_u8(if resp3 { b'>' } else { b'*' });
    put_decimal(out, parts.len() as u64);
    for part in parts {
        encode_bulk(out, part);
    }
}

/// Writes one bulk string.
pub fn encode_bulk(out: &mut BytesMut, bytes: &[u8]) {
    out.put_u8(b'$');
    put_decimal(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// Writes `n` and CRLF.
pub fn put_decimal(out: &mut BytesMut, n: u64) {
    let mut digits = itoa::Buffer::new();
    out.extend_from_slice(digits.format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Ends every subscription of a client that is going away (or RESET), without replies.
pub fn leave_all(server: &Server, shared: &ClientShared, subscriptions: &mut Subscriptions) {
    for kind in [Kind::Channel, Kind::Shard] {
        for channel in subscriptions.of_mut(kind).drain() {
            server.pubsub.unsubscribe(kind, &channel, shared.id);
        }
    }
    for pattern in subscriptions.patterns.drain() {
        server.pubsub.punsubscribe(&pattern, shared.id);
    }
    shared.set_subscription_counts(subscriptions);
}

/// After `user`'s rules changed: closes its clients that subscribe to a channel or pattern
/// the rules no longer allow, as Redis does.
pub fn close_revoked_subscribers(server: &Server, user: &Arc<crate::acl::User>) {
    let rules = user.rules();
    if rules.all_channels() {
        return;
    }
    for client in server.clients.list() {
        if !client.is_pubsub() || !Arc::ptr_eq(&client.user.lock(), user) {
            continue;
        }
        let held = server.pubsub.subscriptions_of(client.id);
        let revoked = held
            .patterns
            .iter()
            .any(|p| !rules.channel_allowed(p, true))
            || held
                .channels
                .iter()
                .chain(held.shard_channels.iter())
                .any(|c| !rules.channel_allowed(c, false));
        if revoked {
            client.outbox.close_quietly();
            client.kill();
        }
    }
}
