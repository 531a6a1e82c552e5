//! [`Locker`]: acquire, extend and release a lock on one server or, with Redlock, on a majority
//! of several independent servers. One code path serves both: one server is a majority of one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use rand::Rng;

use crate::error::{LockError, LostReason};
use crate::guard::LockGuard;
use crate::node::{Node, NodeFailure};
use crate::options::LockOptions;
use crate::{fence_key, scripts, token};

/// A granted lock, before it is wrapped in a [`LockGuard`]: what the servers agreed to.
#[derive(Clone, Debug)]
pub struct Lease {
    /// The lock's name (its key on every server).
    pub name: String,
    /// This holder's random token (40 hex digits: 20 random bytes), the value of the key.
    pub token: String,
    /// The fencing token: larger than that of every earlier grant of this lock.
    pub fencing_token: u64,
    /// Until when the lock is certainly held, on this machine's monotonic clock: the TTL less
    /// the time the grant took and the allowance for clock drift.
    pub valid_until: Instant,
}

impl Lease {
    /// Time left before the lease must be considered lost (zero when past).
    pub fn remaining(&self) -> Duration {
        self.valid_until.saturating_duration_since(Instant::now())
    }
}

/// What one server reports about a lock (`latch lock status`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeStatus {
    /// `host:port` of the server.
    pub server: String,
    /// The holder's token, when the lock is held there.
    pub holder: Option<String>,
    /// Milliseconds left on the lock there (None when not held).
    pub ttl_ms: Option<i64>,
    /// The last fencing token this server granted for the lock (None: never granted).
    pub fencing_token: Option<u64>,
    /// Why the server could not be asked.
    pub error: Option<String>,
    /// On a server with Latch's native locks: the clients waiting in line for the lock
    /// there, first in line first, as (client id, milliseconds waited). None elsewhere.
    pub waiters: Option<Vec<(i64, i64)>>,
    /// A shared lock's or semaphore's holders there, as (token, milliseconds left).
    pub shared: Vec<(String, i64)>,
}

pub(crate) struct Inner {
    pub(crate) nodes: Vec<Node>,
    pub(crate) options: LockOptions,
}

/// A lock client over one server (a plain lock) or several independent servers (Redlock).
/// Cheap to clone; clones share connections.
#[derive(Clone)]
pub struct Locker {
    pub(crate) inner: Arc<Inner>,
}

/// One server's answer to the acquire script.
enum Answer {
    Granted(u64),
    Taken,
}

impl Locker {
    /// A locker over the servers at `urls` (`redis://host:port/db`). One URL: a plain lock;
    /// several: Redlock, where a majority must agree. A server may also be the primary of a
    /// Redis Sentinel service,
    /// `redis+sentinel://[user:password@]host:port[,host:port...]/SERVICE[/db]` (the
    /// sentinels, default port 26379): each new connection goes to the primary the sentinels
    /// name, and a failure or a demoted primary (`-READONLY`) makes the next call ask again.
    pub fn new<S: AsRef<str>>(urls: &[S]) -> Result<Locker, LockError> {
        Locker::with_options(urls, LockOptions::default())
    }

