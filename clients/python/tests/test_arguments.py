"""Names, owners and option values outside protocol v1 are refused by the
client, and not one byte of them reaches the agent."""

import unittest

import lockagent
from lockagent import aio
from tests.agent import CountingProxy, DevAgent

agent = None


def setUpModule():
    global agent
    agent = DevAgent().start()


def tearDownModule():
    agent.stop()


class ArgumentsTest(unittest.TestCase):
    def setUp(self):
        self.proxy = CountingProxy(agent.socket)
        self.addCleanup(self.proxy.close)
        self.client = lockagent.Client(self.proxy.path)
        self.addCleanup(self.client.close)

    def assertNothingSent(self, argument, call):
        mark = self.proxy.mark()
        with self.assertRaises(lockagent.InvalidArgument) as cm:
            call()
        self.assertEqual(cm.exception.argument, argument)
        self.assertIsInstance(cm.exception, ValueError)
        # A PING answered means every line written before it was forwarded.
        self.client.ping()
        sent = self.proxy.since(mark)
        self.assertEqual(len(sent), 1, "the agent was sent %r" % sent)
        self.assertTrue(sent[0].endswith(b" PING\n"), sent)

    def test_bad_arguments_never_reach_the_agent(self):
        victim = self.client.lock("py/victim")  # owned by this thread, as the injected UNLOCK would be
        c = self.client
        cases = [
            ("a name with a newline cannot smuggle an UNLOCK of another lock", "name",
             lambda: c.lock("x wait=0\n99 UNLOCK py/victim")),
            ("a name with CR LF cannot smuggle a request", "name", lambda: c.lock("x\r\n98 UNLOCK py/victim")),
            ("a name with an option after a space is not an option", "name", lambda: c.lock("py/inj ttl=200")),
            ("two names are not one name", "name", lambda: c.lock("py/a py/b")),
            ("an empty name", "name", lambda: c.lock("")),
            ("a name of 201 characters", "name", lambda: c.lock("n" * 201)),
            ("a name with a brace", "name", lambda: c.lock("py/{x}")),
            ("a name with a non-ASCII letter", "name", lambda: c.lock("py/\u00e9")),
            ("a name that is not a str", "name", lambda: c.lock(b"py/bytes")),
            ("an owner with a space cannot add an option", "owner", lambda: c.lock("py/o1", owner="me wait=0")),
            ("an owner with a newline cannot smuggle an UNLOCK", "owner",
             lambda: c.lock("py/o2", owner="x\n97 UNLOCK py/victim")),
            ("an owner with a slash", "owner", lambda: c.lock("py/o3", owner="a/b")),
            ("an owner of 65 characters", "owner", lambda: c.lock("py/o4", owner="o" * 65)),
            ("an owner that is not a str", "owner", lambda: c.lock("py/o5", owner=5)),
            ("a negative wait", "wait", lambda: c.lock("py/w1", wait=-1)),
            ("a wait given as a string", "wait", lambda: c.lock("py/w2", wait="5")),
            ("a wait that is not a number", "wait", lambda: c.lock("py/w3", wait=float("nan"))),
            ("a wait of more than a year", "wait", lambda: c.lock("py/w4", wait=400 * 86400)),
            ("a zero ttl", "ttl", lambda: c.lock("py/t1", ttl=0)),
            ("a negative ttl", "ttl", lambda: c.lock("py/t2", ttl=-1)),
            ("a ttl under the agent's 50ms", "ttl", lambda: c.lock("py/t3", ttl=0.049)),
            ("a ttl over the agent's 30 days", "ttl", lambda: c.lock("py/t4", ttl=30 * 86400 + 1)),
            ("acquire with a negative wait", "wait", lambda: lockagent.Lock(c, "py/a1").acquire(wait=-1)),
            ("acquire with threading.Lock's timeout=-1", "wait", lambda: lockagent.Lock(c, "py/a2").acquire(timeout=-1)),
            ("a Lock made with a bad name", "name", lambda: lockagent.Lock(c, "py/a3 x")),
            ("WHO of a name with a newline", "name", lambda: c.who("py/victim\n96 UNLOCK py/victim")),
            ("extend by zero", "ttl", lambda: victim.extend(0)),
            ("extend by less than 50ms", "ttl", lambda: victim.extend(0.01)),
            ("a client name with a space", "client_name", lambda: lockagent.Client(self.proxy.path, client_name="a b")),
        ]
        for what, argument, call in cases:
            with self.subTest(what):
                self.assertNothingSent(argument, call)
        self.assertTrue(victim.locked())
        holds = self.client.holds()
        self.assertEqual([(h["name"], h["count"]) for h in holds], [("py/victim", 1)])
        other = lockagent.Client(agent.socket)
        self.addCleanup(other.close)
        with self.assertRaises(lockagent.Busy):
            other.lock("py/victim", wait=0)
        victim.release()

    def test_refusals_match_what_the_agent_would_answer(self):
        with self.assertRaises(lockagent.BadName) as cm:
            self.client.lock("py/{bad}")
        self.assertEqual(cm.exception.code, "BAD_NAME")
        with self.assertRaises(lockagent.BadRequest):
            self.client.lock("py/x", owner="bad owner")


class AioArgumentsTest(unittest.IsolatedAsyncioTestCase):
    async def test_bad_arguments_never_reach_the_agent(self):
        proxy = CountingProxy(agent.socket)
        self.addCleanup(proxy.close)
        client = await aio.Client.connect(proxy.path)
        self.addAsyncCleanup(client.close)
        victim = await client.lock("aio/victim")
        mark = proxy.mark()
        with self.assertRaises(lockagent.InvalidName):
            async with client.lock("x wait=0\n99 UNLOCK aio/victim"):
                pass
        with self.assertRaises(lockagent.InvalidArgument):
            await client.lock("aio/w", wait=-1)
        with self.assertRaises(lockagent.InvalidArgument):
            await client.lock("aio/o", owner="x\n97 UNLOCK aio/victim")
        await client.ping()
        sent = proxy.since(mark)
        self.assertEqual(len(sent), 1, "the agent was sent %r" % sent)
        self.assertEqual([(h["name"], h["count"]) for h in await client.holds()], [("aio/victim", 1)])
        await victim.release()


if __name__ == "__main__":
    unittest.main()
