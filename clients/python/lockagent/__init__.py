"""Client for lock-agent, the per-host daemon that gives local processes
distributed locks over a Unix socket.

    import lockagent

    client = lockagent.Client()            # see socket_path(): $LOCK_AGENT_SOCKET, the system or the -dev socket
    with client.lock("jobs/nightly", wait=5) as lk:
        do_work(fence=lk.fence)            # lk.lost is set if the lock is lost meanwhile
                                           # and leaving the block then raises LockLost

One Client is one connection, safe to share between threads: requests are
multiplexed by tag and a reader thread routes replies and pushes. A lock is
held while the connection is open (the agent renews it); the agent releases
it the moment the connection closes. Each Lock is an owner of its own, as a
threading.Lock or a redis-py Lock is: two Lock objects of one name compete,
in one thread or many, and a Lock acquired again waits for its release.
Re-entry is asked for: lockagent.RLock (the RLock and the calling thread), or
an explicit owner= (every Lock passing it re-enters).

``client.lock_all(names, ...)`` takes several names at once, all or none,
and returns a MultiLock: one Lock per name, in the order given.

Names, owners and every option are checked before anything is sent; a bad
one raises InvalidArgument (InvalidName for a name), a ValueError.

The asyncio variant with the same surface is ``lockagent.aio``.
"""

import itertools
import queue
import socket
import threading
import time

from ._wire import (DEFAULT_SOCKET, MAX_NAMES_LEN, Busy, BadName, BadRequest, Cancelled, Conflict, ConnectError, ConnectionClosed, Denied,
                    InternalError, InvalidArgument, InvalidName, Leader, LimitReached, LockAgentError, LockBase, LockLost,
                    MultiLockBase, NoLeader, NoQuorum, NotHeld, NotLeader, Observed, SettingsDiffer, ShuttingDown, UnknownVerb, check_client_name,
                    check_fence, check_name, check_tag, decode_value, dev_socket_path, encode_value, holders_from,
                    holds_from, lock_line, new_owner, revoke_line, socket_path, status_from, thread_owner, Router)

__all__ = ["Client", "Lock", "RLock", "MultiLock", "Observation", "Leader", "encode_value", "decode_value", "MAX_NAMES_LEN", "LockAgentError", "Busy", "BadRequest", "UnknownVerb", "BadName", "NotHeld",
           "NoQuorum", "Conflict", "SettingsDiffer", "Denied", "LimitReached", "Cancelled", "ShuttingDown", "InternalError",
           "ConnectionClosed", "ConnectError", "InvalidArgument", "InvalidName", "LockLost", "socket_path",
           "dev_socket_path", "DEFAULT_SOCKET", "Election", "NoLeader", "NotLeader"]

__version__ = "0.1.0"


class _Call:
    __slots__ = ("event", "reply", "then")

    def __init__(self, then=None):
        self.event = threading.Event()
        self.reply = None
        self.then = then  # called with the reply by the reader, before any later line; must not block


