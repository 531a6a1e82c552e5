//! Time as the keyspace sees it.
//!
//! Relative TTLs (`EX`, `PX`, `EXPIRE`, ...) are deadlines on a monotonic clock, so a
//! wall-clock jump can neither expire a lock early nor keep it alive late. Absolute ones
//! (`EXAT`, `PXAT`, `EXPIREAT`, ...) are deadlines on the wall clock, as in Redis. Both
//! clocks carry an offset that tests (and `DEBUG JUMP-CLOCK`) can move, so TTL tests control
//! time instead of sleeping.

use std::num::NonZeroU64;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// One frozen reading of both clocks. A command (or a whole script) sees one `Now`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Now {
    /// Milliseconds on the monotonic clock, counted from the keyspace's start (never below 1).
    pub mono_ms: u64,
    /// Unix time in milliseconds, as the wall clock says.
    pub wall_ms: i64,
    /// Set while the server loads its data (AOF replay): nothing expires then, as in
    /// Redis, so that replaying a command against a key that was live when the command
    /// first ran gives the same result. Keys that expired before are deleted by their own
    /// logged `DEL`.
    pub loading: bool,
}

impl Now {
    /// Unix time in whole seconds.
    pub fn wall_s(&self) -> i64 {
        self.wall_ms.div_euclid(1000)
    }
}

/// The server's clock: a monotonic base plus adjustable offsets for both clocks.
#[derive(Debug)]
pub struct Clock {
    base: Instant,
    mono_offset_ms: AtomicI64,
    wall_offset_ms: AtomicI64,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    pub fn new() -> Self {
        Clock {
            base: Instant::now(),
            mono_offset_ms: AtomicI64::new(0),
            wall_offset_ms: AtomicI64::new(0),
        }
    }

    pub fn now(&self) -> Now {
        let elapsed_ms = self.base.elapsed().as_millis() as i64;
        let mono_ms = (elapsed_ms + self.mono_offset_ms.load(Ordering::Relaxed)).max(0) as u64 + 1;
        let wall_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
            + self.wall_offset_ms.load(Ordering::Relaxed);
        Now {
            mono_ms,
            wall_ms,
            loading: false,
        }
    }

    /// Moves both clocks forward (time passing), as tests do instead of sleeping.
    pub fn advance(&self, ms: i64) {
        self.mono_offset_ms.fetch_add(ms, Ordering::Relaxed);
        self.wall_offset_ms.fetch_add(ms, Ordering::Relaxed);
    }

    /// Moves only the wall clock (an NTP step or an operator's `date -s`).
    pub fn jump_wall(&self, ms: i64) {
        self.wall_offset_ms.fetch_add(ms, Ordering::Relaxed);
    }
}

const WALL_FLAG: u64 = 1 << 63;

/// When a key expires: a point on the monotonic clock or on the wall clock.
///
/// Packed in 8 bytes (and `Option<Deadline>` too): the top bit tells which clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Deadline(NonZeroU64);

/// The largest millisecond value a deadline can hold on either clock.
pub const MAX_DEADLINE_MS: i64 = (WALL_FLAG - 1) as i64;

impl Deadline {
    /// `ttl_ms` from now on the monotonic clock; `None` when it would overflow.
    pub fn after(now: Now, ttl_ms: i64) -> Option<Deadline> {
        let at = (now.mono_ms as i64).checked_add(ttl_ms)?;
        if !(1..=MAX_DEADLINE_MS).contains(&at) {
            return None;
        }
        NonZeroU64::new(at as u64).map(Deadline)
    }

    /// An absolute unix time in milliseconds on the wall clock. Values below 1 are clamped
    /// to 1 (already in the past); callers reject what Redis rejects before this.
    pub fn at_wall(unix_ms: i64) -> Deadline {
        let ms = unix_ms.clamp(1, MAX_DEADLINE_MS) as u64;
        Deadline(NonZeroU64::new(ms | WALL_FLAG).expect("non-zero"))
    }

    pub fn is_wall(self) -> bool {
        self.0.get() & WALL_FLAG != 0
    }

    fn raw_ms(self) -> i64 {
        (self.0.get() & !WALL_FLAG) as i64
    }

    /// Milliseconds left at `now`; negative once passed.
    pub fn remaining_ms(self, now: Now) -> i64 {
        if self.is_wall() {
            self.raw_ms().saturating_sub(now.wall_ms)
        } else {
            self.raw_ms() - now.mono_ms as i64
        }
    }

    /// The deadline as unix milliseconds (what EXPIRETIME reports and what persistence writes).
    pub fn unix_ms(self, now: Now) -> i64 {
        if self.is_wall() {
            self.raw_ms()
        } else {
            now.wall_ms.saturating_add(self.remaining_ms(now))
        }
    }

    /// Redis semantics: a key is expired once now is strictly past its deadline.
    pub fn is_passed(self, now: Now) -> bool {
        !now.loading && self.remaining_ms(now) < 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_deadline_ignores_wall_jumps() {
        let clock = Clock::new();
        let now = clock.now();
        let d = Deadline::after(now, 10_000).unwrap();
        clock.jump_wall(3_600_000);
        let later = clock.now();
        assert!(d.remaining_ms(later) > 9_000);
        assert!(!d.is_passed(later));
        clock.advance(10_001);
        assert!(d.is_passed(clock.now()));
    }

    #[test]
    fn absolute_deadline_follows_wall_jumps() {
        let clock = Clock::new();
        let now = clock.now();
        let d = Deadline::at_wall(now.wall_ms + 10_000);
        assert!(d.is_wall());
        clock.jump_wall(20_000);
        assert!(d.is_passed(clock.now()));
    }

    #[test]
    fn overflowing_ttl_is_refused() {
        let now = Clock::new().now();
        assert!(Deadline::after(now, i64::MAX).is_none());
        assert!(Deadline::after(now, -(now.mono_ms as i64) - 5).is_none());
    }

    #[test]
    fn unix_ms_of_relative_deadline() {
        let now = Now {
            mono_ms: 100,
            wall_ms: 1_000_000,
            loading: false,
        };
        let d = Deadline::after(now, 500).unwrap();
        assert_eq!(d.unix_ms(now), 1_000_500);
        assert_eq!(d.remaining_ms(now), 500);
        assert!(!d.is_passed(Now {
            mono_ms: 600,
            wall_ms: 0,
            loading: false,
        }));
        assert!(d.is_passed(Now {
            mono_ms: 601,
            wall_ms: 0,
            loading: false,
        }));
    }
}
