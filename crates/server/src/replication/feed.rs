//! The replication stream: every write, encoded as Redis' protocol, appended at the same
//! place (and under the same shard locks) as the AOF's entries, and kept in a backlog that
//! replicas read from.
//!
//! - **Offsets.** `end` counts every byte ever fed (`master_repl_offset`); the backlog holds
//!   the last bytes, the first of them at offset `end - len + 1`. A replica that has
//!   processed N bytes asks for N + 1 (PSYNC), and is served from there if the backlog still
//!   holds it.
//! - **Readers.** Each replica being fed registers its next offset. The backlog keeps
//!   `repl-backlog-size` bytes, and more while a registered replica still needs them (a full
//!   sync in progress, a slow replica), up to the replica class's hard output limit, past
//!   which that replica is dropped, as Redis drops a replica over
//!   `client-output-buffer-limit replica`.
//! - **Who feeds it.** On a primary, the gatekeeper's commits (`Feed::append`); on a
//!   replica, the bytes its primary sent, as they are (`Feed::append_raw`), so a chain of
//!   replicas shares one replication id and byte-exact offsets.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::client::Propagated;

pub struct Feed {
    inner: Mutex<Inner>,
    /// A backlog exists: writes are fed (one relaxed load for every write).
    active: AtomicBool,
    /// Set on a replica: only the primary's own bytes go in.
    proxy: AtomicBool,
    /// What the backlog's buffer holds allocated, read without the lock ([`Feed::memory`]).
    buffer_bytes: AtomicU64,
    /// `repl-backlog-size` as last set.
    backlog_size: AtomicU64,
}

/// The replication buffer's memory, as INFO memory and eviction count it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// The whole buffer (`mem_total_replication_buffers`).
    pub total: u64,
    /// The part `repl-backlog-size` accounts for (`mem_replication_backlog`).
    pub backlog: u64,
    /// What lagging replicas hold beyond it (`mem_clients_slaves`); Redis leaves it out of
    /// the memory eviction counts (`mem_not_counted_for_evict`).
    pub beyond_backlog: u64,
}

struct Inner {
    backlog: VecDeque<u8>,
    /// The offset of the last byte fed.
    end: u64,
    /// The database the stream's last `SELECT` chose (none: the next entry selects).
    db: Option<usize>,
    /// On a replica: the database the primary's stream is in after the last byte fed (a
    /// link that continues starts there, as the stream carries no `SELECT` until it
    /// changes).
    proxy_db: usize,
    backlog_size: usize,
    readers: Vec<Reader>,
    scratch: Vec<u8>,
}

struct Reader {
    id: u64,
    /// The next offset this reader needs.
    next: u64,
    wake: Arc<Notify>,
    /// Dropped for falling too far behind.
    dropped: bool,
    /// Most bytes it may fall behind (0: no limit).
    hard_limit: u64,
}

/// A replica's place in the stream.
pub struct Registration {
    pub id: u64,
    pub wake: Arc<Notify>,
}

/// What a read found.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    /// Bytes were copied (maybe none: nothing new).
    Bytes(usize),
    /// The reader fell behind its limit and must disconnect.
    Dropped,
}

impl Default for Feed {
    fn default() -> Self {
        Self::new()
    }
}

impl Feed {
    pub fn new() -> Feed {
        Feed {
            inner: Mutex::new(Inner {
                backlog: VecDeque::new(),
                end: 0,
                db: None,
                proxy_db: 0,
                backlog_size: 1 << 20,
                readers: Vec::new(),
                scratch: Vec::new(),
            }),
            active: AtomicBool::new(false),
            proxy: AtomicBool::new(false),
            buffer_bytes: AtomicU64::new(0),
            backlog_size: AtomicU64::new(1 << 20),
        }
    }

    /// The replication buffer's memory (no lock taken).
    pub fn memory(&self) -> Memory {
        let total = self.buffer_bytes.load(Ordering::Relaxed);
        let backlog = total.min(self.backlog_size.load(Ordering::Relaxed));
        Memory {
            total,
            backlog,
            beyond_backlog: total - backlog,
        }
    }

