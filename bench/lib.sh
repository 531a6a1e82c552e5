# Sourced by the bench scripts after they read their options: the latch-server binary
# (built --release if missing), the tools a script needs, a scratch directory and a port,
# and the rows that bench/compare.sh and bench/instructions.sh share.
#
# Sets: repo, latch_bin, work (removed on exit), pid (the server to kill on exit), port.

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# LATCH_BIN=path runs another build (one kept from before a change, say) instead.
latch_bin=${LATCH_BIN:-$repo/target/release/latch-server}
[[ -x $latch_bin ]] || (cd "$repo" && cargo build --release -p latch-server)

# need_tools TOOL...: stops the script when a tool is missing.
need_tools() {
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null || {
            echo "needs $tool (Debian: redis-server, redis-tools, util-linux, valgrind)" >&2
            exit 1
        }
    done
}

work=$(mktemp -d)
pid=
cleanup() { [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
# Below the kernel's range of ephemeral ports (32768 and up by default), which outgoing
# connections, the load generator's own included, take from: a port there may be busy.
port=$((20000 + RANDOM % 12000))

# stop_server: kills the server started as $pid and waits for it.
stop_server() { kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; pid=; }

# cpu_ticks: the CPU time (user + system) of the server $pid so far, in clock ticks of
# ticks_per_second each (/proc/PID/stat).
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
ticks_per_second=$(getconf CLK_TCK)

# median: the middle of the numbers on stdin, one a line (the lower of the two middle ones
# for an even count).
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# wait_for_server [TRIES]: waits (TRIES x 50 ms, default 100) until the server just started
# as $pid answers PING on $port. Stops the script when that server has exited (a port
# already taken, a bad option) or never answers: a benchmark must never run against
# whatever else holds the port, or against nothing.
wait_for_server() {
    local _
    for _ in $(seq "${1:-100}"); do
        kill -0 "$pid" 2>/dev/null || { echo "the server for port $port exited" >&2; exit 1; }
        if redis-cli -p "$port" ping >/dev/null 2>&1; then
            kill -0 "$pid" 2>/dev/null && return
        fi
        sleep 0.05
    done
    echo "the server for port $port did not answer" >&2
    # Killed here too: called in a subshell (`$(count ...)`), the script's EXIT trap does
    # not see this $pid.
    kill -9 "$pid" 2>/dev/null
    exit 1
}

# The lock release: Lua compare-and-delete, run through EVALSHA. Latch recognizes it and
# runs it without its Lua VM (crates/server/src/scripting/idiom.rs); the RELEASE_VM row
# sends the same script with a trailing comment, which Latch's VM runs, as it runs any
# script it does not recognize.
release_script="if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end"
release_vm_script="$release_script -- in the VM"
release_sha= release_vm_sha=
# load_release_script: SCRIPT LOAD of both releases into the server on $port; sets
# release_sha and release_vm_sha.
load_release_script() {
    release_sha=$(redis-cli -p "$port" SCRIPT LOAD "$release_script")
    release_vm_sha=$(redis-cli -p "$port" SCRIPT LOAD "$release_vm_script")
}

# row_args ROW: redis-benchmark's arguments for a row (-t NAME for a built-in test).
row_args() {
    case $1 in
        SET) echo "-t set" ;;
        GET) echo "-t get" ;;
        SETNX) echo "SETNX key:__rand_int__ value" ;;
        INCR) echo "-t incr" ;;
        MSET) echo "-t mset" ;;
        LOCK) echo "SET lock:__rand_int__ token NX PX 30000" ;;
        RELEASE) echo "EVALSHA $release_sha 1 lock:__rand_int__ token" ;;
        RELEASE_VM) echo "EVALSHA $release_vm_sha 1 lock:__rand_int__ token" ;;
        PFADD) echo "PFADD hll element:__rand_int__" ;;
        PFCOUNT) echo "PFCOUNT hll" ;;
        PUBLISH_*) echo "PUBLISH feed xxx" ;;
        # The rest of redis-benchmark's default list, by its own test names. LRANGE_N runs
        # redis-benchmark's own LPUSH fill first (its last CSV line is the LRANGE).
        PING_INLINE | PING_MBULK | LPUSH | RPUSH | LPOP | RPOP | SADD | HSET | SPOP | ZADD | \
            ZPOPMIN | LRANGE_100 | LRANGE_300 | LRANGE_500 | LRANGE_600)
            echo "-t ${1,,}" ;;
        # Debian's redis-benchmark 7.0 has no XADD test (7.2 added it): its command, as
        # 7.2 sends it with the default 3-byte payload.
        XADD) echo "XADD mystream * myfield xxx" ;;
        # Whole reads of 10-element collections (see fill_collections).
        HGETALL) echo "HGETALL hash:__rand_int__" ;;
        SMEMBERS) echo "SMEMBERS set:__rand_int__" ;;
        ZRANGE) echo "ZRANGE zset:__rand_int__ 0 -1 WITHSCORES" ;;
        *) echo "unknown row $1" >&2; exit 2 ;;
    esac
}

# fill_collections: 100,000 hashes, sets and sorted sets of 10 elements each under the
# keys redis-benchmark's -r 100000 names (hash:000000000042...), for the HGETALL, SMEMBERS
# and ZRANGE rows, into the server on $port.
fill_collections() {
    awk 'BEGIN {
        for (i = 0; i < 100000; i++) {
            k = sprintf("%012d", i)
            printf "*22\r\n$4\r\nHSET\r\n$17\r\nhash:%s\r\n", k
            for (f = 0; f < 10; f++) {
                v = sprintf("value-%d-%d", f, i)
                printf "$6\r\nfield%d\r\n$%d\r\n%s\r\n", f, length(v), v
            }
            printf "*12\r\n$4\r\nSADD\r\n$16\r\nset:%s\r\n", k
            for (f = 0; f < 10; f++) {
                m = sprintf("member:%d", f * 1000 + i % 1000)
                printf "$%d\r\n%s\r\n", length(m), m
            }
            printf "*22\r\n$4\r\nZADD\r\n$17\r\nzset:%s\r\n", k
            for (f = 0; f < 10; f++) {
                m = sprintf("member-%d", f)
                printf "$%d\r\n%d\r\n$8\r\n%s\r\n", length(f * 3 + i % 7 ""), f * 3 + i % 7, m
            }
        } }' | redis-cli -p "$port" --pipe >/dev/null
}

# fill_for_pops ROW N: N distinct elements in the key redis-benchmark's pop test of ROW
# (LPOP, RPOP, SPOP, ZPOPMIN) pops from, so that every request of the run pops one
# (redis-benchmark's own order fills them with as many pushes as pops, and a run that
# empties the key measures pops of nothing).
fill_for_pops() {
    local row=$1 n=$2 command key
    case $row in
        LPOP | RPOP) command=RPUSH key=mylist ;;
        SPOP) command=SADD key=myset ;;
        ZPOPMIN) command=ZADD key=myzset ;;
        *) return ;;
    esac
    awk -v n="$n" -v cmd="$command" -v key="$key" 'BEGIN {
        per = 100
        for (i = 0; i < n; i += per) {
            count = (n - i < per) ? n - i : per
            printf "*%d\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", 2 + count * (cmd == "ZADD" ? 2 : 1), length(cmd), cmd, length(key), key
            for (j = i; j < i + count; j++) {
                m = "element:" j
                if (cmd == "ZADD") printf "$%d\r\n%d\r\n", length(j ""), j
                printf "$%d\r\n%s\r\n", length(m), m
            }
        } }' | redis-cli -p "$port" --pipe >/dev/null
}
