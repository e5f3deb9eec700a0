"""asyncio client for lock-agent, with the surface of the sync client.

    from lockagent import aio

    client = await aio.Client.connect()
    async with client.lock("jobs/nightly", wait=5) as lk:
        await do_work(fence=lk.fence)      # lk.lost is an asyncio.Event

``client.lock(...)`` returns an aio.Lock that ``async with`` acquires and
releases; ``await client.lock(...)`` (the form of earlier versions) acquires it
at once, and ``async with await client.lock(...)`` still works.
What lock(), lock_all(), campaign() and observe() return is a coroutine too,
so ``asyncio.create_task(client.lock(...))``, ensure_future, wait_for and
gather take it as a coroutine: each task that runs it acquires on its
own, as each ``await`` does.
``client.lock_all(names, ...)`` is the same for several names at once, all
or none: an aio.MultiLock of one aio.Lock per name. Each Lock is an owner
of its own, as an asyncio.Lock is: two acquires compete, from one task or
many; aio.RLock re-enters per task, and an explicit owner= re-enters. Cancelling a task that waits
for a lock cancels the wait at the agent and releases a grant that won the race.
"""

import asyncio
import contextlib
import itertools
import weakref

from ._wire import (Busy, ConnectError, ConnectionClosed, InvalidArgument, InvalidName, Leader, LockAgentError, LockBase,
                    LockLost, MultiLockBase, NotHeld, Observed, check_client_name, check_fence, check_name, check_tag,
                    holders_from, holds_from, lock_line, new_owner, revoke_line, socket_path, status_from, thread_owner,
                    Router)
from .aio_coroutine import CoroutineMixin, register