class Client:
    """One connection to the agent. Close it (or use ``with``) to release everything it holds."""

    def __init__(self, path=None, connect_timeout=5.0, client_name="python"):
        """Connects to the agent at ``path`` (default: socket_path()); raises
        ConnectError if nothing answers there. ``client_name`` (1-64 characters
        of [A-Za-z0-9._:/@+-]) names the client in the agent's logs."""
        check_client_name(client_name)
        path = socket_path(path)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(connect_timeout)
        try:
            self._sock.connect(path)
        except OSError as e:
            self._sock.close()
            raise ConnectError(path, e) from e
        self._sock.settimeout(None)
        self._wlock = threading.Lock()
        self._mu = threading.Lock()
        self._calls = {}
        self._locks = {}
        self._observed = {}  # name -> Observed
        self._obs_mu = threading.Lock()  # orders OBSERVE/UNOBSERVE with _observed's changes; before _mu
        self._tags = itertools.count(1)
        self._closed = threading.Event()
        self._down = threading.Event()  # set once _shutdown has ended every hold
        self._reader = threading.Thread(target=self._read, name="lockagent-reader", daemon=True)
        self._reader.start()
        hello = self._do("HELLO proto=1 client=" + client_name)
        self.session = hello.fields.get("session")

    # -- plumbing -----------------------------------------------------------

    def _read(self):
        router = Router()
        f = self._sock.makefile("r", encoding="utf-8", errors="replace", newline="\n")
        try:
            for line in f:
                routed = router.line(line.rstrip("\r\n"))
                if routed is None:
                    continue
                if routed[0] == "push":
                    self._push(routed[1], routed[2])
                    continue
                with self._mu:
                    call = self._calls.pop(routed[1], None)
                if call is not None:
                    if call.then is not None:
                        call.then(routed[2])
                    call.reply = routed[2]
                    call.event.set()
        except (OSError, ValueError):
            pass
        finally:
            self._shutdown()

    def _shutdown(self):
        with self._mu:
            calls, self._calls = self._calls, {}
            locks, self._locks = self._locks, {}
            self._closed.set()
        for call in calls.values():
            call.event.set()
        with self._mu:
            observed, self._observed = self._observed, {}
        for o in observed.values():
            for observer in o.observers:
                observer._queue.put(None)
        for holds in locks.values():
            for hold in holds:
                hold.lose("disconnected")
        self._down.set()

    def _push(self, kind, f):
        if kind == "LEADER":
            with self._mu:
                observed = self._observed.get(f.name)
                if observed is not None:
                    for o in observed.deliver(f):
                        o._queue.put(f)
            return
        if kind == "WANTED":
            with self._mu:
                holds = list(self._locks.get((f.get("name"), f.get("owner", "")), []))
            for hold in holds:
                hold.wanted.set()
            return
        if kind != "LOST":
            return
        with self._mu:
            holds = self._locks.pop((f.get("name"), f.get("owner", "")), [])
        for hold in holds:
            hold.lose(f.get("reason", "unknown"), f.get("why"))

    def _send(self, line, then=None):
        tag = check_tag(str(next(self._tags)))
        call = _Call(then)
        with self._mu:
            if self._closed.is_set():
                raise ConnectionClosed("the connection to the agent is closed")
            self._calls[tag] = call
        try:
            with self._wlock:
                self._sock.sendall((tag + " " + line + "\n").encode())
        except OSError as e:
            with self._mu:
                self._calls.pop(tag, None)
            raise ConnectionClosed(str(e)) from e
        return tag, call

    def _wait(self, call):
        call.event.wait()
        if call.reply is None:
            raise ConnectionClosed("the connection to the agent is closed")
        err = call.reply.error()
        if err is not None:
            raise err
        return call.reply

    def _do(self, line):
        return self._wait(self._send(line)[1])

    def _track(self, hold):
        with self._mu:
            self._locks.setdefault((hold.name, hold.owner), []).append(hold)

    def _untrack(self, hold):
        with self._mu:
            holds = self._locks.get((hold.name, hold.owner), [])
            if hold in holds:
                holds.remove(hold)
            if not holds:
                self._locks.pop((hold.name, hold.owner), None)

    # -- API ------------------------------------------------------------------

    @property
    def closed(self):
        """True once the connection to the agent is gone."""
        return self._closed.is_set()

    QUIT_GRACE = 10.0  # seconds close() waits for the agent after QUIT

    def close(self):
        """Ends the connection: says QUIT, and the agent releases every lock
        of the connection in the masters, then closes it; close() returns
        once it has (at most QUIT_GRACE, 10 seconds, after which it closes
        the connection itself, and the agent releases them as for any closed
        connection). So when close() returns, the next candidate may be
        elected already."""
        if not self._closed.is_set():
            try:
                _, call = self._send("QUIT")
            except ConnectionClosed:
                call = None
            deadline = time.monotonic() + self.QUIT_GRACE
            if call is not None and call.event.wait(self.QUIT_GRACE) and call.reply is not None \
                    and call.reply.kind == "OK":
                self._closed.wait(max(deadline - time.monotonic(), 0))
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._reader.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def ping(self):
        self._do("PING")

    def lock(self, name, wait=None, ttl=None, owner=None, on_lost=None, raise_on_lost=True, shared=False, limit=None,
             fair=False, value=None, notify_wanted=False, delay=None, min_hold=None):
        """Acquires ``name`` and returns the held :class:`Lock`; raises Busy if
        ``wait`` ran out. Use it in a ``with`` statement to release it on the way
        out. The arguments are those of :class:`Lock`.

        If the wait is interrupted (KeyboardInterrupt, ...), it is cancelled at
        the agent, and a grant that won the race is released.
        """
        lk = Lock(self, name, wait=wait, ttl=ttl, owner=owner, on_lost=on_lost, raise_on_lost=raise_on_lost,
                  shared=shared, limit=limit, fair=fair, value=value, notify_wanted=notify_wanted, delay=delay,
                  min_hold=min_hold)
        hold = lk._acquire(lk.wait)
        if hold is None:
            raise Busy("%s: the wait ran out" % name)
        hold.preacquired = True
        return lk

    def lock_all(self, names, wait=None, ttl=None, owner=None, on_lost=None, raise_on_lost=True, shared=False,
                 limit=None, fair=False, value=None, notify_wanted=False, delay=None, min_hold=None):
        """Acquires every name in ``names`` at once, or none of them, and
        returns the held :class:`MultiLock`: one Lock per name, in the order
        given. Raises Busy if ``wait`` (for the whole) ran out; then none is
        held. Use it in a ``with`` statement to release them all on the way
        out. The arguments are those of :class:`MultiLock`.

        If the wait is interrupted (KeyboardInterrupt, ...), it is cancelled at
        the agent, and a grant that won the race is released.
        """
        ml = MultiLock(self, names, wait=wait, ttl=ttl, owner=owner, on_lost=on_lost, raise_on_lost=raise_on_lost,
                       shared=shared, limit=limit, fair=fair, value=value, notify_wanted=notify_wanted, delay=delay,
                       min_hold=min_hold)
        grants = ml._acquire(ml.wait)
        if grants is None:
            raise ml._busy()
        for _, hold, _ in grants:
            hold.preacquired = True
        return ml

    def _abandon(self, tag, call, grants):
        """Cancels an interrupted LOCK and gives back a grant that won the
        race: one (hold, fresh) per name it asked for. The reader put a grant
        in the books; each UNLOCK's answer takes it out, so that an abandon
        interrupted in turn leaves the books what the agent holds."""
        granted = False
        try:
            self._do("CANCEL " + tag)
            call.event.wait()
            granted = call.reply is not None and call.reply.kind == "OK"
            if granted:
                for hold, _ in grants:  # one UNLOCK each: one lost meanwhile must not keep the others
                    try:
                        hold.lock._unlock(hold._with_unlocking())
                    except LockAgentError:
                        pass
        except LockAgentError:
            pass
        finally:
            if not granted:
                for hold, fresh in grants:
                    if fresh:
                        self._untrack(hold)

    def status(self):
        """The agent's status: masters and their state, sessions, holds, waiters."""
        return status_from(self._do("STATUS"))

    def who(self, name):
        """The current holders of ``name``, on any host: a list of dicts
        (agent, pid, uid, owner, mode, fence, since_ms, and limit and slot:
        ints for a semaphore hold, None for a lock), whose ``queued``
        attribute is the length of the name's fair queue across agents (None
        if the agent does not report it)."""
        return holders_from(self._do("WHO " + check_name(name)))

    def holds(self):
        """The locks this connection holds: dicts of name, owner, fence, count,
        mode, validity (seconds), and limit and slot (None for a lock)."""
        return holds_from(self._do("HOLDS"))

    def campaign(self, name, value, wait=None, **kwargs):
        """Runs for leader of ``name``: a fair lock (candidates are elected in
        arrival order, across agents) carrying ``value`` (any text), which
        observers see. Returns the held :class:`Lock` once elected; its
        ``fence`` is the term, strictly increasing per name. Resign with
        release() (or leave its ``with``); leadership ends as any hold does
        (``lost``). Other arguments are lock()'s; raises Busy if ``wait`` ran out."""
        return self.lock(name, wait=wait, fair=True, value=value, **kwargs)

    def observe(self, name):
        """An :class:`Observation` of who leads ``name``: an iterator of
        :class:`Leader`, the current one first, then every change of leader
        or of its value (``none`` while there is none). close() it (or leave
        its ``with``) to stop; it ends when the connection closes."""
        return Observation(self, check_name(name))

    def leader(self, name):
        """Who leads ``name`` now (a :class:`Leader`, ``none`` if nobody):
        the first push of an OBSERVE of its own, which the agent reads from
        the masters after the OBSERVE arrived, never a term that had ended
        before (an observation of the name on this Client shares the
        observation, not the answer)."""
        with Observation(self, check_name(name)) as observation:
            return next(observation)

    def check(self, name, fence):
        """True if ``fence`` is the fence of a current holder of ``name``, as a
        majority of masters records it (a resource handed a fence can ask
        before acting on it). For a name cached by another agent, a fence whose
        holder let go may read current for up to a renewal tick (see
        docs/protocol.md, CHECK); to refuse a holder the moment it lets go,
        compare fences."""
        line = "CHECK %s fence=%d" % (check_name(name), check_fence(fence))
        return self._do(line).fields.get("current") == "true"

    def revoke(self, name, agent=None, reason=None):
        """Ends the holds of ``name`` wherever they are (only those of agent
        ``agent``, an agent.id, if given); each holder's lock is lost with
        reason "revoked" (``lost_reason``), and ``reason``, a word of
        [a-z0-9_] if given, as its ``lost_why``. An operator's
        verb: the agent refuses it (Denied) without an ACL rule granting
        "revoke" (or to root without an acl block). Returns how many holds
        it ended."""
        return int(self._do(revoke_line(name, agent, reason)).fields.get("n", 0))

    def _join(self, observer):
        """Adds an observer of its name and sends its OBSERVE; it gets the
        push that answers it, and every change after. OBSERVE and UNOBSERVE
        go out under _obs_mu, in the order of _observed's changes, so an
        UNOBSERVE of an earlier observer never ends a later one's."""
        def answered(reply):
            with self._mu:
                observer._answered = True
                observer._wants_next = reply.kind == "OK"
        with self._obs_mu:
            with self._mu:
                if self._closed.is_set():
                    raise ConnectionClosed("the connection to the agent is closed")
                observed = self._observed.get(observer.name)
                if observed is None:
                    observed = self._observed[observer.name] = Observed()
                observed.observers.append(observer)
            try:
                return self._send("OBSERVE " + observer.name, answered)[1]
            except BaseException:
                self._leave_locked(observer, unobserve=False)
                raise

    def _leave(self, observer, unobserve=True):
        """Removes an observer; the last one out sends UNOBSERVE (unless
        ``unobserve`` is False: its OBSERVE was refused)."""
        with self._obs_mu:
            return self._leave_locked(observer, unobserve)

    def _leave_locked(self, observer, unobserve):
        with self._mu:
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


