package lockagent_test

import (
	"bufio"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// countingProxy sits between clients and the agent and records every line a
// client writes, so a test can prove what reached the agent and what did not.
type countingProxy struct {
	path string

	mu    sync.Mutex
	lines []string
	gate  sync.Mutex // held while the agent's replies are held back
}

// gatedWriter writes only while the proxy's gate is open.
type gatedWriter struct {
	w io.Writer
	p *countingProxy
}

func (g gatedWriter) Write(b []byte) (int, error) {
	g.p.gate.Lock()
	defer g.p.gate.Unlock()
	return g.w.Write(b)
}

// holdReplies stops forwarding the agent's lines to clients until the
// returned function is called (requests still reach the agent).
func (p *countingProxy) holdReplies() (release func()) {
	p.gate.Lock()
	var once sync.Once
	return func() { once.Do(p.gate.Unlock) }
}

// startProxy listens on a new socket and forwards each connection to target.
func startProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	dir, err := os.MkdirTemp("", "lagx") // short: a socket path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{path: filepath.Join(dir, "proxy.sock")}
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var conns []net.Conn
	var connsMu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("unix", target)
			if err != nil {
				in.Close()
				continue
			}
			connsMu.Lock()
			conns = append(conns, in, out)
			connsMu.Unlock()
			wg.Add(2)
			go func() {
				defer wg.Done()
				io.Copy(gatedWriter{in, p}, out)
				in.Close()
			}()
			go func() {
				defer wg.Done()
				defer out.Close()
				r := bufio.NewReader(in)
				for {
					line, err := r.ReadString('\n')
					if line != "" {
						p.mu.Lock()
						p.lines = append(p.lines, line)
						p.mu.Unlock()
						if _, err := io.WriteString(out, line); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
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
	return p
}

// mark returns how many lines the proxy has forwarded so far.
func (p *countingProxy) mark() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.lines)
}

// since returns the lines forwarded after mark.
func (p *countingProxy) since(mark int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines[mark:]...)
}
