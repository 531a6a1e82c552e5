#!/usr/bin/env bash
# Two latch-server builds against each other: is a change faster, on this noisy machine?
#
#   bench/ab.sh [--rounds N] [--pipeline P] [--requests N] [--rows "GET INCR ..."] OLD NEW
#
# OLD and NEW are latch-server binaries (keep a copy of the one before your change:
# `cp target/release/latch-server /tmp/latch-before`). Each round starts OLD, then NEW,
# pinned to core 0 with redis-benchmark on core 1 (50 clients, pipeline 16 by default,
# 3M requests after a warm-up of SETs), and the table shows each build's median requests/s
# over the rounds (default 6), its lowest and highest, and NEW/OLD. Rounds alternate so
# that a quiet or busy moment of the machine falls on both builds; a difference smaller
# than the spread of one build's runs is noise. The rows are those of bench/compare.sh.
#
# Needs redis-benchmark, redis-cli (Debian: redis-tools) and taskset (util-linux).
set -euo pipefail

rounds=6 pipeline=16 requests=3000000
rows="GET INCR"
while [[ $# -gt 2 ]]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --pipeline) pipeline=$2; shift 2 ;;
        --requests) requests=$2; shift 2 ;;
        --rows) rows=$2; shift 2 ;;
        *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
    esac
done
[[ $# -eq 2 && -x $1 && -x $2 ]] || { echo "usage: $0 [options] OLD_BINARY NEW_BINARY" >&2; exit 2; }
old=$1 new=$2

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tools redis-benchmark redis-cli taskset

# requests_per_second BINARY ROW: one run of a fresh server.
requests_per_second() {
    local bin=$1 row=$2 dir=$work/$RANDOM$RANDOM
    mkdir -p "$dir"
    taskset -c 0 "$bin" --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" \
        --appendonly no >/dev/null 2>&1 &
    pid=$!
    wait_for_server
    load_release_script
    taskset -c 1 redis-benchmark -p "$port" -r 100000 -n 300000 -c 50 -P "$pipeline" \
        -t set >/dev/null 2>&1
    local args
    read -ra args <<<"$(row_args "$row")" # no globbing of XADD's `*`
    taskset -c 1 redis-benchmark -p "$port" -r 100000 -n "$requests" -c 50 -P "$pipeline" \
        --csv "${args[@]}" 2>/dev/null | awk -F'","' 'NR == 2 { gsub(/"/, "", $2); print $2 }'
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
    pid=
    rm -rf "$dir"
}

# summary FILE: "median lowest highest" of the numbers in FILE.
summary() { sort -g "$1" | awk '{ v[NR] = $1 } END { printf "%.0f %.0f %.0f\n", v[int((NR + 1) / 2)], v[1], v[NR] }'; }

printf '%-10s %10s %10s %10s | %10s %10s %10s | %7s\n' \
    row old_median old_low old_high new_median new_low new_high new/old
for row in $rows; do
    : >"$work/old" && : >"$work/new"
    for _ in $(seq "$rounds"); do
        requests_per_second "$old" "$row" >>"$work/old"
        requests_per_second "$new" "$row" >>"$work/new"
    done
    read -r old_median old_low old_high < <(summary "$work/old")
    read -r new_median new_low new_high < <(summary "$work/new")
    printf '%-10s %10s %10s %10s | %10s %10s %10s | %7s\n' "$row" \
        "$old_median" "$old_low" "$old_high" "$new_median" "$new_low" "$new_high" \
        "$(awk -v a="$new_median" -v b="$old_median" 'BEGIN { printf "%.3f", a / b }')"
done
echo "($(date -u +%F), $(nproc) cores, $rounds alternating rounds, pinned, 50 clients, pipeline $pipeline)"
