package tests

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
	goredislib "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// The ways a process can take a lock over the same masters that
// BenchmarkCompare sets side by side.

// locker is one client of a contender, used by one goroutine at a time.
type locker interface {
	// lock takes name, waiting for it until ctx ends: false if ctx ended
	// first, errRefused if the masters could not decide in time. ctx must
	// have a deadline.
	lock(ctx context.Context, name string) (bool, error)
	unlock(name string) error
	// try takes name if it is free, without waiting: false if it is
	// held, errRefused if the masters could not decide in time.
	try(name string) (bool, error)
}

// errRefused is a LOCK that the masters could not decide in time (the
// agent's NO_QUORUM, a master's error or timeout): a client tries again.
var errRefused = errors.New("refused")

// contender makes clients of one kind.
type contender struct {
	name string
	// client returns a new client. group (0 or 1) is the agent it talks to;
	// the clients of the floor and redsync all talk to the masters and
	// ignore it.
	client func(b *testing.B, group int) locker
	// parked returns once a LOCK sent to group's agent is waiting in it;
	// nil when the contender cannot tell (its waiters poll).
	parked func(b *testing.B, group int)
	// masters are the servers its clients' locks land on, read for what a
	// cycle costs them (see masterLoad); nil for a contender over masters
	// of its own (a Redis Cluster's), which are not read.
	masters costMasters
}

// Polling clients (the floor and redsync) back off between attempts for a
// jittered 5–50ms: the range agenttest.Config gives the agents for a split
// vote, and short enough for workload (redsync's default is 50–250ms).
const pollMin, pollMax = 5 * time.Millisecond, 50 * time.Millisecond

func pollDelay() time.Duration { return pollMin + rand.N(pollMax-pollMin+1) }

// sleepCtx sleeps for d, or until ctx ends: false if it ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// floorLease is the floor's lease: the agents' (compareLock, newInprocAgents).
const floorLease = 15 * time.Second

// floorRoundTimeout bounds each command to one master.
const floorRoundTimeout = time.Second

// compareAndDelete deletes a key only while it holds our token.
var compareAndDelete = rueidis.NewLuaScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// floor is the least any RedLock client must do: SET NX PX on every master
// in parallel, granted at the first majority of OKs; release by
// compare-and-delete where the SET may have landed. No retries beyond
// polling, no fences, no renewal, no validity arithmetic.
type floor struct {
	masters []rueidis.Client
	quorum  int
	run     string // this run's token prefix
	tokens  atomic.Uint64
}

func newFloor(b *testing.B, servers []*redistest.Server) *contender {
	f := &floor{quorum: len(servers)/2 + 1, run: strconv.FormatUint(rand.Uint64(), 36)}
	for _, s := range servers {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr}, ForceSingleClient: true, DisableCache: true})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		f.masters = append(f.masters, c)
	}
	return &contender{name: "floor", client: func(*testing.B, int) locker {
		return &floorClient{floor: f, held: map[string]*floorAttempt{}}
	}}
}

// floorAttempt is one SET fanned out: each master's answer arrives on its
// channel (nil: set; a Redis nil: not set, someone else's; else unknown).
type floorAttempt struct {
	key, token string
	answers    []chan error
}

// acquire fans SET out and returns as soon as a majority decided; the
// other answers are still collected for release. A refusal is one that a
// master's error decided.
func (f *floor) acquire(key string) (a *floorAttempt, granted bool, err error) {
	a = &floorAttempt{key: key, token: f.run + "-" + strconv.FormatUint(f.tokens.Add(1), 36)}
	votes := make(chan error, len(f.masters))
	for _, c := range f.masters {
		answer := make(chan error, 1)
		a.answers = append(a.answers, answer)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), floorRoundTimeout)
			defer cancel()
			err := c.Do(ctx, c.B().Set().Key(key).Value(a.token).Nx().PxMilliseconds(floorLease.Milliseconds()).Build()).Error()
			answer <- err
			votes <- err
		}()
	}
	yes, no := 0, 0
	var failed []error
	for yes < f.quorum && no <= len(f.masters)-f.quorum {
		switch vote := <-votes; {
		case vote == nil:
			yes++
		case rueidis.IsRedisNil(vote):
			no++
		default:
			no++
			failed = append(failed, vote)
		}
	}
	if yes < f.quorum && failed != nil {
		err = fmt.Errorf("%w: floor: %w", errRefused, errors.Join(failed...))
	}
	return a, yes >= f.quorum, err
}

