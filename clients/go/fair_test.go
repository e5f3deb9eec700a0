package lockagent_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
)

// TestFairIsSentAsFairTrue checks the wire only, so a fake answers and
// records the exact lines (../../tests/goclient_kinds_test.go has Fair
// against the real agents).
func TestFairIsSentAsFairTrue(t *testing.T) {
	fake := lockagenttest.StartFake(t, lockagenttest.GrantAll)
	c := dial(t, fake.Path)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		lock func() ([]*lockagent.Lock, error)
		want string // the LOCK request, without its owner= word
	}{
		{"Fair adds fair=true", func() ([]*lockagent.Lock, error) {
			l, err := c.Lock(ctx, "go/fair", lockagent.Fair())
			return []*lockagent.Lock{l}, err
		}, "LOCK go/fair fair=true"},
		{"without Fair there is no fair= at all", func() ([]*lockagent.Lock, error) {
			l, err := c.Lock(ctx, "go/unfair")
			return []*lockagent.Lock{l}, err
		}, "LOCK go/unfair"},
		{"Fair goes with every other option", func() ([]*lockagent.Lock, error) {
			l, err := c.Lock(ctx, "go/fair-rw", lockagent.Fair(), lockagent.Shared(), lockagent.Wait(0))
			return []*lockagent.Lock{l}, err
		}, "LOCK go/fair-rw wait=0 mode=shared fair=true"},
		{"Fair with a semaphore", func() ([]*lockagent.Lock, error) {
			l, err := c.Lock(ctx, "go/fair-sem", lockagent.Limit(3), lockagent.Fair())
			return []*lockagent.Lock{l}, err
		}, "LOCK go/fair-sem limit=3 fair=true"},
		{"LockAll sends fair=true once for every name", func() ([]*lockagent.Lock, error) {
			return c.LockAll(ctx, []string{"go/fb", "go/fa"}, lockagent.Fair())
		}, "LOCK go/fb go/fa fair=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(fake.Requests())
			ls, err := tc.lock()
			if err != nil {
				t.Fatal(err)
			}
			sent := fake.Requests()[before:]
			if len(sent) != 1 {
				t.Fatalf("sent %q, want one LOCK", sent)
			}
			var words []string
			for _, w := range strings.Fields(sent[0]) {
				if !strings.HasPrefix(w, "owner=") {
					words = append(words, w)
				}
			}
			if got := strings.Join(words, " "); got != tc.want {
				t.Fatalf("sent %q, want %q (and an owner=)", sent[0], tc.want)
			}
			for i, l := range ls {
				if l.Fence() != int64(7+i) {
					t.Errorf("%s: fence %d, want %d", l.Name(), l.Fence(), 7+i)
				}
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// TestFairRefusedByAnOlderAgentIsABadRequest: an agent without fair queues
// answers BAD_REQUEST, which Lock returns as ErrBadRequest with nothing held.
func TestFairRefusedByAnOlderAgentIsABadRequest(t *testing.T) {
	fake := lockagenttest.StartFake(t, func(verb string, args []string) []string {
		if verb == "LOCK" {
			return []string{"ERR BAD_REQUEST fair=true not supported yet"}
		}
		return []string{"OK"}
	})
	c := dial(t, fake.Path)
	if _, err := c.Lock(context.Background(), "go/fair", lockagent.Fair()); !errors.Is(err, lockagent.ErrBadRequest) {
		t.Fatalf("err = %v, want ErrBadRequest", err)
	}
}

// TestOccupancyReadsTheQueueLength: WHO's final line may carry queued=Q;
// without it Queued is -1 and Who is unchanged. A fake answers, since the
// real agent says no queued=0 and nothing that is not a count.
func TestOccupancyReadsTheQueueLength(t *testing.T) {
	var final atomic.Value // the fake's goroutine reads it
	fake := lockagenttest.StartFake(t, func(verb string, args []string) []string {
		return []string{
			"DATA agent=host-a pid=42 uid=1000 owner=g1 mode=exclusive fence=99 since=1700000000000",
			final.Load().(string),
		}
	})
	c := dial(t, fake.Path)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		final  string
		queued int
	}{
		{"queued=3 is three waiters", "OK n=1 queued=3", 3},
		{"queued=0 is an empty queue", "OK n=1 queued=0", 0},
		{"an agent that does not say is -1", "OK n=1", -1},
		{"a value that is not a count is -1", "OK n=1 queued=many", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			final.Store(tc.final)
			o, err := c.Occupancy(ctx, "go/q")
			if err != nil {
				t.Fatal(err)
			}
			if o.Queued != tc.queued || len(o.Holders) != 1 || o.Holders[0].Fence != 99 || o.Holders[0].PID != 42 {
				t.Fatalf("got %+v, want queued %d and the one holder", o, tc.queued)
			}
			who, err := c.Who(ctx, "go/q")
			if err != nil || len(who) != 1 || who[0].Owner != "g1" {
				t.Fatalf("Who: %+v %v", who, err)
			}
		})
	}
	if got := fake.Requests(); got[0] != "WHO go/q" {
		t.Fatalf("sent %q", got)
	}
}
