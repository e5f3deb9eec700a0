package systemd

import (
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/coreos/go-systemd/v22/activation"
)

// Activated returns the listening socket at path that systemd passed this
// process (LISTEN_PID, LISTEN_FDS: sd_listen_fds(3)), or nil if systemd
// passed none. systemd owns that socket: it is never chmod'ed, chown'ed or
// removed, and closing it on exit leaves systemd's copy open, so clients
// that connect while the agent restarts wait in its backlog for the next one.
//
// Passed sockets that are not a Unix stream socket at path are closed, and
// it is an error if none is: clients would connect to a socket nobody serves.
func Activated(path string) (*net.UnixListener, error) {
	files := activation.Files(true) // unsets LISTEN_*: they were for this process only
	if len(files) == 0 {
		return nil, nil
	}
	var found *net.UnixListener
	var others []string
	for _, f := range files {
		ln, err := net.FileListener(f)
		f.Close() // ln has its own descriptor
		if err != nil {
			others = append(others, fmt.Sprintf("%s (not a listening socket)", f.Name()))
			continue
		}
		ul, ok := ln.(*net.UnixListener)
		if !ok || found != nil || ul.Addr().Network() != "unix" || !samePath(ul.Addr().String(), path) {
			others = append(others, ln.Addr().Network()+":"+ln.Addr().String())
			ln.Close()
			continue
		}
		ul.SetUnlinkOnClose(false)
		found = ul
	}
	if found == nil {
		return nil, fmt.Errorf("socket activation: systemd passed %s but no Unix stream socket at %s (socket.path): "+
			"make the socket unit's ListenStream= and socket.path the same", strings.Join(others, ", "), path)
	}
	return found, nil
}

// samePath reports whether two socket paths name the same file.
func samePath(a, b string) bool {
	if a == b {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}
