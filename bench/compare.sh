#!/usr/bin/env bash
# latch-server against redis-server 7.0 on this machine, side by side in one run.
#
#   bench/compare.sh [--rounds N] [--quick] [--placements "pinned unpinned"]
#                    [--persistence "off everysec always"] [--no-memory]
#                    [--rows "SET GET SETNX INCR MSET LOCK RELEASE RELEASE_VM
#                            PUBLISH_1 PUBLISH_50 PFADD PFCOUNT PING_INLINE ... ZRANGE"]
#
# For each placement (pinned: both servers on core 0, redis-benchmark on core 1; unpinned:
# no taskset) and persistence mode (off, appendfsync everysec, appendfsync always), rounds
# alternate redis, latch, redis, latch... and the table shows the median of the rounds:
# requests/s, p50 and p99 latency (ms) from redis-benchmark, and the server's CPU time per
# request (µs, utime+stime from /proc/PID/stat before and after), each with latch/redis.
# The rows: SET, GET, SETNX (random keys), INCR, MSET (10 keys), SET k token NX PX 30000
# (the lock acquire), and the Lua compare-and-delete release through EVALSHA (RELEASE, which
# Latch runs without its VM, and RELEASE_VM, the same script with a comment, which it runs
# in the VM: see bench/lib.sh), PFADD (random elements into one HyperLogLog) and PFCOUNT
# of it; and pub/sub fan-out: PUBLISH_1 and PUBLISH_50 publish to a channel with 1 or 50
# subscribers (bench/subscribers.c, beside the load generator), and their requests/s
# column is the messages delivered per second, counted by the subscribers from their first
# byte to their last (the ceiling responder cannot subscribe: no ceiling there, nor for
# PING_INLINE, whose commands it cannot count); at 50 clients
# with pipeline 1 and 16, and 1 client with pipeline 1. With persistence on, only the write
# rows at 50 clients, pipeline 1. `--rows` keeps only the rows named (for a quick look at
# one row: `--rows RELEASE --placements unpinned --persistence off --no-memory`).
# Then the rest of redis-benchmark's default test list, by its names (PING_INLINE,
# PING_MBULK, LPUSH, RPUSH, LPOP, RPOP, SADD, HSET, SPOP, ZADD, ZPOPMIN, LRANGE_100/300/
# 500/600, XADD): before each run of a pop row its key is filled with as many elements as
# the run pops, unmeasured, and the LRANGE rows send fewer requests (their replies are
# 100-600 elements); and whole reads of 10-element collections, HGETALL, SMEMBERS and
# ZRANGE ... WITHSCORES, of 100,000 keys filled when the server starts.
# A GET row without the SET row first sends the SET row's requests, unmeasured, so that
# GET finds keys. With persistence off, each round also drives bench/ceiling.c, a
# responder that answers +OK and does nothing else: its requests/s (ceil_rps) is the most
# redis-benchmark on this machine produces for that row, and ceil/redis the highest
# latch/redis ratio the row can show, whatever the server.
# Then memory: RSS growth after loading 1M keys (16-byte keys, 32-byte values), per key.
#
# Needs redis-server, redis-benchmark, redis-cli (Debian: redis-server, redis-tools),
# taskset (util-linux) and gcc; builds latch-server --release if missing.
set -euo pipefail

rounds=3 quick=0 memory=1
all_rows="SET GET SETNX INCR MSET LOCK RELEASE RELEASE_VM PFADD PFCOUNT PUBLISH_1 PUBLISH_50
          PING_INLINE PING_MBULK LPUSH RPUSH LPOP RPOP SADD HSET SPOP ZADD ZPOPMIN
          LRANGE_100 LRANGE_300 LRANGE_500 LRANGE_600 XADD HGETALL SMEMBERS ZRANGE"
all_rows=$(echo $all_rows)
placements="pinned unpinned"
persistence="off everysec always"
only_rows=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --quick) quick=1; shift ;;
        --placements) placements=$2; shift 2 ;;
        --persistence) persistence=$2; shift 2 ;;
        --no-memory) memory=0; shift ;;
        --rows)
            only_rows=$2; shift 2
            for row in $only_rows; do
                [[ " $all_rows " == *" $row "* ]] || {
                    echo "unknown row $row" >&2; exit 2; }
            done ;;
        *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
    esac
done

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tools redis-server redis-benchmark redis-cli taskset gcc
ceiling_bin=$work/ceiling
gcc -O2 -o "$ceiling_bin" "$repo/bench/ceiling.c"
subscribers_bin=$work/subscribers
gcc -O2 -o "$subscribers_bin" "$repo/bench/subscribers.c"
[[ $(nproc) -ge 2 ]] || { echo "needs 2 cores for the pinned placement" >&2; exit 1; }

