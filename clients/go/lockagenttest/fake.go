// Package lockagenttest provides a scripted stand-in for lock-agent, for
// tests of code that speaks its protocol: the exact lines a client writes,
// and replies the real agent cannot be made to give on cue (a reply field
// of a newer agent, or one an older agent leaves out). Test against the
// real agent everywhere else.
package lockagenttest

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Answer returns the lines (without the tag) that answer one request,
// given its verb (upper case) and its words after the verb. A line that
// starts with "* " is a push, written as it is, in its place among them.
type Answer func(verb string, args []string) []string

// Fake is an agent that answers from a script on a Unix socket.
type Fake struct {
	// Path is the socket's path.
	Path   string
	answer Answer

	mu       sync.Mutex
	requests []string
}

// StartFake listens on a new socket until the test ends. HELLO is always
// answered OK, and QUIT with OK and the connection's end (neither is among
// Requests); every other request goes to answer.
func StartFake(t testing.TB, answer Answer) *Fake {
	t.Helper()
	dir, err := os.MkdirTemp("", "lagf") // short: a socket path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	f := &Fake{Path: filepath.Join(dir, "fake.sock"), answer: answer}
	ln, err := net.Listen("unix", f.Path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var connsMu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			connsMu.Lock()
			conns = append(conns, conn)
			connsMu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				f.serve(conn)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		connsMu.Lock()
		for _, c := range conns {
			c.Close()
		}
		connsMu.Unlock()
		wg.Wait()
		os.RemoveAll(dir)
	})
	return f
}

func (f *Fake) serve(conn net.Conn) {
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		words := strings.Fields(line)
		if len(words) < 2 {
			continue
		}
		tag, verb := words[0], strings.ToUpper(words[1])
		if verb == "QUIT" { // as the agent: OK, then the connection closes
			conn.Write([]byte(tag + " OK\n"))
			return
		}
		replies := []string{"OK proto=1 agent=fake session=1 masters=3 quorum=2"}
		if verb != "HELLO" {
			f.mu.Lock()
			f.requests = append(f.requests, strings.Join(words[1:], " "))
			f.mu.Unlock()
			replies = f.answer(verb, words[2:])
		}
		for _, rep := range replies {
			if !strings.HasPrefix(rep, "* ") { // a push goes as it is
				rep = tag + " " + rep
			}
			if _, err := conn.Write([]byte(rep + "\n")); err != nil {
				return
			}
		}
	}
}

// Requests returns every request but HELLO received so far, without tags.
func (f *Fake) Requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

// GrantAll answers LOCK with a grant of every name (fences 7, 8, ...),
// UNLOCK with count 0, and anything else with a bare OK.
func GrantAll(verb string, args []string) []string {
	switch verb {
	case "LOCK":
		var fences, counts []string
		for _, a := range args {
			if !strings.Contains(a, "=") {
				fences = append(fences, strconv.Itoa(7+len(fences)))
				counts = append(counts, "1")
			}
		}
		return []string{"OK fence=" + strings.Join(fences, ",") + " validity=1000 count=" + strings.Join(counts, ",")}
	case "UNLOCK":
		return []string{"OK count=0"}
	}
	return []string{"OK"}
}
