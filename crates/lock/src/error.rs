//! What can go wrong with a lock, as one typed error.

use std::time::Duration;

/// Why a lock was lost after it had been granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LostReason {
    /// The lease ran out before a renewal succeeded: renewal failed, was turned off, or this
    /// process was paused past its validity.
    Expired,
    /// The servers no longer hold this holder's token: the key expired and someone else took
    /// it, or it was deleted.
    Replaced,
    /// Renewal stopped at the cap on total hold time, and the lease then ran out.
    MaxHoldReached,
}

impl std::fmt::Display for LostReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LostReason::Expired => "the lease expired before it was renewed",
            LostReason::Replaced => "the servers no longer hold this token",
            LostReason::MaxHoldReached => "the cap on total hold time was reached",
        })
    }
}

/// Errors of the lock library.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Someone else holds the lock (after waiting `waited`, when the caller asked to wait).
    #[error("lock {name:?} is held by another client (waited {waited:?})")]
    NotAcquired { name: String, waited: Duration },

    /// The lock was held and is not any more; nothing may be written on its behalf.
    #[error("lock {name:?} was lost: {reason}")]
    Lost { name: String, reason: LostReason },

    /// A server could not be reached or did not answer within its timeout.
    #[error("server {server} is unreachable: {detail}")]
    Unreachable { server: String, detail: String },

    /// The server granted or renewed the lock, but fewer of its replicas than
    /// [`crate::LockOptions::wait_replicas`] asks for acknowledged the write in time (`WAIT`),
    /// so it does not count (a grant is released again).
    #[error("server {server}: {acked} of {needed} replicas acknowledged the write in time")]
    NotReplicated {
        server: String,
        acked: u32,
        needed: u32,
    },

    /// Too few servers answered for a majority (Redlock), or the answers came too late to
    /// leave any validity.
    #[error("lock {name:?}: no quorum ({granted} of {needed} needed servers granted it, {failed} failed to answer)")]
    QuorumFailed {
        name: String,
        granted: usize,
        needed: usize,
        failed: usize,
    },

    /// A server answered with something the lock protocol does not expect (for example a
    /// WRONGTYPE error because the lock's key holds another type).
    #[error("server {server} replied unexpectedly: {detail}")]
    Protocol { server: String, detail: String },

    /// A bad argument: an invalid URL, a zero TTL, no servers.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl LockError {
    /// Whether trying again later may succeed (the lock was taken, servers were down, or
    /// replicas were slow).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            LockError::NotAcquired { .. }
                | LockError::Unreachable { .. }
                | LockError::NotReplicated { .. }
                | LockError::QuorumFailed { .. }
        )
    }
}
