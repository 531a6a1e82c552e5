#!/usr/bin/env python3
"""Lock hand-off under contention: Latch's native lock commands beside the scripted,
polling and pub/sub-woken clients, on latch-server and redis-server 7.0.

    python3 bench/locks.py [--waiters 1,10,100,1000] [--rounds 3] [--seconds 5]
                           [--handoffs 200] [--expiries 5] [--max-seconds 10]
                           [--kinds native,scripts,redis-py,pubsub] [--latch PATH] [--redis PATH]

One lock, contended by N waiters (--waiters, one column each): every run has N+1 clients,
so that while one holds the lock N wait for it. Each client is its own connection (a
blocking LOCK.ACQUIRE occupies its connection; the pub/sub client has a second one for its
subscription). The clients (rows; --kinds picks a subset, `kind` or `kind@server`):
- **native @latch**: `LOCK.ACQUIRE name token ttl WAIT 0`, waiting in the server, first
  come first served; `LOCK.RELEASE name token`.
- **latch-lock scripts @redis, @latch**: the toolkit's scripted protocol (crates/lock,
  scripts.rs), sent as the toolkit sends it, with EVALSHA (the scripts are loaded once
  per server with SCRIPT LOAD, not counted): acquire is `SET KEYS[1] ARGV[1] NX PX
  ARGV[2]` and, when set, `INCR` of the fencing counter `{name}:fence`, answering {1,
  fence} or {0, PTTL}; release is compare-and-delete. While waiting it tries again after
  a random sleep in the upper half of a delay that starts at 50 ms and doubles up to 1 s.
- **redis-py Lock @redis**: as redis-py's Lock behaves by default: `SET name token NX PX
  ttl`, and when that fails sleep 0.1 s and try again; release with the compare-and-delete
  script (EVALSHA).
- **pub/sub woken @latch, @redis**: in Redisson's manner: a waiter SUBSCRIBEs (on its second
  connection) to `lock_channel:{name}`, tries `SET NX PX`, and when that fails asks PTTL
  and waits for a message or for the PTTL to pass, whichever comes first (a PTTL of 0,
  under a millisecond left, is tried again at once), before trying again; the releaser sends the compare-and-delete script and PUBLISH to the channel
  (pipelined, one round trip, as Redisson's single unlock script takes one).
Every acquisition uses a fresh 20-character random token.

Measurements, per client kind and waiter count:
- **Hand-off on release** (p50 and p99, ms): each holder holds the lock ~1 ms
  (asyncio.sleep(0.001)), then releases; the time from just before the releasing client
  sends its release to the moment the next holder's grant reply is received (both
  time.perf_counter() in this process), over all hand-offs of the run. A client that
  released joins the waiters again once the next grant is seen, so N always wait and the
  lock always passes to another client. A run stops after --handoffs hand-offs, or after
  --max-seconds (marked `*`; the polling kinds are slow with 1 waiter and busy with 1000).
- **Hand-off on expiry** (median ms): a holder takes the lock with a TTL of 200 ms and
  never releases (a crash); the time from that holder's grant + 200 ms to the next grant.
  Every grant of the run is such a crash, --expiries of them per round (the first holder,
  which took the lock before the waiters lined up, releases it once they all wait; that
  first hand-off is not counted). The crashed client joins the waiters again after the
  next grant plus a random 0-100 ms, so that its polling phase against the expiry is
  random, as a newcomer's would be. Grant times are reply-received times, so a value can
  be a fraction of a round trip below the truth.
- **Grants per second** and **commands per grant**: every client loops lock -> INCR a
  counter key -> unlock for --seconds; grants/s is checked against the counter's final
  value (`!` marks a mismatch), and every command every client sent (failed polls, PTTLs,
  SUBSCRIBEs, PUBLISHes included) is divided by the grants. Here a client loops back at
  once after its release, so the polling kinds let the releaser take the lock again
  (barging) while the others sleep: that is how they behave, and part of the result.
  Two more rows from the same run show it: hand-overs per second (grants that went to a
  client other than the previous holder) and the largest share of the grants one client
  took (100 / (N+1) % would be an even split).
- **Longest wait** (ms) in the hand-off run: the longest any grant waited (from the
  client's first try, or from the start of the measured run for the waiters that lined up
  before it). For native, a FIFO check: with N waiters every grant must come within N
  hand-over cycles, so the bound is N x the run's mean cycle (grant to next grant, ~1 ms
  hold plus the hand-off) x 1.2 + 5 ms; shown as `longest<=bound ok` (held in every
  round) or `NO`. Under the table, the same check by order rather than time (immune to
  this machine's scheduling noise): the most grants that went to other clients while one
  waited, at most N-1 in FIFO order.

All clients run in this one Python process (asyncio, raw RESP over asyncio streams), pinned
to core 1; the server under test is on core 0 (taskset), `--save "" --appendonly no`, one
server per (server, round), in a temporary directory; every run uses its own lock name.
So client-side work (1000 woken subscribers parsing their messages) is in the numbers, as
it would be on one client host. Medians of --rounds alternating rounds (redis-server, then
latch-server, each round). Only processes this script started are stopped, by their handle.
With the defaults a round takes about 4-5 minutes on 2 cores (the grants-per-second runs,
24 x --seconds, are half of it); --kinds, --waiters and --rounds shorten it.
"""