# Requests per run, by clients/pipeline (and row: an LRANGE_N reply carries N elements):
# each run lasts about a second or two.
requests_for() {
    local scale=1
    [[ $quick -eq 1 ]] && scale=4
    case ${2:-} in
        LRANGE_100) scale=$((scale * 5)) ;;
        LRANGE_300) scale=$((scale * 10)) ;;
        LRANGE_500 | LRANGE_600) scale=$((scale * 20)) ;;
    esac
    case $1 in
        c50-P1) echo $((200000 / scale)) ;;
        c50-P16) echo $((1000000 / scale)) ;;
        c1-P1) echo $((40000 / scale)) ;;
    esac
}

# start WHICH PLACEMENT MODE: a fresh server (redis, latch or ceiling) in its own directory.
start() {
    local which=$1 placement=$2 mode=$3 dir=$work/$RANDOM$RANDOM bin=redis-server
    [[ $which == latch ]] && bin=$latch_bin
    mkdir -p "$dir"
    local aof=(--appendonly no)
    [[ $mode != off ]] && aof=(--appendonly yes --appendfsync "$mode")
    local pin=()
    [[ $placement == pinned ]] && pin=(taskset -c 0)
    if [[ $which == ceiling ]]; then
        "${pin[@]}" "$ceiling_bin" "$port" >/dev/null 2>&1 &
    else
        "${pin[@]}" "$bin" --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" "${aof[@]}" \
            >/dev/null 2>&1 &
    fi
    pid=$!
    wait_for_server
}

# The message every subscriber of a PUBLISH_N row receives, as its bytes arrive.
fanout_message='*3\r\n$7\r\nmessage\r\n$4\r\nfeed\r\n$3\r\nxxx\r\n'

