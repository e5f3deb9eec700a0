package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
)

// Exit codes, the same for every command. exec and elect add CMD's own
// status and their lock's (busy, lost: see execUsage).
const (
	exitOK      = 0
	exitFailure = 1  // a runtime failure: no agent, no quorum, a master refused
	exitConfig  = 2  // the config file is invalid (validate, run, bootstrap, settings)
	exitUsage   = 64 // bad usage: EX_USAGE of sysexits.h, as flock(1)
)

// command is one verb of lock-agent. The table of them, commands, is the
// one source the top-level usage, the dispatch, the shell completions and
// the man page are made from; each command's own -h text is the rest.
type command struct {
	name    string
	summary string // its lines in the top-level usage, after "  "
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands is filled in init: completion and man read it, and are in it.
var commands []command

func init() {
	commands = []command{
		{"run", "run -config FILE     run the agent\nrun -dev             run the agent with three embedded masters (no Redis needed)", runCmd},
		{"validate", "validate -config F   check a config file; exit 0 if valid, 2 if not", validateCmd},
		{"bootstrap", "bootstrap -config F  mark a new deployment's masters as new (no first quarantine)\n                     and record the config's settings in them", bootstrapCmd},
		{"settings", "settings -config F [-apply]\n                     show the settings each master records against F's; with\n                     -apply, change the cluster's to F's (see docs/operations.md)", settingsCmd},
		{"exec", "exec [flags] NAME[,NAME...] [--] CMD [ARGS...]\n                     run CMD while holding the lock NAME, or every NAME\n                     (flock(1) for the cluster; see lock-agent exec -h)", execCmd},
		{"elect", "elect [flags] NAME [--] CMD [ARGS...]\n                     campaign for leader of NAME and run CMD only while\n                     elected (exec's flags and guarantees; see lock-agent elect -h)", electCmd},
		{"leader", "leader [-watch] [-json] NAME\n                     show who leads NAME (its term, agent and value); with\n                     -watch, every change until interrupted", leaderCmd},
		{"status", "status [-json]       show the agent, its masters, sessions, holds and waiters;\n                     exit 3 if fewer than a quorum of masters are up", statusCmd},
		{"who", "who [-json] NAME     show who holds NAME, on any host, and how many wait\n                     in its fair queue", whoCmd},
		{"revoke", "revoke [-agent A] [-reason WORD] NAME\n                     end the holds of NAME wherever they are (an operator's\n                     verb: the ACL verb revoke, or uid 0 without an acl block)", revokeCmd},
		{"version", "version [-json]      print the version, commit and Go version of this binary", versionCmd},
		{"completion", "completion bash|zsh|fish\n                     print a shell completion script", completionCmd},
		{"man", "man                  print the manual page (roff): lock-agent man | man -l -", manCmd},
	}
}

func lookupCommand(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// usageText is the top-level usage, made from commands.
func usageText() string {
	var b strings.Builder
	b.WriteString("usage: lock-agent COMMAND [flags]\n\ncommands:\n")
	for _, c := range commands {
		for _, line := range strings.Split(c.summary, "\n") {
			b.WriteString("  " + line + "\n")
		}
	}
	b.WriteString(`
lock-agent COMMAND -h prints a command's flags.
exit status: 0 ok; 1 a runtime failure (no agent, no quorum); 2 an invalid
config file; 64 bad usage (EX_USAGE). exec, elect and status add their own.
`)
	return b.String()
}

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("lock-agent "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	// parseFlags prints the usage, once, where it belongs.
	fs.Usage = func() {}
	return fs
}

// flagsHelp is fs's flags as flag.PrintDefaults prints them.
func flagsHelp(fs *flag.FlagSet) string {
	var b bytes.Buffer
	out := fs.Output()
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(out)
	return b.String()
}

// parseFlags parses args with fs, for a command whose synopsis is usage
// ("lock-agent who [-json] NAME"). On -h or --help it prints the usage
// and the flags to stdout and returns exitOK, done; on a bad flag, the error
// and the usage, once, to stderr and returns exitUsage, done.
func parseFlags(fs *flag.FlagSet, args []string, usage string, stdout, stderr io.Writer) (code int, done bool) {
	fs.SetOutput(io.Discard) // the flag package would print its own usage and error
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintf(stdout, "usage: %s\n\nflags:\n%s", usage, flagsHelp(fs))
		return exitOK, true
	case err != nil:
		return usageError(stderr, fs, usage, err.Error()), true
	}
	return exitOK, false
}

// usageError prints why a command line is wrong and the command's usage,
// and returns exitUsage.
func usageError(stderr io.Writer, fs *flag.FlagSet, usage, why string) int {
	fmt.Fprintf(stderr, "%s: %s\nusage: %s\n", fs.Name(), why, usage)
	return exitUsage
}

// printError prints err on one line as "lock-agent VERB: ...", naming the
// program once: the Go client's errors carry their own "lockagent: ".
func printError(stderr io.Writer, verb string, err error) {
	prefix := "lock-agent"
	if verb != "" {
		prefix += " " + verb
	}
	fmt.Fprintf(stderr, "%s: %s\n", prefix, strings.ReplaceAll(err.Error(), "lockagent: ", ""))
}

// noAgentError is every "no agent answers" of the command line, with the
// one hint: the path tried, where clients look, and how to start one.
type noAgentError struct {
	path string
	err  error
}

func (e *noAgentError) Error() string {
	return fmt.Sprintf("no agent answers at %s (%v)\n"+
		"  where lock-agent looks: -socket, else $LOCK_AGENT_SOCKET, else %s if it exists, else %s (run -dev's)\n"+
		"  to start one: `systemctl start lock-agent.socket` (installed package), or `lock-agent run -dev` for a local test agent\n"+
		"  (then export the LOCK_AGENT_SOCKET it prints)",
		e.path, connectCause(e.err), lockagent.DefaultSocket, lockagent.DevSocketPath())
}

func (e *noAgentError) Unwrap() error { return e.err }

// connectCause is the operating system's words for a failed connect:
// "no such file or directory", "connection refused".
func connectCause(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return strings.TrimPrefix(op.Err.Error(), "connect: ")
	}
	return strings.ReplaceAll(err.Error(), "lockagent: ", "")
}

// dialSocket connects to the agent's socket for a command that speaks the
// protocol itself (status, revoke). A failure is a *noAgentError.
func dialSocket(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, &noAgentError{path, err}
	}
	return conn, nil
}
