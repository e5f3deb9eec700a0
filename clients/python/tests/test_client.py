import os
import signal
import tempfile
import threading
import time
import unittest

import lockagent
from tests.agent import DevAgent

agent = None


def setUpModule():
    global agent
    agent = DevAgent().start()


def tearDownModule():
    agent.stop()


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.client = lockagent.Client(agent.socket)
        self.addCleanup(self.client.close)

    def test_threads_sharing_one_client_keep_mutual_exclusion(self):
        inside, grants, fences, errors = [0], [0], [], []
        guard = threading.Lock()

        def work():
            try:
                for _ in range(5):
                    with self.client.lock("py/threads", wait=30) as lk:
                        with guard:
                            inside[0] += 1
                            if inside[0] != 1:
                                errors.append("%d threads inside" % inside[0])
                            fences.append(lk.fence)
                        time.sleep(0.001)
                        with guard:
                            inside[0] -= 1
                            grants[0] += 1
            except Exception as e:  # reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=work) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(grants[0], 100)
        self.assertEqual(fences, sorted(fences))
        self.assertEqual(len(set(fences)), 100)

    def test_with_releases_on_exceptions(self):
        with self.assertRaises(ZeroDivisionError):
            with self.client.lock("py/with"):
                1 / 0
        self.assertEqual(self.client.holds(), [])
        other = lockagent.Client(agent.socket)
        self.addCleanup(other.close)
        other.lock("py/with", wait=0).unlock()

    def test_typed_errors(self):
        lk = self.client.lock("py/typed")
        other = lockagent.Client(agent.socket)
        self.addCleanup(other.close)
        with self.assertRaises(lockagent.Busy):
            other.lock("py/typed", wait=0)
        with self.assertRaises(lockagent.Busy):
            other.lock("py/typed", wait=0.1)
        with self.assertRaises(lockagent.BadName) as cm:
            self.client.lock("py/{bad}")
        self.assertEqual(cm.exception.code, "BAD_NAME")
        lk.unlock()
        with self.assertRaises(lockagent.NotHeld):
            lk.unlock()

    def test_each_lock_is_an_owner_and_owner_re_enters(self):
        a = self.client.lock("py/reenter")
        with self.assertRaises(lockagent.Busy):  # same thread, another Lock: it competes
            self.client.lock("py/reenter", wait=0)
        result = []
        t = threading.Thread(target=lambda: self._try(result, "py/reenter"))
        t.start()
        t.join()
        self.assertIsInstance(result[0], lockagent.Busy)  # another thread contends
        a.unlock()
        a = self.client.lock("py/reenter", owner="me")
        b = self.client.lock("py/reenter", wait=0, owner="me")  # the same owner: a re-entry
        self.assertEqual((b.count, b.fence), (2, a.fence))
        b.unlock()
        a.unlock()

    def _try(self, result, name):
        try:
            result.append(self.client.lock(name, wait=0))
        except lockagent.LockAgentError as e:
            result.append(e)

    def test_ttl_expiry_sets_lost_and_calls_back(self):
        called = threading.Event()
        lk = self.client.lock("py/ttl", ttl=0.3, on_lost=lambda l: called.set())
        self.assertTrue(lk.lost.wait(3))
        self.assertEqual(lk.lost_reason, "expired")
        self.assertTrue(called.wait(1))
        with self.assertRaises(lockagent.LockLost):
            lk.unlock()

    def test_an_interrupted_wait_leaves_nothing_held(self):
        other = lockagent.Client(agent.socket)
        self.addCleanup(other.close)
        held = other.lock("py/interrupt")

        class Interrupted(Exception):
            pass

        def interrupt(signum, frame):
            raise Interrupted()

        old = signal.signal(signal.SIGALRM, interrupt)
        self.addCleanup(signal.signal, signal.SIGALRM, old)
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with self.assertRaises(Interrupted):  # as a KeyboardInterrupt would, mid-wait
            self.client.lock("py/interrupt", wait=30)
        self.assertEqual(self.client.holds(), [])
        self.assertEqual(self.client.status()["waiters"], 0)
        held.unlock()
        # The name is free: the cancelled wait did not take it behind our back.
        other.lock("py/interrupt", wait=0).unlock()

    def test_status_and_who(self):
        with self.client.lock("py/who") as lk:
            st = self.client.status()
            self.assertEqual((len(st["masters"]), st["quorum"]), (3, 2))
            who = self.client.who("py/who")
            self.assertEqual(len(who), 1)
            self.assertEqual((who[0]["fence"], who[0]["owner"]), (lk.fence, lk.owner))


