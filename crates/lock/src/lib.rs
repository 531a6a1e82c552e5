//! Distributed locks on Redis-compatible servers (Redis, Valkey, Latch), on the `redis` crate.
//!
//! - [`Locker`] (`locker.rs`): a lock on one server, or Redlock over several independent
//!   servers. Acquire is `SET name token NX PX ttl` inside a script that also issues the
//!   fencing token; release and extend are compare-and-delete and compare-and-pexpire scripts
//!   (`scripts.rs`), sent with EVALSHA and loaded on NOSCRIPT. Never a plain `DEL`.
//! - [`LockGuard`] (`guard.rs`): a held lock as a value. Renews at a third of the TTL (with an
//!   optional cap on total hold time), tells you the lock is lost before your next write
//!   ([`LockGuard::ensure_held`], [`LockGuard::lost`]), releases on drop.
//! - [`LegacyLock`] (`legacy.rs`): the old SETNX/GETSET timestamp lock, for interoperating
//!   with old clients only; its documentation says what it cannot guarantee.
//! - `node.rs`: one server's connection, with a timeout on every call; `sentinel.rs`: a server
//!   given as a Redis Sentinel service (`redis+sentinel://`), whose primary the sentinels
//!   name, and which follows a failover.
//!
//! # Replication and failover
//!
//! Replication is asynchronous: a primary that grants a lock and dies before any replica got
//! the write loses that grant when a replica takes over, and the lock can then be granted a
//! second time while its first holder still runs. [`LockOptions::wait_replicas`] makes a
//! grant (and a renewal) count only once that many replicas acknowledged it (`WAIT`). The
//! fencing tokens keep growing across a failover either way: the counter is replicated, and
//! where the promoted replica missed the last increments, the floor of the server's clock
//! (below) is past them, as long as the servers' clocks agree to within the time a failover
//! takes. The later of two holders of a double grant thus has the larger token, and a fenced
//! resource refuses the earlier one's writes once the later one wrote.
//!
//! # Fencing tokens
//!
//! A lock based on expiry cannot stop a holder that was paused (GC, swap, SIGSTOP) past its
//! lease from writing afterwards. Every grant therefore carries a number,
//! [`LockGuard::fencing_token`], larger than every earlier grant's for the same lock name. The
//! protected resource remembers the largest token it has accepted and refuses writes that
//! carry a smaller one; a stale holder's late write is then refused instead of corrupting
//! data. Here the resource is itself a Redis-compatible server, and the check and the write
//! are one script:
//!
//! ```text
//! -- KEYS[1]: largest token seen, KEYS[2]: the data; ARGV[1]: token, ARGV[2]: value
//! local seen = tonumber(redis.call('GET', KEYS[1]) or '0')
//! if tonumber(ARGV[1]) < seen then
//!     return redis.error_reply('STALE fencing token ' .. ARGV[1] .. ' < ' .. seen)
//! end
//! redis.call('SET', KEYS[1], ARGV[1])
//! redis.call('SET', KEYS[2], ARGV[2])
//! return 'OK'
//! ```
//!
//! A database does the same with `UPDATE ... WHERE fence <= $token`, a file store by keeping
//! the token beside the file. (Tokens compare as integers; the same holder writes several
//! times with one token, so equal tokens pass.)
//!
//! How the tokens grow: on one server, the acquire script INCRs a counter key,
//! [`fence_key`]`(name)`, and never lets it fall below the server's clock in microseconds, so
//! a server that restarts without its data still issues larger tokens (unless its clock went
//! back). Under Redlock each server has its own counter: the grant takes the largest token of
//! the majority, then raises the granting servers' counters to it before the lock counts as
//! held. Any later majority shares a server with this one, whose counter is then at least
//! that token, so its grant is larger.

mod error;
mod guard;
mod legacy;
mod locker;
mod node;
mod options;
mod scripts;
mod sentinel;
mod token;

pub use error::{LockError, LostReason};
pub use guard::{LockGuard, LockState};
pub use legacy::{Attempt, LegacyLease, LegacyLock};
pub use locker::{validity, Lease, Locker, NodeStatus};
pub use options::{LockMode, LockOptions};
pub use sentinel::{percent_decode, SENTINEL_SCHEME};
pub use token::random_token;

/// The key of a lock's fencing counter: `{name}:fence`. The braces make it a Redis Cluster
/// hash tag, so the counter lives in the same slot as the lock key `name` itself (when `name`
/// has no braces of its own).
pub fn fence_key(name: &str) -> String {
    format!("{{{name}}}:fence")
}
