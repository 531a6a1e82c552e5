#!/usr/bin/env bash
# Redis as a cache: latch-server against redis-server 7.0 under maxmemory, side by side.
#
#   bench/cache.sh [--rounds N] [--seconds S] [--warmup S] [--policies allkeys-lru,allkeys-lfu]
#                  [--maxmemory 100mb] [--clients N] [--pipeline N] [--keys N]
#                  [--value-size B] [--zipf S]
#
# Each server runs with `--save "" --appendonly no --maxmemory 100mb --maxmemory-policy P`
# (redis-server also `--daemonize no`), fresh for every run, pinned to core 0; the load,
# bench/cache.c (built here with gcc -O2), pinned to core 1: 50 connections, pipeline 1,
# GET of a key picked by a Zipf law (exponent 0.99, as YCSB) over 2,500,000 keys, and after
# every miss SET of that key with a 200-byte value (cache-aside). The values alone are 500
# MB, 5x maxmemory (about 8x with Redis' own overhead per key): the server must evict, and
# its policy decides how many GETs hit. 10 s of warm-up (the cache fills) then 20 s
# measured; meanwhile the load generator reads INFO memory every 100 ms on a connection of
# its own and keeps the largest used_memory. Each round runs, for each policy, redis then
# latch, with the same seed (the same sequence of keys); the table shows the medians of the
# rounds. A full run (3 rounds, 2 policies) takes about 8 minutes.
#
# The table, per policy, columns redis-server, latch-server and latch vs redis:
#   hit rate (%)             hits / GETs in the measured window, as the client saw them;
#                            the last column is latch - redis in points
#   GETs/s, commands/s       GETs answered per second, and GETs plus the SETs after misses
#                            (a lower hit rate means more SETs: compare GETs/s for the work
#                            a cache saves); the last column is latch/redis
#   max used_memory (MB)     the largest used_memory sampled, warm-up included (the first
#                            fill is when a server is most likely to overshoot), and after
#                            the warm-up only; MB of 2^20 bytes
#   over maxmemory (KB)      max used_memory - maxmemory (negative: it stayed below), median
#                            and worst round; the last column is latch - redis (KB)
#   evicted keys             evicted_keys during the measured window (INFO stats)
#   OOM errors               -OOM replies to SETs (a cache should evict, never refuse)
# used_memory is sampled, not watched: a peak that lasts less than 100 ms can be missed.
# Then the load generator's ceiling: the same load against `cache --respond`, which answers
# every GET with a nil and every SET with +OK at once (so every GET misses and half the
# commands are SETs): no server can show more commands/s than that on this machine, and
# ceiling/redis is the highest latch/redis ratio the commands/s row can show.
#
# Needs redis-server, redis-cli (Debian: redis-server, redis-tools), taskset (util-linux)
# and gcc; builds latch-server --release if missing.
set -euo pipefail

rounds=3 seconds=20 warmup=10 policies=allkeys-lru,allkeys-lfu maxmemory=100mb
clients=50 pipeline=1 keys=2500000 value_size=200 zipf=0.99
while [[ $# -gt 0 ]]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        --warmup) warmup=$2; shift 2 ;;
        --policies) policies=$2; shift 2 ;;
        --maxmemory) maxmemory=$2; shift 2 ;;
        --clients) clients=$2; shift 2 ;;
        --pipeline) pipeline=$2; shift 2 ;;
        --keys) keys=$2; shift 2 ;;
        --value-size) value_size=$2; shift 2 ;;
        --zipf) zipf=$2; shift 2 ;;
        *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
    esac
done
policies=${policies//,/ }

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tools redis-server redis-cli taskset gcc
[[ $(nproc) -ge 2 ]] || { echo "needs 2 cores: the server on core 0, the load on core 1" >&2; exit 1; }
cache_bin=$work/cache
gcc -O2 -o "$cache_bin" "$repo/bench/cache.c" -lm

# maxmemory in bytes, with Redis' units (k = 1000, kb = 1024, m, mb, g, gb).
maxmemory_bytes=$(awk -v m="${maxmemory,,}" 'BEGIN {
    n = m + 0; u = m; sub(/^[0-9]+/, "", u)
    f["b"] = 1; f[""] = 1; f["k"] = 1e3; f["kb"] = 1024; f["m"] = 1e6; f["mb"] = 1024 ^ 2
    f["g"] = 1e9; f["gb"] = 1024 ^ 3
    if (!(u in f)) { print "bad"; exit }
    printf "%d", n * f[u] }')
[[ $maxmemory_bytes =~ ^[0-9]+$ ]] || { echo "bad --maxmemory $maxmemory" >&2; exit 2; }

# start WHICH [POLICY]: a fresh server (redis, latch, or ceiling: cache --respond) on core 0.
start() {
    local which=$1 policy=${2:-} dir=$work/$RANDOM$RANDOM
    mkdir -p "$dir"
    case $which in
        redis)
            taskset -c 0 redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" \
                --appendonly no --daemonize no --maxmemory "$maxmemory" \
                --maxmemory-policy "$policy" >"$dir/log" 2>&1 & ;;
        latch)
            taskset -c 0 "$latch_bin" --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" \
                --appendonly no --maxmemory "$maxmemory" \
                --maxmemory-policy "$policy" >"$dir/log" 2>&1 & ;;
        ceiling)
            taskset -c 0 "$cache_bin" --respond --port "$port" >"$dir/log" 2>&1 & ;;
    esac
    pid=$!
    wait_for_server
    [[ $which == ceiling ]] && return
    # The limits the run is about, as the server took them.
    local got
    got=$(redis-cli -p "$port" config get maxmemory | tail -1)/$(redis-cli -p "$port" config get maxmemory-policy | tail -1)
    [[ $got == "$maxmemory_bytes/$policy" ]] || {
        echo "$which took maxmemory/policy $got, not $maxmemory_bytes/$policy" >&2; exit 1; }
}

