#!/usr/bin/env bash
# Run units of Redis 7.0.15's own Tcl test suite against a server binary.
#
# usage: scripts/redis-suite.sh [options] [unit ...]
#
#   --server-bin PATH     server to test (default: target/release/latch-server)
#   --server-args STR     extra server arguments, shell-quoted, e.g.
#                         --server-args "--save '' --appendonly no"
#   --tests-dir DIR       extracted Redis source tree holding runtest and tests/
#                         (default: $REDIS_TESTS_DIR, else fetched from Debian's
#                         source archive into $REDIS_SUITE_CACHE, default
#                         ${XDG_CACHE_HOME:-$HOME/.cache}/latch/redis-7.0.15)
#   --timeout SECS        per-unit timeout (default: 600, or $REDIS_SUITE_TIMEOUT)
#   --runtest-arg ARG     extra argument for runtest (repeatable)
#   --own                 the suite's own mode: runtest starts and stops the servers
#                         itself (see below), instead of testing one running server
#   --baseline FILE       accept the failures listed in FILE (see below);
#                         default: scripts/redis-suite-baseline.txt when the
#                         default units run (redis-suite-own-baseline.txt with
#                         --own); --no-baseline: accept none
#   -h, --help            this text
#
# Units default to the list in DEFAULT_UNITS below.  Each unit runs against a
# freshly started server (free port, temporary working directory) in the
# suite's external-server mode.  With --own, units default to OWN_UNITS and run
# in the suite's own mode, the way Redis' developers run it: a copy of the suite
# whose src/redis-server is the server under test (src/redis-cli,
# redis-benchmark, redis-check-aof and redis-check-rdb are the stock ones from
# PATH), so every test starts the servers it needs, with its own options, and
# reads their logs.  Each unit's runtest runs in a process group of its own,
# which is stopped when the unit ends, servers it left behind included.  Exit status is non-zero if any unit has an
# [err] or [exception], fails to finish, or has fewer [ok] results than
# recorded in EXPECTED_OK (counts measured against redis-server 7.0.15).
#
# The baseline records where Latch stands today, so CI can hold that line while
# commands other issues own are missing: `min-ok UNIT N` (at least N [ok]) and
# `known UNIT err|exception TEXT` (an [err] test name, or the start of an
# [exception] message, that is accepted).  A unit passes when it has at least its min-ok,
# and every [err]/[exception] is known.  Without a baseline a unit must match
# redis-server's count with no failure at all.
#
# `skip UNIT TEXT` names a test (exactly) that is not run at all (runtest --skiptest): one
# whose body, outside any assertion, sends a command Latch lacks, which raises an
# [exception] that would end the unit before its later tests.
#
# `racy UNIT err TEXT` names a test that races two connections with no reply in between
# (it sends a command on one client and, without reading, another on a second client, and
# expects them to run in that order).  A multi-threaded server may run them either way.
# When such a test fails, and every other failure is known, the unit runs once more on a
# fresh server and the second run is the result; the report says so.  A racy test that
# fails twice in a row fails the unit.
#
# The suite itself is never stored in this repository: it is read from
# --tests-dir / $REDIS_TESTS_DIR or downloaded as the upstream .orig tarball of
# Debian's "redis" source package (apt-get source --download-only, using a
# private apt state directory; no changes to /etc/apt, no root needed).
set -euo pipefail

REDIS_VERSION=7.0.15
# sha256 of Debian's redis_7.0.15.orig.tar.gz (apt also verifies it against the
# signed Sources index; this pins the upstream version).
REDIS_ORIG_SHA256=4b1dc4ee6d622a09fff9c6777191209750fb5e5a725ef78ea012d6eef4c22982

