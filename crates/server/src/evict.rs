//! Eviction under `maxmemory`, as `maxmemory-policy` asks (Redis' evict.c, simplified).
//!
//! When a limit is set and `used_memory` is over it, the gatekeeper calls [`perform`]
//! before every command (so that a write that would be refused for memory may go ahead
//! once keys were removed), and CONFIG SET calls it when it changes the limit or the
//! policy. Each round draws `maxmemory-samples` candidates at random from the shards (keys
//! with a TTL only, for the `volatile-*` policies), removes the best one (the least
//! recently used for `*-lru`; the lowest LFU counter, `latch_keyspace::lfu`, for `*-lfu`;
//! the nearest deadline for `volatile-ttl`; any for `*-random`), and reads the memory
//! count again. The removal happens under the key's
//! shard lock: a `DEL` is logged to the AOF, the `evicted` keyspace event goes out, WATCHers
//! of the key fail, and INFO's `evicted_keys` counts it. A call stops once under the limit,
//! when nothing can be evicted, or when it has run longer than `maxmemory-eviction-tenacity`
//! allows ([`time_limit`]); then the [`Evictor`] task goes on between other work, as Redis'
//! eviction timer does, and so does the next command. Nothing is evicted while clients are
//! paused, or on a replica with `replica-ignore-maxmemory`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use latch_keyspace::{lfu, EvictionCandidate, Keyspace};
use rand::Rng;

use crate::commands::info::used_memory_now;
use crate::pubsub::notify;
use crate::server::Server;

/// How long one call may evict for, from `maxmemory-eviction-tenacity` as Redis reads it:
/// 50 µs a step up to 10 (the default, 500 µs), then 15% more a step (about two minutes at
/// 99); 100 has no limit (`None`). The clock is read every [`CHECK_EVERY`] keys.
fn time_limit(tenacity: i64) -> Option<Duration> {
    match tenacity {
        ..=10 => Some(Duration::from_micros(50 * tenacity.max(0) as u64)),
        11..=99 => Some(Duration::from_micros(
            (500.0 * 1.15f64.powi(tenacity as i32 - 10)) as u64,
        )),
        _ => None,
    }
}

/// Keys evicted between two readings of the clock (as Redis).
const CHECK_EVERY: u64 = 16;

/// The background eviction Redis runs from a timer once a call ran out of time: it evicts
/// again and again, yielding between calls, until under the limit or nothing is left.
#[derive(Debug, Default)]
pub struct Evictor {
    running: AtomicBool,
    wake: tokio::sync::Notify,
    /// Since when (µs on [`crate::jemalloc::clock_us`], 0: not) the server is over the limit.
    over_since_us: AtomicU64,
    /// Time spent over the limit in earlier spells, µs.
    over_before_us: AtomicU64,
}

