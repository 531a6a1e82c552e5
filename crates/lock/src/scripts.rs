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

/// The server's clock in milliseconds, as the shared scripts below compute it.
const NOW_MS: &str = r#"
local clock = redis.call('TIME')
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
"#;

/// Acquire a permit of a semaphore (`ARGV[3]` permits; a shared lock has as many as can
/// be): the holders are the members of a sorted set at the lock's name scored with the
/// unix ms their lease runs out, the key expiring with the last lease (the layout Latch's
/// `LOCK.ACQUIRE ... PERMITS` keeps, so both kinds of client share a semaphore). Leases
/// that ran out are dropped first. An exclusive holder (a string) keeps everyone out.
///
/// Returns `{1, fencing_token}` when granted (or renewed), `{0, ms until the first lease
/// runs out}` when not.
pub static ACQUIRE_SHARED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r#"
if redis.replicate_commands then redis.replicate_commands() end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'string' then return {{0, redis.call('PTTL', KEYS[1])}} end
{NOW_MS}
if kind == 'zset' then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. now_ms) end
if not redis.call('ZSCORE', KEYS[1], ARGV[1])
    and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
    local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    return {{0, tonumber(first[2]) - now_ms}}
end
redis.call('ZADD', KEYS[1], string.format('%.0f', now_ms + tonumber(ARGV[2])), ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
local floor = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local fence = redis.call('INCR', KEYS[2])
if fence < floor then
    redis.call('SET', KEYS[2], string.format('%.0f', floor))
    fence = floor
end
return {{1, fence}}
"#
    ))
});

/// Release a permit: 1 when this holder's lease was live and is gone, 0 otherwise.
pub static RELEASE_SHARED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r#"
if redis.replicate_commands then redis.replicate_commands() end
if redis.call('TYPE', KEYS[1])['ok'] ~= 'zset' then return 0 end
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then return 0 end
{NOW_MS}
redis.call('ZREM', KEYS[1], ARGV[1])
if tonumber(score) < now_ms then return 0 end
return 1
"#
    ))
});

/// Extend a permit's lease to `ARGV[2]` ms from now: 1 when it was live, 0 otherwise.
pub static EXTEND_SHARED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r#"
if redis.replicate_commands then redis.replicate_commands() end
if redis.call('TYPE', KEYS[1])['ok'] ~= 'zset' then return 0 end
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then return 0 end
{NOW_MS}
if tonumber(score) < now_ms then return 0 end
redis.call('ZADD', KEYS[1], string.format('%.0f', now_ms + tonumber(ARGV[2])), ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return 1
"#
    ))
});

/// What `latch lock status` shows of a lock, in one atomic step on any server: the key's
/// type, the exclusive holder's token (nil otherwise), the key's PTTL, the fencing counter,
/// and the live shared leases as token, ms left pairs.
pub static STATUS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r#"
local kind = redis.call('TYPE', KEYS[1])['ok']
local fence = redis.call('GET', KEYS[2])
local pttl = redis.call('PTTL', KEYS[1])
if kind == 'string' then return {{kind, redis.call('GET', KEYS[1]), pttl, fence, {{}}}} end
local holders = {{}}
if kind == 'zset' then
    {NOW_MS}
    local leases = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
    for i = 1, #leases, 2 do
        local left = tonumber(leases[i + 1]) - now_ms
        if left >= 0 then
            holders[#holders + 1] = leases[i]
            holders[#holders + 1] = left
        end
    end
end
return {{kind, false, pttl, fence, holders}}
"#
    ))
});
