package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
)

func TestTheSampleConfigIsValid(t *testing.T) {
	cfg, err := Load(filepath.Join("..", "..", "agent.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Masters) != 3 || cfg.Lock.Lease != 15*time.Second || cfg.Socket.Mode != 0o660 || cfg.AgentID != "web-7" {
		t.Fatalf("sample decoded to %+v", cfg)
	}
}

func TestParseDefaults(t *testing.T) {
	cfg, err := Parse([]byte(`redis "a" { address = "127.0.0.1:6379" }`), "x.hcl")
	if err != nil {
		t.Fatal(err)
	}
	want := agent.Default()
	if cfg.Lock != want.Lock || cfg.Limits != want.Limits || cfg.Socket != want.Socket || cfg.Log != want.Log {
		t.Fatalf("defaults differ: %+v", cfg)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // every one must appear in the error text
	}{
		{"a typo names the line and suggests the key", "redis \"a\" { address = \"h:1\" }\nlock {\n  leese = \"1s\"\n}", []string{"x.hcl:3", "leese", "Did you mean \"lease\""}},
		{"an unknown block is an error", "redis \"a\" { address = \"h:1\" }\nmystery {}", []string{"x.hcl:2", "mystery"}},
		{"no masters is an error", "lock { lease = \"15s\" }", []string{"No redis masters"}},
		{"a missing address is an error", "redis \"a\" {}", []string{"address"}},
		{"every bad value is reported together, each with its line", "redis \"a\" { address = \"nohost\" }\nlock {\n  lease = \"soon\"\n  drift_factor = 0.9\n}\nlog {\n  level = \"loud\"\n}",
			[]string{"x.hcl:1", "address", "x.hcl:3", "lease", "x.hcl:4", "drift_factor", "x.hcl:7", "level"}},
		{"a socket mode the owner cannot use is an error", "redis \"a\" { address = \"h:1\" }\nsocket { mode = \"0066\" }", []string{"x.hcl:2", "mode"}},
		{"a master_timeout too close to the lease is an error", "redis \"a\" { address = \"h:1\" }\nlock {\n  lease = \"1s\"\n  master_timeout = \"500ms\"\n}", []string{"master_timeout"}},
		{"two masters with one name is an error", "redis \"a\" { address = \"h:1\" }\nredis \"a\" { address = \"h:2\" }", []string{"second redis block"}},
		{"a second redis block with a name is reported at its own line", "redis \"a\" { address = \"h:1\" }\n\nredis \"a\" { address = \"h:2\" }", []string{"x.hcl:3", "second redis block"}},
		{"an error in a second block with a name points into that block", "redis \"a\" { address = \"h:1\" }\nredis \"a\" {\n  address = \"nohost\"\n}", []string{"x.hcl:3", "want host:port"}},
		{"an unknown argument does not hide the other errors", "redis \"a\" { address = \"nohost\" }\nlock {\n  leese = \"1s\"\n  drift_factor = 0.9\n}",
			[]string{"x.hcl:1", "address", "x.hcl:3", "leese", "x.hcl:4", "drift_factor"}},
		{"a socket group that does not exist is an error", "redis \"a\" { address = \"h:1\" }\nsocket {\n  group = \"no-such-group-7f3a\"\n}", []string{"x.hcl:3", "no group \"no-such-group-7f3a\""}},
		{"a password and a password file is an error", "redis \"a\" {\n address = \"h:1\"\n password = \"x\"\n password_file = \"/nope\"\n}", []string{"x.hcl:4", "not both"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), "x.hcl")
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestParseSessionAndTTLLimits(t *testing.T) {
	cfg, err := Parse([]byte(`redis "a" { address = "h:1" }
lock { max_ttl = "90s" }
limits {
  max_sessions_per_uid = 7
  idle_timeout = "10m"
}`), "x.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Lock.MaxTTL != 90*time.Second || cfg.Limits.MaxSessionsPerUID != 7 || cfg.Limits.IdleTimeout != 10*time.Minute {
		t.Fatalf("decoded %+v %+v", cfg.Lock, cfg.Limits)
	}
	if _, err := Parse([]byte("redis \"a\" { address = \"h:1\" }\nlock { max_ttl = \"10ms\" }"), "x.hcl"); err == nil || !strings.Contains(err.Error(), "max_ttl") {
		t.Fatalf("a max_ttl under the minimum ttl: %v", err)
	}
	if d := agent.Default(); d.Lock.MaxTTL != 720*time.Hour || d.Limits.MaxSessionsPerUID != 1000 || d.Limits.IdleTimeout != 0 {
		t.Fatalf("defaults %+v %+v", d.Lock, d.Limits)
	}
}

func TestParseCohortSettings(t *testing.T) {
	for _, tt := range []struct {
		name, lock string
		handoffs   int
		hold       time.Duration
		err        string
	}{
		{"the defaults keep a remote waiter's wait short", ``, 128, 20 * time.Millisecond, ""},
		{"both can be set", `cohort_max_handoffs = 8
cohort_max_hold = "5ms"`, 8, 5 * time.Millisecond, ""},
		{"0 handoffs turns cohorting off", `cohort_max_handoffs = 0`, 0, 20 * time.Millisecond, ""},
		{"a hold of 0 turns cohorting off", `cohort_max_hold = "0"`, 128, 0, ""},
		{"a negative count is refused", `cohort_max_handoffs = -1`, 0, 0, "cohort_max_handoffs"},
		{"too large a block is refused", `cohort_max_handoffs = 100000`, 0, 0, "cohort_max_handoffs"},
		{"a bad duration is refused", `cohort_max_hold = "soon"`, 0, 0, "cohort_max_hold"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte("redis \"a\" { address = \"h:1\" }\nlock {\n"+tt.lock+"\n}"), "x.hcl")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one about %s", err, tt.err)
				}
				return
			}
			if err != nil || cfg.Lock.CohortMaxHandoffs != tt.handoffs || cfg.Lock.CohortMaxHold != tt.hold {
				t.Fatalf("decoded %+v, %v", cfg.Lock, err)
			}
		})
	}
}

