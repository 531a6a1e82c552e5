"""redis-py's Lock against a real latch-server.

Run through scripts/redis-py-tests.sh, which builds the server and installs redis-py into a
virtualenv. The server binary comes from $LATCH_SERVER_BIN.
"""

import os
import socket
import subprocess
import tempfile
import time
import unittest

import redis
from redis.exceptions import LockError, LockNotOwnedError


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LatchServer:
    def __init__(self):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="latch-redis-py-")
        binary = os.environ["LATCH_SERVER_BIN"]
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--dir", self.dir],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port)
        deadline = time.time() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.time() > deadline or self.process.poll() is not None:
                    raise RuntimeError("latch-server did not start")
                time.sleep(0.05)

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)


class RedisPyLock(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LatchServer()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def setUp(self):
        self.r = redis.Redis(port=self.server.port)
        self.r.flushall()

    def test_acquire_non_blocking_and_release(self):
        first = self.r.lock("res", timeout=10)
        second = self.r.lock("res", timeout=10)
        self.assertTrue(first.acquire(blocking=False))
        self.assertTrue(first.owned())
        self.assertTrue(first.locked())
        self.assertFalse(second.acquire(blocking=False))
        first.release()
        self.assertFalse(first.locked())
        self.assertTrue(second.acquire(blocking=False))
        second.release()

    def test_acquire_blocking_waits_for_expiry(self):
        holder = self.r.lock("res", timeout=0.3)
        self.assertTrue(holder.acquire(blocking=False))
        waiter = self.r.lock("res", timeout=10, sleep=0.02)
        started = time.monotonic()
        self.assertTrue(waiter.acquire(blocking=True, blocking_timeout=5))
        self.assertGreaterEqual(time.monotonic() - started, 0.2)
        waiter.release()

    def test_acquire_blocking_times_out(self):
        holder = self.r.lock("res", timeout=10)
        self.assertTrue(holder.acquire())
        waiter = self.r.lock("res", timeout=10, sleep=0.02)
        self.assertFalse(waiter.acquire(blocking=True, blocking_timeout=0.2))
        holder.release()

    def test_release_of_a_stolen_lock_raises(self):
        lock = self.r.lock("res", timeout=10)
        self.assertTrue(lock.acquire(blocking=False))
        # Someone else takes over the key (e.g. after an expiry).
        self.r.set("res", "someone-else")
        with self.assertRaises(LockNotOwnedError):
            lock.release()
        self.assertEqual(self.r.get("res"), b"someone-else")
        self.assertFalse(lock.owned())

    def test_extend_adds_or_replaces_ttl(self):
        lock = self.r.lock("res", timeout=10)
        self.assertTrue(lock.acquire(blocking=False))
        self.assertTrue(lock.extend(10))
        self.assertGreater(self.r.pttl("res"), 15000)
        self.assertTrue(lock.extend(5, replace_ttl=True))
        self.assertLessEqual(self.r.pttl("res"), 5000)
        self.assertGreater(self.r.pttl("res"), 4000)
        lock.release()
        with self.assertRaises(LockError):
            lock.extend(10)

    def test_extend_of_a_stolen_lock_raises(self):
        lock = self.r.lock("res", timeout=10)
        self.assertTrue(lock.acquire(blocking=False))
        self.r.set("res", "someone-else")
        with self.assertRaises(LockNotOwnedError):
            lock.extend(10)

    def test_reacquire_resets_ttl(self):
        lock = self.r.lock("res", timeout=10)
        self.assertTrue(lock.acquire(blocking=False))
        self.r.pexpire("res", 1000)
        self.assertTrue(lock.reacquire())
        self.assertGreater(self.r.pttl("res"), 9000)
        self.r.set("res", "someone-else")
        with self.assertRaises(LockNotOwnedError):
            lock.reacquire()

    def test_scripts_reload_after_script_flush(self):
        lock = self.r.lock("res", timeout=10)
        self.assertTrue(lock.acquire(blocking=False))
        self.r.script_flush()
        # redis-py runs its cached EVALSHA, gets NOSCRIPT, and falls back to loading the script.
        self.assertTrue(lock.extend(1))
        lock.release()
        self.assertIsNone(self.r.get("res"))

    def test_context_manager(self):
        with self.r.lock("res", timeout=10) as lock:
            self.assertTrue(lock.owned())
            self.assertEqual(self.r.get("res"), lock.local.token)
        self.assertIsNone(self.r.get("res"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
