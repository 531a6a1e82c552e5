//! Per-command latency histograms (`latency-tracking`): what INFO latencystats turns into
//! percentiles and LATENCY HISTOGRAM into a cumulative distribution, as Redis' HDR
//! histograms do.
//!
//! Buckets are log-linear in nanoseconds: values under 128 ns have a bucket each; above,
//! every power of two is cut into 64 equal buckets, so a value is known to within 1/64
//! (about Redis' two significant digits). Values are capped at 2^40 ns (18 minutes). The
//! counters are allocated on a command's first recorded call (17.5 KiB), as Redis
//! allocates its histograms lazily, so commands never called cost one pointer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Sub-buckets per power of two (bits).
const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;
/// The largest value kept (larger ones count as this).
const MAX_NS: u64 = (1 << 40) - 1;
const BUCKETS: usize = bucket_of(MAX_NS) + 1;

/// The bucket holding `ns`.
const fn bucket_of(ns: u64) -> usize {
    if ns < 2 * SUB {
        return ns as usize;
    }
    let shift = 63 - ns.leading_zeros() - SUB_BITS;
    (SUB * shift as u64 + (ns >> shift)) as usize
}

/// The largest value a bucket holds.
fn highest_in(bucket: usize) -> u64 {
    let bucket = bucket as u64;
    if bucket < 2 * SUB {
        return bucket;
    }
    let shift = bucket / SUB - 1;
    let sub = bucket - SUB * shift;
    ((sub + 1) << shift) - 1
}

/// A cumulative distribution: `(bound in microseconds, calls at or under it)` pairs.
pub type Cumulative = Vec<(u64, u64)>;

#[derive(Debug, Default)]
pub struct Histogram {
    buckets: OnceLock<Box<[AtomicU64]>>,
}

impl Histogram {
    /// Counts one call that took `ns` nanoseconds.
    pub fn record(&self, ns: u64) {
        let buckets = self
            .buckets
            .get_or_init(|| (0..BUCKETS).map(|_| AtomicU64::new(0)).collect());
        buckets[bucket_of(ns.min(MAX_NS))].fetch_add(1, Ordering::Relaxed);
    }

    /// CONFIG RESETSTAT: every count back to zero.
    pub fn reset(&self) {
        if let Some(buckets) = self.buckets.get() {
            for bucket in buckets.iter() {
                bucket.store(0, Ordering::Relaxed);
            }
        }
    }

    /// The counts, or `None` when nothing was recorded since the last reset.
    fn counts(&self) -> Option<Vec<u64>> {
        let counts: Vec<u64> = self
            .buckets
            .get()?
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        counts.iter().any(|&c| c > 0).then_some(counts)
    }

    /// The calls recorded and, for each of `percentiles` (0 to 100), the largest latency
    /// (ns) of the calls up to that rank; `None` when nothing was recorded.
    pub fn percentiles(&self, percentiles: &[f64]) -> Option<(u64, Vec<u64>)> {
        let counts = self.counts()?;
        let total: u64 = counts.iter().sum();
        let values = percentiles
            .iter()
            .map(|p| {
                let wanted = ((p.clamp(0.0, 100.0) / 100.0) * total as f64 + 0.5) as u64;
                let wanted = wanted.clamp(1, total);
                let mut seen = 0;
                for (bucket, &count) in counts.iter().enumerate() {
                    seen += count;
                    if seen >= wanted {
                        return highest_in(bucket);
                    }
                }
                MAX_NS
            })
            .collect();
        Some((total, values))
    }

    /// The cumulative distribution LATENCY HISTOGRAM shows: for bounds of 1024 ns
    /// doubling, `(bound in microseconds, calls at or under it)`, each bound where the
    /// count grew, up to the slowest call.
    pub fn cumulative(&self) -> Option<(u64, Cumulative)> {
        let counts = self.counts()?;
        let total: u64 = counts.iter().sum();
        let mut out = Vec::new();
        let (mut bound, mut bucket, mut seen, mut previous) = (1024u64, 0usize, 0u64, 0u64);
        while previous < total {
            while bucket < counts.len() && highest_in(bucket) <= bound {
                seen += counts[bucket];
                bucket += 1;
            }
            if seen > previous {
                out.push((bound / 1000, seen));
            }
            previous = seen;
            bound = bound.saturating_mul(2);
            if bucket >= counts.len() {
                break;
            }
        }
        Some((total, out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_tight() {
        let mut last = 0;
        for ns in (0..100_000u64).chain([1 << 20, (1 << 33) + 12345, MAX_NS]) {
            let bucket = bucket_of(ns);
            assert!(bucket >= last && bucket < BUCKETS, "{ns}");
            last = bucket;
            let high = highest_in(bucket);
            assert!(high >= ns, "{ns} above its bucket's top {high}");
            // Within 1/64 of the value.
            assert!(high - ns <= ns / SUB, "{ns}: {high}");
        }
    }

    #[test]
    fn percentiles_and_the_distribution_follow_the_calls() {
        let h = Histogram::default();
        assert!(h.percentiles(&[50.0]).is_none());
        for _ in 0..90 {
            h.record(1_000);
        }
        for _ in 0..10 {
            h.record(1_000_000);
        }
        let (total, values) = h.percentiles(&[0.0, 50.0, 99.0, 100.0]).unwrap();
        assert_eq!(total, 100);
        assert!((1_000..1_020).contains(&values[0]), "{values:?}");
        assert!((1_000..1_020).contains(&values[1]), "{values:?}");
        assert!((1_000_000..1_016_000).contains(&values[2]), "{values:?}");
        assert_eq!(values[2], values[3]);
        let (total, cdf) = h.cumulative().unwrap();
        assert_eq!(total, 100);
        assert_eq!(cdf.first(), Some(&(1, 90)));
        assert_eq!(cdf.last().map(|c| c.1), Some(100));
        h.reset();
        assert!(h.cumulative().is_none());
    }
}
