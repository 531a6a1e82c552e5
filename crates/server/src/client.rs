//! Connected clients: the state a connection owns ([`Client`]) and the part other clients
//! may read or act on ([`ClientShared`]: CLIENT LIST, CLIENT KILL), kept in the registry.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use latch_keyspace::keyspace::Watches;
use latch_keyspace::{KeyWaiter, Tick, Woken};
use parking_lot::Mutex;
use tokio::sync::{watch, Notify};

/// Whether replies are sent (`CLIENT REPLY ON|OFF|SKIP`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    Off,
    /// Set by `CLIENT REPLY SKIP`: the command after this one gets no reply.
    SkipNext,
    /// The current command gets no reply.
    Skip,
}

/// Connection-local state, owned by the connection's task.
#[derive(Debug)]
pub struct Client {
    pub id: u64,
    pub db: usize,
    pub authenticated: bool,
    /// Whose permissions apply (see `acl`); `default` until AUTH says otherwise.
    pub user: Arc<crate::acl::User>,
    pub reply_mode: ReplyMode,
    pub close_after_reply: bool,
    /// `SCRIPT DEBUG YES` or `SYNC`: the client's next EVAL runs in a debugging session.
    pub lua_debug: crate::scripting::rollback::DebugMode,
    pub shared: Arc<ClientShared>,
    /// The transaction being queued, between MULTI and EXEC/DISCARD.
    pub multi: Option<Transaction>,
    /// The keys this client WATCHes.
    pub watches: Watches,
    /// True while EXEC runs the queued commands: blocking commands must not block then.
    pub deny_blocking: bool,
    /// True while EXEC runs the queued commands (Redis' `server.in_exec`): BGSAVE,
    /// BGREWRITEAOF and CONFIG SET appendonly yes are then scheduled for the cron.
    pub in_exec: bool,
    /// True while a script of this client runs its `redis.call`s (Redis' CLIENT_SCRIPT).
    pub in_script: bool,
    /// The reply's error count when the last command ended, so that EXEC counts as failed
    /// only for errors of its own, not those of the commands it ran (as Redis counts).
    pub errors_mark: u64,
    /// Set while a blocking command (BLPOP & co) waits for its keys.
    pub blocked: Option<BlockRequest>,
    /// Blocked clients the last command woke: the connection lets them run before it goes
    /// on, so that, as in Redis, they are served before this client's next command.
    pub woken: Vec<Woken>,
    /// What the commands run under the current keyspace view changed, as the commands to
    /// log (the AOF); flushed by the gatekeeper before the view's locks are released.
    pub propagated: Vec<Propagated>,
    /// Set by a handler that said how it is logged ([`crate::commands::Ctx::propagate`]).
    pub propagation_replaced: bool,
    /// The AOF offset this client's replies must wait for (`appendfsync always`): replies
    /// leave only once everything up to it is on disk.
    pub durable_at: u64,
    /// The clock reading the last command ended at (left by the gatekeeper). The connection
    /// hands it to the next command of the same batch as its start, so a command costs one
    /// clock read; never across anything that may wait.
    pub reading: Option<Tick>,
    /// For a command CLIENT PAUSE holds (`gate::Outcome::Paused`): the number of pauses
    /// ended when it was held; the connection waits until that changes.
    pub held_since: u64,
    /// When the command running now started (set by the gatekeeper): a script's run counts
    /// its time from there instead of reading the clock again.
    pub command_started: Tick,
    /// The channels, patterns and shard channels this connection subscribes to.
    pub subscriptions: crate::pubsub::Subscriptions,
    /// Client-side caching (CLIENT TRACKING): this connection's mode and prefixes.
    pub tracking: crate::tracking::ClientTracking,
    /// What a replica said of itself (REPLCONF) before it asks to sync.
    pub replconf: crate::replication::primary::ReplConf,
    /// Set by PSYNC/SYNC: the connection becomes the replica's feeder after this command.
    pub sync_request: Option<crate::replication::primary::SyncRequest>,
    /// This server's link to its primary, applying the primary's stream: its commands
    /// are never refused as a replica's writes, see keys past their deadline as the
    /// primary does, and get no replies.
    pub is_primary_link: bool,
    /// The client that replays the AOF (at start, DEBUG LOADAOF): like the primary's link,
    /// never refused as a replica's write, for memory or for stale data.
    pub is_aof_loader: bool,
    /// On the primary link: the primary's bytes for the command running now (with those
    /// of a transaction it ends). A write's commit feeds them under its locks, so a
    /// snapshot's offset always matches its data; the link feeds what no commit took.
    pub primary_bytes: Option<Bytes>,
    /// The replication stream's offset just past this client's last write (WAIT's).
    pub repl_offset: u64,
    /// Set by WAIT when it must wait: the connection carries it out.
    pub wait_request: Option<crate::replication::WaitRequest>,
}

