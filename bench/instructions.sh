#!/usr/bin/env bash
# Instructions per request, latch-server against redis-server, counted by callgrind.
#
#   bench/instructions.sh [--requests N] [--pipeline P] [--rows "SET GET RELEASE ..."]
#
# Unlike requests/s, an instruction count is repeatable on a shared, noisy machine: the
# same binary and load give the same total whatever else runs. For each row, each server
# runs under `valgrind --tool=callgrind` on core 0 with counting off; redis-benchmark (on
# core 1, 50 clients) sends a 20k-request warm-up, then counting is switched on for N
# requests (default 100000, pipeline 16) and off again. The table shows the instructions
# per request of each server and latch/redis. The rows are those of bench/compare.sh:
# SET, GET, SETNX, INCR, MSET, LOCK (SET k token NX PX 30000) and RELEASE (EVALSHA of the
# compare-and-delete, which Latch runs without its VM) and RELEASE_VM (the same in the VM).
# PFADD/PFCOUNT and PUBLISH_1/PUBLISH_50 (to a channel with 1 or 50 subscribers, redis-cli
# processes that read and discard) work as in compare.sh.
# Counts include everything the server did meanwhile (parsing,
# replies, its cron), not the kernel. Latch runs with `busy-poll-us 0`: its polling
# between requests depends on timing, and would make the count as noisy as a clock.
#
# Needs valgrind, redis-server, redis-benchmark, redis-cli and taskset; builds
# latch-server --release if missing. A row takes about half a minute per server.
set -euo pipefail

requests=100000 pipeline=16
rows="SET GET SETNX INCR MSET LOCK RELEASE RELEASE_VM"
while [[ $# -gt 0 ]]; do
    case $1 in
        --requests) requests=$2; shift 2 ;;
        --pipeline) pipeline=$2; shift 2 ;;
        --rows) rows=$2; shift 2 ;;
        *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
    esac
done

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tools valgrind callgrind_control callgrind_annotate redis-server redis-benchmark \
    redis-cli taskset

# count WHICH ROW: prints the server's instructions per request for the row.
count() {
    local which=$1 row=$2 bin=redis-server dir=$work/$RANDOM$RANDOM own=()
    [[ $which == latch ]] && bin=$latch_bin own=(--busy-poll-us 0)
    mkdir -p "$dir"
    local out=$dir/callgrind.out
    taskset -c 0 valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" \
        "$bin" --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly no \
        "${own[@]}" >"$dir/log" 2>&1 &
    pid=$!
    wait_for_server 400
    load_release_script
    local subscriber_pids=() _
    if [[ $row == PUBLISH_* ]]; then
        for _ in $(seq "${row#PUBLISH_}"); do
            redis-cli -p "$port" SUBSCRIBE feed >/dev/null 2>&1 &
            subscriber_pids+=($!)
        done
        while [[ $(redis-cli -p "$port" PUBSUB NUMSUB feed | tail -1) != "${row#PUBLISH_}" ]]; do
            sleep 0.1
        done
    fi
    local args
    read -ra args <<<"$(row_args "$row")"
    # Options before the command: redis-benchmark takes what follows it as arguments.
    local load=(taskset -c 1 redis-benchmark -p "$port" -r 100000 -c 50 -P "$pipeline")
    "${load[@]}" -n 20000 "${args[@]}" >/dev/null 2>&1
    callgrind_control -i on "$pid" >/dev/null
    "${load[@]}" -n "$requests" "${args[@]}" >/dev/null 2>&1
    callgrind_control -i off "$pid" >/dev/null
    [[ ${#subscriber_pids[@]} -gt 0 ]] && kill "${subscriber_pids[@]}" 2>/dev/null
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=
    local total
    total=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }')
    awk -v t="$total" -v n="$requests" 'BEGIN { printf "%.0f", t / n }'
}

for row in $rows; do row_args "$row" >/dev/null; done # an unknown row stops here
printf '%-10s %14s %14s %7s\n' row redis_instr latch_instr ratio
for row in $rows; do
    redis=$(count redis "$row")
    latch=$(count latch "$row")
    printf '%-10s %14s %14s %7s\n' "$row" "$redis" "$latch" \
        "$(awk -v a="$latch" -v b="$redis" 'BEGIN { printf "%.2f", a / b }')"
done
echo "($(date -u +%F), instructions per request, 50 clients, pipeline $pipeline, $requests requests after a 20k warm-up; redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'))"
