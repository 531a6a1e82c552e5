#!/usr/bin/env bash
# Runs redis-py against latch-server: its Lock (tests/python/), then redis-py's own test
# files for pub/sub and MONITOR (tests/test_pubsub.py, tests/test_monitor.py from the
# redis-py source release on PyPI, cluster-only and module tests deselected). Builds the
# server, installs redis-py, pytest and pytest-timeout from PyPI into a virtualenv under
# ${XDG_CACHE_HOME:-$HOME/.cache}/latch/venv, and keeps the source release beside it.
set -euo pipefail
cd "$(dirname "$0")/.."
REDIS_PY_VERSION="${REDIS_PY_VERSION:-5.2.1}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/latch"
VENV="${LATCH_VENV:-$CACHE/venv}"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import redis, sys; sys.exit(redis.__version__ != '$REDIS_PY_VERSION')" 2>/dev/null; then
    "$VENV/bin/pip" install --quiet "redis==$REDIS_PY_VERSION"
fi
if ! "$VENV/bin/python" -c "import pytest, pytest_timeout" 2>/dev/null; then
    "$VENV/bin/pip" install --quiet "pytest>=8,<9" "pytest-timeout>=2,<3"
fi
cargo build --quiet --release -p latch-server
export LATCH_SERVER_BIN="$PWD/target/release/latch-server"
"$VENV/bin/python" tests/python/test_redis_py_lock.py

# redis-py's own tests: the source release (sdist) carries them.
SOURCE="$CACHE/redis-py-$REDIS_PY_VERSION"
if [ ! -f "$SOURCE/tests/test_pubsub.py" ]; then
    download=$(mktemp -d)
    "$VENV/bin/pip" download --quiet --no-deps --no-binary :all: \
        "redis==$REDIS_PY_VERSION" -d "$download"
    mkdir -p "$SOURCE"
    tar -xzf "$download/redis-$REDIS_PY_VERSION.tar.gz" -C "$SOURCE" --strip-components=1
    rm -rf "$download"
fi
port=$("$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
workdir=$(mktemp -d)
"$LATCH_SERVER_BIN" --port "$port" --bind 127.0.0.1 --save "" --dir "$workdir" \
    >"$workdir/server.log" 2>&1 &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; rm -rf "$workdir"' EXIT
for _ in $(seq 100); do
    if "$VENV/bin/python" -c "import redis; redis.Redis(port=$port).ping()" 2>/dev/null; then
        break
    fi
    sleep 0.05
done
(cd "$SOURCE" && "$VENV/bin/python" -m pytest tests/test_pubsub.py tests/test_monitor.py \
    --redis-url="redis://127.0.0.1:$port/0" -m "not onlycluster and not redismod" \
    -q -p no:cacheprovider -W ignore::pytest.PytestUnknownMarkWarning)