/// What a connection is to this server (CLIENT LIST flags, CLIENT KILL TYPE).
pub mod role {
    pub const NORMAL: u8 = 0;
    /// A replica of this server (flag `S`).
    pub const REPLICA: u8 = 1;
    /// This server's primary (flag `M`).
    pub const PRIMARY: u8 = 2;
}

/// One command to log, with the database it ran in.
#[derive(Debug, Clone)]
pub struct Propagated {
    pub db: usize,
    pub args: Vec<Bytes>,
    /// For replicas only, not the AOF (PUBLISH: a replica's subscribers hear what the
    /// primary's hear, as in Redis).
    pub replicas_only: bool,
    /// For the AOF only, not replicas (a script's `redis.set_repl(redis.REPL_AOF)`).
    pub aof_only: bool,
}

/// A blocking command waiting for one of its keys.
#[derive(Debug)]
pub struct BlockRequest {
    /// The command, run again (through the gatekeeper) each time a key may serve it.
    pub args: Vec<Bytes>,
    /// The keys it is queued on.
    pub keys: Vec<Bytes>,
    pub db: usize,
    /// When to give up (`None`: never).
    pub deadline: Option<tokio::time::Instant>,
    pub waiter: Arc<Waiter>,
    /// Whether a retry that finds nothing wakes the next client in line (a list popper:
    /// what it could not use may serve the next). A lock waiter does not: nobody behind
    /// it can take a lock it could not.
    pub passes_turn: bool,
    /// When to retry even if nothing wakes it: a lock waiter first in line retries when
    /// the holder's TTL runs out, so the lock passes on at its deadline.
    pub recheck_at: Option<tokio::time::Instant>,
    /// How long the run that blocked took (µs): Redis adds it to the run that answers, for
    /// the slow log and the latency histogram.
    pub first_run_us: u64,
}

impl Client {
    /// Redis' `mustObeyClient`: the primary's link and the AOF loader run what they are
    /// given, whatever the replica's, memory's or link's state.
    pub fn must_obey(&self) -> bool {
        self.is_primary_link || self.is_aof_loader
    }
}

/// How a blocked client is woken, and how a waker learns that the retry it caused is over.
#[derive(Debug)]
pub struct Waiter {
    pub notify: Notify,
    /// Set for a client waiting for a lock (LOCK.ACQUIRE ... WAIT): LOCK.INFO lists it,
    /// and only the first of them in line may take the lock.
    pub lock: Option<LockWait>,
    /// Counts the lock waiter in INFO locks while it lives.
    _waiting: Option<crate::lock_stats::WaitingCount>,
    /// Retries started; bumped under the keys' locks, so a waker reading it under the same
    /// locks knows the next retry sees its write.
    started: AtomicU64,
    /// Retries finished, the wake-ups they caused included; `u64::MAX` once the client no
    /// longer blocks.
    done: watch::Sender<u64>,
}

/// Who waits for a lock, since when.
#[derive(Debug, Clone, Copy)]
pub struct LockWait {
    pub client_id: u64,
    pub since: Instant,
}

impl Waiter {
    pub fn new() -> Arc<Waiter> {
        Waiter::with_lock(None, None)
    }

    pub fn with_lock(
        lock: Option<LockWait>,
        waiting: Option<crate::lock_stats::WaitingCount>,
    ) -> Arc<Waiter> {
        Arc::new(Waiter {
            notify: Notify::new(),
            lock,
            _waiting: waiting,
            started: AtomicU64::new(0),
            done: watch::Sender::new(0),
        })
    }

