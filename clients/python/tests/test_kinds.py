import asyncio
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


class KindsTest(unittest.TestCase):
    def setUp(self):
        self.client = lockagent.Client(agent.socket)
        self.addCleanup(self.client.close)

    def test_readers_share_a_writer_waits(self):
        other = lockagent.Client(agent.socket)
        self.addCleanup(other.close)
        with self.client.lock("py/rw", shared=True):
            with other.lock("py/rw", shared=True, owner="reader2"):
                with self.assertRaises(lockagent.Busy):
                    other.lock("py/rw", wait=0, owner="writer")

    def test_a_semaphore_hands_out_slots(self):
        a = self.client.lock("py/sem", limit=2, owner="a")
        b = self.client.lock("py/sem", limit=2, owner="b")
        self.assertEqual({a.slot, b.slot}, {1, 2})
        with self.assertRaises(lockagent.Busy):
            self.client.lock("py/sem", limit=2, wait=0, owner="c")
        with self.assertRaises(lockagent.Conflict):
            self.client.lock("py/sem", limit=3, owner="d")
        a.release()
        b.release()

    def test_who_and_holds_show_limit_and_slot(self):
        a = self.client.lock("py/semwho", limit=3, owner="a")
        b = self.client.lock("py/semwho", limit=3, owner="b")
        plain = self.client.lock("py/plainwho")
        self.addCleanup(plain.release)
        self.addCleanup(b.release)
        self.addCleanup(a.release)
        mine = {a.slot: a, b.slot: b}
        who = self.client.who("py/semwho")
        self.assertEqual(sorted((h["owner"], h["limit"], h["slot"]) for h in who),
                         sorted((lk.owner, 3, slot) for slot, lk in mine.items()))
        [h] = self.client.who("py/plainwho")
        self.assertEqual((h["limit"], h["slot"]), (None, None))
        holds = {(h["name"], h["owner"]): h for h in self.client.holds()}
        for slot, lk in mine.items():
            self.assertEqual((holds[("py/semwho", lk.owner)]["limit"], holds[("py/semwho", lk.owner)]["slot"]), (3, slot))
        self.assertEqual((holds[("py/plainwho", plain.owner)]["limit"], holds[("py/plainwho", plain.owner)]["slot"]),
                         (None, None))

    def test_bad_kinds_are_refused_before_sending(self):
        for kw in ({"limit": 0}, {"limit": 4097}, {"limit": "2"}, {"shared": True, "limit": 2}):
            with self.assertRaises(lockagent.InvalidArgument, msg=str(kw)):
                lockagent.Lock(self.client, "py/bad", **kw)

    def test_asyncio_semaphore(self):
        async def main():
            client = await aio.Client.connect(agent.socket)
            try:
                async with client.lock("py/asem", limit=3) as lk:
                    self.assertEqual(lk.slot, 1)
                    [h] = await client.who("py/asem")
                    self.assertEqual((h["limit"], h["slot"], h["fence"]), (3, 1, lk.fence))
                    [h] = await client.holds()
                    self.assertEqual((h["limit"], h["slot"], h["name"]), (3, 1, "py/asem"))
            finally:
                await client.close()
        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