DEFAULT_UNITS=(
    unit/type/string
    unit/type/incr
    unit/expire
    unit/keyspace
    unit/protocol
    unit/info-command
    unit/quit
    unit/introspection
    unit/introspection-2
    unit/scan
    unit/type/list
    unit/type/list-2
    unit/type/list-3
    unit/type/set
    unit/type/hash
    unit/type/zset
    unit/type/stream
    unit/type/stream-cgroups
    unit/geo
    unit/sort
    unit/bitops
    unit/bitfield
    unit/hyperloglog
    unit/multi
    unit/functions
    unit/scripting
    unit/dump
    unit/querybuf
    unit/pause
    unit/tracking
    unit/pubsub
)

# [ok] counts with: runtest --host .. --port .. --ignore-digest
# --tags "-needs:debug -needs:repl" against redis-server 7.0.15. The tests' encoding
# checks (assert_encoding) run: OBJECT ENCODING reports the real representation.
declare -A EXPECTED_OK=(
    [unit/type/string]=75
    [unit/type/incr]=23
    [unit/expire]=58
    [unit/keyspace]=52
    [unit/protocol]=19
    [unit/info-command]=3
    [unit/quit]=3
    [unit/introspection]=27
    [unit/introspection-2]=43
    [unit/scan]=17
    [unit/type/list]=220
    [unit/type/list-2]=2
    [unit/type/list-3]=11
    [unit/type/set]=95
    [unit/type/hash]=72
    [unit/type/zset]=308
    [unit/type/stream]=63
    [unit/type/stream-cgroups]=48
    [unit/geo]=59
    [unit/sort]=52
    [unit/bitops]=45
    [unit/bitfield]=16
    [unit/hyperloglog]=20
    [unit/multi]=39
    [unit/functions]=90
    [unit/scripting]=188
    [unit/dump]=11
    [unit/querybuf]=2
    [unit/pause]=14
    [unit/tracking]=51
    [unit/pubsub]=30
)

# The suite's own mode: every unit redis-server 7.0.15 passes in that mode on this
# machine, except the replication ones (issue 24's: integration/replication*, psync2*,
# block-repl, failover, shutdown, unit/wait), cluster, module and TLS units, and
# unit/printver (it only prints the version).
OWN_UNITS=(
    unit/dump
    unit/auth
    unit/protocol
    unit/keyspace
    unit/scan
    unit/info
    unit/info-command
    unit/type/string
    unit/type/incr
    unit/type/list
    unit/type/list-2
    unit/type/list-3
    unit/type/set
    unit/type/zset
    unit/type/hash
    unit/type/stream
    unit/type/stream-cgroups
    unit/sort
    unit/expire
    unit/other
    unit/multi
    unit/quit
    unit/aofrw
    unit/acl
    unit/acl-v2
    unit/latency-monitor
    integration/aof
    integration/aof-multi-part
    integration/rdb
    integration/corrupt-dump
    integration/corrupt-dump-fuzzer
    integration/convert-zipmap-hash-on-load
    integration/convert-ziplist-hash-on-load
    integration/convert-ziplist-zset-on-load
    integration/logging
    integration/redis-cli
    integration/redis-benchmark
    integration/dismiss-mem
    unit/pubsub
    unit/pubsubshard
    unit/slowlog
    unit/scripting
    unit/functions
    unit/maxmemory
    unit/introspection
    unit/introspection-2
    unit/limits
    unit/obuf-limits
    unit/bitops
    unit/bitfield
    unit/geo
    unit/memefficiency
    unit/hyperloglog
    unit/lazyfree
    unit/pause
    unit/querybuf
    unit/pendingquerybuf
    unit/tracking
    unit/oom-score-adj
    unit/shutdown
    unit/networking
    unit/client-eviction
    unit/violations
    unit/replybufsize
)

