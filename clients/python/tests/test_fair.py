"""fair=True and WHO's queued=, at the wire: a scripted FakeAgent answers
(with replies the real agent cannot be made to give on cue, an older agent's
among them), and the tests check what the client writes and how it reads the
answers. (test_client.py and test_aio.py cover who() against the real agent.)"""

import unittest

import lockagent
from lockagent import aio
from tests.agent import FakeAgent, grant_all


def without_owner(line):
    return " ".join(w for w in line.split() if not w.startswith("owner="))


class FairTest(unittest.TestCase):
    def setUp(self):
        self.fake = FakeAgent(grant_all)
        self.addCleanup(self.fake.close)
        self.client = lockagent.Client(self.fake.path)
        self.addCleanup(self.client.close)

    def sent_by(self, call):
        before = len(self.fake.requests())
        call()
        self.client.ping()  # answered: every line before it was read
        return [without_owner(r) for r in self.fake.requests()[before:-1]]

    def test_fair_true_is_sent_as_fair_true(self):
        cases = [
            ("fair=True", lambda: self.client.lock("py/fair", fair=True).release(),
             ["LOCK py/fair fair=true", "UNLOCK py/fair"]),
            ("no fair= without it", lambda: self.client.lock("py/unfair").release(),
             ["LOCK py/unfair", "UNLOCK py/unfair"]),
            ("fair=False sends nothing either", lambda: self.client.lock("py/f0", fair=False).release(),
             ["LOCK py/f0", "UNLOCK py/f0"]),
            ("fair with the other options", lambda: self.client.lock("py/frw", wait=0, shared=True, fair=True).release(),
             ["LOCK py/frw wait=0 mode=shared fair=true", "UNLOCK py/frw"]),
            ("fair with a semaphore", lambda: self.client.lock("py/fsem", limit=3, fair=True).release(),
             ["LOCK py/fsem limit=3 fair=true", "UNLOCK py/fsem"]),
        ]
        for what, call, want in cases:
            with self.subTest(what):
                self.assertEqual(self.sent_by(call), want)

    def test_a_fair_lock_object_sends_fair_on_every_acquire(self):
        lk = lockagent.Lock(self.client, "py/fobj", fair=True)

        def twice():
            with lk:
                self.assertEqual(lk.fence, 7)
            self.assertTrue(lk.acquire(blocking=False))
            lk.release()
        self.assertEqual(self.sent_by(twice), ["LOCK py/fobj fair=true", "UNLOCK py/fobj",
                                               "LOCK py/fobj wait=0 fair=true", "UNLOCK py/fobj"])

    def test_fair_must_be_a_bool(self):
        for bad in ("true", "false", 1, 0, None):
            with self.subTest(repr(bad)):
                with self.assertRaises(lockagent.InvalidArgument) as cm:
                    self.sent_by(lambda: self.client.lock("py/fbad", fair=bad))
                self.assertEqual(cm.exception.argument, "fair")
                self.assertEqual(self.sent_by(lambda: None), [])
        with self.assertRaises(lockagent.InvalidArgument):
            lockagent.Lock(self.client, "py/fbad", fair="yes")
        self.assertEqual([r for r in self.fake.requests() if r.startswith("LOCK")], [])

    def test_an_agent_without_fair_queues_refuses_it(self):
        self.fake.answer = lambda verb, args: ["ERR BAD_REQUEST fair=true not supported yet"]
        with self.assertRaises(lockagent.BadRequest):
            self.client.lock("py/fair", fair=True)

    def test_who_reads_queued(self):
        holder = "DATA agent=host-a pid=42 uid=1000 owner=t1 mode=exclusive fence=99 since=1700000000000"
        cases = [
            ("three waiters", [holder, "OK n=1 queued=3"], 3, 1),
            ("an empty queue", [holder, "OK n=1 queued=0"], 0, 1),
            ("a free name with waiters", ["OK n=0 queued=2"], 2, 0),
            ("an agent that does not say", [holder, "OK n=1"], None, 1),
            ("a value that is not a count", [holder, "OK n=1 queued=-1"], None, 1),
        ]
        for what, replies, queued, n in cases:
            with self.subTest(what):
                self.fake.answer = lambda verb, args, r=replies: r
                who = self.client.who("py/q")
                self.assertEqual(who.queued, queued)
                self.assertIsInstance(who, list)
                self.assertEqual(len(who), n)
                if n:
                    self.assertEqual((who[0]["pid"], who[0]["fence"]), (42, 99))
        self.assertEqual(self.fake.requests()[-1], "WHO py/q")


class AioFairTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.fake = FakeAgent(grant_all)
        self.addCleanup(self.fake.close)
        self.client = await aio.Client.connect(self.fake.path)
        self.addAsyncCleanup(self.client.close)

    async def test_fair_true_is_sent_as_fair_true(self):
        async with self.client.lock("aio/fair", fair=True) as lk:
            self.assertEqual(lk.fence, 7)
        await (await self.client.lock("aio/unfair")).release()
        await (await self.client.lock("aio/frw", shared=True, wait=0, fair=True)).release()
        await self.client.ping()
        locks = [without_owner(r) for r in self.fake.requests() if r.startswith("LOCK")]
        self.assertEqual(locks, ["LOCK aio/fair fair=true", "LOCK aio/unfair", "LOCK aio/frw wait=0 mode=shared fair=true"])

    async def test_fair_must_be_a_bool(self):
        with self.assertRaises(lockagent.InvalidArgument):
            self.client.lock("aio/fbad", fair="true")
        with self.assertRaises(lockagent.InvalidArgument):
            aio.Lock(self.client, "aio/fbad", fair=1)
        await self.client.ping()
        self.assertEqual([r for r in self.fake.requests() if r.startswith("LOCK")], [])

    async def test_who_reads_queued(self):
        self.fake.answer = lambda verb, args: ["OK n=0 queued=4"]
        who = await self.client.who("aio/q")
        self.assertEqual((list(who), who.queued), ([], 4))
        self.fake.answer = lambda verb, args: ["OK n=0"]
        self.assertIsNone((await self.client.who("aio/q")).queued)


if __name__ == "__main__":
    unittest.main()
