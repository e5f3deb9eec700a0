"""Awaitable objects of lockagent.aio that are coroutines as well.

``client.lock(...)`` returns an object that is both an async context manager
and awaitable. asyncio.create_task() (and anything else that insists on a
coroutine, not just an awaitable) refuses such an object, so these objects
are coroutines too: send, throw and close drive what awaiting them does.
"""

import asyncio
import collections.abc


def _current_task():
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running loop: driven by hand
        return None


class CoroutineMixin:
    """Makes an awaitable a coroutine. A subclass gives ``_awaited()``, the
    coroutine function that ``await`` runs.

    Each ``await`` runs a fresh ``_awaited()``: an aio.Lock may be awaited
    again once released, by this task or others. send, throw and close keep
    that: each task that drives the object (create_task, ensure_future,
    wait_for, gather) drives a run of its own, started by its first send or
    throw and forgotten when it ends, so a Lock handed to create_task again
    later, or to two tasks at once, acquires again, as ``await`` does.
    Until a first send nothing runs, so an object only used with ``async
    with`` leaves no "never awaited" coroutine behind."""

    _coroutine_runs = None  # the task driving a run (None outside any task) -> its run

    def _awaited(self):
        raise NotImplementedError

    def __await__(self):
        return self._awaited().__await__()

    def _step(self, method, *args):
        if self._coroutine_runs is None:
            self._coroutine_runs = {}
        task = _current_task()
        run = self._coroutine_runs.get(task)
        if run is None:
            run = self._coroutine_runs[task] = self._awaited()
        try:
            return getattr(run, method)(*args)
        except BaseException:
            # StopIteration (the result), or the exception the run ended with.
            del self._coroutine_runs[task]
            raise

    def send(self, value):
        return self._step("send", value)

    def throw(self, typ, val=None, tb=None):
        if val is None and tb is None:
            return self._step("throw", typ)
        return self._step("throw", typ, val, tb)

    def close(self):
        """Closes the run of the task that calls it, if it has one
        (GeneratorExit into it). The runs of other tasks are theirs: asyncio
        closes a coroutine it will not run (a TaskGroup shutting down), and
        ending another task's acquire there would leave its LOCK unanswered
        at the agent, granted later to nobody."""
        run = (self._coroutine_runs or {}).pop(_current_task(), None)
        if run is not None:
            run.close()


def register(cls):
    """Registers cls, a CoroutineMixin, as a collections.abc.Coroutine: what
    asyncio.iscoroutine(), and so create_task(), look for."""
    collections.abc.Coroutine.register(cls)
    return cls
