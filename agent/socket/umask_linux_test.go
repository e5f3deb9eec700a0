package socket

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
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

// TestListenLeavesTheProcessUmaskAlone: the socket is made owner-only
// without changing the process's umask, which every thread shares: a file
// or directory that another goroutine created meanwhile (an agent in a
// test binary beside a build, a library's temp file) was made with mode
// 0600, a directory nobody may enter and a binary nobody may run ("fork/exec
// .../lock-agent: permission denied" for tests that built the agent while
// an agent in the same process opened its socket).
func TestListenLeavesTheProcessUmaskAlone(t *testing.T) {
	if !canUnshareFS() {
		t.Skip("unshare(CLONE_FS) is refused here (a seccomp filter): the socket is bound with the process's umask, as TestListenWhereUnshareIsRefused checks")
	}
	dir := t.TempDir()
	stop := make(chan struct{})
	created := make(chan []string)
	go func() {
		var narrowed []string
		for i := 0; ; i++ {
			select {
			case <-stop:
				created <- narrowed
				return
			default:
			}
			path := filepath.Join(dir, "f"+strconv.Itoa(i))
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o777)
			if err != nil {
				t.Error(err)
				continue
			}
			fi, _ := f.Stat()
			f.Close()
			os.Remove(path)
			if fi.Mode().Perm()&0o100 == 0 {
				narrowed = append(narrowed, fi.Mode().String())
			}
		}
	}()
	for i := range 300 {
		path := filepath.Join(dir, "s"+strconv.Itoa(i)+".sock")
		ln, _, err := Listen(path, 0o600, "")
		if err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Lstat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("socket %s: %v %v, want mode 0600", path, fi.Mode(), err)
		}
		ln.Close()
	}
	close(stop)
	if narrowed := <-created; len(narrowed) > 0 {
		t.Fatalf("%d files made while sockets were opened lost the owner's x bit (%v): the umask was changed for the whole process", len(narrowed), narrowed[0])
	}
}

// canUnshareFS says whether a thread may have filesystem attributes of its
// own here; the thread that tried ends with its goroutine.
func canUnshareFS() bool {
	ok := make(chan bool)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		ok <- unshareFS() == nil
	}()
	return <-ok
}
