//! Busy polling: after a request arrives, the runtime keeps polling its sockets for
//! `busy-poll-us` microseconds before it lets its worker sleep in `epoll_wait`.
//!
//! A server that sleeps between requests pays twice for each one that wakes it: its own
//! context switch back in, and the client's write, which must wake it (an interrupt to the
//! other core) instead of only queueing bytes. With one client at pipeline 1 that is most of
//! a round trip. While the window is open a task yields in a loop; each yield sends tokio's
//! worker through a zero-timeout poll of the I/O driver, so a request that arrives is
//! picked up without a sleep and a wake-up. After the window passes without input the task
//! waits on a [`Notify`] that the next read fires, and the worker sleeps as usual: an idle
//! server costs nothing, a busy one at most the window after each request.
//!
//! Latch's own option (Redis has none; Dragonfly's proactor spins a little before it
//! sleeps, as here). 0 turns it off. The price is CPU time during gaps between requests.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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

/// Called by a connection after each read that brought bytes.
#[inline]
pub fn input_arrived() {
    INPUTS.store(
        INPUTS.load(Ordering::Relaxed).wrapping_add(1),
        Ordering::Relaxed,
    );
    if ASLEEP.load(Ordering::Relaxed) {
        ASLEEP.store(false, Ordering::Relaxed);
        WAKE.notify_one();
    }
}

/// The decision, apart from the runtime: keep polling while input came within the window.
#[derive(Debug)]
pub struct Window {
    length_ns: u64,
    inputs_seen: u64,
    last_input: Tick,
}

impl Window {
    pub fn new(length_us: u64, inputs: u64, now: Tick) -> Window {
        Window {
            length_ns: length_us.saturating_mul(1000),
            inputs_seen: inputs,
            last_input: now,
        }
    }

    /// The same window, opened again by input at `now`.
    pub fn reopened(&self, inputs: u64, now: Tick) -> Window {
        Window {
            length_ns: self.length_ns,
            inputs_seen: inputs,
            last_input: now,
        }
    }

    /// Whether to poll once more, given the input count and the clock now.
    pub fn keep_polling(&mut self, inputs: u64, now: Tick) -> bool {
        if inputs != self.inputs_seen {
            self.inputs_seen = inputs;
            self.last_input = now;
        }
        now.nanos_since(self.last_input) < self.length_ns
    }
}

/// The polling task: spawned once on the runtime, runs until the runtime stops.
pub async fn run(server: Arc<Server>) {
    let mut epoch = u64::MAX;
    let mut window = Window::new(0, 0, Tick::now());
    loop {
        if epoch != server.config.epoch() {
            epoch = server.config.epoch();
            let length_us = server.config.busy_poll_us();
            window = Window::new(length_us, INPUTS.load(Ordering::Relaxed), Tick::now());
        }
        if window.keep_polling(INPUTS.load(Ordering::Relaxed), Tick::now()) {
            tokio::task::yield_now().await;
            continue;
        }
        ASLEEP.store(true, Ordering::Relaxed);
        // A read between the store and this wait leaves a permit: no input is missed.
        WAKE.notified().await;
        window = window.reopened(INPUTS.load(Ordering::Relaxed), Tick::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(us: u64) -> Tick {
        Tick::from_nanos(us * 1000)
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
        assert!(!window.keep_polling(8, at(2_000)));
        // Input after a quiet spell: polling again.
        assert!(window.keep_polling(9, at(2_001)));
        // Woken by input after a sleep: the same 50 µs from the waking.
        let mut woken = window.reopened(10, at(5_000));
        assert!(woken.keep_polling(10, at(5_049)));
        assert!(!woken.keep_polling(10, at(5_050)));
    }

    #[test]
    fn a_zero_window_never_polls() {
        let mut window = Window::new(0, 0, at(5));
        assert!(!window.keep_polling(0, at(5)));
        assert!(!window.keep_polling(1, at(6)));
    }
}