    /// A retry begins (call under the keys' locks).
    pub fn begin_retry(&self) {
        self.started.fetch_add(1, Ordering::SeqCst);
    }

    /// The retry that began last is over.
    pub fn finish_retry(&self) {
        let started = self.started.load(Ordering::SeqCst);
        self.done.send_modify(|done| *done = (*done).max(started));
    }

    /// The client stops blocking: nobody need wait for it any more.
    pub fn finish(&self) {
        self.done.send_replace(u64::MAX);
    }

    /// Waits until the retry that a wake-up returning `token` caused is over.
    pub async fn retried_after(&self, token: u64) {
        let mut done = self.done.subscribe();
        let _ = done.wait_for(|done| *done > token).await;
    }
}

impl KeyWaiter for Waiter {
    fn wake(&self) -> u64 {
        self.notify.notify_one();
        self.started.load(Ordering::SeqCst)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// Why CLIENT UNBLOCK ended a wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnblockReason {
    /// Answer as if the timeout had passed.
    Timeout,
    /// Answer `-UNBLOCKED`.
    Error,
    /// The server became a replica: answer `-UNBLOCKED ... instance state changed` and
    /// close the connection, as Redis does (`disconnectAllBlockedClients`).
    RoleChange,
}

impl Transaction {
    /// Memory the queue holds: the arguments' bytes and the slots that keep them.
    pub fn memory(&self) -> usize {
        self.bytes
            + self.queued.capacity() * std::mem::size_of::<Queued>()
            + self.arguments * std::mem::size_of::<Bytes>()
    }
}

/// Commands queued after MULTI.
#[derive(Debug, Default)]
pub struct Transaction {
    pub queued: Vec<Queued>,
    /// The bytes of the queued commands' arguments (CLIENT LIST `multi-mem`).
    pub bytes: usize,
    /// The queued commands' arguments, counted.
    pub arguments: usize,
    /// A command was refused while queueing: EXEC answers EXECABORT.
    pub aborted: bool,
}

/// One queued command: its table id and arguments.
#[derive(Debug)]
pub struct Queued {
    pub id: usize,
    pub args: Vec<Bytes>,
}

/// What others may see or change of a client.
#[derive(Debug)]
pub struct ClientShared {
    pub id: u64,
    pub addr: String,
    pub laddr: String,
    pub fd: i64,
    /// True for a Unix-socket connection.
    pub unix: bool,
    pub created: Instant,
    pub name: Mutex<Option<Bytes>>,
    pub lib_name: Mutex<Option<Bytes>>,
    pub lib_ver: Mutex<Option<Bytes>>,
    /// When the last input came, a `Tick` in nanoseconds (a plain clock read: `touch` runs
    /// for every read).
    pub last_interaction: AtomicU64,
    pub db: AtomicUsize,
    pub resp: AtomicU8,
    /// The table id + 1 of the command running or last run (0: none yet), for CLIENT LIST.
    pub last_command: AtomicUsize,
    pub query_buffer: AtomicUsize,
    /// The rest of what the client holds (CLIENT LIST's memory fields).
    pub memory: ClientMemory,
    /// Set (and `trim_signal` notified) by the clients' cron when the client is idle and
    /// holds buffers it should give back; the connection clears it when it has.
    pub trim_requested: AtomicBool,
    pub trim_signal: Notify,
    pub monitor: AtomicBool,
    pub no_evict: AtomicBool,
    pub no_touch: AtomicBool,
    /// Commands queued in MULTI, or -1 outside a transaction (CLIENT LIST `multi=`).
    pub multi: AtomicI64,
    /// Set by CLIENT KILL; the connection closes when it sees it.
    pub killed: AtomicBool,
    /// [`role`]: normal, a replica, or this server's primary.
    pub role: AtomicU8,
    pub kill_signal: Notify,
    /// In a blocking command (CLIENT LIST flag `b`, INFO blocked_clients). Whoever clears
    /// it (the connection, or CLIENT UNBLOCK) takes the client off the blocked count.
    pub blocked: AtomicBool,
    /// Waiting for a CLIENT PAUSE to end, its command not yet run: counted and shown as
    /// blocked (as Redis' postponed clients are), but CLIENT UNBLOCK does not apply.
    pub paused: AtomicBool,
    /// CLIENT UNBLOCK's request: 0 none, 1 timeout, 2 error; `unblock_signal` tells.
    unblock_reason: AtomicU8,
    pub unblock_signal: Notify,
    /// The user this connection is logged in as (CLIENT LIST `user=`, CLIENT KILL USER).
    pub user: Mutex<Arc<crate::acl::User>>,
    /// Messages other connections send this one (pub/sub, events, invalidations).
    pub outbox: crate::pubsub::Outbox,
    /// How many channels, patterns and shard channels it subscribes to (CLIENT LIST
    /// `sub`, `psub`, `ssub`), mirrored from its connection's `Subscriptions`.
    pub subscribed: [AtomicUsize; 3],
    /// Client-side caching: its flags and redirection, for whoever invalidates its keys.
    pub tracking: crate::tracking::SharedTracking,
    /// Set once the connection is closing after its last reply (QUIT, a protocol error):
    /// nothing more is sent to it, and invalidations redirected to it find it gone.
    pub closing: AtomicBool,
}

impl ClientShared {
    /// Mirrors the connection's subscription counts for others to read.
    pub fn set_subscription_counts(&self, subscriptions: &crate::pubsub::Subscriptions) {
        let counts = [
            subscriptions.channels.len(),
            subscriptions.patterns.len(),
            subscriptions.shard_channels.len(),
        ];
        for (counter, count) in self.subscribed.iter().zip(counts) {
            counter.store(count, Ordering::Relaxed);
        }
    }

