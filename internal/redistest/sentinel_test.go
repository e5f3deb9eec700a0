package redistest

import (
	"testing"
	"time"
)

// TestSentinelPromotesTheReplica: the helpers' pair and Sentinel fail over
// for real when the primary dies, and the promoted replica is a primary
// with the data it had.
func TestSentinelPromotesTheReplica(t *testing.T) {
	primary := StartWith(t)
	replica := StartReplica(t, primary, "")
	if _, err := primary.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	primary.awaitAcks(t)
	if v, err := replica.Do("GET", "k"); err != nil || v != "v" {
		t.Fatalf("the replica has k=%q (%v)", v, err)
	}
	began := time.Now()
	s := StartSentinel(t, MasterSet{Name: "m", Addr: primary.Addr})
	t.Logf("the Sentinel knew the pair after %v", time.Since(began))
	began = time.Now()
	primary.Stop()
	s.AwaitPrimary(20*time.Second, "m", replica.Addr)
	t.Logf("the replica was promoted %v after the primary died", time.Since(began))
	if v, err := replica.Do("GET", "k"); err != nil || v != "v" {
		t.Fatalf("the promoted replica has k=%q (%v)", v, err)
	}
}
