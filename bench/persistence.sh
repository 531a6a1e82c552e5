#!/usr/bin/env bash
# SET throughput with the AOF off, `appendfsync everysec` and `appendfsync always`:
# latch-server and redis-server 7.0 side by side in one run, rounds alternating
# (redis, latch, redis, latch...), median of the rounds. Prints a table.
#
#   bench/persistence.sh [--rounds N] [--requests N] [--clients N]
#
# Needs redis-server and redis-benchmark (Debian: redis-server, redis-tools) and a
# release build (built here if missing).
set -euo pipefail

rounds=3 requests=100000 clients=50
while [[ $# -gt 0 ]]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --requests) requests=$2; shift 2 ;;
        --clients) clients=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tools redis-server redis-benchmark redis-cli

# start BIN MODE: starts a server with persistence MODE (off|everysec|always) in a fresh dir.
start() {
    local bin=$1 mode=$2 dir=$work/$RANDOM
    mkdir -p "$dir"
    local aof=(--appendonly no)
    [[ $mode != off ]] && aof=(--appendonly yes --appendfsync "$mode")
    "$bin" --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" "${aof[@]}" >/dev/null 2>&1 &
    pid=$!
    wait_for_server
}

# run: prints "rps p99_ms" for SET with random keys.
run() {
    redis-benchmark -p "$port" -t set -r 100000 -n "$requests" -c "$clients" -P 1 --csv 2>/dev/null |
        awk -F'","' '/^"SET/ { gsub(/"/, "", $2); gsub(/"/, "", $7); print $2, $7 }'
}

printf '%-10s %14s %14s %8s %12s %12s\n' mode redis_rps latch_rps ratio redis_p99ms latch_p99ms
for mode in off everysec always; do
    : >"$work/redis.rps" >"$work/latch.rps" >"$work/redis.p99" >"$work/latch.p99"
    for _ in $(seq "$rounds"); do
        for server in redis latch; do
            bin=redis-server
            [[ $server == latch ]] && bin=$latch_bin
            start "$bin" "$mode"
            read -r rps p99 < <(run)
            stop_server
            echo "$rps" >>"$work/$server.rps"
            echo "$p99" >>"$work/$server.p99"
        done
    done
    r=$(median <"$work/redis.rps") l=$(median <"$work/latch.rps")
    rp=$(median <"$work/redis.p99") lp=$(median <"$work/latch.p99")
    printf '%-10s %14s %14s %8s %12s %12s\n' "$mode" "$r" "$l" \
        "$(awk -v a="$l" -v b="$r" 'BEGIN { printf "%.2f", a / b }')" "$rp" "$lp"
done
echo "(SET, random keys, $clients clients, pipeline 1, $requests requests, median of $rounds alternating rounds; $(nproc) cores)"
