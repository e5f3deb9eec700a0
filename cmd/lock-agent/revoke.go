package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
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
	const usage = "lock-agent revoke [-socket PATH] [-agent A] [-reason WORD] NAME"
	name, code, done := parseRevokeArgs(fs, args, usage, stdout, stderr)
	if done {
		return code
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
		printError(stderr, "revoke", err)
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

// parseRevokeArgs reads flags before or after NAME; done as parseFlags.
func parseRevokeArgs(fs *flag.FlagSet, args []string, usage string, stdout, stderr io.Writer) (name string, code int, done bool) {
	if code, done := parseFlags(fs, args, usage, stdout, stderr); done {
		return "", code, true
	}
	if fs.NArg() < 1 {
		return "", usageError(stderr, fs, usage, "want one NAME"), true
	}
	name = fs.Arg(0)
	if code, done := parseFlags(fs, fs.Args()[1:], usage, stdout, stderr); done {
		return "", code, true
	}
	if fs.NArg() != 0 {
		return "", usageError(stderr, fs, usage, fmt.Sprintf("unexpected argument %q", fs.Arg(0))), true
	}
	return name, exitOK, false
}

// askAgent sends one request line tagged 1 and returns its final reply
// without the tag; pushes and DATA lines are skipped.
func askAgent(socket, line string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := dialSocket(ctx, socket)
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