    /// Subscribed to something: CLIENT LIST flag `P`, CLIENT KILL TYPE pubsub.
    pub fn is_pubsub(&self) -> bool {
        self.subscribed
            .iter()
            .any(|count| count.load(Ordering::Relaxed) > 0)
    }

    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        self.kill_signal.notify_one();
    }

    /// A unix-socket or loopback client (what `enable-debug-command local` allows).
    pub fn is_local(&self) -> bool {
        self.unix || self.addr.starts_with("127.") || self.addr.starts_with("[::1]")
    }

    /// Takes CLIENT UNBLOCK's request, if there is one.
    pub fn take_unblock(&self) -> Option<UnblockReason> {
        match self.unblock_reason.swap(0, Ordering::SeqCst) {
            1 => Some(UnblockReason::Timeout),
            2 => Some(UnblockReason::Error),
            3 => Some(UnblockReason::RoleChange),
            _ => None,
        }
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    /// Killed, or closing after its last reply: as good as gone.
    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Relaxed) || self.is_killed()
    }

    pub fn age_s(&self) -> u64 {
        self.created.elapsed().as_secs()
    }

    pub fn idle_s(&self) -> u64 {
        let last = Tick::from_nanos(self.last_interaction.load(Ordering::Relaxed));
        Tick::now().nanos_since(last) / 1_000_000_000
    }

    /// Input arrived at `at`.
    pub fn touch_at(&self, at: Tick) {
        self.last_interaction
            .store(at.as_nanos(), Ordering::Relaxed);
    }

    /// The flags field of CLIENT LIST.
    pub fn flags(&self) -> String {
        let mut flags = String::new();
        match self.role.load(Ordering::Relaxed) {
            role::REPLICA => flags.push('S'),
            role::PRIMARY => flags.push('M'),
            _ => {}
        }
        if self.monitor.load(Ordering::Relaxed) {
            flags.push('O');
        }
        if self.is_pubsub() {
            flags.push('P');
        }
        if self.multi.load(Ordering::Relaxed) >= 0 {
            flags.push('x');
        }
        if self.blocked.load(Ordering::Relaxed) || self.paused.load(Ordering::Relaxed) {
            flags.push('b');
        }
        let tracking = self.tracking.flags();
        if tracking & crate::tracking::flags::ON != 0 {
            flags.push('t');
        }
        if tracking & crate::tracking::flags::BROKEN_REDIRECT != 0 {
            flags.push('R');
        }
        if tracking & crate::tracking::flags::BCAST != 0 {
            flags.push('B');
        }
        if self.no_evict.load(Ordering::Relaxed) {
            flags.push('e');
        }
        if self.no_touch.load(Ordering::Relaxed) {
            flags.push('T');
        }
        if flags.is_empty() {
            flags.push('N');
        }
        flags
    }

    /// CLIENT LIST's `redir`: where invalidations go while tracking (0: to itself), else -1.
    pub fn redirect_shown(&self) -> i64 {
        if self.tracking.is_on() {
            self.tracking.redirect.load(Ordering::Relaxed) as i64
        } else {
            -1
        }
    }

    /// One line of CLIENT LIST / CLIENT INFO (without the newline), fields as Redis 7 prints them.
    pub fn describe(&self) -> String {
        self.describe_running(&[])
    }

    /// `describe` for the client running `args` (CLIENT LIST or INFO about itself): as in
    /// Redis, `argv-mem` and `tot-mem` count the running command's arguments.
    pub fn describe_running(&self, args: &[Bytes]) -> String {
        let argv_bytes: usize = args.iter().map(Bytes::len).sum();
        let argv_slots = args.len() * std::mem::size_of::<usize>();
        let text = |m: &Mutex<Option<Bytes>>| {
            m.lock()
                .as_ref()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default()
        };
        let qbuf = self.query_buffer.load(Ordering::Relaxed);
        let memory = &self.memory;
        let load = |counter: &AtomicUsize| counter.load(Ordering::Relaxed);
        // Replies being written, and messages others queued that the connection has not
        // taken yet.
        let output = load(&memory.output) + self.outbox.queued();
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem={} multi-mem={} rbs={} rbp={} obl={} oll=0 omem={} tot-mem={} events=r cmd={} user={} redir={} resp={} lib-name={} lib-ver={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            text(&self.name),
            self.age_s(),
            self.idle_s(),
            self.flags(),
            self.db.load(Ordering::Relaxed),
            load(&self.subscribed[0]),
            load(&self.subscribed[1]),
            load(&self.subscribed[2]),
            self.multi.load(Ordering::Relaxed),
            qbuf,
            load(&memory.query_capacity).saturating_sub(qbuf),
            load(&memory.argv) + argv_bytes,
            load(&memory.multi),
            load(&memory.reply_capacity),
            load(&memory.reply_peak),
            output,
            output,
            load(&memory.total) + argv_bytes + argv_slots,
            match self.last_command.load(Ordering::Relaxed) {
                0 => "NULL",
                id => crate::table::table().get(id - 1).full_name.as_str(),
            },
            self.user.lock().name,
            self.redirect_shown(),
            self.resp.load(Ordering::Relaxed),
            text(&self.lib_name),
            text(&self.lib_ver),
        )
    }
}

