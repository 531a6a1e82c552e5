#!/usr/bin/env python3
"""Failover under Redis Sentinel: a primary, 2 replicas and 3 sentinels on loopback.

    python3 bench/failover.py [--server latch|redis] [--kills 20] [--latch PATH]

The servers (latch-server by default, redis-server 7.0 with --server redis) run with
`--save "" --appendonly no --repl-diskless-sync-delay 0`, each in its own temporary
directory on a free port, the replicas with `--replicaof`. Three sentinels (redis-server
--sentinel, in both cases) monitor them with quorum 2, down-after-milliseconds 1000,
failover-timeout 5000 and parallel-syncs 1.

A writer thread asks the sentinels, in order, for the primary (`SENTINEL
get-master-addr-by-name mymaster`; asked again after any error or -READONLY) and sends
`SET w:<n> <n>` then `WAIT 1 500` on the same connection, each <n> once. A write is
acknowledged only when SET answered OK and WAIT answered at least 1; unacknowledged
writes may be lost, acknowledged ones may not.

Each of --kills rounds: the writer runs about 1.5 s, the current primary (the process this
script started for that port) gets SIGKILL, and the first sentinel is asked every 10 ms
until it names another address: the switch time. The killed server is then started again
on its port with the same options, no --replicaof and an empty directory (a crashed node
without persistence comes back as an empty primary); Sentinel must turn it into a replica.
Before the next kill the script waits (--rejoin-timeout, 30 s) until that node reports
role:slave of the current primary with master_link_status:up and holds every acknowledged
key the primary holds: "rejoined with all data". The next kill also waits until
2 x failover-timeout + 1 s have passed since the last switch, as Sentinel does not start a
new failover of the same master sooner than 2 x failover-timeout after the last one.

If a kill brings no switch within --switch-timeout (60 s), the rounds stop there.
At the end the writer stops, and every acknowledged key is read back (MGET) on the final
primary (missing or wrong: lost) and, once they have caught up with its offset, on both
replicas; with no running primary, a write is lost when no running server holds it.
Printed: the command line and date, a line per round, then the table (switch time p50,
p95 by nearest rank, and max). Exits 1 if an acknowledged write was lost, a rejoin failed,
a replica misses acknowledged keys or a failover never came; the temporary directories
(server and sentinel logs, sentinel.conf as Sentinel rewrote it) are then kept and their
path printed. Only processes this script started are stopped, by pid, also on Ctrl-C.
"""

import argparse
import atexit
import math
import os
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 5000


class ReplyError(Exception):
    """An error reply (-ERR ..., -READONLY ...)."""


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        if not isinstance(arg, bytes):
            arg = str(arg).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(out)


class Conn:
    def __init__(self, port, timeout=5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def _fill(self):
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("closed")
        self.buf += chunk

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b":"):
            return rest
        if kind == b"-":
            raise ReplyError(rest.decode(errors="replace"))
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise ConnectionError("unexpected reply %r" % line)

    def call(self, *args):
        self.sock.sendall(encode(*args))
        return self.reply()

    def pipeline(self, commands):
        self.sock.sendall(b"".join(encode(*c) for c in commands))
        return [self.reply() for _ in commands]


def call_once(port, *args, timeout=2.0):
    conn = Conn(port, timeout)
    try:
        return conn.call(*args)
    finally:
        conn.close()


def info(port, section="replication"):
    text = call_once(port, "INFO", section).decode()
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


class Procs:
    """Every process this script started; stopped by pid, never by name."""

    def __init__(self):
        self.live = []

    def add(self, proc):
        self.live.append(proc)
        return proc

    def stop_all(self):
        for proc in self.live:
            if proc.poll() is None:
                try:
                    proc.kill()
                except OSError:
                    pass
        for proc in self.live:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.live = []


PROCS = Procs()


