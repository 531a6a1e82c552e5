#!/usr/bin/env bash
# Runs the `redis` crate's own integration tests (the version Cargo.lock pins, from its
# crates.io source) against latch-server: its test harness starts `redis-server` from
# PATH for each test, and finds a shim there that starts latch-server instead. The files:
# test_basic, test_types, test_streams, test_script, test_acl, test_geospatial and
# test_async (cluster, sentinel, TLS and module tests left out). Skipped: test_acl_dryrun
# (it expects Redis 7.2's ACL DRYRUN text and fails against redis-server 7.0.15 too), and
# two that time the client itself and failed once each under load, against either
# server: test_block_on_all_panics_from_spawns (the harness's own panic handling) and
# test_connection_manager_reconnect_after_delay (five reconnects 3 ms apart while the
# restarted server starts). One test at a time: the harness picks each server's port by
# binding port 0 and letting it go, and tests running side by side now and then connect
# to another's server as it stops (a reset seen against redis-server as well).
# The crate's tests build in ${XDG_CACHE_HOME:-$HOME/.cache}/latch/redis-rs (kept).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --release -p latch-server
server="$PWD/target/release/latch-server"
version=$(cargo metadata --format-version 1 --locked 2>/dev/null |
    python3 -c 'import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "redis" and p["source"] and "crates.io" in p["source"]:
        print(p["version"], p["manifest_path"]); break')
read -r crate_version manifest <<<"$version"
[[ -n ${manifest:-} ]] || { echo "redis-rs-tests: the redis crate is not in Cargo.lock" >&2; exit 1; }
work="${XDG_CACHE_HOME:-$HOME/.cache}/latch/redis-rs"
source_dir="$work/redis-$crate_version"
if [[ ! -f $source_dir/Cargo.toml ]]; then
    mkdir -p "$work"
    cp -r "$(dirname "$manifest")" "$source_dir"
fi
shim=$(mktemp -d)
trap 'rm -rf "$shim"' EXIT
printf '#!/bin/sh\nexec "%s" "$@"\n' "$server" >"$shim/redis-server"
chmod +x "$shim/redis-server"
cd "$source_dir"
PATH="$shim:$PATH" CARGO_TARGET_DIR="$work/target" cargo test --no-fail-fast \
    --features "acl streams geospatial script tokio-comp connection-manager aio" \
    --test test_basic --test test_types --test test_streams --test test_script \
    --test test_acl --test test_geospatial --test test_async \
    -- --skip test_acl_dryrun --skip test_block_on_all_panics_from_spawns \
    --skip test_connection_manager_reconnect_after_delay --test-threads=1
