#!/usr/bin/env bash
# Memory per key of each data shape, latch-server against redis-server 7.0, side by side.
#
#   bench/memory.sh [--rounds N] [--quick] [--shapes "string hash_10 ..."]
#                   [--server-args "--list-compress-depth 1"]
#
# For each shape, rounds alternate redis, latch, redis, latch... (3 rounds by default): a
# fresh server in its own directory (`--save "" --appendonly no`, unpinned), INFO memory's
# used_memory and used_memory_rss read, the shape's keys loaded with `redis-cli --pipe` from
# a file of RESP made beforehand (the same file for both servers), DBSIZE and the element
# count of the first and last key checked, and used_memory and used_memory_rss read again
# (each read a second after what came before it: the servers refresh used_memory_rss on a
# timer).
# The table shows the medians of the rounds of (after - before) / keys: bytes per key from
# used_memory (what the allocator hands out) and from used_memory_rss (what the process
# holds, which is what an operator pays for), each with latch/redis; for shapes of 1,000
# elements a key and more, also used_memory bytes per element. A check that fails (a
# command error, a wrong DBSIZE or element count) is reported on stderr and its round is
# left out of the medians ("-" when no round is left).
#
# Every key is 16 bytes: a prefix and the key's number, zero-padded (k:00000000000042;
# user:00000000042 for hashes). The shapes, 100,000 keys each unless said:
#   string         SET k v, a 32-byte value
#   string_ttl     SET k v PX 600000
#   hash_10        HSET user:N field0 value-0-N ... field9 value-9-N
#   set_10_int     SADD k of the 10 integers (N*10+i) mod 10000, i = 0..9
#   set_10_str     SADD k member:0:N ... member:9:N
#   zset_10        ZADD k 0 member-0 ... 9 member-9
#   zset_10_float  ZADD k with scores 1.5*i + N/7 (sent as %.17g)
#   list_10        RPUSH k item-0-N ... item-9-N
#   hash_1k set_1k_int set_1k_str zset_1k list_1k: the same with 1,000 elements a key
#                  (integers N*1000+i, scores i), 100 keys
#   hash_100k set_100k_int set_100k_str zset_100k list_100k: 100,000 elements a key, 2 keys
#   set_100k_long  the same with 20-byte members (element:000000000042), past what a large
#                  set keeps inline
# Big keys are sent 100 elements a command. `--quick` loads a tenth of the keys (at least
# one); `--shapes` runs only the shapes named, in the table's order (each 1k shape followed
# by its 100k one); `--server-args` gives both servers the same extra options (split on
# spaces). A full run of 3 rounds takes about 5 minutes on 2 cores.
#
# Needs redis-server and redis-cli (Debian: redis-server, redis-tools); builds latch-server
# --release if missing.
set -euo pipefail

all_shapes="string string_ttl hash_10 set_10_int set_10_str zset_10 zset_10_float list_10"
all_shapes+=" hash_1k hash_100k set_1k_int set_100k_int set_1k_str set_100k_str zset_1k zset_100k"
all_shapes+=" set_100k_long list_1k list_100k"
rounds=3 quick=0 only_shapes="" server_args=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --quick) quick=1; shift ;;
        --server-args) server_args=$2; shift 2 ;;
        --shapes)
            only_shapes=$2; shift 2
            for shape in $only_shapes; do
                [[ " $all_shapes " == *" $shape "* ]] || {
                    echo "unknown shape $shape" >&2; exit 2; }
            done ;;
        *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
    esac
done

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tools redis-server redis-cli

shapes=$all_shapes
if [[ -n $only_shapes ]]; then
    shapes=$(for shape in $all_shapes; do
        if [[ " $only_shapes " == *" $shape "* ]]; then printf '%s ' "$shape"; fi; done)
fi

# ratio A B: A/B to two decimals, "-" when either is missing (as in bench/compare.sh).
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "-" && b > 0) printf "%.2f", a / b; else print "-" }'; }

