//! The Latch keyspace: what the server stores and how it is shared between threads.
//!
//! - [`clock`]: the monotonic and wall clocks, frozen readings ([`Now`]) and [`Deadline`]s.
//! - [`lazyfree`]: big removed values freed on a background thread (UNLINK, ASYNC).
//! - [`compact`]: when a collection keeps its compact form (Redis' thresholds).
//! - [`value`]: what a key holds ([`Value`], [`Entry`]) and Redis' strict integer parsing.
//! - [`slot`]: one key's allocation (entry, access time, key bytes) behind a thin pointer.
//! - [`table`]: one database's part of one shard, an extendible hash table that SCAN can walk.
//! - [`keyspace`]: the shards, and [`Locked`], the view a command runs against.
//! - [`pack`]: a run of small elements in one allocation, the compact form of small
//!   hashes, sorted sets and lists.
//! - [`set`]: the set value (an intset or a hashtable, as Redis 7.0).
//! - [`list`]: the list value, packs in a deque (Redis' quicklist).
//! - [`thin`]: a byte string behind one thin pointer, the entries of large collections.
//! - [`hash`]: the hash value ([`Hash`]), compact or large.
//! - [`zset`]: the sorted set value.
//! - [`stream`]: the stream value.
//! - [`thin`]: an immutable byte string behind one 8-byte pointer.
//! - [`glob`]: Redis-style glob matching for KEYS, SCAN MATCH and CONFIG GET.

pub mod chunked;
pub mod clock;
pub mod compact;
pub mod glob;
pub mod hash;
pub mod incremental;
pub mod keyspace;
pub mod lazyfree;
pub mod lfu;
pub mod list;
pub mod pack;
pub mod set;
pub mod slot;
pub mod stream;
pub mod table;
pub mod thin;
pub mod value;
pub mod zset;

pub use clock::{Clock, Deadline, Now, Tick};
pub use hash::Hash;
pub use keyspace::{
    record, Effects, EvictionCandidate, KeyEvent, KeyEvents, KeyWaiter, Keyspace, Locked, LongWait,
    Snapshot, Tracked, TrackedChanges, Woken,
};
pub use list::List;
pub use pack::{Elem, Pack};
pub use set::Set;
pub use slot::Slot;
pub use stream::Stream;
pub use table::{Swept, Table};
pub use value::{parse_i64_strict, Entry, Value, ValueKind};
pub use zset::{Member, SortedSet};
