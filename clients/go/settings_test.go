package lockagent_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
)

// TestSettingsRefusalIsErrSettings: ERR SETTINGS is ErrSettings, with the
// agent's text; STATUS's settings fields are read into Status and Master.
// A fake answers (../../tests/settings_test.go has the real agents).
func TestSettingsRefusalIsErrSettings(t *testing.T) {
	const refusal = "ERR SETTINGS lease=20s here, the masters record lease=15s (on 3 of 3)"
	fake := lockagenttest.StartFake(t, func(verb string, args []string) []string {
		if verb == "LOCK" {
			return []string{refusal}
		}
		return []string{
			"DATA master=a address=h:1 state=settings reason=records_other_settings settings=lease=15s;drift=0.01",
			"OK agent=0.1.0 sessions=1 holds=0 waiters=0 quorum=2 settings=lease=20s;drift=0.01 settings_differ=lease,quarantine",
		}
	})
	c := dial(t, fake.Path)
	ctx := context.Background()
	_, err := c.Lock(ctx, "go/s")
	if !errors.Is(err, lockagent.ErrSettings) || errors.Is(err, lockagent.ErrNoQuorum) || !strings.Contains(err.Error(), "the masters record lease=15s") {
		t.Fatalf("err = %v, want ErrSettings with the agent's text", err)
	}
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Settings != "lease=20s;drift=0.01" || !slices.Equal(st.SettingsDiffer, []string{"lease", "quarantine"}) ||
		st.Masters[0].State != "settings" || st.Masters[0].Settings != "lease=15s;drift=0.01" {
		t.Fatalf("status %+v", st)
	}
}
