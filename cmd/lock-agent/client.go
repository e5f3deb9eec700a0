package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
)

// socketFlag adds -socket, defaulting to $LOCK_AGENT_SOCKET or the default path.
func socketFlag(fs *flag.FlagSet) *string {
	return fs.String("socket", lockagent.SocketPath(), "agent socket (default $LOCK_AGENT_SOCKET, else "+lockagent.DefaultSocket+" if it exists, else run -dev's)")
}

// dialAgent connects the Go client for verb; a failure is printed, with
// the no-agent hint if nothing answers at path.
func dialAgent(ctx context.Context, verb, path string, stderr io.Writer) (*lockagent.Client, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := lockagent.Dial(ctx, path)
	if errors.Is(err, lockagent.ErrConnect) {
		err = &noAgentError{path, err}
	}
	if err != nil {
		printError(stderr, verb, err)
		return nil, false
	}
	return c, true
}

// whoOutput is who -json: an object, so that what WHO may add (the fair
// queue's length) has a place. Queued is left out when the agent does not
// report it.
type whoOutput struct {
	Name    string             `json:"name"`
	Holders []lockagent.Holder `json:"holders"`
	Queued  *int               `json:"queued,omitempty"`
	// Waiting and DelayedUntil are left out when the agent reports none.
	Waiting      []lockagent.Waiting `json:"waiting,omitempty"`
	DelayedUntil *time.Time          `json:"delayed_until,omitempty"`
}

func whoCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("who", stderr)
	socket := socketFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	const usage = "lock-agent who [-socket PATH] [-json] NAME"
	if code, done := parseFlags(fs, args, usage, stdout, stderr); done {
		return code
	}
	if fs.NArg() != 1 {
		return usageError(stderr, fs, usage, "want one NAME")
	}
	name := fs.Arg(0)
	c, ok := dialAgent(context.Background(), "who", *socket, stderr)
	if !ok {
		return exitFailure
	}
	defer c.Close()
	occ, err := c.Occupancy(context.Background(), name)
	if err != nil {
		printError(stderr, "who", err)
		return exitFailure
	}
	if *asJSON {
		out := whoOutput{Name: name, Holders: occ.Holders, Waiting: occ.Waiting}
		if occ.Queued >= 0 {
			out.Queued = &occ.Queued
		}
		if !occ.DelayedUntil.IsZero() {
			out.DelayedUntil = &occ.DelayedUntil
		}
		return printJSON(stdout, stderr, out)
	}
	queued := ""
	if occ.Queued >= 0 {
		queued = fmt.Sprintf("%d queued (waiting in its fair queue, on any agent)", occ.Queued)
	}
	defer printWaiting(stdout, occ)
	if len(occ.Holders) == 0 {
		if queued != "" {
			fmt.Fprintf(stdout, "%s is free; %s\n", name, queued)
		} else {
			fmt.Fprintf(stdout, "%s is free\n", name)
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tPID\tUID\tOWNER\tMODE\tFENCE\tHELD FOR\tVALUE")
	for _, h := range occ.Holders {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%d\t%s\t%s\n", h.Agent, h.PID, h.UID, dash(h.Owner), h.Mode, h.Fence,
			time.Since(h.Since).Round(time.Millisecond), quotedValue(h.Value))
	}
	tw.Flush()
	if queued != "" {
		fmt.Fprintf(stdout, "\n%s\n", queued)
	}
	return exitOK
}

// printWaiting prints who waits, per agent, and a delay that stands.
func printWaiting(w io.Writer, occ lockagent.Occupancy) {
	for _, wt := range occ.Waiting {
		fmt.Fprintf(w, "%d waiting on %s for %s\n", wt.Count, wt.Agent, time.Since(wt.Since).Round(time.Millisecond))
	}
	if !occ.DelayedUntil.IsZero() {
		fmt.Fprintf(w, "unavailable to everyone for %s more (a delay or min_hold after a hold ended)\n",
			time.Until(occ.DelayedUntil).Round(time.Millisecond))
	}
}

// quotedValue shows a value, which may hold any text, on one line.
func quotedValue(v string) string {
	if v == "" {
		return "-"
	}
	return strconv.Quote(v)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printJSON(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		printError(stderr, "", err)
		return exitFailure
	}
	return exitOK
}
