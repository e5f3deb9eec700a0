"""lockagent.Election: a leader election shaped as etcd's
concurrency.Election (Go), for code written against it."""

import threading
import weakref

from ._wire import ConnectionClosed, LockLost, NoLeader, NotHeld, NotLeader, check_name, new_owner

# Each Client's candidates, by name: every Election of one name on one
# Client is one candidate, as etcd's Elections of one prefix on one Session.
_candidacies = weakref.WeakKeyDictionary()
_candidacies_mu = threading.Lock()


class _Candidacy:
    def __init__(self):
        self.mu = threading.Lock()
        self.owner = new_owner("e")  # the term's owner: any thread may resign it
        self.term = None  # the Lock of the term held, None while not leading
        self.campaign = None  # an Event set when the campaign under way ends

    def leading(self):
        """The term held, or None; a term lost meanwhile is forgotten. Under mu."""
        if self.term is not None and self.term.lost.is_set():
            self.term = None
        return self.term

    def forget(self, term):
        with self.mu:
            if self.term is term:
                self.term = None


class Election:
    """The election of ``name`` through ``client``: campaign(), proclaim(),
    resign(), leader(), observe() and ``rev`` (the term, a fence), with
    etcd's semantics: a campaign while this candidate leads returns at once
    (proclaiming a new value); resign() when not leading does nothing;
    leader() with nobody leading raises NoLeader; proclaim() when not leading
    raises NotLeader; observe() yields leaders only (no "none").

    Other keyword arguments are lock()'s (ttl, delay, ...), given to every
    campaign. Where it differs from etcd: resign() does not depend on a
    deadline (the release is sent whatever happens to the caller); ``rev``
    is the term, not an etcd revision; there is no ResumeElection.
    """

    def __init__(self, client, name, **lock_options):
        self.name = check_name(name)
        self._client = client
        self._options = lock_options
        with _candidacies_mu:
            by_name = _candidacies.setdefault(client, {})
            self._state = by_name.setdefault(self.name, _Candidacy())

    def campaign(self, value, wait=None):
        """Runs for leader with ``value`` and returns once elected; raises
        Busy if ``wait`` (seconds; None waits forever) ran out first. If this
        candidate leads already it returns at once, after proclaiming
        ``value`` if it differs (if that fails, the term is resigned and the
        error raised). A campaign while another of this candidate's is under
        way waits for it first. Interrupted, it withdraws: nothing stays
        held or queued."""
        st = self._state
        while True:
            with st.mu:
                term, under_way = st.leading(), st.campaign
                if term is None and under_way is None:
                    done = st.campaign = threading.Event()
                    break
            if term is not None:
                if term.value != value:
                    try:
                        self.proclaim(value)
                    except BaseException:
                        self.resign()
                        raise
                return
            under_way.wait()
        term = None
        try:
            term = self._client.lock(self.name, wait=wait, fair=True, value=value, owner=st.owner,
                                     raise_on_lost=False, **self._options)
        finally:
            with st.mu:
                st.term, st.campaign = term, None
            done.set()

    def proclaim(self, value):
        """Replaces the leader's value without another election; raises
        NotLeader if this candidate does not lead."""
        st = self._state
        with st.mu:
            term = st.leading()
        if term is None:
            raise NotLeader("%s: not leading" % self.name)
        try:
            term.proclaim(value)
        except (NotHeld, LockLost) as e:
            st.forget(term)
            raise NotLeader("%s: not leading: %s" % (self.name, e)) from e

    def resign(self):
        """Ends this candidate's term, so that the next is elected. Does
        nothing if it does not lead (a second resign is fine), and a term
        lost meanwhile has ended all the same."""
        st = self._state
        with st.mu:
            term = st.term
        if term is None:
            return
        try:
            term.release()
        except (NotHeld, LockLost, ConnectionClosed):
            pass
        st.forget(term)

    def leader(self):
        """Who leads now (a Leader), as the agent reads it after the call
        began; raises NoLeader if nobody does."""
        got = self._client.leader(self.name)
        if got.none:
            raise NoLeader("%s: no leader" % self.name)
        return got

    def observe(self):
        """An iterator of who leads: the leader as read after the call
        began, then every new leader and new value, in order; while nobody
        leads it waits for the next (as etcd's Observe). close() it, or use
        ``with``."""
        return _Leaders(self._client.observe(self.name))

    @property
    def rev(self):
        """This candidate's term (its hold's fence) while it leads, else 0."""
        with self._state.mu:
            term = self._state.leading()
            return term.fence if term is not None else 0

    @property
    def lock(self):
        """The Lock of this candidate's term while it leads, else None (its
        ``lost`` is set if leadership is lost)."""
        with self._state.mu:
            return self._state.leading()


class _Leaders:
    """An Observation without the "none" pushes."""

    def __init__(self, observation):
        self._observation = observation

    def __iter__(self):
        return self

    def __next__(self):
        while True:
            got = next(self._observation)
            if not got.none:
                return got

    def close(self):
        self._observation.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
