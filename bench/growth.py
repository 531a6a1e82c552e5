#!/usr/bin/env python3
"""How long other clients wait while one big collection grows, latch-server beside redis-server.

    python3 bench/growth.py [--elements 2000000] [--rounds 3] [--latch PATH]

For each shape, a fresh server of each kind gets one key filled to --elements elements
(HSET / SADD of strings / ZADD, 1,000 elements a command, 20 commands a pipeline, as
bench/pauses.py fills), so its hash table and arrays grow through every size on the way.
Meanwhile a separate process (its own interpreter: no lock shared with the filler) sends
PING after PING on its own connection. Printed per shape: the slowest PING round trip
(the longest stall another client saw), the 99.9th percentile, and the slowest fill
command by the server's own SLOWLOG, in milliseconds, median of --rounds alternating
rounds, with latch/redis. The `many` shape fills as many elements into keys of 1,000 each
(no big table at all): what the filling alone costs the other client.

Both servers run with `--save "" --appendonly no` in temporary directories on core 0
(taskset), the clients on core 1. Only processes this script started are stopped, by pid.
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

from pauses import Conn, fill, footer, start  # noqa: E402

PINGER = r"""
import signal, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
samples = []
while not stop:
    t = time.perf_counter()
    s.sendall(b"PING\r\n")
    got = b""
    while not got.endswith(b"\r\n"):
        got += s.recv(64)
    samples.append(time.perf_counter() - t)
samples.sort()
print(samples[-1] * 1000, samples[int(len(samples) * 0.999)] * 1000)
"""


# The pinger shares core 1 with the filler, which a faster server keeps busier: without a
# real-time priority (when this user may have one), its own wait for the CPU would count
# as the server's stall.
PRIORITY = ["chrt", "-f", "10"] if shutil.which("chrt") and os.geteuid() == 0 else []


def fill_many(conn, count):
    """`count` hash fields in keys of 1,000 fields each."""
    batch = []
    for i in range(0, count, 1000):
        args = ["HSET", "k%d" % (i // 1000)]
        for j in range(i, min(i + 1000, count)):
            args += ["field-%d" % j, "value-%d" % j]
        batch.append(args)
        if len(batch) == 20:
            conn.pipeline(batch)
            batch = []
    if batch:
        conn.pipeline(batch)


def slowest_command_ms(conn):
    entries = conn.call("SLOWLOG", "GET", "10000")
    return max((int(entry[2]) for entry in entries), default=0) / 1000


def one_run(binary, shape, elements):
    port = 22000 + os.getpid() % 5000
    workdir = tempfile.mkdtemp()
    proc = start(binary, port, workdir,
                 ["--slowlog-log-slower-than", "1000", "--slowlog-max-len", "10000"])
    try:
        conn = Conn(port)
        pinger = subprocess.Popen(
            ["taskset", "-c", "1"] + PRIORITY + [sys.executable, "-c", PINGER, str(port)],
            stdout=subprocess.PIPE, text=True)
        time.sleep(0.3)
        conn.call("SLOWLOG", "RESET")
        if shape == "many":
            fill_many(conn, elements)
        else:
            fill(conn, shape, "big", elements)
        time.sleep(0.1)
        pinger.terminate()
        worst, p999 = (float(x) for x in pinger.communicate()[0].split())
        slowest = slowest_command_ms(conn)
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    return worst, p999, slowest


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--elements", type=int, default=2000000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shapes", default="hash set zset many")
    parser.add_argument("--latch", default=os.environ.get(
        "LATCH_BIN", os.path.join(REPO, "target/release/latch-server")))
    parser.add_argument("--redis", default=shutil.which("redis-server") or "redis-server")
    args = parser.parse_args()
    os.sched_setaffinity(0, {1})
    shapes = args.shapes.split()
    runs = {(w, s): [] for w in ("redis", "latch") for s in shapes}
    for _ in range(args.rounds):
        for shape in shapes:
            for which, binary in [("redis", args.redis), ("latch", args.latch)]:
                runs[(which, shape)].append(one_run(binary, shape, args.elements))
    print("%-6s %9s | %10s %10s %6s | %9s %9s %6s | %9s %9s %6s" % (
        "shape", "elements", "r_stall_ms", "l_stall_ms", "ratio", "r_p999", "l_p999",
        "ratio", "r_cmd_ms", "l_cmd_ms", "ratio"))
    for shape in shapes:
        med = {w: [statistics.median(r[i] for r in runs[(w, shape)]) for i in range(3)]
               for w in ("redis", "latch")}
        cells = []
        for i in range(3):
            r, l = med["redis"][i], med["latch"][i]
            cells += [r, l, ("%.2f" % (l / r)) if r > 0 else "-"]
        print("%-6s %9d | %10.2f %10.2f %6s | %9.2f %9.2f %6s | %9.2f %9.2f %6s" % (
            shape, args.elements, *cells))
    print(footer(args.redis, args.rounds))


if __name__ == "__main__":
    main()
