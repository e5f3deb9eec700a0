"""Each Lock object is an owner, as a threading.Lock or a redis-py Lock is:
two Lock objects of one name compete, in one thread or many; re-entry only
when asked (lockagent.RLock, or an explicit owner=). The client's books
follow the agent's whatever interrupts a call, and a hold that is gone is
one error (LockLost, a NotHeld) whichever call finds it."""

import asyncio
import signal
import threading
import time
import unittest

import lockagent
from lockagent import aio
from tests.agent import DevAgent, GateProxy

agent = None


def setUpModule():
    global agent
    agent = DevAgent().start()


def tearDownModule():
    agent.stop()


def eventually(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)  # a poll: the reader thread applies the reply
    return True


class Interrupted(Exception):
    pass


class OwnerTest(unittest.TestCase):
    def setUp(self):
        self.client = lockagent.Client(agent.socket)
        self.addCleanup(self.client.close)

    def test_two_lock_objects_in_one_thread_compete(self):
        a = lockagent.Lock(self.client, "own/two")
        b = lockagent.Lock(self.client, "own/two")
        self.assertTrue(a.acquire())
        self.assertFalse(b.acquire(blocking=False))
        self.assertFalse(b.locked())
        self.assertEqual([h["count"] for h in self.client.holds()], [1])
        a.release()
        self.assertFalse(a.locked())
        self.assertTrue(b.acquire(blocking=False))
        b.release()
        self.assertEqual(self.client.holds(), [])
        with self.assertRaises(lockagent.NotHeld) as cm:
            a.release()
        self.assertNotIsInstance(cm.exception, lockagent.LockLost)

    def test_client_lock_twice_in_one_thread_competes(self):
        a = self.client.lock("own/twice")
        with self.assertRaises(lockagent.Busy):
            self.client.lock("own/twice", wait=0)
        a.release()

    def test_one_lock_object_acquired_again_is_not_a_re_entry(self):
        lk = lockagent.Lock(self.client, "own/again")
        self.assertTrue(lk.acquire())
        self.assertFalse(lk.acquire(blocking=False))  # as threading.Lock
        self.assertFalse(lk.acquire(timeout=0.05))
        lk.release()
        self.assertFalse(lk.locked())
        self.assertEqual(self.client.holds(), [])

    def test_a_lock_acquired_in_one_thread_is_released_in_another(self):
        lk = lockagent.Lock(self.client, "own/handoff")
        self.assertTrue(lk.acquire())
        t = threading.Thread(target=lk.release)
        t.start()
        t.join()
        self.assertFalse(lk.locked())
        self.assertEqual(self.client.holds(), [])

    def test_rlock_re_enters_in_its_thread_only(self):
        r = lockagent.RLock(self.client, "own/r")
        with r:
            with r:
                self.assertEqual(r.count, 2)
                result = []
                t = threading.Thread(target=lambda: result.append(r.acquire(blocking=False)))
                t.start()
                t.join()
                self.assertEqual(result, [False])
                # Another RLock of the name is another owner.
                self.assertFalse(lockagent.RLock(self.client, "own/r").acquire(blocking=False))
            self.assertTrue(r.locked())
            self.assertEqual(r.count, 1)
        self.assertFalse(r.locked())
        self.assertEqual(self.client.holds(), [])

    def test_an_explicit_owner_re_enters(self):
        a = self.client.lock("own/explicit", owner="job-7")
        b = self.client.lock("own/explicit", owner="job-7", wait=0)
        self.assertEqual((b.count, b.fence), (2, a.fence))
        b.release()
        a.release()
        self.assertEqual(self.client.holds(), [])

    def test_two_lock_objects_passing_one_owner_keep_their_own_books(self):
        a = lockagent.Lock(self.client, "own/shared-owner", owner="job-8")
        b = lockagent.Lock(self.client, "own/shared-owner", owner="job-8")
        self.assertTrue(a.acquire())
        self.assertTrue(b.acquire(blocking=False))  # the same owner: a re-entry at the agent
        self.assertEqual(b.count, 2)
        b.release()
        self.assertFalse(b.locked(), "b released its one acquisition")
        self.assertTrue(a.locked())
        with self.assertRaises(lockagent.NotHeld) as cm:
            b.release()
        self.assertNotIsInstance(cm.exception, lockagent.LockLost)
        self.assertEqual([h["count"] for h in self.client.holds()], [1])
        a.release()
        self.assertFalse(a.locked())
        self.assertEqual(self.client.holds(), [])

    def test_an_interrupted_release_leaves_the_books_true(self):
        proxy = GateProxy(agent.socket)
        self.addCleanup(proxy.close)
        client = lockagent.Client(proxy.path)
        self.addCleanup(client.close)
        lk = client.lock("own/irelease")
        mark = proxy.mark()

        def interrupt(signum, frame):
            raise Interrupted()

        old = signal.signal(signal.SIGALRM, interrupt)
        self.addCleanup(signal.signal, signal.SIGALRM, old)
        proxy.close_gate()
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        try:
            with self.assertRaises(Interrupted):  # as a KeyboardInterrupt would, the UNLOCK sent
                lk.release()
        finally:
            proxy.open_gate()
        self.assertTrue(any(b" UNLOCK own/irelease " in line for line in proxy.since(mark)))
        self.assertTrue(eventually(lambda: not lk.locked()), "locked() after the agent released it")
        self.assertEqual(client.holds(), [])
        with self.assertRaises(lockagent.NotHeld) as cm:
            lk.release()
        self.assertNotIsInstance(cm.exception, lockagent.LockLost)

    def test_a_hold_another_client_took_is_lock_lost_for_every_call(self):
        other = lockagent.Client(agent.socket)
        self.addCleanup(other.close)
        for call in ("extend", "proclaim", "release"):
            with self.subTest(call):
                lk = self.client.lock("own/taken-" + call, ttl=0.2)
                taken = other.lock("own/taken-" + call, wait=5)
                self.addCleanup(taken.release)
                self.assertTrue(lk.lost.wait(3))
                with self.assertRaises(lockagent.LockLost) as cm:
                    if call == "extend":
                        lk.extend(5)
                    elif call == "proclaim":
                        lk.proclaim("x")
                    else:
                        lk.release()
                self.assertIsInstance(cm.exception, lockagent.NotHeld)
                self.assertEqual(cm.exception.reason, "expired")
                if call != "release":
                    with self.assertRaises(lockagent.LockLost):
                        lk.release()
                with self.assertRaises(lockagent.NotHeld) as cm:  # acknowledged: gone from the books
                    lk.release()
                self.assertNotIsInstance(cm.exception, lockagent.LockLost)


class AioOwnerTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.client = await aio.Client.connect(agent.socket)

    async def asyncTearDown(self):
        await self.client.close()

    async def test_two_lock_objects_in_one_task_compete(self):
        a = aio.Lock(self.client, "aown/two")
        b = aio.Lock(self.client, "aown/two")
        self.assertTrue(await a.acquire())
        self.assertFalse(await b.acquire(blocking=False))
        await a.release()
        self.assertFalse(a.locked())
        self.assertTrue(await b.acquire(blocking=False))
        await b.release()
        self.assertEqual(await self.client.holds(), [])

    async def test_rlock_re_enters_in_its_task(self):
        r = aio.RLock(self.client, "aown/r")
        async with r:
            async with r:
                self.assertEqual(r.count, 2)
                self.assertFalse(await asyncio.get_running_loop().create_task(r.acquire(blocking=False)))
        self.assertFalse(r.locked())
        self.assertEqual(await self.client.holds(), [])

    async def test_a_release_cancelled_after_its_unlock_was_sent_leaves_the_books_true(self):
        proxy = GateProxy(agent.socket)
        self.addCleanup(proxy.close)
        client = await aio.Client.connect(proxy.path)
        self.addAsyncCleanup(client.close)
        lk = await client.lock("aown/crelease")
        mark = proxy.mark()
        proxy.close_gate()
        try:
            task = asyncio.get_running_loop().create_task(lk.release())
            while not any(b" UNLOCK aown/crelease " in line for line in proxy.since(mark)):
                await asyncio.sleep(0.005)  # a poll: the proxy is all there is to watch
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
        finally:
            proxy.open_gate()
        self.assertEqual(await client.holds(), [])
        deadline = time.monotonic() + 5
        while lk.locked() and time.monotonic() < deadline:
            await asyncio.sleep(0.005)  # a poll: the reader applies the UNLOCK's reply
        self.assertFalse(lk.locked())
        with self.assertRaises(lockagent.NotHeld) as cm:
            await lk.release()
        self.assertNotIsInstance(cm.exception, lockagent.LockLost)

    async def test_extend_of_a_hold_another_client_took_is_lock_lost(self):
        other = await aio.Client.connect(agent.socket)
        self.addAsyncCleanup(other.close)
        lk = await self.client.lock("aown/taken", ttl=0.2)
        taken = await other.lock("aown/taken", wait=5)
        await asyncio.wait_for(lk.lost.wait(), 3)
        with self.assertRaises(lockagent.LockLost):
            await lk.extend(5)
        await taken.release()


if __name__ == "__main__":
    unittest.main()