__all__ = ["Client", "Lock", "RLock", "MultiLock", "Observation", "Leader", "Busy", "ConnectError", "ConnectionClosed",
           "InvalidArgument", "InvalidName", "LockAgentError", "LockLost", "NotHeld", "Election", "NoLeader", "NotLeader"]

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
        self._observed = {}  # name -> Observed
        self._then = {}  # tag -> called with the reply by the reader, before any later line
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
                then = self._then.pop(routed[1], None)
                if then is not None:
                    then(routed[2])
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
        for holds in locks.values():
            for hold in holds:
                hold.lose("disconnected")
        observed, self._observed = self._observed, {}
        for o in observed.values():
            for observer in o.observers:
                observer._queue.put_nowait(None)

    def _push(self, kind, f):
        if kind == "LEADER":
            observed = self._observed.get(f.name)
            if observed is not None:
                for o in observed.deliver(f):
                    o._queue.put_nowait(f)
            return
        if kind == "WANTED":
            for hold in self._locks.get((f.get("name"), f.get("owner", "")), []):
                hold.wanted.set()
            return
        if kind != "LOST":
            return
        for hold in self._locks.pop((f.get("name"), f.get("owner", "")), []):
            hold.lose(f.get("reason", "unknown"), f.get("why"))

    def _send(self, line, then=None):
        if self._closed.is_set():
            raise ConnectionClosed("the connection to the agent is closed")
        tag = check_tag(str(next(self._tags)))
        if then is not None:
            self._then[tag] = then
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

    def _track(self, hold):
        self._locks.setdefault((hold.name, hold.owner), []).append(hold)

    def _untrack(self, hold):
        holds = self._locks.get((hold.name, hold.owner), [])
        if hold in holds:
            holds.remove(hold)
        if not holds:
            self._locks.pop((hold.name, hold.owner), None)

    @property
    def closed(self):
        return self._closed.is_set()

    QUIT_GRACE = 10.0  # seconds close() waits for the agent after QUIT

    async def close(self):
        """As lockagent.Client.close: says QUIT and returns once the agent
        has released every lock of the connection and closed it (at most
        QUIT_GRACE, 10 seconds, then it closes the connection itself)."""
        if not self._closed.is_set():
            try:
                _, fut = self._send("QUIT")
                await self._writer.drain()
                loop = asyncio.get_running_loop()
                deadline = loop.time() + self.QUIT_GRACE
                if (await asyncio.wait_for(fut, self.QUIT_GRACE)).kind == "OK":
                    await asyncio.wait_for(self._closed.wait(), max(deadline - loop.time(), 0))
            except (LockAgentError, OSError, asyncio.TimeoutError):
                pass
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

    def lock(self, name, wait=None, ttl=None, owner=None, on_lost=None, raise_on_lost=True, shared=False, limit=None,
             fair=False, value=None, notify_wanted=False, delay=None, min_hold=None):
        """An aio.Lock of ``name`` (arguments as for lockagent.Lock): ``async
        with client.lock(...)`` acquires it, raising Busy if ``wait`` runs out,
        and releases it; ``await client.lock(...)`` acquires it at once."""
        return Lock(self, name, wait=wait, ttl=ttl, owner=owner, on_lost=on_lost, raise_on_lost=raise_on_lost,
                    shared=shared, limit=limit, fair=fair, value=value, notify_wanted=notify_wanted, delay=delay,
                    min_hold=min_hold)

    def lock_all(self, names, wait=None, ttl=None, owner=None, on_lost=None, raise_on_lost=True, shared=False,
                 limit=None, fair=False, value=None, notify_wanted=False, delay=None, min_hold=None):
        """An aio.MultiLock of ``names`` (arguments as for
        lockagent.MultiLock): ``async with client.lock_all(...)`` acquires
        them all or none, raising Busy if ``wait`` runs out, and releases
        them; ``await client.lock_all(...)`` acquires them at once."""
        return MultiLock(self, names, wait=wait, ttl=ttl, owner=owner, on_lost=on_lost, raise_on_lost=raise_on_lost,
                         shared=shared, limit=limit, fair=fair, value=value, notify_wanted=notify_wanted, delay=delay,
                         min_hold=min_hold)

    async def _abandon(self, tag, fut, grants):
        """Cancels a LOCK whose task was cancelled and gives back a grant that
        won the race: one (hold, fresh) per name it asked for. The reader put
        a grant in the books; each UNLOCK's answer takes it out."""
        granted = False
        try:
            await self._do("CANCEL " + tag)
            granted = (await fut).kind == "OK"
            if granted:
                for hold, _ in grants:  # one UNLOCK each: one lost meanwhile must not keep the others
                    try:
                        await hold.lock._unlock(hold._with_unlocking())
                    except LockAgentError:
                        pass
        except LockAgentError:
            pass
        finally:
            if not granted:
                for hold, fresh in grants:
                    if fresh:
                        self._untrack(hold)

    async def status(self):
        return status_from(await self._do("STATUS"))

    async def who(self, name):
        """As lockagent.Client.who: a list of holders with ``queued``."""
        return holders_from(await self._do("WHO " + check_name(name)))

    async def holds(self):
        return holds_from(await self._do("HOLDS"))

    def campaign(self, name, value, wait=None, **kwargs):
        """As lockagent.Client.campaign: an aio.Lock of a fair hold carrying
        ``value``; ``await client.campaign(...)`` returns once elected, and
        ``async with client.campaign(...)`` leads for the block."""
        return self.lock(name, wait=wait, fair=True, value=value, **kwargs)

    def observe(self, name):
        """An aio.Observation of who leads ``name``: an async iterator of
        Leader, the current one first (``async for leader in
        client.observe(name)``); ``await`` it to start observing at once,
        ``async with`` it (or aclose() it) to stop."""
        return Observation(self, check_name(name))

    async def leader(self, name):
        """Who leads ``name`` now, as lockagent.Client.leader: read after
        the call began."""
        async with Observation(self, check_name(name)) as observation:
            return await observation.__anext__()

    async def check(self, name, fence):
        """As lockagent.Client.check."""
        line = "CHECK %s fence=%d" % (check_name(name), check_fence(fence))
        return (await self._do(line)).fields.get("current") == "true"

    async def revoke(self, name, agent=None, reason=None):
        """As lockagent.Client.revoke."""
        return int((await self._do(revoke_line(name, agent, reason))).fields.get("n", 0))

    def _join(self, observer):
        """Adds an observer of its name and sends its OBSERVE (returning the
        future of its answer); it gets the push that answers it, and every
        change after. Lines go out in call order (one loop), so an
        UNOBSERVE of an earlier observer never ends a later one's."""
        def answered(reply):
            observer._answered = True
            observer._wants_next = reply.kind == "OK"
        observed = self._observed.get(observer.name)
        fut = self._send("OBSERVE " + observer.name, answered)[1]
        if observed is None:
            observed = self._observed[observer.name] = Observed()
        observed.observers.append(observer)
        return fut

    def _leave(self, observer, unobserve=True):
        """Removes an observer; the last one out sends UNOBSERVE (unless
        ``unobserve`` is False: its OBSERVE was refused)."""
        observed = self._observed.get(observer.name)
        if observed is None or observer not in observed.observers:
            return None
        observed.observers.remove(observer)
        if observed.observers:
            return None
        del self._observed[observer.name]
        if not unobserve:
            return None
        try:
            return self._send("UNOBSERVE " + observer.name)[1]
        except ConnectionClosed:
            return None