def wait_ping(port, proc, what, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("%s on port %d exited (%s)" % (what, port, proc.returncode))
        try:
            if call_once(port, "PING", timeout=1) == b"PONG":
                return
        except (OSError, ReplyError):
            pass
        time.sleep(0.05)
    raise RuntimeError("%s on port %d never answered PING" % (what, port))


class Node:
    """One data server: its port, directory, log and current process."""

    def __init__(self, binary, port, root):
        self.binary = binary
        self.port = port
        self.dir = os.path.join(root, "node-%d" % port)
        os.makedirs(self.dir)
        self.log = os.path.join(self.dir, "server.log")
        self.runs = 0
        self.proc = None

    def start(self, replicaof=None):
        # A fresh, empty data directory per start: a replica's full sync may have left a
        # dump.rdb that a restart would load, and a killed unpersisted node comes back empty.
        self.runs += 1
        data = os.path.join(self.dir, "run-%d" % self.runs)
        os.makedirs(data)
        command = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
                   "--dir", data, "--save", "", "--appendonly", "no",
                   "--repl-diskless-sync-delay", "0"]
        if replicaof:
            command += ["--replicaof", "127.0.0.1", str(replicaof)]
        with open(self.log, "ab") as log:
            log.write(("\n=== %s start %d: %s\n" % (
                time.strftime("%H:%M:%S"), self.runs, shlex.join(command))).encode())
            log.flush()
            self.proc = PROCS.add(subprocess.Popen(
                command, cwd=data, stdin=subprocess.DEVNULL, stdout=log, stderr=log))
        wait_ping(self.port, self.proc, "server")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


class Sentinel:
    def __init__(self, redis, port, root, primary_port):
        self.port = port
        self.dir = os.path.join(root, "sentinel-%d" % port)
        os.makedirs(self.dir)
        self.conf = os.path.join(self.dir, "sentinel.conf")
        with open(self.conf, "w") as f:
            f.write("port %d\nbind 127.0.0.1\ndaemonize no\ndir %s\n" % (port, self.dir))
            f.write("sentinel monitor mymaster 127.0.0.1 %d 2\n" % primary_port)
            f.write("sentinel down-after-milliseconds mymaster %d\n" % DOWN_AFTER_MS)
            f.write("sentinel failover-timeout mymaster %d\n" % FAILOVER_TIMEOUT_MS)
            f.write("sentinel parallel-syncs mymaster 1\n")
        self.log = os.path.join(self.dir, "sentinel.log")
        with open(self.log, "ab") as log:
            self.proc = PROCS.add(subprocess.Popen(
                [redis, self.conf, "--sentinel"], cwd=self.dir, stdin=subprocess.DEVNULL,
                stdout=log, stderr=log))
        wait_ping(self.port, self.proc, "sentinel")


def master_addr(conn):
    reply = conn.call("SENTINEL", "get-master-addr-by-name", "mymaster")
    if not reply:
        return None
    return reply[0].decode(), int(reply[1])


def pairs(flat):
    return {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}


class Writer(threading.Thread):
    """SET w:<n> <n> + WAIT 1 500 to whatever the sentinels name the primary."""

    def __init__(self, sentinel_ports):
        super().__init__(daemon=True)
        self.sentinel_ports = sentinel_ports
        self.sentinels = {}
        self.sent = 0
        self.acked = []          # every acknowledged n, in order
        self.wait_short = 0      # SET OK, WAIT < 1
        self.errors = {}         # error reply or exception kind -> count
        self.stopping = threading.Event()

    def note(self, what):
        self.errors[what] = self.errors.get(what, 0) + 1

    def ask(self):
        for port in self.sentinel_ports:
            try:
                if port not in self.sentinels:
                    self.sentinels[port] = Conn(port, timeout=1)
                addr = master_addr(self.sentinels[port])
                if addr:
                    return addr
            except (OSError, ReplyError):
                conn = self.sentinels.pop(port, None)
                if conn:
                    conn.close()
        return None

    def run(self):
        conn, n = None, 0
        while not self.stopping.is_set():
            if conn is None:
                addr = self.ask()
                if addr is None:
                    time.sleep(0.01)
                    continue
                try:
                    conn = Conn(addr[1], timeout=3)
                except OSError:
                    self.note("connect refused/failed")
                    time.sleep(0.01)
                    continue
            n += 1
            self.sent += 1
            try:
                if conn.call("SET", "w:%d" % n, n) != b"OK":
                    self.note("SET not OK")
                    continue
                if int(conn.call("WAIT", 1, 500)) >= 1:
                    self.acked.append(n)
                else:
                    self.wait_short += 1
            except ReplyError as e:
                self.note("-" + str(e).split()[0])
                conn.close()
                conn = None
                if not str(e).startswith("READONLY"):
                    time.sleep(0.01)
            except (OSError, ConnectionError, ValueError) as e:
                self.note(type(e).__name__)
                conn.close()
                conn = None
                time.sleep(0.01)
        if conn:
            conn.close()

    def stop(self):
        self.stopping.set()
        self.join()


