#!/usr/bin/env python3
"""PUBLISH with many channels alive: is it still proportional to its receivers only?

    bench/channels.py [--channels 1000000] [--rounds 3] [--requests 200000]

For redis-server and latch-server (target/release/latch-server, or $LATCH_BIN), side by
side in alternating rounds: one connection subscribes to CHANNELS channels (none in the
baseline rows), another to the channel `feed`; redis-benchmark (50 clients, pipeline 1 and
16) publishes to `feed`. Prints the median requests/s per server and row, and how the rate
with the channels compares with the rate without them (1.00: the other channels cost
nothing). Also the server's RSS growth per subscribed channel. Stops only the servers it
started, by their process ids.
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def start(which, port, workdir):
    binary = "redis-server"
    if which == "latch":
        binary = os.environ.get("LATCH_BIN", os.path.join(REPO, "target/release/latch-server"))
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", workdir],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit(f"{which} did not start on port {port}")


def encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def subscribe_many(port, count):
    """One connection subscribed to `count` channels; returns the socket (kept open).
    Confirmations are read batch by batch: unread, they would pass the pubsub output
    limit."""
    conn = socket.create_connection(("127.0.0.1", port))
    batch = 10000
    for start_at in range(0, count, batch):
        end = min(count, start_at + batch)
        conn.sendall(encode([b"SUBSCRIBE"] + [b"chan:%d" % i for i in range(start_at, end)]))
        tail = b":%d\r\n" % end
        seen = b""
        while not seen.endswith(tail):
            chunk = conn.recv(1 << 20)
            if not chunk:
                sys.exit("subscriber connection closed")
            seen = (seen + chunk)[-64:]
    return conn


def publish_rps(port, requests, pipeline):
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-n", str(requests), "-c", "50",
         "-P", str(pipeline), "--csv", "PUBLISH", "feed", "xxx"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    return float(out[1].split(",")[1].strip('"'))


def drain(conn):
    conn.setblocking(False)
    try:
        while conn.recv(1 << 20):
            pass
    except BlockingIOError:
        pass
    conn.setblocking(True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--channels", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=200_000)
    args = parser.parse_args()
    results = {}
    memory = {}
    for _ in range(args.rounds):
        for which in ("redis", "latch"):
            for extra in (0, args.channels):
                with tempfile.TemporaryDirectory() as workdir:
                    port = free_port()
                    proc = start(which, port, workdir)
                    try:
                        before = rss_kb(proc.pid)
                        many = subscribe_many(port, extra) if extra else None
                        after = rss_kb(proc.pid)
                        if extra:
                            memory.setdefault(which, []).append((after - before) * 1024 / extra)
                        feed = socket.create_connection(("127.0.0.1", port))
                        feed.sendall(encode([b"SUBSCRIBE", b"feed"]))
                        feed.recv(64)
                        for pipeline in (1, 16):
                            rps = publish_rps(port, args.requests, pipeline)
                            results.setdefault((which, extra, pipeline), []).append(rps)
                            drain(feed)
                        feed.close()
                        if many:
                            many.close()
                    finally:
                        proc.kill()
                        proc.wait()
    print(f"{'server':<7} {'pipeline':>8} {'rps, 0 channels':>16} "
          f"{'rps, ' + format(args.channels, ',') + ' channels':>22} {'ratio':>6}")
    for which in ("redis", "latch"):
        for pipeline in (1, 16):
            base = statistics.median(results[(which, 0, pipeline)])
            loaded = statistics.median(results[(which, args.channels, pipeline)])
            print(f"{which:<7} {pipeline:>8} {base:>16.0f} {loaded:>22.0f} {loaded / base:>6.2f}")
    for which in ("redis", "latch"):
        print(f"{which}: {statistics.median(memory[which]):.0f} bytes of RSS per subscribed channel")
    print(f"({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, median of {args.rounds} "
          f"alternating rounds, {args.requests} PUBLISH per run, 50 clients)")


if __name__ == "__main__":
    main()
