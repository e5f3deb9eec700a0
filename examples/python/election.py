"""Leader election through lock-agent: two candidates campaign for one name,
an observer follows every term, the leader changes its value and resigns so
that the other is elected; then the same with asyncio.

    PYTHONPATH=clients/python python3 examples/python/election.py   # against `lock-agent run -dev`
"""

import asyncio
import threading

import lockagent
from lockagent import aio

NAME = "examples/election-py"


def seen(leaders, want):
    """The first Leader the observation pushes that ``want`` accepts."""
    for ld in leaders:
        if want(ld):
            return ld
    raise RuntimeError("the observation ended")


def main():
    observer, first, second = lockagent.Client(), lockagent.Client(), lockagent.Client()
    with observer.observe(NAME) as leaders:  # the current leader, then every change
        seen(leaders, lambda ld: ld.none)
        print("observer: nobody leads")
        leader = first.campaign(NAME, "10.0.0.5:8080")  # returns once elected
        ld = seen(leaders, lambda ld: ld.fence == leader.fence)
        print("observer: the first candidate leads, value %r" % ld.value)
        elected = []
        waiter = threading.Thread(target=lambda: elected.append(second.campaign(NAME, "10.0.0.6:8080")))
        waiter.start()  # waits in line behind the leader
        leader.proclaim("10.0.0.5:9090")
        print("observer: the first candidate proclaims %r" % seen(leaders, lambda ld: ld.value == "10.0.0.5:9090").value)
        leader.release()  # resign: the second candidate is elected
        waiter.join()
        seen(leaders, lambda ld: ld.fence == elected[0].fence)
        print("observer: the second candidate leads, a newer term: %s" % (elected[0].fence > leader.fence))
        elected[0].release()
        seen(leaders, lambda ld: ld.none)
        print("observer: resigned, nobody leads")
    for c in (observer, first, second):
        c.close()


async def main_aio():
    client = await aio.Client.connect()
    async with client.observe(NAME) as leaders:
        async for ld in leaders:
            if ld.none:
                break
        async with client.campaign(NAME, "asyncio ✓") as lk:
            async for ld in leaders:
                if ld.fence == lk.fence:
                    print("asyncio: elected, value %r" % ld.value)
                    break
    await client.close()


if __name__ == "__main__":
    main()
    asyncio.run(main_aio())
