#!/usr/bin/env bash
# Runs redis-py's Lock against latch-server (tests/python/). Builds the server, and installs
# redis-py from PyPI into a virtualenv under ${XDG_CACHE_HOME:-$HOME/.cache}/latch/venv.
set -euo pipefail
cd "$(dirname "$0")/.."
REDIS_PY_VERSION="${REDIS_PY_VERSION:-5.2.1}"
VENV="${LATCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/latch/venv}"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import redis, sys; sys.exit(redis.__version__ != '$REDIS_PY_VERSION')" 2>/dev/null; then
    "$VENV/bin/pip" install --quiet "redis==$REDIS_PY_VERSION"
fi
cargo build --quiet --release -p latch-server
export LATCH_SERVER_BIN="$PWD/target/release/latch-server"
"$VENV/bin/python" tests/python/test_redis_py_lock.py
