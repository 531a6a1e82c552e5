//! Time as the keyspace sees it.
//!
//! Relative TTLs (`EX`, `PX`, `EXPIRE`, ...) are deadlines on a monotonic clock, so a
//! wall-clock jump can neither expire a lock early nor keep it alive late. Absolute ones
//! (`EXAT`, `PXAT`, `EXPIREAT`, ...) are deadlines on the wall clock, as in Redis. Both
//! clocks carry an offset that tests (and `DEBUG JUMP-CLOCK`) can move, so TTL tests control
//! time instead of sleeping.
//!
//! A reading costs one clock read: the wall clock is the monotonic reading plus the wall
//! time of the monotonic base, checked against the kernel's coarse wall clock (a few
//! nanoseconds, no timer read) and re-read when they disagree by more than
//! [`WALL_CHECK_MS`], so a wall-clock step is seen by the next batch of commands (those of
//! one batch share the check its first one made: [`Clock::now_from`]);
//! [`Clock::resync_wall`] (each cron tick) catches steps smaller than that.

use std::num::NonZeroU64;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// One frozen reading of both clocks. A command (or a whole script) sees one `Now`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Now {
    /// Milliseconds on the monotonic clock, counted from the keyspace's start (never below 1).
    pub mono_ms: u64,
    /// Unix time in milliseconds, as the wall clock says.
    pub wall_ms: i64,
    /// The wall clock minus the monotonic one, in microseconds (both read at the same tick,
    /// so it stays the same from reading to reading until the wall clock is resynced): a
    /// monotonic deadline converts to the same unix millisecond at every reading, so
    /// PEXPIRETIME before a restart equals the PXAT the AOF logged for the key.
    pub wall_offset_us: i64,
    /// Set while the server loads its data (AOF replay): nothing expires then, as in
    /// Redis, so that replaying a command against a key that was live when the command
    /// first ran gives the same result. Keys that expired before are deleted by their own
    /// logged `DEL`.
    pub loading: bool,
    /// Set while expiry is held (`Keyspace::hold_expiry`, CLIENT PAUSE): a lookup reports a
    /// key past its deadline missing but leaves it where it is.
    pub keep_passed: bool,
}

impl Now {
    /// The access clock keys' last-access stamps are on ([`crate::Slot::access_s`]):
    /// seconds of the monotonic clock, from 2^30 rather than 0, so that an access long
    /// before the start can be stamped (RESTORE ... IDLETIME, loaded idle times).
    pub fn access_s(&self) -> u32 {
        (self.mono_ms / 1000).min(u64::from(u32::MAX >> 1)) as u32 + (1 << 30)
    }

    /// Unix time in whole seconds.
    pub fn wall_s(&self) -> i64 {
        self.wall_ms.div_euclid(1000)
    }
}

/// A reading of the monotonic clock (`CLOCK_MONOTONIC`, the clock `Instant` reads) in
/// nanoseconds. Every command takes one, when it ends (its duration), which the next command
/// of the same batch takes as its start and its `Now`; as plain integers they cost a third
/// of what `Instant` and `Duration` arithmetic did per command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Tick(u64);

