package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
	"github.com/lock-agent/lock-agent/quorum"
)

// TestStatusShowsTheShardsOfARealCluster: an agent whose one master is a
// Redis Cluster of three shards (real redis-server processes) shows, in
// STATUS as status reads it, each shard with the slots the cluster gave it,
// up, and status prints them.
func TestStatusShowsTheShardsOfARealCluster(t *testing.T) {
	cl := redistest.StartCluster(t, redistest.ClusterOptions{Shards: 3})
	cfg := agenttest.ConfigNoBootstrap(t, nil, time.Second)
	cfg.Masters = []quorum.MasterConfig{{Name: "c", Cluster: cl.Seeds()}}
	agenttest.Bootstrap(t, cfg)
	agenttest.Start(t, cfg)

	want := map[string]string{} // each primary's slots, as STATUS writes them
	for _, sh := range cl.Shards() {
		var ranges []string
		for _, r := range sh.Slots() {
			ranges = append(ranges, r.String())
		}
		want[sh.Primary.Addr] = strings.Join(ranges, ",")
	}
	s := awaitShards(t, cfg.Socket.Path, "every shard up", func(sh shard) bool { return sh.State == "up" })
	for _, sh := range s.Masters[0].Shards {
		if want[sh.Address] != sh.Slots || sh.QuarantinedSlots != 0 {
			t.Errorf("shard %+v; want the slots %q", sh, want[sh.Address])
		}
	}
	var stdout, stderr bytes.Buffer
	if code := statusCmd([]string{"-socket", cfg.Socket.Path}, &stdout, &stderr); code != exitOK ||
		!strings.Contains(stdout.String(), "  slots "+want[cl.Seeds()[1]]+" ") {
		t.Errorf("status: exit %d, printed:\n%s%s", code, stdout.String(), stderr.String())
	}
}

// awaitShards polls STATUS, as status reads it, until its one master has
// three shards that all satisfy ok, and returns that status.
func awaitShards(t *testing.T, socket, what string, ok func(shard) bool) *agentStatus {
	t.Helper()
	var s *agentStatus
	var last string
	lockagenttest.Eventually(t, 20*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		if s, err = queryStatus(ctx, socket); err != nil || len(s.Masters) != 1 || len(s.Masters[0].Shards) != 3 {
			last = fmt.Sprintf("%+v, %v", s, err)
			return false
		}
		last = fmt.Sprintf("%+v", s.Masters[0])
		for _, sh := range s.Masters[0].Shards {
			if !ok(sh) {
				return false
			}
		}
		return true
	}, "never %s: last %s", what, &last)
	return s
}
