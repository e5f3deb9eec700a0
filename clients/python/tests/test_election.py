"""lockagent.Election against the real agent (run -dev): etcd's election
semantics (the Go client's Election has the same, tested against real
masters in tests/goclient_election_test.go), a fresh leader() after a
hand-over, and close() that returns once the agent released."""

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


def await_waiters(client, n, timeout=10.0):
    """Waits until the agent has n waiting LOCKs (STATUS is all there is to watch)."""
    deadline = time.monotonic() + timeout
    while client.status()["waiters"] < n:
        if time.monotonic() > deadline:
            raise AssertionError("the agent never had %d waiters" % n)
        time.sleep(0.001)


class ElectionTest(unittest.TestCase):
    def client(self):
        c = lockagent.Client(agent.socket)
        self.addCleanup(c.close)
        return c

    def test_leader_after_a_hand_over_is_the_new_leader(self):
        """Issue 31: while the agent observes the name already, a leader
        resigns, the next candidate's campaign returns, and only then a
        fresh leader() is asked: it must name the new leader."""
        watcher, asker = self.client(), self.client()
        name = "py/handover"
        observation = watcher.observe(name)
        self.addCleanup(observation.close)
        clients = [self.client(), self.client()]
        lead = clients[0].campaign(name, "first")
        stale = []
        for i in range(20):
            elected = []
            t = threading.Thread(target=lambda: elected.append(clients[1].campaign(name, "c%d" % i)))
            t.start()
            await_waiters(asker, 1)
            lead.release()
            t.join(30)
            got = asker.leader(name)
            if got.fence != elected[0].fence:
                stale.append((i, got))
            lead = elected[0]
            clients.reverse()
        self.assertEqual(stale, [], "a fresh leader() named a term that had ended")

    def test_close_returns_once_released(self):
        """Issue 31: close() returned before the agent had released."""
        asker = self.client()
        held = 0
        for i in range(20):
            c = lockagent.Client(agent.socket)
            names = ["py/close%d/%d" % (i, j) for j in range(5)]
            for n in names:
                c.lock(n)
            c.close()
            held += sum(len(asker.who(n)) for n in names)
        self.assertEqual(held, 0, "after close() returned, WHO found locks still held")

    def test_no_leader_resign_twice_proclaim_when_not_leading(self):
        c = self.client()
        e = lockagent.Election(c, "py/semantics")
        with self.assertRaises(lockagent.NoLeader):
            e.leader()
        self.assertTrue(c.leader("py/semantics").none)  # the old call keeps its shape
        e.resign()  # not leading: nothing to do
        with self.assertRaises(lockagent.NotLeader):
            e.proclaim("x")
        self.assertEqual(e.rev, 0)
        e.campaign("one")
        rev = e.rev
        self.assertGreater(rev, 0)
        e.campaign("one")  # leading already: at once
        e.campaign("two")  # leading already: proclaims
        self.assertEqual(e.rev, rev)
        got = e.leader()
        self.assertEqual((got.fence, got.value), (rev, "two"))
        e.proclaim("three")
        self.assertEqual(lockagent.Election(self.client(), "py/semantics").leader().value, "three")
        e.resign()
        e.resign()  # a second resign is fine
        self.assertEqual(e.rev, 0)
        with self.assertRaises(lockagent.NoLeader):
            e.leader()
        with self.assertRaises(lockagent.NotLeader):
            e.proclaim("four")

    def test_session_recampaign(self):
        """etcd's TestElectionSessionRecampaign: a second Election of the
        name on the same Client is the same candidate."""
        c = self.client()
        e = lockagent.Election(c, "py/recampaign")
        e.campaign("abc")
        e2 = lockagent.Election(c, "py/recampaign")
        e2.campaign("def")
        self.assertEqual(e2.rev, e.rev)
        with e.observe() as leaders:
            got = next(leaders)
        self.assertEqual((got.value, got.fence), ("def", e.rev))

    def test_campaign_waits_for_the_resign(self):
        """etcd's ExampleElection_Campaign."""
        e1 = lockagent.Election(self.client(), "py/example")
        e2 = lockagent.Election(self.client(), "py/example")
        e1.campaign("e1")
        done = threading.Event()
        t = threading.Thread(target=lambda: (e2.campaign("e2"), done.set()))
        t.start()
        await_waiters(self.client(), 1)
        self.assertFalse(done.is_set())
        rev1 = e1.rev
        e1.resign()
        t.join(30)
        self.assertTrue(done.is_set())
        self.assertGreater(e2.rev, rev1)
        self.assertEqual(e1.rev, 0)
        got = e1.leader()
        self.assertEqual((got.value, got.fence), ("e2", e2.rev))

    def test_failover(self):
        """etcd's TestElectionFailover: the leader's Client closes while
        another candidate waits; a new observer sees the new leader first."""
        c0, c1, c2 = lockagent.Client(agent.socket), self.client(), self.client()
        lockagent.Election(c0, "py/failover").campaign("foo")
        result = []
        t = threading.Thread(target=lambda: result.append(lockagent.Election(c1, "py/failover").campaign("bar")))
        t.start()
        await_waiters(c2, 1)
        c0.close()
        with lockagent.Election(c2, "py/failover").observe() as leaders:
            self.assertEqual(next(leaders).value, "bar")
        t.join(30)

    def test_observe_after_leader_hears_changes(self):
        """An observation after a leader() call on the same Client hears
        every later change."""
        c, candidate = self.client(), self.client()
        for i in range(10):
            c.leader("py/deaf")
            with c.observe("py/deaf") as leaders:
                lk = candidate.campaign("py/deaf", "v%d" % i)
                got = next(leaders)
                while got.fence != lk.fence:
                    got = next(leaders)
                lk.release()


if __name__ == "__main__":
    unittest.main()


class AioElectionTest(unittest.IsolatedAsyncioTestCase):
    async def client(self):
        c = await aio.Client.connect(agent.socket)
        self.addAsyncCleanup(c.close)
        return c

    async def test_etcd_semantics(self):
        c, other = await self.client(), await self.client()
        e = aio.Election(c, "aio/semantics")
        with self.assertRaises(aio.NoLeader):
            await e.leader()
        await e.resign()
        with self.assertRaises(aio.NotLeader):
            await e.proclaim("x")
        await e.campaign("one")
        rev = e.rev
        self.assertGreater(rev, 0)
        await e.campaign("one")
        await aio.Election(c, "aio/semantics").campaign("two")  # the same candidate: proclaims
        self.assertEqual(e.rev, rev)
        got = await aio.Election(other, "aio/semantics").leader()
        self.assertEqual((got.fence, got.value), (rev, "two"))
        rival = aio.Election(other, "aio/semantics")
        won = asyncio.ensure_future(rival.campaign("rival"))
        deadline = time.monotonic() + 10
        while (await c.status())["waiters"] < 1:
            self.assertLess(time.monotonic(), deadline, "the rival never waited")
            await asyncio.sleep(0.001)
        self.assertFalse(won.done())
        async with e.observe() as leaders:
            await e.resign()
            await e.resign()
            await asyncio.wait_for(won, 10)
            got = await leaders.__anext__()
            while got.fence == rev:
                got = await leaders.__anext__()
            self.assertEqual((got.fence, got.value), (rival.rev, "rival"))
        self.assertEqual(e.rev, 0)
        await rival.resign()
        with self.assertRaises(aio.NoLeader):
            await e.leader()