impl Tick {
    #[allow(unsafe_code)]
    #[allow(clippy::unnecessary_cast)] // time_t and c_long are not i64 everywhere
    pub fn now() -> Tick {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec for the call's duration.
        // CLOCK_MONOTONIC cannot fail on Linux (the clock exists, the pointer is valid).
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        Tick(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }

    /// A reading of `nanos` (for tests of code that takes readings).
    pub fn from_nanos(nanos: u64) -> Tick {
        Tick(nanos)
    }

    /// The reading in nanoseconds (what [`Tick::from_nanos`] takes back).
    pub fn as_nanos(self) -> u64 {
        self.0
    }

    /// Nanoseconds from `earlier` to this reading (0 if `earlier` is later).
    pub fn nanos_since(self, earlier: Tick) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    /// Microseconds since this reading.
    pub fn elapsed_us(self) -> u64 {
        Tick::now().nanos_since(self) / 1000
    }
}

/// The server's clock: a monotonic base plus adjustable offsets for both clocks.
#[derive(Debug)]
pub struct Clock {
    base: Tick,
    mono_offset_ms: AtomicI64,
    wall_offset_ms: AtomicI64,
    /// The wall clock's unix time, in microseconds, at `base` (as of the last resync).
    wall_at_base_us: AtomicI64,
}

/// How far the derived wall clock may stray from the coarse wall clock before it is re-read:
/// more than the coarse clock's tick (1 to 10 ms), less than anything a TTL test can see.
pub const WALL_CHECK_MS: i64 = 15;

fn unix_us(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// The kernel's coarse wall clock in milliseconds (`CLOCK_REALTIME_COARSE`: the time of the
/// last tick, read without touching the timer).
#[allow(unsafe_code)]
#[allow(clippy::unnecessary_cast)] // time_t and c_long are not i64 everywhere
fn coarse_wall_ms() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
    if rc != 0 {
        return unix_us(SystemTime::now()) / 1000;
    }
    ts.tv_sec as i64 * 1000 + ts.tv_nsec as i64 / 1_000_000
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    pub fn new() -> Self {
        let base = Tick::now();
        let wall = unix_us(SystemTime::now());
        Clock {
            base,
            mono_offset_ms: AtomicI64::new(0),
            wall_offset_ms: AtomicI64::new(0),
            wall_at_base_us: AtomicI64::new(wall - base.elapsed_us() as i64),
        }
    }

    pub fn now(&self) -> Now {
        self.now_at().0
    }

    /// A reading and the tick it was taken at (what a command's duration is measured from).
    pub fn now_at(&self) -> (Now, Tick) {
        let at = Tick::now();
        (self.reading(at, true), at)
    }

    /// The reading at `at`, a monotonic reading made moments ago, in a stretch of work that
    /// began with a [`Clock::now_at`] (the commands of one batch of input): the wall clock is
    /// not checked against the coarse one again, so a step during the stretch is seen by the
    /// next one.
    pub fn now_from(&self, at: Tick) -> Now {
        self.reading(at, false)
    }

    fn reading(&self, at: Tick, check_wall: bool) -> Now {
        let elapsed_ns = at.nanos_since(self.base);
        let mono_ms = ((elapsed_ns / 1_000_000) as i64
            + self.mono_offset_ms.load(Ordering::Relaxed))
        .max(0) as u64
            + 1;
        let since_base_us = (elapsed_ns / 1000) as i64;
        let wall_us = self.wall_us_at(at, check_wall)
            + self
                .wall_offset_ms
                .load(Ordering::Relaxed)
                .saturating_mul(1000);
        // The monotonic reading in microseconds, on the same terms as `mono_ms`.
        let mono_us =
            since_base_us + (self.mono_offset_ms.load(Ordering::Relaxed) + 1).saturating_mul(1000);
        Now {
            mono_ms,
            wall_ms: wall_us.div_euclid(1000),
            wall_offset_us: wall_us - mono_us,
            loading: false,
            keep_passed: false,
        }
    }

    /// The wall clock at `at` in microseconds, without the offset `jump_wall` adds.
    fn wall_us_at(&self, at: Tick, check_wall: bool) -> i64 {
        let wall_us = self.wall_at_base_us.load(Ordering::Relaxed)
            + (at.nanos_since(self.base) / 1000) as i64;
        if check_wall && (wall_us / 1000 - coarse_wall_ms()).abs() > WALL_CHECK_MS {
            return self.resync_at(at);
        }
        wall_us
    }

    /// Unix time now in microseconds, on the wall clock [`Clock::now`] reads (offsets
    /// included): what TIME answers and MONITOR stamps its lines with.
    pub fn wall_us(&self) -> i64 {
        self.wall_us_at(Tick::now(), true)
            + self
                .wall_offset_ms
                .load(Ordering::Relaxed)
                .saturating_mul(1000)
    }

    /// How long from now until `deadline` has passed on this clock (a reading's `mono_ms`,
    /// or `wall_ms` for a wall deadline, past it): zero when it has. Down to the
    /// nanosecond for a monotonic deadline; a wall deadline (in unix ms) is reached when
    /// the wall clock's microseconds say so.
    pub fn until_passed(&self, deadline: Deadline) -> std::time::Duration {
        if deadline.is_wall() {
            let passed_at_us = (deadline.raw_ms() + 1).saturating_mul(1000);
            let left_us = passed_at_us.saturating_sub(self.wall_us()).max(0);
            return std::time::Duration::from_micros(left_us as u64);
        }
        // A reading says `elapsed_ms + offset + 1`; passed once that exceeds the deadline,
        // from `elapsed_ns >= (deadline - offset) ms` on.
        let offset = self.mono_offset_ms.load(Ordering::Relaxed);
        let passed_at_ns = (deadline.raw_ms() - offset).max(0) as u64 * 1_000_000;
        let elapsed_ns = Tick::now().nanos_since(self.base);
        std::time::Duration::from_nanos(passed_at_ns.saturating_sub(elapsed_ns))
    }

    /// Re-reads the wall clock (each cron tick), so a step too small for the coarse check is
    /// still followed within a tick.
    pub fn resync_wall(&self) {
        self.resync_at(Tick::now());
    }

    /// Re-reads the wall clock against the monotonic reading `at`; returns the wall time at
    /// `at` in microseconds.
    fn resync_at(&self, at: Tick) -> i64 {
        let wall = unix_us(SystemTime::now());
        let wall_at = wall - at.elapsed_us() as i64;
        let since_base_us = (at.nanos_since(self.base) / 1000) as i64;
        self.wall_at_base_us
            .store(wall_at - since_base_us, Ordering::Relaxed);
        wall_at
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
            // From the fixed offset between the clocks, not from two truncated readings
            // (whose difference moves by a millisecond as their fractions do).
            self.raw_ms()
                .saturating_mul(1000)
                .saturating_add(now.wall_offset_us)
                .div_euclid(1000)
        }
    }

