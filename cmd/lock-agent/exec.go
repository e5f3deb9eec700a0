package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
	"github.com/lock-agent/lock-agent/protocol"
	"golang.org/x/sys/unix"
)

// Exit codes of exec besides the command's own status.
const (
	exitBusy     = 1   // default of -conflict-exit: the lock was busy (flock's)
	exitLost     = 124 // the lock was lost while the command ran; it was stopped (like timeout(1))
	exitNotExec  = 126 // the command could not be run
	exitNotFound = 127 // the command was not found
)

const execUsage = `usage: lock-agent exec [flags] NAME[,NAME...] [flags] [--] CMD [ARGS...]
       lock-agent exec [flags] NAME[,NAME...] [flags] -c 'SHELL COMMAND'

Runs CMD while holding the lock NAME, cluster-wide: flock(1) for the whole
cluster, with flock's flags. The lock is held by the agent connection, and
CMD inherits a copy of it (its number is in LOCK_AGENT_FD): the lock stays
held while CMD, or anything it started that kept that descriptor, runs --
also if exec itself is killed -- and is released when the last of them
exits. CMD also gets LOCK_AGENT_NAME and LOCK_AGENT_FENCE (and
LOCK_AGENT_SLOT, with -limit). CMD runs in its own process group (the
terminal's foreground group when exec has the terminal); SIGINT, SIGTERM,
SIGHUP and SIGQUIT sent to exec are passed on to that group once.

Several names, joined by commas (a,b,c; a comma is never part of a name),
are taken in one request, all or none; two execs over overlapping names
never deadlock, whatever order they give them in. Every flag applies to each
name. LOCK_AGENT_NAME is then NAME as given (a,b,c), and LOCK_AGENT_FENCE and
LOCK_AGENT_SLOT are comma lists in the same order, one entry per name.

If the lock (any of the names) is lost, CMD's process group gets SIGTERM at
once and SIGKILL after -kill-after, and exec exits 124. The group is gone
before anyone else can be granted NAME: unless -delay is given, exec asks
for a lock-delay of -kill-after + 1s (or the agent's lock.lock_delay, if
longer), so that after a loss -- the -ttl ran out, an operator
revoked it, the agent lost its masters, stopped or died -- NAME stays unavailable to
everyone until the SIGKILL is past. With -delay D, the SIGKILL comes at
the latest 1s before D ends (at once, with SIGTERM, if D is 1s or less).
When CMD ends by itself, exec UNLOCKs (a clean end: no delay), unless a
process outside CMD's group kept the agent connection, which then keeps
the lock.

Flags are read as flock reads them and as Go programs do: -x -n -w 5,
bundled -xnw5, long --timeout=5 or --timeout 5 (or a unique prefix, --time),
and one-dash long -wait 5. They go before NAME, or after it up to CMD.

flock's flags:
  -x, -e, --exclusive  take an exclusive (write) hold: the default
  -s, --shared, -shared
                       take a shared (read) hold
  -n, --nb, --nonblock fail at once if NAME is busy (whatever -w says)
  -w, --timeout, --wait, -wait D
                       give up after D: seconds ("5", "0.5") or a Go duration
                       ("1m"); 0 is -n (default: wait forever)
  -E, --conflict-exit-code, -conflict-exit N
                       exit status when NAME is busy under -n or -w, 0 to 255
                       (default 1); with 0, nothing is printed either
  -c, --command STRING run STRING with /bin/sh -c instead of CMD
  -o, --close          CMD does not inherit the agent connection (no
                       LOCK_AGENT_FD): exec alone holds the lock, so what CMD
                       leaves running in the background does not keep it,
                       and the lock ends when CMD ends or exec is killed
  -F, --no-fork        exec becomes CMD (execve, no child) once it holds
                       the lock; CMD holds it through the inherited
                       connection, and nothing is left to stop CMD if the
                       lock is lost or to forward signals. Not with -o,
                       -ttl or -on-wanted
  -h, --help           print this help

exec's own flags:
  -ttl D               hold at most D, then the lock is lost (default: while CMD runs)
  -kill-after D        after a lost lock, SIGKILL CMD's group D after SIGTERM (default 5s;
                       at most -delay - 1s)
  -q, -quiet           print nothing of exec's own (busy, lost) on stderr
  -limit N             treat NAME as a semaphore of N holders
  -fair                be granted in arrival order, across all agents (fair=true)
  -value V             attach V (any text) to the hold: who and leader show it
  -on-wanted SIGNAL    send SIGNAL (TERM, USR1, 10, ...) to CMD's process group when
                       a conflicting request for NAME starts waiting, on any agent
                       (at most once per 100ms while it stays wanted)
  -delay D             after an unclean end (exec or CMD killed, the lock lost),
                       keep NAME from everyone for D (0 to 5m; default:
                       -kill-after + 1s, or the agent's lock.lock_delay if longer;
                       with -F the agent's lock.lock_delay)
  -min-hold D          keep NAME held, by nobody once CMD is done, until D after
                       the grant: run at most once per D across hosts (0 to 24h)
  -socket PATH         agent socket (default $LOCK_AGENT_SOCKET, else
                       /run/lock-agent/agent.sock if it exists, else the
                       socket of lock-agent run -dev)

exit status: CMD's status (128+N if killed by signal N); 1 (or -E) if the
lock was busy; 124 if the lock was lost; 1 if the agent could not be
reached or refused; 64 on bad usage (EX_USAGE, as flock); 126 if CMD could
not run, 127 if not found.
`