// release deletes the attempt's key on every master where it may be ours,
// each after that master answered the SET, so that a late SET cannot land
// after its delete.
func (f *floor) release(a *floorAttempt) error {
	var wg sync.WaitGroup
	errs := make([]error, len(f.masters))
	for i, c := range f.masters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if rueidis.IsRedisNil(<-a.answers[i]) {
				return // not ours
			}
			ctx, cancel := context.WithTimeout(context.Background(), floorRoundTimeout)
			defer cancel()
			errs[i] = compareAndDelete.Exec(ctx, c, []string{a.key}, []string{a.token}).Error()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

type floorClient struct {
	floor *floor
	held  map[string]*floorAttempt
}

func (c *floorClient) lock(ctx context.Context, name string) (bool, error) {
	key := "floor:" + name
	for {
		a, ok, refused := c.floor.acquire(key)
		if ok {
			c.held[name] = a
			return true, nil
		}
		if err := c.floor.release(a); err != nil {
			return false, err
		}
		if refused != nil {
			return false, refused
		}
		if !sleepCtx(ctx, pollDelay()) {
			return false, nil
		}
	}
}

func (c *floorClient) try(name string) (bool, error) {
	a, ok, refused := c.floor.acquire("floor:" + name)
	if ok {
		c.held[name] = a
		return true, nil
	}
	if err := c.floor.release(a); err != nil {
		return false, err
	}
	return false, refused
}

func (c *floorClient) unlock(name string) error {
	a := c.held[name]
	if a == nil {
		return fmt.Errorf("floor: %s is not held", name)
	}
	delete(c.held, name)
	return c.floor.release(a)
}

// newRedsync is github.com/go-redsync/redsync/v4 over one go-redis v9
// client per master, with its defaults (8s expiry, 32 tries a Lock) but
// the polling delay above.
func newRedsync(b *testing.B, servers []*redistest.Server) *contender {
	var pools []redsyncredis.Pool
	for _, s := range servers {
		c := goredislib.NewClient(&goredislib.Options{Addr: s.Addr})
		b.Cleanup(func() { c.Close() })
		pools = append(pools, goredis.NewPool(c))
	}
	rs := redsync.New(pools...)
	return &contender{name: "redsync", client: func(*testing.B, int) locker {
		return &redsyncClient{rs: rs, held: map[string]*redsync.Mutex{}}
	}}
}

type redsyncClient struct {
	rs   *redsync.Redsync
	held map[string]*redsync.Mutex
}

func (c *redsyncClient) lock(ctx context.Context, name string) (bool, error) {
	m := c.rs.NewMutex("redsync:"+name, redsync.WithRetryDelayFunc(func(int) time.Duration { return pollDelay() }))
	// Lock gives up after its 32 tries; a waiter calls it again.
	for {
		err := m.LockContext(ctx)
		if err == nil {
			c.held[name] = m
			return true, nil
		}
		if ctx.Err() != nil {
			return false, nil
		}
		var redisErr *redsync.RedisError
		if errors.As(err, &redisErr) {
			return false, fmt.Errorf("%w: redsync: %w", errRefused, err)
		}
	}
}

func (c *redsyncClient) try(name string) (bool, error) {
	m := c.rs.NewMutex("redsync:" + name)
	err := m.TryLock()
	var redisErr *redsync.RedisError
	switch {
	case err == nil:
		c.held[name] = m
		return true, nil
	case errors.As(err, &redisErr):
		return false, fmt.Errorf("%w: redsync: %w", errRefused, err)
	}
	return false, nil // taken
}

func (c *redsyncClient) unlock(name string) error {
	m := c.held[name]
	if m == nil {
		return fmt.Errorf("redsync: %s is not held", name)
	}
	delete(c.held, name)
	if ok, err := m.Unlock(); !ok {
		return fmt.Errorf("redsync: unlock %s: %w", name, err)
	}
	return nil
}

// newAgentContender talks to the agent at socks[group] over its socket
// with lineClient.
func newAgentContender(name string, socks [2]string) *contender {
	return &contender{
		name: name,
		client: func(b *testing.B, group int) locker {
			return dialLine(b, socks[group])
		},
		parked: func(b *testing.B, group int) {
			c := dialLine(b, socks[group])
			defer c.conn.Close()
			var r string
			lockagenttest.Eventually(b, 5*time.Second, func() bool {
				var err error
				if r, err = c.do("STATUS", time.Second); err != nil {
					b.Fatal(err)
				}
				return strings.Contains(" "+r+" ", " waiters=1 ")
			}, "no waiter parked in 5s: %s", &r)
		},
	}
}

// lineClient is the least a client of the agent must do: write a tagged
// line, read lines until the reply with that tag. One request at a time.
type lineClient struct {
	conn net.Conn
	r    *bufio.Reader
	tag  int
}

func dialLine(b *testing.B, path string) *lineClient {
	conn, err := net.Dial("unix", path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return &lineClient{conn: conn, r: bufio.NewReader(conn)}
}

// do sends line and returns its final reply without the tag ("OK ...");
// it fails if none came within timeout.
func (c *lineClient) do(line string, timeout time.Duration) (string, error) {
	c.tag++
	tag := strconv.Itoa(c.tag) + " "
	c.conn.SetDeadline(time.Now().Add(timeout))
	if _, err := c.conn.Write([]byte(tag + line + "\n")); err != nil {
		return "", err
	}
	for {
		reply, err := c.r.ReadString('\n')
		if err != nil {
			return "", fmt.Errorf("agent: %s: %w", line, err)
		}
		if rest, ok := strings.CutPrefix(reply, tag); ok && !strings.HasPrefix(rest, "DATA ") {
			return strings.TrimSuffix(rest, "\n"), nil
		}
	}
}

func (c *lineClient) lock(ctx context.Context, name string) (bool, error) {
	deadline, _ := ctx.Deadline()
	wait := time.Until(deadline).Milliseconds()
	if wait <= 0 {
		return false, nil
	}
	return c.lockFor(name, wait)
}

func (c *lineClient) try(name string) (bool, error) { return c.lockFor(name, 0) }

// lockFor sends LOCK name wait=waitMillis and reads its answer as lock
// does.
func (c *lineClient) lockFor(name string, waitMillis int64) (bool, error) {
	r, err := c.do(fmt.Sprintf("LOCK %s wait=%d", name, waitMillis), time.Duration(waitMillis)*time.Millisecond+5*time.Second)
	switch {
	case err != nil:
		return false, err
	case strings.HasPrefix(r, "OK"):
		return true, nil
	case strings.HasPrefix(r, "BUSY"):
		return false, nil
	case strings.HasPrefix(r, "ERR NO_QUORUM"):
		return false, fmt.Errorf("%w: agent: %s", errRefused, r)
	}
	return false, fmt.Errorf("agent: LOCK %s: %s", name, r)
}

func (c *lineClient) unlock(name string) error {
	r, err := c.do("UNLOCK "+name, 10*time.Second)
	if err == nil && !strings.HasPrefix(r, "OK") {
		err = fmt.Errorf("agent: UNLOCK %s: %s", name, r)
	}
	return err
}
