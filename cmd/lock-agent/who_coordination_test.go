package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
)

// TestWhoShowsValuesWaitersAndDelays: who shows a holder's value (quoted:
// any text), who waits on which agent, and a delay that stands, apart from
// the holders, in text and JSON.
func TestWhoShowsValuesWaitersAndDelays(t *testing.T) {
	until := time.Now().Add(time.Minute).UnixMilli()
	fake := lockagenttest.StartFake(t, func(string, []string) []string {
		return []string{
			"DATA agent=host-a pid=42 uid=1000 owner=batch mode=exclusive fence=99 since=1700000000000 value=a%20b%0A",
			"DATA waiting agent=host-b count=3 since=1700000000500",
			fmt.Sprintf("DATA delayed_until=%d", until),
			"OK n=1 waiting=3",
		}
	})
	var stdout, stderr bytes.Buffer
	if code := whoCmd([]string{"-socket", fake.Path, "jobs/v"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d %s", code, stderr.String())
	}
	for _, want := range []string{"VALUE", `"a b\n"`, "3 waiting on host-b", "unavailable to everyone"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("who printed %q, want %q in it", stdout.String(), want)
		}
	}
	if n := strings.Count(stdout.String(), "batch"); n != 1 {
		t.Errorf("who printed %q: the waiter or the delay as a holder", stdout.String())
	}
	stdout.Reset()
	if code := whoCmd([]string{"-socket", fake.Path, "-json", "jobs/v"}, &stdout, &stderr); code != 0 {
		t.Fatalf("-json: exit %d %s", code, stderr.String())
	}
	var got struct {
		Holders []struct{ Value string }
		Waiting []struct {
			Agent string
			Count int
		}
		DelayedUntil *time.Time `json:"delayed_until"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Holders) != 1 || got.Holders[0].Value != "a b\n" || len(got.Waiting) != 1 || got.Waiting[0].Count != 3 ||
		got.DelayedUntil == nil || got.DelayedUntil.UnixMilli() != until {
		t.Fatalf("who -json: %s", stdout.String())
	}
}
