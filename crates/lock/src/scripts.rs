//! The Lua scripts of the lock protocol. Each runs atomically on one server, and is sent with
//! EVALSHA, falling back to SCRIPT LOAD on NOSCRIPT (`redis::Script` does both).
//!
//! Keys: `KEYS[1]` is the lock (its value is the holder's random token), `KEYS[2]` the lock's
//! fencing counter (see [`crate::fence_key`]).

use std::sync::LazyLock;

use redis::Script;

/// Acquire: `SET lock token NX PX ttl`, and on success the next fencing token.
///
/// The counter is INCRemented, but never falls below the server's clock in microseconds: a
/// server that restarts without its data (no persistence) then still hands out tokens larger
/// than any it gave before, as long as its clock has not gone back. The floor fits a Lua
/// number exactly (below 2^53 until the year 2255).
///
/// Returns `{1, fencing_token}` when granted, `{0, holder_pttl}` when not.
pub static ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.replicate_commands then redis.replicate_commands() end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    local now = redis.call('TIME')
    local floor = tonumber(now[1]) * 1000000 + tonumber(now[2])
    local fence = redis.call('INCR', KEYS[2])
    if fence < floor then
        redis.call('SET', KEYS[2], string.format('%.0f', floor))
        fence = floor
    end
    return {1, fence}
end
return {0, redis.call('PTTL', KEYS[1])}
"#,
    )
});

/// Redlock's second step: after a majority granted the lock, raise each granting server's
/// counter to the largest token of the majority, so that any later majority (which shares a
/// server with this one) grants a larger token. Only where this holder's token is still set.
///
/// Returns 1 when raised (or already higher), 0 when the lock is not this holder's.
pub static RAISE_FENCE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local current = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
if current < tonumber(ARGV[2]) then redis.call('SET', KEYS[2], ARGV[2]) end
return 1
"#,
    )
});

/// Release: compare-and-delete. Returns 1 when this holder's lock was deleted, 0 otherwise.
pub static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
"#,
    )
});

/// Extend: compare-and-pexpire. Returns 1 when this holder's lock now has `ttl` left.
pub static EXTEND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"#,
    )
});
