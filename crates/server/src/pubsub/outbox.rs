//! What other connections send a client: pub/sub messages, keyspace events, invalidations.
//!
//! Whoever produces a message encodes it here, under a short lock, and wakes the client's
//! connection, which moves it into its reply buffer after the command it is running (or
//! at once, when it is waiting for input) and writes it out. A producer never waits for the
//! client: a client whose unwritten output passes `client-output-buffer-limit pubsub` is
//! closed and gets nothing more.
//!
//! A command run by a connection defers the wake-ups ([`Deferred`]): the connection writes
//! its own reply first, then hands the messages on. When nothing else waits to run on its
//! worker, it writes them itself, straight into each receiver's socket, if that receiver's
//! connection waits for input with nothing of its own to write ([`Outbox::idle`]); as
//! Redis writes every client's output in one pass of its loop, a message then costs a
//! `send`, not a wake-up and a task switch as well.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Buf, BytesMut};
use latch_keyspace::Tick;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tracing::warn;

use crate::client::ClientShared;
use crate::config::BufferLimit;
use crate::server::Server;

#[derive(Debug)]
struct Queue {
    bytes: BytesMut,
    /// The client's socket while its connection waits for input with nothing left to
    /// write (-1 otherwise): what is queued may then be written to it directly. The
    /// connection clears it, under this lock, before it writes anything or closes the socket.
    idle_fd: i32,
    /// Bytes the connection took from here and is writing ([`Outbox::written`]).
    carried: usize,
    /// The connection waits for room in its socket: what it has yet to write is stuck.
    stalled: bool,
    /// What this outbox adds to [`in_flight`] now.
    counted: usize,
}

impl Default for Queue {
    fn default() -> Queue {
        Queue {
            bytes: BytesMut::new(),
            idle_fd: -1,
            carried: 0,
            stalled: false,
            counted: 0,
        }
    }
}

#[derive(Debug, Default)]
pub struct Outbox {
    queue: Mutex<Queue>,
    /// Bytes in `queue`: checked without the lock after every command.
    queued: AtomicUsize,
    /// `Queue::carried`, read without the lock after every write.
    carried: AtomicUsize,
    /// When the output first passed the soft limit (a `Tick` in nanoseconds; 0: it is
    /// under it).
    soft_since: AtomicU64,
    /// Closed for passing a limit: nothing more is queued.
    closed: AtomicBool,
    /// The connection was woken (or a deferred wake-up is pending) and has not taken the
    /// queue since: a delivery need not wake it again (waking costs a lock inside `Notify`
    /// and, often, a task switch).
    woken: AtomicBool,
    signal: Notify,
}

impl Outbox {
    /// Queues what `encode` writes (given whether the client speaks RESP3), unless that
    /// takes the client over its output limit: then the client is closed.
    pub fn deliver(
        &self,
        server: &Server,
        owner: &Arc<ClientShared>,
        limit: &BufferLimit,
        encode: impl FnOnce(&mut BytesMut, bool),
    ) {
        if self.closed.load(Ordering::Relaxed) {
            return;
        }
        let resp3 = owner.resp.load(Ordering::Relaxed) >= 3;
        let queued = {
            let mut queue = self.queue.lock();
            encode(&mut queue.bytes, resp3);
            self.settle(&mut queue);
            queue.bytes.len()
        };
        // What the client has not taken yet: this queue and replies its connection is still
        // trying to write.
        let pending = (queued + owner.memory.output.load(Ordering::Relaxed)) as u64;
        if self.over_limit(pending, limit) {
            self.close(server, owner);
            return;
        }
        if DEFERRING.with(Cell::get) {
            if self.claim_wake() {
                DEFERRED.with(|deferred| deferred.borrow_mut().push(Arc::clone(owner)));
            }
        } else {
            self.wake();
        }
    }

    fn wake(&self) {
        if self.claim_wake() {
            self.signal.notify_one();
        }
    }

    /// Whether this delivery is the one to wake the connection (none since it last took
    /// the queue). A plain load first: in a burst of deliveries it is already claimed, and
    /// the locked swap would cost each of them an atomic read-modify-write.
    fn claim_wake(&self) -> bool {
        !self.woken.load(Ordering::Acquire) && !self.woken.swap(true, Ordering::AcqRel)
    }

    /// Queues replies of the client's own (subscribe confirmations while its replies are
    /// off): no limit applies, as to any reply.
    pub fn push_own(&self, bytes: &[u8]) {
        let mut queue = self.queue.lock();
        queue.bytes.extend_from_slice(bytes);
        self.settle(&mut queue);
        drop(queue);
        self.wake();
    }

