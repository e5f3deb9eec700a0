//go:build lockorder

package lockorder

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"sync"
)

// Enabled says whether this build checks the lock order.
const Enabled = true

// Mutex is a sync.Mutex that checks the lock order (see the package doc).
type Mutex[R Rank] struct {
	mu sync.Mutex
}

// Lock checks that the goroutine holds no mutex of m's rank or a later
// one, then locks m.
func (m *Mutex[R]) Lock() {
	var r R
	rank, name := r.rank()
	g := goroutine()
	book.before(g, rank, name)
	m.mu.Lock()
	book.after(g, m, rank, name)
}

// Unlock unlocks m.
func (m *Mutex[R]) Unlock() {
	book.release(m)
	m.mu.Unlock()
}

type held struct {
	m    any
	rank int
	name string
}

// book is which mutexes each goroutine holds.
var book = ledger{held: map[uint64][]held{}, by: map[any]uint64{}, counts: map[string]uint64{}}

type ledger struct {
	mu     sync.Mutex
	held   map[uint64][]held // by goroutine
	by     map[any]uint64    // the goroutine that holds each held mutex
	counts map[string]uint64 // acquisitions by rank
}

func (l *ledger) before(g uint64, rank int, name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range l.held[g] {
		if h.rank >= rank {
			stack := make([]byte, 16<<10)
			stack = stack[:runtime.Stack(stack, false)]
			panic(fmt.Sprintf("lock order: %s taken while %s is held (order: session.mu, Manager.mu, queue.mu, Watchdog.mu, Outbox.mu)\n%s",
				name, h.name, stack))
		}
	}
}

func (l *ledger) after(g uint64, m any, rank int, name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held[g] = append(l.held[g], held{m, rank, name})
	l.by[m] = g
	l.counts[name]++
}

// release forgets m, wherever it was locked: a mutex may be unlocked by
// another goroutine than the one that locked it.
func (l *ledger) release(m any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g, ok := l.by[m]
	if !ok {
		return
	}
	delete(l.by, m)
	hs := l.held[g]
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i].m == m {
			hs = append(hs[:i], hs[i+1:]...)
			break
		}
	}
	if len(hs) == 0 {
		delete(l.held, g)
	} else {
		l.held[g] = hs
	}
}

// Acquisitions returns how many times each rank's mutexes were taken so far.
func Acquisitions() map[string]uint64 {
	book.mu.Lock()
	defer book.mu.Unlock()
	out := make(map[string]uint64, len(book.counts))
	for k, v := range book.counts {
		out[k] = v
	}
	return out
}

// goroutine is the calling goroutine's id, from its stack's first line
// ("goroutine 18 [running]:"): slow, and for this debug build only.
func goroutine() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	b = b[:bytes.IndexByte(b, ' ')]
	id, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		panic("lockorder: cannot read the goroutine id: " + err.Error())
	}
	return id
}
