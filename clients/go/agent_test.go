package lockagent_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
)

// The tests run against the real agent, built from this repository and run
// in -dev mode (embedded masters, no Redis needed).
var (
	agentBin    string
	agentSocket string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lagc")
	if err != nil {
		panic(err)
	}
	agentBin = filepath.Join(dir, "lock-agent")
	build := exec.Command("go", "build", "-o", agentBin, "./cmd/lock-agent")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the agent: %v\n%s", err, out)
		os.Exit(1)
	}
	cmd, sock, err := startAgent(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	agentSocket = sock
	os.Setenv("LOCK_AGENT_SOCKET", sock)
	code := m.Run()
	cmd.Process.Kill()
	cmd.Wait()
	os.RemoveAll(dir)
	os.Exit(code)
}

// startAgent runs `lock-agent run -dev` with its socket under dir.
func startAgent(dir string) (*exec.Cmd, string, error) {
	runtime, err := os.MkdirTemp(dir, "run")
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(agentBin, "run", "-dev")
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+runtime)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if sock, ok := strings.CutPrefix(sc.Text(), "export LOCK_AGENT_SOCKET="); ok {
			go func() {
				for sc.Scan() {
				}
			}()
			if err := awaitMastersUp(sock); err != nil {
				cmd.Process.Kill()
				return nil, "", err
			}
			return cmd, sock, nil
		}
	}
	cmd.Process.Kill()
	return nil, "", fmt.Errorf("the agent printed no socket")
}

// awaitMastersUp waits until the agent on sock has found every master up
// (its first health probes). It runs before any test, so it cannot use
// lockagenttest.Eventually.
func awaitMastersUp(sock string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := lockagent.Dial(ctx, sock)
	if err != nil {
		return err
	}
	defer c.Close()
	for {
		st, err := c.Status(ctx)
		up := 0
		for _, m := range st.Masters {
			if m.State == "up" {
				up++
			}
		}
		switch {
		case err == nil && up > 0 && up == len(st.Masters):
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("the agent's masters never all came up: %+v %v", st.Masters, err)
		}
		time.Sleep(5 * time.Millisecond) // a poll: STATUS is all there is to watch
	}
}

// ownAgent starts an agent only this test uses (to kill it).
func ownAgent(t *testing.T) (*exec.Cmd, string) {
	cmd, sock, err := startAgent(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, sock
}
