package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
)

// TestWhoShowsTheQueue: a WHO final line with queued=Q shows in who's text
// and JSON; without it, who shows no queue, in either.
func TestWhoShowsTheQueue(t *testing.T) {
	holder := "DATA agent=host-a pid=42 uid=1000 owner=batch mode=exclusive fence=99 since=1700000000000"
	for _, tc := range []struct {
		name    string
		replies []string
		text    []string // in the text output
		notText string   // not in it
		queued  int      // in the JSON; -1: no "queued" key
		holders int
	}{
		{"a held name with waiters", []string{holder, "OK n=1 queued=3"}, []string{"batch", "3 queued"}, "", 3, 1},
		{"a held name with an empty queue", []string{holder, "OK n=1 queued=0"}, []string{"batch", "0 queued"}, "", 0, 1},
		{"an agent without fair queues", []string{holder, "OK n=1"}, []string{"batch"}, "queued", -1, 1},
		{"a free name with waiters", []string{"OK n=0 queued=2"}, []string{"is free", "2 queued"}, "", 2, 0},
		{"a free name, no queue reported", []string{"OK n=0"}, []string{"jobs/q is free\n"}, "queued", -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := lockagenttest.StartFake(t, func(string, []string) []string { return tc.replies })
			var stdout, stderr bytes.Buffer
			if code := whoCmd([]string{"-socket", fake.Path, "jobs/q"}, &stdout, &stderr); code != 0 {
				t.Fatalf("who: exit %d %s", code, stderr.String())
			}
			for _, want := range tc.text {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("who printed %q, want %q in it", stdout.String(), want)
				}
			}
			if tc.notText != "" && strings.Contains(stdout.String(), tc.notText) {
				t.Errorf("who printed %q, want no %q", stdout.String(), tc.notText)
			}
			stdout.Reset()
			if code := whoCmd([]string{"-socket", fake.Path, "-json", "jobs/q"}, &stdout, &stderr); code != 0 {
				t.Fatalf("who -json: exit %d %s", code, stderr.String())
			}
			var got struct {
				Name    string
				Holders []struct{ PID int }
				Queued  *int
			}
			if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
				t.Fatalf("who -json: %v\n%s", err, stdout.String())
			}
			if got.Name != "jobs/q" || len(got.Holders) != tc.holders || (tc.holders > 0 && got.Holders[0].PID != 42) {
				t.Errorf("who -json: %s", stdout.String())
			}
			switch {
			case tc.queued < 0 && got.Queued != nil:
				t.Errorf("who -json has queued=%d, want none:\n%s", *got.Queued, stdout.String())
			case tc.queued >= 0 && (got.Queued == nil || *got.Queued != tc.queued):
				t.Errorf("who -json: want queued %d:\n%s", tc.queued, stdout.String())
			}
			if sent := fake.Requests(); len(sent) != 2 || sent[0] != "WHO jobs/q" {
				t.Errorf("sent %q", sent)
			}
		})
	}
}
