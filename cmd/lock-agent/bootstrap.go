package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/quorum"
)

// bootstrapCmd marks the masters of a new deployment as new. A master the
// agent meets without an epoch marker may have lost its data, so it sits
// out a quarantine (one lease plus drift: see agent.Quarantine) before it
// votes; a brand-new cluster's masters look just the same, and
// bootstrapping them spares the wait. It records the config's cluster
// settings in them (see agent.ClusterSettings). Never run it on masters
// that served locks and lost their data: that is exactly what the
// quarantine protects.
func bootstrapCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("bootstrap", stderr)
	path := fs.String("config", "", "config file naming the masters")
	cfg, code, done := parseConfigFlags(fs, path, args, "lock-agent bootstrap -config FILE", stdout, stderr)
	if done {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	settings := agent.ClusterSettings(cfg.Lock)
	planted, err := quorum.BootstrapSettings(ctx, cfg.Lock.KeyPrefix, settings, cfg.Masters)
	for _, m := range cfg.Masters {
		switch {
		case slices.Contains(planted, m.Name):
			fmt.Fprintf(stdout, "%s: bootstrapped as a new master, recording the settings %s\n", m.Name, settings)
		default:
			fmt.Fprintf(stdout, "%s: left as it is (it has an epoch already, or could not be reached)\n", m.Name)
		}
	}
	if err != nil {
		printError(stderr, "bootstrap", err)
		return exitFailure
	}
	return exitOK
}