    fn note_memory(&self, inner: &Inner) {
        self.buffer_bytes
            .store(inner.backlog.capacity() as u64, Ordering::Relaxed);
        self.backlog_size
            .store(inner.backlog_size as u64, Ordering::Relaxed);
    }

    /// Whether writes are fed (a backlog exists).
    #[inline]
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Whether the gatekeeper's own commits go in (a primary's feed).
    #[inline]
    pub fn takes_commits(&self) -> bool {
        self.is_active() && !self.proxy.load(Ordering::Relaxed)
    }

    /// Creates the backlog if there is none (the first replica, or a replica after its
    /// sync), continuing from offset `end` when it is created.
    pub fn activate(&self, backlog_size: usize) {
        let mut inner = self.inner.lock();
        inner.backlog_size = backlog_size.max(1);
        self.note_memory(&inner);
        self.active.store(true, Ordering::Release);
    }

    /// Frees the backlog (`repl-backlog-ttl` passed without replicas): writes are no longer
    /// fed. The offset stays where it was.
    pub fn deactivate(&self) {
        let mut inner = self.inner.lock();
        self.active.store(false, Ordering::Release);
        inner.backlog = VecDeque::new();
        inner.db = None;
        self.note_memory(&inner);
    }

    /// Feeds only what [`Feed::append_raw`] gives (a replica), or the commits (a primary).
    pub fn set_proxy(&self, proxy: bool) {
        self.proxy.store(proxy, Ordering::Release);
    }

    pub fn set_backlog_size(&self, size: usize) {
        let mut inner = self.inner.lock();
        inner.backlog_size = size.max(1);
        trim(&mut inner);
        self.note_memory(&inner);
    }

    /// Restarts the stream at `offset` with an empty backlog (a replica that loaded its
    /// primary's data continues from the primary's offset).
    pub fn reset_to(&self, offset: u64) {
        let mut inner = self.inner.lock();
        inner.backlog.clear();
        inner.end = offset;
        inner.db = None;
        self.note_memory(&inner);
    }

    /// The next commit selects its database again (a new history starts here).
    pub fn reset_db(&self) {
        self.inner.lock().db = None;
    }

    /// The offset of the last byte fed (`master_repl_offset`).
    pub fn end(&self) -> u64 {
        self.inner.lock().end
    }

    /// On a replica: the database the primary's stream is in now.
    pub fn proxy_db(&self) -> usize {
        self.inner.lock().proxy_db
    }

    /// On a replica: the primary's stream continues in database `db` (the snapshot it
    /// loaded says where).
    pub fn set_proxy_db(&self, db: usize) {
        self.inner.lock().proxy_db = db;
    }

    /// What an RDB file records of the stream (Redis' `repl-offset` and
    /// `repl-stream-db`), read at a snapshot's cut: the offset and database a server
    /// that loads it continues from. None while nothing is fed (a primary that never had
    /// a replica, a replica not synced yet), as Redis writes none then.
    pub fn save_info(&self) -> Option<(u64, usize)> {
        if !self.is_active() {
            return None;
        }
        let inner = self.inner.lock();
        let db = if self.proxy.load(Ordering::Relaxed) {
            inner.proxy_db
        } else {
            inner.db.unwrap_or(0)
        };
        Some((inner.end, db))
    }

    /// `(first byte's offset, bytes held)` of the backlog.
    pub fn backlog_range(&self) -> (u64, u64) {
        let inner = self.inner.lock();
        let len = inner.backlog.len() as u64;
        (inner.end + 1 - len, len)
    }

    /// Appends a commit's entries, wrapped in MULTI/EXEC when `atomic` and several.
    /// Returns the offset just past them.
    pub fn append(&self, entries: &[Propagated], atomic: bool) -> u64 {
        let mut inner = self.inner.lock();
        let Inner { scratch, db, .. } = &mut *inner;
        scratch.clear();
        crate::persistence::aof::encode_entries(scratch, db, entries, atomic);
        push_scratch(&mut inner);
        self.note_memory(&inner);
        inner.end
    }

    /// Appends one command that selects no database (PING, REPLCONF GETACK).
    pub fn append_command(&self, args: &[Bytes]) {
        let mut inner = self.inner.lock();
        inner.scratch.clear();
        latch_persist::aof::encode_command(&mut inner.scratch, args);
        push_scratch(&mut inner);
        self.note_memory(&inner);
    }

    /// Appends bytes as they came from this replica's primary; `db`: the database its
    /// stream is in after them.
    pub fn append_raw(&self, bytes: &[u8], db: usize) {
        let mut inner = self.inner.lock();
        inner.proxy_db = db;
        inner.backlog.extend(bytes);
        inner.end += bytes.len() as u64;
        after_append(&mut inner);
        self.note_memory(&inner);
    }

    /// Registers a reader that starts at offset `from` (the next byte it needs); `None`
    /// when the backlog no longer (or not yet) holds it.
    pub fn register_from(&self, id: u64, from: u64, hard_limit: u64) -> Option<Registration> {
        let mut inner = self.inner.lock();
        let first = inner.end + 1 - inner.backlog.len() as u64;
        if from < first || from > inner.end + 1 {
            return None;
        }
        Some(register(&mut inner, id, from, hard_limit))
    }

    /// Registers a reader at the end of the stream, for a full sync cut now (call under
    /// every shard lock). Returns the registration, the cut's offset and the database the
    /// stream after it starts in: on a primary the next entry selects its database again
    /// (0 is as good as any); on a replica, where its primary's stream is.
    pub fn register_at_cut(&self, id: u64, hard_limit: u64) -> (Registration, u64, usize) {
        let mut inner = self.inner.lock();
        inner.db = None;
        let end = inner.end;
        let db = if self.proxy.load(Ordering::Relaxed) {
            inner.proxy_db
        } else {
            0
        };
        (register(&mut inner, id, end + 1, hard_limit), end, db)
    }

    pub fn unregister(&self, id: u64) {
        let mut inner = self.inner.lock();
        inner.readers.retain(|reader| reader.id != id);
        trim(&mut inner);
        self.note_memory(&inner);
    }

    /// Copies up to `max` bytes the reader has not had yet into `out`.
    pub fn read(&self, id: u64, out: &mut Vec<u8>, max: usize) -> Read {
        let mut inner = self.inner.lock();
        let first = inner.end + 1 - inner.backlog.len() as u64;
        let end = inner.end;
        let Some(reader) = inner.readers.iter_mut().find(|reader| reader.id == id) else {
            return Read::Dropped;
        };
        if reader.dropped || reader.next < first {
            return Read::Dropped;
        }
        let from = (reader.next - first) as usize;
        let count = ((end + 1 - reader.next) as usize).min(max);
        reader.next += count as u64;
        let (a, b) = inner.backlog.as_slices();
        let wanted = from..from + count;
        if wanted.start < a.len() {
            out.extend_from_slice(&a[wanted.start..wanted.end.min(a.len())]);
        }
        if wanted.end > a.len() {
            out.extend_from_slice(&b[wanted.start.saturating_sub(a.len())..wanted.end - a.len()]);
        }
        trim(&mut inner);
        self.note_memory(&inner);
        Read::Bytes(count)
    }
}