import argparse
import asyncio
import itertools
import math
import os
import random
import secrets
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from pauses import footer, start  # noqa: E402

NEXT_PORT = [27000 + os.getpid() % 4000]

LONG_TTL_MS = 30000          # hand-off and throughput runs: never runs out
EXPIRY_TTL_MS = 200          # the crashed holder's TTL
HOLD_S = 0.001               # how long a holder holds in the hand-off run
ENTRY_TIMEOUT_S = 60         # for N waiters to line up
CONNECT_BATCH = 100          # connections opened at once (the listen backlog)

# crates/lock/src/scripts.rs, as latch-lock sends them.
ACQUIRE_LUA = r"""
if redis.replicate_commands then redis.replicate_commands() end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    local now = redis.call('TIME')
    local floor = tonumber(now[1]) * 1000000 + tonumber(now[2])
    local fence = redis.call('INCR', KEYS[2])
    if fence < floor then
        redis.call('SET', KEYS[2], string.format('%.0f', floor))
        fence = floor
    end
    return {1, fence}
end
return {0, redis.call('PTTL', KEYS[1])}
"""

RELEASE_LUA = r"""
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
"""


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


def free_port():
    while True:
        port = NEXT_PORT[0]
        NEXT_PORT[0] += 1
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue


# --- a small asyncio RESP client --------------------------------------------------------

class RespError(Exception):
    pass


class Counter:
    """Commands sent by the clients of one run."""

    def __init__(self):
        self.commands = 0


def encode(args):
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        if not isinstance(arg, bytes):
            arg = str(arg).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(out)


class AConn:
    def __init__(self, reader, writer, counter):
        self.reader = reader
        self.writer = writer
        self.counter = counter

    @classmethod
    async def open(cls, port, counter):
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(reader, writer, counter)

    def send(self, *args):
        self.writer.write(encode(args))
        self.counter.commands += 1

    async def reply(self):
        line = await self.reader.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("connection closed")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            return (await self.reader.readexactly(n + 2))[:-2]
        if kind == b"*":
            n = int(rest)
            if n < 0:
                return None
            return [await self.reply() for _ in range(n)]
        if kind == b"-":
            raise RespError(rest.decode(errors="replace"))
        raise RespError("unexpected reply %r" % line)

    async def call(self, *args):
        self.send(*args)
        return await self.reply()

    def close(self):
        self.writer.close()


class Client:
    def __init__(self, index, conn):
        self.index = index
        self.conn = conn
        self.sub = None
        self.listener = None
        self.event = None
        self.token = None
        self.entered = False


def new_token():
    return secrets.token_hex(10)


# --- the client kinds --------------------------------------------------------------------

class Native:
    """LOCK.ACQUIRE ... WAIT 0 / LOCK.RELEASE."""

    native = True
    pubsub = False

    async def setup(self, ctl):
        pass

    async def acquire(self, c, name, ttl, entered):
        c.token = new_token()
        c.conn.send("LOCK.ACQUIRE", name, c.token, ttl, "WAIT", 0)
        entered()
        if await c.conn.reply() is None:
            raise RuntimeError("LOCK.ACQUIRE ... WAIT 0 answered nil")

    async def release(self, c, name):
        if await c.conn.call("LOCK.RELEASE", name, c.token) != 1:
            raise RuntimeError("LOCK.RELEASE: the lock was not held")


