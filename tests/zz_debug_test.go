package tests

import (
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

func TestZZDebug(t *testing.T) {
	a, _, clusters := twoAgentsOverClusters(t, 3, redistest.ClusterOptions{Shards: 3}, time.Second)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	name := "cl-restart"
	slot := redistest.SlotOf(name)
	marker := slotMarker(a.Config.Lock.KeyPrefix, slot)
	sh := clusters[0].Owner(slot)
	clusters[0].RestartEmpty(sh)
	for i := range 40 {
		r := c.Do("LOCK " + name + " wait=100ms")
		time.Sleep(100 * time.Millisecond)
		c.Do("UNLOCK " + name)
		v, err := sh.Primary.Array("HGETALL", marker)
		tm, _ := sh.Primary.Array("TIME")
		t.Logf("%d: %s; marker %q %v; time %v", i, r.Line, v, err, tm)
		time.Sleep(100 * time.Millisecond)
	}
	for _, d := range c.Do("STATUS").Data {
		t.Logf("%v", d)
	}
}
