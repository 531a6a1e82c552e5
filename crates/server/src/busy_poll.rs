//! Busy polling: after a request arrives, the runtime keeps polling its sockets for a
//! window of up to `busy-poll-us` microseconds before it lets its worker sleep in
//! `epoll_wait`.
//!
//! A server that sleeps between requests pays twice for each one that wakes it: its own
//! context switch back in, and the client's write, which must wake it (an interrupt to the
//! other core) instead of only queueing bytes. With one client at pipeline 1 that is most of
//! a round trip. While the window is open a task yields in a loop; each yield sends tokio's
//! worker through a zero-timeout poll of the I/O driver, so a request that arrives is
//! picked up without a sleep and a wake-up. After the window passes without input the task
//! waits on a [`Notify`] that the next read fires, and the worker sleeps as usual: an idle
//! server costs nothing.
//!
//! Whether to poll adapts to how polling fares, judged by outcome rather than by the clock
//! (the time a sleeping server sees input includes its own wake-up, tens of microseconds on
//! a virtual machine, which would make every gap look longer than it was). Polling keeps a
//! credit of up to [`CREDIT_MAX`]: input that arrives while it polls adds one, a window that
//! passes without input (time thrown away) takes one, and a window that passes with no
//! credit left turns polling off. So it stays on while most windows catch input and goes
//! off when most do not. While it is off, every [`PROBE_EVERY`]th wake-up that came within
//! four windows of the sleep (a near miss) turns it on again as a probe, with a credit of
//! [`PROBE_CREDIT`]: more than one window, as a client answered late may itself be slow to
//! wake and send its next request (on a virtual machine the guest's own idle polling
//! adapts too). A probe that catches nothing doubles the wake-ups to the next one, up to
//! [`PROBE_EVERY_MAX`]; one that catches input sets them back. Clients that pause longer
//! than `busy-poll-us` between requests (an application doing its own work between them)
//! cost about what they cost a server that sleeps, and a client that sends its next request
//! at once finds the server polling.
//!
//! Latch's own option (Redis has none; Dragonfly's proactor spins a little before it
//! sleeps, as here). 0 turns it off.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use latch_keyspace::Tick;
use tokio::sync::Notify;

use crate::server::Server;

/// Reads so far, by every connection (a count, not exact: connections on several workers
/// may overwrite each other's increments, which only matters if every one of them is lost).
static INPUTS: AtomicU64 = AtomicU64::new(0);
/// Set while the poller waits for input instead of polling.
static ASLEEP: AtomicBool = AtomicBool::new(false);
static WAKE: Notify = Notify::const_new();
/// When the read that woke the poller came (a [`Tick`] in nanoseconds): the poller itself
/// runs only after that connection's batch.
static WOKEN_AT: AtomicU64 = AtomicU64::new(0);
/// The worker the poller last yielded on while polling (`usize::MAX`: it sleeps).
static POLLER_WORKER: AtomicUsize = AtomicUsize::new(usize::MAX);
/// The window now, in microseconds (INFO stats' `busy_poll_window_us`).
static WINDOW_US: AtomicU64 = AtomicU64::new(0);

/// The most credit polling keeps: windows in a row that may pass without input after a long
/// run of caught input, before polling stops.
pub const CREDIT_MAX: u32 = 32;
/// With polling off, one near-miss wake-up in this many starts a probe, at first and after a
/// probe that caught input.
pub const PROBE_EVERY: u32 = 16;
/// The most near-miss wake-ups between probes, after probes that caught nothing.
pub const PROBE_EVERY_MAX: u32 = 1024;
/// The credit a probe starts with: its first window follows a request answered late (the
/// server was asleep), whose client may be slow to wake up and send the next one.
pub const PROBE_CREDIT: u32 = 4;

/// Snapshots being serialized now (see [`hold`]).
static HELD: AtomicUsize = AtomicUsize::new(0);

/// While the guard lives, the poller does not spin: a snapshot's serializer (BGSAVE, an AOF
/// rewrite, a replica's full sync) needs the core the workers share with it, and spinning
/// took it. `bench/replication.py`'s full sync of 1M keys with the primary pinned to one
/// core: 3.15-3.27 s polling, 2.21-2.29 s with `busy-poll-us 0` (redis-server: 2.9-3.0).
pub fn hold() -> Held {
    HELD.fetch_add(1, Ordering::Relaxed);
    Held
}

