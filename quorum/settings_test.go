package quorum

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/redistest"
	"github.com/lock-agent/lock-agent/quorum/rules"
	"github.com/lock-agent/lock-agent/quorum/scripts"
)

var (
	ourSettings   = Settings{{"lease", "3s"}, {"drift", "0.01"}, {"quarantine", "3.1s"}}
	otherSettings = Settings{{"lease", "300ms"}, {"drift", "0.01"}, {"quarantine", "410ms"}}
)

// gateMaster is master 0 of a three-master cluster with ourSettings, of
// which only master 0 is a real server: the others exist only in what this
// agent believes the markers record (views), which decides whether it may
// plant (see mayPlant) and re-plant (see replant).
func gateMaster(t *testing.T, server *redistest.Server, views ...rules.MarkerView) (*Cluster, *master) {
	t.Helper()
	cfg := Config{KeyPrefix: "g:", DriftFactor: 0.01, MasterTimeout: 200 * time.Millisecond, Quarantine: 3100 * time.Millisecond,
		Settings: ourSettings, Masters: []MasterConfig{{Name: "m0", Address: server.Addr}, {Name: "m1", Address: "127.0.0.1:1"}, {Name: "m2", Address: "127.0.0.1:1"}}}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range views {
		c.masters[i].view.Store(int32(v))
	}
	m := c.masters[0]
	m.connect(context.Background())
	t.Cleanup(m.close)
	return c, m
}

// marker reads the marker's fields on server.
func marker(t *testing.T, s *redistest.Server) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range []string{"epoch", "until", "settings", "how"} {
		v, err := s.Do("HGET", "g:epoch", f)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = v
	}
	return out
}

// gateAcquire runs the acquire script (a vote) on m and returns the gate's
// refusal as the rounds read it, nil if the master voted.
func gateAcquire(c *Cluster, m *master, holder string) error {
	keys, args := c.acquireArgs(req("k", holder))
	_, err := m.eval(context.Background(), scripts.Acquire, keys, args).AsIntSlice()
	return gateRefusal(err, c.cfg.Settings)
}

func TestGateSettings(t *testing.T) {
	server := redistest.Start(t, 1)[0]
	plantMarker := func(settings, how string) func() {
		return func() {
			args := []string{"HSET", "g:epoch", "epoch", "old:1", "until", "0", "floor", "0", "run", ""}
			if settings != "" {
				args = append(args, "settings", settings)
			}
			if how != "" {
				args = append(args, "how", how)
			}
			if _, err := server.Do(args...); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name  string
		setup func()
		views []rules.MarkerView // of masters 0..2, as this agent's probes saw them
		probe bool               // run the probe (which may re-plant), not a vote
		// want: the refusal (nil: a vote), and what the marker then records.
		want         error
		wantSettings string
		wantHow      string
		quarantined  bool // the marker's quarantine runs (until > 0)
	}{
		{name: "a master with no marker gets one recording our settings when a majority records them",
			setup: func() {}, views: []rules.MarkerView{rules.ViewNone, rules.ViewOurs, rules.ViewOurs}, probe: true,
			wantSettings: ourSettings.String(), wantHow: "plant", quarantined: true},
		{name: "a master with no marker gets one when a majority was probed and none records other settings (a new cluster)",
			setup: func() {}, views: []rules.MarkerView{rules.ViewNone, rules.ViewNone, rules.ViewUnknown}, probe: true,
			wantSettings: ourSettings.String(), wantHow: "plant", quarantined: true},
		{name: "a master with no marker refuses a vote, and is not planted, while the agent does not know a majority",
			setup: func() {}, views: []rules.MarkerView{rules.ViewNone, rules.ViewUnknown, rules.ViewUnknown},
			want: ErrUnplanted},
		{name: "a master with no marker is not planted by an agent whom a master with other settings outvotes",
			setup: func() {}, views: []rules.MarkerView{rules.ViewNone, rules.ViewOther, rules.ViewNone},
			want: ErrUnplanted},
		{name: "a marker that records no settings adopts ours, and votes",
			setup: plantMarker("", ""), views: []rules.MarkerView{rules.ViewNone, rules.ViewOurs, rules.ViewOurs},
			wantSettings: ourSettings.String()},
		{name: "a marker that records no settings votes for an agent that may not plant, and records none",
			setup: plantMarker("", ""), views: []rules.MarkerView{rules.ViewNone, rules.ViewOther, rules.ViewOther}},
		{name: "a marker that records our settings votes",
			setup: plantMarker(ourSettings.String(), "plant"), views: []rules.MarkerView{rules.ViewOurs, rules.ViewUnknown, rules.ViewUnknown},
			wantSettings: ourSettings.String(), wantHow: "plant"},
		{name: "a marker that records other settings refuses the vote and is left as it is",
			setup: plantMarker(otherSettings.String(), "plant"), views: []rules.MarkerView{rules.ViewOther, rules.ViewOurs, rules.ViewOurs},
			want: ErrSettings, wantSettings: otherSettings.String(), wantHow: "plant"},
		{name: "the probe of an agent a majority agrees with plants anew a marker that records other settings",
			setup: plantMarker(otherSettings.String(), "plant"), views: []rules.MarkerView{rules.ViewOther, rules.ViewOurs, rules.ViewOurs}, probe: true,
			wantSettings: ourSettings.String(), wantHow: "plant", quarantined: true},
		{name: "the probe of an agent in a minority leaves another's marker as it is",
			setup: plantMarker(otherSettings.String(), "plant"), views: []rules.MarkerView{rules.ViewOther, rules.ViewOther, rules.ViewOurs}, probe: true,
			want: ErrSettings, wantSettings: otherSettings.String(), wantHow: "plant"},
		{name: "a marker the settings command wrote is not planted anew, whatever the agent believes",
			setup: plantMarker(otherSettings.String(), "change"), views: []rules.MarkerView{rules.ViewOther, rules.ViewOurs, rules.ViewOurs}, probe: true,
			want: ErrSettings, wantSettings: otherSettings.String(), wantHow: "change"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := server.Do("FLUSHALL"); err != nil {
				t.Fatal(err)
			}
			tc.setup()
			c, m := gateMaster(t, server, tc.views...)
			var err error
			if tc.probe {
				var mk markerReply
				mk, err = m.gate(context.Background())
				if err == nil {
					err = mk.refusal
				}
			} else {
				err = gateAcquire(c, m, "h-"+strconv.Itoa(len(tc.name)))
			}
			if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("refusal %v, want %v", err, tc.want)
			}
			got := marker(t, server)
			if got["settings"] != tc.wantSettings || got["how"] != tc.wantHow {
				t.Fatalf("marker %v, want settings %q how %q", got, tc.wantSettings, tc.wantHow)
			}
			if quarantined := got["until"] != "" && got["until"] != "0"; quarantined != tc.quarantined {
				t.Fatalf("marker %v: quarantined %v, want %v", got, quarantined, tc.quarantined)
			}
			if tc.want != nil && !tc.probe && server.Keys("g:{k}*") != 0 {
				t.Fatal("a refused vote wrote the name's keys")
			}
		})
	}
}

