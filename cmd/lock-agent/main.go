// Command lock-agent is the per-host lock daemon and its command line.
//
//	lock-agent run -config FILE | run -dev
//	lock-agent validate -config FILE
//	lock-agent bootstrap -config FILE
//	lock-agent settings -config FILE [-apply] [-min-quarantine D]
//	lock-agent exec [flags] NAME[,NAME...] [flags] [--] CMD [ARGS...] | -c STRING
//	lock-agent elect [flags] NAME [flags] [--] CMD [ARGS...] | -c STRING
//	lock-agent leader [-watch] [-json] NAME
//	lock-agent status [-json] | who [-json] NAME
//	lock-agent revoke [-agent A] [-reason WORD] NAME
//	lock-agent version [-json] | completion bash|zsh|fish | man
//
// Exit codes, the same for every command (cli.go): 0 ok, 1 a runtime
// failure, 2 an invalid config file, 64 bad usage (EX_USAGE).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/lock-agent/lock-agent/quorum/rules"

	"github.com/hashicorp/go-hclog"
	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/agent/config"
	"github.com/lock-agent/lock-agent/agent/systemd"
	"github.com/lock-agent/lock-agent/agent/telemetry"
	"github.com/lock-agent/lock-agent/internal/buildinfo"
	"github.com/lock-agent/lock-agent/internal/devmasters"
	"github.com/oklog/run"
)

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText())
		return exitUsage
	}
	switch args[0] {
	case "-version", "--version":
		return versionCmd(nil, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usageText())
		return exitOK
	}
	if c, ok := lookupCommand(args[0]); ok {
		return c.run(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "lock-agent: unknown command %q\n%s", args[0], usageText())
	return exitUsage
}

// versionCmd is `lock-agent version [-json]`: what internal/buildinfo says.
func versionCmd(args []string, stdout, stderr io.Writer) int {
	const usage = "lock-agent version [-json]"
	fs := newFlags("version", stderr)
	asJSON := fs.Bool("json", false, `print {"version", "commit", "goversion"}`)
	if code, done := parseFlags(fs, args, usage, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, fs, usage, "no arguments")
	}
	b := buildinfo.Get()
	if *asJSON {
		return printJSON(stdout, stderr, b)
	}
	fmt.Fprintf(stdout, "lock-agent %s (commit %s, %s, %s/%s)\n", b.Version, b.Commit, b.GoVersion, runtime.GOOS, runtime.GOARCH)
	return exitOK
}

// loadConfig is the one loader `run` and `validate` share. It returns the
// deprecated settings the file sets, which both name.
func loadConfig(path string) (agent.Config, []config.Warning, error) {
	return config.LoadWarned(path)
}

// logDeprecated logs each deprecated setting the config file sets, with
// what replaced it.
func logDeprecated(log hclog.Logger, warnings []config.Warning) {
	for _, w := range warnings {
		log.Warn("config: a deprecated setting is accepted and ignored", "setting", w.Setting,
			"at", fmt.Sprintf("%s:%d", w.File, w.Pos.Line), "instead", w.Instead)
	}
}

// printConfigError prints each error of a config on its own line with its file:line.
func printConfigError(w io.Writer, err error) {
	fmt.Fprintln(w, err)
}

// parseConfigFlags parses args with fs, which has the -config flag path,
// and loads that config, exactly as run does. done says the command ends
// with code: -h (0), wrong flags or no -config (usage printed, 64), an
// invalid config (its errors printed, 2). Each deprecated setting the
// file sets is named on stderr.
func parseConfigFlags(fs *flag.FlagSet, path *string, args []string, usage string, stdout, stderr io.Writer) (cfg agent.Config, code int, done bool) {
	if code, done := parseFlags(fs, args, usage, stdout, stderr); done {
		return agent.Config{}, code, true
	}
	switch {
	case *path == "":
		return agent.Config{}, usageError(stderr, fs, usage, "-config FILE is required"), true
	case fs.NArg() > 0:
		return agent.Config{}, usageError(stderr, fs, usage, fmt.Sprintf("unexpected argument %q", fs.Arg(0))), true
	}
	cfg, warnings, err := loadConfig(*path)
	if err != nil {
		printConfigError(stderr, err)
		return agent.Config{}, exitConfig, true
	}
	for _, w := range warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	return cfg, exitOK, false
}

func validateCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("validate", stderr)
	path := fs.String("config", "", "config file to check")
	cfg, code, done := parseConfigFlags(fs, path, args, "lock-agent validate -config FILE", stdout, stderr)
	if done {
		return code
	}
	n := len(cfg.Masters)
	fmt.Fprintf(stdout, "%s: valid (%s, quorum %d, %s, socket %s)\n", *path, countOf(n, "master", "masters"), rules.Majority(n), tolerance(n-rules.Majority(n)), cfg.Socket.Path)
	if note := mastersNote(n); note != "" {
		fmt.Fprintln(stdout, note)
	}
	return exitOK
}

func runCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("run", stderr)
	path := fs.String("config", "", "config file")
	dev := fs.Bool("dev", false, "run with three embedded masters and a socket in the user's runtime directory")
	const usage = "lock-agent run -config FILE | lock-agent run -dev"
	if code, done := parseFlags(fs, args, usage, stdout, stderr); done {
		return code
	}
	switch {
	case fs.NArg() > 0:
		return usageError(stderr, fs, usage, fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	case (*path == "") == !*dev:
		return usageError(stderr, fs, usage, "give -config FILE or -dev, one of them")
	}

	// A log write to a pipe whose reader is gone (run -dev | tee, and the
	// terminal closed) must fail, not kill the agent before it releases.
	signal.Ignore(syscall.SIGPIPE)
	// Caught from the start, so a SIGHUP while starting does not kill it
	// either; the signal actor below handles them once everything runs.
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)

	d := &daemon{path: *path, dev: *dev, agentDone: make(chan struct{}), stdout: stdout}
	var warnings []config.Warning
	if *dev {
		if err := d.addDevMasters(); err != nil {
			printError(stderr, "run", err)
			return exitFailure
		}
	} else {
		var err error
		if d.cfg, warnings, err = loadConfig(*path); err != nil {
			printConfigError(stderr, err)
			return exitConfig
		}
	}
	d.log = hclog.New(&hclog.LoggerOptions{Name: "lock-agent", Level: hclog.LevelFromString(d.cfg.Log.Level),
		JSONFormat: d.cfg.Log.Format == "json", Output: stderr})
	logDeprecated(d.log, warnings)

	var err error
	if d.agent, err = agent.New(d.cfg, d.log); err != nil {
		d.log.Error("cannot start", "error", err)
		return exitFailure
	}
	d.addAgent()
	d.addNotifier()
	if err := d.addTelemetry(); err != nil {
		d.log.Error("cannot serve metrics", "telemetry.prometheus_listen", d.cfg.Telemetry.PrometheusListen, "error", err)
		return exitFailure
	}
	d.addSignals(sig)
	if err := d.g.Run(); err != nil {
		d.log.Error("agent failed", "error", err)
		return exitFailure
	}
	d.log.Info("exiting")
	return exitOK
}

// daemon is `lock-agent run`: its components, each one actor of a
// run.Group, added in the order they start.
type daemon struct {
	path      string // the config file; "" with -dev
	dev       bool
	cfg       agent.Config
	log       hclog.Logger
	agent     *agent.Agent
	g         run.Group
	agentDone chan struct{} // closed when the agent has released everything
	stdout    io.Writer
}

// addDevMasters starts the embedded masters of -dev and takes the -dev
// config. They outlive the agent, which releases into them.
func (d *daemon) addDevMasters() error {
	masters, err := devmasters.Start(3)
	if err != nil {
		return err
	}
	d.cfg = agent.Dev(masters.Addrs())
	ctx, cancel := context.WithCancel(context.Background())
	d.g.Add(func() error { return masters.Run(ctx) }, func(error) {
		// Interrupts run one after another: wait in the background, so
		// the agent's own interrupt is reached.
		go func() {
			<-d.agentDone
			cancel()
		}()
	})
	return nil
}