# load SEED [WARMUP]: runs bench/cache.c on core 1 against $port; prints its result line.
load() {
    taskset -c 1 "$cache_bin" --port "$port" --clients "$clients" --pipeline "$pipeline" \
        --keys "$keys" --value-size "$value_size" --zipf "$zipf" --seconds "$seconds" \
        --warmup "${2:-$warmup}" --seed "$1"
}

# field NAME FILE: NAME's value on each line of FILE (lines of name=value words).
field() { awk -v f="$1" '{ for (i = 1; i <= NF; i++) if (index($i, f "=") == 1) print substr($i, length(f) + 2) }' "$2"; }

# check WHICH POLICY LINE: warns on stderr of what a run should not show.
check() {
    local which=$1 policy=$2 line=$3
    awk -v w="$which" -v p="$policy" '{
        for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        if (v["closed"] > 0) printf "%s %s: %d connections closed by the server\n", w, p, v["closed"]
        if (v["get_errors"] > 0 || v["set_errors"] > 0)
            printf "%s %s: %d GET and %d SET error replies\n", w, p, v["get_errors"], v["set_errors"]
        if (v["oom"] > 0) printf "%s %s: %d OOM replies to SET\n", w, p, v["oom"]
        if (v["evicted"] == 0) printf "%s %s: nothing evicted in the measured window\n", w, p
    }' <<<"$line" >&2
}

for round in $(seq "$rounds"); do
    start ceiling
    load "$round" 1 >>"$work/res.ceiling"
    stop_server
    for policy in $policies; do
        for which in redis latch; do
            start "$which" "$policy"
            line=$(load "$round")
            stop_server
            check "$which" "$policy" "$line"
            echo "$line" >>"$work/res.$policy.$which"
        done
    done
done

# Medians (and for "worst", the largest) of the rounds, formatted.
med() { field "$1" "$2" | median; }
fmt() { # fmt KIND VALUE
    awk -v k="$1" -v v="$2" -v m="$maxmemory_bytes" 'BEGIN {
        if (k == "pct") printf "%.2f", v * 100
        else if (k == "mb") printf "%.2f", v / 1048576
        else if (k == "over") printf "%.1f", (v - m) / 1024
        else printf "%d", v }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }
diff_points() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.2f pts", (a - b) * 100 }'; }
diff_kb() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.1f KB", (a - b) / 1024 }'; }

printf '\nmaxmemory %s (%d bytes), %d keys x %d-byte values, zipf %s, %d clients, pipeline %d, %s s measured after %s s warm-up\n' \
    "$maxmemory" "$maxmemory_bytes" "$keys" "$value_size" "$zipf" "$clients" "$pipeline" "$seconds" "$warmup"
row() { printf '%-30s %14s %14s %14s\n' "$@"; }
declare -A redis_cmds=()
for policy in $policies; do
    r=$work/res.$policy.redis l=$work/res.$policy.latch
    echo
    row "$policy" redis-server latch-server latch-vs-redis
    a=$(med hit_rate "$r") b=$(med hit_rate "$l")
    row "hit rate (%)" "$(fmt pct "$a")" "$(fmt pct "$b")" "$(diff_points "$b" "$a")"
    for f in gets_per_s cmds_per_s; do
        a=$(med $f "$r") b=$(med $f "$l")
        label="GETs/s"; [[ $f == cmds_per_s ]] && label="commands/s" && redis_cmds[$policy]=$a
        row "$label" "$a" "$b" "$(ratio "$b" "$a")"
    done
    a=$(med max_used "$r") b=$(med max_used "$l")
    row "max used_memory (MB)" "$(fmt mb "$a")" "$(fmt mb "$b")" "$(ratio "$b" "$a")"
    row "  over maxmemory (KB)" "$(fmt over "$a")" "$(fmt over "$b")" "$(diff_kb "$b" "$a")"
    a=$(field max_used "$r" | sort -g | tail -1) b=$(field max_used "$l" | sort -g | tail -1)
    row "  over, worst round (KB)" "$(fmt over "$a")" "$(fmt over "$b")" "$(diff_kb "$b" "$a")"
    a=$(med max_used_measured "$r") b=$(med max_used_measured "$l")
    row "max used after warm-up (MB)" "$(fmt mb "$a")" "$(fmt mb "$b")" "$(ratio "$b" "$a")"
    a=$(med evicted "$r") b=$(med evicted "$l")
    row "evicted keys" "$a" "$b" "$(ratio "$b" "$a")"
    a=$(med oom "$r") b=$(med oom "$l")
    row "OOM errors" "$a" "$b" -
done
ceiling=$(med cmds_per_s "$work/res.ceiling")
echo
printf 'load generator ceiling (cache --respond, every GET a miss): %s commands/s, %s GETs/s;' \
    "$ceiling" "$(med gets_per_s "$work/res.ceiling")"
for policy in $policies; do printf ' ceiling/redis %s %s;' "$policy" "$(ratio "$ceiling" "${redis_cmds[$policy]}")"; done
echo
echo "($(date -u +%F), $(nproc) cores, median of $rounds rounds, redis then latch; redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'))"
