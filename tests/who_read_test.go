package tests

import (
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/faultproxy"
)

// TestAWhoThatHearsTwoMastersShowsAHolderOneOfThemRecords is issue 31's
// WHO that missed a holder, made deterministic: agent a's requests to
// master 2 are held on their way (a loaded link: its grant lands there
// late), and agent b's link to master 0 is black-holed (a master that
// does not answer b in time). a's LOCK is granted by masters 0 and 1 and
// answered; b's WHO right after hears masters 1 (the record) and 2 (none
// yet). A record on a majority is on at least one master of any majority,
// so one of two answers, with the third missing, does not rule it out:
// b must show the holder (it answered OK n=0 with no DATA line, counting
// the missing master as one without the record). After the UNLOCK, whose
// release lands on masters 0 and 1, the same read shows no holder.
func TestAWhoThatHearsTwoMastersShowsAHolderOneOfThemRecords(t *testing.T) {
	t.Parallel() // its own masters and agents; judges no latency
	c := newPartitionCluster(t, 3*time.Second, 3*time.Second)
	c.awaitHealed()
	a := agenttest.Dial(t, c.agents[0].Config.Socket.Path)
	b := agenttest.Dial(t, c.agents[1].Config.Socket.Path)
	c.links[0][2].SetMode(faultproxy.BlackHoleToServer)
	c.links[1][0].SetMode(faultproxy.BlackHole)
	granted := a.Do("LOCK who/late")
	if granted.Kind != "OK" {
		t.Fatalf("LOCK with masters 0 and 1: %s", granted.Line)
	}
	w := b.Do("WHO who/late")
	if w.Kind != "OK" || w.Int("n") != 1 || len(w.Data) != 1 || w.Data[0]["fence"] != granted.Fields["fence"] || w.Data[0]["agent"] != "host-0" {
		t.Fatalf("WHO from the other agent right after the grant (fence %s), hearing masters 1 and 2: %q %v, want its holder",
			granted.Fields["fence"], w.Line, w.Data)
	}
	if r := a.Do("UNLOCK who/late"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if w := b.Do("WHO who/late"); w.Kind != "OK" || w.Int("n") != 0 || len(w.Data) != 0 {
		t.Fatalf("WHO after the release landed on masters 0 and 1: %q %v, want no holder", w.Line, w.Data)
	}
}