// TestSettingsRefusalNamesTheSettings: an agent whose settings differ from
// those two masters of three record is refused with ErrSettings, whose text
// names the setting, ours and the cluster's, and on how many masters.
func TestSettingsRefusalNamesTheSettings(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfg := testConfig(t, servers, time.Second, false)
	if _, err := BootstrapSettings(context.Background(), cfg.KeyPrefix, otherSettings, cfg.Masters[:2]); err != nil {
		t.Fatal(err)
	}
	if _, err := BootstrapSettings(context.Background(), cfg.KeyPrefix, ourSettings, cfg.Masters[2:]); err != nil {
		t.Fatal(err)
	}
	cfg.Settings = ourSettings
	c := runCluster(t, cfg)
	waitStates(t, c, func(st []MasterStatus) bool {
		return st[0].State == StateSettings && st[1].State == StateSettings && st[2].State == StateUp
	})
	_, err := acquire(context.Background(), c, req("k", "h1"))
	want := "lease=3s, quarantine=3.1s here, the masters record lease=300ms, quarantine=410ms (on 2 of 3)"
	if !errors.Is(err, ErrSettings) || err.Error() != want {
		t.Fatalf("acquire: %v, want ErrSettings %q", err, want)
	}
	if p := c.SettingsProblem(); p == nil || p.Error() != want {
		t.Fatalf("SettingsProblem: %v, want %q", p, want)
	}
	if st := c.Status(); st[0].Settings != otherSettings.String() || !strings.Contains(st[0].Err, "records other settings") {
		t.Fatalf("status %+v", st[0])
	}
}

// TestChangeSettings: the settings command's change records the new
// settings on every master with a quarantine of at least the one given,
// and a master with no marker gets one.
func TestChangeSettings(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfg := testConfig(t, servers, time.Second, false)
	ctx := context.Background()
	if _, err := BootstrapSettings(ctx, cfg.KeyPrefix, otherSettings, cfg.Masters[:2]); err != nil {
		t.Fatal(err)
	}
	changed, err := ChangeSettings(ctx, cfg.KeyPrefix, ourSettings, 2*time.Second, cfg.Masters)
	if err != nil || len(changed) != 3 {
		t.Fatalf("changed %v, %v", changed, err)
	}
	read, err := ReadSettings(ctx, cfg.KeyPrefix, cfg.Masters)
	if err != nil || len(read) != 3 {
		t.Fatal(read, err)
	}
	for i, r := range read {
		if !r.Marked || r.Settings.String() != ourSettings.String() {
			t.Fatalf("master %d: %+v", i, r)
		}
		left, err := servers[i].Do("EVAL", "local t = redis.call('TIME') return tonumber(redis.call('HGET', KEYS[1], 'until')) - (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))", "1", "t:epoch")
		if n, _ := strconv.Atoi(left); err != nil || n < 1500 || n > 2000 {
			t.Fatalf("master %d: quarantine left %s ms (%v), want about 2s", i, left, err)
		}
	}
}

func TestProbedState(t *testing.T) {
	unsafe := &UnsafeError{Reason: "role:slave"}
	other := &SettingsError{Ours: ourSettings, Recorded: otherSettings}
	for _, tc := range []struct {
		name   string
		unsafe error
		mk     markerReply
		want   State
		err    error
	}{
		{"an unsafe master is unsafe whatever its marker says", unsafe, markerReply{refusal: other}, StateUnsafe, ErrUnsafe},
		{"a master that records other settings is in state settings", nil, markerReply{refusal: other, left: 500}, StateSettings, ErrSettings},
		{"a master with no marker this agent may plant is quarantined, no marker yet", nil, markerReply{refusal: ErrUnplanted}, StateQuarantined, ErrUnplanted},
		{"a master with quarantine left is quarantined", nil, markerReply{left: 500}, StateQuarantined, ErrQuarantined},
		{"a master with none left is up", nil, markerReply{}, StateUp, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, err := probedState(tc.unsafe, tc.mk)
			if state != tc.want || (tc.err == nil) != (err == nil) || (tc.err != nil && !errors.Is(err, tc.err)) {
				t.Fatalf("got %s, %v; want %s, %v", state, err, tc.want, tc.err)
			}
		})
	}
}
