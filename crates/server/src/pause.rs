//! CLIENT PAUSE: holding clients' commands (all of them, or those that may write) until a
//! deadline or CLIENT UNPAUSE, with the dataset held still meanwhile.
//!
//! The gatekeeper reads [`Pause::may_be_paused`] (one relaxed load) for every command; only
//! while a pause is in force does it look further ([`Pause::in_force`]) and, for a command
//! the pause holds, answer `Outcome::Paused`: nothing ran, and the connection waits for
//! [`Pause::released`] without holding its worker, then hands the command in again. A
//! pause also holds expiry ([`latch_keyspace::Keyspace::hold_expiry`]): keys past their
//! deadline read as missing but stay, and the active expiry does nothing, as in Redis.
//! The [`keeper`] task ends a pause at its deadline, so that the connections it held are
//! released at once; each held command holds a [`Ticket`], so that they then run in the
//! order they arrived.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use latch_keyspace::{Keyspace, Tick};
use parking_lot::Mutex;
use tokio::sync::futures::Notified;
use tokio::sync::{watch, Notify};

use crate::server::Server;

/// What a pause holds, from least to most.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum PauseMode {
    Off = 0,
    /// Commands that may write or be replicated (`CLIENT PAUSE ... WRITE`).
    Write = 1,
    /// Every command (`CLIENT PAUSE ...` or `... ALL`).
    All = 2,
}

/// The server's pause state.
pub struct Pause {
    /// The mode of the pause in force ([`PauseMode`] as a byte): what every command reads.
    /// Set after `state`, cleared (to `Off`) before the waiters are released.
    mode: AtomicU8,
    /// Pauses ended so far (changed under `state`'s lock, before the waiters are released).
    ended: AtomicU64,
    /// The pause in force: its mode and the clock reading it ends after. A pause whose end
    /// has passed may stay here until someone looks ([`Pause::in_force`]).
    state: Mutex<Option<(PauseMode, Tick)>>,
    /// Notified (every waiter, in the order they started waiting) when a pause ends.
    released: Notify,
    /// The end of the pause in force, for the [`keeper`].
    end: watch::Sender<Option<Tick>>,
    /// The held commands in the order they were held (see [`Ticket`]).
    line: Mutex<Line>,
}

/// The commands a pause held, in the order it held them: after a release each runs only
/// once those before it have (or have been held again, or their client has gone), so that
/// they run in the order they arrived even on several worker threads.
#[derive(Default)]
struct Line {
    next: u64,
    /// The tickets out, each with what wakes its holder when its turn comes.
    waiting: BTreeMap<u64, Arc<Notify>>,
}

/// A held command's place in line, from when the pause held it until it has run (or its
/// connection ends); dropped, it lets the next one go.
pub struct Ticket<'p> {
    pause: &'p Pause,
    number: u64,
    turn: Arc<Notify>,
}

impl Ticket<'_> {
    /// Resolves once every ticket taken before this one is gone.
    pub async fn my_turn(&self) {
        loop {
            let first = self.pause.line.lock().waiting.keys().next().copied();
            if first == Some(self.number) {
                return;
            }
            // The ticket before leaves a permit if it goes before this waits.
            self.turn.notified().await;
        }
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        let mut line = self.pause.line.lock();
        let was_first = line.waiting.keys().next() == Some(&self.number);
        line.waiting.remove(&self.number);
        if was_first {
            if let Some(next) = line.waiting.values().next() {
                next.notify_one();
            }
        }
    }
}

impl Default for Pause {
    fn default() -> Self {
        Self::new()
    }
}

impl Pause {
    pub fn new() -> Pause {
        Pause {
            mode: AtomicU8::new(PauseMode::Off as u8),
            ended: AtomicU64::new(0),
            state: Mutex::new(None),
            released: Notify::new(),
            end: watch::Sender::new(None),
            line: Mutex::new(Line::default()),
        }
    }

