package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// revokeWait bounds how long revoke waits for the agent's answer: the
// agent answers once the revoked holds ended, within a lease (and a bit)
// of a holder whose agent does not answer.
const revokeWait = 10 * time.Minute

// revokeCmd is `lock-agent revoke NAME [-agent A] [-reason W]`: the
// REVOKE verb, one line on the socket (an operator's verb: no client
// library needed).
func revokeCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("revoke", stderr)
	socket := socketFlag(fs)
	agentID := fs.String("agent", "", "revoke only the holds of this agent id (default: every holder)")
	reason := fs.String("reason", "", "one word of [a-z0-9_] the holders hear in LOST (default revoked)")
	name, ok := parseRevokeArgs(fs, args)
	if !ok {
		fmt.Fprintln(stderr, "usage: lock-agent revoke [-socket PATH] [-agent A] [-reason WORD] NAME")
		return exitUsage
	}
	line := "1 REVOKE " + name
	if *agentID != "" {
		line += " agent=" + *agentID
	}
	if *reason != "" {
		line += " reason=" + *reason
	}
	reply, err := askAgent(*socket, line)
	switch {
	case err != nil:
		fmt.Fprintln(stderr, "lock-agent revoke:", err)
		return exitFailure
	case strings.HasPrefix(reply, "OK"):
		n := strings.TrimPrefix(reply, "OK n=")
		fmt.Fprintf(stdout, "revoked %s hold(s) of %s\n", n, name)
		return exitOK
	case strings.HasPrefix(reply, "ERR BAD_REQUEST"), strings.HasPrefix(reply, "ERR BAD_NAME"):
		fmt.Fprintln(stderr, "lock-agent revoke:", reply)
		return exitUsage
	}
	fmt.Fprintln(stderr, "lock-agent revoke:", reply)
	return exitFailure
}

// parseRevokeArgs reads flags before or after NAME.
func parseRevokeArgs(fs *flag.FlagSet, args []string) (string, bool) {
	if err := fs.Parse(args); err != nil || fs.NArg() < 1 {
		return "", false
	}
	name := fs.Arg(0)
	if err := fs.Parse(fs.Args()[1:]); err != nil || fs.NArg() != 0 {
		return "", false
	}
	return name, true
}

// askAgent sends one request line tagged 1 and returns its final reply
// without the tag; pushes and DATA lines are skipped.
func askAgent(socket, line string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(revokeWait))
	if _, err := io.WriteString(conn, line+"\n"); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			return "", fmt.Errorf("no answer from the agent: %w", err)
		}
		l = strings.TrimRight(l, "\r\n")
		if rest, ok := strings.CutPrefix(l, "1 "); ok && !strings.HasPrefix(rest, "DATA") {
			return rest, nil
		}
	}
}