fn register(inner: &mut Inner, id: u64, from: u64, hard_limit: u64) -> Registration {
    let wake = Arc::new(Notify::new());
    inner.readers.retain(|reader| reader.id != id);
    inner.readers.push(Reader {
        id,
        next: from,
        wake: Arc::clone(&wake),
        dropped: false,
        hard_limit,
    });
    Registration { id, wake }
}

fn push_scratch(inner: &mut Inner) {
    let Inner {
        backlog,
        scratch,
        end,
        ..
    } = inner;
    backlog.extend(scratch.iter());
    *end += scratch.len() as u64;
    after_append(inner);
}

/// Wakes the readers, drops those too far behind, and trims the backlog.
fn after_append(inner: &mut Inner) {
    let end = inner.end;
    for reader in &mut inner.readers {
        if reader.hard_limit > 0 && end + 1 - reader.next > reader.hard_limit && !reader.dropped {
            reader.dropped = true;
        }
        reader.wake.notify_one();
    }
    trim(inner);
}

/// Keeps `backlog_size` bytes, and whatever a reader not dropped still needs; gives back
/// the room a lagging reader made it take once the buffer holds under a quarter of it.
fn trim(inner: &mut Inner) {
    let len = inner.backlog.len() as u64;
    let first = inner.end + 1 - len;
    let mut keep_from = (inner.end + 1).saturating_sub(inner.backlog_size as u64);
    for reader in &inner.readers {
        if !reader.dropped {
            keep_from = keep_from.min(reader.next);
        }
    }
    if keep_from > first {
        let drop = ((keep_from - first) as usize).min(inner.backlog.len());
        inner.backlog.drain(..drop);
    }
    let keep = inner.backlog.len().max(inner.backlog_size);
    if inner.backlog.capacity() > 4 * keep.max(SHRINK_ABOVE) {
        inner.backlog.shrink_to(2 * keep);
    }
}

