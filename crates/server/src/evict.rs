//! Eviction under `maxmemory`, as `maxmemory-policy` asks (Redis' evict.c, simplified).
//!
//! When a limit is set and `used_memory` is over it, the gatekeeper calls [`perform`]
//! before it runs a command that may grow memory (so that a write that would be refused
//! for memory may go ahead once keys were removed), and CONFIG SET calls it when it changes
//! the limit or the policy. Each round draws `maxmemory-samples` candidates at random from the shards
//! (keys with a TTL only, for the `volatile-*` policies), removes the best one (the least
//! recently used for `*-lru` and `*-lfu`, which Latch approximates by the access time as it
//! keeps no frequency counter; the nearest deadline for `volatile-ttl`; any for
//! `*-random`), and reads the allocator's count again. The removal happens under the key's
//! shard lock: a `DEL` is logged to the AOF, the `evicted` keyspace event goes out, WATCHers
//! of the key fail, and INFO's `evicted_keys` counts it. A call stops once under the limit,
//! when nothing can be evicted, or after [`TIME_BUDGET`]; the next command goes on.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use latch_keyspace::{EvictionCandidate, Keyspace};
use rand::Rng;

use crate::commands::info::used_memory_now;
use crate::pubsub::notify;
use crate::server::Server;

/// Longest one call evicts for (Redis' default `maxmemory-eviction-tenacity` allows about
/// half a millisecond per call).
const TIME_BUDGET: Duration = Duration::from_millis(1);

/// Which keys a policy may evict, and how it ranks them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Policy {
    /// Least recently used first (`*-lru`, and `*-lfu` approximated).
    Lru { volatile: bool },
    /// Nearest deadline first (`volatile-ttl`).
    Ttl,
    /// Any (`*-random`).
    Random { volatile: bool },
}

impl Policy {
    /// `None` for `noeviction`.
    fn parse(name: &str) -> Option<Policy> {
        Some(match name {
            "allkeys-lru" | "allkeys-lfu" => Policy::Lru { volatile: false },
            "volatile-lru" | "volatile-lfu" => Policy::Lru { volatile: true },
            "volatile-ttl" => Policy::Ttl,
            "allkeys-random" => Policy::Random { volatile: false },
            "volatile-random" => Policy::Random { volatile: true },
            _ => return None,
        })
    }

    fn volatile(self) -> bool {
        match self {
            Policy::Lru { volatile } | Policy::Random { volatile } => volatile,
            Policy::Ttl => true,
        }
    }
}

/// What a call to [`perform`] left (Redis' `EVICT_OK`, `EVICT_RUNNING`, `EVICT_FAIL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Under the limit, or no limit.
    Under,
    /// Still over, but keys were evicted and more can be: the call ran out of time and the
    /// next one goes on. A command that grows memory is let through, as Redis does.
    Running,
    /// Over the limit with nothing (more) to evict: the policy is `noeviction`, no key fits
    /// it, or this thread may not evict now (it holds shard locks, or a script runs).
    /// Commands that grow memory are refused.
    Failed,
}

/// Evicts keys while `used_memory` is over `maxmemory` (see the module's description).
/// Does nothing when no limit is set or the server is under it, on a thread that holds
/// shard locks, or while a script runs.
pub fn perform(server: &Server) -> Outcome {
    let limit = server.config.maxmemory();
    if limit == 0 {
        return Outcome::Under;
    }
    // What lagging replicas hold is not evicted for (it would not come back).
    let limit = limit.saturating_add(server.persistence.feed.memory().beyond_backlog);
    if used_memory_now() <= limit {
        return Outcome::Under;
    }
    if Keyspace::thread_holds_shards() || server.scripting.run.is_running() {
        return Outcome::Failed;
    }
    evict_until(server, limit)
}

#[cold]
fn evict_until(server: &Server, limit: u64) -> Outcome {
    let Some(policy) = Policy::parse(&server.config.maxmemory_policy()) else {
        return Outcome::Failed;
    };
    let samples = server.config.get_i64("maxmemory-samples").max(1) as usize;
    let started = Instant::now();
    // Lazy frees this loop handed over (lazyfree-lazy-eviction): while the thread has not
    // freed them their memory still counts, and evicting on would remove keys for memory
    // already on its way back; so the loop waits for the pending count to fall back to
    // where it was before. (Frees others handed over, an UNLINK's, are not waited for.)
    let mut handed_over_at: Option<u64> = None;
    while used_memory_now() > limit {
        let pending = latch_keyspace::lazyfree::pending();
        match handed_over_at {
            Some(before) if pending > before => {
                std::thread::sleep(Duration::from_micros(50));
            }
            _ => {
                handed_over_at = None;
                let Some(candidate) = choose(&server.keyspace, policy, samples) else {
                    return Outcome::Failed;
                };
                evict(server, candidate);
                if latch_keyspace::lazyfree::pending() > pending {
                    handed_over_at = Some(pending);
                }
            }
        }
        if started.elapsed() >= TIME_BUDGET {
            return Outcome::Running;
        }
    }
    Outcome::Under
}

/// Draws `samples` candidates, shard after shard from a random one, and picks the one the
/// policy ranks first.
fn choose(keyspace: &Keyspace, policy: Policy, samples: usize) -> Option<EvictionCandidate> {
    let shards = keyspace.shard_count();
    let start = rand::thread_rng().gen_range(0..shards);
    let mut pool = Vec::with_capacity(samples);
    for step in 0..shards {
        keyspace.eviction_sample(
            (start + step) % shards,
            samples,
            policy.volatile(),
            &mut pool,
        );
        if pool.len() >= samples {
            break;
        }
    }
    let now = keyspace.clock().now();
    match policy {
        Policy::Random { .. } => pool.into_iter().next(),
        Policy::Lru { .. } => pool.into_iter().min_by_key(|c| c.access_s),
        Policy::Ttl => pool
            .into_iter()
            .min_by_key(|c| c.deadline.map_or(i64::MAX, |d| d.remaining_ms(now))),
    }
}

/// Removes one key, under its shard lock, with everything a removal reports (clients that
/// track it are told).
fn evict(server: &Server, candidate: EvictionCandidate) {
    let EvictionCandidate { db, key, .. } = candidate;
    let mut view = server.keyspace.lock_keys(&[&key[..]]);
    if !view.remove_stored_for(db, &key, latch_keyspace::lazyfree::Cause::Eviction) {
        return;
    }
    view.signal_modified(db, &key);
    // Invalidated here rather than after a command: no command ran.
    drop(view.tracked.take());
    server.tracking.evicted(server, &key);
    server.persistence.log_expired(&[(db, key.clone())]);
    server.stats.evicted_keys.fetch_add(1, Ordering::Relaxed);
    let flags = server.pubsub.notify_flags();
    if flags & notify::EVICTED != 0 {
        notify::publish(server, flags, "evicted", &key, db);
    }
    drop(view);
}
