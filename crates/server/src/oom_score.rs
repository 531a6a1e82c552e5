//! `oom-score-adj`: how likely the kernel's OOM killer is to pick this server, as Redis
//! sets it in `/proc/self/oom_score_adj` (Linux only; elsewhere nothing is done).
//!
//! `oom-score-adj-values` holds three values: for a primary, a replica and a background
//! child. Latch forks no child (snapshots are cut without fork), so the third is only kept.
//! `relative` (or `yes`) adds the value to the score the process had when the option came
//! on, `absolute` writes it as is, `no` puts that score back. Clamped to -1000..1000.
//! Applied at start, on CONFIG SET of either option, and when the server changes role.

use parking_lot::Mutex;

use crate::config::Config;

const PATH: &str = "/proc/self/oom_score_adj";

/// The score the process had when the server took control of it (the first apply with
/// the option on), while it has control; given back when the option goes off.
static BASE: Mutex<Option<i64>> = Mutex::new(None);

fn read() -> Option<i64> {
    std::fs::read_to_string(PATH).ok()?.trim().parse().ok()
}

/// The score the options ask for, given the role; `None` for `oom-score-adj no`.
fn wanted(config: &Config, replica: bool, base: i64) -> Option<i64> {
    let mode = config.get("oom-score-adj").unwrap_or_default();
    if mode == "no" {
        return None;
    }
    let values: Vec<i64> = config
        .get("oom-score-adj-values")
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    let value = values.get(usize::from(replica)).copied().unwrap_or(0);
    let score = if mode == "absolute" {
        value
    } else {
        base + value
    };
    Some(score.clamp(-1000, 1000))
}

/// Writes the score the options and the role ask for, as Redis does: the first time the
/// option is on, the current score becomes the base; when it goes off, the base is put
/// back; while it is off, nothing is written. The error is why the write failed (a lower
/// score than the base needs privileges).
pub fn apply(config: &Config, replica: bool) -> Result<(), String> {
    let mut base = BASE.lock();
    let on = config.get("oom-score-adj").unwrap_or_default() != "no";
    let score = match (on, *base) {
        (false, None) => return Ok(()),
        (false, Some(saved)) => {
            *base = None;
            saved
        }
        (true, saved) => {
            let Some(current) = saved.or_else(read) else {
                return Ok(()); // No such file: not Linux, or no /proc.
            };
            *base = Some(current);
            wanted(config, replica, current).unwrap_or(current)
        }
    };
    std::fs::write(PATH, format!("{score}\n")).map_err(|error| {
        tracing::warn!("Unable to write oom_score_adj: {error}");
        format!("Failed to set current oom_score_adj ({error}). Check server logs.")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_roles_pick_the_score() {
        let config = Config::from_text(
            "oom-score-adj relative\noom-score-adj-values \"10 20 30\"\n",
            None,
        )
        .unwrap();
        assert_eq!(wanted(&config, false, 100), Some(110));
        assert_eq!(wanted(&config, true, 100), Some(120));
        assert_eq!(wanted(&config, true, 995), Some(1000));
        let config = Config::from_text(
            "oom-score-adj absolute\noom-score-adj-values \"-5 7 9\"\n",
            None,
        )
        .unwrap();
        assert_eq!(wanted(&config, false, 100), Some(-5));
        let config = Config::from_text("oom-score-adj no\n", None).unwrap();
        assert_eq!(wanted(&config, false, 100), None);
    }
}
