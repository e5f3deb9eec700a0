package main

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeAgent answers the protocol from a script: to see the exact requests
// the command line sends, and for replies the real agent cannot be made to
// give on cue (WHO's queued=0, or no queued= from an older agent).
// Everything else is tested against the real agent in ../../tests.
type fakeAgent struct {
	path   string
	answer func(verb string, args []string) []string // lines without the tag

	mu       sync.Mutex
	requests []string // every request but HELLO, without its tag
}

func startFake(t *testing.T, answer func(verb string, args []string) []string) *fakeAgent {
	t.Helper()
	dir, err := os.MkdirTemp("", "lagf") // short: a socket path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeAgent{path: filepath.Join(dir, "fake.sock"), answer: answer}
	ln, err := net.Listen("unix", f.path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
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
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
		os.RemoveAll(dir)
	})
	return f
}

func (f *fakeAgent) serve(conn net.Conn) {
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
		replies := []string{"OK proto=1 agent=fake session=1 masters=3 quorum=2"}
		if verb != "HELLO" {
			f.mu.Lock()
			f.requests = append(f.requests, strings.Join(words[1:], " "))
			f.mu.Unlock()
			replies = f.answer(verb, words[2:])
		}
		for _, rep := range replies {
			if _, err := conn.Write([]byte(tag + " " + rep + "\n")); err != nil {
				return
			}
		}
	}
}

func (f *fakeAgent) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}