/// What a client holds in memory besides its query buffer's contents, as its connection
/// last counted it (at each read and each write, never per command): CLIENT LIST's
/// `qbuf-free`, `argv-mem`, `multi-mem`, `rbs`, `rbp`, `obl`/`omem` and `tot-mem`, and what
/// `maxmemory-clients` adds up.
#[derive(Debug, Default)]
pub struct ClientMemory {
    /// The query buffer's allocation (`qbuf` + `qbuf-free`).
    pub query_capacity: AtomicUsize,
    /// The bytes of the arguments of a request not yet complete (`argv-mem`).
    pub argv: AtomicUsize,
    /// The bytes of the commands queued since MULTI (`multi-mem`).
    pub multi: AtomicUsize,
    /// The reply buffer's allocation (`rbs`).
    pub reply_capacity: AtomicUsize,
    /// The most the reply buffer held since its size was last reviewed (`rbp`).
    pub reply_peak: AtomicUsize,
    /// Replies made and not yet written to the socket (`obl`, `omem`).
    pub output: AtomicUsize,
    /// Everything above and the connection's fixed part (`tot-mem`); the registry's sum
    /// counts this figure.
    pub total: AtomicUsize,
}

/// Every connected client, by id.
#[derive(Debug, Default)]
pub struct Registry {
    next_id: AtomicU64,
    clients: Mutex<BTreeMap<u64, Arc<ClientShared>>>,
    /// Number of MONITOR clients, so the hot path can skip feeding when there are none.
    pub monitors: AtomicUsize,
    /// Clients in a blocking command or waiting for a pause to end (INFO blocked_clients).
    pub blocked: AtomicUsize,
    /// The `tot-mem` of every connected client, added up (INFO's `mem_clients_normal`,
    /// what `maxmemory-clients` limits).
    memory: AtomicUsize,
    /// Clients closed by `maxmemory-clients` (INFO `evicted_clients`).
    pub evicted: AtomicU64,
}

