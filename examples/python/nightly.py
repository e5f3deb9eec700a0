"""Takes a lock through the local lock-agent, does a job, releases it.

    go run ./cmd/lock-agent run -dev            # prints LOCK_AGENT_SOCKET
    PYTHONPATH=clients/python python3 examples/python/nightly.py
"""

import asyncio
import sys

import lockagent
from lockagent import aio


def with_threads():
    with lockagent.Client() as client:  # $LOCK_AGENT_SOCKET, /run/lock-agent/agent.sock, else the -dev socket
        try:
            with client.lock("examples/nightly-report", wait=10) as lk:
                print("holding %s with fence %d" % (lk.name, lk.fence))
                if lk.lost.wait(0.1):  # the job would stop here if the lock were lost
                    sys.exit("lock lost: %s" % lk.lost_reason)
                print("report written with fence %d" % lk.fence)
        except lockagent.Busy:
            sys.exit("someone else is running the report")
    print("released")


async def with_asyncio():
    client = await aio.Client.connect()
    try:
        async with await client.lock("examples/nightly-report", wait=10) as lk:
            print("asyncio: holding %s with fence %d" % (lk.name, lk.fence))
    finally:
        await client.close()
    print("asyncio: released")


if __name__ == "__main__":
    with_threads()
    asyncio.run(with_asyncio())
