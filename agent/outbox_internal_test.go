package agent

import (
	"bufio"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestReplyNeverWaitsForTheClient: reply is called by goroutines that serve
// every session (a name's contender, timers), so it must return at once even
// when the client reads nothing and its socket is full; what the socket does
// not take is written later, in order.
func TestReplyNeverWaitsForTheClient(t *testing.T) {
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(t.TempDir(), "s"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	client, err := net.Dial("unix", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	conn, err := l.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	s := &session{conn: conn, log: hclog.NewNullLogger()}
	s.out.dead = make(chan struct{})
	if s.raw, err = conn.SyscallConn(); err != nil {
		t.Fatal(err)
	}
	const lines = 2000 // 2 MB: far more than a socket buffer
	pad := strings.Repeat("x", 1000)
	done := make(chan struct{})
	go func() {
		for i := range lines {
			s.reply(fmt.Appendf(nil, "%d OK %s\n", i, pad))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("reply waited for a client that reads nothing")
	}
	r := bufio.NewReader(client)
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i := range lines {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if want := fmt.Sprintf("%d OK %s\n", i, pad); line != want {
			t.Fatalf("line %d is %.20q, want %.20q", i, line, want)
		}
	}
}
