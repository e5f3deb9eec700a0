"""What aio's lock(), lock_all(), campaign() and observe() return is a
coroutine as well as an awaitable: create_task, ensure_future, wait_for and
gather take it as they take ``await``'s, and cancelling such a task leaves
nothing held (issue 21)."""

import asyncio
import collections.abc
import unittest

from lockagent import aio
from tests.agent import DevAgent

agent = None


def setUpModule():
    global agent
    agent = DevAgent().start()


def tearDownModule():
    agent.stop()


class AioCoroutineTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.client = await aio.Client.connect(agent.socket)
        self.other = await aio.Client.connect(agent.socket)

    async def asyncTearDown(self):
        await self.client.close()
        await self.other.close()

    def calls(self, name):
        """Every call whose result must now be a coroutine, by what it makes."""
        return [("lock", lambda: self.client.lock(name)),
                ("lock_all", lambda: self.client.lock_all([name, name + "/2"])),
                ("campaign", lambda: self.client.campaign(name, "v"))]

    async def release(self, held):
        await held.release()
        self.assertEqual(await self.client.holds(), [])

    async def test_they_are_coroutines(self):
        for kind, make in self.calls("co/is") + [("observe", lambda: self.client.observe("co/is"))]:
            with self.subTest(kind):
                made = make()
                self.assertTrue(asyncio.iscoroutine(made))
                self.assertIsInstance(made, collections.abc.Coroutine)
                made.close()  # never started: nothing to undo

    async def test_create_task(self):
        for kind, make in self.calls("co/task"):
            with self.subTest(kind):
                held = await asyncio.get_running_loop().create_task(make())
                self.assertTrue(held.locked())
                await self.release(held)

    async def test_ensure_future(self):
        for kind, make in self.calls("co/future"):
            with self.subTest(kind):
                held = await asyncio.ensure_future(make())
                self.assertTrue(held.locked())
                await self.release(held)

    async def test_wait_for(self):
        for kind, make in self.calls("co/wait_for"):
            with self.subTest(kind):
                held = await asyncio.wait_for(make(), 10)
                self.assertTrue(held.locked())
                await self.release(held)

    async def test_wait_for_that_times_out_leaves_nothing_held(self):
        blocker = await self.other.lock_all(["co/timeout", "co/timeout/2"])
        for kind, make in self.calls("co/timeout"):
            with self.subTest(kind):
                with self.assertRaises(asyncio.TimeoutError):
                    await asyncio.wait_for(make(), 0.2)
                self.assertEqual(await self.client.holds(), [])
        await blocker.release()

    async def test_gather(self):
        for kind, make in self.calls("co/gather"):
            with self.subTest(kind):
                held, pong = await asyncio.gather(make(), self.client.ping())
                self.assertTrue(held.locked())
                await self.release(held)

    async def test_observe_with_create_task(self):
        observation = await asyncio.get_running_loop().create_task(self.client.observe("co/observe"))
        async with observation:
            self.assertTrue((await asyncio.wait_for(observation.__anext__(), 10)).none)
            async with self.other.campaign("co/observe", "v") as lk:
                leader = await asyncio.wait_for(observation.__anext__(), 10)
                self.assertEqual((leader.fence, leader.value), (lk.fence, "v"))

    async def test_cancelling_a_waiting_task_leaves_nothing_held(self):
        blocker = await self.other.lock_all(["co/cancel", "co/cancel/2"])
        for kind, make in self.calls("co/cancel"):
            with self.subTest(kind):
                task = asyncio.get_running_loop().create_task(make())
                await self.queued("co/cancel")
                task.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await task
                self.assertEqual(await self.client.holds(), [])
        await blocker.release()

    async def test_cancelling_a_task_before_it_runs_sends_nothing(self):
        for kind, make in self.calls("co/early"):
            with self.subTest(kind):
                task = asyncio.get_running_loop().create_task(make())
                task.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await task
                self.assertEqual(await self.client.holds(), [])

    async def test_cancelling_a_task_the_grant_races_leaves_nothing_held(self):
        held = await self.other.lock("co/race")
        for _ in range(10):
            task = asyncio.get_running_loop().create_task(self.client.lock("co/race"))
            await self.queued("co/race")
            await held.release()
            task.cancel()
            try:
                await (await task).release()
            except asyncio.CancelledError:
                pass
            self.assertEqual(await self.client.holds(), [])
            held = await self.other.lock("co/race", wait=10)
        await held.release()

    async def test_a_lock_given_to_tasks_again_acquires_again(self):
        # As ensure_future and wait_for of an awaitable always did: each
        # task runs its own acquire, as each await does.
        lk = self.client.lock("co/again")
        self.assertIs(await asyncio.get_running_loop().create_task(lk), lk)
        await lk.release()
        self.assertIs(await asyncio.wait_for(lk, 10), lk)
        await lk.release()
        self.assertIs(await lk, lk)
        await self.release(lk)

    async def test_two_tasks_driving_one_lock_hold_it_each(self):
        lk = self.client.lock("co/two", shared=True)
        loop = asyncio.get_running_loop()
        first, second = await asyncio.gather(loop.create_task(lk), loop.create_task(lk))
        self.assertIs(first, lk)
        self.assertIs(second, lk)
        holds = await self.client.holds()  # one shared hold per task, each its own owner
        self.assertEqual([h["name"] for h in holds], ["co/two", "co/two"])
        self.assertEqual(len({h["owner"] for h in holds}), 2)

    async def test_close_from_elsewhere_leaves_a_task_s_acquire_alone(self):
        # asyncio closes a coroutine it will not run (a TaskGroup that is
        # shutting down): that must not end a run another task drives.
        blocker = await self.other.lock("co/close")
        lk = self.client.lock("co/close")
        task = asyncio.get_running_loop().create_task(lk)
        await self.queued("co/close")
        lk.close()
        await blocker.release()
        self.assertIs(await asyncio.wait_for(task, 10), lk)
        self.assertTrue(lk.locked())
        await self.release(lk)

    async def queued(self, name):
        """Waits until a LOCK of name waits at the agent: its WHO lists a
        waiting request (asked on the other connection, since a WHO waits
        for the LOCKs of its name before it on its own)."""
        for _ in range(1000):
            if (await self.other.who(name)).waiting:
                return
            await asyncio.sleep(0.01)
        self.fail("no LOCK of %s ever waited" % name)


if __name__ == "__main__":
    unittest.main()