    fn over_limit(&self, pending: u64, limit: &BufferLimit) -> bool {
        if limit.hard_bytes > 0 && pending >= limit.hard_bytes {
            return true;
        }
        if limit.soft_bytes == 0 || pending < limit.soft_bytes {
            if self.soft_since.load(Ordering::Relaxed) != 0 {
                self.soft_since.store(0, Ordering::Relaxed);
            }
            return false;
        }
        let now = Tick::now().as_nanos().max(1);
        let since =
            match self
                .soft_since
                .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => now,
                Err(since) => since,
            };
        let allowed_ns = (limit.soft_seconds.max(0) as u64).saturating_mul(1_000_000_000);
        now.saturating_sub(since) > allowed_ns
    }

    /// Stops queueing (the client is being closed for another reason).
    pub fn close_quietly(&self) {
        self.closed.store(true, Ordering::Relaxed);
    }

    #[cold]
    fn close(&self, server: &Server, owner: &ClientShared) {
        if self.closed.swap(true, Ordering::Relaxed) {
            return;
        }
        let mut queue = self.queue.lock();
        queue.bytes = BytesMut::new();
        self.settle(&mut queue);
        drop(queue);
        server
            .stats
            .client_output_buffer_limit_disconnections
            .fetch_add(1, Ordering::Relaxed);
        warn!(
            client = %owner.describe(),
            "Client scheduled to be closed ASAP for overcoming of output buffer limits."
        );
        owner.kill();
    }

    /// Records what the queue holds now (called under its lock), for [`Outbox::queued`]
    /// and [`in_flight`].
    fn settle(&self, queue: &mut Queue) {
        self.queued.store(queue.bytes.len(), Ordering::Release);
        self.carried.store(queue.carried, Ordering::Relaxed);
        let now = if queue.stalled {
            0
        } else {
            queue.bytes.len() + queue.carried
        };
        IN_FLIGHT.fetch_add(now as i64 - queue.counted as i64, Ordering::Relaxed);
        queue.counted = now;
    }

    /// Bytes waiting (without the lock).
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    /// Moves everything queued to the end of `out`; the connection writes it next (and
    /// says so, [`Outbox::written`]).
    pub fn take_into(&self, out: &mut BytesMut) {
        // Cleared before taking: a delivery after this point wakes the connection again.
        self.woken.store(false, Ordering::Release);
        let mut guard = self.queue.lock();
        let queue = &mut *guard;
        queue.carried += queue.bytes.len();
        let bytes = &mut queue.bytes;
        if out.is_empty() && bytes.len() > out.capacity() {
            std::mem::swap(out, bytes);
        } else {
            out.extend_from_slice(bytes);
            bytes.clear();
        }
        if bytes.capacity() > KEEP_CAPACITY {
            *bytes = BytesMut::new();
        }
        self.settle(queue);
    }

    /// The connection wrote (or gave up writing) what it took: it is no longer in flight.
    #[inline]
    pub fn written(&self) {
        if self.carried.load(Ordering::Relaxed) != 0 {
            let mut queue = self.queue.lock();
            queue.carried = 0;
            self.settle(&mut queue);
        }
    }

    /// The connection waits for room in its socket (`true`), or no longer does: while it
    /// waits, nothing it has to write counts as in flight.
    pub fn stalled(&self, stalled: bool) {
        let mut queue = self.queue.lock();
        queue.stalled = stalled;
        self.settle(&mut queue);
    }

    /// The connection waits for input on socket `fd` and has nothing of its own to write:
    /// deliveries may be written to the socket directly until [`Outbox::busy`]. False (and
    /// nothing changes) when something is queued: the connection takes it first.
    pub fn idle(&self, fd: i32) -> bool {
        let mut queue = self.queue.lock();
        if !queue.bytes.is_empty() {
            return false;
        }
        queue.idle_fd = fd;
        true
    }

    /// The connection is about to write or close its socket: no more direct writes.
    pub fn busy(&self) {
        self.queue.lock().idle_fd = -1;
    }

    /// Writes what is queued straight into the socket of a connection that waits for
    /// input ([`Outbox::idle`]). False when the connection must be woken to write: it is
    /// busy, or the socket did not take everything.
    #[allow(unsafe_code)]
    fn write_direct(&self, server: &Server) -> bool {
        let mut queue = self.queue.lock();
        if queue.idle_fd < 0 || queue.bytes.is_empty() {
            return false;
        }
        let bytes = &queue.bytes;
        // SAFETY: `idle_fd` is set only while the connection owns the open socket and
        // waits for input; it is cleared under this lock, held here, before the connection
        // writes or closes the socket. The pointer and length describe `bytes`, alive for
        // the call. MSG_DONTWAIT: never blocks; MSG_NOSIGNAL: a closed peer gives EPIPE
        // (the woken connection then finds out itself), not SIGPIPE.
        let sent = unsafe {
            libc::send(
                queue.idle_fd,
                bytes.as_ptr().cast::<libc::c_void>(),
                bytes.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if sent <= 0 {
            return false;
        }
        let sent = sent as usize;
        server
            .stats
            .net_output_bytes
            .fetch_add(sent as u64, Ordering::Relaxed);
        if sent < queue.bytes.len() {
            queue.bytes.advance(sent);
            self.settle(&mut queue);
            return false;
        }
        queue.bytes.clear();
        if queue.bytes.capacity() > KEEP_CAPACITY {
            queue.bytes = BytesMut::new();
        }
        self.settle(&mut queue);
        // Under the lock: a delivery queued after this wakes (or defers) anew.
        self.woken.store(false, Ordering::Release);
        true
    }

    /// Resolves when something is queued (or was, since the last time one resolved). The
    /// connection keeps one for its whole life (re-made each time it resolves): a wake-up
    /// goes to the oldest waiting one, so a second one alive beside it could miss it.
    pub fn ready(&self) -> tokio::sync::futures::Notified<'_> {
        self.signal.notified()
    }
}

