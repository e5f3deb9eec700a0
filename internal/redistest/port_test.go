package redistest

import (
	"strings"
	"testing"
)

// TestALaunchOnATakenPortFails: a server launched on a port another one
// serves fails to bind, and the other answers its PING; the launch must
// say so (start then tries another port) rather than hand the test the
// other server.
func TestALaunchOnATakenPortFails(t *testing.T) {
	first := Start(t, 1)[0]
	second := &Server{Addr: first.Addr, port: first.port, t: t}
	err := second.launch()
	if err == nil || !strings.Contains(err.Error(), "another redis-server's") {
		t.Fatalf("a launch on %s, which another server serves: %v, want it refused", first.Addr, err)
	}
}
