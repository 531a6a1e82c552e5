#!/usr/bin/env python3
"""Memory under abuse: latch-server and redis-server side by side, with the same limits.

    bench/abuse.py [--rounds N] [--latch PATH] [--no-limits]

Each server (redis-server first, then latch-server, alternating for --rounds rounds, 1 by
default) is started with the same client limits:

    maxmemory-clients 32mb
    client-output-buffer-limit normal 16mb 4mb 5
    client-query-buffer-limit 1gb (the default)

(--no-limits: none of them), a list `big` of 10,000 items of 100 bytes (a 1 MB LRANGE
reply), and then three abuses, one after the other, each held for a few seconds:

  unfinished  1,000 clients each send 1 MB of a 2 MB SET and stop there;
  multi       100 clients each open MULTI and queue 10,000 SETs (never EXEC);
  no-read     10 clients each send 100 LRANGE big 0 -1 and never read a reply.

From the start of an abuse and for 8 seconds, an ordinary client (a process of its own)
sends a PING every 5 ms; the table shows, for each abuse and server: the server's resident
memory (VmRSS) at the peak of the abuse and its growth over the idle server before it, how
many abusers the server closed, and the ordinary client's PING round trip (median, 99th
percentile and slowest, in ms). Only loopback addresses are used. The servers
and sockets are this script's own and are stopped by their process ids.
"""

import argparse
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMITS = [
    "--maxmemory-clients", "32mb",
    "--client-output-buffer-limit", "normal 16mb 4mb 5",
]


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def command(*args):
    out = [f"*{len(args)}\r\n".encode()]
    for arg in args:
        arg = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(out)


def connect(port):
    conn = socket.create_connection(("127.0.0.1", port), timeout=10)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


def roundtrip(conn, request, expected_end=b"\r\n"):
    conn.sendall(request)
    got = b""
    while not got.endswith(expected_end):
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        got += chunk
    return got


class Server:
    def __init__(self, kind, binary, port, limits):
        self.kind = kind
        self.port = port
        self.dir = tempfile.mkdtemp(prefix=f"abuse-{kind}-")
        args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", self.dir,
                "--save", "", "--appendonly", "no", "--maxclients", "4000"]
        if limits:
            args += LIMITS
        self.log = open(os.path.join(self.dir, "log"), "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log)
        deadline = time.time() + 10
        while True:
            if self.proc.poll() is not None:
                sys.exit(f"{kind} exited at start; see {self.dir}/log")
            try:
                conn = connect(port)
                if roundtrip(conn, b"PING\r\n") == b"+PONG\r\n":
                    conn.close()
                    break
            except OSError:
                pass
            if time.time() > deadline:
                self.stop()
                sys.exit(f"{kind} did not answer on port {port}")
            time.sleep(0.05)

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def closed(conn):
    """Whether the server closed `conn` (reads what it sent meanwhile)."""
    conn.setblocking(False)
    try:
        while True:
            chunk = conn.recv(1 << 20)
            if not chunk:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def send_quietly(conn, data):
    try:
        conn.sendall(data)
        return True
    except OSError:
        return False


def abuse_unfinished(port):
    clients = []
    part = command("SET", "k", b"x" * 2_000_000)[: 1_000_000 + 30]
    for _ in range(1000):
        conn = connect(port)
        send_quietly(conn, part)
        clients.append(conn)
    return clients, []


def abuse_multi(port):
    clients = []
    queue = command("MULTI") + b"".join(
        command("SET", f"key:{i}", "value-of-twenty-b") for i in range(10_000))
    for _ in range(100):
        conn = connect(port)
        send_quietly(conn, queue)
        clients.append(conn)
    return clients, []


def abuse_no_read(port):
    clients, writers = [], []
    flood = command("LRANGE", "big", 0, -1) * 100
    for _ in range(10):
        conn = connect(port)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        # The server stops reading while it cannot write: sent from a thread, which ends
        # when the connection does.
        writer = threading.Thread(target=send_quietly, args=(conn, flood), daemon=True)
        writer.start()
        clients.append(conn)
        writers.append(writer)
    return clients, writers


ABUSES = [("unfinished", abuse_unfinished), ("multi", abuse_multi), ("no-read", abuse_no_read)]


def probe(port, seconds):
    """The ordinary client: a PING every 5 ms for `seconds`; prints the round trips (ms).
    Run as a process of its own, so that the abusers' threads do not delay it."""
    conn = connect(port)
    pings = []
    until = time.time() + seconds
    while time.time() < until:
        started = time.perf_counter()
        roundtrip(conn, b"PING\r\n")
        pings.append((time.perf_counter() - started) * 1000)
        time.sleep(0.005)
    print(" ".join(f"{ping:.4f}" for ping in pings))


def run_abuse(server, abuse):
    idle_rss = rss_kb(server.proc.pid)
    pinger = subprocess.Popen([sys.executable, __file__, "--probe", str(server.port), "8"],
                              stdout=subprocess.PIPE, text=True)
    peak = rss_kb(server.proc.pid)
    clients, _ = abuse(server.port)
    # Held for the probe's time (soft limits take their seconds).
    while pinger.poll() is None:
        peak = max(peak, rss_kb(server.proc.pid))
        time.sleep(0.05)
    pings = sorted(float(ping) for ping in pinger.stdout.read().split())
    closed_count = sum(closed(conn) for conn in clients)
    for conn in clients:
        conn.close()
    time.sleep(1)
    return {
        "rss_mb": peak / 1024,
        "growth_mb": (peak - idle_rss) / 1024,
        "closed": closed_count,
        "of": len(clients),
        "ping_p50": statistics.median(pings),
        "ping_p99": pings[int(len(pings) * 0.99)],
        "ping_max": pings[-1],
    }


def prepare(server):
    conn = connect(server.port)
    roundtrip(conn, command("RPUSH", "big", *([b"i" * 100] * 10_000)))
    conn.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--latch", default=os.environ.get(
        "LATCH_BIN", os.path.join(REPO, "target/release/latch-server")))
    parser.add_argument("--no-limits", action="store_true")
    parser.add_argument("--probe", nargs=2, type=int, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.probe:
        probe(*options.probe)
        return
    if not os.access(options.latch, os.X_OK):
        subprocess.run(["cargo", "build", "--release", "-p", "latch-server"], cwd=REPO,
                       check=True)
    redis = shutil.which("redis-server")
    if not redis:
        sys.exit("needs redis-server (Debian: redis-server)")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    port = 20000 + int.from_bytes(os.urandom(2), "big") % 12000
    results = {}
    for _ in range(options.rounds):
        for kind, binary in (("redis", redis), ("latch", options.latch)):
            server = Server(kind, binary, port, not options.no_limits)
            try:
                prepare(server)
                for name, abuse in ABUSES:
                    results.setdefault((name, kind), []).append(run_abuse(server, abuse))
            finally:
                server.stop()
    limits = "none" if options.no_limits else " ".join(LIMITS)
    print(f"limits: {limits}; rounds: {options.rounds} (medians)")
    print("| abuse | server | peak RSS MB | growth MB | abusers closed | PING p50 ms | p99 ms | max ms |")
    print("|---|---|---|---|---|---|---|---|")
    for name, _ in ABUSES:
        for kind in ("redis", "latch"):
            runs = results[(name, kind)]
            med = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
            print(f"| {name} | {kind} | {med['rss_mb']:.0f} | {med['growth_mb']:.0f} | "
                  f"{med['closed']:.0f}/{med['of']} | {med['ping_p50']:.3f} | "
                  f"{med['ping_p99']:.3f} | {med['ping_max']:.3f} |")


if __name__ == "__main__":
    main()
