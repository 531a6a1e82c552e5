#!/usr/bin/env bash
# Sorted-set memory per key: used_memory growth (INFO memory) while `redis-cli --pipe`
# loads each shape into a fresh server, for Latch and Debian's redis-server side by side.
#
# usage: bench/zset-memory.sh [NAME=SERVER_BINARY ...]
#   default: latch=target/release/latch-server redis=/usr/bin/redis-server
#
# Shapes (members member-i with score i unless said):
#   small-int   100,000 keys z:N of 10 members (a listpack)
#   small-frac  the same with scores i * 1.1 (doubles in the listpack)
#   large-1k    100 keys of 1,000 members (skiplist)
#   large-100k  3 keys of 100,000 members (skiplist)
# Servers run pinned to CPU 0 (taskset), one at a time; each is killed by its PID.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[[ $# -gt 0 ]] || set -- "latch=$repo/target/release/latch-server" "redis=/usr/bin/redis-server"
for tool in redis-cli python3 taskset; do
    command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 1; }
done
work=$(mktemp -d)
pid=
cleanup() { [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

python3 - "$work" <<'EOF'
import sys
work = sys.argv[1]
def cmd(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)
def small(name, fractional):
    with open(f"{work}/{name}.resp", "wb") as f:
        for n in range(100000):
            args = ["ZADD", f"z:{n}"]
            for i in range(10):
                args += [repr(i * 1.1) if fractional else i, f"member-{i}"]
            f.write(cmd(args))
def large(name, keys, members):
    with open(f"{work}/{name}.resp", "wb") as f:
        for n in range(keys):
            for start in range(0, members, 1000):
                args = ["ZADD", f"big:{n}"]
                for i in range(start, min(members, start + 1000)):
                    args += [i, f"member-{i}"]
                f.write(cmd(args))
small("small-int", False)
small("small-frac", True)
large("large-1k", 100, 1000)
large("large-100k", 3, 100000)
EOF

port=$((20000 + RANDOM % 12000))
printf '%-8s %-11s %8s %14s %s\n' server shape keys bytes/key encoding
for spec in "$@"; do
    name=${spec%%=*} bin=${spec#*=}
    for shape in small-int:100000:z:7 small-frac:100000:z:7 large-1k:100:big:0 large-100k:3:big:0; do
        IFS=: read -r file keys probe_prefix probe_n <<<"$shape"
        mkdir -p "$work/dir"
        taskset -c 0 "$bin" --port "$port" --save '' --appendonly no --dir "$work/dir" \
            >/dev/null 2>&1 &
        pid=$!
        for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
        used() { redis-cli -p "$port" info memory | awk -F: '/^used_memory:/ { print $2 + 0 }'; }
        before=$(used)
        redis-cli -p "$port" --pipe <"$work/$file.resp" >/dev/null
        after=$(used)
        encoding=$(redis-cli -p "$port" object encoding "$probe_prefix:$probe_n")
        printf '%-8s %-11s %8d %14d %s\n' "$name" "$file" "$keys" $(((after - before) / keys)) "$encoding"
        kill -9 "$pid"
        wait "$pid" 2>/dev/null || true
        pid=
        rm -rf "$work/dir"
    done
done
