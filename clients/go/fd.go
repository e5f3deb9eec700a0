package lockagent

import (
	"errors"
	"syscall"
)

// SyscallConn returns the raw connection to the agent. It is for a process
// that hands a duplicate of the descriptor to a child, as `lock-agent exec`
// does: the agent keeps the session, and every lock it holds, for as long as
// any process has the connection open. Reading or writing through it
// corrupts the Client's conversation with the agent. From then on Close
// sends no QUIT (which would end the session under the other processes):
// it closes this process's copy only.
func (c *Client) SyscallConn() (syscall.RawConn, error) {
	c.shared.Store(true)
	sc, ok := c.conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("lockagent: connection has no file descriptor")
	}
	return sc.SyscallConn()
}
