//! What other connections send a client: pub/sub messages, keyspace events, invalidations.
//!
//! Whoever produces a message encodes it here, under a short lock, and wakes the client's
//! connection, which moves it into its reply buffer after the command it is running (or
//! at once, when it is waiting for input) and writes it out. A producer never waits for the
//! client: a client whose unwritten output passes `client-output-buffer-limit pubsub` is
//! closed and gets nothing more.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use bytes::BytesMut;
use latch_keyspace::Tick;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tracing::warn;

use crate::client::ClientShared;
use crate::config::BufferLimit;
use crate::server::Server;

#[derive(Debug, Default)]
pub struct Outbox {
    queue: Mutex<BytesMut>,
    /// Bytes in `queue`: checked without the lock after every command.
    queued: AtomicUsize,
    /// When the output first passed the soft limit (a `Tick` in nanoseconds; 0: it is
    /// under it).
    soft_since: AtomicU64,
    /// Closed for passing a limit: nothing more is queued.
    closed: AtomicBool,
    /// The connection was woken and has not taken the queue since: a delivery need not
    /// wake it again (waking costs a lock inside `Notify` and, often, a task switch).
    woken: AtomicBool,
    signal: Notify,
}

impl Outbox {
    /// Queues what `encode` writes (given whether the client speaks RESP3), unless that
    /// takes the client over its output limit: then the client is closed.
    pub fn deliver(
        &self,
        server: &Server,
        owner: &ClientShared,
        limit: &BufferLimit,
        encode: impl FnOnce(&mut BytesMut, bool),
    ) {
        if self.closed.load(Ordering::Relaxed) {
            return;
        }
        let resp3 = owner.resp.load(Ordering::Relaxed) >= 3;
        let queued = {
            let mut queue = self.queue.lock();
            encode(&mut queue, resp3);
            self.queued.store(queue.len(), Ordering::Release);
            queue.len()
        };
        // What the client has not taken yet: this queue and replies its connection is still
        // trying to write.
        let pending = (queued + owner.memory.output.load(Ordering::Relaxed)) as u64;
        if self.over_limit(pending, limit) {
            self.close(server, owner);
            return;
        }
        self.wake();
    }

    fn wake(&self) {
        if !self.woken.swap(true, Ordering::AcqRel) {
            self.signal.notify_one();
        }
    }

    /// Queues replies of the client's own (subscribe confirmations while its replies are
    /// off): no limit applies, as to any reply.
    pub fn push_own(&self, bytes: &[u8]) {
        let mut queue = self.queue.lock();
        queue.extend_from_slice(bytes);
        self.queued.store(queue.len(), Ordering::Release);
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
        *queue = BytesMut::new();
        self.queued.store(0, Ordering::Release);
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

    /// Bytes waiting (without the lock).
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    /// Moves everything queued to the end of `out`.
    pub fn take_into(&self, out: &mut BytesMut) {
        // Cleared before taking: a delivery after this point wakes the connection again.
        self.woken.store(false, Ordering::Release);
        let mut queue = self.queue.lock();
        if out.is_empty() && queue.len() > out.capacity() {
            std::mem::swap(out, &mut *queue);
        } else {
            out.extend_from_slice(&queue);
            queue.clear();
        }
        if queue.capacity() > KEEP_CAPACITY {
            *queue = BytesMut::new();
        }
        self.queued.store(0, Ordering::Release);
    }

    /// Resolves when something is queued (or was, since the last time one resolved). The
    /// connection keeps one for its whole life (re-made each time it resolves): a wake-up
    /// goes to the oldest waiting one, so a second one alive beside it could miss it.
    pub fn ready(&self) -> tokio::sync::futures::Notified<'_> {
        self.signal.notified()
    }
}

/// A queue emptied of more than this is given back.
const KEEP_CAPACITY: usize = 16 * 1024;
