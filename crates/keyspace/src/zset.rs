//! The sorted set value: members with scores, ordered by (score, member).
//!
//! Rank lookups walk the ordered set (O(N)); a rank-indexed tree would make them O(log N)
//! if that ever matters.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;

/// A score with the order sorted sets use. Scores are never NaN, so `<` is a total order;
/// as in Redis, -0 and 0 compare equal (members then order them).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Score(pub f64);

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.partial_cmp(&other.0).unwrap_or(Ordering::Equal)
    }
}

/// One end of a score interval (`ZRANGEBYSCORE`'s `1.5` or `(1.5`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreBound {
    pub score: f64,
    pub exclusive: bool,
}

/// Members by name (for ZSCORE) and by (score, member) order (for ranges).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SortedSet {
    scores: HashMap<Vec<u8>, Score>,
    order: BTreeSet<(Score, Vec<u8>)>,
}

impl SortedSet {
    pub fn new() -> SortedSet {
        SortedSet::default()
    }

    pub fn len(&self) -> usize {
        self.scores.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).map(|s| s.0)
    }

    /// Adds or updates a member; returns its previous score. A score of -0 is stored as 0:
    /// Redis' compact encoding keeps scores as text that drops the sign of zero, and small
    /// sets are what clients see nearly always.
    pub fn insert(&mut self, member: &[u8], score: f64) -> Option<f64> {
        debug_assert!(!score.is_nan());
        let score = if score == 0.0 { 0.0 } else { score };
        let previous = self.scores.insert(member.to_vec(), Score(score));
        if let Some(old) = previous {
            self.order.remove(&(old, member.to_vec()));
        }
        self.order.insert((Score(score), member.to_vec()));
        previous.map(|s| s.0)
    }

    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let old = self.scores.remove(member)?;
        self.order.remove(&(old, member.to_vec()));
        Some(old.0)
    }

    /// Members in ascending (score, member) order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], f64)> + ExactSizeIterator {
        self.order.iter().map(|(s, m)| (m.as_slice(), s.0))
    }

    /// 0-based rank of a member in ascending order (O(N): counts the members before it).
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let score = *self.scores.get(member)?;
        Some(self.order.range(..(score, member.to_vec())).count())
    }

    /// Members whose score lies between `min` and `max`, ascending (reverse it for descending).
    pub fn range_by_score(
        &self,
        min: ScoreBound,
        max: ScoreBound,
    ) -> impl DoubleEndedIterator<Item = (&[u8], f64)> {
        // The empty member sorts first among equal scores, so (s, "") starts score s.
        let lower_score = if min.exclusive {
            min.score.next_up()
        } else {
            min.score
        };
        let lower = (Score(lower_score), Vec::new());
        let upper = if max.exclusive {
            Bound::Excluded((Score(max.score), Vec::new()))
        } else if max.score == f64::INFINITY {
            Bound::Unbounded
        } else {
            Bound::Excluded((Score(max.score.next_up()), Vec::new()))
        };
        let empty = (min.exclusive && min.score == f64::INFINITY)
            || match &upper {
                Bound::Excluded(end) => lower >= *end,
                _ => false,
            };
        // BTreeSet::range panics on inverted bounds; an empty interval gets `[x, x)`.
        let range = if empty {
            let probe = (Score(0.0), Vec::new());
            self.order
                .range((Bound::Included(probe.clone()), Bound::Excluded(probe)))
        } else {
            self.order.range((Bound::Included(lower), upper))
        };
        range.map(|(s, m)| (m.as_slice(), s.0))
    }

    /// The member with the lowest (score, member), removed.
    pub fn pop_min(&mut self) -> Option<(Vec<u8>, f64)> {
        let (score, member) = self.order.pop_first()?;
        self.scores.remove(&member);
        Some((member, score.0))
    }

    /// The member with the highest (score, member), removed.
    pub fn pop_max(&mut self) -> Option<(Vec<u8>, f64)> {
        let (score, member) = self.order.pop_last()?;
        self.scores.remove(&member);
        Some((member, score.0))
    }

    /// The member at 0-based ascending rank `index`, with its score (O(N)).
    pub fn nth(&self, index: usize) -> Option<(&[u8], f64)> {
        self.iter().nth(index)
    }

    /// Heap bytes, roughly.
    pub fn heap_bytes(&self) -> usize {
        self.scores.keys().map(|m| 2 * m.capacity() + 48).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(score: f64, exclusive: bool) -> ScoreBound {
        ScoreBound { score, exclusive }
    }

    fn members(set: &SortedSet, min: ScoreBound, max: ScoreBound) -> Vec<String> {
        set.range_by_score(min, max)
            .map(|(m, _)| String::from_utf8_lossy(m).into_owned())
            .collect()
    }

    #[test]
    fn score_ranges() {
        let mut set = SortedSet::new();
        for (m, s) in [
            ("a", 1.0),
            ("b", 2.0),
            ("c", 2.0),
            ("d", 3.0),
            ("e", f64::INFINITY),
        ] {
            set.insert(m.as_bytes(), s);
        }
        assert_eq!(
            members(&set, bound(2.0, false), bound(2.0, false)),
            ["b", "c"]
        );
        assert_eq!(members(&set, bound(2.0, true), bound(3.0, false)), ["d"]);
        assert_eq!(
            members(&set, bound(1.0, false), bound(3.0, true)),
            ["a", "b", "c"]
        );
        assert_eq!(
            members(&set, bound(2.0, true), bound(2.0, true)),
            Vec::<String>::new()
        );
        assert_eq!(
            members(&set, bound(3.0, false), bound(1.0, false)),
            Vec::<String>::new()
        );
        let all = bound(f64::INFINITY, false);
        assert_eq!(members(&set, bound(f64::NEG_INFINITY, false), all).len(), 5);
        assert_eq!(
            members(&set, bound(f64::INFINITY, true), all),
            Vec::<String>::new()
        );
        assert_eq!(members(&set, bound(3.0, true), all), ["e"]);
        let rev: Vec<&[u8]> = set
            .range_by_score(bound(1.0, true), bound(3.0, false))
            .rev()
            .map(|(m, _)| m)
            .collect();
        assert_eq!(rev, [&b"d"[..], b"c", b"b"]);
    }

    #[test]
    fn negative_zero_equals_zero() {
        let mut set = SortedSet::new();
        set.insert(b"b", -0.0);
        set.insert(b"a", 0.0);
        let order: Vec<&[u8]> = set.iter().map(|(m, _)| m).collect();
        assert_eq!(order, [&b"a"[..], b"b"]);
        assert!(set.score(b"b").is_some_and(|s| s.is_sign_positive()));
        assert_eq!(set.remove(b"b"), Some(0.0));
        assert_eq!(set.pop_max(), Some((b"a".to_vec(), 0.0)));
        assert!(set.is_empty());
    }
}