# [ok] counts with: runtest --single UNIT --clients 1 against redis-server 7.0.15 (as
# src/redis-server in a copy of the suite), 2026-11-27.
declare -A EXPECTED_OK_OWN=(
    [unit/dump]=26
    [unit/auth]=10
    [unit/protocol]=25
    [unit/keyspace]=53
    [unit/scan]=17
    [unit/info]=17
    [unit/info-command]=3
    [unit/type/string]=77
    [unit/type/incr]=25
    [unit/type/list]=240
    [unit/type/list-2]=2
    [unit/type/list-3]=11
    [unit/type/set]=99
    [unit/type/zset]=312
    [unit/type/hash]=73
    [unit/type/stream]=72
    [unit/type/stream-cgroups]=57
    [unit/sort]=52
    [unit/expire]=70
    [unit/other]=26
    [unit/multi]=63
    [unit/quit]=3
    [unit/aofrw]=20
    [unit/acl]=90
    [unit/acl-v2]=30
    [unit/latency-monitor]=14
    [integration/aof]=40
    [integration/aof-multi-part]=35
    [integration/rdb]=14
    [integration/corrupt-dump]=74
    [integration/corrupt-dump-fuzzer]=2
    [integration/convert-zipmap-hash-on-load]=3
    [integration/convert-ziplist-hash-on-load]=2
    [integration/convert-ziplist-zset-on-load]=2
    [integration/logging]=3
    [integration/redis-cli]=31
    [integration/redis-benchmark]=9
    [integration/dismiss-mem]=4
    [unit/pubsub]=30
    [unit/pubsubshard]=11
    [unit/slowlog]=16
    [unit/scripting]=306
    [unit/functions]=109
    [unit/maxmemory]=31
    [unit/introspection]=43
    [unit/introspection-2]=43
    [unit/limits]=1
    [unit/obuf-limits]=9
    [unit/bitops]=45
    [unit/bitfield]=20
    [unit/geo]=59
    [unit/memefficiency]=10
    [unit/hyperloglog]=20
    [unit/lazyfree]=4
    [unit/pause]=16
    [unit/querybuf]=2
    [unit/pendingquerybuf]=1
    [unit/tracking]=54
    [unit/oom-score-adj]=5
    [unit/shutdown]=8
    [unit/networking]=5
    [unit/client-eviction]=17
    [unit/violations]=1
    [unit/replybufsize]=1
)

RUNTEST_ARGS_OWN=(--clients 1)

RUNTEST_ARGS=(--ignore-digest --tags "-needs:debug -needs:repl")

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$script_dir/.." && pwd)

die() { echo "redis-suite: $*" >&2; exit 2; }
log() { echo "redis-suite: $*" >&2; }

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

server_bin="$repo_root/target/release/latch-server"
server_args=()
tests_dir="${REDIS_TESTS_DIR:-}"
unit_timeout="${REDIS_SUITE_TIMEOUT:-600}"
extra_runtest_args=()
units=()
baseline=""
use_baseline=1
own_mode=0

