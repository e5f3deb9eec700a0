import signal
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

    def test_owner_is_the_thread(self):
        a = self.client.lock("py/reenter")
        b = self.client.lock("py/reenter", wait=0)  # same thread: a re-entry
        self.assertEqual((b.count, b.fence), (2, a.fence))
        result = []
        t = threading.Thread(target=lambda: self._try(result, "py/reenter"))
        t.start()
        t.join()
        self.assertIsInstance(result[0], lockagent.Busy)  # another thread contends
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
