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
            finally:
                await client.close()
        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