while [[ $# -gt 0 ]]; do
    case "$1" in
        --server-bin) [[ $# -ge 2 ]] || die "$1 needs a value"; server_bin=$2; shift 2 ;;
        --baseline) baseline=$2; shift 2 ;;
        --no-baseline) use_baseline=0; shift ;;
        --own) own_mode=1; shift ;;
        --server-args)
            [[ $# -ge 2 ]] || die "$1 needs a value"
            if [[ -n "${2//[[:space:]]/}" ]]; then
                # Split with shell-like quoting (no evaluation); '' gives an empty arg.
                mapfile -d '' -t parsed < <(printf '%s' "$2" | xargs printf '%s\0') \
                    || die "cannot parse --server-args: $2"
                server_args+=("${parsed[@]}")
            fi
            shift 2 ;;
        --tests-dir) [[ $# -ge 2 ]] || die "$1 needs a value"; tests_dir=$2; shift 2 ;;
        --timeout) [[ $# -ge 2 ]] || die "$1 needs a value"; unit_timeout=$2; shift 2 ;;
        --runtest-arg) [[ $# -ge 2 ]] || die "$1 needs a value"; extra_runtest_args+=("$2"); shift 2 ;;
        -h|--help) usage; exit 0 ;;
        --) shift; units+=("$@"); break ;;
        -*) die "unknown option: $1 (see --help)" ;;
        *) units+=("$1"); shift ;;
    esac
done
if [[ $own_mode -eq 1 ]]; then
    # The own mode's counts and arguments stand in for the external mode's.
    unset EXPECTED_OK
    declare -A EXPECTED_OK=()
    for unit in "${!EXPECTED_OK_OWN[@]}"; do EXPECTED_OK[$unit]=${EXPECTED_OK_OWN[$unit]}; done
    RUNTEST_ARGS=("${RUNTEST_ARGS_OWN[@]}")
fi
if [[ ${#units[@]} -eq 0 ]]; then
    if [[ $own_mode -eq 1 ]]; then
        units=("${OWN_UNITS[@]}")
        [[ -n "$baseline" ]] || baseline="$script_dir/redis-suite-own-baseline.txt"
    else
        units=("${DEFAULT_UNITS[@]}")
        [[ -n "$baseline" ]] || baseline="$script_dir/redis-suite-baseline.txt"
    fi
fi
[[ $use_baseline -eq 1 ]] || baseline=""

# Whether a failure is listed: an [err] by its exact test name, an [exception] by the start
# of its message (messages quote arguments, which may be long or binary).
is_known() {
    local unit=$1 kind=$2 text=$3 entry
    [[ -n "${KNOWN["$unit|$kind|$text"]:-}" ]] && return 0
    [[ "$kind" == exception ]] || return 1
    for entry in "${!KNOWN[@]}"; do
        [[ "$entry" == "$unit|exception|"* ]] || continue
        [[ "$text" == "${entry#"$unit|exception|"}"* ]] && return 0
    done
    return 1
}

# Baseline: min-ok per unit, and accepted failures per unit.
declare -A MIN_OK=()
declare -A KNOWN=()
declare -A RACY=()
declare -A SKIP=()
if [[ -n "$baseline" ]]; then
    [[ -f "$baseline" ]] || die "no baseline file $baseline"
    while IFS=$'\t' read -r kind unit a b; do
        case "$kind" in
            ''|'#'*) ;;
            min-ok) MIN_OK[$unit]=$a ;;
            known) KNOWN["$unit|$a|$b"]=1 ;;
            racy) RACY["$unit|$a|$b"]=1 ;;
            skip) SKIP[$unit]+="$a"$'\n' ;;
            *) die "bad baseline line: $kind $unit $a $b" ;;
        esac
    done <"$baseline"
fi
[[ "$unit_timeout" =~ ^[0-9]+$ ]] || die "--timeout must be a number of seconds"

for tool in tclsh timeout; do
    command -v "$tool" >/dev/null || die "'$tool' not found (Debian: apt-get install tcl coreutils)"
done

# ---------------------------------------------------------------------------
# Obtaining the suite
# ---------------------------------------------------------------------------

# Writes deb-src versions of the system's apt sources into $1.
write_deb_src_sources() {
    local out=$1 f
    : >"$out/deb-src.list"
    : >"$out/deb-src.sources"
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [[ -f "$f" ]] || continue
        sed -n 's/^[[:space:]]*deb[[:space:]]\+/deb-src /p' "$f" >>"$out/deb-src.list"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [[ -f "$f" ]] || continue
        # Rewrite every stanza's Types: line to deb-src (stanzas are kept whole).
        sed 's/^Types:.*/Types: deb-src/' "$f" >>"$out/deb-src.sources"
        printf '\n' >>"$out/deb-src.sources"
    done
    [[ -s "$out/deb-src.list" || -s "$out/deb-src.sources" ]] \
        || die "no apt sources found in /etc/apt to derive deb-src entries from"
}