// execOptions is a parsed exec command line.
type execOptions struct {
	socket       string
	wait         waitValue
	ttl          time.Duration
	shared       bool
	limit        int
	fair         bool
	value        string
	onWanted     syscall.Signal // 0: no notify=wanted
	delay        optionalDuration
	minHold      time.Duration
	conflictExit int
	killAfter    time.Duration
	quiet        bool
	agentDelay   time.Duration // the agent's lock.lock_delay (STATUS), which exec never lowers
	nonblock     bool          // -n: try once, whatever -wait says
	close        bool          // -o: CMD does not get the agent connection
	noFork       bool          // -F: exec becomes CMD
	shell        string
	name         string   // NAME as given: one name, or several joined by commas
	names        []string // NAME split at its commas
	command      []string
}

// nameSeparator joins several names in NAME and in LOCK_AGENT_NAME. It can
// never be part of a name (protocol v1: [A-Za-z0-9._:/@+-]), so the split is
// exact; and a NAME with a comma was refused before, so no command line
// that worked changes meaning.
const nameSeparator = ","

// splitNames splits NAME at its commas. The names themselves are checked by
// the client before anything is sent.
func splitNames(name string) ([]string, error) {
	names := strings.Split(name, nameSeparator)
	for _, n := range names {
		if n == "" {
			return nil, fmt.Errorf("NAME %q: an empty name between commas", name)
		}
	}
	return names, nil
}

// waitValue is -wait: seconds as a plain number, as flock -w takes them, or a
// Go duration. Unset means forever.
type waitValue struct {
	d   time.Duration
	set bool
}

func (w *waitValue) String() string {
	if w == nil || !w.set {
		return "forever"
	}
	return w.d.String()
}

func (w *waitValue) Set(s string) error {
	d, err := parseWait(s)
	if err != nil {
		return err
	}
	w.d, w.set = d, true
	return nil
}

func parseWait(s string) (time.Duration, error) {
	if s == "forever" {
		return -1, nil
	}
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		if secs < 0 || secs > 1e9 {
			return 0, fmt.Errorf("want seconds >= 0, got %s", s)
		}
		return time.Duration(secs * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("want seconds (5, 0.5) or a duration (1m), got %q", s)
	}
	return d, nil
}

