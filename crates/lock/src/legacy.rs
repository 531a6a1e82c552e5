//! **Legacy.** The SETNX lock of the old SETNX documentation page, implemented as written, for
//! programs that must share a lock with old clients that use it.
//!
//! The key holds a Unix time in seconds after which the lock counts as free:
//!
//! 1. `SETNX lock.foo <now + timeout + 1>`: 1 means the lock is ours.
//! 2. Otherwise `GET lock.foo`: a time still in the future means it is held; wait and retry.
//! 3. A time in the past means the holder died: `GETSET lock.foo <now + timeout + 1>`. If the
//!    old value it returns is still a past time, the lock is ours; if not, another client took
//!    it over first, and we start again (having pushed its expiry a little, which is harmless).
//! 4. To release, check that our time has not passed before `DEL`: past it, another client may
//!    hold the lock and the DEL would free theirs.
//!
//! What it cannot guarantee, and why new code should use [`crate::Locker`]:
//! - It trusts every client's clock: a client whose clock runs ahead takes over live locks.
//! - Time has one-second granularity, and the key has no TTL on the server: a lock whose
//!   holders all died stays until a client comes to take it over.
//! - The check before `DEL` and the `DEL` are two commands: the lock can expire and be taken
//!   over between them, and the `DEL` then frees the new holder's lock.
//! - A holder that pauses past its time keeps writing, and nothing orders it against the next
//!   holder: there is no fencing token.
//! - Never use the shortcut of `DEL` then `SETNX` to take over an expired lock: two clients
//!   that both saw it expired can both succeed (the page's C1/C2 race; the tests show it).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::error::{LockError, LostReason};
use crate::node::{Node, NodeFailure};

/// A lock taken with the legacy algorithm; see the module documentation for its limits.
pub struct LegacyLock {
    node: Node,
    name: String,
    timeout_secs: u64,
    retry_delay: Duration,
    call_timeout: Duration,
}

/// A held legacy lock: the Unix time (seconds) at which it stops being valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LegacyLease {
    pub expires_at_unix_secs: u64,
}

/// The outcome of one attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attempt {
    Acquired(LegacyLease),
    /// Held by someone whose time has not passed.
    Held,
    /// The lock looked expired but another client took it over first.
    LostTakeover,
}

fn unix_now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl LegacyLock {
    /// The lock `name` on the server at `url`, valid for `timeout_secs` after it is taken.
    pub fn new(url: &str, name: &str, timeout_secs: u64) -> Result<LegacyLock, LockError> {
        Ok(LegacyLock {
            node: Node::open(url)?,
            name: name.to_string(),
            timeout_secs,
            retry_delay: Duration::from_secs(1),
            call_timeout: Duration::from_secs(2),
        })
    }

    /// The delay between tries while the lock is held (the page suggests one second).
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.retry_delay = delay;
        self
    }

    async fn call<T: redis::FromRedisValue>(&self, command: redis::Cmd) -> Result<T, LockError> {
        let mut pipeline = redis::pipe();
        pipeline.add_command(command);
        self.node
            .query::<(T,)>(&pipeline, self.call_timeout)
            .await
            .map(|(value,)| value)
            .map_err(|failure: NodeFailure| failure.into_error(&self.node.name()))
    }

    /// One pass of steps 1 to 3.
    pub async fn attempt(&self) -> Result<Attempt, LockError> {
        let now = unix_now_secs();
        let expires_at = now + self.timeout_secs + 1;
        let set: i64 = self
            .call(redis::cmd("SETNX").arg(&self.name).arg(expires_at).clone())
            .await?;
        if set == 1 {
            return Ok(Attempt::Acquired(LegacyLease {
                expires_at_unix_secs: expires_at,
            }));
        }
        let current: Option<String> = self.call(redis::cmd("GET").arg(&self.name).clone()).await?;
        let Some(current) = current else {
            // Released between our SETNX and GET: try again at once.
            return Box::pin(self.attempt()).await;
        };
        // A value that is no time at all is not ours to take over.
        if parse_time(&current).is_none_or(|time| time > now) {
            return Ok(Attempt::Held);
        }
        let old: Option<String> = self
            .call(redis::cmd("GETSET").arg(&self.name).arg(expires_at).clone())
            .await?;
        // Still the expired time (or gone): the takeover is ours. A live time means another
        // client took it over between our GET and GETSET.
        let still_expired = old
            .as_deref()
            .is_none_or(|old| parse_time(old).is_some_and(|time| time <= now));
        Ok(if still_expired {
            Attempt::Acquired(LegacyLease {
                expires_at_unix_secs: expires_at,
            })
        } else {
            Attempt::LostTakeover
        })
    }

    /// Tries until acquired or `wait` has passed (None: one pass).
    pub async fn acquire(&self, wait: Option<Duration>) -> Result<LegacyLease, LockError> {
        let started = Instant::now();
        loop {
            match self.attempt().await? {
                Attempt::Acquired(lease) => return Ok(lease),
                // Someone was faster: the page says to start again from the first step.
                Attempt::LostTakeover => continue,
                Attempt::Held => {}
            }
            match wait {
                Some(wait) if started.elapsed() < wait => {
                    let left = wait - started.elapsed();
                    tokio::time::sleep(self.retry_delay.min(left)).await;
                }
                _ => {
                    return Err(LockError::NotAcquired {
                        name: self.name.clone(),
                        waited: started.elapsed(),
                    })
                }
            }
        }
    }

    /// Step 4: DEL only while our time has not passed. [`LockError::Lost`] when it has (the
    /// key is then left alone: it may be another client's lock now).
    pub async fn release(&self, lease: LegacyLease) -> Result<(), LockError> {
        if unix_now_secs() >= lease.expires_at_unix_secs {
            return Err(LockError::Lost {
                name: self.name.clone(),
                reason: LostReason::Expired,
            });
        }
        let _: i64 = self.call(redis::cmd("DEL").arg(&self.name).clone()).await?;
        Ok(())
    }
}

fn parse_time(value: &str) -> Option<u64> {
    value.trim().parse().ok()
}
