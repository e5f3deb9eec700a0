"""Client for lock-agent, the per-host daemon that gives local processes
distributed locks over a Unix socket.

    import lockagent

    client = lockagent.Client()            # $LOCK_AGENT_SOCKET or /run/lock-agent/agent.sock
    with client.lock("jobs/nightly", wait=5) as lk:
        do_work(fence=lk.fence)            # lk.lost is set if the lock is lost meanwhile

One Client is one connection, safe to share between threads: requests are
multiplexed by tag and a reader thread routes replies and pushes. A lock is
held while the connection is open (the agent renews it); the agent releases
it the moment the connection closes. The owner defaults to the calling
thread (an id numbered once per process, never reused), so a thread locking
a name it holds re-enters it, and any other thread contends for it.

The asyncio variant with the same surface is ``lockagent.aio``.
"""

import itertools
import socket
import threading

from ._wire import (DEFAULT_SOCKET, Busy, BadName, BadRequest, Cancelled, Conflict, ConnectError, ConnectionClosed,
                    Denied, InternalError, InvalidArgument, InvalidName, LimitReached, LockAgentError, LockLost,
                    LockState, NoQuorum, NotHeld, ShuttingDown, UnknownVerb, check_client_name, check_name,
                    check_owner, check_tag, dev_socket_path, holders_from, holds_from, lock_line, socket_path,
                    status_from, thread_owner, Router)

__all__ = ["Client", "Lock", "LockAgentError", "Busy", "BadRequest", "UnknownVerb", "BadName", "NotHeld",
           "NoQuorum", "Conflict", "Denied", "LimitReached", "Cancelled", "ShuttingDown", "InternalError",
           "ConnectionClosed", "ConnectError", "InvalidArgument", "InvalidName", "LockLost", "socket_path",
           "dev_socket_path", "DEFAULT_SOCKET"]

__version__ = "0.1.0"


class _Call:
    __slots__ = ("event", "reply")

    def __init__(self):
        self.event = threading.Event()
        self.reply = None


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
        self._tags = itertools.count(1)
        self._closed = threading.Event()
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
        for ls in locks.values():
            for lk in ls:
                lk._lose("disconnected")

    def _push(self, kind, f):
        if kind != "LOST":
            return
        with self._mu:
            ls = self._locks.pop((f.get("name"), f.get("owner", "")), [])
        for lk in ls:
            lk._lose(f.get("reason", "unknown"))

    def _send(self, line):
        tag = check_tag(str(next(self._tags)))
        call = _Call()
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

    def _track(self, lk):
        with self._mu:
            self._locks.setdefault((lk.name, lk.owner), []).append(lk)

    def _untrack(self, lk):
        with self._mu:
            ls = self._locks.get((lk.name, lk.owner), [])
            if lk in ls:
                ls.remove(lk)
            if not ls:
                self._locks.pop((lk.name, lk.owner), None)

    # -- API ------------------------------------------------------------------

    @property
    def closed(self):
        """True once the connection to the agent is gone."""
        return self._closed.is_set()

    def close(self):
        """Closes the connection; the agent releases every lock it held."""
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

    def lock(self, name, wait=None, ttl=None, owner=None, on_lost=None):
        """Acquires ``name`` and returns a held :class:`Lock`.

        ``name``: 1-200 characters of [A-Za-z0-9._:/@+-].
        ``wait``: seconds to wait (0 tries once; None waits forever), then :class:`Busy`;
        negative is an InvalidArgument.
        ``ttl``: seconds (more than 0) the lock may last before it ends by itself; None keeps it while connected.
        ``owner``: 1-64 characters of [A-Za-z0-9._:-]; defaults to the calling thread (an id
        never given to another thread, unlike its ident), so the same thread re-enters.
        A name, owner or option the protocol does not accept raises InvalidArgument
        (InvalidName for a name) before anything is sent.
        ``on_lost(lock)``: called from the reader thread if the lock is lost; must not block.
        If the wait is interrupted (KeyboardInterrupt, ...), it is cancelled at the agent,
        and a grant that won the race is released.
        """
        owner = check_owner(owner) if owner is not None else thread_owner()
        line = lock_line(name, owner, wait, ttl)
        lk = Lock(self, name, owner, on_lost)
        self._track(lk)
        try:
            tag, call = self._send(line)
        except BaseException:
            self._untrack(lk)
            raise
        try:
            reply = self._wait(call)
        except LockAgentError:
            self._untrack(lk)
            raise
        except BaseException:
            self._abandon(tag, call, lk)
            raise
        lk._granted(reply.fields)
        return lk

    def _abandon(self, tag, call, lk):
        try:
            self._do("CANCEL " + tag)
            reply = self._wait(call)
            lk._granted(reply.fields)
            lk.unlock()
        except LockAgentError:
            pass
        finally:
            self._untrack(lk)

    def status(self):
        """The agent's status: masters and their state, sessions, holds, waiters."""
        return status_from(self._do("STATUS"))

    def who(self, name):
        """The current holders of ``name``, on any host."""
        return holders_from(self._do("WHO " + check_name(name)))

    def holds(self):
        """The locks this connection holds."""
        return holds_from(self._do("HOLDS"))


class Lock(LockState):
    """A held lock. Use it as a context manager to unlock on the way out,
    exceptions included. ``lost`` is a threading.Event set when the lock ends
    without unlock (``lost_reason`` says why: quorum, expired, revoked,
    shutdown, disconnected)."""

    def __init__(self, client, name, owner, on_lost=None):
        super().__init__(client, name, owner, on_lost)
        self.lost = threading.Event()

    def unlock(self):
        """Releases the lock (one re-entry of it). Raises LockLost if it was lost."""
        self._check_unlock()
        self._client._do(self._unlock_line())
        self._released = True
        self._client._untrack(self)

    def extend(self, ttl):
        """Sets the lease to ``ttl`` seconds from now; returns the new validity in seconds."""
        line = self._extend_line(ttl)
        return self._extended(self._client._do(line))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if not self.lost.is_set() and not self._released:
            try:
                self.unlock()
            except ConnectionClosed:
                pass  # the agent released it with the connection
        return False
