package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseLockDelay(t *testing.T) {
	for _, tt := range []struct {
		name, lock string
		delay      time.Duration
		err        string
	}{
		{"the default is none", ``, 0, ""},
		{"a delay is kept", `lock_delay = "5s"`, 5 * time.Second, ""},
		{"0 is none", `lock_delay = "0"`, 0, ""},
		{"the most is 5m", `lock_delay = "5m"`, 5 * time.Minute, ""},
		{"more than 5m is refused", `lock_delay = "6m"`, 0, "lock_delay"},
		{"a bad duration is refused", `lock_delay = "soon"`, 0, "lock_delay"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte("redis \"a\" { address = \"h:1\" }\nlock {\n"+tt.lock+"\n}"), "x.hcl")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one about %s", err, tt.err)
				}
				return
			}
			if err != nil || cfg.Lock.LockDelay != tt.delay {
				t.Fatalf("decoded %+v, %v", cfg.Lock, err)
			}
		})
	}
}

func TestRevokeIsGrantedOnlyByName(t *testing.T) {
	for _, tt := range []struct {
		name, verbs string
		revoke      bool
	}{
		{"a rule without verbs does not grant revoke", ``, false},
		{"a rule that names revoke grants it", `verbs = ["who", "REVOKE"]`, true},
		{"a rule with other verbs does not", `verbs = ["lock", "who"]`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(fmt.Sprintf("redis \"a\" { address = \"h:1\" }\nacl {\nrule \"r\" {\nuid = 0\nnames = [\"**\"]\n%s\n}\n}", tt.verbs)), "x.hcl")
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Contains(cfg.ACL.Rules[0].Verbs, "revoke"); got != tt.revoke {
				t.Fatalf("verbs %v: revoke %v, want %v", cfg.ACL.Rules[0].Verbs, got, tt.revoke)
			}
		})
	}
}
