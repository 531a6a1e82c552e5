#!/usr/bin/env bash
# A client that pauses between requests: latch-server against redis-server, side by side.
#
#   bench/paced.sh [--rounds N] [--requests N] [--pauses "0 10 20 30 50 100 200 1000"]
#
# redis-benchmark never pauses: its clients send the next request as soon as a reply comes.
# An application does its own work between requests. Here one client (Python, standard
# library only) sends GET, reads the reply, then spins for the pause (in µs) before the
# next; each server runs pinned to core 0, the client on core 1. For each pause the table
# shows, as the median of the rounds (alternating redis, latch), the client's cycle (µs per
# request: the round trip plus the pause) and the server's CPU time per request (µs,
# utime+stime from /proc/PID/stat before and after), each with latch/redis. This is what
# Latch's busy polling (busy-poll-us) costs and buys when requests come with gaps.
#
# Needs redis-server, redis-cli (Debian: redis-server, redis-tools), taskset (util-linux)
# and python3; builds latch-server --release if missing.
set -euo pipefail

rounds=3 requests=20000
pauses="0 10 20 30 50 100 200 1000"
while [[ $# -gt 0 ]]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --requests) requests=$2; shift 2 ;;
        --pauses) pauses=$2; shift 2 ;;
        *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
    esac
done

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tools redis-server redis-cli taskset python3

cat >"$work/client.py" <<'EOF'
import socket, sys, time
port, n, pause_us = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
request, reply = b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n", b"$5\r\nvalue\r\n"
s.sendall(b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n")
assert s.recv(64) == b"+OK\r\n"
start = time.perf_counter()
for _ in range(n):
    s.sendall(request)
    got = s.recv(64)
    while len(got) < len(reply):
        got += s.recv(64)
    assert got == reply, got
    if pause_us > 0:
        until = time.perf_counter() + pause_us / 1e6
        while time.perf_counter() < until:
            pass
print("%.2f" % ((time.perf_counter() - start) / n * 1e6))
EOF

# one_run SERVER PAUSE: "cycle_us cpu_us" for one client run against a fresh server.
one_run() {
    local dir=$work/$RANDOM$RANDOM before cycle after
    mkdir -p "$dir"
    if [[ $1 == latch ]]; then
        taskset -c 0 "$latch_bin" --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" \
            --appendonly no >/dev/null 2>&1 &
    else
        taskset -c 0 redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" \
            --appendonly no >/dev/null 2>&1 &
    fi
    pid=$!
    wait_for_server
    before=$(cpu_ticks)
    cycle=$(taskset -c 1 python3 "$work/client.py" "$port" "$requests" "$2")
    after=$(cpu_ticks)
    stop_server
    echo "$cycle $(awk -v t=$((after - before)) -v hz="$ticks_per_second" -v n="$requests" \
        'BEGIN { printf "%.2f", t / hz * 1e6 / n }')"
}

printf '%8s | %10s %10s %7s | %10s %10s %7s\n' pause_us redis_cyc latch_cyc l/r \
    redis_cpu latch_cpu l/r
for pause in $pauses; do
    : >"$work/redis" && : >"$work/latch"
    for _ in $(seq "$rounds"); do
        one_run redis "$pause" >>"$work/redis"
        one_run latch "$pause" >>"$work/latch"
    done
    rc=$(cut -d' ' -f1 "$work/redis" | median) lc=$(cut -d' ' -f1 "$work/latch" | median)
    ru=$(cut -d' ' -f2 "$work/redis" | median) lu=$(cut -d' ' -f2 "$work/latch" | median)
    printf '%8s | %10.1f %10.1f %7.2f | %10.2f %10.2f %7.2f\n' "$pause" "$rc" "$lc" \
        "$(awk -v a="$lc" -v b="$rc" 'BEGIN { print a / b }')" "$ru" "$lu" \
        "$(awk -v a="$lu" -v b="$ru" 'BEGIN { print a / b }')"
done
echo "(median of $rounds rounds, $requests requests each; cycle: µs per request at the client;"
echo " cpu: the server's CPU µs per request; $(nproc) cores; latch: $latch_bin)"