/// A buffer this small is not given back.
const SHRINK_ABOVE: usize = 1 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(db: usize, args: &[&str]) -> Propagated {
        Propagated {
            db,
            args: args
                .iter()
                .map(|a| Bytes::copy_from_slice(a.as_bytes()))
                .collect(),
            replicas_only: false,
            aof_only: false,
        }
    }

    #[test]
    fn offsets_count_every_byte_and_selects_come_once_per_change() {
        let feed = Feed::new();
        feed.activate(1024);
        feed.append(&[entry(0, &["SET", "a", "1"])], false);
        let select0 = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n".len() as u64;
        let set = b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n".len() as u64;
        assert_eq!(feed.end(), select0 + set);
        feed.append(&[entry(0, &["SET", "a", "1"])], false);
        assert_eq!(feed.end(), select0 + 2 * set);
        assert_eq!(feed.backlog_range(), (1, select0 + 2 * set));
    }

    #[test]
    fn a_reader_gets_exactly_the_bytes_after_its_offset() {
        let feed = Feed::new();
        feed.activate(1 << 20);
        feed.append_raw(b"0123456789", 0);
        let registration = feed.register_from(7, 4, 0).expect("in the backlog");
        let mut out = Vec::new();
        assert_eq!(feed.read(registration.id, &mut out, 4), Read::Bytes(4));
        assert_eq!(out, b"3456");
        feed.append_raw(b"ab", 0);
        assert_eq!(feed.read(registration.id, &mut out, 100), Read::Bytes(5));
        assert_eq!(out, b"3456789ab");
        assert_eq!(feed.read(registration.id, &mut out, 100), Read::Bytes(0));
        assert!(feed.register_from(8, 14, 0).is_none(), "past the end");
        assert!(feed.register_from(8, 13, 0).is_some(), "just at the end");
    }

    #[test]
    fn the_backlog_keeps_its_size_and_what_readers_need() {
        let feed = Feed::new();
        feed.activate(4);
        feed.append_raw(b"0123456789", 0);
        assert_eq!(feed.backlog_range(), (7, 4));
        assert!(feed.register_from(1, 6, 0).is_none(), "trimmed away");
        let registration = feed.register_from(1, 7, 0).unwrap();
        feed.append_raw(b"abcdefgh", 0);
        // The reader still needs offset 7 onwards: nothing it needs is trimmed.
        assert_eq!(feed.backlog_range(), (7, 12));
        let mut out = Vec::new();
        assert_eq!(feed.read(registration.id, &mut out, 100), Read::Bytes(12));
        assert_eq!(out, b"6789abcdefgh");
        assert_eq!(feed.backlog_range(), (15, 4));
    }

    #[test]
    fn a_reader_past_its_hard_limit_is_dropped_and_releases_the_backlog() {
        let feed = Feed::new();
        feed.activate(4);
        let (registration, offset, _) = feed.register_at_cut(1, 8);
        assert_eq!(offset, 0);
        feed.append_raw(b"01234567", 0);
        let mut out = Vec::new();
        assert_eq!(feed.read(registration.id, &mut out, 2), Read::Bytes(2));
        feed.append_raw(b"89abc", 0);
        assert_eq!(feed.read(registration.id, &mut out, 100), Read::Dropped);
        feed.unregister(registration.id);
        assert_eq!(feed.backlog_range().1, 4);
    }
}
