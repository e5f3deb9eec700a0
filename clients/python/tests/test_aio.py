import asyncio
import os
import tempfile
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


class AioTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.client = await aio.Client.connect(agent.socket)

    async def asyncTearDown(self):
        await self.client.close()

    async def test_tasks_keep_mutual_exclusion(self):
        inside, fences = [0], []

        async def work():
            for _ in range(5):
                async with await self.client.lock("aio/tasks", wait=30) as lk:
                    inside[0] += 1
                    self.assertEqual(inside[0], 1)
                    fences.append(lk.fence)
                    await asyncio.sleep(0.001)
                    inside[0] -= 1

        await asyncio.gather(*(work() for _ in range(20)))
        self.assertEqual(len(fences), 100)
        self.assertEqual(fences, sorted(fences))

    async def test_async_with_releases_on_exceptions(self):
        with self.assertRaises(ZeroDivisionError):
            async with await self.client.lock("aio/with"):
                1 / 0
        self.assertEqual(await self.client.holds(), [])

    async def test_cancelling_a_waiting_task_leaves_nothing_held(self):
        other = await aio.Client.connect(agent.socket)
        self.addAsyncCleanup(other.close)
        held = await other.lock("aio/cancel")
        waiter = asyncio.ensure_future(self.client.lock("aio/cancel"))
        await asyncio.sleep(0.05)
        waiter.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await waiter
        self.assertEqual(await self.client.holds(), [])
        # The grant racing the cancellation is released too.
        for _ in range(10):
            waiter = asyncio.ensure_future(self.client.lock("aio/cancel"))
            await asyncio.sleep(0.01)
            await held.unlock()
            waiter.cancel()
            try:
                lk = await waiter
                await lk.unlock()
            except asyncio.CancelledError:
                pass
            held = await other.lock("aio/cancel", wait=5)
        self.assertEqual(await self.client.holds(), [])

    async def test_busy_and_ttl(self):
        lk = await self.client.lock("aio/ttl", ttl=0.3)
        other = await aio.Client.connect(agent.socket)
        self.addAsyncCleanup(other.close)
        with self.assertRaises(lockagent.Busy):
            await other.lock("aio/ttl", wait=0)
        await asyncio.wait_for(lk.lost.wait(), 3)
        self.assertEqual(lk.lost_reason, "expired")
        (await other.lock("aio/ttl", wait=1)).__class__  # free again

    async def test_async_with_needs_no_await(self):
        async with self.client.lock("aio/noawait", wait=5) as lk:
            self.assertTrue(lk.locked())
            self.assertEqual(lk.count, 1)
            other = await aio.Client.connect(agent.socket)
            self.addAsyncCleanup(other.close)
            with self.assertRaises(lockagent.Busy):
                async with other.lock("aio/noawait", wait=0):
                    pass
        self.assertFalse(lk.locked())
        self.assertEqual(await self.client.holds(), [])
        # The form of earlier versions acquires once, too.
        async with await self.client.lock("aio/noawait") as lk:
            self.assertEqual(lk.count, 1)
        self.assertEqual(await self.client.holds(), [])

    async def test_a_task_that_ends_holding_a_lock_does_not_pass_it_on(self):
        async def take(wait):
            return await self.client.lock("aio/ended", wait=wait)

        task = asyncio.ensure_future(take(None))
        held = await task
        del task
        await asyncio.sleep(0)  # the task is freed, and later tasks often get its id()
        # They are other owners all the same.
        for _ in range(5):
            task = asyncio.ensure_future(take(0))
            with self.assertRaises(lockagent.Busy):
                await task
            del task
            await asyncio.sleep(0)
        await held.release()  # from another task, as an asyncio.Lock may be
        self.assertEqual(await self.client.holds(), [])

    async def test_lock_object_acquire_release_locked(self):
        lk = aio.Lock(self.client, "aio/object")
        self.assertFalse(lk.locked())
        self.assertTrue(await lk.acquire())
        self.assertTrue(lk.locked())

        async def contend():
            return [await lk.acquire(blocking=False), await lk.acquire(wait=0.05)]

        self.assertEqual(await asyncio.ensure_future(contend()), [False, False])
        await lk.release()
        self.assertFalse(lk.locked())
        with self.assertRaises(lockagent.NotHeld):
            await lk.release()
        inside = [0]

        async def work():
            for _ in range(3):
                async with lk:
                    inside[0] += 1
                    self.assertEqual(inside[0], 1)
                    await asyncio.sleep(0.001)
                    inside[0] -= 1

        await asyncio.gather(*(work() for _ in range(5)))
        self.assertEqual(await self.client.holds(), [])

    async def test_leaving_async_with_whose_lock_was_lost_raises(self):
        with self.assertRaises(lockagent.LockLost) as cm:
            async with self.client.lock("aio/lost", ttl=0.2) as lk:
                await asyncio.wait_for(lk.lost.wait(), 3)
        self.assertEqual(cm.exception.reason, "expired")
        async with self.client.lock("aio/lost", ttl=0.2, raise_on_lost=False) as lk:
            await asyncio.wait_for(lk.lost.wait(), 3)
        self.assertEqual(await self.client.holds(), [])

    async def test_no_agent_is_a_connect_error(self):
        path = os.path.join(tempfile.mkdtemp(prefix="lagn"), "none.sock")
        self.addCleanup(os.rmdir, os.path.dirname(path))
        with self.assertRaises(lockagent.ConnectError) as cm:
            await aio.Client.connect(path)
        self.assertIn("lock-agent run -dev", str(cm.exception))

    async def test_killed_agent_loses_every_lock(self):
        own = await asyncio.to_thread(lambda: DevAgent().start())
        self.addCleanup(own.stop)
        client = await aio.Client.connect(own.socket)
        self.addAsyncCleanup(client.close)
        locks = [await client.lock("aio/k%d" % i) for i in range(3)]
        own.kill()
        for lk in locks:
            await asyncio.wait_for(lk.lost.wait(), 3)
            self.assertEqual(lk.lost_reason, "disconnected")
        with self.assertRaises(lockagent.ConnectionClosed):
            await client.lock("aio/k9")
