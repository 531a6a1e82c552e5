#!/usr/bin/env bash
# How long a BGREWRITEAOF stops clients: loads KEYS keys, then one client sends SETs
# (pipeline 1) for a few seconds while a rewrite runs, and the same again without one.
# Prints the max and p99 latency of each run, for latch-server and redis-server side by side.
#
#   bench/rewrite-pause.sh [--keys N]
set -euo pipefail

keys=1000000
[[ ${1:-} == --keys ]] && keys=$2

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tools redis-server redis-benchmark redis-cli

start() {
    local dir=$work/$RANDOM
    mkdir -p "$dir"
    "$1" --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly yes \
        --appendfsync everysec >/dev/null 2>&1 &
    pid=$!
    wait_for_server
}

# probe: "p99_ms max_ms" of 100k single SETs from one client.
probe() {
    redis-benchmark -p "$port" -t set -c 1 -n 100000 -r "$keys" --csv 2>/dev/null |
        awk -F'","' '/^"SET/ { gsub(/"/, "", $7); gsub(/"/, "", $8); print $7, $8 }'
}

wait_rewrite() {
    while redis-cli -p "$port" info persistence | grep -q 'aof_rewrite_in_progress:1'; do
        sleep 0.05
    done
}

printf '%-14s %-10s %10s %10s\n' server run p99_ms max_ms
for server in redis latch; do
    bin=redis-server
    [[ $server == latch ]] && bin=$latch_bin
    start "$bin"
    redis-benchmark -p "$port" -t set -P 64 -n "$keys" -r "$keys" -d 32 -q >/dev/null 2>&1
    sleep 1
    read -r p99 max < <(probe)
    printf '%-14s %-10s %10s %10s\n' "$server" quiet "$p99" "$max"
    ( sleep 0.3; redis-cli -p "$port" bgrewriteaof >/dev/null ) &
    started=$(date +%s.%N)
    read -r p99 max < <(probe)
    wait_rewrite
    printf '%-14s %-10s %10s %10s\n' "$server" rewrite "$p99" "$max"
    echo "  ($(redis-cli -p "$port" dbsize) keys; rewrite finished $(awk -v a="$(date +%s.%N)" -v b="$started" 'BEGIN { printf "%.1f", a - b }') s after the probe began)"
    kill -9 "$pid"; wait "$pid" 2>/dev/null || true; pid=
done
