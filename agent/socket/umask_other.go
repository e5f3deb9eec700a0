//go:build !linux

package socket

import (
	"net"
	"syscall"
)

// listenOwnerOnly binds a Unix socket at path that only its owner may use
// (mode 0600) until setOwnership widens it. Off Linux a thread cannot have
// a umask of its own, so the process's is set around the bind: a file
// another goroutine makes meanwhile is owner-only too.
func listenOwnerOnly(path string) (*net.UnixListener, error) {
	old := syscall.Umask(0o177)
	defer syscall.Umask(old)
	return net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
}