func TestParseCacheLinger(t *testing.T) {
	for _, tt := range []struct {
		name, lock string
		linger     time.Duration
		err        string
	}{
		{"the default caches for a second", ``, time.Second, ""},
		{"it can be set", `cache_linger = "250ms"`, 250 * time.Millisecond, ""},
		{"0 turns caching off", `cache_linger = "0"`, 0, ""},
		{"a bad duration is refused", `cache_linger = "a while"`, 0, "cache_linger"},
		{"a negative one is refused", `cache_linger = "-1s"`, 0, "cache_linger"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte("redis \"a\" { address = \"h:1\" }\nlock {\n"+tt.lock+"\n}"), "x.hcl")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one about %s", err, tt.err)
				}
				return
			}
			if err != nil || cfg.Lock.CacheLinger != tt.linger {
				t.Fatalf("decoded %+v, %v", cfg.Lock, err)
			}
		})
	}
}

func TestPasswordFileIsRead(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pw, []byte("s3cret\n"), 0o600)
	cfg, err := Parse([]byte(`redis "a" {
  address = "h:1"
  password_file = "`+pw+`"
}`), "x.hcl")
	if err != nil || cfg.Masters[0].Password != "s3cret" {
		t.Fatalf("%+v %v", cfg.Masters, err)
	}
}

func TestSocketGroupsThatExistAreAccepted(t *testing.T) {
	for _, group := range []string{"root", "0", "54321"} {
		cfg, err := Parse([]byte("redis \"a\" { address = \"h:1\" }\nsocket { group = \""+group+"\" }"), "x.hcl")
		if err != nil || cfg.Socket.Group != group {
			t.Errorf("group %q: %v", group, err)
		}
	}
}

