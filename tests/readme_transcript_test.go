package tests

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadmeTranscriptReplays replays the README's quickstart as written:
// `lock-agent run -dev` (its first line as the README shows it), then the
// requests of "Talk to it by hand", one by one, each reply checked against
// the README's: the same kind and the same keys in the same order, and the
// same values but for those a run changes (fences, pids, times). A reply
// that gains or loses a field, or a push that does not come, fails it.
func TestReadmeTranscriptReplays(t *testing.T) {
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
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second)) // a push that never comes fails, not hangs
	replies := bufio.NewScanner(conn)

	for _, want := range strings.Split(strings.TrimSpace(block[1]), "\n") {
		if strings.HasPrefix(want, "$ ") {
			continue // the shell's prompt: socat
		}
		words := strings.Fields(want)
		isReply := words[0] == "*" || (len(words) > 1 && (words[1] == "OK" || words[1] == "BUSY" || words[1] == "ERR" || words[1] == "DATA"))
		if !isReply {
			if _, err := conn.Write([]byte(want + "\n")); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !replies.Scan() {
			t.Fatalf("no reply where the README shows %q: %v\n%s", want, replies.Err(), logs.String())
		}
		if got := replies.Text(); !sameShape(got, want) {
			t.Errorf("the agent answered\n  %s\nwhere the README shows\n  %s", got, want)
		}
	}
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
