"""Runs the real agent, built from this repository, in -dev mode for the tests."""

import atexit
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


_binary = None


def _build():
    """Builds the agent once per test run."""
    global _binary
    if _binary is None:
        out = tempfile.mkdtemp(prefix="lagb")
        atexit.register(shutil.rmtree, out, True)
        path = os.path.join(out, "lock-agent")
        subprocess.run(["go", "build", "-o", path, "./cmd/lock-agent"], cwd=ROOT, check=True)
        _binary = path
    return _binary


class DevAgent:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="lagp")
        self.binary = _build()
        self.proc = None
        self.socket = None

    def start(self):
        run = tempfile.mkdtemp(dir=self.dir)
        env = dict(os.environ, XDG_RUNTIME_DIR=run)
        self.proc = subprocess.Popen([self.binary, "run", "-dev"], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        for line in self.proc.stdout:
            if line.startswith("export LOCK_AGENT_SOCKET="):
                self.socket = line.strip().split("=", 1)[1]
                break
        else:
            raise RuntimeError("the agent printed no socket")
        self._await_masters_up()
        return self

    def _await_masters_up(self, timeout=10.0):
        """Waits until the agent has found every master up (its first health
        probes), asking STATUS."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect(self.socket)
                s.sendall(b"1 STATUS\n")
                f = s.makefile("r")
                states = []
                for line in f:
                    last = line
                    words = line.split()
                    if len(words) >= 2 and words[1] == "DATA":
                        states += [w.split("=", 1)[1] for w in words[2:] if w.startswith("state=")]
                    elif len(words) >= 2:
                        break
                if states and all(st == "up" for st in states):
                    return
            time.sleep(0.005)  # a poll: STATUS is all there is to watch
        raise RuntimeError("the agent's masters never all came up: " + last)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self):
        self.kill()
        if self.proc:
            self.proc.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class _UnixServer:
    """A listening socket in a short temporary directory (a socket path has
    at most 107 bytes), a thread per connection (``_connected``, which the
    subclass gives), and close(), which ends them all."""

    def __init__(self, prefix, name):
        self.dir = tempfile.mkdtemp(prefix=prefix)
        self.path = os.path.join(self.dir, name)
        self._mu = threading.Lock()
        self._conns = []
        self._threads = []
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen()
        self._spawn(self._accept)

    def _spawn(self, target, *args):
        t = threading.Thread(target=target, args=args, daemon=True)
        t.start()
        self._threads.append(t)

    def _accept(self):
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self._connected(conn)

    @staticmethod
    def _shut(sock):
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self):
        self._shut(self._listener)  # wakes the accept(); close() alone does not
        self._listener.close()
        with self._mu:
            conns = list(self._conns)
        for c in conns:
            self._shut(c)
        for t in self._threads:
            t.join(5)
        for c in conns:
            c.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class CountingProxy(_UnixServer):
    """Sits between clients and the agent and records every line a client
    writes, so a test can prove what reached the agent and what did not."""

    def __init__(self, target):
        self.target = target
        self._lines = []
        super().__init__("lagx", "proxy.sock")

    def _connected(self, client):
        agent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        agent.connect(self.target)
        with self._mu:
            self._conns += [client, agent]
        self._spawn(self._up, client, agent)
        self._spawn(self._down, agent, client)

    def _up(self, client, agent):
        try:
            for line in client.makefile("rb"):
                with self._mu:
                    self._lines.append(line)
                agent.sendall(line)
        except (OSError, ValueError):
            pass
        finally:
            self._shut(agent)

    def _down(self, agent, client):
        try:
            while True:
                data = agent.recv(65536)
                if not data:
                    break
                client.sendall(data)
        except OSError:
            pass
        finally:
            self._shut(client)

    def mark(self):
        """How many lines were forwarded so far."""
        with self._mu:
            return len(self._lines)

    def since(self, mark):
        """The lines forwarded after ``mark``, as bytes."""
        with self._mu:
            return self._lines[mark:]


class FakeAgent(_UnixServer):
    """Answers the protocol from a script, for replies the real agent cannot
    be made to give on cue (WHO's queued=0, an older agent's), and records
    every request but HELLO and QUIT (answered OK, then the connection
    closes, as the agent does), without its tag. ``answer(verb, args)`` returns
    the reply lines without the tag (a line that starts with "* " is a push,
    sent as it is, in its place); set it before the request is sent."""

    def __init__(self, answer):
        self.answer = answer
        self._requests = []
        super().__init__("lagf", "fake.sock")

    def _connected(self, conn):
        with self._mu:
            self._conns.append(conn)
        self._spawn(self._serve, conn)

    def _serve(self, conn):
        try:
            for raw in conn.makefile("rb"):
                words = raw.decode().split()
                if len(words) < 2:
                    continue
                tag, verb = words[0], words[1].upper()
                if verb == "QUIT":  # as the agent: OK, then the connection closes
                    conn.sendall(("%s OK\n" % tag).encode())
                    conn.shutdown(socket.SHUT_RDWR)
                    return
                if verb == "HELLO":
                    replies = ["OK proto=1 agent=fake session=1 masters=3 quorum=2"]
                else:
                    with self._mu:
                        self._requests.append(" ".join(words[1:]))
                    replies = self.answer(verb, words[2:])
                # A line that starts with "* " is a push: written as it is.
                conn.sendall("".join((r if r.startswith("* ") else "%s %s" % (tag, r)) + "\n" for r in replies).encode())
        except (OSError, ValueError):
            pass

    def requests(self):
        with self._mu:
            return list(self._requests)


def grant_all(verb, args):
    """A FakeAgent answer: every LOCK granted (fence 7), UNLOCK released, the rest OK."""
    if verb == "LOCK":
        return ["OK fence=7 validity=1000 count=1"]
    if verb == "UNLOCK":
        return ["OK count=0"]
    return ["OK"]


class GateProxy(CountingProxy):
    """A CountingProxy that can hold back the agent's replies: while
    ``close_gate()`` is in force, what the agent writes waits in the proxy
    until ``open_gate()``. A test uses it to interrupt a call after its
    request reached the agent and before its reply came back."""

    def __init__(self, target):
        self._open = threading.Event()
        self._open.set()
        super().__init__(target)

    def close_gate(self):
        self._open.clear()

    def open_gate(self):
        self._open.set()

    def _down(self, agent, client):
        try:
            while True:
                data = agent.recv(65536)
                if not data:
                    break
                self._open.wait()
                client.sendall(data)
        except OSError:
            pass
        finally:
            self._shut(client)
