//! LFU access counters, as Redis keeps them for the `*-lfu` eviction policies.
//!
//! Under an LFU policy a key's access field ([`crate::Slot::access_s`]) holds, instead of
//! its last access time, Redis' 24 bits: the minute of the last decrement (16 bits,
//! wrapping) and a logarithmic counter (8 bits). A new key starts at [`INIT`]. Each access
//! first takes one off the counter per `lfu-decay-time` minutes since the stored minute,
//! then adds one with probability `1 / ((counter - INIT) * lfu-log-factor + 1)`, so that
//! with the default factor 10 a million accesses bring the counter to about 255. Switching
//! between LRU and LFU policies reinterprets the field, as in Redis: the figures take a
//! while to mean something again.

use std::sync::atomic::{AtomicU32, Ordering};

/// The counter a new key starts at (Redis' `LFU_INIT_VAL`): a key just written is not the
/// first to go.
pub const INIT: u8 = 5;

/// The current minute as the field stores it (Unix minutes, 16 bits).
pub fn minutes(unix_s: i64) -> u32 {
    (unix_s.div_euclid(60) as u64 & 0xffff) as u32
}

/// The field of a key with `counter` last decremented at `minute`.
pub fn pack(minute: u32, counter: u8) -> u32 {
    ((minute & 0xffff) << 8) | u32::from(counter)
}

/// Minutes from `then` to `now` on the wrapping 16-bit clock.
fn elapsed(now: u32, then: u32) -> u32 {
    if now >= then {
        now - then
    } else {
        0xffff - then + now
    }
}

/// The counter after the decay since its stored minute (Redis' `LFUDecrAndReturn`); the
/// field itself is unchanged. `decay_minutes` 0 means no decay.
pub fn decayed(field: u32, now_minute: u32, decay_minutes: u32) -> u8 {
    let counter = (field & 0xff) as u8;
    if decay_minutes == 0 {
        return counter;
    }
    let periods = elapsed(now_minute, (field >> 8) & 0xffff) / decay_minutes;
    counter.saturating_sub(periods.min(255) as u8)
}

/// The field after one access: decayed, then incremented with the logarithmic
/// probability, stamped with `now_minute`. `random` is uniform in [0, 1).
pub fn touched(field: u32, now_minute: u32, params: Params, random: f64) -> u32 {
    let mut counter = decayed(field, now_minute, params.decay_minutes);
    if counter < 255 {
        let base = f64::from(counter.saturating_sub(INIT));
        if random < 1.0 / (base * f64::from(params.log_factor) + 1.0) {
            counter += 1;
        }
    }
    pack(now_minute, counter)
}

/// `lfu-log-factor` and `lfu-decay-time`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    pub log_factor: u32,
    pub decay_minutes: u32,
}

/// The keyspace's LFU settings: whether keys count accesses, and how.
#[derive(Debug)]
pub struct Settings {
    /// 0: off (access times are kept); otherwise `lfu-log-factor + 1`.
    factor_plus_one: AtomicU32,
    decay_minutes: AtomicU32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            factor_plus_one: AtomicU32::new(0),
            decay_minutes: AtomicU32::new(1),
        }
    }
}

impl Settings {
    /// Turns counting on with `params`, or off (`None`).
    pub fn set(&self, params: Option<Params>) {
        match params {
            Some(params) => {
                self.decay_minutes
                    .store(params.decay_minutes, Ordering::Relaxed);
                self.factor_plus_one
                    .store(params.log_factor.saturating_add(1), Ordering::Relaxed);
            }
            None => self.factor_plus_one.store(0, Ordering::Relaxed),
        }
    }

    /// The settings while keys count accesses.
    #[inline]
    pub fn get(&self) -> Option<Params> {
        match self.factor_plus_one.load(Ordering::Relaxed) {
            0 => None,
            factor_plus_one => Some(Params {
                log_factor: factor_plus_one - 1,
                decay_minutes: self.decay_minutes.load(Ordering::Relaxed),
            }),
        }
    }
}

/// A uniform draw in [0, 1) from a per-thread xorshift generator: an access must not pay
/// for a cryptographic one.
pub fn random_unit() -> f64 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let seed = std::collections::hash_map::RandomState::new();
            std::hash::BuildHasher::hash_one(&seed, 0u8) | 1
        });
    }
    STATE.with(|state| {
        let mut x = state.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        state.set(x);
        (x >> 11) as f64 / (1u64 << 53) as f64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT: Params = Params {
        log_factor: 10,
        decay_minutes: 1,
    };

    #[test]
    fn a_new_key_starts_at_init_and_decays_one_per_period() {
        let field = pack(100, INIT);
        assert_eq!(decayed(field, 100, 1), INIT);
        assert_eq!(decayed(field, 102, 1), INIT - 2);
        assert_eq!(decayed(field, 200, 1), 0);
        assert_eq!(
            decayed(field, 200, 0),
            INIT,
            "no decay with lfu-decay-time 0"
        );
        assert_eq!(decayed(field, 110, 5), INIT - 2);
        // The 16-bit minute clock wraps.
        assert_eq!(decayed(pack(0xfffe, INIT), 1, 1), INIT - 2);
    }

    #[test]
    fn accesses_grow_the_counter_logarithmically() {
        let mut field = pack(7, INIT);
        for _ in 0..100 {
            field = touched(field, 7, DEFAULT, random_unit());
        }
        let after_100 = decayed(field, 7, 1);
        for _ in 0..100_000 {
            field = touched(field, 7, DEFAULT, random_unit());
        }
        let after_100k = decayed(field, 7, 1);
        // Redis' table for factor 10: about 10 after 100 hits, about 142 after 100K
        // (from the initial 5, with randomness).
        assert!((8..=20).contains(&after_100), "{after_100}");
        assert!((100..=200).contains(&after_100k), "{after_100k}");
        // A hit with probability 1 below INIT+1 always counts.
        assert_eq!(decayed(touched(pack(7, 0), 7, DEFAULT, 0.99), 7, 1), 1);
        // 255 stays.
        assert_eq!(decayed(touched(pack(7, 255), 7, DEFAULT, 0.0), 7, 1), 255);
    }

    #[test]
    fn settings_turn_on_and_off() {
        let settings = Settings::default();
        assert_eq!(settings.get(), None);
        settings.set(Some(DEFAULT));
        assert_eq!(settings.get(), Some(DEFAULT));
        settings.set(Some(Params {
            log_factor: 0,
            decay_minutes: 0,
        }));
        assert_eq!(settings.get().unwrap().log_factor, 0);
        settings.set(None);
        assert_eq!(settings.get(), None);
    }
}