func TestAllowReplicasIsPerMaster(t *testing.T) {
	c, err := Parse([]byte(`
redis "a" {
  address = "127.0.0.1:1"
  allow_replicas = true
}
redis "b" { address = "127.0.0.1:2" }
`), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Masters[0].AllowReplicas || c.Masters[1].AllowReplicas {
		t.Fatalf("masters %+v", c.Masters)
	}
}

func TestConfigSystemdReadyTimeout(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want time.Duration
		err  []string // every one must appear in the error text; nil for no error
	}{
		{"no systemd block waits 30s for a quorum", ``, 30 * time.Second, nil},
		{"an empty systemd block keeps the default", "systemd {}", 30 * time.Second, nil},
		{"ready_timeout is a Go duration", "systemd {\n  ready_timeout = \"2m\"\n}", 2 * time.Minute, nil},
		{"a ready_timeout that is not a duration names its line", "systemd {\n  ready_timeout = \"soon\"\n}", 0, []string{"x.hcl:3", "systemd.ready_timeout", "soon"}},
		{"a zero ready_timeout is an error", "systemd {\n  ready_timeout = \"0s\"\n}", 0, []string{"x.hcl:3", "systemd.ready_timeout"}},
		{"a typo in the systemd block suggests the key", "systemd {\n  ready_timout = \"1s\"\n}", 0, []string{"x.hcl:3", "Did you mean \"ready_timeout\""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte("redis \"a\" { address = \"h:1\" }\n"+tt.src), "x.hcl")
			if tt.err == nil {
				if err != nil || cfg.Systemd.ReadyTimeout != tt.want {
					t.Fatalf("ready_timeout %v, %v; want %v", cfg.Systemd.ReadyTimeout, err, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.err {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestTelemetryConfig: the telemetry block is opt-in and its address is checked.
func TestTelemetryConfig(t *testing.T) {
	const masters = "redis \"a\" { address = \"h:1\" }\n"
	for _, tc := range []struct {
		name, src, want, err string
	}{
		{"no block serves no metrics", "", "", ""},
		{"a host:port is taken as it is", "telemetry { prometheus_listen = \"127.0.0.1:9464\" }\n", "127.0.0.1:9464", ""},
		{"an IPv6 address needs its brackets", "telemetry { prometheus_listen = \"[::1]:9464\" }\n", "[::1]:9464", ""},
		{"a port alone is refused", "telemetry { prometheus_listen = \"9464\" }\n", "", "telemetry.prometheus_listen"},
		{"port 0 is refused", "telemetry { prometheus_listen = \"127.0.0.1:0\" }\n", "", "telemetry.prometheus_listen"},
		{"a misspelt attribute is an error", "telemetry { prometheus_listn = \"127.0.0.1:9464\" }\n", "", "prometheus_listn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(masters+tc.src), "agent.hcl")
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "agent.hcl:2")):
				t.Fatalf("error %v, want one about %s at agent.hcl:2", err, tc.err)
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case cfg.Telemetry.PrometheusListen != tc.want:
				t.Errorf("prometheus_listen %q, want %q", cfg.Telemetry.PrometheusListen, tc.want)
			}
		})
	}
}

// TestDeprecatedSettingsAreNamed: a deprecated setting loads (an old file
// keeps working) and is named, with where the file sets it and what
// replaced it; a file without one has no warning.
func TestDeprecatedSettingsAreNamed(t *testing.T) {
	_, warnings, err := ParseWarned([]byte("redis \"a\" { address = \"h:1\" }\nlock {\n  lease = \"15s\"\n  max_ttl = \"2s\"\n}\n"), "x.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || warnings[0].Setting != "lock.max_ttl" ||
		!strings.HasPrefix(warnings[0].String(), "x.hcl:4: lock.max_ttl is deprecated, accepted and ignored: ttl= goes from 50ms to 30 days") {
		t.Fatalf("warnings %v", warnings)
	}
	if _, warnings, _ := ParseWarned([]byte("redis \"a\" { address = \"h:1\" }\nlock { lease = \"15s\" }\n"), "x.hcl"); len(warnings) != 0 {
		t.Fatalf("warnings of a file that sets nothing deprecated: %v", warnings)
	}
	// A change of it is no change: it does nothing, now or on restart.
	a, _ := Parse([]byte("redis \"a\" { address = \"h:1\" }\nlock { max_ttl = \"2s\" }\n"), "x.hcl")
	b, _ := Parse([]byte("redis \"a\" { address = \"h:1\" }\nlock { max_ttl = \"1h\" }\n"), "x.hcl")
	if c := Changes(a, b); len(c) != 0 {
		t.Fatalf("a change of lock.max_ttl is reported: %v", c)
	}
}
