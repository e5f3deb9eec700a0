package lockagent_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
)

// Hold a lock for the length of a job. The agent keeps it alive while the
// connection is open; the job's context ends if the lock is lost.
func Example() {
	ctx := context.Background()
	c, err := lockagent.Dial(ctx, "") // $LOCK_AGENT_SOCKET, /run/lock-agent/agent.sock, or the -dev socket
	if err != nil {
		panic(err)
	}
	defer c.Close()

	l, err := c.Lock(ctx, "example/nightly-report", lockagent.Wait(5*time.Second))
	if err != nil {
		panic(err)
	}
	defer l.Unlock(ctx)

	job := func(ctx context.Context, fence int64) error { return ctx.Err() }
	fmt.Println("job:", job(l.Context(), l.Fence()))
	// Output: job: <nil>
}

// A second owner does not get a held lock: with Wait(0) it is ErrBusy at once.
func ExampleClient_Lock_busy() {
	ctx := context.Background()
	c, _ := lockagent.Dial(ctx, "")
	defer c.Close()

	first, _ := c.Lock(ctx, "example/busy")
	defer first.Unlock(ctx)

	_, err := c.Lock(ctx, "example/busy", lockagent.Wait(0))
	fmt.Println(errors.Is(err, lockagent.ErrBusy))
	// Output: true
}

// A lock with a TTL ends by itself; Done and Err tell the holder.
func ExampleTTL() {
	ctx := context.Background()
	c, _ := lockagent.Dial(ctx, "")
	defer c.Close()

	l, _ := c.Lock(ctx, "example/ttl", lockagent.TTL(200*time.Millisecond))
	<-l.Done()
	fmt.Println(l.Err())
	// Output: lockagent: lock example/ttl lost: expired
}