fetch_suite_from_debian() {
    local dest=$1
    command -v apt-get >/dev/null || die "no --tests-dir/\$REDIS_TESTS_DIR given and apt-get is unavailable"
    local apt_dir="$dest.apt"
    rm -rf "$apt_dir"
    mkdir -p "$apt_dir/sources.list.d" "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/download"
    write_deb_src_sources "$apt_dir/sources.list.d"
    mv "$apt_dir/sources.list.d/deb-src.list" "$apt_dir/sources.list"
    local apt_opts=(
        -o "Dir::Etc::SourceList=$apt_dir/sources.list"
        -o "Dir::Etc::SourceParts=$apt_dir/sources.list.d"
        -o "Dir::State::Lists=$apt_dir/lists"
        -o "Dir::Cache=$apt_dir/cache"
    )
    log "fetching Debian source package 'redis' (deb-src, private apt state in $apt_dir)"
    apt-get "${apt_opts[@]}" -q update >&2 || die "apt-get update (deb-src) failed"
    (cd "$apt_dir/download" && apt-get "${apt_opts[@]}" -q source --download-only redis) >&2 \
        || die "apt-get source --download-only redis failed"
    local orig="$apt_dir/download/redis_${REDIS_VERSION}.orig.tar.gz"
    if [[ ! -f "$orig" ]]; then
        ls -l "$apt_dir/download" >&2 || true
        die "Debian's redis source is not upstream $REDIS_VERSION (no $(basename "$orig"))"
    fi
    echo "$REDIS_ORIG_SHA256  $orig" | sha256sum -c --quiet - >&2 \
        || die "checksum mismatch for $orig"
    local tmp="$dest.tmp"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    tar -xzf "$orig" -C "$tmp" --strip-components=1 \
        "redis-$REDIS_VERSION/runtest" "redis-$REDIS_VERSION/tests" "redis-$REDIS_VERSION/src/version.h" \
        || die "unpacking $orig failed"
    rm -rf "$dest"
    mv "$tmp" "$dest"
    rm -rf "$apt_dir"
}

if [[ -z "$tests_dir" ]]; then
    cache_base="${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}"
    tests_dir="${REDIS_SUITE_CACHE:-$cache_base/latch/redis-$REDIS_VERSION}"
    if [[ ! -x "$tests_dir/runtest" || ! -f "$tests_dir/tests/test_helper.tcl" ]]; then
        mkdir -p "$(dirname "$tests_dir")"
        fetch_suite_from_debian "$tests_dir"
    fi
fi
tests_dir=$(cd "$tests_dir" 2>/dev/null && pwd) || die "tests dir not found: $tests_dir"
[[ -f "$tests_dir/runtest" && -f "$tests_dir/tests/test_helper.tcl" ]] \
    || die "$tests_dir does not contain runtest and tests/test_helper.tcl"
if [[ -f "$tests_dir/src/version.h" ]] && ! grep -q "\"$REDIS_VERSION\"" "$tests_dir/src/version.h"; then
    log "warning: $tests_dir/src/version.h is not Redis $REDIS_VERSION; expected counts may not match"
fi