impl Drop for Outbox {
    fn drop(&mut self) {
        let queue = self.queue.get_mut();
        IN_FLIGHT.fetch_sub(queue.counted as i64, Ordering::Relaxed);
    }
}

/// What every outbox adds to [`in_flight`].
static IN_FLIGHT: AtomicI64 = AtomicI64::new(0);

/// Bytes on their way out to clients this moment: messages delivered to their outboxes
/// that their connections have not taken yet, or took and are writing. Each connection is
/// woken (or written to directly) and writes them at once, as Redis writes every client's
/// replies before it reads the next command, so eviction does not count them. What a
/// client does not read (its socket is full) is not in flight and counts.
pub fn in_flight() -> u64 {
    IN_FLIGHT.load(Ordering::Relaxed).max(0) as u64
}

/// A queue emptied of more than this is given back.
const KEEP_CAPACITY: usize = 16 * 1024;

thread_local! {
    /// Set while a connection's command runs (see [`Deferred::run`]).
    static DEFERRING: Cell<bool> = const { Cell::new(false) };
    /// The receivers the running command delivered to, not woken yet.
    static DEFERRED: RefCell<Vec<Arc<ClientShared>>> = const { RefCell::new(Vec::new()) };
}

/// The receivers a connection's commands delivered to whose wake-ups it has not handed on
/// yet. Any left when it is dropped are woken.
#[derive(Debug, Default)]
pub struct Deferred(Vec<Arc<ClientShared>>);

impl Deferred {
    /// Runs `command` with its deliveries' wake-ups deferred: the receivers are kept here
    /// for [`Deferred::hand_on`] or [`Deferred::wake_all`], once the connection has written
    /// its reply. (A panic in `command` wakes them at once.)
    pub fn run<R>(&mut self, command: impl FnOnce() -> R) -> R {
        struct Restore;
        impl Drop for Restore {
            fn drop(&mut self) {
                DEFERRING.with(|deferring| deferring.set(false));
                if std::thread::panicking() {
                    let left =
                        DEFERRED.with(|deferred| std::mem::take(&mut *deferred.borrow_mut()));
                    for receiver in left {
                        receiver.outbox.signal.notify_one();
                    }
                }
            }
        }
        DEFERRING.with(|deferring| deferring.set(true));
        let restore = Restore;
        let result = command();
        drop(restore);
        DEFERRED.with(|deferred| self.0.append(&mut deferred.borrow_mut()));
        result
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Wakes the receivers' connections to write what was delivered to them.
    pub fn wake_all(&mut self) {
        for receiver in self.0.drain(..) {
            receiver.outbox.signal.notify_one();
        }
    }

    /// Hands the deliveries on: with `write` (nothing else waits to run on this thread),
    /// written straight into the sockets of the receivers whose connections wait for
    /// input; the other receivers' connections are woken.
    pub fn hand_on(&mut self, server: &Server, write: bool) {
        for receiver in self.0.drain(..) {
            if !(write && receiver.outbox.write_direct(server)) {
                receiver.outbox.signal.notify_one();
            }
        }
    }
}

impl Drop for Deferred {
    fn drop(&mut self) {
        self.wake_all();
    }
}
