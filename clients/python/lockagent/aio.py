"""asyncio client for lock-agent, with the surface of the sync client.

    from lockagent import aio

    client = await aio.Client.connect()
    async with await client.lock("jobs/nightly", wait=5) as lk:
        await do_work(fence=lk.fence)      # lk.lost is an asyncio.Event

The owner defaults to the calling task (an id numbered once per process,
never reused), so a task locking a name it holds re-enters it. Cancelling a task that waits in lock() cancels the wait at the
agent and releases a grant that won the race.
"""

import asyncio
import itertools
import weakref

from ._wire import (Busy, ConnectError, ConnectionClosed, InvalidArgument, InvalidName, LockAgentError, LockLost,
                    LockState, NotHeld, check_client_name, check_name, check_owner, check_tag, holders_from,
                    holds_from, lock_line, new_owner, socket_path, status_from, thread_owner, Router)

__all__ = ["Client", "Lock", "Busy", "ConnectError", "ConnectionClosed", "InvalidArgument", "InvalidName",
           "LockAgentError", "LockLost", "NotHeld"]


# Each task's owner id, numbered once per process: unlike id(task), never
# given again to a later task. Child tasks are owners of their own.
_task_owners = weakref.WeakKeyDictionary()


def task_owner():
    """The calling task's owner id (the thread's outside any task)."""
    task = asyncio.current_task()
    if task is None:
        return thread_owner()
    owner = _task_owners.get(task)
    if owner is None:
        owner = _task_owners[task] = new_owner("a")
    return owner


class Client:
    """One connection to the agent. Close it (or use ``async with``) to release everything it holds."""

    def __init__(self, reader, writer):
        self._reader = reader
        self._writer = writer
        self._calls = {}
        self._locks = {}
        self._tags = itertools.count(1)
        self._closed = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._read())
        self.session = None

    @classmethod
    async def connect(cls, path=None, client_name="python-aio"):
        """Connects to the agent at ``path`` (default: lockagent.socket_path());
        raises ConnectError if nothing answers there."""
        check_client_name(client_name)
        path = socket_path(path)
        try:
            reader, writer = await asyncio.open_unix_connection(path)
        except OSError as e:
            raise ConnectError(path, e) from e
        c = cls(reader, writer)
        hello = await c._do("HELLO proto=1 client=" + client_name)
        c.session = hello.fields.get("session")
        return c

    async def _read(self):
        router = Router()
        try:
            while True:
                line = await self._reader.readline()
                if not line:
                    break
                routed = router.line(line.decode("utf-8", "replace").rstrip("\r\n"))
                if routed is None:
                    continue
                if routed[0] == "push":
                    self._push(routed[1], routed[2])
                    continue
                fut = self._calls.pop(routed[1], None)
                if fut is not None and not fut.done():
                    fut.set_result(routed[2])
        except (OSError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            self._shutdown()

    def _shutdown(self):
        self._closed.set()
        calls, self._calls = self._calls, {}
        locks, self._locks = self._locks, {}
        for fut in calls.values():
            if not fut.done():
                fut.set_exception(ConnectionClosed("the connection to the agent is closed"))
        for ls in locks.values():
            for lk in ls:
                lk._lose("disconnected")

    def _push(self, kind, f):
        if kind != "LOST":
            return
        for lk in self._locks.pop((f.get("name"), f.get("owner", "")), []):
            lk._lose(f.get("reason", "unknown"))

    def _send(self, line):
        if self._closed.is_set():
            raise ConnectionClosed("the connection to the agent is closed")
        tag = check_tag(str(next(self._tags)))
        fut = asyncio.get_running_loop().create_future()
        self._calls[tag] = fut
        self._writer.write((tag + " " + line + "\n").encode())
        return tag, fut

    @staticmethod
    def _check(reply):
        err = reply.error()
        if err is not None:
            raise err
        return reply

    async def _do(self, line):
        _, fut = self._send(line)
        await self._writer.drain()
        return self._check(await fut)

    def _track(self, lk):
        self._locks.setdefault((lk.name, lk.owner), []).append(lk)

    def _untrack(self, lk):
        ls = self._locks.get((lk.name, lk.owner), [])
        if lk in ls:
            ls.remove(lk)
        if not ls:
            self._locks.pop((lk.name, lk.owner), None)

    @property
    def closed(self):
        return self._closed.is_set()

    async def close(self):
        """Closes the connection; the agent releases every lock it held."""
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except OSError:
            pass
        await self._closed.wait()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def ping(self):
        await self._do("PING")

    async def lock(self, name, wait=None, ttl=None, owner=None, on_lost=None):
        """Acquires ``name``; see lockagent.Client.lock. The owner defaults to the calling task."""
        if owner is None:
            owner = task_owner()
        else:
            check_owner(owner)
        line = lock_line(name, owner, wait, ttl)
        lk = Lock(self, name, owner, on_lost)
        self._track(lk)
        try:
            tag, fut = self._send(line)
            await self._writer.drain()
        except BaseException:
            self._untrack(lk)
            raise
        try:
            reply = self._check(await asyncio.shield(fut))
        except LockAgentError:
            self._untrack(lk)
            raise
        except asyncio.CancelledError:
            await asyncio.shield(self._abandon(tag, fut, lk))
            raise
        lk._granted(reply.fields)
        return lk

    async def _abandon(self, tag, fut, lk):
        try:
            await self._do("CANCEL " + tag)
            reply = self._check(await fut)
            lk._granted(reply.fields)
            await lk.unlock()
        except LockAgentError:
            pass
        finally:
            self._untrack(lk)

    async def status(self):
        return status_from(await self._do("STATUS"))

    async def who(self, name):
        return holders_from(await self._do("WHO " + check_name(name)))

    async def holds(self):
        return holds_from(await self._do("HOLDS"))


class Lock(LockState):
    """A held lock; ``async with`` unlocks it on the way out. ``lost`` is an asyncio.Event."""

    def __init__(self, client, name, owner, on_lost=None):
        super().__init__(client, name, owner, on_lost)
        self.lost = asyncio.Event()

    async def unlock(self):
        self._check_unlock()
        await self._client._do(self._unlock_line())
        self._released = True
        self._client._untrack(self)

    async def extend(self, ttl):
        line = self._extend_line(ttl)
        return self._extended(await self._client._do(line))

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        if not self.lost.is_set() and not self._released:
            try:
                await self.unlock()
            except ConnectionClosed:
                pass
        return False