# shape_params SHAPE: "TYPE KEYS ELEMENTS" (TYPE: string, string_ttl, hash, set_int,
# set_str, zset, zset_float, list), keys already divided for --quick.
shape_params() {
    local type keys elements
    case $1 in
        string|string_ttl) type=$1 elements=1 ;;
        zset_10_float) type=zset_float elements=10 ;;
        *_10|*_10_*) type=${1/_10/} elements=10 ;;
        *_1k|*_1k_*) type=${1/_1k/} elements=1000 ;;
        *_100k|*_100k_*) type=${1/_100k/} elements=100000 ;;
        *) echo "unknown shape $1" >&2; exit 2 ;;
    esac
    case $elements in
        1|10) keys=100000 ;;
        1000) keys=100 ;;
        100000) keys=2 ;;
    esac
    if [[ $quick -eq 1 ]]; then
        keys=$((keys / 10))
        [[ $keys -ge 1 ]] || keys=1
    fi
    echo "$type $keys $elements"
}

# generate TYPE KEYS ELEMENTS: the RESP that loads a shape, on stdout.
generate() {
    LC_ALL=C awk -v type="$1" -v keys="$2" -v elements="$3" '
        function arg(s) { buf = buf "$" length(s) "\r\n" s "\r\n"; n++ }
        function send() { if (n > 0) printf "*%d\r\n%s", n, buf; buf = ""; n = 0 }
        BEGIN {
            prefix = type == "hash" ? "user:" : "k:"
            keyfmt = "%s%0" (16 - length(prefix)) "d"
            command["hash"] = "HSET"; command["set_int"] = "SADD"; command["set_str"] = "SADD"
            command["set_long"] = "SADD"
            command["zset"] = "ZADD"; command["zset_float"] = "ZADD"; command["list"] = "RPUSH"
            for (k = 0; k < keys; k++) {
                key = sprintf(keyfmt, prefix, k)
                if (type == "string" || type == "string_ttl") {
                    arg("SET"); arg(key); arg(sprintf("v%031d", k))
                    if (type == "string_ttl") { arg("PX"); arg("600000") }
                    send()
                    continue
                }
                for (i = 0; i < elements; i++) {
                    if (i % 100 == 0) { send(); arg(command[type]); arg(key) }
                    if (type == "hash") { arg("field" i); arg("value-" i "-" k) }
                    else if (type == "set_int") {
                        arg(elements == 10 ? (k * 10 + i) % 10000 : k * elements + i) }
                    else if (type == "set_str") arg("member:" i ":" k)
                    else if (type == "set_long") arg(sprintf("element:%012d", k * elements + i))
                    else if (type == "zset") { arg(i); arg("member-" i) }
                    else if (type == "zset_float") {
                        arg(sprintf("%.17g", 1.5 * i + k / 7)); arg("member-" i) }
                    else if (type == "list") arg("item-" i "-" k)
                }
                send()
            }
        }'
}

# memory_now: "used_memory used_memory_rss" of the server on $port, a second after what
# came before: both servers refresh used_memory_rss on a timer (redis-server every 100 ms),
# and a client that has just gone away may not yet be freed.
memory_now() {
    sleep 1
    redis-cli -p "$port" INFO memory | tr -d '\r' |
        awk -F: '$1 == "used_memory" { u = $2 } $1 == "used_memory_rss" { r = $2 }
                 END { print u, r }'
}

# key_name TYPE N: the name of key N of a shape of that type.
key_name() {
    if [[ $1 == hash ]]; then printf 'user:%011d' "$2"; else printf 'k:%014d' "$2"; fi
}

# count_of TYPE KEY: the key's element count (HLEN, SCARD, ZCARD, LLEN).
count_of() {
    local cmd
    case $1 in
        hash) cmd=HLEN ;;
        set_*) cmd=SCARD ;;
        zset*) cmd=ZCARD ;;
        list) cmd=LLEN ;;
    esac
    redis-cli -p "$port" "$cmd" "$2"
}