@register
class Observation(CoroutineMixin):
    """Who leads a name, as the agent pushes it: an async iterator of
    Leader, the leader as read after it started first; it ends once closed
    (aclose(), or leaving its ``async with``) or when the connection closes.
    Observations of one name on one Client share one observation at the
    agent. A ``break`` out of ``async for`` does not close it: use it in
    ``async with``."""

    def __init__(self, client, name):
        self.name = name
        self._client = client
        self._queue = asyncio.Queue()
        self._started = False
        self._closed = False
        self._answered = False  # its OBSERVE was answered
        self._wants_next = False

    async def start(self):
        """Starts observing (OBSERVE), once; iterating starts it too."""
        if self._started:
            return self
        self._started = True
        fut = self._client._join(self)
        try:
            await self._client._writer.drain()
            self._client._check(await fut)
        except BaseException as e:
            self._closed = True
            refused = isinstance(e, LockAgentError) and not isinstance(e, ConnectionClosed)
            self._client._leave(self, unobserve=not refused)
            raise
        return self

    def _awaited(self):
        return self.start()

    def __aiter__(self):
        return self

    async def __anext__(self):
        if not self._started:
            await self.start()
        if self._closed:
            raise StopAsyncIteration
        leader = await self._queue.get()
        if leader is None:
            self._closed = True
            raise StopAsyncIteration
        return leader

    async def aclose(self):
        """Stops observing (UNOBSERVE, when no other observation of the name
        on this Client is left)."""
        if self._closed or not self._started:
            self._closed = True
            return
        self._closed = True
        self._queue.put_nowait(None)
        fut = self._client._leave(self)
        if fut is not None:
            try:
                await self._client._writer.drain()
                self._client._check(await fut)
            except LockAgentError:
                pass

    async def __aenter__(self):
        return await self.start()

    async def __aexit__(self, *exc):
        await self.aclose()


@register
class Lock(CoroutineMixin, LockBase):
    """A distributed lock through an aio.Client, usable like asyncio.Lock:
    ``await acquire()``, ``await release()``, ``locked()`` and ``async with``.
    The arguments and properties are those of lockagent.Lock, with tasks for
    threads; ``lost`` and ``wanted`` are asyncio.Events. Awaiting it acquires it and returns it.
    """

    _mu = contextlib.nullcontext()  # one event loop: nothing to guard

    @staticmethod
    def _event():
        return asyncio.Event()

    @staticmethod
    def _caller():
        return task_owner()

    async def acquire(self, blocking=True, timeout=None, *, wait=None):
        """Acquires the lock; returns True, or False if the wait ran out.
        ``wait``/``timeout`` as for lockagent.Lock.acquire."""
        return await self._acquire(self._resolve_wait(blocking, timeout, wait)) is not None

    async def _acquire(self, wait):
        owner = self._owner_for_acquire()
        line = lock_line(self.name, owner, wait, self.ttl, self.shared, self.limit, self.fair, self._extra)
        hold, fresh = self._begin(owner)
        client = self._client
        if fresh:
            client._track(hold)
        try:
            tag, fut = client._send(line, self._on_grant(hold))
            await client._writer.drain()
        except BaseException:
            if fresh:
                client._untrack(hold)
            raise
        try:
            client._check(await asyncio.shield(fut))
        except Busy:
            if fresh:
                client._untrack(hold)
            return None
        except LockAgentError:
            if fresh:
                client._untrack(hold)
            raise
        except asyncio.CancelledError:
            await asyncio.shield(client._abandon(tag, fut, [(hold, fresh)]))
            raise
        return hold

    async def _acquire_or_raise(self):
        hold = await self._acquire(self.wait)
        if hold is None:
            raise Busy("%s: the wait ran out" % self.name)
        return hold

    async def _awaited(self):
        (await self._acquire_or_raise()).preacquired = True
        return self

    async def release(self):
        """Releases the hold the calling task acquired (one re-entry of it), or
        the only hold when another task took it. Raises LockLost if it was
        lost, NotHeld if this Lock does not hold it (a LockLost is a NotHeld).
        A release cancelled after its UNLOCK went out still has the agent's
        answer reach the books: locked() then says False."""
        await self._unlock(self._to_release())

    unlock = release  # the name of earlier versions

    async def _unlock(self, hold):
        client = self._client
        try:
            _, fut = client._send(hold.unlock_line(), self._on_unlock_reply(hold))
        except BaseException:
            hold.unlocking = False
            raise
        try:
            await client._writer.drain()
            client._check(await fut)
        except NotHeld as e:
            raise self._lost_on_unlock(hold, e) from e
        except ConnectionClosed as e:
            self._after_closed_unlock(hold, e)

    async def extend(self, ttl):
        """As lockagent.Lock.extend."""
        hold, line = self._extend_line(ttl)
        await self._on_agent(hold, line, self._on_extend_reply(hold))
        return hold.validity

    async def proclaim(self, value):
        """As lockagent.Lock.proclaim."""
        hold, line = self._proclaim_line(value)
        await self._on_agent(hold, line, self._on_reply(hold))
        hold.value = value

    async def _on_agent(self, hold, line, then):
        try:
            _, fut = self._client._send(line, then)
            await self._client._writer.drain()
            self._client._check(await fut)
        except LockLost:
            raise
        except NotHeld as e:
            raise LockLost(self.name, hold.lost_reason) from e

    async def __aenter__(self):
        if not self._preacquired():
            await self._acquire_or_raise()
        return self

    async def __aexit__(self, exc_type, exc, tb):
        if self._released_inside():
            return False
        try:
            await self.release()
        except LockLost:
            if self._exit_raises(exc_type):
                raise
        return False