impl Registry {
    pub fn new() -> Registry {
        Registry {
            next_id: AtomicU64::new(1),
            ..Registry::default()
        }
    }

    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Registers a new connection and returns its local state.
    pub fn connect(
        &self,
        addr: String,
        laddr: String,
        fd: i64,
        unix: bool,
        user: Arc<crate::acl::User>,
        authenticated: bool,
    ) -> Client {
        let id = self.next_id();
        let shared = Arc::new(ClientShared {
            id,
            addr,
            laddr,
            fd,
            unix,
            created: Instant::now(),
            name: Mutex::new(None),
            lib_name: Mutex::new(None),
            lib_ver: Mutex::new(None),
            last_interaction: AtomicU64::new(Tick::now().as_nanos()),
            db: AtomicUsize::new(0),
            resp: AtomicU8::new(2),
            last_command: AtomicUsize::new(0),
            query_buffer: AtomicUsize::new(0),
            memory: ClientMemory::default(),
            trim_requested: AtomicBool::new(false),
            trim_signal: Notify::new(),
            monitor: AtomicBool::new(false),
            no_evict: AtomicBool::new(false),
            no_touch: AtomicBool::new(false),
            multi: AtomicI64::new(-1),
            killed: AtomicBool::new(false),
            role: AtomicU8::new(role::NORMAL),
            kill_signal: Notify::new(),
            blocked: AtomicBool::new(false),
            paused: AtomicBool::new(false),
            unblock_reason: AtomicU8::new(0),
            unblock_signal: Notify::new(),
            user: Mutex::new(user.clone()),
            outbox: Default::default(),
            subscribed: Default::default(),
            tracking: Default::default(),
            closing: AtomicBool::new(false),
        });
        self.clients.lock().insert(id, shared.clone());
        Client {
            id,
            db: 0,
            authenticated,
            user,
            reply_mode: ReplyMode::On,
            close_after_reply: false,
            lua_debug: crate::scripting::rollback::DebugMode::Off,
            shared,
            multi: None,
            watches: Watches::default(),
            deny_blocking: false,
            in_exec: false,
            in_script: false,
            errors_mark: 0,
            reading: None,
            held_since: 0,
            command_started: Tick::from_nanos(0),
            blocked: None,
            woken: Vec::new(),
            propagated: Vec::new(),
            propagation_replaced: false,
            durable_at: 0,
            subscriptions: Default::default(),
            tracking: Default::default(),
            replconf: Default::default(),
            sync_request: None,
            is_primary_link: false,
            is_aof_loader: false,
            primary_bytes: None,
            repl_offset: 0,
            wait_request: None,
        }
    }

