"""Awaitable objects of lockagent.aio that are coroutines as well.

``client.lock(...)`` returns an object that is both an async context manager
and awaitable. asyncio.create_task() (and anything else that insists on a
coroutine, not just an awaitable) refuses such an object, so these objects
are coroutines too: send, throw and close drive one run of what awaiting
them does, the way a coroutine object is one run of its function.
"""

import collections.abc


class CoroutineMixin:
    """Makes an awaitable a coroutine. A subclass gives ``_awaited()``, the
    coroutine function that ``await`` runs. Each ``await`` runs a fresh
    ``_awaited()`` (an aio.Lock may be awaited again once released); send,
    throw and close drive one run, started by the first of them and never
    restarted, as with a coroutine: asyncio.create_task() runs it once. Until
    that first call nothing runs, so an object that is only used with
    ``async with`` leaves no "never awaited" coroutine behind."""

    _coroutine_run = None  # the run that send/throw/close drive
    _coroutine_over = False  # it ended, or was closed before it began

    def _awaited(self):
        raise NotImplementedError

    def __await__(self):
        return self._awaited().__await__()

    def _driven(self):
        if self._coroutine_run is None:
            if self._coroutine_over:
                raise RuntimeError("cannot reuse already awaited coroutine")
            self._coroutine_run = self._awaited()
        return self._coroutine_run

    def _ends(self, step, *args):
        try:
            return step(*args)
        except BaseException:
            # StopIteration (the result), or the exception it ended with.
            self._coroutine_over = True
            raise

    def send(self, value):
        return self._ends(self._driven().send, value)

    def throw(self, typ, val=None, tb=None):
        run = self._driven()
        if val is None and tb is None:
            return self._ends(run.throw, typ)
        return self._ends(run.throw, typ, val, tb)

    def close(self):
        self._coroutine_over = True
        if self._coroutine_run is not None:
            self._coroutine_run.close()


def register(cls):
    """Registers cls, a CoroutineMixin, as a collections.abc.Coroutine: what
    asyncio.iscoroutine(), and so create_task(), look for."""
    collections.abc.Coroutine.register(cls)
    return cls