// optionalDuration is a duration flag that may be left out (Delay(0) is not
// the agent's default).
type optionalDuration struct {
	d   time.Duration
	set bool
}

func (o *optionalDuration) String() string {
	if o == nil || !o.set {
		return "unset"
	}
	return o.d.String()
}

func (o *optionalDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	o.d, o.set = d, true
	return nil
}

// parseSignal reads -on-wanted: a signal's name, with or without SIG, in
// any case, or its number.
func parseSignal(s string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, fmt.Errorf("-on-wanted %q: want a signal's name (TERM, SIGUSR1) or number", s)
}

// errHelp is -h: the usage goes to stdout and exec exits 0.
var errHelp = errors.New("help")

// parseExecArgs reads flags before and after NAME, up to "--" or the first
// word that is not a flag.
func parseExecArgs(args []string) (*execOptions, error) {
	o := &execOptions{socket: lockagent.SocketPath(), conflictExit: exitBusy, killAfter: 5 * time.Second}
	rest, err := o.parseFlags(args)
	if err != nil {
		return nil, err
	}
	if len(rest) == 0 {
		return nil, errors.New("no lock NAME")
	}
	o.name, rest = rest[0], rest[1:]
	if o.names, err = splitNames(o.name); err != nil {
		return nil, err
	}
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	} else if len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
		if rest, err = o.parseFlags(rest); err != nil { // flags after NAME, as flock takes -c
			return nil, err
		}
	}
	if err := o.setCommand(rest); err != nil {
		return nil, err
	}
	if o.nonblock { // flock: -n wins over -w, whatever their order
		o.wait = waitValue{0, true}
	}
	return o, o.check()
}

// parseFlags reads the flags at the head of args into o and returns the
// words after them.
func (o *execOptions) parseFlags(args []string) ([]string, error) {
	given, rest, err := scanFlags(execFlagSpecs, args)
	if err != nil {
		return nil, err
	}
	for _, f := range given {
		err := execFlagSetters[f.spec.names[0]](o, f.value)
		if errors.Is(err, errHelp) {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("-%s %s: %w", f.name, f.value, err)
		}
	}
	return rest, nil
}

// check refuses flags that cannot go together.
func (o *execOptions) check() error {
	switch {
	case o.conflictExit < 0 || o.conflictExit > 255:
		return fmt.Errorf("-conflict-exit %d: want 0 to 255", o.conflictExit)
	case o.noFork && o.close:
		return errors.New("-F and -o: with both, nothing would be left to hold the lock")
	case o.noFork && o.onWanted != 0:
		return errors.New("-F and -on-wanted: with -F, exec is not there to send the signal")
	case o.noFork && o.ttl > 0:
		return errors.New("-F and -ttl: with -F, exec is not there to stop CMD when the lock expires")
	}
	return nil
}

// setCommand takes the command to run: -c STRING, or the words after NAME
// (rest), but not both.
func (o *execOptions) setCommand(rest []string) error {
	switch {
	case o.shell != "" && len(rest) > 0:
		return errors.New("give -c STRING or a command, not both")
	case o.shell != "":
		o.command = []string{"/bin/sh", "-c", o.shell}
	case len(rest) == 0:
		return errors.New("no command to run")
	default:
		o.command = rest
	}
	return nil
}

// forwarded are the signals exec passes on to the command's process group.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

func execCmd(args []string, stdout, stderr io.Writer) int {
	o, err := parseExecArgs(args)
	if errors.Is(err, errHelp) {
		fmt.Fprint(stdout, execUsage)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "lock-agent exec: %v\n\n%s", err, execUsage)
		return exitUsage
	}
	return runLocked(o, "exec", stderr)
}

