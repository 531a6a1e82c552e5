#!/usr/bin/env bash
# Lock hand-off side by side (native LOCK.*, latch-lock's scripts, redis-py's polling Lock,
# a pub/sub-woken client) on latch-server and redis-server: see bench/locks.py.
#
#   bench/locks.sh [--waiters 1,10,100,1000] [--rounds 3] [--seconds 5] ...
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec python3 "$here/locks.py" "$@"
