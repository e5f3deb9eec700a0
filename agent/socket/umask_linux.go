package socket

import (
	"net"
	"runtime"

	"golang.org/x/sys/unix"
)

// listenOwnerOnly binds a Unix socket at path that only its owner may use
// (mode 0600) until setOwnership widens it as configured. The mode comes
// from the umask at bind(2), and a process's umask is shared by all its
// threads: set for the whole process, every file and directory another
// goroutine made meanwhile came out 0600 too (a directory nobody may
// enter, a binary nobody may run). So the bind runs on a thread of its own
// that first unshares its filesystem attributes (CLONE_FS: umask, cwd,
// root) and sets the umask there; the goroutine ends locked to that
// thread, so the runtime ends the thread rather than reuse it.
//
// Where unshare(2) is refused (a container under Docker's or containerd's
// default seccomp profile allows it only with CAP_SYS_ADMIN), the umask is
// set for the whole process around the bind, as off Linux: the socket is
// still owner-only, and the agent still starts.
func listenOwnerOnly(path string) (*net.UnixListener, error) {
	type result struct {
		ln  *net.UnixListener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if unshareFS() != nil {
			ln, err := listenWithProcessUmask(path)
			done <- result{ln, err}
			return
		}
		unix.Umask(0o177)
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		done <- result{ln, err}
	}()
	r := <-done
	return r.ln, r.err
}

// unshareFS gives the calling thread filesystem attributes of its own; a
// variable so that a test can refuse it, as a seccomp filter does.
var unshareFS = func() error { return unix.Unshare(unix.CLONE_FS) }
