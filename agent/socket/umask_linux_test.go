package socket

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestListenWhereUnshareIsRefused: a container under Docker's default
// seccomp profile refuses unshare(2) (EPERM without CAP_SYS_ADMIN); the
// agent still opens its socket, owner-only until setOwnership, rather
// than fail to start.
func TestListenWhereUnshareIsRefused(t *testing.T) {
	real := unshareFS
	unshareFS = func() error { return syscall.EPERM }
	t.Cleanup(func() { unshareFS = real })
	path := filepath.Join(t.TempDir(), "agent.sock")
	ln, _, err := Listen(path, 0o600, "")
	if err != nil {
		t.Fatalf("Listen with unshare refused: %v", err)
	}
	defer ln.Close()
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket: %v %v, want mode 0600", fi.Mode(), err)
	}
}
