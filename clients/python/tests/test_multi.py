"""lock_all and MultiLock, sync and asyncio, against the real agent: several
names granted together or not at all, then each name its own Lock."""

import asyncio
import signal
import threading
import unittest

import lockagent
from lockagent import aio
from tests.agent import CountingProxy, DevAgent

agent = None


def setUpModule():
    global agent
    agent = DevAgent().start()


def tearDownModule():
    agent.stop()


def names_of_len(n):
    """Distinct names that take n bytes together, with a space between each."""
    names, i = [], 0
    while n > 0:
        size = min(n, 200)
        if 0 < n - size < 10:
            size -= 10  # leave room for one more distinct name and its space
        prefix = "py/%d/" % i
        names.append(prefix + "n" * (size - len(prefix)))
        n -= size + 1
        i += 1
    return names


class MultiLockTest(unittest.TestCase):
    def setUp(self):
        self.client = lockagent.Client(agent.socket)
        self.addCleanup(self.client.close)
        self.other = lockagent.Client(agent.socket)
        self.addCleanup(self.other.close)

    def assertFree(self, *names, wait=0):
        """Another client gets every one of names (at once, by default)."""
        self.other.lock_all(names, wait=wait).release()

    def test_lock_all_grants_every_name_in_the_order_given(self):
        names = ["py/m/b", "py/m/a", "py/m/c"]
        with self.client.lock_all(names, wait=5) as ml:
            self.assertIsInstance(ml, lockagent.MultiLock)
            self.assertEqual([lk.name for lk in ml], names)
            self.assertEqual(len(ml), 3)
            self.assertTrue(ml.locked())
            self.assertEqual(len({lk.owner for lk in ml}), 1)
            for lk in ml:
                self.assertIsInstance(lk, lockagent.Lock)
                self.assertTrue(lk.locked())
                self.assertEqual((lk.count, lk.slot), (1, 0))
                self.assertGreater(lk.validity, 0)
                [h] = self.client.who(lk.name)
                self.assertEqual((h["fence"], h["owner"]), (lk.fence, lk.owner))
            held = {h["name"]: h["fence"] for h in self.client.holds()}
            self.assertEqual(held, {lk.name: lk.fence for lk in ml})
            with self.assertRaises(lockagent.Busy):
                self.other.lock("py/m/c", wait=0)
        self.assertFalse(ml.locked())
        self.assertEqual(self.client.holds(), [])
        self.assertFree(*names)

    def test_one_name_held_elsewhere_leaves_every_name_free(self):
        held = self.other.lock("py/aon/y")
        ml = lockagent.MultiLock(self.client, ["py/aon/x", "py/aon/y", "py/aon/z"])
        with self.assertRaises(lockagent.Busy):
            self.client.lock_all(["py/aon/x", "py/aon/y", "py/aon/z"], wait=0)
        with self.assertRaises(lockagent.Busy):
            self.client.lock_all(["py/aon/z", "py/aon/y"], wait=0.2)
        self.assertFalse(ml.acquire(blocking=False))
        self.assertFalse(ml.acquire(wait=0.1))
        self.assertFalse(ml.locked())
        self.assertEqual(self.client.holds(), [])
        self.assertEqual(self.other.who("py/aon/x"), [])
        self.assertEqual(self.other.who("py/aon/z"), [])
        # A waiting MultiLock is granted once the held name is released.
        got = []
        t = threading.Thread(target=lambda: got.append(ml.acquire(wait=10)))
        t.start()
        held.release()
        t.join()
        self.assertEqual(got, [True])
        self.assertTrue(ml.locked())
        ml.release()
        self.assertEqual(self.client.holds(), [])

    def test_each_name_is_its_own_lock_once_granted(self):
        with self.client.lock_all(["py/own/a", "py/own/b"]) as ml:
            first, second = ml
            first.release()
            self.assertFalse(first.locked())
            self.assertTrue(second.locked())
            self.assertFalse(ml.locked())
            self.other.lock("py/own/a", wait=0).release()  # free for others
            with self.assertRaises(lockagent.Busy):
                self.other.lock("py/own/b", wait=0)
        # Leaving the block released what was left, with no complaint about the other.
        self.assertEqual(self.client.holds(), [])
        with self.assertRaises(lockagent.NotHeld):
            ml.release()

    def test_a_lost_name_marks_only_its_own_lock(self):
        lost = []
        # 0.6s: the agent refuses a multi-lock ttl under about 0.35s (NO_QUORUM, lost before its ttl was set).
        ml = self.client.lock_all(["py/lost/a", "py/lost/b"], ttl=0.6, on_lost=lost.append)
        for lk in ml:
            self.assertLessEqual(lk.validity, 0.6)
        ml[1].extend(30)
        self.assertTrue(ml[0].lost.wait(3))
        self.assertEqual(ml[0].lost_reason, "expired")
        self.assertEqual(lost, [ml[0]])
        self.assertFalse(ml[1].lost.is_set())
        self.assertTrue(ml[1].locked())
        with self.assertRaises(lockagent.LockLost) as cm:
            with ml:  # preacquired by lock_all: enters without acquiring
                pass
        self.assertEqual((cm.exception.name, cm.exception.reason), ("py/lost/a", "expired"))
        # The name that was not lost was released all the same. The lost one
        # is released in the masters when its validity ends, a moment after
        # its LOST (which comes first, so no one is granted it before the
        # holder heard): free within a second, not at once.
        self.assertEqual(self.client.holds(), [])
        self.assertFree("py/lost/a", "py/lost/b", wait=1)

    def test_ttl_bounds_every_validity(self):
        ml = self.client.lock_all(["py/ttl/a", "py/ttl/b"], ttl=5)
        for lk, h in zip(ml, sorted(self.client.holds(), key=lambda h: h["name"])):
            self.assertTrue(0 < lk.validity <= 5, lk.validity)
            self.assertTrue(0 < h["validity"] <= 5, h)
        ml.release()

    def test_a_semaphore_slot_per_name(self):
        a = self.client.lock_all(["py/ms/1", "py/ms/2"], limit=2, owner="a")
        b = self.other.lock_all(["py/ms/2", "py/ms/1"], limit=2, owner="b")
        self.assertEqual({a[0].slot, b[1].slot}, {1, 2})
        self.assertEqual({a[1].slot, b[0].slot}, {1, 2})
        self.assertEqual(sorted((h["owner"], h["slot"]) for h in self.client.who("py/ms/1")),
                         sorted([("a", a[0].slot), ("b", b[1].slot)]))
        with self.assertRaises(lockagent.Busy):
            self.client.lock_all(["py/ms/1", "py/ms/3"], limit=2, owner="c", wait=0)
        with self.assertRaises(lockagent.Conflict):
            self.client.lock_all(["py/ms/3", "py/ms/1"], limit=3, owner="c", wait=0)
        self.assertEqual(self.client.who("py/ms/3"), [])
        a.release()
        b.release()

    def test_readers_share_every_name(self):
        with self.client.lock_all(["py/mr/a", "py/mr/b"], shared=True):
            with self.other.lock_all(["py/mr/b", "py/mr/a"], shared=True):
                with self.assertRaises(lockagent.Busy):
                    self.other.lock("py/mr/a", wait=0, owner="writer")

    def test_reentry_through_a_multilock_counts_per_name(self):
        single = self.client.lock("py/re/a", owner="me")
        with self.client.lock_all(["py/re/a", "py/re/b"], owner="me") as ml:
            self.assertEqual([lk.count for lk in ml], [2, 1])
            self.assertEqual(ml[0].fence, single.fence)
        self.assertEqual([(h["name"], h["count"]) for h in self.client.holds()], [("py/re/a", 1)])
        single.release()

    def test_a_multilock_with_an_owner_re_enters(self):
        ml = lockagent.MultiLock(self.client, ["py/mre/a", "py/mre/b"], owner="me")
        with ml:
            with ml:
                self.assertEqual([lk.count for lk in ml], [2, 2])
            self.assertTrue(ml.locked())
        self.assertFalse(ml.locked())
        self.assertEqual(self.client.holds(), [])

    def test_an_interrupted_wait_leaves_nothing_held(self):
        held = self.other.lock("py/mint/b")

        class Interrupted(Exception):
            pass

        def interrupt(signum, frame):
            raise Interrupted()

        old = signal.signal(signal.SIGALRM, interrupt)
        self.addCleanup(signal.signal, signal.SIGALRM, old)
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with self.assertRaises(Interrupted):  # as a KeyboardInterrupt would, mid-wait
            self.client.lock_all(["py/mint/a", "py/mint/b"], wait=30)
        self.assertEqual(self.client.holds(), [])
        self.assertEqual(self.client.status()["waiters"], 0)
        held.release()
        self.assertFree("py/mint/a", "py/mint/b")

    def test_the_longest_names_that_fit_are_one_request(self):
        names = names_of_len(lockagent.MAX_NAMES_LEN)
        self.assertEqual(len(" ".join(names)), lockagent.MAX_NAMES_LEN)
        # The longest value of every option: the agent reads the line (it may
        # grant it, or refuse an option) and keeps the connection.
        try:
            ml = self.client.lock_all(names, owner="o" * 64, wait=lockagent._wire.YEAR,
                                      ttl=lockagent._wire.MAX_TTL, limit=4096, fair=True)
        except lockagent.LockAgentError as e:
            self.assertNotIsInstance(e, lockagent.InvalidArgument)
        else:
            ml.release()
        self.client.ping()
        ml = self.client.lock_all(names, wait=10)
        self.assertEqual(len(ml), len(names))
        ml.release()
        self.assertEqual(self.client.holds(), [])