// addAgent adds the agent: socket, sessions, watchdog and masters.
func (d *daemon) addAgent() {
	a := d.agent
	ctx, cancel := context.WithCancel(context.Background())
	d.g.Add(func() error {
		if d.dev {
			go func() {
				<-a.Ready()
				fmt.Fprintf(d.stdout, "lock-agent %s (dev mode) listening on %s\nexport LOCK_AGENT_SOCKET=%s\n", agent.Version, a.SocketPath(), a.SocketPath())
			}()
		}
		defer close(d.agentDone)
		return a.Run(ctx)
	}, func(error) {
		d.log.Info("stopping agent")
		cancel()
	})
}

// addNotifier adds systemd's (Type=notify): READY=1 once there is a
// quorum, STATUS=, WATCHDOG=1 while the agent's loops turn, STOPPING=1.
// Without NOTIFY_SOCKET it does nothing.
func (d *daemon) addNotifier() {
	n := systemd.NewNotifier(d.agent, d.cfg.Systemd.ReadyTimeout, d.log.Named("systemd"))
	ctx, cancel := context.WithCancel(context.Background())
	d.g.Add(func() error { return n.Run(ctx) }, func(error) { cancel() })
}

// addTelemetry adds the metrics listener, if the config has one: GET
// /metrics on its own listener, never the client socket.
func (d *daemon) addTelemetry() error {
	addr := d.cfg.Telemetry.PrometheusListen
	if addr == "" {
		return nil
	}
	srv, err := telemetry.ListenMetrics(addr, d.agent.MetricsHandler(), d.log.Named("telemetry"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.g.Add(func() error { return srv.Run(ctx) }, func(error) {
		d.log.Info("stopping metrics listener")
		cancel()
	})
	return nil
}

// addSignals adds the signal handler: the first signal stops the agent
// gracefully, a second exits at once; SIGHUP reloads the config file.
func (d *daemon) addSignals(sig chan os.Signal) {
	stop := make(chan struct{})
	d.g.Add(func() error {
		for {
			select {
			case s := <-sig:
				if s == syscall.SIGHUP {
					reload(d.log, d.path, &d.cfg, d.agent)
					continue
				}
				d.log.Info("received signal, stopping", "signal", s)
				go func() {
					for s := range sig {
						if s != syscall.SIGHUP {
							d.log.Warn("second signal: exiting at once", "signal", s)
							os.Exit(exitFailure)
						}
					}
				}()
			case <-stop:
			}
			return nil
		}
	}, func(error) { close(stop) })
}

// reload applies SIGHUP: the config file is read again with the same loader
// as at start (users and groups of access rules are looked up anew). What
// can change live (log level, limits, access rules) is applied, every other
// change is logged as waiting for a restart, and an invalid file changes
// nothing.
func reload(log hclog.Logger, path string, cfg *agent.Config, a *agent.Agent) {
	if path == "" {
		log.Info("SIGHUP: nothing to reload in dev mode")
		return
	}
	next, warnings, err := loadConfig(path)
	if err != nil {
		log.Error("SIGHUP: config not reloaded, keeping the running one", "file", path, "error", err)
		return
	}
	logDeprecated(log, warnings)
	changes := config.Changes(*cfg, next)
	if len(changes) == 0 {
		log.Info("SIGHUP: config reloaded, nothing changed", "file", path)
		return
	}
	log.SetLevel(hclog.LevelFromString(next.Log.Level))
	a.SetLive(next)
	*cfg = config.Applied(*cfg, next)
	for _, c := range changes {
		switch {
		case c.Live:
			log.Info("SIGHUP: applied", "setting", c.Setting, "old", c.Old, "new", c.New)
		case c.Old == "" && c.New == "":
			log.Warn("SIGHUP: changed in the file; takes effect on restart", "setting", c.Setting)
		default:
			log.Warn("SIGHUP: changed in the file; takes effect on restart", "setting", c.Setting, "old", c.Old, "new", c.New)
		}
	}
}
