package agent_test

import (
	"bufio"
	"net"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/lockorder"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// BenchmarkUncontendedLockUnlock is what one LOCK and UNLOCK of a name
// nobody else wants costs the agent, on one session with three masters:
// goroutines started, channels made, and (with -tags lockorder) mutexes of
// agent and renewal taken, per LOCK+UNLOCK. The client is a bare socket
// (no goroutine or channel of its own); the agent's background loops add a
// few per second, which b.N spreads thin. Run it as
//
//	go test -tags lockorder -run '^$' -bench UncontendedLockUnlock -benchtime 2000x ./agent/
func BenchmarkUncontendedLockUnlock(b *testing.B) {
	runtime.MemProfileRate = 1 // every channel made is in the profile
	a := agenttest.Start(b, agenttest.Config(b, redistest.Start(b, 3), 3*time.Second))
	nc, err := net.Dial("unix", a.Config.Socket.Path)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	do := func(line string) {
		if _, err := nc.Write([]byte(line + "\n")); err != nil {
			b.Fatal(err)
		}
		reply, err := r.ReadString('\n')
		if err != nil || !strings.Contains(reply, " OK") {
			b.Fatalf("%s: %q %v", line, reply, err)
		}
	}
	lockUnlock := func() {
		do("1 LOCK cost")
		do("2 UNLOCK cost")
	}
	for range 10 { // the masters' connections and the name's first round
		lockUnlock()
	}
	goroutines, chans, mutexes := goroutinesCreated(), chansMade(), lockorder.Acquisitions()
	b.ResetTimer()
	for range b.N {
		lockUnlock()
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(goroutinesCreated()-goroutines)/n, "goroutines/op")
	b.ReportMetric(float64(chansMade()-chans)/n, "chans/op")
	if lockorder.Enabled {
		total := 0.0
		for rank, c := range lockorder.Acquisitions() {
			taken := float64(c-mutexes[rank]) / n
			b.ReportMetric(taken, rank+"/op")
			total += taken
		}
		b.ReportMetric(total, "mutexes/op")
	}
}

func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// chansMade counts the channels made so far, from the allocation profile.
func chansMade() int64 {
	for range 3 { // the profile is published up to two cycles late
		runtime.GC()
	}
	var records []runtime.MemProfileRecord
	for {
		n, ok := runtime.MemProfile(records, true)
		if ok {
			records = records[:n]
			break
		}
		records = make([]runtime.MemProfileRecord, n+100)
	}
	var made int64
	for _, rec := range records {
		frames := runtime.CallersFrames(rec.Stack())
		for {
			f, more := frames.Next()
			if f.Function == "runtime.makechan" {
				made += rec.AllocObjects
				break
			}
			if !more {
				break
			}
		}
	}
	return made
}