// runLocked runs o's command while it holds o's lock: exec's and elect's
// work, once the command line is read. command names it in messages.
func runLocked(o *execOptions, command string, stderr io.Writer) int {
	say := func(format string, a ...any) {
		if !o.quiet {
			// The Go client's errors carry their own "lockagent: ".
			fmt.Fprintf(stderr, "lock-agent %s: %s\n", command, strings.ReplaceAll(fmt.Sprintf(format, a...), "lockagent: ", ""))
		}
	}

	// Signals that arrive while waiting for the lock give up the wait.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	c, ok := dialAgent(context.Background(), command, o.socket, stderr)
	if !ok {
		return exitFailure
	}
	locks, code, ok := acquire(c, o, sigs, say)
	if !ok {
		c.Close()
		return code
	}
	j := &job{o: o, c: c, locks: locks, sigs: sigs, say: say}
	if o.noFork {
		return j.become()
	}
	return j.run()
}

// acquire takes every name in one LOCK, or says why not and returns the
// exit status.
func acquire(c *lockagent.Client, o *execOptions, sigs <-chan os.Signal, say func(string, ...any)) ([]*lockagent.Lock, int, bool) {
	var opts []lockagent.Option
	if o.wait.set && o.wait.d >= 0 {
		opts = append(opts, lockagent.Wait(o.wait.d))
	}
	if o.ttl > 0 {
		opts = append(opts, lockagent.TTL(o.ttl))
	}
	if o.shared {
		opts = append(opts, lockagent.Shared())
	}
	if o.limit > 0 {
		opts = append(opts, lockagent.Limit(o.limit))
	}
	if o.fair {
		opts = append(opts, lockagent.Fair())
	}
	if !o.delay.set && !o.noFork {
		// exec's own delay must not shorten the agent's lock.lock_delay.
		// An agent that does not say (older, or STATUS refused) gets exec's.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if st, err := c.Status(ctx); err == nil {
			o.agentDelay = st.LockDelay
		}
		cancel()
	}
	opts = append(opts, coordinationOptions(o)...)
	type locked struct {
		locks []*lockagent.Lock
		err   error
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan locked, 1)
	go func() {
		// One name is the LOCK of one name: LockAll sends the same line.
		locks, err := c.LockAll(ctx, o.names, opts...)
		got <- locked{locks, err}
	}()
	select {
	case r := <-got:
		switch {
		case errors.Is(r.err, lockagent.ErrBusy):
			if o.conflictExit != 0 { // 0 is "busy is fine": cron mails any output
				say("%s is busy", o.name)
			}
			return nil, o.conflictExit, false
		case r.err != nil:
			say("%s: %v", o.name, r.err)
			return nil, exitFailure, false
		}
		return r.locks, 0, true
	case s := <-sigs:
		cancel()
		<-got
		say("%v while waiting for %s", s, o.name)
		return nil, 128 + int(s.(syscall.Signal)), false
	}
}

// coordinationOptions are -value, -on-wanted, -delay and -min-hold as
// options of the LOCK (the client checks their bounds).
func coordinationOptions(o *execOptions) []lockagent.Option {
	var opts []lockagent.Option
	if o.value != "" {
		opts = append(opts, lockagent.Value(o.value))
	}
	if o.onWanted != 0 {
		opts = append(opts, lockagent.NotifyWanted())
	}
	if d, ok := o.lockDelay(); ok {
		opts = append(opts, lockagent.Delay(d))
	}
	if o.minHold != 0 {
		opts = append(opts, lockagent.MinHold(o.minHold))
	}
	return opts
}

// killMargin is how much of the lock-delay exec leaves between its
// SIGKILL and the delay's end: the LOST push's way from the agent to exec,
// and the kernel's reaping of the group, on a loaded host.
const killMargin = time.Second

// lockDelay is the delay= exec asks for, if any: -delay, else enough to
// cover the kill window (-kill-after and killMargin), so that after a loss
// nobody else is granted NAME while CMD's group may still run, or the
// agent's lock.lock_delay if that is longer. With -F there is no kill
// window: the agent's lock.lock_delay applies.
func (o *execOptions) lockDelay() (time.Duration, bool) {
	switch {
	case o.delay.set:
		return o.delay.d, true
	case o.noFork:
		return 0, false
	}
	return min(max(o.killAfter+killMargin, o.agentDelay), protocol.MaxDelay), true
}

