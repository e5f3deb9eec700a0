package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
	"golang.org/x/sys/unix"
)

// socketFlag adds -socket, defaulting to $LOCK_AGENT_SOCKET or the default path.
func socketFlag(fs *flag.FlagSet) *string {
	return fs.String("socket", lockagent.SocketPath(), "agent socket ($LOCK_AGENT_SOCKET)")
}

func dialAgent(ctx context.Context, path string, stderr io.Writer) (*lockagent.Client, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := lockagent.Dial(ctx, path)
	if err != nil {
		fmt.Fprintln(stderr, "lock-agent:", err)
		return nil, false
	}
	return c, true
}

const execUsage = `usage: lock-agent exec [flags] NAME -- CMD [ARGS...]

Runs CMD while holding the lock NAME, cluster-wide. CMD gets LOCK_AGENT_NAME and
LOCK_AGENT_FENCE in its environment; SIGINT, SIGTERM, SIGHUP and SIGQUIT are
forwarded to it. Exits with CMD's status; with -conflict-exit when the lock was
busy; non-zero, saying why, when the lock was lost (CMD then gets SIGTERM at
once and SIGKILL after -kill-after).

flags:
`

// forwarded are the signals exec passes on to its child.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

func execCmd(args []string, stderr io.Writer) int {
	fs := newFlags("exec", stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, execUsage)
		fs.PrintDefaults()
	}
	socket := socketFlag(fs)
	wait := fs.Duration("wait", -1, "give up after this long (0: try once; default: wait forever)")
	ttl := fs.Duration("ttl", 0, "hold at most this long (default: while CMD runs)")
	shared := fs.Bool("shared", false, "take a shared (read) hold")
	limit := fs.Int("limit", 0, "treat NAME as a semaphore of this many holders")
	conflictExit := fs.Int("conflict-exit", 1, "exit status when the lock is busy")
	killAfter := fs.Duration("kill-after", 5*time.Second, "after a lost lock, SIGKILL CMD if it has not exited by then")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	rest := fs.Args()
	if len(rest) < 2 {
		fs.Usage()
		return exitUsage
	}
	name, cmdArgs := rest[0], rest[1:]
	if cmdArgs[0] == "--" {
		cmdArgs = cmdArgs[1:]
	}
	if len(cmdArgs) == 0 {
		fs.Usage()
		return exitUsage
	}

	// Signals that arrive while waiting for the lock give up the wait.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, ok := dialAgent(ctx, *socket, stderr)
	if !ok {
		return exitFailure
	}
	defer c.Close()

	opts := []lockagent.Option{}
	if *wait >= 0 {
		opts = append(opts, lockagent.Wait(*wait))
	}
	if *ttl > 0 {
		opts = append(opts, lockagent.TTL(*ttl))
	}
	if *shared {
		opts = append(opts, lockagent.Shared())
	}
	if *limit > 0 {
		opts = append(opts, lockagent.Limit(*limit))
	}
	type locked struct {
		l   *lockagent.Lock
		err error
	}
	got := make(chan locked, 1)
	go func() {
		l, err := c.Lock(ctx, name, opts...)
		got <- locked{l, err}
	}()
	var l *lockagent.Lock
	select {
	case r := <-got:
		l = r.l
		switch {
		case errors.Is(r.err, lockagent.ErrBusy):
			fmt.Fprintf(stderr, "lock-agent exec: %s is busy\n", name)
			return *conflictExit
		case r.err != nil:
			fmt.Fprintf(stderr, "lock-agent exec: %s: %v\n", name, r.err)
			return exitFailure
		}
	case s := <-sigs:
		cancel()
		<-got
		fmt.Fprintf(stderr, "lock-agent exec: %v while waiting for %s\n", s, name)
		return 128 + int(s.(syscall.Signal))
	}
	defer l.Unlock(context.Background())

	child := exec.Command(cmdArgs[0], cmdArgs[1:]...)
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	child.Env = append(os.Environ(), "LOCK_AGENT_NAME="+name, "LOCK_AGENT_FENCE="+strconv.FormatInt(l.Fence(), 10))
	// Unattended (cron, systemd, scripts), the child leads its own process
	// group and signals go to the whole group: when the lock is lost, nothing
	// the job started may keep running. On a terminal it stays in the
	// foreground group, so Ctrl-C and job control work as usual.
	group := !isTerminal(os.Stdin)
	if group {
		child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	signalChild := func(s os.Signal) {
		if group {
			syscall.Kill(-child.Process.Pid, s.(syscall.Signal))
		} else {
			child.Process.Signal(s)
		}
	}
	if err := child.Start(); err != nil {
		fmt.Fprintf(stderr, "lock-agent exec: %v\n", err)
		return 127
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	for {
		select {
		case s := <-sigs:
			signalChild(s)
		case err := <-exited:
			return childStatus(err)
		case <-l.Done():
			fmt.Fprintf(stderr, "lock-agent exec: %v; stopping %s\n", l.Err(), cmdArgs[0])
			signalChild(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(*killAfter):
				fmt.Fprintf(stderr, "lock-agent exec: %s still running %v after SIGTERM; killing it\n", cmdArgs[0], *killAfter)
				signalChild(syscall.SIGKILL)
				<-exited
			}
			if group { // whatever else the job left in its group
				syscall.Kill(-child.Process.Pid, syscall.SIGKILL)
			}
			return exitFailure
		}
	}
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// childStatus is the shell's convention: the exit code, or 128+signal.
func childStatus(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return exitFailure
	}
	return exitOK
}

func statusCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("status", stderr)
	socket := socketFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: lock-agent status [-socket PATH] [-json]")
		return exitUsage
	}
	c, ok := dialAgent(context.Background(), *socket, stderr)
	if !ok {
		return exitFailure
	}
	defer c.Close()
	s, err := c.Status(context.Background())
	if err != nil {
		fmt.Fprintln(stderr, "lock-agent status:", err)
		return exitFailure
	}
	if *asJSON {
		return printJSON(stdout, stderr, s)
	}
	up := 0
	for _, m := range s.Masters {
		if m.State == "up" {
			up++
		}
	}
	health := "ok"
	if up < s.Quorum {
		health = "NO QUORUM"
	}
	fmt.Fprintf(stdout, "agent %s: %d/%d masters up (quorum %d, %s); %d sessions, %d holds, %d waiters\n\n",
		s.Agent, up, len(s.Masters), s.Quorum, health, s.Sessions, s.Holds, s.Waiters)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MASTER\tADDRESS\tSTATE")
	for _, m := range s.Masters {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", m.Name, m.Address, m.State)
	}
	tw.Flush()
	return exitOK
}

func whoCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("who", stderr)
	socket := socketFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: lock-agent who [-socket PATH] [-json] NAME")
		return exitUsage
	}
	name := fs.Arg(0)
	c, ok := dialAgent(context.Background(), *socket, stderr)
	if !ok {
		return exitFailure
	}
	defer c.Close()
	holders, err := c.Who(context.Background(), name)
	if err != nil {
		fmt.Fprintln(stderr, "lock-agent who:", err)
		return exitFailure
	}
	if *asJSON {
		return printJSON(stdout, stderr, holders)
	}
	if len(holders) == 0 {
		fmt.Fprintf(stdout, "%s is free\n", name)
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tPID\tUID\tOWNER\tMODE\tFENCE\tHELD FOR")
	for _, h := range holders {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%d\t%s\n", h.Agent, h.PID, h.UID, dash(h.Owner), h.Mode, h.Fence,
			time.Since(h.Since).Round(time.Millisecond))
	}
	tw.Flush()
	return exitOK
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
		fmt.Fprintln(stderr, "lock-agent:", err)
		return exitFailure
	}
	return exitOK
}