def missing_keys(port, numbers, batch=1000):
    """The numbers n among `numbers` whose key w:<n> is absent or not <n> on the server."""
    conn = Conn(port, timeout=30)
    missing = []
    try:
        chunks = [numbers[i:i + batch] for i in range(0, len(numbers), batch)]
        for j in range(0, len(chunks), 10):
            group = chunks[j:j + 10]
            replies = conn.pipeline([["MGET"] + ["w:%d" % n for n in chunk] for chunk in group])
            for chunk, values in zip(group, replies):
                for n, value in zip(chunk, values):
                    if value != str(n).encode():
                        missing.append(n)
    finally:
        conn.close()
    return missing


def replica_of(port, primary_port):
    """True once the server is a replica of primary_port with its link up."""
    try:
        r = info(port)
    except (OSError, ReplyError, ValueError):
        return False
    return (r.get("role") == "slave" and r.get("master_port") == str(primary_port)
            and r.get("master_link_status") == "up")


def link_state(port):
    """A replica's link, for the notes of a failed round."""
    try:
        r = info(port)
    except (OSError, ReplyError, ValueError) as e:
        return "%d: %s" % (port, e)
    text = "%d: role:%s master_port:%s link:%s" % (
        port, r.get("role"), r.get("master_port"), r.get("master_link_status"))
    if r.get("master_sync_in_progress") == "1":
        text += " sync in progress, %s bytes read of %s" % (
            r.get("master_sync_read_bytes"), r.get("master_sync_total_bytes"))
    try:
        text += ", %d keys" % int(call_once(port, "DBSIZE"))
    except (OSError, ReplyError, ValueError):
        pass
    return text


def online_replicas(primary_port):
    try:
        r = info(primary_port)
    except (OSError, ReplyError, ValueError):
        return 0
    return sum(1 for k, v in r.items() if k.startswith("slave") and k[5:].isdigit()
               and "state=online" in v)


def wait_ready(sentinel_ports, nodes, primary_port, seconds=60):
    """Every sentinel knows both replicas (up) and the other two sentinels."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        ok = all(replica_of(n.port, primary_port) for n in nodes if n.port != primary_port)
        for port in sentinel_ports:
            if not ok:
                break
            try:
                conn = Conn(port, timeout=2)
                replicas = [pairs(r) for r in conn.call("SENTINEL", "replicas", "mymaster")]
                others = conn.call("SENTINEL", "sentinels", "mymaster")
                conn.close()
            except (OSError, ReplyError):
                ok = False
                break
            ok = (len(replicas) == 2 and len(others) == 2
                  and all(r.get("flags") == "slave" and r.get("master-link-status") == "ok"
                          for r in replicas))
        if ok:
            return
        time.sleep(0.2)
    raise RuntimeError("sentinels did not see 2 replicas and 2 other sentinels in %d s" % seconds)


def last_abort(root):
    """The sentinels' last `-failover-abort-*` event, if any (why no failover came)."""
    found = ""
    for name in sorted(os.listdir(root)):
        if name.startswith("sentinel-"):
            with open(os.path.join(root, name, "sentinel.log"), errors="replace") as f:
                for line in f:
                    if "-failover-abort" in line:
                        found = line.split(" # ", 1)[-1].strip()
    return " (sentinel: %s)" % found if found else ""


