//go:build linux

package socket

import (
	"net"

	"golang.org/x/sys/unix"
)

// Cred is a peer's credentials from SO_PEERCRED (-1 where unknown).
type Cred struct {
	PID, UID, GID int
}

// PeerCred reads SO_PEERCRED: the pid, uid and gid of the process that
// connected, as the kernel recorded them at connect time.
func PeerCred(c *net.UnixConn) (Cred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Cred{PID: -1, UID: -1, GID: -1}, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Cred{PID: -1, UID: -1, GID: -1}, err
	}
	if credErr != nil {
		return Cred{PID: -1, UID: -1, GID: -1}, credErr
	}
	return Cred{PID: int(cred.Pid), UID: int(cred.Uid), GID: int(cred.Gid)}, nil
}
