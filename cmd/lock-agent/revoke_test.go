package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
)

func TestRevokeCommand(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		reply string
		sent  string // the request the agent got; "" none
		code  int
		out   string
	}{
		{"every holder, the default reason", []string{"jobs/q"}, "OK n=2", "REVOKE jobs/q", exitOK, "revoked 2 hold(s) of jobs/q"},
		{"one agent's holds, with a reason", []string{"-agent", "web-7", "jobs/q", "-reason", "maintenance"}, "OK n=1", "REVOKE jobs/q agent=web-7 reason=maintenance", exitOK, "revoked 1"},
		{"denied by the agent's ACL", []string{"jobs/q"}, "ERR DENIED no rule allows", "REVOKE jobs/q", exitFailure, "DENIED"},
		{"a name the agent refuses", []string{"bad!"}, "ERR BAD_NAME bad name", "REVOKE bad!", exitUsage, "BAD_NAME"},
		{"no name", nil, "", "", exitUsage, "usage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sent []string
			fake := lockagenttest.StartFake(t, func(verb string, args []string) []string {
				sent = append(sent, strings.Join(append([]string{verb}, args...), " "))
				return []string{"DATA ignored=1", tc.reply}
			})
			var stdout, stderr bytes.Buffer
			code := revokeCmd(append([]string{"-socket", fake.Path}, tc.args...), &stdout, &stderr)
			if code != tc.code || !strings.Contains(stdout.String()+stderr.String(), tc.out) {
				t.Errorf("exit %d, %q %q; want %d and %q", code, stdout.String(), stderr.String(), tc.code, tc.out)
			}
			if tc.sent != "" && (len(sent) != 1 || sent[0] != tc.sent) {
				t.Errorf("the agent got %q, want %q", sent, tc.sent)
			}
		})
	}
}
