// Command kinds shows the lock kinds of the local lock-agent: a read/write
// lock, a semaphore with slots, several names at once, and a fair lock.
//
//	go run ./cmd/lock-agent run -dev        # in one terminal
//	go run ./examples/kinds                 # in another
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
)

func main() {
	ctx := context.Background()
	c, err := lockagent.Dial(ctx, "") // $LOCK_AGENT_SOCKET, /run/lock-agent/agent.sock, else the -dev socket
	if err != nil {
		fail(err)
	}
	defer c.Close()
	wait := lockagent.Wait(5 * time.Second)

	// Readers share a name; a writer would wait for both.
	r1, err := c.Lock(ctx, "examples/catalog", lockagent.Shared(), wait)
	if err != nil {
		fail(err)
	}
	r2, err := c.Lock(ctx, "examples/catalog", lockagent.Shared(), wait)
	if err != nil {
		fail(err)
	}
	fmt.Println("two readers hold examples/catalog")
	release(ctx, r1, r2)

	// A semaphore of 2 slots: each holder gets its own slot, 1 or 2.
	s1, err := c.Lock(ctx, "examples/encoders", lockagent.Limit(2), wait)
	if err != nil {
		fail(err)
	}
	s2, err := c.Lock(ctx, "examples/encoders", lockagent.Limit(2), wait)
	if err != nil {
		fail(err)
	}
	fmt.Printf("encoder slots %d and %d\n", s1.Slot(), s2.Slot())
	release(ctx, s1, s2)

	// Several names, all or none, in any order without deadlocks.
	both, err := c.LockAll(ctx, []string{"examples/stock", "examples/orders"}, wait)
	if err != nil {
		fail(err)
	}
	fmt.Printf("holding examples/stock and examples/orders with fences %d and %d\n", both[0].Fence(), both[1].Fence())
	release(ctx, both...)

	// A fair lock: waiters on every host are served first come, first served.
	f, err := c.Lock(ctx, "examples/deploy", lockagent.Fair(), wait)
	if err != nil {
		fail(err)
	}
	fmt.Printf("holding examples/deploy fairly with fence %d\n", f.Fence())
	release(ctx, f)
}

func release(ctx context.Context, locks ...*lockagent.Lock) {
	for _, l := range locks {
		if err := l.Unlock(ctx); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
