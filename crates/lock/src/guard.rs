//! [`LockGuard`]: a held lock as a value. It renews the lock in the background, says when the
//! lock is lost (before the next write, not after), and releases it when released or dropped.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::error::{LockError, LostReason};
use crate::locker::{Lease, Locker};

/// Where a guard's lock stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockState {
    /// Held, as far as this process knows; [`LockGuard::ensure_held`] also checks the clock.
    Held,
    /// Lost: nothing may be written on its behalf any more.
    Lost(LostReason),
    /// Released by its holder.
    Released,
}

struct Shared {
    lease: Mutex<Lease>,
    state: watch::Sender<LockState>,
    acquired_at: Instant,
}

impl Shared {
    fn lease(&self) -> Lease {
        self.lease.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn valid_until(&self) -> Instant {
        self.lease
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .valid_until
    }

    /// Records a new validity, unless the lock was lost or released meanwhile.
    fn renewed(&self, valid_until: Instant) {
        if *self.state.borrow() == LockState::Held {
            self.lease
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .valid_until = valid_until;
        }
    }

    /// Marks the lock lost (once; a release or an earlier loss stays).
    fn lose(&self, reason: LostReason) {
        self.state.send_if_modified(|state| {
            if *state == LockState::Held {
                *state = LockState::Lost(reason);
                true
            } else {
                false
            }
        });
    }
}

/// A held lock. Dropping it releases the lock in the background (on the current tokio
/// runtime); [`LockGuard::release`] does it in the foreground and reports the outcome.
///
/// ```no_run
/// # async fn example() -> Result<(), latch_lock::LockError> {
/// use std::time::Duration;
/// use latch_lock::{Locker, LockOptions};
///
/// let locker = Locker::with_options(
///     &["redis://127.0.0.1:6379"],
///     LockOptions::new(Duration::from_secs(10)).wait(Duration::from_secs(5)),
/// )?;
/// let guard = locker.lock("nightly-report").await?;
/// // Before each write that the lock protects: a local check, no round trip.
/// guard.ensure_held()?;
/// // Send the fencing token along, so the resource can refuse a stale holder.
/// let token = guard.fencing_token();
/// # let _ = token;
/// guard.release().await?;
/// # Ok(()) }
/// ```
pub struct LockGuard {
    locker: Locker,
    shared: Arc<Shared>,
    name: String,
    token: String,
    fencing_token: u64,
    watcher: Option<JoinHandle<()>>,
}

impl LockGuard {
    pub(crate) fn new(locker: Locker, lease: Lease) -> LockGuard {
        let (state, _) = watch::channel(LockState::Held);
        let name = lease.name.clone();
        let token = lease.token.clone();
        let fencing_token = lease.fencing_token;
        let shared = Arc::new(Shared {
            lease: Mutex::new(lease),
            state,
            acquired_at: Instant::now(),
        });
        let watcher = tokio::spawn(watch_lease(locker.clone(), shared.clone()));
        LockGuard {
            locker,
            shared,
            name,
            token,
            fencing_token,
            watcher: Some(watcher),
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This holder's random token (the value of the lock's key).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The fencing token: strictly larger than that of every earlier holder of this lock. Send
    /// it with every write to the protected resource, which refuses writes whose token is
    /// smaller than the largest it has seen.
    pub fn fencing_token(&self) -> u64 {
        self.fencing_token
    }

    /// The current state.
    pub fn state(&self) -> LockState {
        *self.shared.state.borrow()
    }

    /// Time left on the lease as this process knows it (zero when lost).
    pub fn remaining(&self) -> Duration {
        match self.state() {
            LockState::Held => self
                .shared
                .valid_until()
                .saturating_duration_since(Instant::now()),
            _ => Duration::ZERO,
        }
    }

    /// Ok while the lock is held: not reported lost, and its validity not yet past on this
    /// machine's monotonic clock (which keeps running while the process is stopped, so a
    /// holder resumed after a pause longer than its lease learns it here). Call it before
    /// each write; no round trip.
    pub fn ensure_held(&self) -> Result<(), LockError> {
        match self.state() {
            LockState::Held if Instant::now() < self.shared.valid_until() => Ok(()),
            LockState::Held => {
                self.shared.lose(LostReason::Expired);
                Err(self.lost_error(LostReason::Expired))
            }
            LockState::Lost(reason) => Err(self.lost_error(reason)),
            LockState::Released => Err(self.lost_error(LostReason::Replaced)),
        }
    }

    /// Asks the servers whether a majority still holds this token (one round trip), and marks
    /// the lock lost when not.
    pub async fn check(&self) -> Result<(), LockError> {
        self.ensure_held()?;
        if self.locker.still_held(&self.shared.lease()).await? {
            Ok(())
        } else {
            self.shared.lose(LostReason::Replaced);
            Err(self.lost_error(LostReason::Replaced))
        }
    }

    /// Resolves when the lock is lost (renewal refused or failing past the lease, the cap on
    /// hold time reached); never while it is held.
    pub async fn lost(&self) -> LostReason {
        let mut states = self.shared.state.subscribe();
        loop {
            if let LockState::Lost(reason) = *states.borrow_and_update() {
                return reason;
            }
            if states.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// A receiver of state changes, for a task that outlives a borrow of the guard.
    pub fn subscribe(&self) -> watch::Receiver<LockState> {
        self.shared.state.subscribe()
    }

    /// Releases the lock now. [`LockError::Lost`] when it had already been lost: whatever was
    /// done since was not protected by it.
    pub async fn release(mut self) -> Result<(), LockError> {
        if let Some(watcher) = self.watcher.take() {
            watcher.abort();
        }
        let lease = self.shared.lease();
        let state = self.state();
        let outcome = self.locker.release(&lease).await;
        self.shared.state.send_replace(LockState::Released);
        match (state, outcome) {
            (LockState::Lost(reason), _) => Err(self.lost_error(reason)),
            (_, outcome) => outcome,
        }
    }

    fn lost_error(&self, reason: LostReason) -> LockError {
        LockError::Lost {
            name: self.name.clone(),
            reason,
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let Some(watcher) = self.watcher.take() else {
            return; // released already
        };
        watcher.abort();
        if self.state() != LockState::Held {
            return;
        }
        self.shared.state.send_replace(LockState::Released);
        // Without a runtime the lock simply runs out at its TTL.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let locker = self.locker.clone();
            let name = self.name.clone();
            let token = self.token.clone();
            runtime.spawn(async move {
                locker.release_token(&name, &token).await;
            });
        }
    }
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("name", &self.name)
            .field("fencing_token", &self.fencing_token)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

/// The guard's background task: renews at a third of the TTL while renewal is on and under its
/// cap, retries failed renewals quickly, and marks the lock lost when the lease runs out or a
/// majority says the token is gone.
async fn watch_lease(locker: Locker, shared: Arc<Shared>) {
    let options = locker.options().clone();
    let interval = options.ttl / 3;
    let cap_at = options.max_hold.map(|cap| shared.acquired_at + cap);
    let mut next_renewal = Instant::now() + interval;
    // Set once a renewal was shortened to end at the cap: the lease's end is then the cap's.
    let mut capped = false;
    loop {
        let valid_until = shared.valid_until();
        let renewing = options.renew && cap_at.is_none_or(|cap| Instant::now() < cap);
        let wake = if renewing {
            next_renewal.min(valid_until)
        } else {
            valid_until
        };
        tokio::time::sleep_until(wake.into()).await;

        let now = Instant::now();
        if now >= shared.valid_until() {
            let reason = match cap_at {
                Some(cap) if options.renew && (capped || now >= cap) => LostReason::MaxHoldReached,
                _ => LostReason::Expired,
            };
            shared.lose(reason);
            return;
        }
        if !renewing || now < next_renewal {
            continue;
        }
        // The last renewal before the cap only reaches the cap.
        let ttl = match cap_at {
            Some(cap) => options.ttl.min(cap.saturating_duration_since(now)),
            None => options.ttl,
        };
        if ttl < options.ttl {
            capped = true;
        }
        if ttl < Duration::from_millis(10) {
            next_renewal = valid_until;
            continue;
        }
        let mut lease = shared.lease();
        match locker.extend_for(&mut lease, ttl).await {
            Ok(()) => {
                shared.renewed(lease.valid_until);
                next_renewal = Instant::now() + interval;
            }
            Err(LockError::Lost { reason, .. }) => {
                shared.lose(reason);
                return;
            }
            Err(err) => {
                tracing::debug!(lock = %lease.name, error = %err, "renewal failed, retrying");
                next_renewal = Instant::now() + (interval / 6).max(Duration::from_millis(5));
            }
        }
    }
}
