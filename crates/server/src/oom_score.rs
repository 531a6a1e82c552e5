//! `oom-score-adj`: how likely the kernel's OOM killer is to pick this server, as Redis
//! sets it in `/proc/self/oom_score_adj` (Linux only; elsewhere nothing is done).
//!
//! `oom-score-adj-values` holds three values: for a primary, a replica and a background
//! child. Latch forks no child (snapshots are cut without fork), so the third is only kept.
//! `relative` (or `yes`) adds the value to the score the process had at start, `absolute`
//! writes it as is, `no` puts the start value back. The result is clamped to -1000..1000.
//! Applied at start, on CONFIG SET of either option, and when the server changes role.

use std::sync::OnceLock;

use crate::config::Config;

const PATH: &str = "/proc/self/oom_score_adj";

/// The score the process had before the server first changed it.
fn base() -> Option<i64> {
    static BASE: OnceLock<Option<i64>> = OnceLock::new();
    *BASE.get_or_init(|| std::fs::read_to_string(PATH).ok()?.trim().parse().ok())
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

/// Writes the score the options and the role ask for. The error is why it could not be
/// written (a lower score than the start's needs privileges).
pub fn apply(config: &Config, replica: bool) -> Result<(), String> {
    let Some(base) = base() else {
        return Ok(()); // No such file: not Linux, or no /proc.
    };
    let score = wanted(config, replica, base).unwrap_or(base);
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
