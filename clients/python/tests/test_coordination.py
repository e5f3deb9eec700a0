"""Every coordination call against the real agent (run -dev), sync and aio;
test_coordination_wire.py has the exact lines."""

import asyncio
import threading
import time
import unittest

import lockagent
from lockagent import aio
from tests.agent import DevAgent

agent = None


def setUpModule():
    global agent
    agent = DevAgent().start()


def tearDownModule():
    agent.stop()


VALUES = ["plain", "host-1:8080", '{"addr": "10.0.0.1", "tags": ["a b"]}', "50% off\n", "héllo ✓ 日本語 🦀",
          "\x00\x7f", "* LEADER x none", "\udcff not UTF-8"]


def eventually(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)  # a poll: WHO is all there is to watch
    return True


class CoordinationTest(unittest.TestCase):
    def client(self):
        c = lockagent.Client(agent.socket)
        self.addCleanup(c.close)
        return c

    def test_values_of_any_text_round_trip(self):
        holder, reader = self.client(), self.client()
        with holder.lock("py/value", value=VALUES[0]) as lk, reader.observe("py/value") as leaders:
            for i, v in enumerate(VALUES):
                if i:
                    lk.proclaim(v)
                # SET answers once a majority has the value; WHO, which reads
                # any majority, may show the old one until the rest have it.
                self.assertTrue(eventually(lambda: [h["value"] for h in reader.who("py/value")] == [v]),
                                reader.who("py/value"))
                got = next(leaders)
                while got.value != v and got.fence == lk.fence:  # an earlier value's push may come late
                    got = next(leaders)
                self.assertEqual((got.fence, got.value), (lk.fence, v))

    def test_campaign_observe_and_resign(self):
        first, second, observer = self.client(), self.client(), self.client()
        with observer.observe("py/election") as leaders:
            self.assertTrue(next(leaders).none)
            lk1 = first.campaign("py/election", "first:1")
            ld = next(leaders)
            self.assertEqual((ld.fence, ld.value, ld.none), (lk1.fence, "first:1", False))
            self.assertTrue(ld.agent)
            elected = []
            t = threading.Thread(target=lambda: elected.append(second.campaign("py/election", "second:2")))
            t.start()
            lk1.proclaim("first:3")
            self.assertEqual(next(leaders).value, "first:3")
            self.assertEqual(second.leader("py/election").value, "first:3")
            lk1.release()
            t.join(10)
            lk2 = elected[0]
            ld = next(leaders)
            if ld.none:  # the moment between the terms may be seen, or not
                ld = next(leaders)
            self.assertEqual((ld.fence, ld.value), (lk2.fence, "second:2"))
            self.assertGreater(lk2.fence, lk1.fence)
            with self.assertRaises(lockagent.NotHeld):
                lk1.proclaim("late")
            lk2.release()

    def test_check(self):
        c = self.client()
        lk = c.lock("py/check")
        self.assertTrue(c.check("py/check", lk.fence))
        self.assertFalse(c.check("py/check", lk.fence + 1))
        lk.release()
        self.assertFalse(c.check("py/check", lk.fence))

    def test_wanted_and_who_lists_the_waiter(self):
        holder, waiter = self.client(), self.client()
        lk = holder.lock("py/wanted", notify_wanted=True)
        t = threading.Thread(target=lambda: waiter.lock("py/wanted", wait=10).release())
        t.start()
        self.assertTrue(lk.wanted.wait(10))
        # The waiter's record on the masters may come after the push.
        self.assertTrue(eventually(lambda: [w["count"] for w in holder.who("py/wanted").waiting] == [1]),
                        holder.who("py/wanted").waiting)
        self.assertEqual([h["fence"] for h in holder.who("py/wanted")], [lk.fence])
        lk.release()
        t.join(10)

    def test_delay_after_an_unclean_end(self):
        holder, other = lockagent.Client(agent.socket), self.client()
        holder.lock("py/delay", delay=1)
        holder.close()
        self.assertTrue(eventually(lambda: other.who("py/delay").delayed_until_ms is not None))
        until = other.who("py/delay").delayed_until_ms
        self.assertEqual(list(other.who("py/delay")), [])
        try:
            other.lock("py/delay", wait=0).release()
            # Granted: only right for a loaded host that got here after the delay.
            self.assertGreaterEqual(time.time() * 1000, until - 100, "granted during the delay")
        except lockagent.Busy:
            pass
        other.lock("py/delay", wait=10).release()
        self.assertGreaterEqual(time.time() * 1000, until - 5)

    def test_min_hold(self):
        holder, other = self.client(), self.client()
        start = time.monotonic()
        holder.lock("py/minhold", min_hold=1).release()
        other.lock("py/minhold", wait=10).release()
        self.assertGreaterEqual(time.monotonic() - start, 1.0)

    def test_revoke(self):
        holder, operator = self.client(), self.client()
        lk = holder.lock("py/revoke", raise_on_lost=False)
        try:
            n = operator.revoke("py/revoke")
        except lockagent.Denied as e:
            self.skipTest("not root: %s" % e)
        self.assertEqual(n, 1)
        self.assertTrue(lk.lost.wait(10))
        self.assertEqual((lk.lost_reason, lk.lost_why), ("revoked", None))
        self.assertEqual(operator.revoke("py/revoke"), 0)
        lk = holder.lock("py/revoke", raise_on_lost=False)
        self.assertEqual(operator.revoke("py/revoke", reason="maintenance"), 1)
        self.assertTrue(lk.lost.wait(10))
        self.assertEqual((lk.lost_reason, lk.lost_why), ("revoked", "maintenance"))


class AioCoordinationTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.clients = []

    async def client(self):
        c = await aio.Client.connect(agent.socket)
        self.clients.append(c)
        return c

    async def asyncTearDown(self):
        for c in self.clients:
            await c.close()

    async def test_campaign_observe_proclaim(self):
        leader, observer = await self.client(), await self.client()
        async with observer.observe("aio/election") as leaders:
            self.assertTrue((await leaders.__anext__()).none)
            async with leader.campaign("aio/election", "a ✓") as lk:
                ld = await asyncio.wait_for(leaders.__anext__(), 10)
                self.assertEqual((ld.fence, ld.value), (lk.fence, "a ✓"))
                await lk.proclaim("b")
                self.assertEqual((await asyncio.wait_for(leaders.__anext__(), 10)).value, "b")
                self.assertEqual((await observer.leader("aio/election")).value, "b")
                self.assertTrue(await observer.check("aio/election", lk.fence))
            self.assertTrue((await asyncio.wait_for(leaders.__anext__(), 10)).none)

    async def test_wanted(self):
        holder, waiter = await self.client(), await self.client()
        lk = await holder.lock("aio/wanted", notify_wanted=True)
        task = asyncio.ensure_future(waiter.lock("aio/wanted", wait=10))
        await asyncio.wait_for(lk.wanted.wait(), 10)
        await lk.release()
        await (await task).release()


if __name__ == "__main__":
    unittest.main()