# Normalise unit names: accept unit/x, tests/unit/x.tcl, x.tcl.
for i in "${!units[@]}"; do
    u=${units[$i]}
    u=${u#tests/}
    u=${u%.tcl}
    [[ -f "$tests_dir/tests/$u.tcl" ]] || die "no such unit: $u (looked for $tests_dir/tests/$u.tcl)"
    units[$i]=$u
done

[[ "$server_bin" == */* ]] || server_bin=$(command -v "$server_bin") || die "server binary not found"
[[ -f "$server_bin" ]] && server_bin="$(cd "$(dirname "$server_bin")" && pwd)/$(basename "$server_bin")"
[[ -f "$server_bin" && -x "$server_bin" ]] || die "server binary not executable: $server_bin (build it: cargo build --release -p latch-server)"

# ---------------------------------------------------------------------------
# Server management
# ---------------------------------------------------------------------------

work_root=$(mktemp -d "${TMPDIR:-/tmp}/latch-redis-suite.XXXXXX")
log_dir="$work_root/logs"
mkdir -p "$log_dir"
server_pid=""
unit_group=""

# The own mode's copy of the suite: the tests are copied (runtest writes into tests/tmp),
# src/ holds links to the server under test and to the stock tools.
if [[ $own_mode -eq 1 ]]; then
    tree="$work_root/tree"
    mkdir -p "$tree/src"
    cp -r "$tests_dir/tests" "$tree/tests"
    cp "$tests_dir/runtest" "$tree/runtest"
    ln -s "$server_bin" "$tree/src/redis-server"
    for tool in redis-cli redis-benchmark redis-check-aof redis-check-rdb; do
        found=$(command -v "$tool") || die "'$tool' not found (Debian: apt-get install redis-tools)"
        ln -s "$found" "$tree/src/$tool"
    done
fi

stop_server() {
    [[ -n "$server_pid" ]] || return 0
    if kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        for _ in $(seq 50); do
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$server_pid" 2>/dev/null || true
    fi
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
}

# Stops what is left of a unit's process group (runtest, its test clients, the servers
# they started), by the group's id, which `timeout` created for it.
stop_unit_group() {
    [[ -n "$unit_group" ]] || return 0
    kill -TERM -- "-$unit_group" 2>/dev/null || true
    for _ in $(seq 50); do
        kill -0 -- "-$unit_group" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL -- "-$unit_group" 2>/dev/null || true
    unit_group=""
}

cleanup() {
    stop_unit_group
    stop_server
    rm -rf "$work_root"/srv-* 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# PING over bash's /dev/tcp; succeeds on a +PONG reply.
server_pongs() {
    local port=$1 reply=""
    exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
    printf 'PING\r\n' >&3
    IFS= read -r -t 2 reply <&3 || true
    exec 3<&- 3>&-
    [[ "$reply" == "+PONG"* ]]
}

# start_server NAME -> sets server_pid, server_port
start_server() {
    local name=$1 attempt port dir
    for attempt in 1 2 3; do
        port=$((30000 + RANDOM % 20000))
        port_in_use "$port" && continue
        dir="$work_root/srv-$name-$attempt"
        mkdir -p "$dir"
        (cd "$dir" && exec "$server_bin" --port "$port" --bind 127.0.0.1 "${server_args[@]}") \
            >>"$log_dir/$name.server.log" 2>&1 &
        server_pid=$!
        local exited=0
        for _ in $(seq 100); do
            if server_pongs "$port" 2>/dev/null; then
                server_port=$port
                return 0
            fi
            if ! kill -0 "$server_pid" 2>/dev/null; then exited=1; break; fi
            sleep 0.1
        done
        stop_server
        if [[ $exited -eq 0 ]]; then
            log "server is running but does not answer PING on 127.0.0.1:$port, see $log_dir/$name.server.log"
            return 1
        fi
        # It exited: maybe it lost a race for the port, so try another one.
        log "server exited at start on port $port (attempt $attempt), see $log_dir/$name.server.log"
    done
    return 1
}

# ---------------------------------------------------------------------------
# Run units
# ---------------------------------------------------------------------------

log "suite: $tests_dir"
if [[ ${#server_args[@]} -gt 0 ]]; then
    log "server: $server_bin$(printf ' %q' "${server_args[@]}")"
else
    log "server: $server_bin"
fi
log "logs: $log_dir"

declare -A R_OK R_ERR R_EXC R_STATUS
failed=0

declare -A R_RERUN=()
for unit in "${units[@]}"; do
  for attempt in 1 2; do
    name=${unit//\//_}
    out="$log_dir/$name.log"
    if [[ $attempt -eq 2 ]]; then
        mv "$out" "$log_dir/$name.first-run.log"
        log "$unit: only racy tests failed ($racy_failed), running it once more"
    fi
    if [[ $own_mode -eq 0 ]] && ! start_server "$name"; then
        R_OK[$unit]=0; R_ERR[$unit]=0; R_EXC[$unit]=0; R_STATUS[$unit]="NO-SERVER"
        failed=1
        continue
    fi
    if [[ $own_mode -eq 1 ]]; then
        log "running $unit (own servers, timeout ${unit_timeout}s)"
    else
        log "running $unit (port $server_port, timeout ${unit_timeout}s)"
    fi
    rc=0
    # runtest listens for its test clients just below --baseport (21111 by default): a
    # base of our own per unit lets two runs share a machine without a port clash.
    base_port=$((16000 + (RANDOM % 200) * 64))
    skip_args=()
    while IFS= read -r skipped; do
        [[ -n "$skipped" ]] && skip_args+=(--skiptest "$skipped")
    done <<<"${SKIP[$unit]:-}"
    if [[ $own_mode -eq 1 ]]; then
        # `timeout` puts itself and runtest in a new process group: its id is timeout's.
        (cd "$tree" && TERM=dumb exec timeout --kill-after=10 "$unit_timeout" \
            ./runtest --baseport "$base_port" "${RUNTEST_ARGS[@]}" \
            "${skip_args[@]}" "${extra_runtest_args[@]}" --single "$unit") </dev/null >"$out" 2>&1 &
        unit_group=$!
        wait "$unit_group" || rc=$?
        stop_unit_group
        server_alive=1
    else
        (cd "$tests_dir" && TERM=dumb exec timeout --kill-after=10 "$unit_timeout" \
            ./runtest --host 127.0.0.1 --port "$server_port" --baseport "$base_port" "${RUNTEST_ARGS[@]}" \
            "${skip_args[@]}" "${extra_runtest_args[@]}" --single "$unit") </dev/null >"$out" 2>&1 || rc=$?
        server_alive=1
        kill -0 "$server_pid" 2>/dev/null || server_alive=0
        stop_server
    fi

    # Strip any ANSI colour codes before counting.
    clean=$(sed 's/\x1b\[[0-9;]*m//g' "$out")
    ok=$(grep -c '^\[ok\]:' <<<"$clean" || true)
    err=$(grep -c '^\[err\]:' <<<"$clean" || true)
    exc=$(grep -c '^\[exception\]:' <<<"$clean" || true)
    R_OK[$unit]=$ok; R_ERR[$unit]=$err; R_EXC[$unit]=$exc

    # Failures the baseline does not list, and racy ones.
    unknown=0
    racy_failed=""
    while IFS= read -r line; do
        [[ -n "$line" ]] || continue
        if [[ "$line" == '[err]: '* ]]; then
            text=${line#'[err]: '}; text=${text% in tests/*}; kind=err
        else
            text=${line#'[exception]: '}; kind=exception
        fi
        if [[ $attempt -eq 1 && -n "${RACY["$unit|$kind|$text"]:-}" ]]; then
            racy_failed+="${racy_failed:+; }$text"
        elif ! is_known "$unit" "$kind" "$text"; then
            unknown=$((unknown + 1))
            echo "redis-suite: $unit: not in the baseline: $kind	$text" >&2
        fi
    done < <(grep -E '^\[(err|exception)\]: ' <<<"$clean" || true)

    status=PASS
    expected=${EXPECTED_OK[$unit]:-}
    floor=${MIN_OK[$unit]:-$expected}
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
        status=TIMEOUT
    elif [[ $unknown -gt 0 ]]; then
        status=FAIL
    elif [[ -n "$floor" && $ok -lt $floor ]]; then
        status=FEWER-OK
    elif [[ $err -gt 0 || $exc -gt 0 ]]; then
        status=KNOWN-GAPS
    elif [[ $rc -ne 0 ]]; then
        status="FAIL(rc=$rc)"
    fi
    [[ $server_alive -eq 1 ]] || status="$status,SERVER-DIED"
    if [[ -n "$racy_failed" && $unknown -eq 0 && $status != TIMEOUT && $server_alive -eq 1 ]]; then
        R_RERUN[$unit]=$racy_failed
        continue
    fi
    [[ $attempt -eq 2 ]] && status="$status,RERUN"
    R_STATUS[$unit]=$status
    [[ "$status" == PASS* || "$status" == KNOWN-GAPS* ]] || failed=1
    break
  done
done

# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------

printf '\n%-24s %6s %6s %10s %12s  %s\n' unit ok err exception expected-ok status
tot_ok=0 tot_err=0 tot_exc=0 tot_failed=0
for unit in "${units[@]}"; do
    printf '%-24s %6s %6s %10s %12s  %s\n' "$unit" "${R_OK[$unit]}" "${R_ERR[$unit]}" \
        "${R_EXC[$unit]}" "${EXPECTED_OK[$unit]:--}" "${R_STATUS[$unit]}"
    tot_ok=$((tot_ok + R_OK[$unit])); tot_err=$((tot_err + R_ERR[$unit])); tot_exc=$((tot_exc + R_EXC[$unit]))
    # A unit that failed without any [err]/[exception] (no server, timeout,
    # too few [ok]) counts as one failure.
    unit_failed=$((R_ERR[$unit] + R_EXC[$unit]))
    [[ "${R_STATUS[$unit]}" == PASS* || "${R_STATUS[$unit]}" == KNOWN-GAPS* || $unit_failed -gt 0 ]] || unit_failed=1
    tot_failed=$((tot_failed + unit_failed))
done
printf '%-24s %6s %6s %10s\n' total "$tot_ok" "$tot_err" "$tot_exc"
for unit in "${!R_RERUN[@]}"; do
    echo "redis-suite: $unit ran twice: its first run failed only racy tests (${R_RERUN[$unit]})"
done

if [[ $failed -ne 0 ]]; then
    for unit in "${units[@]}"; do
        [[ "${R_STATUS[$unit]}" == PASS* || "${R_STATUS[$unit]}" == KNOWN-GAPS* ]] && continue
        name=${unit//\//_}
        echo
        echo "=== $unit: ${R_STATUS[$unit]} (log: $log_dir/$name.log, server log: $log_dir/$name.server.log)"
        if [[ -f "$log_dir/$name.log" ]]; then
            sed 's/\x1b\[[0-9;]*m//g' "$log_dir/$name.log" \
                | awk '/^\[err\]:/ { n = 2 } /^\[exception\]:/ { n = 10 } n > 0 { print; n-- }' \
                | head -n 300 || true
            if [[ "${R_STATUS[$unit]}" != FAIL* || ( ${R_ERR[$unit]} -eq 0 && ${R_EXC[$unit]} -eq 0 ) ]]; then
                echo "--- last lines of log:"
                sed 's/\x1b\[[0-9;]*m//g' "$log_dir/$name.log" | tail -n 15
            fi
        fi
        if [[ "${R_STATUS[$unit]}" == *SERVER* && -f "$log_dir/$name.server.log" ]]; then
            echo "--- last lines of server log:"
            sed 's/\x1b\[[0-9;]*m//g' "$log_dir/$name.server.log" | tail -n 15
        fi
    done
fi

echo
echo "per-unit logs: $log_dir"
# Plain summary line: passed = [ok] results; failed = [err] + [exception]
# results, plus one for each unit that failed without any.
echo "redis-suite: $tot_ok passed, $tot_failed failed"
if [[ $failed -ne 0 ]]; then
    echo "redis-suite: FAILED"
    exit 1
fi
if [[ $tot_failed -gt 0 ]]; then
    echo "redis-suite: every failure is a known gap listed in $baseline"
else
    echo "redis-suite: all units passed"
fi
