#!/usr/bin/env bash
# Where a server's CPU time per request goes: its own code (user) or the kernel (system),
# redis-server and latch-server side by side, pinned to core 0 with redis-benchmark on core 1.
#
#   bench/cpu-split.sh [--rounds N] [--pipeline P] [--rows "SET GET SETNX ..."]
#
# Rounds alternate redis, latch (its defaults), latch with `--busy-poll-us 0` (it sleeps in
# epoll_wait like Redis instead of polling first); the table shows each one's median user
# and system µs per request (utime and stime from /proc/PID/stat before and after the run)
# and requests/s. `floor` is latch's system time without polling over redis-server's total:
# the CPU ratio Latch would show if its own code took no time at all. At pipeline 1 the
# kernel's share (a read, a write and an epoll round per request, and on loopback the
# delivery to the client, which the sender's write pays for) is the same for any server,
# so no server that answers each request with its own write goes below that ratio here.
#
# Needs redis-server, redis-benchmark, redis-cli (Debian: redis-server, redis-tools) and
# taskset (util-linux); builds latch-server --release if missing.
set -euo pipefail

rounds=3 pipeline=1
rows="SET GET SETNX"
while [[ $# -gt 0 ]]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --pipeline) pipeline=$2; shift 2 ;;
        --rows) rows=$2; shift 2 ;;
        *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
    esac
done

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tools redis-server redis-benchmark redis-cli taskset
for row in $rows; do row_args "$row" >/dev/null; done # an unknown row stops here
requests=$((pipeline == 1 ? 200000 : 1000000))

# start WHICH: a fresh server on core 0 (redis, latch, or latch-nopoll).
start() {
    local dir=$work/$RANDOM$RANDOM bin=redis-server own=()
    [[ $1 != redis ]] && bin=$latch_bin
    [[ $1 == latch-nopoll ]] && own=(--busy-poll-us 0)
    mkdir -p "$dir"
    taskset -c 0 "$bin" --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" \
        --appendonly no "${own[@]}" >/dev/null 2>&1 &
    pid=$!
    wait_for_server
}

# split ROW: prints "user_us system_us rps" for one run against the server $pid.
split() {
    local before after
    before=$(awk '{ print $14, $15 }' "/proc/$pid/stat")
    local args
    read -ra args <<<"$(row_args "$1")" # no globbing of XADD's `*`
    taskset -c 1 redis-benchmark -p "$port" -r 100000 -n "$requests" -c 50 -P "$pipeline" \
        --csv "${args[@]}" 2>/dev/null >"$work/out.csv"
    after=$(awk '{ print $14, $15 }' "/proc/$pid/stat")
    awk -F'","' -v before="$before" -v after="$after" -v hz="$ticks_per_second" -v n="$requests" '
        NR == 2 { split(before, b, " "); split(after, a, " "); gsub(/"/, "", $2);
                  printf "%.2f %.2f %s\n", (a[1] - b[1]) / hz * 1e6 / n,
                                           (a[2] - b[2]) / hz * 1e6 / n, $2 }' "$work/out.csv"
}

servers="redis latch latch-nopoll"
for _ in $(seq "$rounds"); do
    for which in $servers; do
        start "$which"
        load_release_script
        # GET and RELEASE find keys only after SETs: send them first, unmeasured.
        taskset -c 1 redis-benchmark -p "$port" -r 100000 -n 100000 -c 50 -t set >/dev/null 2>&1
        for row in $rows; do
            split "$row" >>"$work/res.$which.$row"
        done
        stop_server
    done
done

printf '%-10s | %7s %7s %9s | %7s %7s %9s | %7s %7s %9s | %6s %6s\n' row \
    r_user r_sys r_rps l_user l_sys l_rps n_user n_sys n_rps ratio floor
for row in $rows; do
    declare -A m=()
    for which in $servers; do
        for column in 1 2 3; do
            m[$which.$column]=$(awk -v c="$column" '{ print $c }' "$work/res.$which.$row" | median)
        done
    done
    printf '%-10s | %7s %7s %9s | %7s %7s %9s | %7s %7s %9s | %6s %6s\n' "$row" \
        "${m[redis.1]}" "${m[redis.2]}" "${m[redis.3]}" \
        "${m[latch.1]}" "${m[latch.2]}" "${m[latch.3]}" \
        "${m[latch-nopoll.1]}" "${m[latch-nopoll.2]}" "${m[latch-nopoll.3]}" \
        "$(awk -v lu="${m[latch.1]}" -v ls="${m[latch.2]}" -v ru="${m[redis.1]}" -v rs="${m[redis.2]}" \
            'BEGIN { printf "%.2f", (lu + ls) / (ru + rs) }')" \
        "$(awk -v ns="${m[latch-nopoll.2]}" -v ru="${m[redis.1]}" -v rs="${m[redis.2]}" \
            'BEGIN { printf "%.2f", ns / (ru + rs) }')"
done
echo "(µs per request; r_ redis-server, l_ latch-server, n_ latch-server --busy-poll-us 0;" \
    "ratio: latch's total over redis-server's; $(date -u +%F), pinned, 50 clients," \
    "pipeline $pipeline, median of $rounds alternating rounds)"
