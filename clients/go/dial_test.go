package lockagent_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
)

// TestDialErrorSaysWhatToDo: no agent at the socket is ErrConnect, with the
// path and how to start or find an agent.
func TestDialErrorSaysWhatToDo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.sock")
	_, err := lockagent.Dial(context.Background(), path)
	if !errors.Is(err, lockagent.ErrConnect) {
		t.Fatalf("err = %v, want ErrConnect", err)
	}
	for _, want := range []string{path, "lock-agent run -dev", "LOCK_AGENT_SOCKET"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}

// TestSocketPathSearch: $LOCK_AGENT_SOCKET, else the system socket if it
// exists, else the socket `lock-agent run -dev` prints.
func TestSocketPathSearch(t *testing.T) {
	if _, err := os.Stat(lockagent.DefaultSocket); err == nil {
		t.Skipf("%s exists on this host", lockagent.DefaultSocket)
	}
	dev := fmt.Sprintf("/somewhere/lock-agent-%d/agent.sock", os.Getuid())
	for _, tc := range []struct {
		name, env, xdg, tmp, want string
	}{
		{"LOCK_AGENT_SOCKET comes first", "/x/agent.sock", "/run/user/7", "", "/x/agent.sock"},
		{"then the dev socket under XDG_RUNTIME_DIR", "", "/run/user/7", "", "/run/user/7/lock-agent/agent.sock"},
		{"then the dev socket in TMPDIR without XDG_RUNTIME_DIR", "", "", "/somewhere", dev},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("LOCK_AGENT_SOCKET", tc.env)
			t.Setenv("XDG_RUNTIME_DIR", tc.xdg)
			t.Setenv("TMPDIR", tc.tmp)
			if got := lockagent.SocketPath(); got != tc.want {
				t.Fatalf("SocketPath() = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestDialFindsTheDevAgentByDefault: with no LOCK_AGENT_SOCKET, Dial("")
// connects to an agent started with `lock-agent run -dev`.
func TestDialFindsTheDevAgentByDefault(t *testing.T) {
	if _, err := os.Stat(lockagent.DefaultSocket); err == nil {
		t.Skipf("%s exists on this host", lockagent.DefaultSocket)
	}
	t.Setenv("LOCK_AGENT_SOCKET", "")
	// The shared agent was started with XDG_RUNTIME_DIR=D and listens on D/lock-agent/agent.sock.
	t.Setenv("XDG_RUNTIME_DIR", filepath.Dir(filepath.Dir(agentSocket)))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := lockagent.Dial(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}