impl Evictor {
    /// Keeps the time spent over the limit (INFO's `*_eviction_exceeded_time`): a spell
    /// starts when a call could not get under, ends when one finds the server under.
    fn note(&self, outcome: Outcome) {
        let since = self.over_since_us.load(Ordering::Relaxed);
        match outcome {
            Outcome::Under
                if since != 0
                    && self
                        .over_since_us
                        .compare_exchange(since, 0, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok() =>
            {
                let spell = crate::jemalloc::clock_us().saturating_sub(since);
                self.over_before_us.fetch_add(spell, Ordering::Relaxed);
            }
            Outcome::Running | Outcome::Failed if since == 0 => {
                let _ = self.over_since_us.compare_exchange(
                    0,
                    crate::jemalloc::clock_us().max(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
            _ => {}
        }
    }

    /// Milliseconds over the limit in all (`total_eviction_exceeded_time`) and in the
    /// spell going on now (`current_eviction_exceeded_time`).
    pub fn exceeded_ms(&self) -> (u64, u64) {
        let since = self.over_since_us.load(Ordering::Relaxed);
        let current = if since == 0 {
            0
        } else {
            crate::jemalloc::clock_us().saturating_sub(since)
        };
        let total = self.over_before_us.load(Ordering::Relaxed) + current;
        (total / 1000, current / 1000)
    }

    /// Clears both (CONFIG RESETSTAT; a spell going on starts again at the next call).
    pub fn reset_stats(&self) {
        self.over_before_us.store(0, Ordering::Relaxed);
        self.over_since_us.store(0, Ordering::Relaxed);
    }

    fn start(&self) {
        if !self.running.swap(true, Ordering::AcqRel) {
            self.wake.notify_one();
        }
    }

    /// Whether the background eviction is under way.
    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }
}

/// The task behind [`Evictor`], for the server's life.
pub async fn background(server: std::sync::Arc<Server>) {
    loop {
        server.evictor.wake.notified().await;
        while server.evictor.is_running() {
            if perform_once(&server) != Outcome::Running {
                server.evictor.running.store(false, Ordering::Release);
                break;
            }
            tokio::task::yield_now().await;
        }
    }
}

/// Which keys a policy may evict, and how it ranks them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Policy {
    /// Least recently used first (`*-lru`).
    Lru { volatile: bool },
    /// Least frequently used first: the lowest LFU counter after its decay (`*-lfu`).
    Lfu { volatile: bool },
    /// Nearest deadline first (`volatile-ttl`).
    Ttl,
    /// Any (`*-random`).
    Random { volatile: bool },
}

impl Policy {
    /// `None` for `noeviction`.
    fn parse(name: &str) -> Option<Policy> {
        Some(match name {
            "allkeys-lru" => Policy::Lru { volatile: false },
            "volatile-lru" => Policy::Lru { volatile: true },
            "allkeys-lfu" => Policy::Lfu { volatile: false },
            "volatile-lfu" => Policy::Lfu { volatile: true },
            "volatile-ttl" => Policy::Ttl,
            "allkeys-random" => Policy::Random { volatile: false },
            "volatile-random" => Policy::Random { volatile: true },
            _ => return None,
        })
    }

    fn volatile(self) -> bool {
        match self {
            Policy::Lru { volatile } | Policy::Lfu { volatile } | Policy::Random { volatile } => {
                volatile
            }
            Policy::Ttl => true,
        }
    }
}

/// Tells the keyspace whether keys count accesses (an LFU policy, with `lfu-log-factor`
/// and `lfu-decay-time`) or keep access times: at start and whenever one of the three
/// options changes. Switching reinterprets every key's field, as in Redis.
pub fn apply_policy(server: &Server) {
    let lfu = matches!(
        Policy::parse(server.config.maxmemory_policy_name()),
        Some(Policy::Lfu { .. })
    );
    server.keyspace.set_lfu(lfu.then(|| {
        lfu::Params {
            log_factor: server
                .config
                .get_i64("lfu-log-factor")
                .clamp(0, u32::MAX as i64) as u32,
            decay_minutes: server
                .config
                .get_i64("lfu-decay-time")
                .clamp(0, u32::MAX as i64) as u32,
        }
    }));
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
    let outcome = perform_once(server);
    if outcome == Outcome::Running {
        server.evictor.start();
    }
    outcome
}

fn perform_once(server: &Server) -> Outcome {
    let limit = server.config.maxmemory();
    if limit == 0 {
        server.evictor.note(Outcome::Under);
        return Outcome::Under;
    }
    // What lagging replicas hold is not evicted for (it would not come back).
    let limit = limit.saturating_add(server.persistence.feed.memory().beyond_backlog);
    if counted_now() <= limit {
        server.evictor.note(Outcome::Under);
        return Outcome::Under;
    }
    if Keyspace::thread_holds_shards() || server.scripting.run.is_running() {
        return Outcome::Failed;
    }
    // The data set stays as it is while clients are paused (as expiry does) and, on a
    // replica, as its primary sends it.
    if (server.pause.may_be_paused()
        && server.pause.in_force(&server.keyspace) != crate::pause::PauseMode::Off)
        || (server.replication.is_replica() && server.config.get_bool("replica-ignore-maxmemory"))
    {
        return Outcome::Under;
    }
    let started = std::time::Instant::now();
    let outcome = evict_until(server, limit);
    let ms = started.elapsed().as_millis() as u64;
    crate::commands::server::record_latency(server, "eviction-cycle", ms);
    server.evictor.note(outcome);
    outcome
}

#[cold]
fn evict_until(server: &Server, limit: u64) -> Outcome {
    let Some(policy) = Policy::parse(server.config.maxmemory_policy_name()) else {
        return Outcome::Failed;
    };
    let samples = server.config.maxmemory_samples();
    let time_limit = time_limit(server.config.maxmemory_eviction_tenacity());
    let started = Instant::now();
    let used = counted_now();
    if used <= limit {
        return Outcome::Under;
    }
    // As Redis does, what must go is fixed now and only what the removals themselves free
    // counts against it: telling tracking clients, keyspace events and the logs take
    // memory too, and counting that would evict on and on (the feedback loop of Redis'
    // issue 8069).
    let to_free = used - limit;
    let mut freed = 0;
    // Lazy frees this loop handed over (lazyfree-lazy-eviction): while the thread has not
    // freed them their memory still counts, and evicting on would remove keys for memory
    // already on its way back; so the loop waits for the pending count to fall back to
    // where it was before, then looks at the whole count again. (Frees others handed over,
    // an UNLINK's, are not waited for.)
    let mut handed_over_at: Option<u64> = None;
    let mut evicted = 0u64;
    while freed < to_free {
        let pending = latch_keyspace::lazyfree::pending();
        match handed_over_at {
            Some(before) if pending > before => {
                std::thread::sleep(Duration::from_micros(50));
            }
            Some(_) => {
                handed_over_at = None;
                if counted_now() <= limit {
                    return Outcome::Under;
                }
            }
            None => {
                let Some(candidate) = choose(&server.keyspace, policy, samples) else {
                    return Outcome::Failed;
                };
                freed += evict(server, candidate);
                evicted += 1;
                if latch_keyspace::lazyfree::pending() > pending {
                    handed_over_at = Some(pending);
                }
                if !evicted.is_multiple_of(CHECK_EVERY) {
                    continue;
                }
            }
        }
        if time_limit.is_some_and(|limit| started.elapsed() > limit) {
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
        Policy::Lfu { .. } => {
            let minute = lfu::minutes(now.wall_s());
            let decay = keyspace.lfu().map_or(0, |params| params.decay_minutes);
            pool.into_iter()
                .min_by_key(|c| lfu::decayed(c.access_s, minute, decay))
        }
        Policy::Ttl => pool
            .into_iter()
            .min_by_key(|c| c.deadline.map_or(i64::MAX, |d| d.remaining_ms(now))),
    }
}

/// Removes one key, under its shard lock, with everything a removal reports (clients that
/// track it are told).
/// Returns the bytes the removal freed (0 when the key went meanwhile).
fn evict(server: &Server, candidate: EvictionCandidate) -> u64 {
    let EvictionCandidate { db, key, .. } = candidate;
    let mut view = server.keyspace.lock_keys(&[&key[..]]);
    let before = held_now();
    if !view.remove_stored_for(db, &key, latch_keyspace::lazyfree::Cause::Eviction) {
        return 0;
    }
    let freed = before.saturating_sub(held_now());
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
    freed.max(0) as u64
}

/// `used_memory` less what is on its way out to clients this moment (messages delivered
/// to their outboxes, not yet written, their sockets not full: `pubsub::in_flight`): Redis
/// writes those before it reads the next command, so they never make it evict.
fn counted_now() -> u64 {
    used_memory_now().saturating_sub(crate::pubsub::in_flight())
}

/// A reading to take differences of around one removal: what this thread holds (the
/// removal frees on this thread; others meanwhile write out replies and free their
/// buffers, which the removal did not free), else `used_memory`.
fn held_now() -> i64 {
    crate::jemalloc::this_thread_net().unwrap_or_else(|| used_memory_now() as i64)
}
