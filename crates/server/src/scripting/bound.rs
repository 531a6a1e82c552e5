//! Bounds on what a walk over a script's tables may produce: the script's reply
//! (`convert.rs`), `cjson.encode` and `cmsgpack.pack`.
//!
//! A script can make a value whose encoding never ends or is out of all proportion to the
//! memory it holds: a table that contains itself (`t[1] = t`), which the depth limits
//! catch, or a table whose subtables are shared (`local a = {} for i = 1, 40 do a = {a, a}
//! end`: 41 tables, 2^40 leaves), a string repeated (`t[i] = s` for a MiB `s`), or, in
//! `cjson`, a sparse array made dense (`{[1e9] = 1}`). Redis walks these until it runs out
//! of memory or time. Here every walk stops with an error once its output passes
//! [`MAX_OUTPUT`], and, so that it gets there without first writing hundreds of MB one small
//! value at a time, a walk that has written [`MEASURE_AFTER_VALUES`] values or
//! [`MEASURE_AFTER_BYTES`] bytes measures the whole value once: a lower bound of its
//! output's size, each table counted once however often it is met (shared subtables are
//! not walked again). When that bound is past [`MAX_OUTPUT`] the walk stops at once. Both
//! paths give the same error, and only for a value whose output really is too large: the
//! measure never counts more than the walk would write.
//!
//! Below the bound, a walk that meets a table it has already written (at a place where its
//! walk would not fail) copies the bytes it wrote for it instead of walking it again, so a
//! value of shared subtables costs what its output is (a `memcpy`), not a walk of every
//! branch: 2^20 copies of a table encode in a fraction of a second. Each walk keeps, for
//! the tables it wrote, where their bytes are (see `Written` in each).

use std::collections::HashMap;
use std::ffi::c_void;

/// The most a walk may write: 512 MB, `proto-max-bulk-len`'s default, the largest string
/// a client may send (and so the largest value a script could have been given): a reply
/// or an encoding larger than that is no value anyone stores or sends, only a way to fill
/// the server's memory.
pub const MAX_OUTPUT: usize = 512 * 1024 * 1024;

/// Values written before a walk measures the whole value (see the module's notes). A
/// walk of a normal value never measures: one that does has written at least this much,
/// so measuring (one pass over each distinct table) costs it at most about as much again.
pub const MEASURE_AFTER_VALUES: usize = 1 << 20;
/// ... or bytes written before it does.
pub const MEASURE_AFTER_BYTES: usize = 4 << 20;

/// How deep a measure looks: values nested deeper count for nothing (the bound stays a
/// lower bound). Deep enough for any shared-subtable blowup to show (each level of one
/// doubles the count at least), shallow enough that the measure's recursion and the Lua
/// references it holds stay small.
pub const MEASURE_DEPTH: usize = 100;

/// The output was (or would be) larger than [`MAX_OUTPUT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge;

/// The lower bounds a measure found for each table (and the level it was met at, for
/// walks whose output depends on it), so that a table met again is not walked again.
pub type Memo = HashMap<(*const c_void, usize), usize>;

/// Where a walk stands against its bounds.
#[derive(Debug, Default)]
pub struct Budget {
    values: usize,
    measured: bool,
}

impl Budget {
    /// Called after each value a walk writes, with the bytes written so far. `measure`
    /// (called at most once, after [`MEASURE_AFTER_VALUES`] values or
    /// [`MEASURE_AFTER_BYTES`] bytes) gives a lower bound of the whole output's size.
    pub fn wrote(
        &mut self,
        written: usize,
        measure: impl FnOnce() -> usize,
    ) -> Result<(), TooLarge> {
        self.values += 1;
        if written > MAX_OUTPUT {
            return Err(TooLarge);
        }
        if !self.measured && (self.values >= MEASURE_AFTER_VALUES || written >= MEASURE_AFTER_BYTES)
        {
            self.measured = true;
            if measure() > MAX_OUTPUT {
                return Err(TooLarge);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_measures_once_and_stops_past_the_bound() {
        let mut budget = Budget::default();
        let mut measures = 0;
        for _ in 1..MEASURE_AFTER_VALUES {
            budget.wrote(10, || unreachable!()).unwrap();
        }
        budget
            .wrote(10, || {
                measures += 1;
                MAX_OUTPUT
            })
            .unwrap();
        budget.wrote(20, || unreachable!()).unwrap();
        assert_eq!(measures, 1);
        assert_eq!(budget.wrote(MAX_OUTPUT + 1, || 0), Err(TooLarge));
        let mut fresh = Budget::default();
        assert_eq!(
            fresh.wrote(MEASURE_AFTER_BYTES, || MAX_OUTPUT + 1),
            Err(TooLarge)
        );
    }
}
