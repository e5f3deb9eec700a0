package lockagent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
)

// TestBadArgumentsNeverReachTheAgent: a name, owner or option value outside
// protocol v1 is refused with an *ArgError naming it, and not one byte of it
// is written: the agent sees no request, and a lock the same owner holds is
// still held.
func TestBadArgumentsNeverReachTheAgent(t *testing.T) {
	proxy := startProxy(t, agentSocket)
	c := dial(t, proxy.path)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	victim, err := c.Lock(ctx, "go/victim", lockagent.Owner("me"))
	if err != nil {
		t.Fatal(err)
	}
	me := lockagent.Owner("me")
	lock := func(name string, opts ...lockagent.Option) func() error {
		return func() error {
			l, err := c.Lock(ctx, name, opts...)
			if err == nil {
				l.Unlock(ctx)
			}
			return err
		}
	}
	lockAll := func(names []string, opts ...lockagent.Option) func() error {
		return func() error {
			ls, err := c.LockAll(ctx, names, opts...)
			for _, l := range ls {
				l.Unlock(ctx)
			}
			return err
		}
	}
	for _, tc := range []struct {
		name string
		arg  string // the ArgError's Arg
		call func() error
	}{
		{"a name with an option after a space is not an option", "name", lock("go/inj ttl=200")},
		{"a name with a newline cannot smuggle an UNLOCK of another lock", "name", lock("x wait=0\n99 UNLOCK go/victim", me)},
		{"a name with a CR LF cannot smuggle a request", "name", lock("x\r\n98 UNLOCK go/victim", me)},
		{"two names are not one name", "name", lock("go/a go/b")},
		{"an empty name", "name", lock("")},
		{"a name of 201 bytes", "name", lock(strings.Repeat("n", 201))},
		{"a name with a brace", "name", lock("go/{x}")},
		{"a name with a non-ASCII letter", "name", lock("go/é")},
		{"an owner with a space cannot add an option", "owner", lock("go/o1", lockagent.Owner("me wait=0"))},
		{"an owner with a newline cannot smuggle an UNLOCK", "owner", lock("go/o2", lockagent.Owner("x\n97 UNLOCK go/victim owner=me"))},
		{"an owner with a slash", "owner", lock("go/o3", lockagent.Owner("a/b"))},
		{"an owner of 65 bytes", "owner", lock("go/o4", lockagent.Owner(strings.Repeat("o", 65)))},
		{"a negative wait", "wait", lock("go/w1", lockagent.Wait(-1))},
		{"a wait of more than a year", "wait", lock("go/w2", lockagent.Wait(400*24*time.Hour))},
		{"a zero ttl", "ttl", lock("go/t1", lockagent.TTL(0))},
		{"a negative ttl", "ttl", lock("go/t2", lockagent.TTL(-time.Second))},
		{"a zero limit", "limit", lock("go/l1", lockagent.Limit(0))},
		{"a limit over 4096", "limit", lock("go/l2", lockagent.Limit(4097))},
		{"LockAll of no names", "names", lockAll(nil)},
		{"LockAll of a name given twice", "names", lockAll([]string{"go/m1", "go/m2", "go/m1"})},
		{"LockAll checks every name, not only the first", "name", lockAll([]string{"go/m1", "go/m2 ttl=200"})},
		{"LockAll of names too long for one line", "names", lockAll(namesOfLen(lockagent.MaxNamesLen + 1))},
		{"WHO of a name with a newline", "name", func() error {
			_, err := c.Who(ctx, "go/victim\n96 UNLOCK go/victim owner=me")
			return err
		}},
		{"EXTEND by zero", "ttl", func() error {
			_, err := victim.Extend(ctx, 0)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mark := proxy.mark()
			err := tc.call()
			var arg *lockagent.ArgError
			if !errors.As(err, &arg) || arg.Arg != tc.arg || !errors.Is(err, lockagent.ErrInvalidArgument) {
				t.Fatalf("err = %v, want an *ArgError for the %s", err, tc.arg)
			}
			// A PING answered means every line written before it was forwarded.
			if err := c.Ping(ctx); err != nil {
				t.Fatal(err)
			}
			if sent := proxy.since(mark); len(sent) != 1 || !strings.HasSuffix(sent[0], " PING\n") {
				t.Fatalf("the agent was sent %q, want only the PING", sent)
			}
		})
	}
	if victim.Err() != nil {
		t.Fatalf("victim: %v", victim.Err())
	}
	holds, err := c.Holds(ctx)
	if err != nil || len(holds) != 1 || holds[0].Name != "go/victim" || holds[0].Count != 1 {
		t.Fatalf("holds = %+v, %v; want go/victim alone, once", holds, err)
	}
	other := dial(t, "")
	if _, err := other.Lock(ctx, "go/victim", lockagent.Wait(0)); !errors.Is(err, lockagent.ErrBusy) {
		t.Fatalf("another client locking the victim: %v, want ErrBusy", err)
	}
	if err := victim.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestArgErrorsMatchTheAgentsCodes: code that checked the agent's answer
// with errors.Is keeps working now that the client answers first.
func TestArgErrorsMatchTheAgentsCodes(t *testing.T) {
	c := dial(t, "")
	ctx := context.Background()
	if _, err := c.Lock(ctx, "bad name"); !errors.Is(err, lockagent.ErrBadName) || errors.Is(err, lockagent.ErrBadRequest) {
		t.Fatalf("bad name: %v", err)
	}
	if _, err := c.Lock(ctx, "go/x", lockagent.Owner("bad owner")); !errors.Is(err, lockagent.ErrBadRequest) || errors.Is(err, lockagent.ErrBadName) {
		t.Fatalf("bad owner: %v", err)
	}
}

// namesOfLen returns distinct names that take n bytes together, with a
// space between each.
func namesOfLen(n int) []string {
	var names []string
	for i := 0; n > 0; i++ {
		size := min(n, 200)
		if rest := n - size; rest > 0 && rest < 10 {
			size -= 10 // leave room for one more distinct name and its space
		}
		id := fmt.Sprintf("go/%d/", i)
		names = append(names, id+strings.Repeat("n", size-len(id)))
		n -= size + 1
	}
	return names
}

// TestLockAllOfTheLongestNamesThatFit: names that take exactly what the
// client allows reach the agent as one request line it reads, even with the
// longest value of every option (which it then refuses as a bad request,
// keeping the connection), and are granted with everyday options. (One byte
// more is refused by the client: TestBadArgumentsNeverReachTheAgent.)
func TestLockAllOfTheLongestNamesThatFit(t *testing.T) {
	c := dial(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	names := namesOfLen(lockagent.MaxNamesLen)
	if got := len(strings.Join(names, " ")); got != lockagent.MaxNamesLen {
		t.Fatalf("namesOfLen made %d bytes, want %d", got, lockagent.MaxNamesLen)
	}
	year := 365 * 24 * time.Hour
	_, err := c.LockAll(ctx, names, lockagent.Owner(strings.Repeat("o", 64)), lockagent.Wait(year),
		lockagent.TTL(year), lockagent.Shared(), lockagent.Limit(4096), lockagent.Fair())
	var arg *lockagent.ArgError
	if !errors.Is(err, lockagent.ErrBadRequest) || errors.As(err, &arg) {
		t.Fatalf("the longest LockAll line: %v, want the agent's BAD_REQUEST (ttl over max_ttl, shared with limit)", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("the connection after the longest LockAll line: %v", err)
	}
	ls, err := c.LockAll(ctx, names, lockagent.Wait(time.Minute))
	if err != nil || len(ls) != len(names) {
		t.Fatalf("LockAll of %d names, %d bytes: %v", len(names), lockagent.MaxNamesLen, err)
	}
	for _, l := range ls {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
