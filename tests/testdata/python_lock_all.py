"""lock_all, sync and asyncio, against two real agents over real masters:
LOCK_AGENT_SOCKET is this host's agent, OTHER_AGENT_SOCKET another host's.
Run by TestPythonLockAllAgainstRealMasters; prints one line per check and
exits non-zero at the first that fails."""

import asyncio
import os
import sys

import lockagent
from lockagent import aio

HERE, THERE = os.environ["LOCK_AGENT_SOCKET"], os.environ["OTHER_AGENT_SOCKET"]


def check(what, ok):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        sys.exit(1)


def sync_checks():
    client, other = lockagent.Client(HERE), lockagent.Client(THERE)
    names = ["e2e/s/b", "e2e/s/a", "e2e/s/c"]
    with client.lock_all(names, wait=5) as ml:
        check("sync: one Lock per name, in the order given", [lk.name for lk in ml] == names)
        check("sync: every name has a fence", all(lk.fence > 0 for lk in ml))
        for lk in ml:
            holders = other.who(lk.name)
            check("sync: the other agent sees %s held with its fence" % lk.name,
                  [h["fence"] for h in holders] == [lk.fence])
        try:
            other.lock("e2e/s/a", wait=0)
            check("sync: the other agent is refused a held name", False)
        except lockagent.Busy:
            check("sync: the other agent is refused a held name", True)
    check("sync: leaving the block released every name", client.holds() == [])
    other.lock_all(names, wait=0).release()
    check("sync: the other agent then gets every name", True)

    held = other.lock("e2e/s/y")
    try:
        client.lock_all(["e2e/s/x", "e2e/s/y", "e2e/s/z"], wait=0.3)
        check("sync: Busy while one name is held on the other agent", False)
    except lockagent.Busy:
        check("sync: Busy while one name is held on the other agent", True)
    check("sync: nothing held after the busy lock_all", client.holds() == [])
    check("sync: the other names stay free in the masters",
          other.who("e2e/s/x") == [] and other.who("e2e/s/z") == [])
    held.release()
    ml = client.lock_all(["e2e/s/x", "e2e/s/y"], ttl=2)
    check("sync: a ttl bounds every validity", all(0 < lk.validity <= 2 for lk in ml))
    ml[0].release()
    check("sync: one name released on its own is free elsewhere", other.lock("e2e/s/x", wait=0).release() is None)
    ml.release()
    check("sync: release gave back the rest", client.holds() == [] and other.who("e2e/s/y") == [])
    client.close()
    other.close()


async def aio_checks():
    client, other = await aio.Client.connect(HERE), await aio.Client.connect(THERE)
    names = ["e2e/a/b", "e2e/a/a"]
    async with client.lock_all(names, wait=5) as ml:
        check("aio: one Lock per name, in the order given", [lk.name for lk in ml] == names)
        for lk in ml:
            holders = await other.who(lk.name)
            check("aio: the other agent sees %s held" % lk.name, [h["fence"] for h in holders] == [lk.fence])
    check("aio: leaving the block released every name", await client.holds() == [])

    held = await other.lock("e2e/a/y")
    try:
        async with client.lock_all(["e2e/a/x", "e2e/a/y"], wait=0.3):
            pass
        check("aio: Busy while one name is held on the other agent", False)
    except lockagent.Busy:
        check("aio: Busy while one name is held on the other agent", True)
    check("aio: nothing held after the busy lock_all", await client.holds() == [] and await other.who("e2e/a/x") == [])
    waiter = asyncio.ensure_future(client.lock_all(["e2e/a/x", "e2e/a/y"]).acquire(wait=10))
    await asyncio.sleep(0.1)
    await held.release()
    check("aio: a waiting lock_all is granted once the name is released elsewhere", await waiter)
    await client.close()
    await other.close()


sync_checks()
asyncio.run(aio_checks())
print("python lock_all: all checks passed")