class OwnerTest(unittest.TestCase):
    def setUp(self):
        self.client = lockagent.Client(agent.socket)
        self.addCleanup(self.client.close)

    def test_a_thread_that_exits_holding_a_lock_does_not_pass_it_on(self):
        held = []
        t = threading.Thread(target=lambda: held.append(self.client.lock("py/exited")))
        t.start()
        t.join()
        # Later threads often get the dead thread's ident; they are other owners all the same.
        idents = set()
        for _ in range(5):
            result = []
            t = threading.Thread(target=lambda: _try(self.client, result, "py/exited"))
            t.start()
            t.join()
            idents.add(t.ident)
            self.assertIsInstance(result[0], lockagent.Busy, "a new thread (ident %d) re-entered it" % t.ident)
        held[0].release()  # from another thread, as a threading.Lock may be


def _try(client, result, name):
    try:
        result.append(client.lock(name, wait=0))
    except lockagent.LockAgentError as e:
        result.append(e)


class LockObjectTest(unittest.TestCase):
    def setUp(self):
        self.client = lockagent.Client(agent.socket)
        self.addCleanup(self.client.close)

    def test_acquire_release_locked_like_threading_lock(self):
        lk = lockagent.Lock(self.client, "py/object")
        self.assertFalse(lk.locked())
        self.assertTrue(lk.acquire())
        self.assertTrue(lk.locked())
        fence = lk.fence
        other = []

        def contend():
            other.append(lk.acquire(blocking=False))
            other.append(lk.acquire(timeout=0.05))
            other.append(lk.acquire(wait=0.05))

        t = threading.Thread(target=contend)
        t.start()
        t.join()
        self.assertEqual(other, [False, False, False])
        lk.release()
        self.assertFalse(lk.locked())
        with self.assertRaises(lockagent.NotHeld):
            lk.release()
        with lk:
            self.assertTrue(lk.locked())
            self.assertGreater(lk.fence, fence)
        self.assertFalse(lk.locked())
        self.assertEqual(self.client.holds(), [])

    def test_one_lock_object_shared_by_threads_keeps_mutual_exclusion(self):
        lk = lockagent.Lock(self.client, "py/shared-object")
        inside, grants, errors = [0], [0], []
        guard = threading.Lock()

        def work():
            try:
                for _ in range(5):
                    with lk:
                        with guard:
                            inside[0] += 1
                            if inside[0] != 1:
                                errors.append("%d threads inside" % inside[0])
                        time.sleep(0.001)
                        with guard:
                            inside[0] -= 1
                            grants[0] += 1
            except Exception as e:  # reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=work) for _ in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(grants[0], 50)
        self.assertEqual(self.client.holds(), [])

    def test_the_same_thread_reenters_one_rlock_object(self):
        lk = lockagent.RLock(self.client, "py/reenter-object")
        with lk:
            with lk:
                self.assertEqual(lk.count, 2)
            self.assertTrue(lk.locked())
        self.assertFalse(lk.locked())
        self.assertEqual(self.client.holds(), [])

    def test_leaving_a_with_block_whose_lock_was_lost_raises(self):
        with self.assertRaises(lockagent.LockLost) as cm:
            with self.client.lock("py/lost", ttl=0.2) as lk:
                self.assertTrue(lk.lost.wait(3))
        self.assertEqual(cm.exception.reason, "expired")
        self.assertIn("expired", str(cm.exception))
        with self.assertRaises(lockagent.LockLost):
            with lockagent.Lock(self.client, "py/lost", ttl=0.2) as lk:
                self.assertTrue(lk.lost.wait(3))
        # Unless asked not to, or another exception is already on its way out.
        with self.client.lock("py/lost", ttl=0.2, raise_on_lost=False) as lk:
            self.assertTrue(lk.lost.wait(3))
        with self.assertRaises(ZeroDivisionError):
            with self.client.lock("py/lost", ttl=0.2) as lk:
                self.assertTrue(lk.lost.wait(3))
                1 / 0
        self.assertEqual(self.client.holds(), [])

    def test_client_lock_is_acquired_once_by_with(self):
        lk = self.client.lock("py/once")
        with lk:
            self.assertEqual(lk.count, 1)
        self.assertFalse(lk.locked())
        self.assertEqual(self.client.holds(), [])


