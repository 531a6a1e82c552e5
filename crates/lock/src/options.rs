//! How a lock is taken and held.

use std::time::Duration;

use crate::error::LockError;
use crate::node::ReplicaWait;

/// Options of a [`crate::Locker`]. `LockOptions::new(ttl)` gives the defaults with that TTL.
#[derive(Clone, Debug)]
pub struct LockOptions {
    /// Time to live of the lock on the servers; a holder that stops renewing loses it after
    /// this long. Default 30 s.
    pub ttl: Duration,
    /// How long [`crate::Locker::lock`] waits for a lock that is held (None: one try).
    pub wait: Option<Duration>,
    /// First delay between tries while waiting; it doubles up to `max_retry_delay`, and each
    /// sleep is a random point in the upper half of it. Default 50 ms.
    pub retry_delay: Duration,
    /// Largest delay between tries. Default 1 s.
    pub max_retry_delay: Duration,
    /// Renew the lock at a third of its TTL while the guard lives. Default on.
    pub renew: bool,
    /// Stop renewing once the lock has been held this long (None: no cap). The lock then runs
    /// out one TTL later at most, and the guard reports it lost.
    pub max_hold: Option<Duration>,
    /// How long to wait for each server's answer. Default: a tenth of the TTL, at most 250 ms
    /// (Redlock wants it small against the TTL, so a dead server costs little validity).
    pub node_timeout: Option<Duration>,
    /// How many replicas of each server must acknowledge a grant or a renewal (`WAIT
    /// replicas timeout` on the same connection) before it counts; 0 (the default) waits for
    /// none. A grant that too few acknowledged is released again and the round fails
    /// ([`crate::LockError::NotReplicated`], which is retryable); a renewal that too few
    /// acknowledged does not extend the lease. See [`LockOptions::wait_replicas`].
    pub wait_replicas: u32,
    /// How long `WAIT` may take (it counts against the lease's validity like any other
    /// delay). Default 500 ms.
    pub wait_replicas_timeout: Duration,
    /// On one server that has Latch's native locks (`LOCK.ACQUIRE`), wait for the lock in
    /// the server instead of polling. Default on; off, every server is driven with the
    /// scripts, as redis-server is.
    pub native: bool,
    /// How many may hold the lock at once. Default [`LockMode::Exclusive`].
    pub mode: LockMode,
}

/// One holder at a time, several (a read lock beside other readers), or up to `n` (a
/// counting semaphore). Shared holders and permits are the members of a sorted set at the
/// lock's name (see `scripts::ACQUIRE_SHARED`); an exclusive holder keeps them all out and
/// they keep it out. On one server only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LockMode {
    #[default]
    Exclusive,
    Shared,
    Permits(u32),
}

impl LockMode {
    /// The most holders at once.
    pub(crate) fn permits(self) -> Option<u64> {
        match self {
            LockMode::Exclusive => None,
            LockMode::Shared => Some(u64::from(u32::MAX)),
            LockMode::Permits(n) => Some(u64::from(n)),
        }
    }
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions::new(Duration::from_secs(30))
    }
}

impl LockOptions {
    /// The defaults, with `ttl`.
    pub fn new(ttl: Duration) -> LockOptions {
        LockOptions {
            ttl,
            wait: None,
            retry_delay: Duration::from_millis(50),
            max_retry_delay: Duration::from_secs(1),
            renew: true,
            max_hold: None,
            node_timeout: None,
            wait_replicas: 0,
            wait_replicas_timeout: Duration::from_millis(500),
            native: true,
            mode: LockMode::Exclusive,
        }
    }

    /// Wait up to `wait` for the lock.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Stop renewing after `max_hold`.
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.max_hold = Some(max_hold);
        self
    }

    /// No automatic renewal: the lock lasts one TTL unless extended by hand.
    pub fn no_renewal(mut self) -> Self {
        self.renew = false;
        self
    }

    /// A grant or renewal counts only once `replicas` replicas of the server acknowledged it,
    /// waiting up to `timeout` (`WAIT`). Replication is asynchronous: without this, a primary
    /// that dies before its replicas got a grant loses it in the failover (Redis Sentinel),
    /// and the lock can be granted a second time while its first holder still runs.
    ///
    /// What it does not do: choose the replica the failover promotes. Sentinel takes the
    /// lowest `replica-priority`, then the largest replication offset; a replica at least as
    /// far along as one that acknowledged has the write, so the grant survives as long as one
    /// replica that acknowledged it is still a candidate of the best priority. It does not
    /// survive losing the primary and those replicas together.
    pub fn wait_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.wait_replicas = replicas;
        self.wait_replicas_timeout = timeout;
        self
    }

    pub(crate) fn replica_wait(&self) -> Option<ReplicaWait> {
        (self.wait_replicas > 0).then_some(ReplicaWait {
            replicas: self.wait_replicas,
            timeout: self.wait_replicas_timeout,
        })
    }

    /// Per-server timeout.
    pub fn node_timeout(&self) -> Duration {
        self.node_timeout.unwrap_or_else(|| {
            (self.ttl / 10).clamp(Duration::from_millis(5), Duration::from_millis(250))
        })
    }

    pub(crate) fn validate(&self) -> Result<(), LockError> {
        if self.mode == LockMode::Permits(0) {
            return Err(LockError::InvalidArgument(
                "a semaphore needs at least 1 permit".into(),
            ));
        }
        if self.ttl < Duration::from_millis(10) {
            return Err(LockError::InvalidArgument(format!(
                "ttl {:?} is too short (at least 10 ms)",
                self.ttl
            )));
        }
        if self.ttl.as_millis() > i64::MAX as u128 {
            return Err(LockError::InvalidArgument("ttl is too long".into()));
        }
        if self.retry_delay.is_zero() || self.max_retry_delay < self.retry_delay {
            return Err(LockError::InvalidArgument(
                "retry delays must be positive, and the largest at least the first".into(),
            ));
        }
        if self.wait_replicas > 0
            && (self.wait_replicas_timeout < Duration::from_millis(1)
                || self.wait_replicas_timeout >= self.ttl)
        {
            return Err(LockError::InvalidArgument(format!(
                "the timeout for replicas ({:?}) must be at least 1 ms and shorter than the ttl ({:?})",
                self.wait_replicas_timeout, self.ttl
            )));
        }
        Ok(())
    }
}