class Observation:
    """Who leads a name, as the agent pushes it: iterate it for each
    :class:`Leader` (blocking until the next), the leader as read after the
    observation began first; the iteration ends once it is closed or the
    connection is. Observations of one name on one Client share one
    observation at the agent."""

    def __init__(self, client, name):
        self.name = name
        self._client = client
        self._queue = queue.SimpleQueue()
        self._closed = False
        self._answered = False  # under the client's _mu: its OBSERVE was answered
        self._wants_next = False  # under the client's _mu
        call = client._join(self)
        try:
            client._wait(call)
        except BaseException as e:
            self._closed = True
            refused = isinstance(e, LockAgentError) and not isinstance(e, ConnectionClosed)
            client._leave(self, unobserve=not refused)
            raise

    def __iter__(self):
        return self

    def __next__(self):
        if self._closed:
            raise StopIteration
        leader = self._queue.get()
        if leader is None:
            self._closed = True
            raise StopIteration
        return leader

    def close(self):
        """Stops observing (UNOBSERVE, when no other observation of the name
        on this Client is left)."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        call = self._client._leave(self)
        if call is not None:
            try:
                self._client._wait(call)
            except LockAgentError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Lock(LockBase):
    """A distributed lock through ``client``, usable like threading.Lock:
    ``acquire()``, ``release()``, ``locked()`` and ``with``. Made directly it is
    not yet held; ``client.lock(...)`` returns one already acquired.

    ``name``: 1-200 characters of [A-Za-z0-9._:/@+-].
    ``wait``: seconds acquire() and ``with`` wait by default: 0 tries once,
    None (the default) waits forever; negative is an InvalidArgument.
    ``ttl``: seconds each hold lasts at most before it ends by itself (lost,
    reason "expired"); None keeps it while the client is connected.
    ``owner``: 1-64 characters of [A-Za-z0-9._:-]; every acquire passing the
    same owner re-enters (acquire counts up, release counts down). By default
    (None) each acquire is an owner of its own: a second acquire, from any
    thread, through this Lock or another, waits for the first's release, as
    with threading.Lock; any thread may release (RLock re-enters per thread).
    ``on_lost(lock)``: called from the reader thread if a hold is lost; must not block.
    ``shared=True``: a read hold (readers together, a writer alone).
    ``limit``: an int from 1 to 4096 makes ``name`` a semaphore of that many
    slots (``slot``); not with shared=True.
    ``fair``: True to be granted in arrival order across all agents
    (fair=true); with wait=0 it tries once and never queues. True or False
    only. An agent without fair queues refuses it (BadRequest).
    ``raise_on_lost``: leaving a ``with`` block whose hold was lost raises
    LockLost (with the reason) unless another exception is already on its way
    out. release() of a lost hold raises LockLost (once: it is then
    forgotten, and another release() raises NotHeld); extend() and
    proclaim() of it raise LockLost too. LockLost is a NotHeld.

    ``value``: text (any: it is percent-encoded on the wire and decoded
    back) attached to the hold, at most 512 bytes encoded; WHO shows it and
    observers of the name see it. ``proclaim(value)`` replaces it.
    ``notify_wanted=True``: ``wanted`` (a threading.Event) is set when a
    conflicting request for the name starts waiting, on any agent.
    ``delay``: seconds (0 to 300) the name stays unavailable to everyone
    after the hold ends uncleanly (connection closed without release, process
    died, lost, revoked); None: the agent's lock.lock_delay (default 0).
    ``min_hold``: seconds (0 to 86400) from the grant before which a release
    leaves the name held by nobody until then.

    ``lost`` is a threading.Event set when the hold ends without release;
    ``lost_reason``, ``fence``, ``count``, ``owner``, ``wanted`` and
    ``value`` describe the hold the calling thread acquired, else the only
    or the latest one.
    """

    def __init__(self, client, name, wait=None, ttl=None, owner=None, on_lost=None, raise_on_lost=True,
                 shared=False, limit=None, fair=False, value=None, notify_wanted=False, delay=None, min_hold=None):
        self._mu = threading.Lock()
        super().__init__(client, name, wait, ttl, owner, on_lost, raise_on_lost, shared, limit, fair, value,
                         notify_wanted, delay, min_hold)

    @staticmethod
    def _event():
        return threading.Event()

    @staticmethod
    def _caller():
        return thread_owner()

    def acquire(self, blocking=True, timeout=None, *, wait=None):
        """Acquires the lock; returns True, or False if the wait ran out.

        ``wait`` (or its alias ``timeout``): seconds to wait, 0 tries once,
        None uses the Lock's ``wait`` (default forever); negative is an
        InvalidArgument (unlike threading.Lock, -1 does not mean forever).
        ``blocking=False`` tries once.
        """
        return self._acquire(self._resolve_wait(blocking, timeout, wait)) is not None

    def _acquire(self, wait):
        owner = self._owner_for_acquire()
        line = lock_line(self.name, owner, wait, self.ttl, self.shared, self.limit, self.fair, self._extra)
        hold, fresh = self._begin(owner)
        client = self._client
        if fresh:
            client._track(hold)  # before sending, so a LOST racing the reply finds it
        try:
            tag, call = client._send(line, self._on_grant(hold))
        except BaseException:
            if fresh:
                client._untrack(hold)
            raise
        try:
            client._wait(call)
        except Busy:
            if fresh:
                client._untrack(hold)
            return None
        except LockAgentError:
            if fresh:
                client._untrack(hold)
            raise
        except BaseException:
            client._abandon(tag, call, [(hold, fresh)])
            raise
        return hold

    def release(self):
        """Releases the hold the calling thread acquired (one re-entry of it),
        or the only hold when another thread took it. Raises LockLost if it was
        lost, NotHeld if this Lock does not hold it (a LockLost is a NotHeld).

        If the call is interrupted after the UNLOCK went out, the agent's
        answer still reaches the books: locked() then says False, and
        another release() raises NotHeld."""
        self._unlock(self._to_release())

    unlock = release  # the name of earlier versions

    def _unlock(self, hold):
        client = self._client
        try:
            _, call = client._send(hold.unlock_line(), self._on_unlock_reply(hold))
        except BaseException:
            hold.unlocking = False
            raise
        try:
            client._wait(call)
        except NotHeld as e:
            raise self._lost_on_unlock(hold, e) from e
        except ConnectionClosed as e:
            client._down.wait(5)  # let the reader mark what the closed connection took
            self._after_closed_unlock(hold, e)

    def extend(self, ttl):
        """Sets the hold's end to ``ttl`` seconds from now (earlier or later; a hold
        without ttl gets one); returns the new validity in seconds. Raises
        LockLost if the hold is gone (as release() would), NotHeld if none."""
        hold, line = self._extend_line(ttl)
        self._on_agent(hold, line, self._on_extend_reply(hold))
        return hold.validity

    def proclaim(self, value):
        """Replaces the hold's value (any text); observers see the change.
        Returns once a majority of masters has it; raises LockLost if the
        hold is gone, NotHeld if none."""
        hold, line = self._proclaim_line(value)
        self._on_agent(hold, line, self._on_reply(hold))
        hold.value = value

    def _on_agent(self, hold, line, then):
        try:
            self._client._wait(self._client._send(line, then)[1])
        except LockLost:
            raise
        except NotHeld as e:
            raise LockLost(self.name, hold.lost_reason) from e

    def __enter__(self):
        if not self._preacquired() and self._acquire(self.wait) is None:
            raise Busy("%s: the wait ran out" % self.name)
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._released_inside():
            return False
        try:
            self.release()
        except LockLost:
            if self._exit_raises(exc_type):
                raise
        return False


class RLock(Lock):
    """A re-entrant Lock, as threading.RLock is: the thread holding it
    acquires it again (``count`` goes up; one release() each), while other
    threads, and other Lock or RLock objects of the name, compete for it. Only
    the thread holding it releases it (another gets NotHeld). The arguments
    are Lock's, but for ``owner``: the owner is this RLock and the calling
    thread together."""

    _others_release = False

    def __init__(self, client, name, wait=None, ttl=None, owner=None, **kwargs):
        if owner is not None:
            raise InvalidArgument("owner", owner, "None: an RLock's owner is the RLock and the calling thread "
                                  "(a Lock with owner= re-enters for whoever passes that owner)")
        super().__init__(client, name, wait=wait, ttl=ttl, **kwargs)
        self._id = new_owner("r")

    def _fixed_owner(self):
        return "%s.%s" % (self._id, self._caller())


class MultiLock(MultiLockBase):
    """Several names through ``client``, acquired together: all of them or
    none. It is a sequence of one :class:`Lock` per name, in the order given
    (``ml[0].fence``, ``for lk in ml``), usable like threading.Lock:
    ``acquire()``, ``release()``, ``locked()`` and ``with``. Made directly it
    is not yet held; ``client.lock_all(...)`` returns one already acquired.

    The agent claims the names in byte order, whatever order they are given,
    so two multi-locks over overlapping names never deadlock; ``wait`` bounds
    the whole. Once granted, each Lock is its own hold: its own ``fence``,
    ``slot``, ``count`` and ``lost`` event; a LOST for one name marks only its
    Lock; any of them may be released on its own (``ml[1].release()``).

    ``names``: a list (not one string) of names, each once, that take at most
    MAX_NAMES_LEN (3921) bytes with a space between each, so that the request
    fits one line; else InvalidArgument, and nothing is sent. The other
    arguments are those of :class:`Lock`
    and apply to every name; all names share one owner (by default a new one
    for each acquire, so a second acquire waits for the first's release, as
    with Lock; ``owner=`` re-enters), and ``on_lost`` is called with the Lock
    of the name that was lost.
    """

    _lock_class = Lock

    def acquire(self, blocking=True, timeout=None, *, wait=None):
        """Acquires every name; returns True, or False if the wait ran out
        (then none is held). Arguments as for Lock.acquire."""
        return self._acquire(self._resolve_wait(blocking, timeout, wait)) is not None

    def _acquire(self, wait):
        line, grants = self._begin(wait)
        client = self._client
        fresh = [hold for _, hold, new in grants if new]
        for hold in fresh:
            client._track(hold)  # before sending, so a LOST racing the reply finds it

        def untrack():
            for hold in fresh:
                client._untrack(hold)
        try:
            tag, call = client._send(line, self._on_grant(grants))
        except BaseException:
            untrack()
            raise
        try:
            client._wait(call)
        except Busy:
            untrack()
            return None
        except LockAgentError:
            untrack()
            raise
        except BaseException:
            client._abandon(tag, call, [(hold, new) for _, hold, new in grants])
            raise
        return grants

    def release(self):
        """Releases the calling thread's hold of every name still held through
        this MultiLock (one re-entry of each), skipping names already released
        on their own. Raises LockLost, after releasing the others, if one was
        lost; NotHeld if none is held."""
        errors = []
        for lk in self._held():
            try:
                lk.release()
            except LockAgentError as e:
                errors.append(e)
        self._raise_first(errors)

    unlock = release

    def __enter__(self):
        if not self._preacquired() and self._acquire(self.wait) is None:
            raise self._busy()
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._released_inside():
            return False
        try:
            self.release()
        except LockLost:
            if self._exit_raises(exc_type):
                raise
        return False


from .election import Election  # noqa: E402 (it builds on Client)
