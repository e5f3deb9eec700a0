"""The wire format shared by the sync and asyncio clients."""

import collections
import itertools
import math
import numbers
import os
import re
import threading
import urllib.parse

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


class SettingsDiffer(LockAgentError):
    """The agent's cluster settings (lease, drift, ...) differ from those a
    majority of its masters records: it grants nothing until they agree. The
    message names the settings, the agent's and the masters'."""
    code = "SETTINGS"


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


class NoLeader(LockAgentError):
    """Election.leader() found nobody leading (etcd's ErrElectionNoLeader)."""
    code = "NO_LEADER"


class NotLeader(LockAgentError):
    """Election.proclaim() by an election that does not lead (etcd's
    ErrElectionNotLeader)."""
    code = "NOT_LEADER"


class LockLost(NotHeld):
    """A held lock ended without unlock; ``reason`` says why. Whichever call
    finds the hold gone (release, extend, proclaim) raises it, once the
    agent's LOST push or its NOT_HELD answer said so; it is a NotHeld, so
    ``except NotHeld`` takes both "never held" and "held, and gone"."""
    code = "LOST"

    def __init__(self, name, reason):
        super().__init__("lock %s lost: %s" % (name, reason))
        self.name = name
        self.reason = reason


ERRORS = {cls.code: cls for cls in (BadRequest, UnknownVerb, BadName, NotHeld, NoQuorum, Conflict, SettingsDiffer,
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


MIN_TTL = 0.05  # the agent's bounds on ttl= (docs/protocol.md): 50ms ...
MAX_TTL = 30 * 24 * 3600  # ... to 720h


def check_ttl(ttl):
    """A ttl= (of a LOCK or an EXTEND): None, or seconds within the agent's
    bounds, 0.05 (50ms) to 30 days; the agent refuses the rest."""
    if ttl is not None:
        ms("ttl", ttl, positive=True)
        if not MIN_TTL <= ttl <= MAX_TTL:
            raise InvalidArgument("ttl", ttl, "seconds, 0.05 (50ms) to %d (30 days): the agent's bounds" % MAX_TTL)
    return ttl


MAX_LIMIT = 4096


def check_limit(limit, shared):
    """A semaphore's limit: None (a lock) or 1..4096, and not with shared."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgument("limit", limit, "an int from 1 to %d" % MAX_LIMIT)
    if shared and limit > 1:
        raise InvalidArgument("limit", limit, "1 with shared=True (a read lock is not a semaphore)")
    return limit


def check_fair(fair):
    """fair= is True or False: anything else (a "false" string, 0, None) is
    refused rather than read as a truth value."""
    if not isinstance(fair, bool):
        raise InvalidArgument("fair", fair, "True or False")
    return fair


MAX_VALUE_LEN = 512  # a value on the wire, encoded
_VALUE_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:/@+=,-")


def encode_value(value):
    """Any text (a str, UTF-8 on the wire) or bytes, percent-encoded into what
    the protocol takes as a value: [A-Za-z0-9._:/@+=%,-], every other byte
    (and '%') as %XX."""
    try:
        raw = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else bytes(value)
    except UnicodeEncodeError as e:  # a lone surrogate: not text
        raise InvalidArgument("value", value, "text that can be UTF-8 encoded") from e
    return "".join(chr(b) if b in _VALUE_SAFE else "%%%02X" % b for b in raw)


def decode_value(wire):
    """A value read from the agent, decoded: UTF-8 text. A '%' that does not
    start an escape (a value another client wrote unencoded) stays as it is;
    bytes that are not UTF-8 come back as surrogate escapes, so
    encode_value(decode_value(v)) gives v's bytes back."""
    return urllib.parse.unquote(wire, errors="surrogateescape")


def check_value(value, argument="value"):
    """The value for the wire, encoded; at most 512 bytes once encoded."""
    if not isinstance(value, (str, bytes, bytearray)):
        raise InvalidArgument(argument, value, "text (a str) or bytes")
    enc = encode_value(value)
    if len(enc) > MAX_VALUE_LEN:
        raise InvalidArgument(argument, value if len(value) <= 40 else value[:40],
                              "at most %d bytes once percent-encoded (%d here: each byte outside "
                              "[A-Za-z0-9._:/@+=,-] takes three)" % (MAX_VALUE_LEN, len(enc)))
    return enc


def check_bounded(argument, seconds, most, want):
    """A delay= or min_hold=: None (not given) or 0 to ``most`` seconds."""
    if seconds is None:
        return None
    real = isinstance(seconds, numbers.Real) and not isinstance(seconds, bool)
    if not (real and 0 <= seconds <= most):
        raise InvalidArgument(argument, seconds, want)
    return seconds


def check_delay(delay):
    return check_bounded("delay", delay, 300, "seconds, 0 to 300 (5 minutes), or None (the agent's lock.lock_delay)")


def check_min_hold(min_hold):
    return check_bounded("min_hold", min_hold, 24 * 3600, "seconds, 0 to 86400 (24 hours), or None")


def check_bool(argument, value):
    if not isinstance(value, bool):
        raise InvalidArgument(argument, value, "True or False")
    return value


def check_fence(fence):
    if isinstance(fence, bool) or not isinstance(fence, int) or fence <= 0:
        raise InvalidArgument("fence", fence, "a positive int")
    return fence


_AGENT_ID = re.compile(r"[!-<>-~]{1,255}")  # printable ASCII, no space, no '='
_REASON = re.compile(r"[a-z0-9_]{1,32}")


def revoke_line(name, agent=None, reason=None):
    parts = ["REVOKE", check_name(name)]
    if agent is not None:
        if not _matches(_AGENT_ID, agent):
            raise InvalidArgument("agent", agent, "an agent id: 1-255 printable characters, no space or =")
        parts.append("agent=" + agent)
    if reason is not None:
        if not _matches(_REASON, reason):
            raise InvalidArgument("reason", reason, "one word of 1-32 of [a-z0-9_]")
        parts.append("reason=" + reason)
    return " ".join(parts)


MAX_LINE = 4096  # a request line, tag included, without its LF
# How many bytes the names of one LOCK may take, with a space between each:
# what a line leaves once the longest tag and the longest options are counted.
# A longer line is not refused as a bad request: the agent closes the
# connection, and every hold of it with it.
MAX_NAMES_LEN = MAX_LINE - len("T" * 32 + " LOCK ") - len(
    " owner=" + "o" * 64 + " wait=" + ms("wait", YEAR) + " ttl=" + ms("ttl", YEAR) +
    " mode=shared limit=%d fair=true" % MAX_LIMIT)


def check_names(names):
    """The names of a multi-lock as a tuple: a list (or other iterable, not
    one string) of at least one name, none twice (the agent refuses that), all
    in one request line."""
    if isinstance(names, (str, bytes)):
        raise InvalidArgument("names", names, "a list of names (lock() takes one name)")
    try:
        names = tuple(names)
    except TypeError:
        raise InvalidArgument("names", names, "a list of names") from None
    if not names:
        raise InvalidArgument("names", [], "at least one name")
    seen = set()
    for name in names:
        check_name(name)
        if name in seen:
            raise InvalidArgument("names", name, "each name once")
        seen.add(name)
    size = len(" ".join(names))  # names are ASCII: characters are bytes
    if size > MAX_NAMES_LEN:
        raise InvalidArgument("names", "%d names of %d bytes" % (len(names), size),
                              "at most %d bytes, spaces included, to fit one request line" % MAX_NAMES_LEN)
    return names


def lock_line(names, owner, wait, ttl, shared=False, limit=None, fair=False, extra=""):
    """The LOCK request of one name, or of the tuple that check_names
    returned; ``extra`` is coordination_options()'s."""
    if isinstance(names, str):
        names = (check_name(names),)
    parts = ["LOCK", *names, "owner=" + check_owner(owner)]
    if wait is not None:
        parts.append("wait=" + ms("wait", wait))
    if ttl is not None:
        parts.append("ttl=" + ms("ttl", ttl, positive=True))
    if shared:
        parts.append("mode=shared")
    if limit is not None:
        parts.append("limit=%d" % limit)
    if fair:
        parts.append("fair=true")
    line = " ".join(parts) + extra
    most = MAX_LINE - 33  # the longest tag and its space
    if len(line) > most:
        raise InvalidArgument("request", line[:40] + "...", "at most %d bytes in one line (%d here): fewer or "
                              "shorter names, or a shorter value" % (most, len(line)))
    return line


def coordination_options(value=None, notify_wanted=False, delay=None, min_hold=None):
    """value=, notify=wanted, delay= and min_hold= as the end of a LOCK
    line, each checked (check them first with the check_ functions)."""
    out = ""
    if value is not None and value != "":
        out += " value=" + check_value(value)
    if notify_wanted:
        out += " notify=wanted"
    if delay is not None:
        out += " delay=" + ms("delay", check_delay(delay))
    if min_hold is not None:
        out += " min_hold=" + ms("min_hold", check_min_hold(min_hold))
    return out


class Leader(collections.namedtuple("Leader", "name fence value agent none")):
    """Who leads a name, as an observer sees it: the holder a campaign
    elected, its term (``fence``, strictly increasing per name), its
    ``value`` (decoded) and ``agent`` (its agent.id). While nobody leads,
    ``none`` is True and fence is 0, value and agent None."""

    __slots__ = ()


def leader_from(name, words):
    """A * LEADER push's words after the name."""
    if words and words[0] == "none":
        return Leader(name, 0, None, None, True)
    f = fields(words)
    fence = f.get("fence", "0")
    return Leader(name, int(fence) if fence.isascii() and fence.isdigit() else 0,
                  decode_value(f.get("value", "")), f.get("agent"), False)


class Observed:
    """The observers of one name on one connection, which share one
    observation at the agent: each sends an OBSERVE of its own (the agent
    answers each with the leader read after it arrived), the last one out
    sends UNOBSERVE; ``last`` is the latest push, to tell a change from a
    repeat."""

    def __init__(self):
        self.observers = []
        self.last = None

    def deliver(self, leader):
        """Records a push and returns the observers it goes to: none whose
        OBSERVE is not answered yet (the push may predate it), and of the
        others every one, unless it repeats the last (the agent answers each
        OBSERVE with a push), then those that asked for it (``_wants_next``)."""
        repeat = self.last == leader
        self.last = leader
        out = [o for o in self.observers if o._answered and (not repeat or o._wants_next)]
        for o in self.observers:
            if o._answered:
                o._wants_next = False
        return out


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
            if words[1] == "LEADER" and len(words) > 2:
                return ("push", "LEADER", leader_from(words[2], words[3:]))
            f = fields(words[2:])
            if words[1] in ("LOST", "WANTED") and len(words) > 2:
                f["name"] = words[2]
            return ("push", words[1], f)
        tag, kind = words[0], words[1]
        if kind == "DATA":
            d = fields(words[2:])
            if len(words) > 2 and "=" not in words[2]:
                d[""] = words[2]  # what the line is about: WHO's "DATA waiting ..."
            self.data.setdefault(tag, []).append(d)
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


class Holders(list):
    """who()'s answer: a list of holders (dicts), and ``queued``, the number of
    waiters in the name's queue in the masters across agents (fair=True
    waiters, and writers that readers keep out), or None when the agent does
    not report it: it leaves out an empty queue, and an agent without fair
    queues never reports one. ``waiting`` lists, per agent, the requests
    waiting for the name (dicts of agent, count, since_ms); ``delayed_until_ms``
    is, while a delay= or min_hold= keeps the name from everyone after a hold
    ended, when that ends (Unix ms), else None."""

    queued = None
    delayed_until_ms = None

    def __init__(self):
        super().__init__()
        self.waiting = []


def _int(v, default=0):
    return int(v) if v is not None and v.isascii() and v.isdigit() else default


def holders_from(reply):
    out = Holders()
    q = reply.fields.get("queued")
    if q is not None and q.isascii() and q.isdigit():
        out.queued = int(q)
    for d in reply.data:
        if d.get("") == "waiting":
            out.waiting.append({"agent": d.get("agent"), "count": _int(d.get("count")), "since_ms": _int(d.get("since"))})
        elif "delayed_until" in d:
            out.delayed_until_ms = _int(d.get("delayed_until"))
        elif "" not in d:
            value = d.get("value")
            out.append({"agent": d.get("agent"), "pid": int(d.get("pid", -1)), "uid": int(d.get("uid", -1)),
                        "owner": d.get("owner", ""), "mode": d.get("mode"), "fence": int(d.get("fence", 0)),
                        "since_ms": int(d.get("since", 0)), "value": None if value is None else decode_value(value),
                        **_semaphore(d)})
    return out


def holds_from(reply):
    return [{"name": d.get("name"), "owner": d.get("owner", ""), "fence": int(d.get("fence", 0)),
             "count": int(d.get("count", 0)), "mode": d.get("mode"),
             "validity": int(d.get("validity", 0)) / 1000.0, **_semaphore(d)} for d in reply.data]


def _semaphore(d):
    """A WHO or HOLDS record's limit= and slot=: ints for a semaphore hold,
    None for a lock (the agent leaves both out)."""
    out = {}
    for k in ("limit", "slot"):
        v = d.get(k, "")
        out[k] = int(v) if v.isascii() and v.isdigit() else None
    return out


def split_grant(f, n):
    """The fields of a multi-lock's OK for each of its n names: fence=,
    count= and slot= are comma-separated lists in the order the names were
    given; validity= (the smallest) goes with every name."""
    lists = {k: f[k].split(",") for k in ("fence", "count", "slot") if k in f}
    out = []
    for i in range(n):
        g = {"validity": f.get("validity", "0")}
        for k, values in lists.items():
            if i < len(values):
                g[k] = values[i]
        out.append(g)
    return out


class Hold:
    """One owner's grant of a Lock, from the agent's OK until it is released or
    lost. A Lock keeps one per owner holding it; the client routes LOST pushes
    to it by (name, owner)."""

    def __init__(self, lock, owner, lost_event, caller=None):
        self.lock = lock
        self.name = lock.name
        self.owner = owner
        self.caller = caller  # the thread or task that acquired it (release() prefers its own)
        self.fence = 0
        self.count = 0  # the agent's re-entry count of the owner, at the last grant or release
        self.mine = 0  # the acquisitions made through this Lock (other Locks may pass the same owner=)
        self.slot = 0
        self.validity = 0.0
        self.lost = lost_event
        self.wanted = lock._event()  # set by * WANTED pushes (notify_wanted=True)
        self.value = lock._value
        self.lost_reason = None
        self.lost_why = None  # a revoked hold's reason word (revoke(reason=...))
        self.released = False
        self.unlocking = False  # an UNLOCK of the last re-entry is on the wire
        self.preacquired = False  # acquired by client.lock(); the next `with` enters without acquiring

    def granted(self, f):
        self.fence = int(f.get("fence", 0))
        self.count = int(f.get("count", 0))
        self.mine += 1
        self.slot = int(f.get("slot", 0))
        self.validity = int(f.get("validity", 0)) / 1000.0

    @property
    def live(self):
        return not self.released and not self.lost.is_set()

    def lose(self, reason, why=None):
        if not self.live:
            return
        self.lost_why = why
        if reason == "disconnected" and self.unlocking:
            self.released = True  # the closed connection released it, as the UNLOCK would have
            return
        self.lost_reason = reason
        self.lost.set()
        self.lock._lost(self)

    def unlock_line(self):
        return "UNLOCK %s owner=%s" % (self.name, self.owner)

    def _with_unlocking(self):
        self.unlocking = self.count <= 1
        return self


class LockBase:
    """What the sync and asyncio Lock share: arguments, checked when the Lock is
    made, and the holds of its owners. Subclasses give ``_caller()`` (the
    calling thread's or task's owner), ``_event()`` and ``_mu`` and do the I/O."""

    def __init__(self, client, name, wait=None, ttl=None, owner=None, on_lost=None, raise_on_lost=True,
                 shared=False, limit=None, fair=False, value=None, notify_wanted=False, delay=None, min_hold=None):
        self._client = client
        self.name = check_name(name)
        self._extra = coordination_options(value, check_bool("notify_wanted", notify_wanted), delay, min_hold)
        self._value = value if value != "" else None
        self.notify_wanted, self.delay, self.min_hold = notify_wanted, delay, min_hold
        self.wait = check_wait(wait)
        self.ttl = check_ttl(ttl)
        self.shared = bool(shared)
        self.limit = check_limit(limit, self.shared)
        self.fair = check_fair(fair)
        self._owner = None if owner is None else check_owner(owner)
        self._on_lost = on_lost
        self.raise_on_lost = raise_on_lost
        self._holds = {}  # owner -> Hold, granted and not yet released (lost ones until acknowledged)
        self._last = Hold(self, self._owner, self._event())  # what the properties show when nothing is held

    # Who owns a hold. By default each acquire is an owner of its own (new_owner("k")), so two
    # acquires compete at the agent whatever thread or task makes them, as two acquires of a
    # threading.Lock (or of two redis-py Locks) do. An owner= given re-enters (count=2);
    # RLock's owner is the pair (this RLock, the calling thread or task).
    _others_release = True  # a thread may release a hold another took (threading.Lock; not RLock)

    def _fixed_owner(self):
        """The owner every acquire by the caller uses (re-entering), or None: a new one each time."""
        return self._owner

    def _owner_for_acquire(self):
        owner = self._fixed_owner()
        return owner if owner is not None else new_owner("k")

    def _current(self):
        """The hold release() ends: the calling owner's (for a fixed owner), or
        the one the calling thread or task acquired; else the only live hold,
        or the only hold (released from another thread or task, as a
        threading.Lock may be); else None."""
        holds = list(self._holds.values())  # a copy: other threads may change the dict
        owner = self._fixed_owner()
        if owner is not None:
            h = self._holds.get(owner)
            if h is not None or not self._others_release:
                return h
        else:
            caller = self._caller()
            mine = sorted((x for x in holds if x.caller == caller), key=lambda x: not x.live)
            if mine:
                return mine[0]
        live = [x for x in holds if x.live]
        if len(live) == 1:
            return live[0]
        if len(holds) == 1:
            return holds[0]
        return None

    def _view(self):
        return self._current() or self._last

    @property
    def owner(self):
        """The owner of the hold the properties show."""
        return self._view().owner

    @property
    def fence(self):
        """The fencing token of the current (else the last) grant."""
        return self._view().fence

    @property
    def slot(self):
        """A semaphore hold's slot (1 to its limit); 0 for a lock."""
        return self._view().slot

    @property
    def count(self):
        """The re-entry count at the last grant or release."""
        return self._view().count

    @property
    def validity(self):
        """Seconds the hold was known valid at its grant or last extend."""
        return self._view().validity

    @property
    def lost(self):
        """An Event set when the hold ends without release."""
        return self._view().lost

    @property
    def wanted(self):
        """An Event set when a conflicting request for the name started
        waiting, on any agent, if the lock was taken with notify_wanted=True
        (the agent tells at most once per 100 ms while it stays wanted; clear
        it to hear of the next)."""
        return self._view().wanted

    @property
    def value(self):
        """The hold's value, as given to lock() or proclaim() (None if none)."""
        return self._view().value

    def _proclaim_line(self, value):
        hold = self._held_now()
        return hold, "SET %s value=%s owner=%s" % (self.name, check_value(value), hold.owner)

    def _held_now(self):
        """The live hold an extend or proclaim acts on; raises LockLost if it
        is gone, NotHeld if there is none."""
        with self._mu:
            hold = self._current()
        if hold is None or hold.released:
            raise NotHeld("%s is not held through this Lock" % self.name)
        if hold.lost.is_set():
            raise LockLost(self.name, hold.lost_reason)
        return hold

    def _gone(self, hold):
        """The agent answered NOT_HELD for a hold the books had live: it is
        lost (with no LOST push before, "unknown"); release() acknowledges it."""
        self._client._untrack(hold)
        hold.lose("unknown")

    def _on_reply(self, hold, apply=None):
        """What the reader calls with the reply to a request about ``hold``
        (UNLOCK, EXTEND, SET), before any later line: the books follow the
        agent whether or not the caller is still waiting (an interrupt, a
        cancelled task)."""
        def then(reply):
            if reply.kind == "OK":
                if apply is not None:
                    apply(reply)
            elif reply.kind == "ERR" and reply.words[:1] == ["NOT_HELD"]:
                self._gone(hold)
        return then

    def _on_unlock_reply(self, hold):
        return self._on_reply(hold, lambda reply: self._released(hold, reply))

    def _on_extend_reply(self, hold):
        def apply(reply):
            hold.validity = int(reply.fields.get("validity", 0)) / 1000.0
        return self._on_reply(hold, apply)

    def _on_grant(self, hold):
        """What the reader calls with a LOCK's reply: a grant goes into the
        books at once, so that an interrupted acquire (whose abandon then
        releases it) never leaves a hold the books do not know."""
        def then(reply):
            if reply.kind == "OK":
                self._granted(hold, reply.fields)
        return then

    def _lost_on_unlock(self, hold, err):
        """The caller's side of an UNLOCK answered NOT_HELD: acknowledges the lost hold."""
        with self._mu:
            self._forget(hold)
        return LockLost(self.name, hold.lost_reason)

    @property
    def lost_reason(self):
        """Why it was lost: quorum, expired, revoked, shutdown, or disconnected."""
        return self._view().lost_reason

    @property
    def lost_why(self):
        """For a hold revoked with a reason word (``revoke(name, reason=...)``),
        that word; else None."""
        return self._view().lost_why

    def locked(self):
        """True while this Lock holds its name (for any of its owners) and has not lost it."""
        with self._mu:
            return any(h.live for h in self._holds.values())

    def _lost(self, hold):
        if self._on_lost is not None:
            try:
                self._on_lost(self)
            except Exception:  # a callback's failure must not kill the reader
                pass

    def _resolve_wait(self, blocking, timeout, wait):
        if timeout is not None and wait is not None:
            raise InvalidArgument("timeout", timeout, "wait= or timeout=, not both")
        w = wait if wait is not None else timeout
        if not blocking:
            if w not in (None, 0):
                raise InvalidArgument("timeout", w, "none with blocking=False")
            return 0
        return check_wait(self.wait if w is None else w)

    def _begin(self, owner):
        """The hold an acquire by owner adds to, and whether it is new."""
        with self._mu:
            hold = self._holds.get(owner)
            if hold is not None and hold.live:
                return hold, False
        return Hold(self, owner, self._event(), self._caller()), True

    def _granted(self, hold, fields):
        with self._mu:
            hold.granted(fields)
            self._holds[hold.owner] = hold
            self._last = hold

    def _to_release(self):
        """The hold release() ends; raises LockLost (and forgets one re-entry)
        if it was lost, NotHeld if there is none (or the connection's end
        released it)."""
        with self._mu:
            hold = self._current()
            if hold is None:
                raise NotHeld("%s is not held through this Lock" % self.name)
            if hold.live:
                hold.unlocking = hold.count <= 1
                return hold
            hold.mine -= 1
            if hold.mine <= 0 or hold.released:
                self._forget(hold)
            if hold.released:
                raise NotHeld("%s is not held through this Lock" % self.name)
        raise LockLost(self.name, hold.lost_reason)

    def _forget(self, hold):
        if self._holds.get(hold.owner) is hold:
            del self._holds[hold.owner]

    def _released(self, hold, reply):
        """Records the answer to an UNLOCK: one re-entry fewer. The hold ends
        for this Lock once its own acquisitions are undone, though another
        Lock passing the same owner= may keep the owner's hold at the agent."""
        with self._mu:
            hold.count = int(reply.fields.get("count", 0))
            hold.mine -= 1
            if hold.count > 0 and hold.mine > 0:
                hold.unlocking = False
                return
            hold.released = True
            self._forget(hold)
        self._client._untrack(hold)

    def _after_closed_unlock(self, hold, err):
        """An UNLOCK that the connection's end cut short: returns if that
        released the hold (the agent releases every hold of a closed
        connection), raises LockLost if it was lost before."""
        with self._mu:
            self._forget(hold)
        if hold.lost.is_set():
            raise LockLost(self.name, hold.lost_reason) from err
        hold.released = True

    def _preacquired(self):
        """Consumes the mark client.lock() left, so the `with` that follows does not acquire again."""
        with self._mu:
            hold = self._current()
            if hold is not None and hold.preacquired:
                hold.preacquired = False
                return True
        return False

    def _exit_raises(self, exc_type):
        return self.raise_on_lost and exc_type is None

    def _released_inside(self):
        """True if the block being left released the lock itself."""
        with self._mu:
            return self._current() is None

    def _extend_line(self, ttl):
        hold = self._held_now()
        return hold, "EXTEND %s ttl=%s owner=%s" % (self.name, ms("ttl", check_ttl(ttl)), hold.owner)


class MultiLockBase:
    """What the sync and asyncio MultiLock share: the names, checked when the
    MultiLock is made, one Lock per name (``_lock_class``, which the
    subclass gives), and the bookkeeping of an acquire of all of them."""

    def __init__(self, client, names, wait=None, ttl=None, owner=None, on_lost=None, raise_on_lost=True,
                 shared=False, limit=None, fair=False, value=None, notify_wanted=False, delay=None, min_hold=None):
        self.names = check_names(names)
        self.locks = tuple(self._lock_class(client, name, wait=wait, ttl=ttl, owner=owner, on_lost=on_lost,
                                            raise_on_lost=raise_on_lost, shared=shared, limit=limit, fair=fair,
                                            value=value, notify_wanted=notify_wanted, delay=delay, min_hold=min_hold)
                           for name in self.names)
        self._client = client
        first = self.locks[0]
        self.wait, self.ttl, self.shared, self.limit, self.fair = first.wait, first.ttl, first.shared, first.limit, first.fair
        self.raise_on_lost = raise_on_lost

    def __len__(self):
        return len(self.locks)

    def __getitem__(self, i):
        return self.locks[i]

    def __iter__(self):
        return iter(self.locks)

    def __repr__(self):
        return "<%s %s>" % (type(self).__name__, " ".join(self.names))

    def locked(self):
        """True while every name is held through this MultiLock (none released, none lost)."""
        return all(lk.locked() for lk in self.locks)

    def _resolve_wait(self, blocking, timeout, wait):
        return self.locks[0]._resolve_wait(blocking, timeout, wait)

    def _begin(self, wait):
        """The LOCK line of an acquire by the calling owner, and per name
        (lock, hold, fresh): the hold it adds to and whether it is new."""
        owner = self.locks[0]._owner_for_acquire()
        line = lock_line(self.names, owner, wait, self.ttl, self.shared, self.limit, self.fair, self.locks[0]._extra)
        return line, [(lk,) + lk._begin(owner) for lk in self.locks]

    @staticmethod
    def _granted(grants, fields):
        for (lk, hold, _), f in zip(grants, split_grant(fields, len(grants))):
            lk._granted(hold, f)

    def _on_grant(self, grants):
        """What the reader calls with the LOCK's reply (as Lock._on_grant)."""
        def then(reply):
            if reply.kind == "OK":
                self._granted(grants, reply.fields)
        return then

    def _held(self):
        """The locks whose hold release() ends (the calling owner's, as
        Lock.release picks it): those not released on their own already."""
        held = [lk for lk in self.locks if lk._current() is not None]
        if not held:
            raise NotHeld("%s: none is held through this MultiLock" % " ".join(self.names))
        return held

    @staticmethod
    def _raise_first(errors):
        """After releasing every name: the first error that is not a lost
        hold, else the first LockLost, so that a lost name does not hide a
        failure to release another."""
        for e in errors:
            if not isinstance(e, LockLost):
                raise e
        if errors:
            raise errors[0]

    def _preacquired(self):
        marks = [lk._preacquired() for lk in self.locks]  # consume every mark
        return any(marks)

    def _released_inside(self):
        return all(lk._released_inside() for lk in self.locks)

    _exit_raises = LockBase._exit_raises

    def _busy(self):
        return Busy("%s: the wait ran out" % " ".join(self.names))
