#!/usr/bin/env bash
# Runs redis-py against latch-server: its Lock (tests/python/), then redis-py's own test
# files (from the redis-py source release on PyPI) for the commands, scripting, functions,
# pipelines, connections and pools, pub/sub and MONITOR; cluster-only, module and TLS tests
# deselected, and the four that fail against redis-server 7.0.15 as well (a 7.2 ACL
# format, PSYNC from a client, and two that expect a server on port 6379). Builds the
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
    --enable-debug-command yes >"$workdir/server.log" 2>&1 &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; rm -rf "$workdir"' EXIT
for _ in $(seq 100); do
    if "$VENV/bin/python" -c "import redis; redis.Redis(port=$port).ping()" 2>/dev/null; then
        break
    fi
    sleep 0.05
done
(cd "$SOURCE" && "$VENV/bin/python" -m pytest tests/test_pubsub.py tests/test_monitor.py \
    tests/test_commands.py tests/test_scripting.py tests/test_function.py \
    tests/test_pipeline.py tests/test_hash.py tests/test_encoding.py tests/test_lock.py \
    tests/test_helpers.py tests/test_connection.py tests/test_connection_pool.py \
    --redis-url="redis://127.0.0.1:$port/0" -m "not onlycluster and not redismod and not ssl" \
    --deselect tests/test_commands.py::TestRedisCommands::test_acl_getuser_setuser \
    --deselect tests/test_commands.py::TestRedisCommands::test_psync \
    --deselect tests/test_connection.py::TestConnection::test_retry_connect_on_timeout_error \
    --deselect tests/test_connection.py::test_create_single_connection_client_from_url \
    -q -p no:cacheprovider -W ignore::pytest.PytestUnknownMarkWarning --timeout 120)
