// Command example takes a lock through the local lock-agent, does its job
// while watching for the lock to be lost, and releases it.
//
//	go run ./cmd/lock-agent run -dev        # in one terminal; it prints LOCK_AGENT_SOCKET
//	go run ./examples/go                    # in another: it finds the -dev socket by itself
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
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer c.Close()

	l, err := c.Lock(ctx, "examples/nightly-report", lockagent.Wait(10*time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, "could not lock:", err)
		os.Exit(1)
	}
	fmt.Printf("holding %s with fence %d\n", l.Name(), l.Fence())

	// The job: l.Context() ends if the lock is lost, so the work stops too.
	if err := report(l.Context(), l.Fence()); err != nil {
		fmt.Fprintln(os.Stderr, "job stopped:", err)
		os.Exit(1)
	}
	if err := l.Unlock(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("released")
}

// report stands for work that passes the fence to whatever it writes, so a
// late writer with an older fence can be refused.
func report(ctx context.Context, fence int64) error {
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(100 * time.Millisecond):
		fmt.Printf("report written with fence %d\n", fence)
		return nil
	}
}