// killWindow is how long after the SIGTERM of a loss exec sends SIGKILL:
// -kill-after, but never later than killMargin before the lock-delay ends.
// The delay starts on the masters no earlier than the LOST was pushed (for
// every reason: a -ttl that ran out or a REVOKE end the hold right after
// the push; a loss of quorum leaves records whose lease and delay outlast
// the push), so a SIGKILL at the window's end comes while NAME is still
// kept from everyone.
func (o *execOptions) killWindow() time.Duration {
	d, _ := o.lockDelay()
	return max(min(o.killAfter, d-killMargin), 0)
}

// job is the command running under the lock.
type job struct {
	o     *execOptions
	c     *lockagent.Client
	locks []*lockagent.Lock // one per name, in the order of o.names
	sigs  <-chan os.Signal
	say   func(string, ...any)

	pgid int
	tty  bool // the job has the terminal's foreground
}

// event is a change of the command's state, from wait4.
type event struct {
	status  syscall.WaitStatus
	stopped bool
}

func (j *job) run() int {
	cmd, code := j.start()
	if cmd == nil {
		return code
	}
	defer cmd.Process.Release()
	j.pgid = cmd.Process.Pid
	events := make(chan event, 1)
	go watch(cmd.Process.Pid, events)
	lost, stop := anyLost(j.locks)
	defer stop()
	wanted := anyWanted(lost, j.locks, j.o.onWanted != 0)
	for {
		select {
		case s := <-j.sigs:
			j.signal(s.(syscall.Signal))
		case <-wanted:
			j.signal(j.o.onWanted)
		case e := <-events:
			if e.stopped {
				j.suspend()
				continue
			}
			j.takeTerminal()
			return j.exited(e.status)
		case <-lost.Done():
			return j.lost(context.Cause(lost), events)
		}
	}
}

// start starts the command, leading its own process group, with the agent
// connection inherited; if it cannot, it says why and returns the exit
// status.
func (j *job) start() (*exec.Cmd, int) {
	inherited := -1 // -o: the command gets no copy
	if !j.o.close {
		var ok bool
		if inherited, ok = j.inheritable(); !ok {
			return nil, exitFailure
		}
		defer unix.Close(inherited)
	}
	cmd := exec.Command(j.o.command[0], j.o.command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = commandEnv(j.env(inherited))
	// The command leads its own process group, so that a lost lock stops
	// everything it started, and signals reach it once: from the terminal
	// when it has the foreground, else from exec.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if j.tty = foreground(); j.tty {
		signal.Ignore(syscall.SIGTTOU) // to take the terminal back when it is done
		cmd.SysProcAttr.Foreground, cmd.SysProcAttr.Ctty = true, 0
	}
	if err := cmd.Start(); err != nil {
		j.say("%v", err)
		return nil, notRun(err)
	}
	return cmd, exitOK
}

// notRun is the exit status for a command that could not be run: 127 if
// it was not found, else 126, as a shell's.
func notRun(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return exitNotFound
	}
	return exitNotExec
}

// become replaces exec with the command (-F, flock's --no-fork): the
// command is exec's process, with the agent connection inherited, so it
// holds the lock until it and whatever kept the connection exit. Nothing is
// left to act on a lost lock, forward signals or wait for the release.
func (j *job) become() int {
	path, err := exec.LookPath(j.o.command[0])
	if err != nil {
		j.say("%v", err)
		return notRun(err)
	}
	inherited, ok := j.inheritable()
	if !ok {
		return exitFailure
	}
	// The connection is the command's alone now: give it a blocking
	// socket, as it would get from connect(2). (exec's Go runtime set it
	// non-blocking, a flag the copy shares.)
	unix.SetNonblock(inherited, false)
	err = syscall.Exec(path, j.o.command, commandEnv(j.env(inherited)))
	unix.Close(inherited)
	j.say("%v", err)
	return notRun(err)
}

