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
        *) echo "unknown row $1" >&2; exit 2 ;;
    esac
}