    /// Redis semantics: a key is expired once now is strictly past its deadline.
    pub fn is_passed(self, now: Now) -> bool {
        !now.loading && self.remaining_ms(now) < 0
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn until_passed_counts_down_to_the_first_reading_past_the_deadline() {
        let clock = Clock::new();
        let now = clock.now();
        let deadline = Deadline::after(now, 50).unwrap();
        let left = clock.until_passed(deadline);
        assert!(left <= std::time::Duration::from_millis(51), "{left:?}");
        assert!(left >= std::time::Duration::from_millis(48), "{left:?}");
        std::thread::sleep(left);
        assert!(
            deadline.is_passed(clock.now()),
            "passed once the wait is over"
        );
        assert_eq!(clock.until_passed(deadline), std::time::Duration::ZERO);
        let wall = Deadline::at_wall(now.wall_ms + 30);
        let left = clock.until_passed(wall);
        assert!(left <= std::time::Duration::from_millis(32), "{left:?}");
        std::thread::sleep(left);
        assert!(wall.is_passed(clock.now()));
    }

    use super::*;

    /// Ticks read the clock `Instant` reads: the same interval measured both ways agrees.
    #[test]
    fn ticks_measure_what_instants_measure() {
        let (tick, instant) = (Tick::now(), std::time::Instant::now());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let by_instant = instant.elapsed().as_micros() as i64;
        let by_tick = tick.elapsed_us() as i64;
        assert!(by_tick >= 20_000, "{by_tick}");
        assert!(
            (by_tick - by_instant).abs() < 2_000,
            "{by_tick} vs {by_instant}"
        );
        assert_eq!(tick.nanos_since(Tick::now()), 0);
    }

    /// A carried reading gives what the clock gave at that tick, offsets as they are now.
    #[test]
    fn now_from_is_the_reading_of_its_tick() {
        let clock = Clock::new();
        let (now, at) = clock.now_at();
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(clock.now_from(at), now);
        assert!(clock.now().mono_ms >= now.mono_ms + 5);
        clock.advance(1_000);
        let moved = clock.now_from(at);
        assert_eq!(moved.mono_ms, now.mono_ms + 1_000);
        assert_eq!(moved.wall_ms, now.wall_ms + 1_000);
    }

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
    fn derived_wall_clock_matches_the_system_clock() {
        let clock = Clock::new();
        for _ in 0..1000 {
            let before = unix_us(SystemTime::now()) / 1000;
            let now = clock.now();
            let after = unix_us(SystemTime::now()) / 1000;
            assert!(
                (before - 1..=after + 1).contains(&now.wall_ms),
                "{before} <= {} <= {after}",
                now.wall_ms
            );
        }
    }

    #[test]
    fn a_monotonic_deadline_converts_to_the_same_unix_ms_at_every_reading() {
        let clock = Clock::new();
        let deadline = Deadline::after(clock.now(), 100_000).unwrap();
        let first = deadline.unix_ms(clock.now());
        for _ in 0..2000 {
            assert_eq!(deadline.unix_ms(clock.now()), first);
            std::thread::sleep(std::time::Duration::from_micros(97));
        }
    }

    #[test]
    fn a_stale_wall_base_is_caught_by_the_coarse_check() {
        let clock = Clock::new();
        // As if the system clock had been stepped back an hour since the last resync.
        clock
            .wall_at_base_us
            .fetch_add(3_600_000_000, Ordering::Relaxed);
        let now = clock.now();
        let real = unix_us(SystemTime::now()) / 1000;
        assert!((now.wall_ms - real).abs() <= 2, "{} vs {real}", now.wall_ms);
        // And one the coarse check cannot see is fixed by a resync.
        clock.wall_at_base_us.fetch_add(8_000, Ordering::Relaxed);
        clock.resync_wall();
        let now = clock.now();
        let real = unix_us(SystemTime::now()) / 1000;
        assert!((now.wall_ms - real).abs() <= 2, "{} vs {real}", now.wall_ms);
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
            wall_offset_us: (1_000_000 - 100) * 1000,
            loading: false,
            keep_passed: false,
        };
        let d = Deadline::after(now, 500).unwrap();
        assert_eq!(d.unix_ms(now), 1_000_500);
        assert_eq!(d.remaining_ms(now), 500);
        assert!(!d.is_passed(Now {
            mono_ms: 600,
            wall_ms: 0,
            wall_offset_us: (0 - 600) * 1000,
            loading: false,
            keep_passed: false,
        }));
        assert!(d.is_passed(Now {
            mono_ms: 601,
            wall_ms: 0,
            wall_offset_us: (0 - 601) * 1000,
            loading: false,
            keep_passed: false,
        }));
    }
}
