package tests

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/redistest"
)

// releaseBinary builds cmd/lock-agent without -race, as an operator runs it:
// its RSS and CPU are the figures an operator sees. LOCK_AGENT_BIN names
// another binary instead (to compare two builds in the same minute).
func releaseBinary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("LOCK_AGENT_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "lock-agent")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/lock-agent").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// procRSS is a process's resident set in bytes, as top shows it.
func procRSS(t testing.TB, pid int) float64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if kb, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 64)
			if err != nil {
				t.Fatal(err)
			}
			return n * 1024
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// procCPU is the CPU time a process has used, user plus system.
func procCPU(t testing.TB, pid int) time.Duration {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name (which may hold spaces) end with ')'.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

// startReleaseAgent runs the release binary over three fresh masters with
// the default lease and returns its process and socket.
func startReleaseAgent(t testing.TB) (*exec.Cmd, string) {
	bin := releaseBinary(t)
	servers := redistest.Start(t, 3)
	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "agent { id = \"rss\" }\nsocket { path = %q }\nlog { level = \"warn\" }\n", sock)
	fmt.Fprintf(&cfg, "lock { master_timeout = \"1s\" }\n") // a loaded host must not fail rounds
	for i, s := range servers {
		fmt.Fprintf(&cfg, "redis \"m%d\" { address = %q }\n", i, s.Addr)
	}
	cfgPath := filepath.Join(dir, "agent.hcl")
	os.WriteFile(cfgPath, []byte(cfg.String()), 0o600)
	bootstrap(t, bin, cfgPath)
	cmd := exec.Command(bin, "run", "-config", cfgPath)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitForListener(t, sock)
	return cmd, sock
}

// pipelineHolds opens sessions connections and pipelines holdsPer LOCKs on fresh
// names on each, all sessions at once, in batches of 100 lines; it returns
// the connections, which keep their holds until closed.
func pipelineHolds(t testing.TB, sock string, sessions, holdsPer int) []*rawConn {
	conns := make([]*rawConn, sessions)
	for i := range conns {
		nc, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = &rawConn{nc, bufio.NewReaderSize(nc, 4096)}
		conns[i].roundTrip(t, "p PING\n", 1)
	}
	const batch = 100
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			for j := 0; j < holdsPer; j += batch {
				var b strings.Builder
				n := min(batch, holdsPer-j)
				for k := range n {
					fmt.Fprintf(&b, "l%d LOCK rss/%d/%d wait=30s\n", j+k, i, j+k)
				}
				c.roundTrip(t, b.String(), n)
			}
		})
	}
	wg.Wait()
	return conns
}

// BenchmarkRSS100kHolds measures what an operator sees of 100 sessions ×
// 1,000 pipelined LOCKs, from outside the real binary: its RSS two seconds
// after the burst, above its RSS idle (target: 2 KiB per hold), and the
// CPU it then spends renewing them over 30 s at the default lease (target:
// under 5% of a core). Run it alone:
//
//	go test -run '^$' -bench RSS100k -benchtime 1x ./tests/ -timeout 600s
func BenchmarkRSS100kHolds(b *testing.B) {
	const sessions, holdsPer = 100, 1000
	for range b.N {
		cmd, sock := startReleaseAgent(b)
		pid := cmd.Process.Pid
		idle := procRSS(b, pid)
		start := time.Now()
		conns := pipelineHolds(b, sock, sessions, holdsPer)
		took := time.Since(start)
		time.Sleep(2 * time.Second) // the figure is defined two seconds after the burst
		held := procRSS(b, pid)
		cpu0, t0 := procCPU(b, pid), time.Now()
		time.Sleep(30 * time.Second) // six renewal rounds at the default 15 s lease
		cpu := float64(procCPU(b, pid)-cpu0) / float64(time.Since(t0))
		later := procRSS(b, pid)
		for _, c := range conns {
			c.Close()
		}
		b.ReportMetric((held-idle)/float64(sessions*holdsPer), "B/hold")
		b.ReportMetric(idle/(1<<20), "MiB-idle")
		b.ReportMetric(held/(1<<20), "MiB-held")
		b.ReportMetric(later/(1<<20), "MiB-held-32s")
		b.ReportMetric(100*cpu, "%core-renewing")
		b.ReportMetric(float64(sessions*holdsPer)/took.Seconds(), "locks/s")
	}
}
