package lockagent_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
)

// These tests check the wire only, against a fake that records the exact
// lines and pushes on cue; coordination_test.go runs every call against
// the real agent.

// withoutOwner drops the owner= word a request carries.
func withoutOwner(line string) string {
	var words []string
	for _, w := range strings.Fields(line) {
		if !strings.HasPrefix(w, "owner=") {
			words = append(words, w)
		}
	}
	return strings.Join(words, " ")
}

func ownerOf(args []string) string {
	for _, a := range args {
		if o, ok := strings.CutPrefix(a, "owner="); ok {
			return o
		}
	}
	return ""
}

func TestCoordinationOptionsOnTheWire(t *testing.T) {
	fake := lockagenttest.StartFake(t, lockagenttest.GrantAll)
	c := dial(t, fake.Path)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		lock func() (*lockagent.Lock, error)
		want string // the request without its owner=
	}{
		{"Value is percent-encoded", func() (*lockagent.Lock, error) {
			return c.Lock(ctx, "go/v", lockagent.Value("http://h:80/a b?x=1%"))
		}, "LOCK go/v value=http://h:80/a%20b%3Fx=1%25"},
		{"an empty Value sends none", func() (*lockagent.Lock, error) {
			return c.Lock(ctx, "go/v", lockagent.Value(""))
		}, "LOCK go/v"},
		{"NotifyWanted is notify=wanted", func() (*lockagent.Lock, error) {
			return c.Lock(ctx, "go/w", lockagent.NotifyWanted())
		}, "LOCK go/w notify=wanted"},
		{"Delay and MinHold in whole milliseconds, rounded up", func() (*lockagent.Lock, error) {
			return c.Lock(ctx, "go/d", lockagent.Delay(1500*time.Microsecond), lockagent.MinHold(time.Minute))
		}, "LOCK go/d delay=2 min_hold=60000"},
		{"Delay(0) overrides the agent's default", func() (*lockagent.Lock, error) {
			return c.Lock(ctx, "go/d0", lockagent.Delay(0))
		}, "LOCK go/d0 delay=0"},
		{"Campaign is a fair LOCK with its value", func() (*lockagent.Lock, error) {
			return c.Campaign(ctx, "go/leader", "host-1:8080", lockagent.Wait(time.Second))
		}, "LOCK go/leader wait=1000 fair=true value=host-1:8080"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(fake.Requests())
			l, err := tc.lock()
			if err != nil {
				t.Fatal(err)
			}
			defer l.Unlock(ctx)
			sent := fake.Requests()[before:]
			if len(sent) != 1 || withoutOwner(sent[0]) != tc.want {
				t.Fatalf("sent %q, want %q", sent, tc.want)
			}
		})
	}
}

func TestBadCoordinationOptionsSendNothing(t *testing.T) {
	fake := lockagenttest.StartFake(t, lockagenttest.GrantAll)
	c := dial(t, fake.Path)
	ctx := context.Background()
	long := strings.Repeat("é", 86) // 172 bytes, 516 encoded
	for _, tc := range []struct {
		name string
		opts []lockagent.Option
		arg  string
	}{
		{"a negative Delay", []lockagent.Option{lockagent.Delay(-time.Millisecond)}, "delay"},
		{"a Delay over 5 minutes", []lockagent.Option{lockagent.Delay(5*time.Minute + time.Millisecond)}, "delay"},
		{"a negative MinHold", []lockagent.Option{lockagent.MinHold(-1)}, "min_hold"},
		{"a MinHold over 24 hours", []lockagent.Option{lockagent.MinHold(25 * time.Hour)}, "min_hold"},
		{"a value over 512 bytes once encoded", []lockagent.Option{lockagent.Value(long)}, "value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Lock(ctx, "go/bad", tc.opts...)
			var arg *lockagent.ArgError
			if !errors.As(err, &arg) || arg.Arg != tc.arg || !errors.Is(err, lockagent.ErrBadRequest) {
				t.Fatalf("err = %v, want an ArgError of %s", err, tc.arg)
			}
		})
	}
	l, err := c.Lock(ctx, "go/ok", lockagent.Value(strings.Repeat("é", 85))) // 510 encoded: fits
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Proclaim(ctx, long); !errors.Is(err, lockagent.ErrInvalidArgument) {
		t.Fatalf("Proclaim of a long value: %v", err)
	}
	names := []string{strings.Repeat("a", 200), strings.Repeat("b", 200)}
	for i := range 16 { // 18 names of 200: 3617 bytes, which fit without the value
		names = append(names, strings.Repeat(string(rune('c'+i)), 200))
	}
	if _, err := c.LockAll(ctx, names, lockagent.Value(strings.Repeat("x", 512))); !errors.Is(err, lockagent.ErrInvalidArgument) {
		t.Fatalf("LockAll over one line with a value: %v", err)
	}
	for _, s := range fake.Requests() {
		if !strings.HasPrefix(s, "LOCK go/ok ") {
			t.Fatalf("sent %q", s)
		}
	}
	if got := len(fake.Requests()); got != 1 {
		t.Fatalf("%d requests sent, want only go/ok's", got)
	}
}

