package outbox

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// outboxPair is an outbox writing to one end of a Unix socket, and the
// client's end, which reads only when the test says so.
func outboxPair(t *testing.T) (*Outbox, net.Conn) {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(t.TempDir(), "s"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	client, err := net.Dial("unix", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	conn, err := l.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	o, err := New(conn, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		o.FlushAndClose()
		conn.Close()
		<-o.Closed() // its writer has returned
	})
	return o, client
}

// fill has o queue Queue lines or more while the client reads nothing,
// and returns the lines it queued.
func fill(o *Outbox) [][]byte {
	pad := strings.Repeat("x", 1000)
	var lines [][]byte
	for i := 0; o.Queued() < Queue; i++ {
		line := fmt.Appendf(nil, "%d OK %s\n", i, pad)
		o.Reply(line)
		lines = append(lines, line)
	}
	return lines
}

// expectLines reads want from the client, in order.
func expectLines(t *testing.T, client net.Conn, want [][]byte) {
	t.Helper()
	r := bufio.NewReader(client)
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i, w := range want {
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if !bytes.Equal(line, w) {
			t.Fatalf("line %d is %.20q, want %.20q", i, line, w)
		}
	}
}

// TestReplyNeverWaitsForTheClient: reply is called by goroutines that serve
// every session (a name's contender, timers), so it must return at once even
// when the client reads nothing and its socket is full; what the socket does
// not take is written later, in order.
func TestReplyNeverWaitsForTheClient(t *testing.T) {
	o, client := outboxPair(t)
	const n = 2000 // 2 MB: far more than a socket buffer
	pad := strings.Repeat("x", 1000)
	var lines [][]byte
	for i := range n {
		lines = append(lines, fmt.Appendf(nil, "%d OK %s\n", i, pad))
	}
	done := make(chan struct{})
	go func() {
		for _, l := range lines {
			o.Reply(l)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("reply waited for a client that reads nothing")
	}
	expectLines(t, client, lines)
}

// TestAFirstLineIsWrittenByItsSender: a line that finds nothing queued is
// written in the sender's goroutine, and no writer is left running.
func TestAFirstLineIsWrittenByItsSender(t *testing.T) {
	o, client := outboxPair(t)
	line := []byte("1 OK\n")
	o.Send(line)
	o.mu.Lock()
	writing, queued := o.writing, len(o.lines)
	o.mu.Unlock()
	if writing || queued != 0 {
		t.Fatalf("after a first line: writing=%v queued=%d, want it written and no writer", writing, queued)
	}
	expectLines(t, client, [][]byte{line})
}

// TestSendWaitsWhileTheQueueIsFull: a reply on the request path waits for
// room (backpressure on a client that does not read), and goes out in order
// once the client reads.
func TestSendWaitsWhileTheQueueIsFull(t *testing.T) {
	o, client := outboxPair(t)
	lines := fill(o)
	last := []byte("last OK\n")
	sent := make(chan struct{})
	go func() {
		o.Send(last)
		close(sent)
	}()
	for waiting := false; !waiting; { // until send waits for room (see awaitRoomLocked)
		select {
		case <-sent:
			t.Fatal("send did not wait with a full queue")
		case <-time.After(time.Millisecond):
		}
		o.mu.Lock()
		waiting = o.room != nil
		o.mu.Unlock()
	}
	expectLines(t, client, append(lines, last))
	<-sent
}

// TestPushClosesASessionThatDoesNotRead: an unsolicited line that finds the
// queue full closes the connection rather than wait, or drop the line and
// leave the client holding what it cannot be told it lost.
func TestPushClosesASessionThatDoesNotRead(t *testing.T) {
	o, client := outboxPair(t)
	fill(o)
	pushed := make(chan struct{})
	go func() {
		o.Push([]byte("* LOST x reason=quorum\n"))
		close(pushed)
	}()
	select {
	case <-pushed:
	case <-time.After(5 * time.Second):
		t.Fatal("push waited for a client that reads nothing")
	}
	select {
	case <-o.Closed():
	case <-time.After(5 * time.Second):
		t.Fatal("the connection is still open for writing")
	}
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	data, err := io.ReadAll(client)
	if bytes.Contains(data, []byte("LOST")) {
		t.Fatalf("the LOST line was written after all (read %d bytes, %v)", len(data), err)
	}
}

// TestAwaitWrittenIsTheSocketTakingTheLine: a pushed line that the socket
// took at once is written; one queued behind a client that reads nothing
// is not, until the client reads; awaitWritten gives up at until, and once
// the connection is closed for writing.
func TestAwaitWrittenIsTheSocketTakingTheLine(t *testing.T) {
	o, client := outboxPair(t)
	never := make(chan time.Time)
	if seq := o.Push([]byte("* LOST a\n")); !o.AwaitWritten(seq, never) {
		t.Fatal("a line the socket took at once is not written")
	}
	expectLines(t, client, [][]byte{[]byte("* LOST a\n")})

	lines := clog(o)
	lost := []byte("* LOST b\n")
	seq := o.Push(lost)
	gaveUp := make(chan time.Time, 1)
	gaveUp <- time.Time{}
	if o.AwaitWritten(seq, gaveUp) {
		t.Fatal("a line queued behind a client that reads nothing is written")
	}
	written := make(chan bool, 1)
	go func() { written <- o.AwaitWritten(seq, never) }()
	expectLines(t, client, append(lines, lost))
	if !<-written {
		t.Fatal("a line the client read is not written")
	}

	clog(o)
	seq = o.Push(lost)
	go func() { written <- o.AwaitWritten(seq, never) }()
	o.conn.Close()
	o.Reply([]byte("1 OK\n")) // the writer meets the closed connection
	if <-written {
		t.Fatal("a line of a closed connection is written")
	}
}

// clog has o queue lines while the client reads nothing until some wait
// for the writer (the socket's buffer is full), and returns them.
func clog(o *Outbox) [][]byte {
	pad := strings.Repeat("x", 1000)
	var lines [][]byte
	for i := 0; o.Queued() < 10; i++ {
		line := fmt.Appendf(nil, "%d OK %s\n", i, pad)
		o.Reply(line)
		lines = append(lines, line)
	}
	return lines
}