class MultiLockArgumentsTest(unittest.TestCase):
    """Bad names are refused before anything is sent."""

    def setUp(self):
        self.proxy = CountingProxy(agent.socket)
        self.addCleanup(self.proxy.close)
        self.client = lockagent.Client(self.proxy.path)
        self.addCleanup(self.client.close)

    def test_bad_names_never_reach_the_agent(self):
        c = self.client
        cases = [
            ("one string is not a list of names", "names", lambda: c.lock_all("py/a py/b")),
            ("bytes are not a list of names", "names", lambda: c.lock_all(b"py/a")),
            ("no names", "names", lambda: c.lock_all([])),
            ("not a list", "names", lambda: c.lock_all(5)),
            ("a name given twice", "names", lambda: c.lock_all(["py/a", "py/b", "py/a"])),
            ("every name is checked, not only the first", "name", lambda: c.lock_all(["py/a", "py/b ttl=200"])),
            ("a name with a newline cannot smuggle a request", "name", lambda: c.lock_all(["py/a", "x\n9 PING"])),
            ("a name that is not a str", "name", lambda: c.lock_all(["py/a", 7])),
            ("names too long for one request line", "names",
             lambda: c.lock_all(names_of_len(lockagent.MAX_NAMES_LEN + 1))),
            ("the options are checked too", "limit", lambda: c.lock_all(["py/a", "py/b"], shared=True, limit=2)),
            ("a negative wait", "wait", lambda: c.lock_all(["py/a", "py/b"], wait=-1)),
            ("a bad owner", "owner", lambda: c.lock_all(["py/a", "py/b"], owner="a b")),
            ("a MultiLock made directly", "names", lambda: lockagent.MultiLock(c, ["py/a", "py/a"])),
        ]
        for what, argument, call in cases:
            with self.subTest(what):
                mark = self.proxy.mark()
                with self.assertRaises(lockagent.InvalidArgument) as cm:
                    call()
                self.assertEqual(cm.exception.argument, argument)
                self.client.ping()  # answered: every line before it was forwarded
                sent = self.proxy.since(mark)
                self.assertEqual(len(sent), 1, "the agent was sent %r" % sent)
                self.assertTrue(sent[0].endswith(b" PING\n"), sent)

    def test_one_lock_request_for_every_name(self):
        mark = self.proxy.mark()
        self.client.lock_all(["py/w/b", "py/w/a"], wait=1.5, shared=True, fair=True, owner="me").release()
        self.client.ping()
        sent = [line.decode().split(" ", 1)[1] for line in self.proxy.since(mark)]
        self.assertEqual(sent, ["LOCK py/w/b py/w/a owner=me wait=1500 mode=shared fair=true\n",
                                "UNLOCK py/w/b owner=me\n", "UNLOCK py/w/a owner=me\n", "PING\n"])


class AioMultiLockTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.client = await aio.Client.connect(agent.socket)
        self.addAsyncCleanup(self.client.close)
        self.other = await aio.Client.connect(agent.socket)
        self.addAsyncCleanup(self.other.close)

    async def test_async_with_grants_every_name_and_releases_them(self):
        names = ["aio/m/b", "aio/m/a"]
        async with self.client.lock_all(names, wait=5) as ml:
            self.assertIsInstance(ml, aio.MultiLock)
            self.assertEqual([lk.name for lk in ml], names)
            self.assertTrue(ml.locked())
            for lk in ml:
                self.assertIsInstance(lk, aio.Lock)
                [h] = await self.client.who(lk.name)
                self.assertEqual((h["fence"], h["owner"]), (lk.fence, lk.owner))
            with self.assertRaises(lockagent.Busy):
                await self.other.lock_all(["aio/m/c", "aio/m/a"], wait=0)
            self.assertEqual(await self.other.who("aio/m/c"), [])
        self.assertEqual(await self.client.holds(), [])
        await (await self.other.lock_all(names, wait=0)).release()

    async def test_one_name_held_elsewhere_leaves_every_name_free(self):
        held = await self.other.lock("aio/aon/y")
        with self.assertRaises(lockagent.Busy):
            async with self.client.lock_all(["aio/aon/x", "aio/aon/y"], wait=0.1):
                self.fail("granted while a name is held elsewhere")
        ml = self.client.lock_all(["aio/aon/x", "aio/aon/y"])
        self.assertFalse(await ml.acquire(blocking=False))
        self.assertEqual(await self.client.holds(), [])
        self.assertEqual(await self.other.who("aio/aon/x"), [])
        waiter = asyncio.ensure_future(ml.acquire(wait=10))
        await asyncio.sleep(0.05)
        await held.release()
        self.assertTrue(await waiter)
        await ml.release()
        self.assertEqual(await self.client.holds(), [])

    async def test_await_acquires_and_a_lost_name_marks_only_its_lock(self):
        ml = await self.client.lock_all(["aio/lost/a", "aio/lost/b"], ttl=0.6)
        await ml[1].extend(30)
        await asyncio.wait_for(ml[0].lost.wait(), 3)
        self.assertEqual(ml[0].lost_reason, "expired")
        self.assertFalse(ml[1].lost.is_set())
        with self.assertRaises(lockagent.LockLost):
            async with ml:
                pass
        self.assertEqual(await self.client.holds(), [])

    async def test_cancelling_a_waiting_task_leaves_nothing_held(self):
        held = await self.other.lock("aio/mcancel/b")
        waiter = asyncio.ensure_future(self.client.lock_all(["aio/mcancel/a", "aio/mcancel/b"]).acquire())
        await asyncio.sleep(0.05)
        waiter.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await waiter
        self.assertEqual(await self.client.holds(), [])
        self.assertEqual((await self.client.status())["waiters"], 0)
        await held.release()
        await (await self.other.lock_all(["aio/mcancel/a", "aio/mcancel/b"], wait=0)).release()

    async def test_bad_names_are_refused_before_sending(self):
        for bad in ("aio/a aio/b", [], ["aio/a", "aio/a"], ["aio/a", "bad name"]):
            with self.subTest(repr(bad)):
                with self.assertRaises(lockagent.InvalidArgument):
                    self.client.lock_all(bad)


if __name__ == "__main__":
    unittest.main()
