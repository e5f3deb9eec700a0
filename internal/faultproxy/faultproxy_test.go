package faultproxy_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/faultproxy"
	"github.com/lock-agent/lock-agent/internal/leaktest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// quiet is how long a read must stay unanswered for a test to call the
// link silent. It only bounds how long a check waits: a broken proxy that
// delivers late passes it, a working one never fails it.
const quiet = 150 * time.Millisecond

// echoServer answers every byte it reads with the same byte, and reports
// what it read on heard.
func echoServer(t *testing.T) (addr string, heard <-chan []byte) {
	addr, heard, _ = echoServerEnds(t)
	return addr, heard
}

// echoServerEnds is echoServer that also reports, on ended, each
// connection that the client ended.
func echoServerEnds(t *testing.T) (addr string, heard <-chan []byte, ended <-chan struct{}) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan []byte, 100)
	ends := make(chan struct{}, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 1024)
				for {
					n, err := c.Read(buf)
					if err != nil {
						ends <- struct{}{}
						return
					}
					ch <- append([]byte(nil), buf[:n]...)
					c.Write(buf[:n])
				}
			}()
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return l.Addr().String(), ch, ends
}

func proxy(t *testing.T, target string) *faultproxy.Proxy {
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func dial(t *testing.T, addr string) net.Conn {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes s and reads len(s) bytes back within d.
func roundTrip(c net.Conn, s string, d time.Duration) (string, error) {
	if _, err := c.Write([]byte(s)); err != nil {
		return "", err
	}
	return readN(c, len(s), d)
}

func readN(c net.Conn, n int, d time.Duration) (string, error) {
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, n)
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

func TestPassForwardsBothWays(t *testing.T) {
	addr, _ := echoServer(t)
	c := dial(t, proxy(t, addr).Addr)
	if got, err := roundTrip(c, "hello", time.Second); err != nil || got != "hello" {
		t.Fatalf("got %q, %v", got, err)
	}
}

// TestBlackHoleHangsThenDelivers: while black-holed, a request is neither
// heard by the server nor answered, and the connection stays open; once the
// link heals the held request is delivered, late, and answered.
func TestBlackHoleHangsThenDelivers(t *testing.T) {
	addr, heard := echoServer(t)
	p := proxy(t, addr)
	c := dial(t, p.Addr)
	if _, err := roundTrip(c, "a", time.Second); err != nil {
		t.Fatal(err)
	}
	<-heard
	p.SetMode(faultproxy.BlackHole)
	if got, err := roundTrip(c, "b", quiet); !isTimeout(err) {
		t.Fatalf("a black-holed read returned %q, %v", got, err)
	}
	select {
	case b := <-heard:
		t.Fatalf("the server heard %q through a black hole", b)
	default:
	}
	p.SetMode(faultproxy.Pass)
	if got, err := readN(c, 1, 5*time.Second); err != nil || got != "b" {
		t.Fatalf("after healing: %q, %v", got, err)
	}
}

// TestBlackHoleHoldsTheEnd: a client that closes its connection in a black
// hole is not seen to close it until the link heals.
func TestBlackHoleHoldsTheEnd(t *testing.T) {
	addr, heard, ended := echoServerEnds(t)
	p := proxy(t, addr)
	c := dial(t, p.Addr)
	if _, err := roundTrip(c, "a", time.Second); err != nil {
		t.Fatal(err)
	}
	<-heard
	p.SetMode(faultproxy.BlackHole)
	c.Close()
	select {
	case <-ended:
		t.Fatal("the server saw the close through a black hole")
	case <-time.After(quiet):
	}
	p.SetMode(faultproxy.Pass)
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the server never saw the close after healing")
	}
}

// TestHalfBlackHoles: holding one direction only. Toward the server: the
// request is not heard. Toward the client: the request takes effect, its
// answer is held.
func TestHalfBlackHoles(t *testing.T) {
	for _, tc := range []struct {
		name        string
		mode        faultproxy.Mode
		serverHears bool
	}{
		{"requests vanish", faultproxy.BlackHoleToServer, false},
		{"replies vanish", faultproxy.BlackHoleToClient, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, heard := echoServer(t)
			p := proxy(t, addr)
			c := dial(t, p.Addr)
			p.SetMode(tc.mode)
			if got, err := roundTrip(c, "x", quiet); !isTimeout(err) {
				t.Fatalf("read returned %q, %v", got, err)
			}
			if tc.serverHears {
				<-heard // it must come: the request went through
			} else {
				select {
				case b := <-heard:
					t.Fatalf("the server heard %q", b)
				default:
				}
			}
			p.SetMode(faultproxy.Pass)
			if got, err := readN(c, 1, 5*time.Second); err != nil || got != "x" {
				t.Fatalf("after healing: %q, %v", got, err)
			}
		})
	}
}

