package lockagent_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
			time.Sleep(300 * time.Millisecond) // the embedded masters' first health probe
			return cmd, sock, nil
		}
	}
	cmd.Process.Kill()
	return nil, "", fmt.Errorf("the agent printed no socket")
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