# bench PLACEMENT ROW SHAPE: prints "rps p50 p99 cpu_us_per_request" (for a PUBLISH_N row,
# rps is messages delivered per second).
bench() {
    local placement=$1 row=$2 shape=$3 clients pipeline requests
    clients=${shape%%-*}; clients=${clients#c}
    pipeline=${shape##*-P}
    requests=$(requests_for "$shape" "$row")
    local pin=()
    [[ $placement == pinned ]] && pin=(taskset -c 1)
    local fanout=0 subscribers_pid=
    if [[ $row == PUBLISH_* ]]; then
        fanout=${row#PUBLISH_}
        [[ $fanout -gt 1 ]] && requests=$((requests / 10))
        local message_bytes
        message_bytes=$(printf "$fanout_message" | wc -c)
        "${pin[@]}" "$subscribers_bin" "$port" feed "$fanout" "$requests" "$message_bytes" \
            >"$work/subscribers.out" &
        subscribers_pid=$!
        # Every subscription confirmed before the first PUBLISH, or the run is void.
        local _
        for _ in $(seq 1200); do
            grep -q ready "$work/subscribers.out" 2>/dev/null && break
            kill -0 "$subscribers_pid" 2>/dev/null || break
            sleep 0.05
        done
        grep -q ready "$work/subscribers.out" || { echo "subscribers never got ready" >&2; exit 1; }
    fi
    # (The ceiling responder answers +OK to anything: no fill, and redis-cli --pipe would
    # wait forever for the echo it ends with.)
    [[ $which == ceiling ]] || fill_for_pops "$row" "$requests"
    local before after
    before=$(cpu_ticks)
    # Split into words without globbing (XADD's `*`).
    local args
    read -ra args <<<"$(row_args "$row")"
    "${pin[@]}" redis-benchmark -p "$port" -r 100000 -n "$requests" -c "$clients" \
        -P "$pipeline" --csv "${args[@]}" 2>/dev/null >"$work/out.csv"
    local delivered_rps=-
    if [[ -n $subscribers_pid ]]; then
        wait "$subscribers_pid"
        delivered_rps=$(awk 'NR == 2 && $2 > 0 { printf "%.0f", $1 / $2 }' "$work/subscribers.out")
    fi
    after=$(cpu_ticks)
    awk -F'","' -v ticks=$((after - before)) -v hz="$ticks_per_second" -v n="$requests" \
        -v delivered="$delivered_rps" '
        NR > 1 { gsub(/"/, "", $2); gsub(/"/, "", $5); gsub(/"/, "", $7);
                 rps = $2; p50 = $5; p99 = $7 }
        END { if (delivered != "-") rps = delivered
              printf "%s %s %s %.2f\n", rps, p50, p99, ticks / hz * 1e6 / n }' "$work/out.csv"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "-" && b > 0) printf "%.2f", a / b; else print "-" }'; }

write_rows="SET SETNX INCR MSET LOCK RELEASE"
shapes="c50-P1 c50-P16 c1-P1"

printf '%-9s %-8s %-10s %-7s | %10s %10s %6s | %10s %6s | %6s %6s | %6s %6s %6s | %7s %7s %6s\n' \
    placement aof row shape redis_rps latch_rps ratio ceil_rps ceil/r r_p50 l_p50 r_p99 l_p99 \
    ratio r_cpu_us l_cpu_us ratio
for placement in $placements; do
    for mode in $persistence; do
        rows=$all_rows cells=$shapes
        if [[ $mode != off ]]; then rows=$write_rows cells=c50-P1; fi
        if [[ -n $only_rows ]]; then
            rows=$(for row in $rows; do if [[ " $only_rows " == *" $row "* ]]; then printf '%s ' "$row"; fi; done)
            [[ -n $rows ]] || continue
        fi
        rm -f "$work"/res.*
        servers="redis latch"
        [[ $mode == off ]] && servers="redis latch ceiling"
        for _ in $(seq "$rounds"); do
            for which in $servers; do
                start "$which" "$placement" "$mode"
                load_release_script
                if [[ $which != ceiling && " $rows " =~ " "(HGETALL|SMEMBERS|ZRANGE)" " ]]; then
                    fill_collections
                fi
                # GET reads the keys the SET row wrote earlier in the round: without that
                # row, the same SETs are sent first, unmeasured.
                if [[ " $rows " == *" GET "* && " $rows " != *" SET "* ]]; then
                    bench "$placement" SET c50-P1 >/dev/null
                fi
                for row in $rows; do
                    for shape in $cells; do
                        # The ceiling cannot subscribe, and it counts commands by
                        # their '*': an inline PING would wait for its answer forever.
                        if [[ $which == ceiling && ($row == PUBLISH_* || $row == PING_INLINE) ]]; then
                            echo "- - - -" >>"$work/res.$which.$row.$shape"
                            continue
                        fi
                        bench "$placement" "$row" "$shape" >>"$work/res.$which.$row.$shape"
                    done
                done
                stop_server
            done
        done
        for row in $rows; do
            for shape in $cells; do
                declare -A m=([ceiling.rps]=-)
                for which in $servers; do
                    f=$work/res.$which.$row.$shape
                    m[$which.rps]=$(awk '{ print $1 }' "$f" | median)
                    m[$which.p50]=$(awk '{ print $2 }' "$f" | median)
                    m[$which.p99]=$(awk '{ print $3 }' "$f" | median)
                    m[$which.cpu]=$(awk '{ print $4 }' "$f" | median)
                done
                printf '%-9s %-8s %-10s %-7s | %10s %10s %6s | %10s %6s | %6s %6s | %6s %6s %6s | %7s %7s %6s\n' \
                    "$placement" "$mode" "$row" "$shape" \
                    "${m[redis.rps]}" "${m[latch.rps]}" "$(ratio "${m[latch.rps]}" "${m[redis.rps]}")" \
                    "${m[ceiling.rps]}" "$(ratio "${m[ceiling.rps]}" "${m[redis.rps]}")" \
                    "${m[redis.p50]}" "${m[latch.p50]}" \
                    "${m[redis.p99]}" "${m[latch.p99]}" "$(ratio "${m[latch.p99]}" "${m[redis.p99]}")" \
                    "${m[redis.cpu]}" "${m[latch.cpu]}" "$(ratio "${m[latch.cpu]}" "${m[redis.cpu]}")"
            done
        done
    done
done

if [[ $memory -eq 1 ]]; then
    # 1M SETs of 16-byte keys and 32-byte values, sent with redis-cli --pipe.
    awk 'BEGIN { v = "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv";
                 for (i = 0; i < 1000000; i++) {
                     k = sprintf("k%015d", i);
                     printf "*3\r\n$3\r\nSET\r\n$16\r\n%s\r\n$32\r\n%s\r\n", k, v } }' >"$work/load.resp"
    printf '\n%-8s %12s %12s %14s\n' server rss_before rss_after bytes_per_key
    declare -A per_key=()
    for which in redis latch; do
        start "$which" unpinned off
        before=$(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status")
        redis-cli -p "$port" --pipe <"$work/load.resp" >/dev/null
        keys=$(redis-cli -p "$port" DBSIZE)
        after=$(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status")
        per_key[$which]=$(awk -v a="$after" -v b="$before" -v k="$keys" 'BEGIN { printf "%.1f", (a - b) * 1024 / k }')
        printf '%-8s %9s KiB %9s KiB %14s\n' "$which" "$before" "$after" "${per_key[$which]}"
        stop_server
    done
    echo "memory latch/redis: $(ratio "${per_key[latch]}" "${per_key[redis]}")"
fi
echo "($(date -u +%F), $(nproc) cores, median of $rounds alternating rounds; redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'))"