class ConnectTest(unittest.TestCase):
    def test_no_agent_is_a_connect_error_that_says_what_to_do(self):
        path = os.path.join(tempfile.mkdtemp(prefix="lagn"), "none.sock")
        self.addCleanup(os.rmdir, os.path.dirname(path))
        with self.assertRaises(lockagent.ConnectError) as cm:
            lockagent.Client(path)
        self.assertNotIsInstance(cm.exception, lockagent.ConnectionClosed)
        self.assertIsInstance(cm.exception, ConnectionError)
        for want in (path, "lock-agent run -dev", "LOCK_AGENT_SOCKET"):
            self.assertIn(want, str(cm.exception))

    def _env(self, **env):
        old = {k: os.environ.get(k) for k in env}
        self.addCleanup(lambda: [os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
                                 for k, v in old.items()])
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def test_socket_path_search(self):
        if os.path.exists(lockagent.DEFAULT_SOCKET):
            self.skipTest("%s exists on this host" % lockagent.DEFAULT_SOCKET)
        cases = [
            ("LOCK_AGENT_SOCKET comes first", "/x/agent.sock", "/run/user/7", None, "/x/agent.sock"),
            ("then the dev socket under XDG_RUNTIME_DIR", None, "/run/user/7", None,
             "/run/user/7/lock-agent/agent.sock"),
            ("then the dev socket in TMPDIR", None, None, "/somewhere",
             "/somewhere/lock-agent-%d/agent.sock" % os.getuid()),
            ("or in /tmp", None, None, None, "/tmp/lock-agent-%d/agent.sock" % os.getuid()),
        ]
        for what, env, xdg, tmp, want in cases:
            with self.subTest(what):
                self._env(LOCK_AGENT_SOCKET=env, XDG_RUNTIME_DIR=xdg, TMPDIR=tmp)
                self.assertEqual(lockagent.socket_path(), want)

    def test_the_client_finds_the_dev_agent_by_default(self):
        if os.path.exists(lockagent.DEFAULT_SOCKET):
            self.skipTest("%s exists on this host" % lockagent.DEFAULT_SOCKET)
        # The agent was started with XDG_RUNTIME_DIR=D and listens on D/lock-agent/agent.sock.
        self._env(LOCK_AGENT_SOCKET=None, XDG_RUNTIME_DIR=os.path.dirname(os.path.dirname(agent.socket)))
        with lockagent.Client() as client:
            client.ping()


class KilledAgentTest(unittest.TestCase):
    def test_killed_agent_loses_every_lock(self):
        own = DevAgent().start()
        self.addCleanup(own.stop)
        client = lockagent.Client(own.socket)
        locks = [client.lock("py/k%d" % i) for i in range(3)]
        own.kill()
        for lk in locks:
            self.assertTrue(lk.lost.wait(3))
            self.assertEqual(lk.lost_reason, "disconnected")
        with self.assertRaises(lockagent.ConnectionClosed):
            client.lock("py/k9")
        client.close()
