//! What `INFO locks` reports of the native locks (LOCK.*): counts, the clients waiting now,
//! and histograms of how long grants waited, how long locks were held, and how long a
//! lock stood free before a waiter got it (the hand-over, after a release or at the
//! holder's deadline).
//!
//! The grants in force are remembered (by database and name) with their grant time and
//! deadline, so a release knows the hold time and a grant after an expiry knows the lease
//! ran out while held. Locks taken by other commands (`SET NX PX`) are not counted. The
//! table is bounded: past [`MAX_TRACKED`] grants, those whose deadline passed are dropped
//! (and counted as expired) before another is added.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Most grants remembered at once.
pub const MAX_TRACKED: usize = 100_000;

#[derive(Default)]
pub struct LockStats {
    pub grants: AtomicU64,
    pub grants_after_wait: AtomicU64,
    pub releases: AtomicU64,
    pub expired_while_held: AtomicU64,
    /// Clients waiting for a lock now.
    pub waiting: Arc<AtomicI64>,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    held: HashMap<(usize, Box<[u8]>), Held>,
    /// When a lock a waiter is in line for was released (its hand-over starts there).
    freed: HashMap<(usize, Box<[u8]>), Instant>,
    wait: Histogram,
    hold: Histogram,
    handoff: Histogram,
}

struct Held {
    token: Vec<u8>,
    granted: Instant,
    deadline: Instant,
}

/// How a grant came about.
pub struct Grant<'a> {
    pub db: usize,
    pub name: &'a [u8],
    pub token: &'a [u8],
    pub ttl: Duration,
    /// When the client started waiting, if it waited.
    pub waited_since: Option<Instant>,
    /// An exclusive lock (one holder): its hold time and expiry are tracked.
    pub exclusive: bool,
}

impl LockStats {
    /// A new grant (not the holder asking again).
    pub fn granted(&self, grant: Grant<'_>) {
        let now = Instant::now();
        self.grants.fetch_add(1, Ordering::Relaxed);
        let mut inner = self.inner.lock();
        let key = (grant.db, Box::<[u8]>::from(grant.name));
        let freed = inner.freed.remove(&key);
        let before = if grant.exclusive {
            inner.held.remove(&key)
        } else {
            None
        };
        if let Some(before) = &before {
            if before.deadline <= now {
                self.expired_while_held.fetch_add(1, Ordering::Relaxed);
            }
        }
        if let Some(since) = grant.waited_since {
            self.grants_after_wait.fetch_add(1, Ordering::Relaxed);
            inner.wait.record(now.saturating_duration_since(since));
            // Free since the release, or since the last lease ran out.
            let free_since = freed.or_else(|| {
                before
                    .as_ref()
                    .map(|held| held.deadline)
                    .filter(|deadline| *deadline <= now)
            });
            if let Some(free_since) = free_since {
                inner
                    .handoff
                    .record(now.saturating_duration_since(free_since));
            }
        }
        if !grant.exclusive {
            return;
        }
        if inner.held.len() >= MAX_TRACKED {
            let before = inner.held.len();
            inner.held.retain(|_, held| held.deadline > now);
            let dropped = before - inner.held.len();
            self.expired_while_held
                .fetch_add(dropped as u64, Ordering::Relaxed);
            if !grant.exclusive {
                return;
            }
            if inner.held.len() >= MAX_TRACKED {
                return;
            }
        }
        inner.held.insert(
            key,
            Held {
                token: grant.token.to_vec(),
                granted: now,
                deadline: now + grant.ttl,
            },
        );
    }

    /// The holder renewed its lease to `ttl` from now.
    pub fn extended(&self, db: usize, name: &[u8], ttl: Duration) {
        let key = (db, Box::<[u8]>::from(name));
        if let Some(held) = self.inner.lock().held.get_mut(&key) {
            held.deadline = Instant::now() + ttl;
        }
    }

    /// The holder released the lock; `waiters`: whether some client waits for it.
    pub fn released(&self, db: usize, name: &[u8], token: &[u8], waiters: bool) {
        let now = Instant::now();
        self.releases.fetch_add(1, Ordering::Relaxed);
        let mut inner = self.inner.lock();
        let key = (db, Box::<[u8]>::from(name));
        if let Some(held) = inner.held.remove(&key) {
            if held.token == token {
                inner
                    .hold
                    .record(now.saturating_duration_since(held.granted));
            }
        }
        if waiters {
            inner.freed.insert(key, now);
        }
    }

