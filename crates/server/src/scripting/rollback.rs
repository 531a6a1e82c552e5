//! `SCRIPT DEBUG YES`: a debugging session whose writes are undone when it ends.
//!
//! Redis forks for such a session and lets the child, with its copy of the data, go away
//! at the end. Latch keeps a journal instead: before each write command the script (or the
//! debugger's `redis` command) runs, the keys it names are copied as they are, once per
//! key, and a command that empties or swaps whole databases has those databases copied.
//! When the session ends, still under the script's locks, the journal is played backwards,
//! so every key is left as it was when the session began. What the session wrote is never
//! propagated to the AOF or the replicas.

use std::collections::HashSet;

use bytes::Bytes;
use latch_keyspace::{Entry, Locked, Slot};

use crate::spec::{flag, key_positions};
use crate::table::Command;

/// How a client's next EVAL is debugged (`SCRIPT DEBUG`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DebugMode {
    #[default]
    Off,
    /// SYNC: the session's writes are kept.
    Keep,
    /// YES: the session's writes are undone when it ends.
    RollBack,
}

/// What one journal entry puts back.
enum Undo {
    /// A key as it was (`None`: it did not exist).
    Key {
        db: usize,
        key: Vec<u8>,
        before: Option<Entry>,
    },
    /// A whole database as it was, before a FLUSHDB, FLUSHALL or SWAPDB.
    Db {
        db: usize,
        before: Vec<(Vec<u8>, Entry)>,
    },
}

/// The journal of one session.
#[derive(Default)]
pub struct Journal {
    entries: Vec<Undo>,
    /// Keys already copied since the last whole-database entry.
    copied: HashSet<(usize, Vec<u8>)>,
}

impl Journal {
    /// Copies what `command` (with `args`, run in database `db`) may change, before it runs.
    pub fn before(&mut self, keys: &mut Locked<'_>, db: usize, command: &Command, args: &[Bytes]) {
        if !command.spec.has_flag(flag::WRITE) {
            return;
        }
        let num_dbs = keys.keyspace().num_dbs();
        let db_arg = |at: usize| {
            args.get(at)
                .and_then(|arg| std::str::from_utf8(arg).ok())
                .and_then(|text| text.parse::<usize>().ok())
                .filter(|&n| n < num_dbs)
        };
        match command.full_name.as_str() {
            "flushdb" => self.copy_db(keys, db),
            "flushall" => (0..num_dbs).for_each(|n| self.copy_db(keys, n)),
            "swapdb" => {
                if let (Some(a), Some(b)) = (db_arg(1), db_arg(2)) {
                    self.copy_db(keys, a);
                    self.copy_db(keys, b);
                }
            }
            name => {
                if name == "move" {
                    if let (Some(key), Some(target)) = (args.get(1), db_arg(2)) {
                        self.copy_key(keys, target, key);
                    }
                }
                if name == "copy" {
                    // COPY source destination [DB n] [REPLACE]: the destination may be in
                    // another database.
                    let target = args
                        .iter()
                        .position(|arg| arg.eq_ignore_ascii_case(b"db"))
                        .filter(|&at| at >= 3)
                        .and_then(|at| db_arg(at + 1));
                    if let (Some(key), Some(target)) = (args.get(2), target) {
                        self.copy_key(keys, target, key);
                    }
                }
                let mut positions = Vec::new();
                match crate::commands::sort::keys_of(name, args) {
                    Some(found) => positions.extend(found.into_iter().map(|(at, _)| at)),
                    None => {
                        if key_positions(command.spec, args, &mut positions).is_err() {
                            // The command will refuse its arguments: nothing changes.
                            return;
                        }
                    }
                }
                for at in positions {
                    if let Some(key) = args.get(at) {
                        self.copy_key(keys, db, key);
                    }
                }
            }
        }
    }

    fn copy_key(&mut self, keys: &mut Locked<'_>, db: usize, key: &[u8]) {
        if !self.copied.insert((db, key.to_vec())) {
            return;
        }
        let before = keys.get_slot_untouched(db, key).map(|slot| entry_of(slot));
        self.entries.push(Undo::Key {
            db,
            key: key.to_vec(),
            before,
        });
    }

    fn copy_db(&mut self, keys: &mut Locked<'_>, db: usize) {
        let mut before = Vec::new();
        keys.for_each_key(db, &mut |slot| {
            before.push((slot.key().to_vec(), entry_of(slot)))
        });
        self.entries.push(Undo::Db { db, before });
        // A key copied before now may live in another database after a SWAPDB: copy again.
        self.copied.clear();
    }

    /// Puts everything back as it was when the journal began (newest entry first, so the
    /// oldest copy of each key is the one that stays).
    pub fn roll_back(self, keys: &mut Locked<'_>) {
        for undo in self.entries.into_iter().rev() {
            match undo {
                Undo::Key { db, key, before } => {
                    keys.remove(db, &key);
                    if let Some(entry) = before {
                        keys.put_entry(db, &key, entry);
                    }
                }
                Undo::Db { db, before } => {
                    keys.flush_db(db);
                    for (key, entry) in before {
                        keys.put_entry(db, &key, entry);
                    }
                }
            }
        }
    }
}

fn entry_of(slot: &Slot) -> Entry {
    Entry {
        value: slot.value().clone(),
        deadline: slot.deadline(),
    }
}
