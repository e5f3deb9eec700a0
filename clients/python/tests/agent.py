"""Runs the real agent, built from this repository, in -dev mode for the tests."""

import atexit
import os
import shutil
import subprocess
import tempfile
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
        time.sleep(0.3)  # the embedded masters' first health probe
        return self

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self):
        self.kill()
        if self.proc:
            self.proc.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)