pub struct Held;

impl Drop for Held {
    fn drop(&mut self) {
        HELD.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Called by a connection after each read that brought bytes.
#[inline]
pub fn input_arrived() {
    INPUTS.store(
        INPUTS.load(Ordering::Relaxed).wrapping_add(1),
        Ordering::Relaxed,
    );
    if ASLEEP.load(Ordering::Relaxed) {
        ASLEEP.store(false, Ordering::Relaxed);
        WOKEN_AT.store(Tick::now().as_nanos(), Ordering::Relaxed);
        WAKE.notify_one();
    }
}

/// Whether the poller is polling on runtime worker `worker` (so one of the tasks queued
/// there is the poller, not a connection with input).
pub fn polls_on(worker: usize) -> bool {
    POLLER_WORKER.load(Ordering::Relaxed) == worker
}

/// The window the poller keeps open after input now, in microseconds.
pub fn window_us() -> u64 {
    WINDOW_US.load(Ordering::Relaxed)
}

/// The decision, apart from the runtime: keep polling while input came within the window,
/// and whether polling is on at all, as it pays or not.
#[derive(Debug)]
pub struct Window {
    max_ns: u64,
    on: bool,
    /// Input caught while polling, less windows that passed without input (0..=CREDIT_MAX).
    credit: u32,
    inputs_seen: u64,
    last_input: Tick,
    /// When the poller went to sleep, if it is asleep.
    slept_at: Option<Tick>,
    /// Whether polling is on as a probe that has caught no input yet.
    probing: bool,
    /// Near-miss wake-ups with polling off since the last probe.
    since_probe: u32,
    /// Near-miss wake-ups between probes now.
    probe_every: u32,
}

impl Window {
    /// Polling on, with windows of `max_us`; opened by input at `now`.
    pub fn new(max_us: u64, inputs: u64, now: Tick) -> Window {
        let max_ns = max_us.saturating_mul(1000);
        Window {
            max_ns,
            on: max_ns > 0,
            credit: CREDIT_MAX,
            inputs_seen: inputs,
            last_input: now,
            slept_at: None,
            probing: false,
            since_probe: 0,
            probe_every: PROBE_EVERY,
        }
    }

    /// How long the window stays open after input, in nanoseconds: 0 with polling off.
    pub fn length_ns(&self) -> u64 {
        if self.on {
            self.max_ns
        } else {
            0
        }
    }

    /// Whether to poll once more, given the input count and the clock now. False means the
    /// window passed without input (or polling is off): the poller sleeps.
    pub fn keep_polling(&mut self, inputs: u64, now: Tick) -> bool {
        if inputs != self.inputs_seen {
            self.inputs_seen = inputs;
            self.last_input = now;
            // Input while polling: it paid.
            if self.on {
                self.credit = (self.credit + 1).min(CREDIT_MAX);
                if self.probing {
                    self.probing = false;
                    self.probe_every = PROBE_EVERY;
                }
            }
        }
        if now.nanos_since(self.last_input) < self.length_ns() {
            return true;
        }
        if self.on {
            if self.credit == 0 {
                self.on = false;
                if self.probing {
                    self.probing = false;
                    self.probe_every = (self.probe_every * 2).min(PROBE_EVERY_MAX);
                }
            } else {
                self.credit -= 1;
            }
        }
        self.slept_at = Some(now);
        false
    }

    /// Input that came at `woken` ended the poller's sleep; the poller runs again at `now`,
    /// after that input's batch, and the window opens from there. With polling off, this
    /// wake-up may open a probe.
    pub fn woken(&mut self, inputs: u64, woken: Tick, now: Tick) {
        let slept_at = self.slept_at.take().unwrap_or(self.last_input);
        if !self.on && self.max_ns > 0 {
            if woken.nanos_since(slept_at) <= self.max_ns.saturating_mul(4) {
                self.since_probe += 1;
            }
            if self.since_probe >= self.probe_every {
                self.since_probe = 0;
                self.probing = true;
                self.on = true;
                self.credit = PROBE_CREDIT;
            }
        }
        self.inputs_seen = inputs;
        self.last_input = now;
    }
}

/// The polling task: spawned once on the runtime, runs until the runtime stops.
pub async fn run(server: Arc<Server>) {
    let mut epoch = u64::MAX;
    let mut window = Window::new(0, 0, Tick::now());
    loop {
        if epoch != server.config.epoch() {
            epoch = server.config.epoch();
            let max_us = server.config.busy_poll_us();
            if window.max_ns != max_us.saturating_mul(1000) {
                window = Window::new(max_us, INPUTS.load(Ordering::Relaxed), Tick::now());
                WINDOW_US.store(window.length_ns() / 1000, Ordering::Relaxed);
            }
        }
        if window.keep_polling(INPUTS.load(Ordering::Relaxed), Tick::now())
            && HELD.load(Ordering::Relaxed) == 0
        {
            let worker = tokio::runtime::worker_index().unwrap_or(usize::MAX);
            if POLLER_WORKER.load(Ordering::Relaxed) != worker {
                POLLER_WORKER.store(worker, Ordering::Relaxed);
            }
            tokio::task::yield_now().await;
            continue;
        }
        POLLER_WORKER.store(usize::MAX, Ordering::Relaxed);
        WINDOW_US.store(window.length_ns() / 1000, Ordering::Relaxed);
        ASLEEP.store(true, Ordering::Relaxed);
        // A read between the store and this wait leaves a permit: no input is missed.
        WAKE.notified().await;
        // The read that found ASLEEP set stored its time before it notified. (Two reads on
        // two workers may both find it set: the second permit then ends the next sleep at
        // once, with a time from before it, which counts as a near miss.)
        let woken = Tick::from_nanos(WOKEN_AT.load(Ordering::Relaxed));
        window.woken(INPUTS.load(Ordering::Relaxed), woken, Tick::now());
        WINDOW_US.store(window.length_ns() / 1000, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(us: u64) -> Tick {
        Tick::from_nanos(us * 1000)
    }

    /// A test's clock and input count.
    struct Run {
        now: u64,
        inputs: u64,
    }

    impl Run {
        /// The window passes without input, then input `idle_us` later wakes the poller,
        /// which runs 5 µs after that.
        fn sleep_and_wake(&mut self, window: &mut Window, idle_us: u64) {
            self.now += window.length_ns().div_ceil(1000);
            assert!(!window.keep_polling(self.inputs, at(self.now)));
            self.now += idle_us;
            self.inputs += 1;
            window.woken(self.inputs, at(self.now), at(self.now + 5));
            self.now += 5;
        }

        /// Input `idle_us` after the last, within the window.
        fn caught(&mut self, window: &mut Window, idle_us: u64) {
            assert!(window.keep_polling(self.inputs, at(self.now + idle_us - 1)));
            self.now += idle_us;
            self.inputs += 1;
            assert!(window.keep_polling(self.inputs, at(self.now)));
        }
    }

    #[test]
    fn polls_while_input_keeps_coming_and_stops_after_the_window() {
        let mut window = Window::new(50, 7, at(1_000));
        assert!(window.keep_polling(7, at(1_010)));
        assert!(window.keep_polling(7, at(1_049)));
        // New input at 1,060 opens the window again from there.
        assert!(window.keep_polling(8, at(1_060)));
        assert!(window.keep_polling(8, at(1_100)));
        assert!(!window.keep_polling(8, at(1_110)));
        // Woken by input: the window opens when the poller runs, after that input's batch.
        window.woken(9, at(2_000), at(2_005));
        assert!(window.keep_polling(9, at(2_054)));
        assert!(!window.keep_polling(9, at(2_055)));
    }

    #[test]
    fn polling_stops_when_most_windows_pass_without_input() {
        let mut window = Window::new(50, 0, at(0));
        let mut run = Run { now: 0, inputs: 0 };
        // As many windows catching input as passing without: polling stays on.
        for _ in 0..4 * CREDIT_MAX {
            run.sleep_and_wake(&mut window, 1_000);
            run.caught(&mut window, 30);
            assert_eq!(window.length_ns(), 50_000);
        }
        // Two misses for each catch: the credit runs out.
        let mut rounds = 0;
        while window.length_ns() > 0 {
            run.sleep_and_wake(&mut window, 1_000);
            if window.length_ns() > 0 {
                run.sleep_and_wake(&mut window, 1_000);
            }
            if window.length_ns() > 0 {
                run.caught(&mut window, 30);
            }
            rounds += 1;
        }
        assert_eq!(rounds, CREDIT_MAX);
        // Off, the poller sleeps right after input; sleeps of 1 ms are no near misses.
        for _ in 0..2 * PROBE_EVERY {
            run.sleep_and_wake(&mut window, 1_000);
            assert_eq!(window.length_ns(), 0);
        }
        assert!(!window.keep_polling(run.inputs, at(run.now)));
    }

    /// Polling off after windows that all passed without input.
    fn turned_off(run: &mut Run) -> Window {
        let mut window = Window::new(50, 0, at(0));
        for _ in 0..=CREDIT_MAX {
            assert_eq!(window.length_ns(), 50_000);
            run.sleep_and_wake(&mut window, 1_000);
        }
        assert_eq!(window.length_ns(), 0);
        window
    }

    #[test]
    fn near_misses_start_a_probe_with_a_small_credit() {
        let mut run = Run { now: 0, inputs: 0 };
        let mut window = turned_off(&mut run);
        // Input within four windows of each sleep: every 16th such wake-up probes.
        for _ in 0..PROBE_EVERY - 1 {
            run.sleep_and_wake(&mut window, 150);
            assert_eq!(window.length_ns(), 0);
        }
        // Sleeps that last longer do not count towards a probe.
        run.sleep_and_wake(&mut window, 201);
        assert_eq!(window.length_ns(), 0);
        run.sleep_and_wake(&mut window, 200);
        assert_eq!(window.length_ns(), 50_000);
        // The probe outlasts PROBE_CREDIT windows without input, not one more.
        for _ in 0..PROBE_CREDIT {
            run.sleep_and_wake(&mut window, 100);
            assert_eq!(window.length_ns(), 50_000);
        }
        run.sleep_and_wake(&mut window, 100);
        assert_eq!(window.length_ns(), 0);
    }

    #[test]
    fn probes_that_catch_nothing_come_ever_more_rarely() {
        let mut run = Run { now: 0, inputs: 0 };
        let mut window = turned_off(&mut run);
        let mut every = PROBE_EVERY;
        for _ in 0..10 {
            // The wake-up that ended the last probe counts as the first near miss.
            let first = if every == PROBE_EVERY { 0 } else { 1 };
            for _ in first..every - 1 {
                run.sleep_and_wake(&mut window, 100);
                assert_eq!(window.length_ns(), 0);
            }
            run.sleep_and_wake(&mut window, 100);
            assert_eq!(
                window.length_ns(),
                50_000,
                "a probe after {every} near misses"
            );
            for _ in 0..=PROBE_CREDIT {
                run.sleep_and_wake(&mut window, 100);
            }
            assert_eq!(window.length_ns(), 0);
            every = (every * 2).min(PROBE_EVERY_MAX);
        }
        assert_eq!(every, PROBE_EVERY_MAX);
        // A probe that catches input: polling is on, with the credit it caught, and the next
        // probe comes after PROBE_EVERY near misses again.
        for _ in 1..PROBE_EVERY_MAX {
            run.sleep_and_wake(&mut window, 100);
        }
        assert_eq!(window.length_ns(), 50_000);
        run.caught(&mut window, 40);
        for _ in 0..=PROBE_CREDIT {
            run.sleep_and_wake(&mut window, 100);
            assert_eq!(window.length_ns(), 50_000);
        }
        run.sleep_and_wake(&mut window, 100);
        assert_eq!(window.length_ns(), 0);
        for _ in 1..PROBE_EVERY - 1 {
            run.sleep_and_wake(&mut window, 100);
            assert_eq!(window.length_ns(), 0);
        }
        run.sleep_and_wake(&mut window, 100);
        assert_eq!(window.length_ns(), 50_000);
    }

    #[test]
    fn a_zero_maximum_never_polls() {
        let mut window = Window::new(0, 0, at(5));
        assert!(!window.keep_polling(0, at(5)));
        for step in 0..2 * PROBE_EVERY as u64 {
            window.woken(step + 1, at(6 + step), at(6 + step));
            assert!(!window.keep_polling(step + 1, at(6 + step)));
        }
        assert!(!window.keep_polling(99, at(1_000)));
        assert_eq!(window.length_ns(), 0);
    }
}