    /// The `# Locks` section of INFO.
    pub fn info(&self, out: &mut String) {
        use std::fmt::Write;
        let inner = self.inner.lock();
        let _ = write!(
            out,
            "# Locks\r\nlocks_held:{}\r\nlocks_waiting_clients:{}\r\nlocks_granted:{}\r\n\
             locks_granted_after_wait:{}\r\nlocks_released:{}\r\n\
             locks_expired_while_held:{}\r\n",
            inner.held.len(),
            self.waiting.load(Ordering::Relaxed).max(0),
            self.grants.load(Ordering::Relaxed),
            self.grants_after_wait.load(Ordering::Relaxed),
            self.releases.load(Ordering::Relaxed),
            self.expired_while_held.load(Ordering::Relaxed),
        );
        for (name, histogram) in [
            ("wait", &inner.wait),
            ("hold", &inner.hold),
            ("handoff", &inner.handoff),
        ] {
            let _ = write!(
                out,
                "lock_{name}_usec:count={},p50={},p99={},p99.9={},max={}\r\n",
                histogram.count,
                histogram.percentile(50.0),
                histogram.percentile(99.0),
                histogram.percentile(99.9),
                histogram.max,
            );
        }
    }
}

/// Counts a lock waiter while it lives (a field of the blocked client's waiter).
#[derive(Debug)]
pub struct WaitingCount(Arc<AtomicI64>);

impl WaitingCount {
    pub fn new(counter: &Arc<AtomicI64>) -> WaitingCount {
        counter.fetch_add(1, Ordering::Relaxed);
        WaitingCount(Arc::clone(counter))
    }
}

impl Drop for WaitingCount {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Microseconds in log-linear buckets: exact below 16, then 8 buckets per power of two
/// (at most 12.5% apart). A percentile answers its bucket's upper bound.
pub struct Histogram {
    buckets: Vec<u64>,
    count: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: vec![0; 16 + 60 * 8],
            count: 0,
            max: 0,
        }
    }
}

impl Histogram {
    fn bucket(us: u64) -> usize {
        if us < 16 {
            return us as usize;
        }
        let exponent = 63 - us.leading_zeros() as usize;
        let sub = ((us >> (exponent - 3)) & 7) as usize;
        16 + (exponent - 4) * 8 + sub
    }

    /// The largest value bucket `index` holds.
    fn upper(index: usize) -> u64 {
        if index < 16 {
            return index as u64;
        }
        let exponent = (index - 16) / 8 + 4;
        let sub = ((index - 16) % 8) as u64;
        ((8 + sub + 1) << (exponent - 3)) - 1
    }

    pub fn record(&mut self, elapsed: Duration) {
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let index = Histogram::bucket(us).min(self.buckets.len() - 1);
        self.buckets[index] += 1;
        self.count += 1;
        self.max = self.max.max(us);
    }

    /// The value at or below which `percent` of the samples fall (0 with none).
    pub fn percentile(&self, percent: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((percent / 100.0) * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (index, count) in self.buckets.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Histogram::upper(index).min(self.max);
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order() {
        let mut last = 0;
        for us in [0u64, 1, 15, 16, 17, 31, 32, 100, 1000, 123_456, 1 << 40] {
            let index = Histogram::bucket(us);
            assert!(index >= last, "{us}");
            assert!(Histogram::upper(index) >= us, "{us} above its bucket");
            assert!(
                Histogram::upper(index) <= us + us / 8,
                "{us}: bucket too wide"
            );
            last = index;
        }
    }

    #[test]
    fn percentiles() {
        let mut histogram = Histogram::default();
        for us in 1..=1000u64 {
            histogram.record(Duration::from_micros(us));
        }
        let p50 = histogram.percentile(50.0);
        assert!((500..=560).contains(&p50), "{p50}");
        let p99 = histogram.percentile(99.0);
        assert!((990..=1000).contains(&p99), "{p99}");
        assert_eq!(histogram.percentile(100.0), 1000);
        assert_eq!(Histogram::default().percentile(50.0), 0);
    }
}
