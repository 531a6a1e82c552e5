#!/usr/bin/env bash
# Active expiry, latch-server against redis-server, side by side in one run.
#
#   bench/expiry.sh [--keys N]
#
# Each server runs pinned to core 0 (the load on core 1) and is given about N keys (default
# 1M, `SET key:<random> value PX ttl`, so a few percent collide):
# - live: keys with a 10-minute TTL; the CPU the server uses in 5 idle seconds (ms per
#   second, from /proc/PID/stat): what its active expiry costs while nothing expires;
# - bulk: after FLUSHALL, keys with a 4-second TTL; the seconds from the end of loading
#   until DBSIZE is 0 with nobody reading them, and the slowest of the PINGs one client
#   sends meanwhile (ms): how long the sweep holds other clients up.
#
# Needs redis-server, redis-benchmark, redis-cli (Debian: redis-server, redis-tools) and
# taskset (util-linux); builds latch-server --release if missing.
set -euo pipefail

keys=1000000
while [[ $# -gt 0 ]]; do
    case $1 in
        --keys) keys=$2; shift 2 ;;
        *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
    esac
done

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tools redis-server redis-benchmark redis-cli taskset


# load TTL_MS: about $keys keys with that TTL.
load() {
    taskset -c 1 redis-benchmark -p "$port" -c 50 -P 32 -n $((keys * 3)) -r "$keys" \
        SET key:__rand_int__ value PX "$1" >/dev/null 2>&1
}

printf '%-6s %9s %12s %14s %12s\n' server keys idle_cpu_ms/s bulk_empty_s ping_max_ms
for which in redis latch; do
    bin=redis-server own=()
    [[ $which == latch ]] && bin=$latch_bin
    dir=$work/$which
    mkdir -p "$dir"
    taskset -c 0 "$bin" --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" \
        --appendonly no "${own[@]}" >"$dir/log" 2>&1 &
    pid=$!
    wait_for_server

    load 600000
    held=$(redis-cli -p "$port" DBSIZE)
    sleep 1
    before=$(cpu_ticks)
    sleep 5
    idle=$(awk -v t=$(($(cpu_ticks) - before)) -v hz="$ticks_per_second" 'BEGIN { printf "%.1f", t * 1000 / hz / 5 }')

    redis-cli -p "$port" FLUSHALL >/dev/null
    load 4000
    loaded=$(date +%s.%N)
    taskset -c 1 redis-benchmark -p "$port" -c 1 -n 200000 --csv -t ping_mbulk \
        >"$dir/ping.csv" 2>/dev/null &
    pinger=$!
    empty=-
    for _ in $(seq 300); do
        sleep 0.1
        if [[ $(redis-cli -p "$port" DBSIZE) == 0 ]]; then
            empty=$(awk -v a="$loaded" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
            break
        fi
    done
    wait "$pinger" || true
    # The CSV's last column is the slowest request.
    ping_max=$(tail -1 "$dir/ping.csv" | tr -d '"' | awk -F, '{ print $NF }')

    printf '%-6s %9s %12s %14s %12s\n' "$which" "$held" "$idle" "$empty" "$ping_max"
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=
done
echo "($(date +%F), $(nproc) cores; bulk keys expire 4 s after their SET)"
