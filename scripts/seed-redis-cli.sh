#!/usr/bin/env bash
# Types the seed page's examples (SETNX, and the legacy SETNX/GET/GETSET lock sequence) into the
# stock redis-cli against latch-server and against redis-server 7, in RESP2 and RESP3, and
# checks that both print exactly the same, and what the seed page says.
#
# usage: scripts/seed-redis-cli.sh [path/to/latch-server]   (needs redis-server and redis-cli)
set -euo pipefail

latch_bin=${1:-target/release/latch-server}
for tool in redis-server redis-cli; do
  command -v "$tool" >/dev/null || { echo "seed-redis-cli: $tool is not installed (apt-get install redis-server redis-tools)" >&2; exit 2; }
done
[ -x "$latch_bin" ] || { echo "seed-redis-cli: no latch-server at $latch_bin (cargo build --release)" >&2; exit 2; }

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start() { # name binary port
  local dir="$work/$1"; mkdir -p "$dir"
  "$2" --port "$3" --bind 127.0.0.1 --dir "$dir" --save '' --appendonly no >"$dir/log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do redis-cli -p "$3" ping >/dev/null 2>&1 && return 0; sleep 0.05; done
  echo "seed-redis-cli: $1 did not start:" >&2; cat "$dir/log" >&2; exit 1
}

latch_port=$(free_port); start latch "$latch_bin" "$latch_port"
redis_port=$(free_port); start redis redis-server "$redis_port"

# The legacy lock: a timestamp far in the future is "not expired"; one in the past is.
future=$(( $(date +%s) + 3600 ))
past=$(( $(date +%s) - 3600 ))
session() {
  cat <<CMDS
FLUSHALL
SETNX mykey "Hello"
SETNX mykey "World"
GET mykey
SETNX lock.foo $past
SETNX lock.foo $future
GET lock.foo
GETSET lock.foo $future
GETSET lock.foo $future
GET lock.foo
DEL lock.foo
COMMAND INFO setnx
CMDS
}

status=0
for proto in 2 3; do
  flag=(); [ "$proto" = 3 ] && flag=(-3)
  session | redis-cli -p "$latch_port" "${flag[@]}" >"$work/latch.$proto" 2>&1 || true
  session | redis-cli -p "$redis_port" "${flag[@]}" >"$work/redis.$proto" 2>&1 || true
  # The seed's own replies: 1, 0, Hello; the lock sequence: 1 (acquired, stale), 0 (held),
  # the stale timestamp, GETSET returns the stale value (so the takeover won), then the new one.
  expected_head=$(printf 'OK\n1\n0\nHello\n1\n0\n%s\n%s\n%s\n%s\n1' "$past" "$past" "$future" "$future")
  got_head=$(head -n 11 "$work/latch.$proto")
  if [ "$got_head" != "$expected_head" ]; then
    echo "RESP$proto: latch's replies differ from the seed page:"; diff <(echo "$expected_head") <(echo "$got_head") || true; status=1
  fi
  if ! diff "$work/redis.$proto" "$work/latch.$proto" >"$work/diff.$proto"; then
    echo "RESP$proto: redis-cli shows a difference between redis-server and latch-server:"; cat "$work/diff.$proto"; status=1
  else
    echo "RESP$proto: redis-cli output identical to redis-server 7 ($(wc -l <"$work/latch.$proto") lines)"
  fi
  # COMMAND DOCS carries the seed page's metadata, which Redis 7.0 itself predates (it does not
  # mark SETNX deprecated): check those facts directly.
  redis-cli -p "$latch_port" "${flag[@]}" COMMAND DOCS setnx >"$work/docs.$proto"
  for fact in 'since' '1.0.0' 'group' 'string' 'complexity' 'O(1)' 'doc_flags' 'deprecated' \
              'deprecated_since' '2.6.12' 'replaced_by'; do
    grep -qxF -- "$fact" <(tr ' ' '\n' <"$work/docs.$proto" | sed 's/^[0-9]*) //') || { echo "RESP$proto: COMMAND DOCS setnx lacks '$fact'"; status=1; }
  done
done
[ $status = 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $status
