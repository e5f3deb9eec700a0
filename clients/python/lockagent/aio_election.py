"""lockagent.aio.Election: lockagent.Election for the asyncio client."""

import asyncio
import weakref

from ._wire import ConnectionClosed, LockLost, NoLeader, NotHeld, NotLeader, check_name, new_owner

_candidacies = weakref.WeakKeyDictionary()  # client -> {name: _Candidacy}; one event loop per client


class _Candidacy:
    def __init__(self):
        self.owner = new_owner("e")
        self.term = None  # the aio.Lock of the term held, None while not leading
        self.campaign = None  # the campaign under way, a future, None when none is

    def leading(self):
        if self.term is not None and self.term.lost.is_set():
            self.term = None
        return self.term


class Election:
    """As lockagent.Election, with ``await``: ``await e.campaign(value)``,
    ``await e.proclaim(value)``, ``await e.resign()``, ``await e.leader()``,
    ``async for ld in e.observe()`` (leaders only; ``aclose()`` it or use
    ``async with``), ``e.rev``."""

    def __init__(self, client, name, **lock_options):
        self.name = check_name(name)
        self._client = client
        self._options = lock_options
        self._state = _candidacies.setdefault(client, {}).setdefault(self.name, _Candidacy())

    async def campaign(self, value, wait=None):
        """As lockagent.Election.campaign; cancelled, it withdraws."""
        st = self._state
        while True:
            term = st.leading()
            if term is not None:
                if term.value != value:
                    try:
                        await self.proclaim(value)
                    except BaseException:
                        await self.resign()
                        raise
                return
            if st.campaign is None:
                break
            await asyncio.wait([st.campaign])
        done = st.campaign = asyncio.get_running_loop().create_future()
        term = None
        try:
            term = await self._client.lock(self.name, wait=wait, fair=True, value=value, owner=st.owner,
                                           raise_on_lost=False, **self._options)
        finally:
            st.term, st.campaign = term, None
            done.set_result(None)

    async def proclaim(self, value):
        """As lockagent.Election.proclaim: NotLeader unless leading."""
        term = self._state.leading()
        if term is None:
            raise NotLeader("%s: not leading" % self.name)
        try:
            await term.proclaim(value)
        except (NotHeld, LockLost) as e:
            if self._state.term is term:
                self._state.term = None
            raise NotLeader("%s: not leading: %s" % (self.name, e)) from e

    async def resign(self):
        """As lockagent.Election.resign: nothing to do when not leading."""
        st = self._state
        term = st.term
        if term is None:
            return
        try:
            await term.release()
        except (NotHeld, LockLost, ConnectionClosed):
            pass
        if st.term is term:
            st.term = None

    async def leader(self):
        """As lockagent.Election.leader: NoLeader while nobody leads."""
        got = await self._client.leader(self.name)
        if got.none:
            raise NoLeader("%s: no leader" % self.name)
        return got

    def observe(self):
        """An async iterator of leaders (no "none"), as lockagent.Election.observe."""
        return _Leaders(self._client.observe(self.name))

    @property
    def rev(self):
        term = self._state.leading()
        return term.fence if term is not None else 0

    @property
    def lock(self):
        return self._state.leading()


class _Leaders:
    def __init__(self, observation):
        self._observation = observation

    def __aiter__(self):
        return self

    async def __anext__(self):
        while True:
            got = await self._observation.__anext__()
            if not got.none:
                return got

    async def aclose(self):
        await self._observation.aclose()

    async def __aenter__(self):
        await self._observation.start()
        return self

    async def __aexit__(self, *exc):
        await self.aclose()