# measure WHICH SHAPE TYPE KEYS ELEMENTS: loads $work/load.resp into a fresh server; prints
# "used_bytes_per_key rss_bytes_per_key", or "- -" after a failed check (told on stderr).
measure() {
    local which=$1 shape=$2 type=$3 keys=$4 elements=$5 dir=$work/$RANDOM$RANDOM bin=redis-server
    [[ $which == latch ]] && bin=$latch_bin
    mkdir -p "$dir"
    # shellcheck disable=SC2086 # the extra options are split on spaces, as documented
    "$bin" --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly no \
        $server_args >"$dir/server.log" 2>&1 &
    pid=$!
    wait_for_server 100
    local before after
    before=$(memory_now)
    local ok=1 problem=
    # redis-cli --pipe exits 1 when a reply is an error; it prints the error replies (on
    # stderr) and "errors: E, replies: R".
    if ! redis-cli -p "$port" --pipe <"$work/load.resp" >"$work/pipe.out" 2>&1 ||
        ! grep -q 'errors: 0,' "$work/pipe.out"; then
        ok=0 problem="redis-cli --pipe: $(grep -a 'errors:' "$work/pipe.out" | tail -n 1)"
        problem+=" (first: $(grep -av -m 1 -e '^All data' -e '^Last reply' -e '^errors:' \
            "$work/pipe.out"))"
    fi
    if [[ $ok -eq 1 ]]; then
        local dbsize
        dbsize=$(redis-cli -p "$port" DBSIZE || true)
        [[ $dbsize == "$keys" ]] || ok=0 problem="DBSIZE $dbsize, not $keys"
    fi
    if [[ $ok -eq 1 && $elements -gt 1 ]]; then
        local n count
        for n in 0 $((keys - 1)); do
            count=$(count_of "$type" "$(key_name "$type" "$n")" || true)
            [[ $count == "$elements" ]] ||
                { ok=0 problem="$(key_name "$type" "$n") holds $count elements, not $elements"; }
        done
    fi
    after=$(memory_now || true)
    kill -0 "$pid" 2>/dev/null || ok=0 problem="the server exited (log: $(tail -n 1 "$dir/server.log"))"
    stop_server
    rm -rf "$dir"
    if [[ $ok -eq 0 ]]; then
        echo "$which $shape: $problem" >&2
        echo "- -"
        return
    fi
    # shellcheck disable=SC2086
    set -- $before $after
    awk -v ub="$1" -v rb="$2" -v ua="$3" -v ra="$4" -v k="$keys" \
        'BEGIN { printf "%.1f %.1f\n", (ua - ub) / k, (ra - rb) / k }'
}

# median_of FILE COLUMN: the median of a column's numbers, "-" lines left out; "-" if none.
median_of() {
    local values
    values=$(awk -v c="$2" '$c != "-" { print $c }' "$1")
    if [[ -n $values ]]; then median <<<"$values"; else echo -; fi
}

format='%-13s %6s %8s | %10s %10s %6s | %10s %10s %6s | %9s %9s\n'
# shellcheck disable=SC2059
printf "$format" shape keys elem/key redis_B/key latch_B/key ratio redis_rss/k latch_rss/k \
    ratio r_B/elem l_B/elem
for shape in $shapes; do
    read -r type keys elements <<<"$(shape_params "$shape")"
    generate "$type" "$keys" "$elements" >"$work/load.resp"
    rm -f "$work"/res.*
    for _ in $(seq "$rounds"); do
        for which in redis latch; do
            measure "$which" "$shape" "$type" "$keys" "$elements" >>"$work/res.$which"
        done
    done
    declare -A m=()
    for which in redis latch; do
        m[$which.used]=$(median_of "$work/res.$which" 1)
        m[$which.rss]=$(median_of "$work/res.$which" 2)
        m[$which.elem]=-
        if [[ $elements -ge 1000 && ${m[$which.used]} != - ]]; then
            m[$which.elem]=$(awk -v b="${m[$which.used]}" -v e="$elements" \
                'BEGIN { printf "%.1f", b / e }')
        fi
    done
    # shellcheck disable=SC2059
    printf "$format" "$shape" "$keys" "$elements" \
        "${m[redis.used]}" "${m[latch.used]}" "$(ratio "${m[latch.used]}" "${m[redis.used]}")" \
        "${m[redis.rss]}" "${m[latch.rss]}" "$(ratio "${m[latch.rss]}" "${m[redis.rss]}")" \
        "${m[redis.elem]}" "${m[latch.elem]}"
    rm -f "$work/load.resp"
done
echo "($(date -u +%F), $(nproc) cores, median of $rounds alternating rounds; redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'))"
