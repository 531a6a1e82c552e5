#!/usr/bin/env python3
"""How long one big operation stalls other clients, latch-server beside redis-server 7.0.

    python3 bench/pauses.py [--elements 100000] [--rounds 3] [--latch PATH]

For each collection type (hash, set of strings, sorted set, list) a key of --elements
elements is built, then deleted with DEL and, in a second run, with UNLINK, while another
connection sends PING after PING and times each. A third case converts keys from the
compact to the large form: a key is filled to its type's threshold (512 hash fields, 512
set integers, 128 sorted-set members) and one more element converts it; that command is
timed. Printed per row: the deleting (or converting) command's own time, and the longest
PING round trip seen while it ran (the stall other clients felt), both in milliseconds,
median of --rounds alternating rounds, with latch/redis.

Both servers run with `--save "" --appendonly no` in temporary directories, on core 0
(taskset), the clients on core 1. Only processes this script started are stopped, by pid.
"""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        if not isinstance(arg, bytes):
            arg = str(arg).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(out)


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b":"):
            return rest
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return [self.reply() for _ in range(n)]
        raise RuntimeError("unexpected reply %r" % line)

    def call(self, *args):
        self.sock.sendall(encode(*args))
        return self.reply()

    def pipeline(self, commands):
        self.sock.sendall(b"".join(encode(*c) for c in commands))
        return [self.reply() for _ in commands]


def footer(redis, rounds):
    """The line under a table: date, cores, rounds and redis-server's version."""
    version = subprocess.run([redis, "--version"], capture_output=True, text=True).stdout
    return "(%s, %d cores, median of %d alternating rounds; %s)" % (
        time.strftime("%Y-%m-%d", time.gmtime()), os.cpu_count(), rounds,
        version.split()[2] if version else "redis-server")


def start(binary, port, workdir, extra=(), cpu="0"):
    proc = subprocess.Popen(
        ["taskset", "-c", cpu, binary, "--port", str(port), "--bind", "127.0.0.1",
         "--dir", workdir, "--save", "", "--appendonly", "no", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("%s exited" % binary)
        try:
            if Conn(port).call("PING") == b"PONG":
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("%s never answered" % binary)


def fill(conn, kind, key, count, start_at=0):
    batch = []
    for i in range(start_at, start_at + count, 1000):
        n = min(1000, start_at + count - i)
        if kind == "hash":
            args = ["HSET", key]
            for j in range(i, i + n):
                args += ["field-%d" % j, "value-%d" % j]
        elif kind == "set":
            args = ["SADD", key] + ["member-%d" % j for j in range(i, i + n)]
        elif kind == "intset":
            args = ["SADD", key] + [str(j) for j in range(i, i + n)]
        elif kind == "zset":
            args = ["ZADD", key]
            for j in range(i, i + n):
                args += [str(j), "member-%d" % j]
        else:
            args = ["RPUSH", key] + ["item-%d" % j for j in range(i, i + n)]
        batch.append(args)
        if len(batch) == 20:
            conn.pipeline(batch)
            batch = []
    if batch:
        conn.pipeline(batch)


class Pinger:
    """PINGs back to back on its own connection; records each round trip."""

    def __init__(self, port):
        self.conn = Conn(port)
        self.samples = []
        self.running = True
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while self.running:
            t = time.perf_counter()
            self.conn.call("PING")
            self.samples.append((t, time.perf_counter() - t))

    def stop(self):
        self.running = False
        self.thread.join()

    def worst_between(self, start, end):
        seen = [rtt for (t, rtt) in self.samples if t + rtt >= start and t <= end]
        return max(seen) if seen else 0.0


def timed(conn, pinger, *command):
    time.sleep(0.05)
    start = time.perf_counter()
    conn.call(*command)
    end = time.perf_counter()
    time.sleep(0.05)
    return (end - start) * 1000, pinger.worst_between(start, end) * 1000


def one_round(binary, elements):
    port = 21000 + os.getpid() % 5000
    workdir = tempfile.mkdtemp()
    proc = start(binary, port, workdir)
    results = {}
    try:
        conn = Conn(port)
        pinger = Pinger(port)
        for kind in ["hash", "set", "zset", "list"]:
            for command in ["DEL", "UNLINK"]:
                fill(conn, kind, "big", elements)
                results["%s %s %d" % (command, kind, elements)] = timed(conn, pinger, command, "big")
        # Conversions: one key at the threshold, then the element that converts it.
        for kind, threshold, extra in [
            ("hash", 512, ["HSET", "conv", "one-more", "x"]),
            ("intset", 512, ["SADD", "conv", "not-a-number"]),
            ("zset", 128, ["ZADD", "conv", "1", "one-more"]),
        ]:
            times = []
            for _ in range(20):
                conn.call("DEL", "conv")
                fill(conn, kind, "conv", threshold)
                times.append(timed(conn, pinger, *extra))
            own = statistics.median(t[0] for t in times)
            worst = max(t[1] for t in times)
            results["convert %s at %d" % (kind, threshold)] = (own, worst)
        pinger.stop()
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--elements", type=int, default=100000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latch", default=os.environ.get(
        "LATCH_BIN", os.path.join(REPO, "target/release/latch-server")))
    parser.add_argument("--redis", default=shutil.which("redis-server") or "redis-server")
    args = parser.parse_args()
    os.sched_setaffinity(0, {1})
    runs = {"redis": [], "latch": []}
    for _ in range(args.rounds):
        for which, binary in [("redis", args.redis), ("latch", args.latch)]:
            runs[which].append(one_round(binary, args.elements))
    rows = list(runs["redis"][0].keys())
    print("%-24s | %9s %9s %6s | %10s %10s %6s" % (
        "operation", "r_cmd_ms", "l_cmd_ms", "ratio", "r_stall_ms", "l_stall_ms", "ratio"))
    for row in rows:
        med = {w: (statistics.median(r[row][0] for r in runs[w]),
                   statistics.median(r[row][1] for r in runs[w])) for w in runs}
        ratio = lambda a, b: "%.2f" % (a / b) if b > 0 else "-"
        print("%-24s | %9.2f %9.2f %6s | %10.2f %10.2f %6s" % (
            row, med["redis"][0], med["latch"][0], ratio(med["latch"][0], med["redis"][0]),
            med["redis"][1], med["latch"][1], ratio(med["latch"][1], med["redis"][1])))
    print(footer(args.redis, args.rounds))


if __name__ == "__main__":
    main()
