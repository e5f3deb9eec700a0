// Command election shows leader election through lock-agent: two candidates
// campaign for one name, an observer follows every term, the leader changes
// its value, and resigns so that the other is elected.
//
//	go run ./examples/election   # against `lock-agent run -dev`, or $LOCK_AGENT_SOCKET
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
)

const name = "examples/election"

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	observer, first, second := dial(ctx), dial(ctx), dial(ctx)
	defer observer.Close()
	defer first.Close()
	defer second.Close()

	changes, err := observer.Observe(ctx, name) // the current leader, then every change
	if err != nil {
		log.Fatal(err)
	}
	seen := func(want func(lockagent.Leader) bool) lockagent.Leader {
		for ld := range changes {
			if want(ld) {
				return ld
			}
		}
		log.Fatal("the observation ended")
		return lockagent.Leader{}
	}
	seen(func(ld lockagent.Leader) bool { return ld.None })
	fmt.Println("observer: nobody leads")

	leader, err := first.Campaign(ctx, name, "10.0.0.5:8080") // returns once elected
	if err != nil {
		log.Fatal(err)
	}
	ld := seen(func(ld lockagent.Leader) bool { return ld.Fence == leader.Fence() })
	fmt.Printf("observer: the first candidate leads, value %q\n", ld.Value)

	elected := make(chan *lockagent.Lock)
	go func() { // waits in line behind the leader
		l, err := second.Campaign(ctx, name, "10.0.0.6:8080")
		if err != nil {
			log.Fatal(err)
		}
		elected <- l
	}()
	if err := leader.Proclaim(ctx, "10.0.0.5:9090"); err != nil {
		log.Fatal(err)
	}
	ld = seen(func(ld lockagent.Leader) bool { return ld.Value == "10.0.0.5:9090" })
	fmt.Printf("observer: the first candidate proclaims %q\n", ld.Value)

	leader.Unlock(ctx) // resign: the second candidate is elected
	next := <-elected
	seen(func(ld lockagent.Leader) bool { return ld.Fence == next.Fence() })
	fmt.Printf("observer: the second candidate leads, a newer term: %v\n", next.Fence() > leader.Fence())
	next.Unlock(ctx)
	seen(func(ld lockagent.Leader) bool { return ld.None })
	fmt.Println("observer: resigned, nobody leads")
}

func dial(ctx context.Context) *lockagent.Client {
	c, err := lockagent.Dial(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	return c
}