// TestWantedSignalsTheHoldOfTheOwner: a * WANTED push reaches the lock of
// its name and owner, not another.
func TestWantedSignalsTheHoldOfTheOwner(t *testing.T) {
	fake := lockagenttest.StartFake(t, func(verb string, args []string) []string {
		switch {
		case verb == "LOCK" && args[0] == "go/wanted":
			return []string{"OK fence=3 validity=5000 count=1", "* WANTED go/wanted owner=" + ownerOf(args) + " waiting=2"}
		case verb == "LOCK":
			return []string{"OK fence=4 validity=5000 count=1"}
		}
		return []string{"OK count=0"}
	})
	c := dial(t, fake.Path)
	ctx := context.Background()
	other, err := c.Lock(ctx, "go/other", lockagent.NotifyWanted())
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Lock(ctx, "go/wanted", lockagent.NotifyWanted())
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Wanted():
	case <-time.After(5 * time.Second):
		t.Fatal("no Wanted signal")
	}
	select {
	case <-other.Wanted():
		t.Fatal("the other lock was signalled")
	default:
	}
}

func TestObserveOnTheWire(t *testing.T) {
	var observes atomic.Int32
	fake := lockagenttest.StartFake(t, func(verb string, args []string) []string {
		switch {
		case verb == "OBSERVE" && observes.Add(1) == 1:
			return []string{"OK", "* LEADER go/el fence=5 value=a%20b agent=host-1", "* LEADER go/el none",
				"* LEADER go/other fence=9 value=x agent=host-2", "* LEADER go/el fence=6 agent=host-2"}
		case verb == "OBSERVE": // the agent answers an OBSERVE again with the current state
			return []string{"OK", "* LEADER go/el fence=6 agent=host-2"}
		case verb == "PING":
			return []string{"OK", "* LEADER go/el fence=6 value=new agent=host-2"}
		}
		return []string{"OK"}
	})
	c := dial(t, fake.Path)
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := c.Observe(ctx, "go/el")
	if err != nil {
		t.Fatal(err)
	}
	want := []lockagent.Leader{
		{Name: "go/el", Fence: 5, Value: "a b", Agent: "host-1"},
		{Name: "go/el", None: true},
		{Name: "go/el", Fence: 6, Agent: "host-2"},
	}
	for i, w := range want {
		select {
		case got := <-ch:
			if got != w {
				t.Fatalf("push %d: %+v, want %+v", i, got, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("push %d never came", i)
		}
	}
	// A second observer of the name shares the observation, but sends an
	// OBSERVE of its own and starts from its answer (a repeat, which the
	// first observer is not pushed again).
	ch2, err := c.Observe(ctx, "go/el")
	if err != nil {
		t.Fatal(err)
	}
	if got := <-ch2; got != want[2] {
		t.Fatalf("the second observer starts with %+v", got)
	}
	// Leader asks the agent again, and the answer, the same state, is not
	// pushed to the observers a second time.
	if l, err := c.Leader(context.Background(), "go/el"); err != nil || l != want[2] {
		t.Fatalf("Leader while observed: %+v %v", l, err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	changed := lockagent.Leader{Name: "go/el", Fence: 6, Value: "new", Agent: "host-2"}
	for _, ch := range []<-chan lockagent.Leader{ch, ch2} {
		if got := <-ch; got != changed {
			t.Fatalf("after Leader, the observer got %+v, want the change %+v", got, changed)
		}
	}
	cancel()
	for range ch {
	}
	for range ch2 {
	}
	lockagenttest.Eventually(t, 5*time.Second, func() bool {
		return strings.Join(fake.Requests(), "|") == "OBSERVE go/el|OBSERVE go/el|OBSERVE go/el|PING|UNOBSERVE go/el"
	}, "requests: %q", fake.Requests())
}

func TestObserveRefusedIsAnError(t *testing.T) {
	fake := lockagenttest.StartFake(t, func(verb string, args []string) []string {
		return []string{"ERR LIMIT too many observed names"}
	})
	c := dial(t, fake.Path)
	if _, err := c.Observe(context.Background(), "go/el"); !errors.Is(err, lockagent.ErrLimit) {
		t.Fatalf("err = %v, want ErrLimit", err)
	}
	if _, err := c.Leader(context.Background(), "go/el"); !errors.Is(err, lockagent.ErrLimit) {
		t.Fatalf("Leader: err = %v, want ErrLimit", err)
	}
	if _, err := c.Observe(context.Background(), "bad name"); !errors.Is(err, lockagent.ErrBadName) {
		t.Fatalf("a bad name: %v", err)
	}
	if got := fake.Requests(); len(got) != 2 {
		t.Fatalf("sent %q, want two OBSERVEs and no UNOBSERVE", got)
	}
}

func TestCheckRevokeProclaimOnTheWire(t *testing.T) {
	fake := lockagenttest.StartFake(t, func(verb string, args []string) []string {
		switch verb {
		case "CHECK":
			return []string{"OK current=" + map[bool]string{true: "true", false: "false"}[args[1] == "fence=7"]}
		case "REVOKE":
			return []string{"OK n=2"}
		}
		return lockagenttest.GrantAll(verb, args)
	})
	c := dial(t, fake.Path)
	ctx := context.Background()
	if ok, err := c.Check(ctx, "go/c", 7); !ok || err != nil {
		t.Fatalf("Check 7: %v %v", ok, err)
	}
	if ok, err := c.Check(ctx, "go/c", 8); ok || err != nil {
		t.Fatalf("Check 8: %v %v", ok, err)
	}
	if n, err := c.Revoke(ctx, "go/c", lockagent.RevokeOptions{Agent: "host-1", Reason: "maintenance"}); n != 2 || err != nil {
		t.Fatalf("Revoke: %d %v", n, err)
	}
	if _, err := c.Revoke(ctx, "go/c", lockagent.RevokeOptions{}); err != nil {
		t.Fatal(err)
	}
	l, err := c.Lock(ctx, "go/p", lockagent.Value("one"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Proclaim(ctx, "two, three"); err != nil || l.Value() != "two, three" {
		t.Fatalf("Proclaim: %v, value %q", err, l.Value())
	}
	for _, bad := range []func() error{
		func() error { _, err := c.Check(ctx, "go/c", 0); return err },
		func() error { _, err := c.Revoke(ctx, "go/c", lockagent.RevokeOptions{Agent: "a b"}); return err },
		func() error {
			_, err := c.Revoke(ctx, "go/c", lockagent.RevokeOptions{Reason: "Not-a-word"})
			return err
		},
	} {
		if err := bad(); !errors.Is(err, lockagent.ErrInvalidArgument) {
			t.Fatalf("err = %v, want an ArgError", err)
		}
	}
	want := []string{"CHECK go/c fence=7", "CHECK go/c fence=8", "REVOKE go/c agent=host-1 reason=maintenance",
		"REVOKE go/c", "LOCK go/p value=one", "SET go/p value=two,%20three"}
	got := fake.Requests()
	for i := range got {
		got[i] = withoutOwner(got[i])
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("sent %q\nwant %q", got, want)
	}
}

// TestOccupancyReadsWaitersValuesAndDelays: WHO's DATA lines about waiters
// and a delay are not holders.
func TestOccupancyReadsWaitersValuesAndDelays(t *testing.T) {
	fake := lockagenttest.StartFake(t, func(verb string, args []string) []string {
		return []string{
			"DATA agent=host-a pid=42 uid=1000 owner=g1 mode=exclusive fence=99 since=1700000000000 value=a%2Fb%20c",
			"DATA waiting agent=host-b count=3 since=1700000000500",
			"DATA delayed_until=1700000009000",
			"OK n=1 waiting=3 queued=0",
		}
	})
	c := dial(t, fake.Path)
	o, err := c.Occupancy(context.Background(), "go/q")
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Holders) != 1 || o.Holders[0].Value != "a/b c" || o.Holders[0].Fence != 99 {
		t.Fatalf("holders %+v", o.Holders)
	}
	if len(o.Waiting) != 1 || o.Waiting[0] != (lockagent.Waiting{Agent: "host-b", Count: 3, Since: time.UnixMilli(1700000000500)}) {
		t.Fatalf("waiting %+v", o.Waiting)
	}
	if !o.DelayedUntil.Equal(time.UnixMilli(1700000009000)) {
		t.Fatalf("delayed until %v", o.DelayedUntil)
	}
}

// TestLeaderTakesNoPushFromBeforeItsObserve: while this connection observes
// the name, the agent's push of an older state may come between a new
// OBSERVE and its OK; Leader and a second Observe must not take it (issue
// 31: Leader answered with it, a state from before the call).
func TestLeaderTakesNoPushFromBeforeItsObserve(t *testing.T) {
	var mu sync.Mutex
	script := []string{"OK", "* LEADER go/s fence=5 agent=h1"}
	fake := lockagenttest.StartFake(t, func(verb string, args []string) []string {
		mu.Lock()
		defer mu.Unlock()
		if verb == "OBSERVE" {
			return script
		}
		return []string{"OK"}
	})
	setScript := func(s ...string) { mu.Lock(); script = s; mu.Unlock() }
	c := dial(t, fake.Path)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := c.Observe(ctx, "go/s")
	if err != nil {
		t.Fatal(err)
	}
	if l := <-ch; l.Fence != 5 {
		t.Fatalf("first push %+v", l)
	}
	setScript("* LEADER go/s none", "OK", "* LEADER go/s fence=6 agent=h2")
	if l, err := c.Leader(ctx, "go/s"); err != nil || l.Fence != 6 {
		t.Fatalf("Leader: %+v %v, want term 6, the push after its OBSERVE's OK", l, err)
	}
	setScript("* LEADER go/s fence=6 value=old agent=h2", "OK", "* LEADER go/s fence=7 agent=h1")
	ch2, err := c.Observe(ctx, "go/s")
	if err != nil {
		t.Fatal(err)
	}
	if l := <-ch2; l.Fence != 7 {
		t.Fatalf("a second Observe starts with %+v, want term 7", l)
	}
}
