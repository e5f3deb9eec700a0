"""value=, notify=wanted, delay=, min_hold=, campaign, proclaim, observe,
leader, check and revoke at the wire: a scripted FakeAgent answers and
pushes on cue, and the tests check what the client writes and how it reads
the answers (test_coordination.py runs every call against the real agent)."""

import asyncio
import unittest

import lockagent
from lockagent import aio
from tests.agent import FakeAgent, grant_all


def without_owner(line):
    return " ".join(w for w in line.split() if not w.startswith("owner="))


def owner_of(args):
    return next((a[len("owner="):] for a in args if a.startswith("owner=")), "")


VALUES = ["", "plain", "host-1:8080", "https://svc.example/a?b=c&d=e#f", '{"addr": "10.0.0.1", "tags": ["a b"]}',
          "50%", "%", "%2", "%zz", "%41", "a b\tc\nd\r\n", "héllo wörld ✓ 日本語 🦀", "\x00\x01\x7f", "=,+@/:._-",
          "~" * 10, "* LEADER x none", "1 LOCK other", "\udcff\udc80 not UTF-8"]
VALUE_CHARS = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:/@+=%,-")


class ValueTest(unittest.TestCase):
    def test_any_text_round_trips(self):
        for v in VALUES:
            with self.subTest(v=v):
                enc = lockagent.encode_value(v)
                self.assertTrue(set(enc) <= VALUE_CHARS, enc)
                self.assertEqual(lockagent.decode_value(enc), v)

    def test_any_bytes_round_trip(self):
        raw = bytes(range(256))
        enc = lockagent.encode_value(raw)
        self.assertTrue(set(enc) <= VALUE_CHARS, enc)
        self.assertEqual(lockagent.decode_value(enc).encode("utf-8", "surrogateescape"), raw)

    def test_what_is_not_an_escape_reads_as_it_is(self):
        for wire, want in [("50%", "50%"), ("%", "%"), ("%4", "%4"), ("%zz1", "%zz1"), ("a%2Cb%2cc", "a,b,c"),
                           ("%25", "%")]:
            self.assertEqual(lockagent.decode_value(wire), want)