    /// As [`Locker::new`], with options other than the defaults.
    pub fn with_options<S: AsRef<str>>(
        urls: &[S],
        options: LockOptions,
    ) -> Result<Locker, LockError> {
        if urls.is_empty() {
            return Err(LockError::InvalidArgument("no servers given".into()));
        }
        options.validate()?;
        if urls.len() > 1 && options.mode != crate::LockMode::Exclusive {
            return Err(LockError::InvalidArgument(
                "shared locks and semaphores are on one server, not a Redlock".into(),
            ));
        }
        let nodes = urls
            .iter()
            .map(|url| Node::open(url.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Locker {
            inner: Arc::new(Inner { nodes, options }),
        })
    }

    /// The options in use.
    pub fn options(&self) -> &LockOptions {
        &self.inner.options
    }

    /// How many servers must agree: a majority, N/2 + 1.
    pub fn quorum(&self) -> usize {
        self.inner.nodes.len() / 2 + 1
    }

    /// Takes the lock, waiting for it as the options say, and returns a guard that renews it
    /// (unless renewal is off) and releases it when dropped.
    pub async fn lock(&self, name: &str) -> Result<LockGuard, LockError> {
        let lease = self.acquire(name).await?;
        Ok(LockGuard::new(self.clone(), lease))
    }

    /// Takes the lock once, without waiting: [`LockError::NotAcquired`] when it is held.
    pub async fn try_lock(&self, name: &str) -> Result<LockGuard, LockError> {
        let lease = self.try_acquire(name).await?;
        Ok(LockGuard::new(self.clone(), lease))
    }

    /// Tries until the lock is granted or `options.wait` has passed (one try without a wait),
    /// sleeping a jittered, growing delay between tries. On one server that has Latch's
    /// native locks, the wait happens in the server instead (`LOCK.ACQUIRE ... WAIT`): in
    /// line, granted the moment the lock is released or its TTL runs out.
    pub async fn acquire(&self, name: &str) -> Result<Lease, LockError> {
        let options = &self.inner.options;
        let started = Instant::now();
        let deadline = options.wait.map(|wait| started + wait);
        let mut delay = options.retry_delay;
        loop {
            let attempt = match self.native_node().await {
                Some(node) => self.native_acquire(node, name, deadline).await,
                None => self.try_acquire(name).await,
            };
            let error = match attempt {
                Ok(lease) => return Ok(lease),
                Err(err) if err.is_retryable() => err,
                Err(err) => return Err(err),
            };
            let Some(deadline) = deadline else {
                return Err(error);
            };
            let now = Instant::now();
            if now >= deadline {
                return Err(match error {
                    LockError::NotAcquired { name, .. } => LockError::NotAcquired {
                        name,
                        waited: started.elapsed(),
                    },
                    other => other,
                });
            }
            // Full jitter over the upper half keeps contenders from retrying in step.
            let sleep = rand::thread_rng().gen_range(delay / 2..=delay);
            tokio::time::sleep(sleep.min(deadline - now)).await;
            delay = (delay * 2).min(options.max_retry_delay);
        }
    }

    /// The server, when the lock is on one server that has Latch's native locks.
    async fn native_node(&self) -> Option<&Node> {
        let inner = &self.inner;
        if !inner.options.native {
            return None;
        }
        match inner.nodes.as_slice() {
            [node] if node.has_native_locks(inner.options.node_timeout()).await => Some(node),
            _ => None,
        }
    }

    /// One `LOCK.ACQUIRE`, waiting in the server until `deadline` (none: no wait). A grant
    /// after a wait counts its validity from the reply, less the drift allowance.
    async fn native_acquire(
        &self,
        node: &Node,
        name: &str,
        deadline: Option<Instant>,
    ) -> Result<Lease, LockError> {
        let options = &self.inner.options;
        let token = token::random_token();
        let ttl_ms = options.ttl.as_millis().max(1) as u64;
        let started = Instant::now();
        let wait = deadline.map(|deadline| deadline.saturating_duration_since(started));
        let granted = node
            .native_acquire(
                (name, &token, ttl_ms),
                options.mode.permits(),
                wait.filter(|wait| !wait.is_zero()),
                options.node_timeout(),
                options.replica_wait(),
            )
            .await;
        let replied = Instant::now();
        match granted {
            Ok(Some(fencing_token)) => {
                // Granted somewhere between the request and the reply: before a wait the
                // whole round trip counts, after one only the reply's way back can be
                // assumed, which the drift allowance covers.
                let spent = if wait.is_some() {
                    Duration::ZERO
                } else {
                    replied - started
                };
                match validity(options.ttl, spent) {
                    Some(validity) => Ok(Lease {
                        name: name.to_string(),
                        token,
                        fencing_token,
                        valid_until: replied - spent + validity,
                    }),
                    None => {
                        self.release_token(name, &token).await;
                        Err(LockError::NotAcquired {
                            name: name.to_string(),
                            waited: Duration::ZERO,
                        })
                    }
                }
            }
            Ok(None) => Err(LockError::NotAcquired {
                name: name.to_string(),
                waited: Duration::ZERO,
            }),
            Err(failure) => {
                // The grant may have happened: undo it, as after a failed round.
                self.release_token(name, &token).await;
                Err(failure.into_error(&node.name()))
            }
        }
    }

    /// One round of the protocol on every server: granted by a majority with validity left,
    /// or released everywhere again.
    pub async fn try_acquire(&self, name: &str) -> Result<Lease, LockError> {
        let inner = &self.inner;
        let options = &inner.options;
        let token = token::random_token();
        let fence = fence_key(name);
        let ttl_ms = options.ttl.as_millis().to_string();
        let timeout = options.node_timeout();
        let wait = options.replica_wait();
        let started = Instant::now();
        let permits = options.mode.permits().map(|n| n.to_string());
        let (script, args): (&redis::Script, Vec<&str>) = match &permits {
            None => (&scripts::ACQUIRE, vec![&token, &ttl_ms]),
            Some(permits) => (&scripts::ACQUIRE_SHARED, vec![&token, &ttl_ms, permits]),
        };
        let args = &args;

        let answers = join_all(inner.nodes.iter().map(|node| async {
            let reply: Result<(i64, i64), NodeFailure> = node
                .run_replicated(
                    script,
                    &[name, &fence],
                    args,
                    timeout,
                    wait,
                    |(granted, _)| *granted == 1,
                )
                .await;
            reply.map(|(granted, value)| {
                if granted == 1 {
                    Answer::Granted(u64::try_from(value).unwrap_or(0))
                } else {
                    Answer::Taken
                }
            })
        }))
        .await;

        let mut granted = Vec::new();
        let mut taken = 0;
        let mut failures = Vec::new();
        for (index, answer) in answers.into_iter().enumerate() {
            match answer {
                Ok(Answer::Granted(fence)) => granted.push((index, fence)),
                Ok(Answer::Taken) => taken += 1,
                Err(failure) => failures.push((index, failure)),
            }
        }

        let quorum = self.quorum();
        if granted.len() >= quorum {
            let fencing_token = granted.iter().map(|(_, fence)| *fence).max().unwrap_or(0);
            let confirmed = if inner.nodes.len() == 1 {
                true
            } else {
                self.raise_fences(name, &fence, &token, fencing_token, &granted)
                    .await
                    >= quorum
            };
            if confirmed {
                if let Some(validity) = validity(options.ttl, started.elapsed()) {
                    return Ok(Lease {
                        name: name.to_string(),
                        token,
                        fencing_token,
                        valid_until: started + validity,
                    });
                }
            }
        }

        // Not held: undo every partial grant, including on servers that did not answer in time
        // (they may have set the key after all) and grants too few replicas acknowledged.
        self.release_token(name, &token).await;

        if let Some(error) = protocol_error(inner, &mut failures) {
            return Err(error);
        }
        if inner.nodes.len() == 1 {
            if let Some((index, failure)) = failures.pop() {
                return Err(failure.into_error(&inner.nodes[index].name()));
            }
        }
        // Taken on so many servers that no majority was possible: someone else holds it.
        if granted.len() < quorum && (taken > inner.nodes.len() - quorum || failures.is_empty()) {
            return Err(LockError::NotAcquired {
                name: name.to_string(),
                waited: Duration::ZERO,
            });
        }
        Err(LockError::QuorumFailed {
            name: name.to_string(),
            granted: granted.len(),
            needed: quorum,
            failed: failures.len(),
        })
    }

    /// Redlock's second step: raises the fencing counter of the granting servers to the largest
    /// token of the majority. Returns how many confirmed.
    async fn raise_fences(
        &self,
        name: &str,
        fence: &str,
        token: &str,
        fencing_token: u64,
        granted: &[(usize, u64)],
    ) -> usize {
        let inner = &self.inner;
        let timeout = inner.options.node_timeout();
        let wait = inner.options.replica_wait();
        let value = fencing_token.to_string();
        let confirmations = join_all(granted.iter().map(|(index, _)| {
            let node = &inner.nodes[*index];
            let value = &value;
            async move {
                let reply: Result<i64, NodeFailure> = node
                    .run_replicated(
                        &scripts::RAISE_FENCE,
                        &[name, fence],
                        &[token, value],
                        timeout,
                        wait,
                        |raised| *raised == 1,
                    )
                    .await;
                matches!(reply, Ok(1))
            }
        }))
        .await;
        confirmations.into_iter().filter(|ok| *ok).count()
    }

    /// Pushes the lease's expiry to a full TTL from now on a majority. On success the lease's
    /// validity is renewed; [`LockError::Lost`] when a majority no longer holds the token.
    pub async fn extend(&self, lease: &mut Lease) -> Result<(), LockError> {
        self.extend_for(lease, self.inner.options.ttl).await
    }

    /// As [`Locker::extend`], to `ttl` from now instead of the configured TTL.
    pub async fn extend_for(&self, lease: &mut Lease, ttl: Duration) -> Result<(), LockError> {
        let inner = &self.inner;
        let options = &inner.options;
        let timeout = options.node_timeout();
        let wait = options.replica_wait();
        let ttl_ms = ttl.as_millis().max(1).to_string();
        let started = Instant::now();
        if started >= lease.valid_until {
            return Err(LockError::Lost {
                name: lease.name.clone(),
                reason: LostReason::Expired,
            });
        }
        let name = lease.name.as_str();
        let token = lease.token.as_str();
        let script = match options.mode {
            crate::LockMode::Exclusive => &*scripts::EXTEND,
            _ => &*scripts::EXTEND_SHARED,
        };
        let answers = join_all(inner.nodes.iter().map(|node| {
            let ttl_ms = &ttl_ms;
            async move {
                node.run_replicated::<i64>(
                    script,
                    &[name],
                    &[token, ttl_ms],
                    timeout,
                    wait,
                    |extended| *extended == 1,
                )
                .await
            }
        }))
        .await;
        let mut extended = 0;
        let mut refused = 0;
        let mut failures = Vec::new();
        for (index, answer) in answers.into_iter().enumerate() {
            match answer {
                Ok(1) => extended += 1,
                Ok(_) => refused += 1,
                Err(failure) => failures.push((index, failure)),
            }
        }
        let quorum = self.quorum();
        if extended >= quorum {
            // Validity counts from before the requests: each server's new expiry is later.
            if let Some(validity) = validity(ttl, started.elapsed()) {
                lease.valid_until = started + validity;
                return Ok(());
            }
        }
        if refused > inner.nodes.len() - quorum {
            return Err(LockError::Lost {
                name: lease.name.clone(),
                reason: LostReason::Replaced,
            });
        }
        if let Some(error) = protocol_error(inner, &mut failures) {
            return Err(error);
        }
        if inner.nodes.len() == 1 {
            if let Some((index, failure)) = failures.pop() {
                return Err(failure.into_error(&inner.nodes[index].name()));
            }
        }
        Err(LockError::QuorumFailed {
            name: lease.name.clone(),
            granted: extended,
            needed: quorum,
            failed: failures.len(),
        })
    }

    /// Deletes the lock on every server where it still holds this lease's token (never a plain
    /// DEL). [`LockError::Lost`] when no majority still held it: the lease had expired, and
    /// what was done under it after that was not protected.
    pub async fn release(&self, lease: &Lease) -> Result<(), LockError> {
        let released = self.release_token(&lease.name, &lease.token).await;
        if released >= self.quorum() {
            Ok(())
        } else {
            Err(LockError::Lost {
                name: lease.name.clone(),
                reason: if Instant::now() >= lease.valid_until {
                    LostReason::Expired
                } else {
                    LostReason::Replaced
                },
            })
        }
    }

    /// Compare-and-delete on every server in parallel; returns how many deleted the key.
    pub(crate) async fn release_token(&self, name: &str, token: &str) -> usize {
        let inner = &self.inner;
        let timeout = inner.options.node_timeout();
        let script = match inner.options.mode {
            crate::LockMode::Exclusive => &*scripts::RELEASE,
            _ => &*scripts::RELEASE_SHARED,
        };
        let answers =
            join_all(inner.nodes.iter().map(|node| async move {
                node.run::<i64>(script, &[name], &[token], timeout).await
            }))
            .await;
        answers.into_iter().filter(|a| matches!(a, Ok(1))).count()
    }

    /// Whether a majority still holds the lease's token: a round trip that confirms the lock
    /// before a write that matters (the local check of [`LockGuard::ensure_held`] needs none).
    pub async fn still_held(&self, lease: &Lease) -> Result<bool, LockError> {
        let statuses = self.status(&lease.name).await;
        let holding = statuses
            .iter()
            .filter(|status| status.holder.as_deref() == Some(lease.token.as_str()))
            .count();
        let failed = statuses.iter().filter(|s| s.error.is_some()).count();
        if holding >= self.quorum() {
            return Ok(Instant::now() < lease.valid_until);
        }
        if failed > 0 && holding + failed >= self.quorum() {
            return Err(LockError::QuorumFailed {
                name: lease.name.clone(),
                granted: holding,
                needed: self.quorum(),
                failed,
            });
        }
        Ok(false)
    }

    /// What each server says about the lock: holder token, remaining TTL, last fencing token.
    pub async fn status(&self, name: &str) -> Vec<NodeStatus> {
        let inner = &self.inner;
        let timeout = inner.options.node_timeout();
        let fence = fence_key(name);
        let fence = fence.as_str();
        join_all(inner.nodes.iter().map(|node| async move {
            type Status = (
                String,
                Option<String>,
                i64,
                Option<String>,
                Vec<(String, i64)>,
            );
            let reply: Result<Status, NodeFailure> = node
                .run(&scripts::STATUS, &[name, fence], &[], timeout)
                .await;
            let waiters = if reply.is_ok() && node.has_native_locks(timeout).await {
                lock_waiters(node, name, timeout).await
            } else {
                None
            };
            match reply {
                Ok((_, holder, pttl, fencing_token, shared)) => NodeStatus {
                    server: node.name(),
                    ttl_ms: (holder.is_some() || !shared.is_empty()).then_some(pttl),
                    holder,
                    fencing_token: fencing_token.and_then(|f| f.parse().ok()),
                    error: None,
                    waiters,
                    shared,
                },
                Err(failure) => NodeStatus {
                    server: node.name(),
                    holder: None,
                    ttl_ms: None,
                    fencing_token: None,
                    error: Some(failure.detail()),
                    waiters: None,
                    shared: Vec::new(),
                },
            }
        }))
        .await
    }
}

/// The waiters `LOCK.INFO` lists, as (client id, milliseconds waited).
async fn lock_waiters(node: &Node, name: &str, timeout: Duration) -> Option<Vec<(i64, i64)>> {
    let mut ask = redis::pipe();
    ask.cmd("LOCK.INFO").arg(name);
    let replies: Vec<redis::Value> = node.query(&ask, timeout).await.ok()?;
    let fields = match replies.into_iter().next()? {
        redis::Value::Array(fields) => fields,
        redis::Value::Map(pairs) => pairs.into_iter().flat_map(|(k, v)| [k, v]).collect(),
        _ => return None,
    };
    let at = fields
        .iter()
        .position(|field| *field == redis::Value::BulkString(b"waiters".to_vec()))?;
    let redis::Value::Array(waiters) = fields.get(at + 1)? else {
        return None;
    };
    waiters
        .iter()
        .map(|waiter| match waiter {
            redis::Value::Array(pair) => match pair.as_slice() {
                [redis::Value::Int(id), redis::Value::Int(ms)] => Some((*id, *ms)),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// Redlock's validity: the TTL less the time spent and a drift allowance of 1% of the TTL plus
/// 2 ms. None when nothing is left.
pub fn validity(ttl: Duration, elapsed: Duration) -> Option<Duration> {
    let drift = ttl / 100 + Duration::from_millis(2);
    ttl.checked_sub(elapsed)
        .and_then(|left| left.checked_sub(drift))
        .filter(|left| !left.is_zero())
}

/// The first error reply among `failures` (a WRONGTYPE lock key, a server without scripting),
/// which retrying will not cure.
fn protocol_error(inner: &Inner, failures: &mut Vec<(usize, NodeFailure)>) -> Option<LockError> {
    let position = failures
        .iter()
        .position(|(_, failure)| matches!(failure, NodeFailure::Protocol(_)))?;
    let (index, failure) = failures.swap_remove(position);
    Some(failure.into_error(&inner.nodes[index].name()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validity_subtracts_elapsed_and_drift() {
        let ttl = Duration::from_millis(10_000);
        // drift = 100 ms + 2 ms
        assert_eq!(
            validity(ttl, Duration::from_millis(500)),
            Some(Duration::from_millis(9_398))
        );
        assert_eq!(validity(ttl, Duration::from_millis(9_898)), None);
        assert_eq!(
            validity(ttl, Duration::from_millis(9_897)),
            Some(Duration::from_millis(1))
        );
        assert_eq!(validity(Duration::from_millis(2), Duration::ZERO), None);
    }
}