    /// A place at the end of the line, for a command the pause holds (see [`Ticket`]).
    pub fn ticket(&self) -> Ticket<'_> {
        let turn = Arc::new(Notify::new());
        let mut line = self.line.lock();
        let number = line.next;
        line.next += 1;
        line.waiting.insert(number, turn.clone());
        Ticket {
            pause: self,
            number,
            turn,
        }
    }

    /// Whether a pause may be in force (it may have just ended): the hot path's test.
    #[inline]
    pub fn may_be_paused(&self) -> bool {
        self.mode.load(Ordering::Relaxed) != PauseMode::Off as u8
    }

    /// The mode in force now. A pause past its end is ended here, its waiters released.
    pub fn in_force(&self, keyspace: &Keyspace) -> PauseMode {
        self.in_force_since(keyspace).0
    }

    /// [`in_force`](Self::in_force), with the number of pauses ended so far at that moment:
    /// a command held now waits until it changes ([`Pause::ended_since`]).
    pub fn in_force_since(&self, keyspace: &Keyspace) -> (PauseMode, u64) {
        if !self.may_be_paused() {
            return (PauseMode::Off, self.ended.load(Ordering::SeqCst));
        }
        let mut state = self.state.lock();
        let mode = match *state {
            Some((mode, end)) if Tick::now() <= end => mode,
            Some(_) => {
                *state = None;
                self.release(keyspace);
                PauseMode::Off
            }
            None => PauseMode::Off,
        };
        (mode, self.ended.load(Ordering::SeqCst))
    }

    /// Whether a pause has ended since `ended` was read from [`Pause::in_force_since`].
    pub fn ended_since(&self, ended: u64) -> bool {
        self.ended.load(Ordering::SeqCst) != ended
    }

    /// The end of the pause in force, if any.
    pub fn end(&self) -> Option<Tick> {
        self.state.lock().map(|(_, end)| end)
    }

    /// CLIENT PAUSE: pauses `mode` commands until `end` (a clock reading; `None`, as for a
    /// timeout of 0, ends at once). A pause already in force keeps the later end and the
    /// stricter mode of the two, as Redis does.
    pub fn pause(&self, keyspace: &Keyspace, mode: PauseMode, end: Option<Tick>) {
        let now = Tick::now();
        let mut state = self.state.lock();
        let current = state.filter(|&(_, current_end)| now <= current_end);
        let next = match current {
            Some((current_mode, current_end)) => Some((
                current_mode.max(mode),
                end.map_or(current_end, |end| end.max(current_end)),
            )),
            None => end.filter(|&end| now <= end).map(|end| (mode, end)),
        };
        match next {
            Some((mode, end)) => {
                *state = Some((mode, end));
                keyspace.hold_expiry(Some(end));
                self.mode.store(mode as u8, Ordering::SeqCst);
                self.end.send_replace(Some(end));
            }
            None if state.is_some() => {
                // Only an elapsed pause was left: it ends now.
                *state = None;
                self.release(keyspace);
            }
            None => {}
        }
    }

    /// CLIENT UNPAUSE: ends the pause in force, if any.
    pub fn unpause(&self, keyspace: &Keyspace) {
        let mut state = self.state.lock();
        if state.take().is_some() {
            self.release(keyspace);
        }
    }

    /// Ends the pause (the caller holds `state`, now empty): expiry resumes and every
    /// connection waiting is released, first waiter first.
    fn release(&self, keyspace: &Keyspace) {
        keyspace.hold_expiry(None);
        self.mode.store(PauseMode::Off as u8, Ordering::SeqCst);
        self.ended.fetch_add(1, Ordering::SeqCst);
        self.end.send_replace(None);
        self.released.notify_waiters();
    }

    /// A future that resolves when the pause ends. To miss no release, a waiter enables it
    /// (`Notified::enable`) first, then checks [`Pause::ended_since`], then awaits it.
    pub fn released(&self) -> Notified<'_> {
        self.released.notified()
    }
}

