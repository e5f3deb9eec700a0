package socket

import (
	"net"
	"syscall"
)

// listenWithProcessUmask binds with the process's umask set to 0177 around
// the bind: a file another goroutine makes meanwhile is owner-only too.
func listenWithProcessUmask(path string) (*net.UnixListener, error) {
	old := syscall.Umask(0o177)
	defer syscall.Umask(old)
	return net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
}