class WireTest(unittest.TestCase):
    def setUp(self):
        self.pushes = {}  # verb -> push lines the fake sends after its answer

        def answer(verb, args):
            extra = [p.replace("OWNER", owner_of(args)) for p in self.pushes.get(verb, [])]
            if verb == "CHECK":
                return ["OK current=%s" % ("true" if args[1] == "fence=7" else "false")]
            if verb == "REVOKE":
                return ["OK n=2"]
            if verb in ("OBSERVE", "UNOBSERVE", "SET", "PING"):
                return ["OK"] + extra
            return grant_all(verb, args) + extra
        self.fake = FakeAgent(answer)
        self.addCleanup(self.fake.close)
        self.client = lockagent.Client(self.fake.path)
        self.addCleanup(self.client.close)

    def sent(self, since=0):
        self.client.ping()  # answered: every line before it was read
        return [without_owner(r) for r in self.fake.requests()[since:-1]]

    def test_options_on_the_wire(self):
        cases = [
            ("value is percent-encoded", dict(value="http://h:80/a b?x=1%"), "LOCK py/o value=http://h:80/a%20b%3Fx=1%25"),
            ("an empty value sends none", dict(value=""), "LOCK py/o"),
            ("notify_wanted", dict(notify_wanted=True), "LOCK py/o notify=wanted"),
            ("delay and min_hold in ms, rounded up", dict(delay=0.0015, min_hold=60), "LOCK py/o delay=2 min_hold=60000"),
            ("delay=0 overrides the agent's default", dict(delay=0), "LOCK py/o delay=0"),
        ]
        for what, kw, want in cases:
            with self.subTest(what):
                before = len(self.fake.requests())
                self.client.lock("py/o", **kw).release()
                self.assertEqual(self.sent(before), [want, "UNLOCK py/o"])
        before = len(self.fake.requests())
        with self.client.campaign("py/leader", "host-1:8080", wait=1) as lk:
            lk.proclaim("two, three")
            self.assertEqual(lk.value, "two, three")
        self.assertEqual(self.sent(before), ["LOCK py/leader wait=1000 fair=true value=host-1:8080",
                                             "SET py/leader value=two,%20three", "UNLOCK py/leader"])

    def test_bad_options_send_nothing(self):
        long = "é" * 86  # 516 bytes encoded
        for what, kw in [("negative delay", dict(delay=-0.001)), ("delay over 5 minutes", dict(delay=300.001)),
                         ("delay not a number", dict(delay="1s")), ("negative min_hold", dict(min_hold=-1)),
                         ("min_hold over a day", dict(min_hold=86401)), ("a value too long", dict(value=long)),
                         ("a value that is not text", dict(value=42)), ("notify_wanted not a bool", dict(notify_wanted=1))]:
            with self.subTest(what):
                with self.assertRaises(lockagent.InvalidArgument):
                    self.client.lock("py/bad", **kw)
        lk = self.client.lock("py/ok", value="é" * 85)  # 510 encoded: fits
        with self.assertRaises(lockagent.InvalidArgument):
            lk.proclaim(long)
        for what, call in [("fence 0", lambda: self.client.check("py/c", 0)),
                           ("fence not an int", lambda: self.client.check("py/c", "7")),
                           ("agent with a space", lambda: self.client.revoke("py/c", agent="a b")),
                           ("reason not a word", lambda: self.client.revoke("py/c", reason="Not-a-word")),
                           ("a bad name", lambda: self.client.observe("bad name"))]:
            with self.subTest(what):
                with self.assertRaises(lockagent.InvalidArgument):
                    call()
        names = ["%s" % chr(ord("a") + i) * 200 for i in range(18)]  # 3617 bytes: fit without the value
        with self.assertRaises(lockagent.InvalidArgument):
            self.client.lock_all(names, value="x" * 512)
        self.assertEqual([r.split()[:2] for r in self.sent()], [["LOCK", "py/ok"]])

    def test_wanted_sets_the_event_of_the_hold_of_its_owner(self):
        other = self.client.lock("py/other", notify_wanted=True)
        self.pushes["LOCK"] = ["* WANTED py/wanted owner=OWNER waiting=2"]
        lk = self.client.lock("py/wanted", notify_wanted=True)
        self.assertTrue(lk.wanted.wait(5))
        self.assertFalse(other.wanted.is_set())

    def test_observe(self):
        self.pushes["OBSERVE"] = ["* LEADER py/el fence=5 value=a%20b agent=host-1", "* LEADER py/el none",
                                  "* LEADER py/other fence=9 value=x agent=host-2", "* LEADER py/el fence=6 agent=host-2"]
        want = [lockagent.Leader("py/el", 5, "a b", "host-1", False), lockagent.Leader("py/el", 0, None, None, True),
                lockagent.Leader("py/el", 6, "", "host-2", False)]
        changed = lockagent.Leader("py/el", 6, "new", "host-2", False)
        with self.client.observe("py/el") as observation:
            self.assertEqual([next(observation) for _ in want], want)
            # Each observation sends an OBSERVE of its own, which the agent
            # answers with the state read after it arrived: a repeat, which
            # the first observation is not pushed twice; so does leader().
            self.pushes["OBSERVE"] = ["* LEADER py/el fence=6 agent=host-2"]
            with self.client.observe("py/el") as second:
                self.assertEqual(next(second), want[2])
                self.assertEqual(self.client.leader("py/el"), want[2])
                self.pushes["PING"] = ["* LEADER py/el fence=6 value=new agent=host-2"]
                self.client.ping()
                self.assertEqual((next(observation), next(second)), (changed, changed))
        self.assertEqual(list(observation), [])
        self.assertEqual(self.sent(), ["OBSERVE py/el", "OBSERVE py/el", "OBSERVE py/el", "PING", "UNOBSERVE py/el"])

    def test_no_push_from_before_an_observe_is_answered(self):
        """Issue 31: while this connection observes the name, the agent's
        push of an older state may come between a new OBSERVE and its OK;
        leader() and a second observe() must not take it."""
        script = [["OK", "* LEADER py/s fence=5 agent=h1"]]
        self.fake.answer = lambda verb, args: script[0] if verb == "OBSERVE" else ["OK"]
        with self.client.observe("py/s") as first:
            self.assertEqual(next(first).fence, 5)
            script[0] = ["* LEADER py/s none", "OK", "* LEADER py/s fence=6 agent=h2"]
            self.assertEqual(self.client.leader("py/s").fence, 6)
            script[0] = ["* LEADER py/s fence=6 value=old agent=h2", "OK", "* LEADER py/s fence=7 agent=h1"]
            with self.client.observe("py/s") as second:
                self.assertEqual(next(second).fence, 7)

    def test_an_observe_refused_raises(self):
        self.fake.answer = lambda verb, args: ["ERR LIMIT too many observed names"]
        with self.assertRaises(lockagent.LimitReached):
            self.client.observe("py/el")
        with self.assertRaises(lockagent.LimitReached):
            self.client.leader("py/el")

    def test_check_and_revoke(self):
        self.assertTrue(self.client.check("py/c", 7))
        self.assertFalse(self.client.check("py/c", 8))
        self.assertEqual(self.client.revoke("py/c", agent="host-1", reason="maintenance"), 2)
        self.assertEqual(self.client.revoke("py/c"), 2)
        self.assertEqual(self.sent(), ["CHECK py/c fence=7", "CHECK py/c fence=8",
                                       "REVOKE py/c agent=host-1 reason=maintenance", "REVOKE py/c"])

    def test_who_reads_waiters_values_and_delays(self):
        self.fake.answer = lambda verb, args: [
            "DATA agent=host-a pid=42 uid=1000 owner=g1 mode=exclusive fence=99 since=1700000000000 value=a%2Fb%20c",
            "DATA waiting agent=host-b count=3 since=1700000000500",
            "DATA delayed_until=1700000009000",
            "OK n=1 waiting=3 queued=0"]
        who = self.client.who("py/q")
        self.assertEqual([(h["fence"], h["value"]) for h in who], [(99, "a/b c")])
        self.assertEqual(who.waiting, [{"agent": "host-b", "count": 3, "since_ms": 1700000000500}])
        self.assertEqual(who.delayed_until_ms, 1700000009000)


class AioWireTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.pushes = {}

        def answer(verb, args):
            extra = [p.replace("OWNER", owner_of(args)) for p in self.pushes.get(verb, [])]
            if verb == "CHECK":
                return ["OK current=%s" % ("true" if args[1] == "fence=7" else "false")]
            if verb == "REVOKE":
                return ["OK n=1"]
            if verb in ("OBSERVE", "UNOBSERVE", "SET", "PING"):
                return ["OK"] + extra
            return grant_all(verb, args) + extra
        self.fake = FakeAgent(answer)
        self.client = await aio.Client.connect(self.fake.path)

    async def asyncTearDown(self):
        await self.client.close()
        self.fake.close()

    async def sent(self, since=0):
        await self.client.ping()
        return [without_owner(r) for r in self.fake.requests()[since:-1]]

    async def test_campaign_proclaim_and_options(self):
        async with self.client.campaign("aio/leader", "a b", delay=1, min_hold=0.5, notify_wanted=True) as lk:
            await lk.proclaim("c")
            self.assertEqual(lk.value, "c")
        self.assertEqual(await self.sent(), [
            "LOCK aio/leader fair=true value=a%20b notify=wanted delay=1000 min_hold=500", "SET aio/leader value=c",
            "UNLOCK aio/leader"])

    async def test_wanted(self):
        self.pushes["LOCK"] = ["* WANTED aio/wanted owner=OWNER waiting=1"]
        lk = await self.client.lock("aio/wanted", notify_wanted=True)
        await asyncio.wait_for(lk.wanted.wait(), 5)

    async def test_observe(self):
        self.pushes["OBSERVE"] = ["* LEADER aio/el fence=5 value=%E2%9C%93 agent=host-1", "* LEADER aio/el none"]
        got = []
        async with self.client.observe("aio/el") as observation:
            async for leader in observation:
                got.append(leader)
                if len(got) == 2:
                    break
            self.pushes["OBSERVE"] = ["* LEADER aio/el none"]
            self.assertEqual(await self.client.leader("aio/el"), got[1])
            self.pushes["PING"] = ["* LEADER aio/el fence=7 agent=h"]
            await self.client.ping()
            self.assertEqual(await observation.__anext__(), aio.Leader("aio/el", 7, "", "h", False))
        self.assertEqual(got, [aio.Leader("aio/el", 5, "✓", "host-1", False), aio.Leader("aio/el", 0, None, None, True)])
        self.assertEqual(await self.sent(), ["OBSERVE aio/el", "OBSERVE aio/el", "PING", "UNOBSERVE aio/el"])

    async def test_check_and_revoke(self):
        self.assertTrue(await self.client.check("aio/c", 7))
        self.assertFalse(await self.client.check("aio/c", 9))
        self.assertEqual(await self.client.revoke("aio/c", agent="h"), 1)
        with self.assertRaises(lockagent.InvalidArgument):
            await self.client.check("aio/c", -1)
        self.assertEqual(await self.sent(), ["CHECK aio/c fence=7", "CHECK aio/c fence=9", "REVOKE aio/c agent=h"])


if __name__ == "__main__":
    unittest.main()