// inheritable returns a duplicate of the agent connection, without
// close-on-exec, for the command to inherit: the session, and the lock, end
// only when the last process holding it exits.
func (j *job) inheritable() (int, bool) {
	rc, err := j.c.SyscallConn()
	if err != nil {
		j.say("%v", err)
		return -1, false
	}
	// F_DUPFD leaves close-on-exec off. At 10 or above, the copy is clear of
	// the standard descriptors (even if exec was started with one closed) and
	// of the ones os/exec moves while setting them up in the child.
	inherited := -1
	if cerr := rc.Control(func(fd uintptr) { inherited, err = unix.FcntlInt(fd, unix.F_DUPFD, 10) }); cerr != nil {
		err = cerr
	}
	if err != nil {
		j.say("duplicating the agent connection: %v", err)
		return -1, false
	}
	return inherited, true
}

// env is what the command learns of its locks: LOCK_AGENT_NAME is NAME as
// given; LOCK_AGENT_FENCE and LOCK_AGENT_SLOT have one entry per name, in
// that order, joined by commas as the agent's reply joins them (so one
// name gives one number, as before several names existed).
func (j *job) env(fd int) []string {
	fences := make([]string, len(j.locks))
	slots := make([]string, len(j.locks))
	for i, l := range j.locks {
		fences[i] = strconv.FormatInt(l.Fence(), 10)
		slots[i] = strconv.Itoa(l.Slot())
	}
	env := []string{"LOCK_AGENT_NAME=" + j.o.name, "LOCK_AGENT_FENCE=" + strings.Join(fences, ","),
		"LOCK_AGENT_SLOT=" + strings.Join(slots, ",")}
	if fd >= 0 {
		env = append(env, "LOCK_AGENT_FD="+strconv.Itoa(fd))
	}
	return env
}

// commandEnv is exec's environment for the command, with ours in place of
// any LOCK_AGENT_ variable of the lock of an exec around this one: under
// -o, LOCK_AGENT_FD must not name a connection the command did not get.
func commandEnv(ours []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "LOCK_AGENT_NAME", "LOCK_AGENT_FENCE", "LOCK_AGENT_SLOT", "LOCK_AGENT_FD":
		default:
			env = append(env, kv)
		}
	}
	return append(env, ours...)
}

// anyLost returns a context that ends, with the first lock's cause, as soon
// as any of locks ends: exec never unlocks, so an end is a loss (LOST, or the
// connection gone). stop ends it when the job is done.
func anyLost(locks []*lockagent.Lock) (lost context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	for _, l := range locks {
		lc := l.Context()
		context.AfterFunc(lc, func() { cancel(context.Cause(lc)) })
	}
	return ctx, func() { cancel(nil) }
}

// anyWanted merges the locks' Wanted signals until done ends; nil (never
// ready) unless on.
func anyWanted(done context.Context, locks []*lockagent.Lock, on bool) <-chan struct{} {
	if !on {
		return nil
	}
	wanted := make(chan struct{}, 1)
	for _, l := range locks {
		go func() {
			for {
				select {
				case <-l.Wanted():
				case <-done.Done():
					return
				}
				select {
				case wanted <- struct{}{}:
				default: // one pending already: they coalesce
				}
			}
		}()
	}
	return wanted
}

// watch reports the command's stops and its exit. It reaps the command.
func watch(pid int, events chan<- event) {
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(pid, &ws, syscall.WUNTRACED, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil { // cannot happen for our own child; report it as gone
			events <- event{status: syscall.WaitStatus(exitFailure << 8)}
			return
		}
		if ws.Stopped() {
			events <- event{stopped: true}
			continue
		}
		events <- event{status: ws}
		return
	}
}

