package agent

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

// listen returns the socket systemd passed for cfg.Path (socket
// activation: see systemd.Activated), and whether it did; else it opens the
// agent's Unix socket safely:
//   - an existing path is only removed if it is a socket nobody answers on;
//     a regular file, a directory or a symlink is never touched;
//   - the socket is created owner-only (umask) and only then given its group
//     and mode, so it is never wider open than configured.
func listen(cfg SocketConfig) (ln *net.UnixListener, fromSystemd bool, err error) {
	if ln, err := systemd.Activated(cfg.Path); ln != nil || err != nil {
		return ln, ln != nil, err
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o750); err != nil {
		return nil, false, fmt.Errorf("socket directory: %w", err)
	}
	if err := removeStale(cfg.Path); err != nil {
		return nil, false, err
	}
	old := syscall.Umask(0o177)
	ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: cfg.Path, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return nil, false, err
	}
	if err := setOwnership(cfg); err != nil {
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

func setOwnership(cfg SocketConfig) error {
	if cfg.Group != "" {
		gid, err := strconv.Atoi(cfg.Group)
		if err != nil {
			g, lerr := user.LookupGroup(cfg.Group)
			if lerr != nil {
				return fmt.Errorf("socket group: %w", lerr)
			}
			gid, _ = strconv.Atoi(g.Gid)
		}
		if err := os.Lchown(cfg.Path, -1, gid); err != nil {
			return fmt.Errorf("socket group: %w", err)
		}
	}
	if err := os.Chmod(cfg.Path, cfg.Mode); err != nil {
		return fmt.Errorf("socket mode: %w", err)
	}
	return nil
}