class Scripted:
    """Shared by the script-based kinds: the scripts loaded, compare-and-delete release."""

    native = False
    pubsub = False

    async def setup(self, ctl):
        self.acquire_sha = await ctl.call("SCRIPT", "LOAD", ACQUIRE_LUA)
        self.release_sha = await ctl.call("SCRIPT", "LOAD", RELEASE_LUA)

    async def release(self, c, name):
        if await c.conn.call("EVALSHA", self.release_sha, 1, name, c.token) != 1:
            raise RuntimeError("release: the lock was not held")


class Scripts(Scripted):
    """latch-lock's scripted protocol with its jittered, doubling backoff."""

    async def acquire(self, c, name, ttl, entered):
        c.token = new_token()
        delay = 0.05
        while True:
            granted, _ = await c.conn.call(
                "EVALSHA", self.acquire_sha, 2, name, "{%s}:fence" % name, c.token, ttl)
            if granted == 1:
                return
            entered()
            await asyncio.sleep(random.uniform(delay / 2, delay))
            delay = min(delay * 2, 1.0)


class RedisPy(Scripted):
    """redis-py's Lock: SET NX PX, sleep 0.1 s between tries."""

    async def acquire(self, c, name, ttl, entered):
        c.token = new_token()
        while True:
            if await c.conn.call("SET", name, c.token, "NX", "PX", ttl) is not None:
                return
            entered()
            await asyncio.sleep(0.1)


def channel(name):
    return "lock_channel:{%s}" % name


class PubSub(Scripted):
    """Redisson's manner: SET NX PX, else wait for a release message or the PTTL."""

    pubsub = True

    async def prepare(self, c, port, name, counter):
        c.sub = await AConn.open(port, counter)
        reply = await c.sub.call("SUBSCRIBE", channel(name))
        if not reply or reply[0] != b"subscribe":
            raise RuntimeError("SUBSCRIBE answered %r" % (reply,))
        c.event = asyncio.Event()
        c.listener = asyncio.create_task(self.listen(c))

    async def listen(self, c):
        while True:
            message = await c.sub.reply()
            if message and message[0] == b"message":
                c.event.set()

    async def acquire(self, c, name, ttl, entered):
        c.token = new_token()
        while True:
            c.event.clear()
            if await c.conn.call("SET", name, c.token, "NX", "PX", ttl) is not None:
                return
            pttl = await c.conn.call("PTTL", name)
            entered()
            if pttl in (0, -2):
                continue  # gone, or under a millisecond left: try again now
            # A timer sets the event at the PTTL (not asyncio.wait_for, which in Python
            # 3.11 can swallow a cancellation that comes as the event is set).
            timer = (asyncio.get_running_loop().call_later(pttl / 1000, c.event.set)
                     if pttl > 0 else None)
            try:
                await c.event.wait()
            finally:
                if timer:
                    timer.cancel()

    async def release(self, c, name):
        c.conn.send("EVALSHA", self.release_sha, 1, name, c.token)
        c.conn.send("PUBLISH", channel(name), "0")
        released = await c.conn.reply()
        await c.conn.reply()
        if released != 1:
            raise RuntimeError("release: the lock was not held")


KINDS = {"native": Native, "scripts": Scripts, "redis-py": RedisPy, "pubsub": PubSub}
ROWS = [("native", "latch"), ("scripts", "redis"), ("scripts", "latch"),
        ("redis-py", "redis"), ("pubsub", "latch"), ("pubsub", "redis")]
LABELS = {"native": "native LOCK.ACQUIRE WAIT", "scripts": "latch-lock scripts",
          "redis-py": "redis-py Lock (0.1 s poll)", "pubsub": "pub/sub woken"}


def label(row):
    return "%s @%s" % (LABELS[row[0]], row[1])


# --- runs --------------------------------------------------------------------------------