// foreground tells whether exec runs in the foreground of a terminal on
// its standard input.
func foreground() bool {
	pgrp, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	return err == nil && pgrp == syscall.Getpgrp()
}

func (j *job) signal(s syscall.Signal) {
	syscall.Kill(-j.pgid, s)
}

// takeTerminal gives the terminal back to exec's group.
func (j *job) takeTerminal() {
	if j.tty {
		unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, syscall.Getpgrp())
	}
}

// suspend follows a job stopped from the terminal (^Z): exec stops too, so
// the shell sees the job stopped, and hands the terminal back on resuming.
func (j *job) suspend() {
	if !j.tty {
		return // stopped by someone else: they will continue it
	}
	j.takeTerminal()
	syscall.Kill(0, syscall.SIGTSTP)
	// Continued (fg): the command's group gets the terminal and runs again.
	unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, j.pgid)
	syscall.Kill(-j.pgid, syscall.SIGCONT)
}

// exited ends exec with the command's status. Whatever the command left
// running in its group keeps the lock; otherwise exec UNLOCKs (a clean
// end, so no lock-delay follows: see clean), closes its copy of the
// connection and waits (briefly) until the agent has released the lock, so
// that a next exec of the same name right after this one finds it free.
func (j *job) exited(ws syscall.WaitStatus) int {
	code := ws.ExitStatus()
	if ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	// Background jobs hold the lock: never UNLOCK under them. (With -o
	// they never had the connection.)
	if err := syscall.Kill(-j.pgid, 0); !j.o.close && (err == nil || errors.Is(err, syscall.EPERM)) {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if j.clean(ws) {
		for _, l := range j.locks {
			l.Unlock(ctx) // an error: it was lost meanwhile, or the close below releases it
		}
	}
	j.c.Close()
	c, err := lockagent.Dial(ctx, j.o.socket)
	if err != nil {
		return code
	}
	defer c.Close()
	// The agent releases every name of the closed session at once; wait
	// for each in turn.
	for _, l := range j.locks {
		for {
			if ctx.Err() != nil {
				return code // still held: a process outside the group kept the connection
			}
			holders, err := c.Who(ctx, l.Name())
			if err != nil || !heldBy(holders, l.Fence()) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return code
}

// clean says whether the command's end is a clean end of the lock, which
// exec makes with UNLOCK: the command ended by itself (or by a signal,
// unless -delay asked for a delay after a killed command), and no process
// outside its group kept the agent connection (such a process holds the
// lock: closing exec's copy leaves it the lock, with its delay if it dies).
func (j *job) clean(ws syscall.WaitStatus) bool {
	if ws.Signaled() && j.o.delay.set {
		return false
	}
	if j.o.close {
		return true // exec's connection is the only one
	}
	held, err := othersHold(j.c)
	return err == nil && !held
}

func heldBy(holders []lockagent.Holder, fence int64) bool {
	for _, h := range holders {
		if h.Fence == fence {
			return true
		}
	}
	return false
}

// lost stops the whole job: SIGTERM to its group, SIGKILL to what is left
// of it after -kill-after. cause says which lock was lost, and why.
func (j *job) lost(cause error, events <-chan event) int {
	j.say("%v; stopping %s", cause, j.o.command[0])
	j.signal(syscall.SIGTERM)
	j.signal(syscall.SIGCONT) // a stopped job must run to act on it
	window := j.o.killWindow()
	deadline := time.After(window)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	exited := false
	for !exited || syscall.Kill(-j.pgid, 0) == nil {
		select {
		case e := <-events:
			exited = exited || !e.stopped
		case <-tick.C:
		case <-deadline:
			j.say("%s still running %v after SIGTERM; killing it", j.o.command[0], window)
			j.signal(syscall.SIGKILL)
			for !exited {
				exited = !(<-events).stopped
			}
			deadline = nil
		}
	}
	j.takeTerminal()
	return exitLost
}
