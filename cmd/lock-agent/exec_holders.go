package main

import (
	"errors"
	"os"
	"strconv"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
	"golang.org/x/sys/unix"
)

// othersHold says whether a process other than exec has a descriptor of
// c's connection open: something the command started that left its group
// and kept LOCK_AGENT_FD. It reads every process's descriptors in /proc.
// A process whose descriptors exec may not read (another user's) is not
// counted: one could hold the connection only if a descendant of the
// command changed its user and kept the descriptor.
func othersHold(c *lockagent.Client) (bool, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return false, err
	}
	var st unix.Stat_t
	if cerr := rc.Control(func(fd uintptr) { err = unix.Fstat(int(fd), &st) }); cerr != nil {
		err = cerr
	}
	if err != nil {
		return false, err
	}
	want := "socket:[" + strconv.FormatUint(st.Ino, 10) + "]"
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return false, err
	}
	self := strconv.Itoa(os.Getpid())
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil || p.Name() == self {
			continue
		}
		fds, err := os.ReadDir("/proc/" + p.Name() + "/fd")
		if errors.Is(err, os.ErrPermission) || errors.Is(err, os.ErrNotExist) {
			continue // another user's, or gone
		}
		if err != nil {
			return false, err
		}
		for _, fd := range fds {
			if link, err := os.Readlink("/proc/" + p.Name() + "/fd/" + fd.Name()); err == nil && link == want {
				return true, nil
			}
		}
	}
	return false, nil
}