async def open_clients(kind, port, count, name, counter):
    clients = []
    for first in range(0, count, CONNECT_BATCH):
        size = min(CONNECT_BATCH, count - first)
        conns = await asyncio.gather(*(AConn.open(port, counter) for _ in range(size)))
        batch = [Client(first + i, conn) for i, conn in enumerate(conns)]
        if kind.pubsub:
            await asyncio.gather(*(kind.prepare(c, port, name, counter) for c in batch))
        clients += batch
    return clients


async def close_clients(clients):
    listeners = [c.listener for c in clients if c.listener]
    for task in listeners:
        task.cancel()
    await asyncio.gather(*listeners, return_exceptions=True)
    for c in clients:
        c.conn.close()
        if c.sub:
            c.sub.close()
    # Let the transports close and the server see the disconnects before the next run.
    await asyncio.sleep(0.2)


async def stop_tasks(tasks):
    """Cancels the tasks; raises the first real error any of them ended with."""
    for task in tasks:
        task.cancel()
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(
                outcome, asyncio.CancelledError):
            raise outcome


async def wait_queued(ctl, name, n):
    """Until LOCK.INFO shows n waiters in the server's line."""
    deadline = time.perf_counter() + ENTRY_TIMEOUT_S
    while True:
        info = await ctl.call("LOCK.INFO", name)
        fields = dict(zip(info[::2], info[1::2]))
        if len(fields[b"waiters"]) >= n:
            return
        if time.perf_counter() > deadline:
            raise RuntimeError("only %d of %d waiters lined up" % (len(fields[b"waiters"]), n))
        await asyncio.sleep(0.005)


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


async def contend(kind, port, ctl, n, name, expire, args):
    """The hand-off run (expire=False) or the expiry run (expire=True)."""
    target = args.expiries if expire else args.handoffs
    ttl = EXPIRY_TTL_MS if expire else LONG_TTL_MS
    clients = await open_clients(kind, port, n + 1, name, Counter())
    st = types.SimpleNamespace(
        t0=None, last_release=None, prev_grant=None, last_grant=None, grants=0,
        samples=[], waits=[], ahead=[], entered=0, all_entered=asyncio.Event(),
        grant_event=asyncio.Event(), done=asyncio.Event())
    tasks = []

    def entered(c):
        if not c.entered:
            c.entered = True
            st.entered += 1
            if st.entered == n:
                st.all_entered.set()

    def granted(t_enter, grants_at_entry):
        now = time.perf_counter()
        if expire:
            if st.prev_grant is not None:
                st.samples.append(now - st.prev_grant - ttl / 1000)
        else:
            if st.last_release is not None:
                st.samples.append(now - st.last_release)
                st.last_release = None
            st.waits.append(now - max(t_enter, st.t0))
            st.ahead.append(st.grants - grants_at_entry)
        st.prev_grant = st.last_grant = now
        st.grants += 1
        event, st.grant_event = st.grant_event, asyncio.Event()
        event.set()
        if len(st.samples) >= target:
            st.done.set()

    async def pass_on(c):
        """Hold ~1 ms and release (or, crashed, do nothing); rejoin after the next grant."""
        next_grant = st.grant_event
        if not expire:
            await asyncio.sleep(HOLD_S)
            st.last_release = time.perf_counter()
            await kind.release(c, name)
        await next_grant.wait()
        if expire:
            await asyncio.sleep(random.uniform(0, ttl / 2000))

    async def waiter(c):
        while True:
            t_enter, grants_at_entry = time.perf_counter(), st.grants
            await kind.acquire(c, name, ttl, lambda: entered(c))
            granted(t_enter, grants_at_entry)
            await pass_on(c)

    async def first_holder(c):
        if expire:
            # The waiters lined up behind a long TTL: hand the lock on, unmeasured.
            next_grant = st.grant_event
            await kind.release(c, name)
            await next_grant.wait()
        else:
            await pass_on(c)
        await waiter(c)

    holder = clients[0]
    try:
        await kind.acquire(holder, name, LONG_TTL_MS, lambda: None)
        tasks = [asyncio.create_task(waiter(c)) for c in clients[1:]]
        await asyncio.wait_for(st.all_entered.wait(), ENTRY_TIMEOUT_S)
        if kind.native:
            await wait_queued(ctl, name, n)
        st.t0 = time.perf_counter()
        tasks.append(asyncio.create_task(first_holder(holder)))
        done_wait = asyncio.create_task(st.done.wait())
        finished, _ = await asyncio.wait(tasks + [done_wait], timeout=args.max_seconds,
                                         return_when=asyncio.FIRST_COMPLETED)
        done_wait.cancel()
        limited = not st.done.is_set()
        for task in finished:
            if task is not done_wait:
                task.result()  # a client loop only ends by an error: raise it
    finally:
        try:
            await stop_tasks(tasks)
        finally:
            await close_clients(clients)
    result = {"count": len(st.samples), "limited": limited}
    if st.samples:
        ms = [s * 1000 for s in st.samples]
        if expire:
            result["median"] = statistics.median(ms)
        else:
            result["p50"] = percentile(ms, 0.50)
            result["p99"] = percentile(ms, 0.99)
    if not expire and st.grants:
        cycle = (st.last_grant - st.t0) / st.grants
        result["longest"] = max(st.waits) * 1000
        result["bound"] = (n * cycle * 1.2 + 0.005) * 1000
        result["ahead"] = max(st.ahead)
    return result


