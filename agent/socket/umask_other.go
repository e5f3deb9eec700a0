//go:build !linux

package socket

import "net"

// listenOwnerOnly binds a Unix socket at path that only its owner may use
// (mode 0600) until setOwnership widens it. Off Linux a thread cannot have
// a umask of its own, so the process's is set around the bind.
func listenOwnerOnly(path string) (*net.UnixListener, error) {
	return listenWithProcessUmask(path)
}
