"""The wire format shared by the sync and asyncio clients."""

import itertools
import math
import numbers
import os
import re
import threading

DEFAULT_SOCKET = "/run/lock-agent/agent.sock"


def dev_socket_path():
    """Where ``lock-agent run -dev`` listens: $XDG_RUNTIME_DIR/lock-agent/agent.sock,
    or, without XDG_RUNTIME_DIR, lock-agent-UID/agent.sock in $TMPDIR (default /tmp)."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return os.path.join(xdg, "lock-agent", "agent.sock")
    return os.path.join(os.environ.get("TMPDIR") or "/tmp", "lock-agent-%d" % os.getuid(), "agent.sock")


def socket_path(path=None):
    """The agent's socket: ``path`` if given; else $LOCK_AGENT_SOCKET; else
    /run/lock-agent/agent.sock if it exists; else the -dev socket (dev_socket_path())."""
    if path:
        return path
    env = os.environ.get("LOCK_AGENT_SOCKET")
    if env:
        return env
    if os.path.exists(DEFAULT_SOCKET):
        return DEFAULT_SOCKET
    return dev_socket_path()


class LockAgentError(Exception):
    """An ERR reply from the agent, or a client-side failure. ``code`` is the wire code."""

    code = "INTERNAL"

    def __init__(self, message="", code=None):
        super().__init__(message)
        if code:
            self.code = code


class Busy(LockAgentError):
    """The lock was not granted within its wait."""
    code = "BUSY"


class BadRequest(LockAgentError):
    code = "BAD_REQUEST"


class UnknownVerb(LockAgentError):
    code = "UNKNOWN_VERB"


class BadName(LockAgentError):
    code = "BAD_NAME"


class NotHeld(LockAgentError):
    code = "NOT_HELD"


class NoQuorum(LockAgentError):
    code = "NO_QUORUM"


class Conflict(LockAgentError):
    code = "CONFLICT"


class Denied(LockAgentError):
    code = "DENIED"


class LimitReached(LockAgentError):
    code = "LIMIT"


class Cancelled(LockAgentError):
    code = "CANCELLED"


class ShuttingDown(LockAgentError):
    code = "SHUTTING_DOWN"


class InternalError(LockAgentError):
    code = "INTERNAL"


class ConnectionClosed(LockAgentError):
    """The connection to the agent is gone."""
    code = "CLOSED"


class ConnectError(LockAgentError, ConnectionError):
    """The client could not connect to the agent's socket (``path``); the
    message says how to start an agent or point the client at one."""
    code = "CONNECT"

    def __init__(self, path, cause):
        super().__init__(
            "cannot connect to the agent at %s: %s; is the agent running? Start one with "
            "`lock-agent run -dev`, or set LOCK_AGENT_SOCKET to the socket it prints "
            "(without it, clients try %s, then %s)" % (path, cause, DEFAULT_SOCKET, dev_socket_path()))
        self.path = path


class InvalidArgument(BadRequest, ValueError):
    """The client refused an argument before sending anything: ``argument``
    (name, owner, wait, ttl, client_name, ...) was ``value``, outside what the
    protocol accepts."""

    def __init__(self, argument, value, want):
        super().__init__("invalid %s %r: want %s" % (argument, value, want))
        self.argument = argument
        self.value = value


class InvalidName(InvalidArgument, BadName):
    """A lock name the client refused before sending anything."""
    code = "BAD_NAME"


class LockLost(LockAgentError):
    """A held lock ended without unlock; ``reason`` says why."""
    code = "LOST"

    def __init__(self, name, reason):
        super().__init__("lock %s lost: %s" % (name, reason))
        self.name = name
        self.reason = reason


ERRORS = {cls.code: cls for cls in (BadRequest, UnknownVerb, BadName, NotHeld, NoQuorum, Conflict,
                                      Denied, LimitReached, Cancelled, ShuttingDown, InternalError)}

# What protocol v1 accepts. Every word the client writes is checked against
# these first, so a name or value can never be read as another word or request.
_NAME = re.compile(r"[A-Za-z0-9._:/@+-]{1,200}")
_OWNER = re.compile(r"[A-Za-z0-9._:-]{1,64}")
_CLIENT_NAME = re.compile(r"[A-Za-z0-9._:/@+-]{1,64}")
_TAG = re.compile(r"[A-Za-z0-9._-]{1,32}")
YEAR = 365 * 24 * 3600  # the agent's bound on any duration, in seconds


def _matches(pattern, value):
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def check_name(name):
    if not _matches(_NAME, name):
        raise InvalidName("name", name, "1-200 characters of [A-Za-z0-9._:/@+-]")
    return name


def check_owner(owner):
    if not _matches(_OWNER, owner):
        raise InvalidArgument("owner", owner, "1-64 characters of [A-Za-z0-9._:-]")
    return owner


def check_client_name(name):
    if not _matches(_CLIENT_NAME, name):
        raise InvalidArgument("client_name", name, "1-64 characters of [A-Za-z0-9._:/@+-]")
    return name


def check_tag(tag):
    if not _matches(_TAG, tag):
        raise InvalidArgument("tag", tag, "1-32 characters of [A-Za-z0-9._-]")
    return tag


def ms(argument, seconds, positive=False):
    """``seconds`` (a real number, 0 to one year; more than 0 if ``positive``)
    as whole milliseconds for the wire, rounded up so that a positive duration
    never becomes 0."""
    real = isinstance(seconds, numbers.Real) and not isinstance(seconds, bool)
    if not (real and 0 <= seconds <= YEAR and (seconds > 0 or not positive)):
        want = "seconds, more than 0 and at most one year" if positive else \
            "seconds, 0 (try once) to one year, or None (wait forever)"
        raise InvalidArgument(argument, seconds, want)
    # Drop float noise (0.3 * 1000 is 300.00000000000006) before rounding up.
    return str(math.ceil(round(seconds * 1000, 6)))


def check_wait(wait):
    if wait is not None:
        ms("wait", wait)
    return wait


def check_ttl(ttl):
    if ttl is not None:
        ms("ttl", ttl, positive=True)
    return ttl


def lock_line(name, owner, wait, ttl):
    parts = ["LOCK", check_name(name), "owner=" + check_owner(owner)]
    if wait is not None:
        parts.append("wait=" + ms("wait", wait))
    if ttl is not None:
        parts.append("ttl=" + ms("ttl", ttl, positive=True))
    return " ".join(parts)


# Owners made for threads and tasks: numbered once per process, never reused,
# unlike thread idents and id()s, which a new thread or task may get again.
_owner_ids = itertools.count(1)
_thread = threading.local()


def new_owner(prefix):
    return "%s%d" % (prefix, next(_owner_ids))


def thread_owner():
    """The calling thread's owner id, the same for the thread's whole life."""
    try:
        return _thread.owner
    except AttributeError:
        _thread.owner = owner = new_owner("t")
        return owner


def fields(words):
    out = {}
    for w in words:
        k, sep, v = w.partition("=")
        if sep:
            out[k] = v
    return out


class Reply:
    """A final reply: kind (OK, BUSY, ERR), its key=value fields, and DATA lines before it."""

    __slots__ = ("kind", "fields", "words", "data")

    def __init__(self, kind, words, data):
        self.kind = kind
        self.words = words
        self.fields = fields(words)
        self.data = data

    def error(self):
        if self.kind == "OK":
            return None
        if self.kind == "BUSY":
            return Busy("the wait ran out")
        if self.kind == "ERR" and self.words:
            code, text = self.words[0], " ".join(self.words[1:])
            return ERRORS.get(code, InternalError)(text, code=code if code in ERRORS else "INTERNAL")
        return InternalError("unexpected reply %s" % self.kind)


class Router:
    """Turns lines into replies and pushes. Not thread-safe: one reader owns it."""

    def __init__(self):
        self.data = {}

    def line(self, line):
        """Returns ("reply", tag, Reply), ("push", kind, fields-with-name), or None."""
        words = line.split()
        if len(words) < 2:
            return None
        if words[0] == "*":
            f = fields(words[2:])
            if words[1] == "LOST" and len(words) > 2:
                f["name"] = words[2]
            return ("push", words[1], f)
        tag, kind = words[0], words[1]
        if kind == "DATA":
            self.data.setdefault(tag, []).append(fields(words[2:]))
            return None
        return ("reply", tag, Reply(kind, words[2:], self.data.pop(tag, [])))


def status_from(reply):
    f = reply.fields
    return {
        "agent": f.get("agent"),
        "sessions": int(f.get("sessions", 0)),
        "holds": int(f.get("holds", 0)),
        "waiters": int(f.get("waiters", 0)),
        "quorum": int(f.get("quorum", 0)),
        "masters": [{"name": d.get("master"), "address": d.get("address"), "state": d.get("state")} for d in reply.data],
    }


def holders_from(reply):
    out = []
    for d in reply.data:
        out.append({"agent": d.get("agent"), "pid": int(d.get("pid", -1)), "uid": int(d.get("uid", -1)),
                    "owner": d.get("owner", ""), "mode": d.get("mode"), "fence": int(d.get("fence", 0)),
                    "since_ms": int(d.get("since", 0))})
    return out


def holds_from(reply):
    return [{"name": d.get("name"), "owner": d.get("owner", ""), "fence": int(d.get("fence", 0)),
             "count": int(d.get("count", 0)), "mode": d.get("mode"),
             "validity": int(d.get("validity", 0)) / 1000.0} for d in reply.data]


class LockState:
    """What the sync and asyncio Lock share: the grant's fields and the loss.
    Subclasses set ``self.lost`` to their kind of Event before use."""

    def __init__(self, client, name, owner, on_lost=None):
        self._client = client
        self.name = name
        self.owner = owner
        self.fence = 0
        self.count = 0
        self.validity = 0.0
        self.lost_reason = None
        self._on_lost = on_lost
        self._released = False

    def _granted(self, f):
        self.fence = int(f.get("fence", 0))
        self.count = int(f.get("count", 0))
        self.validity = int(f.get("validity", 0)) / 1000.0

    def _lose(self, reason):
        if self.lost.is_set() or self._released:
            return
        self.lost_reason = reason
        self.lost.set()
        if self._on_lost is not None:
            try:
                self._on_lost(self)
            except Exception:  # a callback's failure must not kill the reader
                pass

    def _check_unlock(self):
        if self.lost.is_set():
            raise LockLost(self.name, self.lost_reason)
        if self._released:
            raise NotHeld("%s was already unlocked" % self.name)

    def _unlock_line(self):
        return "UNLOCK %s owner=%s" % (self.name, self.owner)

    def _extend_line(self, ttl):
        return "EXTEND %s ttl=%s owner=%s" % (self.name, ms("ttl", ttl, positive=True), self.owner)

    def _extended(self, reply):
        self.validity = int(reply.fields.get("validity", 0)) / 1000.0
        return self.validity