async def throughput(kind, port, ctl, n, name, seconds):
    """Every client loops lock -> INCR -> unlock for `seconds`."""
    counter = Counter()
    clients = await open_clients(kind, port, n + 1, name, counter)
    key = "%s:count" % name
    st = types.SimpleNamespace(stop=False, grants=0, passes=0, last=None, per_client={})
    holding = set()

    async def loop(c):
        while not st.stop:
            await kind.acquire(c, name, LONG_TTL_MS, lambda: None)
            holding.add(c.index)
            if st.last is not None and st.last != c.index:
                st.passes += 1
            st.last = c.index
            st.per_client[c.index] = st.per_client.get(c.index, 0) + 1
            await c.conn.call("INCR", key)
            await kind.release(c, name)
            st.grants += 1
            holding.discard(c.index)

    tasks = {}
    try:
        started = time.perf_counter()
        tasks = {c.index: asyncio.create_task(loop(c)) for c in clients}
        finished, _ = await asyncio.wait(list(tasks.values()), timeout=seconds,
                                         return_when=asyncio.FIRST_COMPLETED)
        for task in finished:
            task.result()  # a loop only ends early by an error: raise it
        st.stop = True
        # The waiting clients stop now; a holder finishes its INCR and release.
        holders = [t for i, t in tasks.items() if i in holding]
        waiting = [t for i, t in tasks.items() if i not in holding]
        for task in waiting:
            task.cancel()
        if holders:
            await asyncio.wait_for(asyncio.gather(*holders), 10)
        elapsed = time.perf_counter() - started
        await asyncio.wait_for(stop_tasks(waiting), 10)
    finally:
        try:
            await stop_tasks(list(tasks.values()))
        finally:
            await close_clients(clients)
    final = int(await ctl.call("GET", key) or 0)
    top = max(st.per_client.values(), default=0)
    return {"rate": st.grants / elapsed, "grants": st.grants, "counter": final,
            "passes": st.passes / elapsed,
            "top_share": 100.0 * top / st.grants if st.grants else float("nan"),
            "per_grant": counter.commands / st.grants if st.grants else float("nan")}


async def run_server(server, port, rows, args, results, round_no):
    ids = itertools.count()
    ctl = await AConn.open(port, Counter())
    try:
        for row in rows:
            kind = KINDS[row[0]]()
            await kind.setup(ctl)
            for n in args.waiters:
                cell = results[row][n]
                where = "round %d %s n=%d" % (round_no + 1, label(row), n)
                for measure in args.measures:
                    name = "bench-lock:%s:%d" % (row[0], next(ids))
                    began = time.perf_counter()
                    try:
                        if measure == "throughput":
                            out = await throughput(kind, port, ctl, n, name, args.seconds)
                        else:
                            out = await contend(kind, port, ctl, n, name,
                                                measure == "expiry", args)
                    except Exception as error:  # noqa: BLE001 - report and go on
                        log("%s %s: FAILED: %r" % (where, measure, error))
                        cell.setdefault("errors", []).append("%s: %r" % (measure, error))
                        continue
                    cell.setdefault(measure, []).append(out)
                    log("%s %s (%.1f s): %s" % (where, measure, time.perf_counter() - began,
                                                 ", ".join("%s=%s" % (k, fmt_value(v))
                                                           for k, v in out.items())))
    finally:
        ctl.close()