// TestCutResetsAndRefuses: a cut resets open connections, even one whose
// bytes a black hole holds (they are never delivered), and every new
// connection; healed, the link serves new connections.
func TestCutResetsAndRefuses(t *testing.T) {
	addr, heard := echoServer(t)
	p := proxy(t, addr)
	open := dial(t, p.Addr)
	held := dial(t, p.Addr)
	if _, err := roundTrip(open, "a", time.Second); err != nil {
		t.Fatal(err)
	}
	<-heard
	p.SetMode(faultproxy.BlackHole)
	held.Write([]byte("h"))
	p.SetMode(faultproxy.Cut)
	for name, c := range map[string]net.Conn{"open": open, "held": held} {
		if got, err := readN(c, 1, 5*time.Second); err == nil || isTimeout(err) {
			t.Fatalf("%s connection after a cut: %q, %v (want a reset)", name, got, err)
		}
	}
	// The kernel accepts a new connection and the proxy resets it, which
	// the dial itself may already see.
	if fresh, err := net.Dial("tcp", p.Addr); err == nil {
		defer fresh.Close()
		if got, err := roundTrip(fresh, "n", 5*time.Second); err == nil || isTimeout(err) {
			t.Fatalf("new connection through a cut: %q, %v (want a reset)", got, err)
		}
	} else if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("new connection through a cut: %v (want a reset)", err)
	}
	select {
	case b := <-heard:
		t.Fatalf("the server heard %q through a cut", b)
	default:
	}
	p.SetMode(faultproxy.Pass)
	if got, err := roundTrip(dial(t, p.Addr), "p", time.Second); err != nil || got != "p" {
		t.Fatalf("healed: %q, %v", got, err)
	}
}

// TestLinksAreIndependent: two proxies to one server, as two agents reach
// one master: cutting one leaves the other working (an asymmetric partition).
func TestLinksAreIndependent(t *testing.T) {
	addr, _ := echoServer(t)
	x, y := proxy(t, addr), proxy(t, addr)
	cx, cy := dial(t, x.Addr), dial(t, y.Addr)
	x.SetMode(faultproxy.Cut)
	if _, err := roundTrip(cx, "x", 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("cut link answered: %v", err)
	}
	if got, err := roundTrip(cy, "y", time.Second); err != nil || got != "y" {
		t.Fatalf("the other link: %q, %v", got, err)
	}
}

// TestFlapAlternatesAndEndsInPass watches the mode change both ways, then
// stops the flapping: the link is left passing.
func TestFlapAlternatesAndEndsInPass(t *testing.T) {
	addr, _ := echoServer(t)
	p := proxy(t, addr)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Flap(ctx, faultproxy.Cut, 5*time.Millisecond, 5*time.Millisecond) }()
	seen := map[faultproxy.Mode]int{}
	lockagenttest.Eventually(t, 5*time.Second, func() bool {
		seen[p.Mode()]++
		return seen[faultproxy.Cut] > 2 && seen[faultproxy.Pass] > 2
	}, "the link did not flap: %v", &seen)
	cancel()
	<-done
	if m := p.Mode(); m != faultproxy.Pass {
		t.Fatalf("after flapping the link is %v", m)
	}
}

// TestRedisThroughBlackHole: a real redis-server behind the proxy. A PING
// sent into a black hole hangs, and is answered once the link heals.
func TestRedisThroughBlackHole(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	p := proxy(t, s.Addr)
	c := dial(t, p.Addr)
	r := bufio.NewReader(c)
	p.SetMode(faultproxy.BlackHole)
	c.Write([]byte("PING\r\n"))
	c.SetReadDeadline(time.Now().Add(quiet))
	if line, err := r.ReadString('\n'); !isTimeout(err) {
		t.Fatalf("black-holed PING answered %q, %v", line, err)
	}
	p.SetMode(faultproxy.Pass)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := r.ReadString('\n'); err != nil || line != "+PONG\r\n" {
		t.Fatalf("after healing: %q, %v", line, err)
	}
}
