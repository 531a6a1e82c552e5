#!/usr/bin/env python3
"""Replication side by side: latch-server against redis-server 7.0.

    python3 bench/replication.py [--keys 1000000] [--rounds 3] [--requests 1000000]
                                 [--latch PATH]

Three measurements, each with primary and replicas of the same server:
- **Full sync**: a primary holding --keys string keys (16-byte names, 32-byte values);
  a replica is told REPLICAOF; the time until its link is up and it holds every key; then,
  in a second sync, the slowest PING round trip another client saw on the primary
  meanwhile (redis-server forks for the snapshot; Latch cuts one without forking). The
  two are separate runs because the pinger, at real-time priority on the replica's core,
  slows the replica's load by as much as the primary answers it quickly: timed together,
  the faster primary looked slower.
- **Replica lag**: redis-benchmark's SET (50 clients, pipeline 1, random keys) against a
  primary with one replica; every 20 ms the bytes the replica is behind
  (`master_repl_offset` minus its `slave_repl_offset`): median, 99th percentile and
  maximum, and how long
  after the load stops the replica is caught up.
- **Throughput with replicas**: the same SET load (pipeline 1 and 16) against a primary
  with no replica and with two.

The primary runs on core 0, the replicas and the load on core 1; `--save "" --appendonly
no`, `--repl-diskless-sync-delay 0` on both servers. Medians of --rounds alternating
rounds. Only processes this script started are stopped, by pid.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from pauses import Conn, footer, start  # noqa: E402
from growth import PINGER, PRIORITY  # noqa: E402

OPTIONS = ["--repl-diskless-sync-delay", "0"]


NEXT_PORT = [23000 + os.getpid() % 4000]


class Cluster:
    """Servers of one program, stopped together."""

    def __init__(self, binary):
        self.binary = binary
        self.procs = []
        self.dirs = []

    def start(self, cpu, extra=()):
        port = NEXT_PORT[0]
        NEXT_PORT[0] += 1
        workdir = tempfile.mkdtemp()
        self.dirs.append(workdir)
        self.procs.append(start(self.binary, port, workdir, OPTIONS + list(extra), cpu))
        return port

    def stop(self):
        for proc in self.procs:
            proc.kill()
            proc.wait()
        for workdir in self.dirs:
            shutil.rmtree(workdir, ignore_errors=True)


def info(conn, section="replication"):
    text = conn.call("INFO", section).decode()
    return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)


def fill_keys(conn, count):
    value = "v" * 32
    batch = []
    for i in range(0, count, 500):
        args = ["MSET"]
        for j in range(i, min(i + 500, count)):
            args += ["key:%012d" % j, value]
        batch.append(args)
        if len(batch) == 20:
            conn.pipeline(batch)
            batch = []
    if batch:
        conn.pipeline(batch)


def wait_synced(replica, keys, timeout=600):
    deadline = time.time() + timeout
    while time.time() < deadline:
        state = info(replica)
        if state.get("master_link_status") == "up" and int(replica.call("DBSIZE")) >= keys:
            return
        time.sleep(0.01)
    raise RuntimeError("the replica never caught up")


def full_sync(binary, keys, ping):
    """Seconds until a new replica holds `keys` keys, and with `ping` the slowest PING
    another client saw on the primary meanwhile (else None)."""
    cluster = Cluster(binary)
    pinger = None
    try:
        primary_port = cluster.start("0")
        primary = Conn(primary_port)
        fill_keys(primary, keys)
        replica_port = cluster.start("1")
        replica = Conn(replica_port)
        if ping:
            pinger = subprocess.Popen(
                ["taskset", "-c", "1"] + PRIORITY
                + [sys.executable, "-c", PINGER, str(primary_port)],
                stdout=subprocess.PIPE, text=True)
            time.sleep(0.3)
        started = time.perf_counter()
        replica.call("REPLICAOF", "127.0.0.1", str(primary_port))
        wait_synced(replica, keys)
        seconds = time.perf_counter() - started
        worst = None
        if pinger:
            pinger.terminate()
            worst, _ = (float(x) for x in pinger.communicate()[0].split())
        return seconds, worst
    finally:
        if pinger and pinger.poll() is None:
            pinger.kill()
            pinger.wait()
        cluster.stop()


def benchmark(port, requests, pipeline):
    out = subprocess.run(
        ["taskset", "-c", "1", "redis-benchmark", "-p", str(port), "-c", "50", "-P",
         str(pipeline), "-n", str(requests), "-r", "1000000", "-t", "set", "--csv"],
        capture_output=True, text=True, check=True).stdout
    row = [line for line in out.splitlines() if line.startswith('"SET"')][0]
    return float(row.split(",")[1].strip('"'))


def lag(binary, requests):
    cluster = Cluster(binary)
    try:
        primary_port = cluster.start("0")
        replica_port = cluster.start("1", ["--replicaof", "127.0.0.1", str(primary_port)])
        primary, replica = Conn(primary_port), Conn(replica_port)
        primary.call("SET", "warm", "up")
        wait_synced(replica, 1)
        load = subprocess.Popen(
            ["taskset", "-c", "1", "redis-benchmark", "-p", str(primary_port), "-c", "50",
             "-n", str(requests), "-r", "1000000", "-t", "set", "-q"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        samples = []
        while load.poll() is None:
            ahead = int(info(primary)["master_repl_offset"])
            behind = int(info(replica)["slave_repl_offset"])
            samples.append(max(ahead - behind, 0))
            time.sleep(0.02)
        stopped = time.perf_counter()
        target = int(info(primary)["master_repl_offset"])
        while int(info(replica)["slave_repl_offset"]) < target:
            time.sleep(0.001)
        catch_up_ms = (time.perf_counter() - stopped) * 1000
        samples.sort()
        p99 = samples[int(len(samples) * 0.99)]
        return statistics.median(samples), p99, max(samples), catch_up_ms
    finally:
        cluster.stop()


def throughput(binary, requests, replicas, pipeline):
    cluster = Cluster(binary)
    try:
        primary_port = cluster.start("0")
        conns = []
        for _ in range(replicas):
            port = cluster.start("1", ["--replicaof", "127.0.0.1", str(primary_port)])
            conns.append(Conn(port))
        Conn(primary_port).call("SET", "warm", "up")
        for conn in conns:
            wait_synced(conn, 1)
        return benchmark(primary_port, requests, pipeline)
    finally:
        cluster.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latch", default=os.path.join(REPO, "target/release/latch-server"))
    parser.add_argument("--redis", default=shutil.which("redis-server") or "redis-server")
    args = parser.parse_args()
    servers = [("redis", args.redis), ("latch", args.latch)]
    results = {}
    for _ in range(args.rounds):
        for name, binary in servers:
            row = results.setdefault(name, {})
            seconds, _ = full_sync(binary, args.keys, ping=False)
            row.setdefault("sync_s", []).append(seconds)
            _, worst = full_sync(binary, args.keys, ping=True)
            row.setdefault("sync_ping_ms", []).append(worst)
            median_lag, p99_lag, max_lag, catch_up = lag(binary, args.requests)
            row.setdefault("lag_median_b", []).append(median_lag)
            row.setdefault("lag_p99_b", []).append(p99_lag)
            row.setdefault("lag_max_b", []).append(max_lag)
            row.setdefault("catch_up_ms", []).append(catch_up)
            for pipeline in (1, 16):
                for replicas in (0, 2):
                    key = "rps_P%d_r%d" % (pipeline, replicas)
                    row.setdefault(key, []).append(
                        throughput(binary, args.requests, replicas, pipeline))
    rows = [
        ("full sync of %d keys, s" % args.keys, "sync_s", "%.2f"),
        ("primary's slowest PING during it, ms", "sync_ping_ms", "%.1f"),
        ("replica lag under SET c50, median bytes", "lag_median_b", "%.0f"),
        ("replica lag under SET c50, p99 bytes", "lag_p99_b", "%.0f"),
        ("replica lag under SET c50, max bytes", "lag_max_b", "%.0f"),
        ("caught up after the load, ms", "catch_up_ms", "%.1f"),
        ("SET c50-P1 rps, no replica", "rps_P1_r0", "%.0f"),
        ("SET c50-P1 rps, 2 replicas", "rps_P1_r2", "%.0f"),
        ("SET c50-P16 rps, no replica", "rps_P16_r0", "%.0f"),
        ("SET c50-P16 rps, 2 replicas", "rps_P16_r2", "%.0f"),
    ]
    print("%-44s %14s %14s %8s" % ("measurement", "redis", "latch", "l/r"))
    for label, key, fmt in rows:
        r = statistics.median(results["redis"][key])
        lt = statistics.median(results["latch"][key])
        ratio = "%.2f" % (lt / r) if r else "-"
        print("%-44s %14s %14s %8s" % (label, fmt % r, fmt % lt, ratio))
    print(footer(args.redis, args.rounds))


if __name__ == "__main__":
    main()