    /// Counts `client` as blocked (a new wait starts; any stale unblock request is dropped).
    pub fn mark_blocked(&self, client: &ClientShared) {
        client.unblock_reason.store(0, Ordering::SeqCst);
        if !client.blocked.swap(true, Ordering::SeqCst) {
            self.blocked.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Counts `client` as no longer blocked; false when it already was not.
    pub fn mark_unblocked(&self, client: &ClientShared) -> bool {
        let was = client.blocked.swap(false, Ordering::SeqCst);
        if was {
            self.blocked.fetch_sub(1, Ordering::SeqCst);
        }
        was
    }

    /// Counts `client` as blocked while it waits for a pause to end (`paused`), or no
    /// longer.
    pub fn mark_paused(&self, client: &ClientShared, paused: bool) {
        if client.paused.swap(paused, Ordering::SeqCst) != paused {
            if paused {
                self.blocked.fetch_add(1, Ordering::SeqCst);
            } else {
                self.blocked.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    /// CLIENT UNBLOCK: ends client `id`'s wait; false when it is not blocked. Done here, at
    /// once, so the blocked count is right before the reply (tests poll it).
    pub fn unblock(&self, id: u64, reason: UnblockReason) -> bool {
        let Some(client) = self.get(id) else {
            return false;
        };
        if !self.mark_unblocked(&client) {
            return false;
        }
        let code = match reason {
            UnblockReason::Timeout => 1,
            UnblockReason::Error => 2,
            UnblockReason::RoleChange => 3,
        };
        client.unblock_reason.store(code, Ordering::SeqCst);
        client.unblock_signal.notify_one();
        true
    }

    /// Ends every blocking command's wait (BLPOP, LOCK.ACQUIRE ... WAIT, ...) with
    /// [`UnblockReason::RoleChange`]: this server became a replica. Clients held by CLIENT
    /// PAUSE are not blocked in this sense and stay (Redis' postponed clients).
    pub fn unblock_all_for_role_change(&self) {
        for client in self.list() {
            if client.blocked.load(Ordering::SeqCst) {
                self.unblock(client.id, UnblockReason::RoleChange);
            }
        }
    }

    /// Records that `client` now holds `total` bytes. A killed client is no longer counted
    /// (eviction took it off the sum when it chose it).
    pub fn account(&self, client: &ClientShared, total: usize) {
        if client.is_killed() {
            return;
        }
        let before = client.memory.total.swap(total, Ordering::Relaxed);
        if before != total {
            // Wrapping add and subtract: the sum stays right however updates interleave.
            self.memory.fetch_add(total, Ordering::Relaxed);
            self.memory.fetch_sub(before, Ordering::Relaxed);
        }
    }

    /// What every connected client holds, added up.
    pub fn memory(&self) -> usize {
        self.memory.load(Ordering::Relaxed)
    }

    /// Closes the clients that hold the most memory, largest first, until what all clients
    /// hold is under `limit` (`maxmemory-clients`), as Redis' client eviction does. Clients
    /// with CLIENT NO-EVICT on are spared. Returns how many were closed.
    pub fn evict_over(&self, limit: usize) -> usize {
        if self.memory() < limit {
            return 0;
        }
        let mut candidates: Vec<(usize, Arc<ClientShared>)> = self
            .list()
            .into_iter()
            .filter(|c| !c.is_killed() && !c.no_evict.load(Ordering::Relaxed))
            .map(|c| (c.memory.total.load(Ordering::Relaxed), c))
            .collect();
        candidates.sort_by_key(|(held, _)| std::cmp::Reverse(*held));
        let mut evicted = 0;
        for (_, client) in candidates {
            if self.memory() < limit {
                break;
            }
            tracing::info!(client = %client.describe(), "Evicting client");
            client.kill();
            let held = client.memory.total.swap(0, Ordering::Relaxed);
            self.memory.fetch_sub(held, Ordering::Relaxed);
            self.evicted.fetch_add(1, Ordering::Relaxed);
            evicted += 1;
        }
        if self.memory() >= limit {
            // Once a second at most: every read of every client lands here meanwhile.
            static LAST_WARNED_S: AtomicU64 = AtomicU64::new(0);
            let now_s = Tick::now().as_nanos() / 1_000_000_000;
            if LAST_WARNED_S.swap(now_s, Ordering::Relaxed) != now_s {
                tracing::warn!("over maxmemory-clients after evicting every evictable client");
            }
        }
        evicted
    }

    pub fn disconnect(&self, id: u64) {
        if let Some(shared) = self.clients.lock().remove(&id) {
            let held = shared.memory.total.swap(0, Ordering::Relaxed);
            self.memory.fetch_sub(held, Ordering::Relaxed);
            self.mark_unblocked(&shared);
            self.mark_paused(&shared, false);
            if shared.monitor.load(Ordering::Relaxed) {
                self.monitors.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// A snapshot of every client, in id order.
    pub fn list(&self) -> Vec<Arc<ClientShared>> {
        self.clients.lock().values().cloned().collect()
    }

    pub fn get(&self, id: u64) -> Option<Arc<ClientShared>> {
        self.clients.lock().get(&id).cloned()
    }

    pub fn len(&self) -> usize {
        self.clients.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
