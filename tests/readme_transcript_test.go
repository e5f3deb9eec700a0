package tests

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// TestReadmeTranscriptReplays replays the README's quickstart as written:
// `lock-agent run -dev` (its first line as the README shows it), then the
// requests of "Talk to it by hand", one by one, each reply checked against
// the README's: the same kind and the same keys in the same order, and the
// same values but for those a run changes (fences, pids, times). A reply
// that gains or loses a field, or a push that does not come, fails it.
func TestReadmeTranscriptReplays(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	devLine := regexp.MustCompile("(?m)^lock-agent (\\S+) \\(dev mode\\) listening on ").FindStringSubmatch(text)
	block := regexp.MustCompile("(?s)## Talk to it by hand\n.*?```\n(.*?)```").FindStringSubmatch(text)
	if devLine == nil || block == nil {
		t.Fatal("the README has no run -dev line or no transcript under \"Talk to it by hand\"")
	}

	cmd := exec.Command(binary(t), "run", "-dev")
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+shortTempDir(t), raceNoExitSleep)
	var logs syncBuffer
	cmd.Stderr = &logs
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	sc := bufio.NewScanner(stdout)
	var first, sock string
	for sc.Scan() {
		if first == "" {
			first = sc.Text()
		}
		if v, ok := strings.CutPrefix(sc.Text(), "export LOCK_AGENT_SOCKET="); ok {
			sock = v
			break
		}
	}
	if !strings.HasPrefix(first, devLine[0]) {
		t.Errorf("run -dev printed %q; the README shows %q", first, devLine[0])
	}
	if sock == "" {
		t.Fatalf("run -dev printed no socket\n%s", logs.String())
	}
	// Ready: a quorum of the dev masters answers (as TestBinaryDevMode waits).
	probe := agenttest.Dial(t, sock)
	var r agenttest.Reply
	lockagenttest.Eventually(t, 10*time.Second, func() bool { r = probe.Do("LOCK readme-probe wait=1s"); return r.Kind == "OK" }, "probe: %s", &r.Line)
	probe.Do("UNLOCK readme-probe")

	// A master that times out on a loaded host (a race build, two cores)
	// turns a reply into NO_QUORUM, a LOST into reason=quorum, a wait into
	// BUSY: that run is tried again, on a new connection (the old one's
	// holds end with it). Any other difference fails at once.
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(block[1]), "\n") {
		if !strings.HasPrefix(l, "$ ") { // the shell's prompt: socat
			lines = append(lines, l)
		}
	}
	for attempt := 1; ; attempt++ {
		diffs, transient := replayTranscript(t, sock, lines)
		if len(diffs) == 0 {
			return
		}
		if !transient || attempt == 5 {
			t.Fatalf("attempt %d:\n%s\n%s", attempt, strings.Join(diffs, "\n"), logs.String())
		}
		t.Logf("attempt %d met a slow master, again:\n%s", attempt, strings.Join(diffs, "\n"))
	}
}

// replayTranscript sends the transcript's requests on a new connection and
// compares each reply with the transcript's. transient says every
// difference was one a slow master makes.
func replayTranscript(t *testing.T, sock string, lines []string) (diffs []string, transient bool) {
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second)) // a push that never comes fails, not hangs
	replies := bufio.NewScanner(conn)
	transient = true
	for _, want := range lines {
		words := strings.Fields(want)
		isReply := words[0] == "*" || (len(words) > 1 && (words[1] == "OK" || words[1] == "BUSY" || words[1] == "ERR" || words[1] == "DATA"))
		if !isReply {
			if _, err := conn.Write([]byte(want + "\n")); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !replies.Scan() {
			return append(diffs, fmt.Sprintf("no reply where the README shows %q: %v", want, replies.Err())), false
		}
		got := replies.Text()
		if sameShape(got, want) {
			continue
		}
		diffs = append(diffs, fmt.Sprintf("the agent answered\n  %s\nwhere the README shows\n  %s", got, want))
		slow := strings.Contains(got, " ERR NO_QUORUM ") || strings.Contains(got, "reason=quorum") ||
			(strings.HasSuffix(got, " BUSY") && strings.Contains(want, " OK "))
		transient = transient && slow
		if !slow {
			return diffs, false
		}
		// Replies after a slow one follow from it (an UNLOCK of what was not
		// granted): this run is done.
		return diffs, transient
	}
	return diffs, transient
}

// sameShape: the same words but key=value ones, which must have the same
// keys in the same order and, but for the keys whose values a run changes,
// the same values.
func sameShape(got, want string) bool {
	g, w := strings.Fields(got), strings.Fields(want)
	if len(g) != len(w) {
		return false
	}
	data := len(w) > 1 && w[1] == "DATA"
	for i := range w {
		gk, gv, gok := strings.Cut(g[i], "=")
		wk, wv, wok := strings.Cut(w[i], "=")
		switch {
		case gok != wok || gk != wk:
			return false
		case !wok:
			if g[i] != w[i] {
				return false
			}
		case wk == "fence" || wk == "validity" || wk == "since" || wk == "pid" || wk == "uid" || wk == "session" || (data && wk == "agent"):
		case gv != wv:
			return false
		}
	}
	return true
}