def percentile(values, p):
    """Nearest rank."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def version_of(binary):
    out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.split()
    for word in out:
        if word.startswith("v="):
            return word[2:]
    return " ".join(out[:3]) or "?"


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", choices=["latch", "redis"], default="latch")
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--latch", default=os.environ.get(
        "LATCH_BIN", os.path.join(REPO, "target/release/latch-server")))
    parser.add_argument("--redis", default=shutil.which("redis-server") or "redis-server",
                        help="redis-server 7.0: the sentinels, and the servers with --server redis")
    parser.add_argument("--run-seconds", type=float, default=1.5,
                        help="how long the writer runs before each kill")
    parser.add_argument("--rejoin-timeout", type=float, default=30.0,
                        help="seconds a restarted primary gets to rejoin with all data")
    parser.add_argument("--switch-timeout", type=float, default=60.0,
                        help="seconds after a kill before the run stops as failed")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directories")
    args = parser.parse_args()
    command_line = "python3 " + shlex.join(sys.argv)

    if args.server == "latch":
        binary = args.latch
        if not os.path.exists(binary):
            subprocess.run(["cargo", "build", "--release", "-p", "latch-server"],
                           cwd=REPO, check=True)
        # Which build: the binary's path and time, and the checkout's commit (dirty when
        # crates/ differs from it, as the binary may then be built from changes).
        git = lambda *a: subprocess.run(["git", "-C", REPO, *a], capture_output=True,
                                        text=True).stdout.strip()
        version = "latch %s built %s UTC; checkout %s%s" % (
            binary, time.strftime("%H:%M", time.gmtime(os.path.getmtime(binary))),
            git("rev-parse", "--short", "HEAD") or "?",
            " with uncommitted changes in crates/" if git("status", "--porcelain", "crates")
            else "")
    else:
        binary = args.redis
        version = "redis-server " + version_of(binary)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    atexit.register(PROCS.stop_all)
    root = tempfile.mkdtemp(prefix="failover-%s-" % args.server)
    failed = True
    writer = None
    try:
        ports = free_ports(6)
        nodes = [Node(binary, port, root) for port in ports[:3]]
        nodes[0].start()
        for node in nodes[1:]:
            node.start(replicaof=nodes[0].port)
        by_port = {node.port: node for node in nodes}
        sentinel_ports = ports[3:]
        for port in sentinel_ports:
            Sentinel(args.redis, port, root, nodes[0].port)
        wait_ready(sentinel_ports, nodes, nodes[0].port)

        print("# %s" % command_line)
        print("# %s, %s, %d cores, sentinels: redis-server %s --sentinel; dirs under %s" % (
            time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), version, os.cpu_count(),
            version_of(args.redis), root), flush=True)

        writer = Writer(sentinel_ports)
        writer.start()
        poll = Conn(sentinel_ports[0], timeout=2)
        switches, rejoins, rejoin_ok, problems = [], [], 0, []
        kills, aborted = 0, None
        last_switch = 0.0
        for round_no in range(1, args.kills + 1):
            acked_start = len(writer.acked)
            time.sleep(args.run_seconds)
            spacing = last_switch + 2 * FAILOVER_TIMEOUT_MS / 1000 + 1 - time.monotonic()
            if spacing > 0:
                time.sleep(spacing)
            old = master_addr(poll)
            victim = by_port.get(old[1]) if old else None
            if victim is None or info(victim.port).get("role") != "master":
                aborted = "round %d: the sentinel names %r, not a primary we started" % (
                    round_no, old)
                break
            acked_run = len(writer.acked) - acked_start
            victim.kill()
            kills += 1
            killed_at = time.monotonic()
            new = old
            while new == old or new is None:
                if time.monotonic() - killed_at > args.switch_timeout:
                    break
                time.sleep(0.01)
                try:
                    new = master_addr(poll)
                except (OSError, ReplyError):
                    poll.close()
                    poll = Conn(sentinel_ports[0], timeout=2)
            if new == old or new is None:
                aborted = ("round %d: killed %d, the sentinel still names %r after %.0f s%s; "
                           "replicas: %s" % (round_no, victim.port, new, args.switch_timeout,
                                             last_abort(root),
                                             "; ".join(link_state(n.port) for n in nodes
                                                       if n is not victim)))
                print(aborted, flush=True)
                break
            last_switch = time.monotonic()
            switch_ms = (last_switch - killed_at) * 1000
            switches.append(switch_ms)
            primary = new[1]

            # The killed node comes back empty, as a primary; Sentinel must demote it.
            # The primary is asked of the sentinel again on every poll: Sentinel may move it.
            victim.start()
            restarted = time.monotonic()
            deadline = restarted + args.rejoin_timeout
            linked_at, ok, notes = None, False, []

            def current():
                nonlocal poll
                try:
                    addr = master_addr(poll)
                except (OSError, ReplyError):
                    poll.close()
                    poll = Conn(sentinel_ports[0], timeout=2)
                    return primary
                return addr[1] if addr else primary

            while time.monotonic() < deadline:
                now_primary = current()
                if replica_of(victim.port, now_primary):
                    linked_at = time.monotonic()
                    break
                time.sleep(0.05)
            if linked_at is None:
                notes.append("not a linked replica of %d after %.0f s: %s" % (
                    current(), args.rejoin_timeout, link_state(victim.port)))
            else:
                numbers = list(writer.acked)
                lost_on_primary = set(missing_keys(now_primary, numbers))
                want = [n for n in numbers if n not in lost_on_primary]
                while True:
                    want = missing_keys(victim.port, want)
                    if not want or time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
                ok = not want
                if want:
                    notes.append("misses %d acknowledged keys the primary holds (e.g. w:%d)"
                                 % (len(want), want[0]))
            # Both replicas online before the next kill (not counted, only noted).
            while time.monotonic() < deadline and online_replicas(current()) < 2:
                time.sleep(0.05)
            final_primary = current()
            if final_primary != primary:
                notes.append("the sentinel has moved the primary again, to %d" % final_primary)
            replicas_online = online_replicas(final_primary)
            if replicas_online < 2:
                notes.append("primary %d has %d online replicas: %s" % (
                    final_primary, replicas_online, "; ".join(
                        link_state(n.port) for n in nodes if n.port != final_primary)))
            # Acknowledged writes the primary no longer holds, so far.
            try:
                lost_now = len(missing_keys(final_primary, list(writer.acked)))
            except (OSError, ReplyError):
                lost_now = -1
            rejoin_ok += ok
            if linked_at is not None:
                rejoins.append(linked_at - restarted)
            note = "; ".join(notes)
            if note:
                problems.append("round %d: %s" % (round_no, note))
            print("round %2d: %d acked in %.1f s, killed %d, switch %5.0f ms -> %d; "
                  "restarted node %s%s; acked writes the primary lacks: %d%s" % (
                      round_no, acked_run, args.run_seconds, victim.port, switch_ms, primary,
                      "replica after %.1f s" % rejoins[-1] if linked_at else "never a replica",
                      ", all data" if ok else ", NOT all data", lost_now,
                      ("  [%s]" % note) if note else ""), flush=True)

        time.sleep(args.run_seconds)
        writer.stop()
        numbers = list(writer.acked)
        addr = master_addr(poll)
        primary = addr[1] if addr else None
        live = [n.port for n in nodes if n.proc.poll() is None]
        missing = {}
        if primary in live:
            # Let the replicas catch up with the primary's offset (bounded), then read back.
            deadline = time.monotonic() + 30
            for port in live:
                while port != primary and time.monotonic() < deadline:
                    try:
                        target = int(info(primary)["master_repl_offset"])
                        if (replica_of(port, primary)
                                and int(info(port).get("slave_repl_offset", -1)) >= target):
                            break
                    except (OSError, ReplyError, ValueError, KeyError):
                        pass
                    time.sleep(0.1)
        for port in live:
            try:
                missing[port] = set(missing_keys(port, numbers))
            except (OSError, ReplyError) as e:
                missing[port] = set(numbers)
                problems.append("reading back from %d: %s" % (port, e))
        if primary in live:
            lost = missing[primary]
        else:
            # No primary: an acknowledged write is lost when no running server holds it.
            lost = set.intersection(*missing.values()) if missing else set(numbers)
            problems.append("no running primary at the end (the sentinel names %r); lost = "
                            "acknowledged keys no running server holds" % (addr,))
        replica_missing = {p: len(m) for p, m in missing.items() if p != primary}

        print()
        print("%-6s %5s %8s | %9s %9s %9s | %7s %7s %10s | %8s | %s" % (
            "server", "kills", "switched", "p50_ms", "p95_ms", "max_ms",
            "sent", "acked", "acked_lost", "rejoined", "acked keys missing on replicas"))
        fmt = lambda f: ("%9.0f" % f(switches)) if switches else "%9s" % "-"
        print("%-6s %5d %8d | %s %s %s | %7d %7d %10d | %5d/%-2d | %s" % (
            args.server, kills, len(switches), fmt(statistics.median),
            fmt(lambda v: percentile(v, 95)), fmt(max), writer.sent, len(numbers), len(lost),
            rejoin_ok, args.kills,
            ", ".join("%d: %d" % kv for kv in replica_missing.items()) or "-"))
        print("(switch: SIGKILL of the primary until `SENTINEL get-master-addr-by-name` names "
              "another address; rejoined: the restarted old primary became a replica of the "
              "new one (p50 %s s, max %s s after its restart) and held every acknowledged key "
              "the primary held, within %.0f s)" % (
                  "%.1f" % statistics.median(rejoins) if rejoins else "-",
                  "%.1f" % max(rejoins) if rejoins else "-", args.rejoin_timeout))
        print("(%s; %s; unacknowledged writes: %d WAIT < 1; errors: %s)" % (
            time.strftime("%Y-%m-%d", time.gmtime()), version, writer.wait_short,
            ", ".join("%s %d" % kv for kv in sorted(writer.errors.items())) or "none"))
        if aborted:
            print("  stopped early: " + aborted)
        for line in problems:
            print("  " + line)
        if lost:
            print("  lost acknowledged writes (first 20): %s" % " ".join(
                "w:%d" % n for n in sorted(lost)[:20]))
        failed = (bool(lost) or rejoin_ok < args.kills or any(replica_missing.values())
                  or aborted is not None)
    finally:
        if writer is not None and writer.is_alive():
            writer.stopping.set()
        PROCS.stop_all()
        if failed or args.keep:
            print("temporary directories kept: %s" % root, flush=True)
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