def fmt_value(value):
    return "%.3f" % value if isinstance(value, float) else str(value)


# --- the tables --------------------------------------------------------------------------

def medians(runs, key):
    values = [r[key] for r in runs if key in r]
    return statistics.median(values) if values else None


def table(title, rows, waiters, cell, width=14):
    print()
    print(title)
    print("%-36s" % "client @server" + "".join(
        ("%" + str(width) + "s") % ("%d waiter%s" % (n, "" if n == 1 else "s"))
        for n in waiters))
    for row in rows:
        print("%-36s" % label(row) + "".join(
            ("%" + str(width) + "s") % cell(row, n) for n in waiters))


def report(rows, args, results):
    def handoff_cell(key):
        def cell(row, n):
            runs = results[row][n].get("handoff", [])
            value = medians(runs, key)
            if value is None:
                return "-"
            mark = "*" if any(r["limited"] for r in runs) else ""
            return "%.3f%s" % (value, mark)
        return cell

    def expiry_cell(row, n):
        runs = results[row][n].get("expiry", [])
        value = medians(runs, "median")
        if value is None:
            return "-"
        return "%.1f%s" % (value, "*" if any(r["limited"] for r in runs) else "")

    def rate_cell(row, n):
        runs = results[row][n].get("throughput", [])
        value = medians(runs, "rate")
        if value is None:
            return "-"
        return "%.0f%s" % (value, "!" if any(r["grants"] != r["counter"] for r in runs) else "")

    def passes_cell(row, n):
        value = medians(results[row][n].get("throughput", []), "passes")
        return "-" if value is None else "%.0f" % value

    def share_cell(row, n):
        value = medians(results[row][n].get("throughput", []), "top_share")
        return "-" if value is None else "%.1f" % value

    def per_grant_cell(row, n):
        value = medians(results[row][n].get("throughput", []), "per_grant")
        return "-" if value is None else "%.2f" % value

    def wait_cell(row, n):
        runs = [r for r in results[row][n].get("handoff", []) if "longest" in r]
        if not runs:
            return "-"
        longest = statistics.median(r["longest"] for r in runs)
        mark = "*" if any(r["limited"] for r in runs) else ""
        if row[0] != "native":
            return "%.1f%s" % (longest, mark)
        held = sum(r["longest"] <= r["bound"] for r in runs)
        verdict = "ok" if held == len(runs) else "NO %d/%d" % (held, len(runs))
        bound = statistics.median(r["bound"] for r in runs)
        return "%.1f<=%.1f %s%s" % (longest, bound, verdict, mark)

    table("Hand-off on release, p50 ms (release sent -> next grant received)",
          rows, args.waiters, handoff_cell("p50"))
    table("Hand-off on release, p99 ms", rows, args.waiters, handoff_cell("p99"))
    table("Hand-off on expiry, median ms (crashed holder's grant + %d ms -> next grant)"
          % EXPIRY_TTL_MS, rows, args.waiters, expiry_cell)
    table("Grants per second (lock -> INCR -> unlock, %g s)" % args.seconds,
          rows, args.waiters, rate_cell)
    table("Hand-overs per second in that run (grants to a client other than the last holder)",
          rows, args.waiters, passes_cell)
    table("Largest share of that run's grants one client took, %", rows, args.waiters,
          share_cell)
    table("Commands sent per grant", rows, args.waiters, per_grant_cell)
    table("Longest wait for a grant in the hand-off run, ms (native: <= FIFO bound?)",
          rows, args.waiters, wait_cell, width=24)
    native = [row for row in rows if row[0] == "native"]
    for row in native:
        order = []
        for n in args.waiters:
            runs = [r for r in results[row][n].get("handoff", []) if "ahead" in r]
            if runs:
                most = max(r["ahead"] for r in runs)
                order.append("%d waiter%s: %d%s" % (n, "" if n == 1 else "s", most,
                                                    " ok" if most <= n - 1 else " NO"))
        if order:
            print("FIFO order, %s: most grants to others while one waited (<= N-1): %s"
                  % (label(row), ", ".join(order)))
    notes = []
    for row in rows:
        for n in args.waiters:
            cell = results[row][n]
            for measure in ("handoff", "expiry"):
                runs = cell.get(measure, [])
                if any(r["limited"] for r in runs):
                    notes.append("  * %s, %d waiters, %s: stopped after --max-seconds %g "
                                 "with %s measured (wanted %d)" % (
                                     label(row), n, measure, args.max_seconds,
                                     "/".join(str(r["count"]) for r in runs),
                                     args.handoffs if measure == "handoff" else args.expiries))
            for r in cell.get("throughput", []):
                if r["grants"] != r["counter"]:
                    notes.append("  ! %s, %d waiters: %d grants counted, counter says %d" % (
                        label(row), n, r["grants"], r["counter"]))
            for error in cell.get("errors", []):
                notes.append("  error: %s, %d waiters, %s" % (label(row), n, error))
    if notes:
        print()
        print("\n".join(notes))