@register
class RLock(Lock):
    """A re-entrant aio.Lock, as lockagent.RLock is, with tasks for threads:
    the task holding it acquires it again; other tasks, and other Lock or
    RLock objects of the name, compete; only the holding task releases it."""

    _others_release = False

    def __init__(self, client, name, wait=None, ttl=None, owner=None, **kwargs):
        if owner is not None:
            raise InvalidArgument("owner", owner, "None: an RLock's owner is the RLock and the calling task")
        super().__init__(client, name, wait=wait, ttl=ttl, **kwargs)
        self._id = new_owner("r")

    def _fixed_owner(self):
        return "%s.%s" % (self._id, self._caller())


@register
class MultiLock(CoroutineMixin, MultiLockBase):
    """Several names through an aio.Client, acquired together: all or none.
    The asyncio twin of lockagent.MultiLock: a sequence of one aio.Lock per
    name, in the order given, with ``await acquire()``, ``await release()``,
    ``locked()`` and ``async with``; each acquire is an owner of its own
    unless ``owner=`` is given (then it re-enters).
    Awaiting it acquires it and returns it."""

    _lock_class = Lock

    async def acquire(self, blocking=True, timeout=None, *, wait=None):
        """Acquires every name; returns True, or False if the wait ran out
        (then none is held). Arguments as for lockagent.Lock.acquire."""
        return await self._acquire(self._resolve_wait(blocking, timeout, wait)) is not None

    async def _acquire(self, wait):
        line, grants = self._begin(wait)
        client = self._client
        fresh = [hold for _, hold, new in grants if new]
        for hold in fresh:
            client._track(hold)

        def untrack():
            for hold in fresh:
                client._untrack(hold)
        try:
            tag, fut = client._send(line, self._on_grant(grants))
            await client._writer.drain()
        except BaseException:
            untrack()
            raise
        try:
            client._check(await asyncio.shield(fut))
        except Busy:
            untrack()
            return None
        except LockAgentError:
            untrack()
            raise
        except asyncio.CancelledError:
            await asyncio.shield(client._abandon(tag, fut, [(hold, new) for _, hold, new in grants]))
            raise
        return grants

    async def _acquire_or_raise(self):
        grants = await self._acquire(self.wait)
        if grants is None:
            raise self._busy()
        return grants

    async def _awaited(self):
        for _, hold, _ in await self._acquire_or_raise():
            hold.preacquired = True
        return self

    async def release(self):
        """Releases the calling task's hold of every name still held through
        this MultiLock, as lockagent.MultiLock.release does."""
        errors = []
        for lk in self._held():
            try:
                await lk.release()
            except LockAgentError as e:
                errors.append(e)
        self._raise_first(errors)

    unlock = release

    async def __aenter__(self):
        if not self._preacquired():
            await self._acquire_or_raise()
        return self

    async def __aexit__(self, exc_type, exc, tb):
        if self._released_inside():
            return False
        try:
            await self.release()
        except LockLost:
            if self._exit_raises(exc_type):
                raise
        return False


from ._wire import NoLeader, NotLeader  # noqa: E402
from .aio_election import Election  # noqa: E402 (it builds on Client)
