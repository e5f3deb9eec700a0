package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
)

const electUsage = `usage: lock-agent elect [flags] NAME [flags] [--] CMD [ARGS...]
       lock-agent elect [flags] NAME [flags] -c 'SHELL COMMAND'

Campaigns for leader of NAME (a fair lock: candidates, on any host, are
elected in the order they arrived) and runs CMD once elected, only while
elected: exec's guarantees, with exec's flags. If leadership is lost, CMD's
process group gets SIGTERM at once and SIGKILL after -kill-after, and elect
exits 124. When CMD exits (or is killed), the next candidate is elected.
CMD gets LOCK_AGENT_FENCE, the term: strictly increasing per NAME.
` + "`lock-agent leader NAME`" + ` shows who leads, and its value.

flags: those of lock-agent exec (see lock-agent exec -h), among them
  -value V            the leader's value (any text): what observers see
  -wait D, -n         give up the campaign after D (exit 1, or -conflict-exit)
  -on-wanted SIGNAL   signal CMD's group when another candidate starts waiting
  -delay D, -min-hold D
but not -shared, -limit, -F or several names.
`

func electCmd(args []string, stdout, stderr io.Writer) int {
	o, err := parseExecArgs(args)
	if errors.Is(err, errHelp) {
		fmt.Fprint(stdout, electUsage)
		return exitOK
	}
	if err == nil {
		err = electable(o)
	}
	if err != nil {
		fmt.Fprintf(stderr, "lock-agent elect: %v\n\n%s", err, electUsage)
		return exitUsage
	}
	o.fair = true
	return runLocked(o, "elect", stderr)
}

// electable refuses what a campaign is not: a shared hold, a semaphore,
// several names.
func electable(o *execOptions) error {
	switch {
	case len(o.names) > 1:
		return fmt.Errorf("NAME %q: one name (a leader is elected per name)", o.name)
	case o.shared:
		return errors.New("-shared: a leader holds its name alone")
	case o.limit > 0:
		return errors.New("-limit: a leader holds its name alone")
	case o.noFork:
		return errors.New("-F: elect must stay to stop CMD once leadership is lost")
	}
	return nil
}

const leaderUsage = "lock-agent leader [-socket PATH] [-watch] [-json] NAME"

func leaderCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("leader", stderr)
	socket := socketFlag(fs)
	watch := fs.Bool("watch", false, "print every change until interrupted")
	asJSON := fs.Bool("json", false, "print one JSON object a line")
	if code, done := parseFlags(fs, args, leaderUsage, stdout, stderr); done {
		return code
	}
	if fs.NArg() != 1 {
		return usageError(stderr, fs, leaderUsage, "want one NAME")
	}
	name := fs.Arg(0)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	c, ok := dialAgent(ctx, "leader", *socket, stderr)
	if !ok {
		return exitFailure
	}
	defer c.Close()
	print := func(l lockagent.Leader) { printLeader(stdout, l, *asJSON) }
	if !*watch {
		l, err := c.Leader(ctx, name)
		if err != nil {
			printError(stderr, "leader", err)
			return exitFailure
		}
		print(l)
		return exitOK
	}
	return watchLeader(ctx, c, name, print, stderr)
}

// watchLeader prints every change of name's leader until ctx ends (exit 0)
// or the agent goes away (exit 1).
func watchLeader(ctx context.Context, c *lockagent.Client, name string, print func(lockagent.Leader), stderr io.Writer) int {
	changes, err := c.Observe(ctx, name)
	if err != nil {
		if ctx.Err() != nil {
			return exitOK
		}
		printError(stderr, "leader", err)
		return exitFailure
	}
	for l := range changes {
		print(l)
	}
	if ctx.Err() != nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "lock-agent leader: the connection to the agent closed")
	return exitFailure
}

// printLeader prints one line: a JSON object, or text with the value
// quoted (it may hold any text, newlines included).
func printLeader(w io.Writer, l lockagent.Leader, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(l)
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	if l.None {
		fmt.Fprintf(w, "%s: no leader\n", l.Name)
		return
	}
	fmt.Fprintf(w, "%s: term %d, agent %s, value %s\n", l.Name, l.Fence, l.Agent, strconv.Quote(l.Value))
}