def parse_kinds(text):
    rows = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        kind, _, server = item.partition("@")
        matches = [r for r in ROWS if r[0] == kind and (not server or r[1] == server)]
        if not matches:
            raise argparse.ArgumentTypeError(
                "unknown kind %r (kinds: %s; or kind@server, e.g. scripts@latch)"
                % (item, ", ".join(KINDS)))
        rows += [r for r in matches if r not in rows]
    return [r for r in ROWS if r in rows]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--waiters", default="1,10,100,1000",
                        type=lambda s: [int(x) for x in s.split(",") if x.strip()],
                        help="waiter counts, one column each (default 1,10,100,1000)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5,
                        help="length of each grants-per-second run (default 5)")
    parser.add_argument("--handoffs", type=int, default=200,
                        help="hand-offs measured per hand-off run (default 200)")
    parser.add_argument("--expiries", type=int, default=5,
                        help="expiry hand-offs measured per round (default 5)")
    parser.add_argument("--max-seconds", type=float, default=10,
                        help="a hand-off or expiry run stops after this long (default 10)")
    parser.add_argument("--kinds", type=parse_kinds, default=list(ROWS),
                        help="comma-separated subset: native, scripts, redis-py, pubsub, or "
                             "kind@server (default: all)")
    parser.add_argument("--measures", default=["handoff", "expiry", "throughput"],
                        type=lambda s: [m for m in s.split(",") if m.strip()],
                        help="comma-separated subset of handoff, expiry, throughput "
                             "(default: all)")
    parser.add_argument("--latch", default=os.path.join(REPO, "target/release/latch-server"))
    parser.add_argument("--redis", default=shutil.which("redis-server") or "redis-server")
    args = parser.parse_args()
    # SIGTERM unwinds like Ctrl-C, so the servers this script started are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if min(args.waiters) < 1 or args.expiries < 1 or args.handoffs < 1:
        parser.error("--waiters, --handoffs and --expiries must be at least 1")
    if not set(args.measures) <= {"handoff", "expiry", "throughput"} or not args.measures:
        parser.error("--measures takes handoff, expiry and throughput")
    os.sched_setaffinity(0, {1})
    rows = args.kinds
    binaries = {"redis": args.redis, "latch": args.latch}
    servers = [s for s in ("redis", "latch") if any(r[1] == s for r in rows)]
    results = {row: {n: {} for n in args.waiters} for row in rows}
    for round_no in range(args.rounds):
        for server in servers:
            port = free_port()
            workdir = tempfile.mkdtemp(prefix="latch-locks-")
            proc = None
            try:
                proc = start(binaries[server], port, workdir, cpu="0")
                log("round %d: %s on port %d (pid %d)" % (round_no + 1, server, port, proc.pid))
                asyncio.run(run_server(server, port, [r for r in rows if r[1] == server],
                                       args, results, round_no))
            finally:
                if proc is not None:
                    proc.kill()
                    proc.wait()
                shutil.rmtree(workdir, ignore_errors=True)
    report(rows, args, results)
    print(footer(args.redis, args.rounds))


if __name__ == "__main__":
    main()
