package tests

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// getMetrics returns the body of GET url, or an error.
func getMetrics(url string) (string, error) {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %d %s", url, resp.StatusCode, body)
	}
	return string(body), err
}

// awaitMetrics polls url until its body has every line of want (up to 5s).
func awaitMetrics(t *testing.T, url string, want ...string) string {
	t.Helper()
	var body string
	var err error
	lockagenttest.Eventually(t, 5*time.Second, func() bool {
		body, err = getMetrics(url)
		return err == nil && hasLines(body, want)
	}, "GET %s never had %q: %v\n%s", url, want, &err, &body)
	return body
}

func hasLines(body string, want []string) bool {
	lines := map[string]bool{}
	for _, l := range strings.Split(body, "\n") {
		lines[l] = true
	}
	for _, w := range want {
		if !lines[w] {
			return false
		}
	}
	return true
}

// TestBinaryServesMetrics: with a telemetry block the real binary serves
// GET /metrics on the configured address, with the masters' states and the
// grants its clients got, and stops serving when it stops.
func TestBinaryServesMetrics(t *testing.T) {
	t.Parallel() // its own masters and agents; judges no latency
	addr := freeAddr(t)
	cmd, logs, _, sock, servers := binaryAgent(t, fmt.Sprintf("telemetry { prometheus_listen = %q }\n", addr))
	url := "http://" + addr + "/metrics"
	c := agenttest.Dial(t, sock)
	c.AwaitMasters("up", 3)
	if r := c.Do("LOCK metrics/held"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	awaitMetrics(t, url,
		`lock_agent_master_state{master="m0",state="up"} 1`,
		`lock_agent_master_state{master="m2",state="up"} 1`,
		`lock_agent_grants_total{mode="exclusive"} 1`,
		`lock_agent_holds{mode="exclusive"} 1`,
		`lock_agent_sessions 1`)
	waitForLog(t, logs, "serving metrics")

	stopAndCheckReleased(t, cmd, syscall.SIGTERM, c, servers, logs)
	if _, err := getMetrics(url); err == nil {
		t.Error("metrics still served after the agent stopped")
	}
}

// TestBinaryRefusesATakenMetricsPort: a metrics address it cannot bind
// stops the start (exit 1) with a log line that says why.
func TestBinaryRefusesATakenMetricsPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	servers := redistest.Start(t, 3)
	dir := shortTempDir(t)
	cfgPath := filepath.Join(dir, "agent.hcl")
	writeAgentConfig(t, cfgPath, filepath.Join(dir, "agent.sock"), servers,
		fmt.Sprintf("telemetry { prometheus_listen = %q }\n", taken.Addr()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // an agent that starts anyway is killed
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), "run", "-config", cfgPath)
	cmd.Env = append(cmd.Environ(), raceNoExitSleep)
	out, err := cmd.CombinedOutput()
	if exitCode(err) != 1 || !strings.Contains(string(out), "cannot serve metrics") {
		t.Fatalf("exit %d, want 1 and a reason:\n%s", exitCode(err), out)
	}
}
