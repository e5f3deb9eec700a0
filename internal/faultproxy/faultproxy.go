// Package faultproxy puts a TCP proxy on one network link (one agent to one
// master, in tests) so that a test can break that link alone: cut it
// (every connection reset, new ones refused), black-hole it (bytes vanish,
// the peer hangs), or either half of it, and then heal it.
//
// A black hole behaves as a network that drops packets while TCP keeps
// retransmitting: nothing is lost, only held. Each direction's pump stops
// forwarding; the bytes it already read wait, and the rest waits in the
// kernels' socket buffers, so a writer eventually blocks and a reader
// hangs. When the link heals (Pass) the held bytes are delivered, late and
// in order, on the same connections, as a healed network delivers its
// retransmissions. The end of a connection (a close, a reset, a server
// that died) is held the same way: the other side learns of it only when
// the link heals. A new connection is accepted (the proxy's kernel
// completes the handshake a real black hole would swallow), and nothing
// crosses it. A Cut, from any mode, resets every connection.
package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Mode is what the link does to the bytes that cross it.
type Mode int

const (
	// Pass forwards everything both ways.
	Pass Mode = iota
	// Cut resets every open connection and every new one at once.
	Cut
	// BlackHole forwards nothing either way; connections stay open.
	BlackHole
	// BlackHoleToServer drops (holds) what the client sends: the server
	// never hears the requests, the client waits for the replies.
	BlackHoleToServer
	// BlackHoleToClient holds what the server sends: the requests take
	// effect, the client never hears that they did.
	BlackHoleToClient
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Cut:
		return "cut"
	case BlackHole:
		return "black-hole"
	case BlackHoleToServer:
		return "black-hole-to-server"
	case BlackHoleToClient:
		return "black-hole-to-client"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// forwards says whether mode lets bytes through toward the server (up) or
// toward the client (!up).
func (m Mode) forwards(up bool) bool {
	switch m {
	case Pass:
		return true
	case BlackHoleToServer:
		return !up
	case BlackHoleToClient:
		return up
	}
	return false
}

// Proxy is one link: it listens on a random loopback port and forwards
// each connection to Target.
type Proxy struct {
	Addr   string // where clients connect
	Target string // the server behind it

	listener net.Listener
	mu       sync.Mutex
	mode     Mode
	delay    time.Duration // each chunk read waits this long before it is forwarded
	changed  chan struct{} // closed and replaced at every mode change
	conns    map[*link]struct{}
	closed   bool
	wg       sync.WaitGroup
}

// link is one proxied connection: the client's side and the server's.
type link struct{ client, server net.Conn }

// New listens on 127.0.0.1 at a random port and forwards to target. Close
// stops it.
func New(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	p := &Proxy{Addr: l.Addr().String(), Target: target, listener: l,
		changed: make(chan struct{}), conns: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Mode returns the link's mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// SetMode changes what the link does from now on. Cut resets every open
// connection; leaving a black hole delivers what it held.
func (p *Proxy) SetMode(m Mode) {
	p.mu.Lock()
	p.mode = m
	close(p.changed)
	p.changed = make(chan struct{})
	var reset []*link
	if m == Cut {
		for l := range p.conns {
			reset = append(reset, l)
		}
	}
	p.mu.Unlock()
	for _, l := range reset {
		l.reset()
	}
}

// SetDelay makes the link slow from now on: each chunk read (a request, a
// reply) is forwarded d after it was read, in each direction, so a round
// trip through it takes 2d more: a master that answers, late. 0 ends it.
// The next chunk is read only once the last was forwarded: what arrives
// while one waits is read after it, and waits d of its own: up to d more,
// in each direction, than on a link that only delays (for a request sent
// just after another, before its reply).
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Close stops listening and closes every connection. Calling it twice is safe.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	open := make([]*link, 0, len(p.conns))
	for l := range p.conns {
		open = append(open, l)
	}
	close(p.changed) // wakes held pumps, which find the link closed
	p.changed = make(chan struct{})
	p.mu.Unlock()
	p.listener.Close()
	for _, l := range open {
		l.reset()
	}
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.listener.Accept()
		if err != nil {
			return
		}
		if p.Mode() == Cut {
			resetConn(c)
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve dials the server for one client and pumps both ways until either
// side ends or the link is cut.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := net.Dial("tcp", p.Target)
	if err != nil {
		resetConn(client) // the server is down: the client sees a reset, as with no proxy
		return
	}
	l := &link{client: client, server: server}
	if !p.track(l) {
		l.reset()
		return
	}
	defer p.untrack(l)
	var pumps sync.WaitGroup
	pumps.Add(2)
	go func() { defer pumps.Done(); p.pump(l, client, server, true) }()
	go func() { defer pumps.Done(); p.pump(l, server, client, false) }()
	pumps.Wait()
}

// track registers l, unless the proxy is closed or the link was cut since
// the client connected.
func (p *Proxy) track(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.mode == Cut {
		return false
	}
	p.conns[l] = struct{}{}
	return true
}

func (p *Proxy) untrack(l *link) {
	p.mu.Lock()
	delete(p.conns, l)
	p.mu.Unlock()
}

// pump copies from src to dst. What src sends, its bytes and then its
// end, crosses only while the mode forwards in pump's direction: a chunk
// already read, or an end, waits meanwhile. An orderly end (EOF) closes
// dst's write half; an error, or a cut, resets both sides.
func (p *Proxy) pump(l *link, src, dst net.Conn, up bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		delay := p.delay
		p.mu.Unlock()
		if n > 0 && delay > 0 {
			time.Sleep(delay) // the link's own latency: what it simulates
		}
		forward := p.awaitForward(up)
		if n > 0 && forward {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				l.reset()
				return
			}
		}
		switch {
		case forward && err == nil:
			continue
		case forward && errors.Is(err, io.EOF):
			if tc, ok := dst.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
			return
		}
		l.reset()
		return
	}
}

// awaitForward waits until the link forwards in direction up, and says
// false if it was cut or closed meanwhile.
func (p *Proxy) awaitForward(up bool) bool {
	for {
		p.mu.Lock()
		mode, changed, closed := p.mode, p.changed, p.closed
		p.mu.Unlock()
		switch {
		case closed || mode == Cut:
			return false
		case mode.forwards(up):
			return true
		}
		<-changed
	}
}

func (l *link) reset() {
	resetConn(l.client)
	resetConn(l.server)
}

// resetConn closes c with an RST rather than a FIN, as a cut network's
// middlebox would: the peer's next read or write fails at once.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}
