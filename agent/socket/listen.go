// Package socket opens the agent's Unix socket safely (or takes the one
// systemd passed) and reads who connected to it (SO_PEERCRED).
package socket

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/lock-agent/lock-agent/agent/systemd"
)

// Listen returns the socket systemd passed for path (socket activation:
// see systemd.Activated), and whether it did; else it opens the agent's
// Unix socket at path safely:
//   - an existing path is only removed if it is a socket nobody answers on;
//     a regular file, a directory or a symlink is never touched;
//   - the socket is created owner-only (a umask of 0177 on the one thread
//     that binds it: see listenOwnerOnly) and only then given its group (a
//     name or numeric id; "" keeps the agent's) and mode, so it is never
//     wider open than configured.
func Listen(path string, mode os.FileMode, group string) (ln *net.UnixListener, fromSystemd bool, err error) {
	if ln, err := systemd.Activated(path); ln != nil || err != nil {
		return ln, ln != nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, false, fmt.Errorf("socket directory: %w", err)
	}
	if err := removeStale(path); err != nil {
		return nil, false, err
	}
	ln, err = listenOwnerOnly(path)
	if err != nil {
		return nil, false, err
	}
	if err := setOwnership(path, mode, group); err != nil {
		ln.Close()
		return nil, false, err
	}
	return ln, false, nil
}

func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket (%v); refusing to replace it", path, fi.Mode().Type())
	}
	conn, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		conn.Close()
		return fmt.Errorf("%s is in use: another agent is listening on it", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%s: cannot tell whether it is stale: %w", path, err)
	}
	return os.Remove(path)
}

func setOwnership(path string, mode os.FileMode, group string) error {
	if group != "" {
		gid, err := strconv.Atoi(group)
		if err != nil {
			g, lerr := user.LookupGroup(group)
			if lerr != nil {
				return fmt.Errorf("socket group: %w", lerr)
			}
			gid, _ = strconv.Atoi(g.Gid)
		}
		if err := os.Lchown(path, -1, gid); err != nil {
			return fmt.Errorf("socket group: %w", err)
		}
	}
	if err := os.Chmod(path, mode); err != nil {
		return fmt.Errorf("socket mode: %w", err)
	}
	return nil
}