/// Ends each pause at its deadline (CLIENT PAUSE's timeout), so that the connections it
/// holds go on at once and in the order they were held. Runs for the server's life.
pub async fn keeper(server: Arc<Server>) {
    let mut end = server.pause.end.subscribe();
    loop {
        let current = *end.borrow_and_update();
        match current {
            None => {
                if end.changed().await.is_err() {
                    return;
                }
            }
            Some(at) => {
                // One nanosecond past the end: a pause lasts through its last reading.
                let wait = Duration::from_nanos(at.nanos_since(Tick::now()).saturating_add(1));
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {
                        server.pause.in_force(&server.keyspace);
                    }
                    changed = end.changed() => {
                        if changed.is_err() {
                            return;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after_ms(ms: u64) -> Option<Tick> {
        Some(Tick::from_nanos(Tick::now().as_nanos() + ms * 1_000_000))
    }

    #[test]
    fn a_later_pause_extends_and_the_stricter_mode_wins() {
        let keyspace = Keyspace::new(1, 1);
        let pause = Pause::new();
        assert_eq!(pause.in_force(&keyspace), PauseMode::Off);
        pause.pause(&keyspace, PauseMode::Write, after_ms(60_000));
        let first_end = pause.end().expect("a pause is in force");
        assert_eq!(pause.in_force(&keyspace), PauseMode::Write);
        // Shorter, but stricter: the mode rises, the end stays.
        pause.pause(&keyspace, PauseMode::All, after_ms(1_000));
        assert_eq!(pause.in_force(&keyspace), PauseMode::All);
        assert_eq!(pause.end(), Some(first_end));
        // Longer, but laxer: the end moves, the mode stays.
        pause.pause(&keyspace, PauseMode::Write, after_ms(120_000));
        assert_eq!(pause.in_force(&keyspace), PauseMode::All);
        assert!(pause.end().expect("still paused") > first_end);
        assert!(keyspace.expiry_held_at(Tick::now()));
        pause.unpause(&keyspace);
        assert_eq!(pause.in_force(&keyspace), PauseMode::Off);
        assert!(!pause.may_be_paused());
        assert!(!keyspace.expiry_held_at(Tick::now()));
    }

    #[tokio::test]
    async fn held_commands_take_their_turns_in_order() {
        let pause = Pause::new();
        let first = pause.ticket();
        let second = pause.ticket();
        let third = pause.ticket();
        first.my_turn().await;
        let waiting = tokio::time::timeout(Duration::from_millis(20), third.my_turn()).await;
        assert!(waiting.is_err(), "the third goes after the second");
        // The second leaves before its turn (its client went away): the third goes after
        // the first alone.
        drop(second);
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), third.my_turn())
            .await
            .expect("the third's turn comes");
    }

    #[test]
    fn a_zero_timeout_pauses_nothing_but_raises_a_pause_in_force() {
        let keyspace = Keyspace::new(1, 1);
        let pause = Pause::new();
        pause.pause(&keyspace, PauseMode::All, None);
        assert_eq!(pause.in_force(&keyspace), PauseMode::Off);
        pause.pause(&keyspace, PauseMode::Write, after_ms(60_000));
        pause.pause(&keyspace, PauseMode::All, None);
        assert_eq!(pause.in_force(&keyspace), PauseMode::All);
    }

    #[test]
    fn an_elapsed_pause_ends_when_looked_at() {
        let keyspace = Keyspace::new(1, 1);
        let pause = Pause::new();
        pause.pause(&keyspace, PauseMode::All, after_ms(1));
        std::thread::sleep(Duration::from_millis(3));
        assert!(pause.may_be_paused(), "nobody looked yet");
        assert!(
            !keyspace.expiry_held_at(Tick::now()),
            "the hold ends on time"
        );
        assert_eq!(pause.in_force(&keyspace), PauseMode::Off);
        assert!(!pause.may_be_paused());
        // A new pause after an elapsed one starts afresh (its mode is not raised).
        pause.pause(&keyspace, PauseMode::All, after_ms(1));
        std::thread::sleep(Duration::from_millis(3));
        pause.pause(&keyspace, PauseMode::Write, after_ms(60_000));
        assert_eq!(pause.in_force(&keyspace), PauseMode::Write);
    }
}
