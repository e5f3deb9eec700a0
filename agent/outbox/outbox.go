// Package outbox holds a session's lines waiting for its connection: replies
// that wait while the client reads slowly, answers and pushes that never
// wait, and a writer goroutine only while there is something to write.
package outbox

import (
	"net"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/lock-agent/lock-agent/internal/lockorder"
)

// Queue is how many lines may wait for the writer. Replies beyond it
// wait (the agent stops reading that client's requests: backpressure);
// an unsolicited push beyond it closes the session, since a client that
// cannot be told its lock is lost must not go on holding anything.
const Queue = 4096

// CloseFlush bounds how long a closing session's last lines may take to
// write: a client that stopped reading cannot hold up its own cleanup.
const CloseFlush = 2 * time.Second

// Outbox is a session's lines waiting for the connection. A writer
// goroutine runs only while there is something to write: an idle session
// costs neither a goroutine nor a buffer for it. Its three ways in differ
// in what they do when the client reads slowly:
//   - Send (a reply on the request path) waits while the queue is full;
//   - Reply (the answer of a request another goroutine finished) never waits;
//   - Push (an unsolicited line) never waits, and closes the connection
//     instead when the queue is full.
//
// A line that finds nothing queued and no writer running is written at
// once, in the caller's goroutine, as far as the socket takes it without
// waiting (see writeNowLocked).
type Outbox struct {
	conn *net.UnixConn
	raw  syscall.RawConn // conn's descriptor, for writes that must not wait (see writeNow)
	log  hclog.Logger

	mu      lockorder.Mutex[lockorder.Outbox] // taken last of all: see the lock order at agent's session.mu
	lines   [][]byte
	writing bool          // a writer goroutine is running
	closing bool          // close the connection once every line is written
	room    chan struct{} // closed when the writer takes lines; a full queue's replies wait on it
	done    bool          // the connection is closed for writing: lines are dropped
	dead    chan struct{} // closed when done becomes true

	// Lines are numbered as they come: taken is how many came, written how
	// many the socket took whole. Every line in lines is one of the last
	// taken-written. wrote is closed (and replaced) when written grows.
	taken, written uint64
	wrote          chan struct{}
}

// New is an outbox writing to conn.
func New(conn *net.UnixConn, log hclog.Logger) (*Outbox, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &Outbox{conn: conn, raw: raw, log: log, dead: make(chan struct{})}, nil
}

// Send queues a reply line for the writer, waiting while the queue is
// full. It must not be called with the session's mu held.
func (o *Outbox) Send(line []byte) {
	o.mu.Lock()
	if o.writeNowLocked(line) {
		return
	}
	o.awaitRoomLocked()
	o.queueLocked(line)
	o.mu.Unlock()
}

// AwaitRoom waits while the queue is full before the next request is read.
// The answers of waits (Reply) never wait, and a wait ends as soon as its
// answer is queued: without this, a client that reads nothing could have
// the agent queue answers without bound, one LOCK ... wait=0 after another.
func (o *Outbox) AwaitRoom() {
	o.mu.Lock()
	o.awaitRoomLocked()
	o.mu.Unlock()
}

// awaitRoomLocked waits until the queue has room or the connection is
// Closed for writing. o.mu is held, and let go while it waits.
func (o *Outbox) awaitRoomLocked() {
	for len(o.lines) >= Queue && !o.done {
		if o.room == nil {
			o.room = make(chan struct{})
		}
		room := o.room
		o.mu.Unlock()
		<-room
		o.mu.Lock()
	}
}

// Reply queues the answer of a request that another goroutine finished (a
// waiting LOCK granted by its name's contender, or ended by its timer),
// without ever waiting: that goroutine serves other sessions too. The lines
// it may add beyond Queue are bounded by the session's waits
// (max_holds_per_session): no request is read while the queue is full (see
// AwaitRoom).
func (o *Outbox) Reply(line []byte) {
	o.mu.Lock()
	if o.writeNowLocked(line) {
		return
	}
	o.queueLocked(line)
	o.mu.Unlock()
}

// Push sends an unsolicited line without ever waiting: it is called from
// the watchdog and the shutdown path, which serve every session. A session
// whose queue is full is closed instead. It returns the line's number, for
// AwaitWritten.
func (o *Outbox) Push(line []byte) (seq uint64) {
	o.mu.Lock()
	seq = o.taken + 1
	if o.writeNowLocked(line) {
		return seq
	}
	if len(o.lines) >= Queue && !o.done {
		o.mu.Unlock()
		o.log.Warn("client is not reading; closing the session", "queued", Queue)
		o.conn.Close()
		return seq
	}
	o.queueLocked(line)
	o.mu.Unlock()
	return seq
}

// AwaitWritten waits until the socket took line seq (see Push) whole, the
// connection is closed for writing, or until: it says whether the line was
// written. A LOST line that the client's socket took is the client's to
// read, whatever its process is doing; one still queued is not.
func (o *Outbox) AwaitWritten(seq uint64, until <-chan time.Time) bool {
	o.mu.Lock()
	for o.written < seq && !o.done {
		if o.wrote == nil {
			o.wrote = make(chan struct{})
		}
		wrote := o.wrote
		o.mu.Unlock()
		select {
		case <-wrote:
		case <-o.dead:
		case <-until:
			return false
		}
		o.mu.Lock()
	}
	ok := o.written >= seq
	o.mu.Unlock()
	return ok
}

// wroteLocked counts n more lines written whole. o.mu is held.
func (o *Outbox) wroteLocked(n int) {
	o.written += uint64(n)
	if o.wrote != nil {
		close(o.wrote)
		o.wrote = nil
	}
}

// writeNowLocked writes line at once if nothing is queued and no writer
// runs, saving a writer goroutine's start and wake-up per reply; whatever
// the socket does not take at once is left to a writer, so the caller never
// waits for the client. It says whether it took line; it lets o.mu go if it
// did, and keeps it held if not.
func (o *Outbox) writeNowLocked(line []byte) bool {
	if o.writing || o.done || len(o.lines) > 0 {
		return false
	}
	o.writing = true
	o.taken++
	o.mu.Unlock()
	n, err := o.writeNow(line)
	if err != nil {
		o.conn.Close()
		o.writeDone()
		return true
	}
	o.mu.Lock()
	if n < len(line) {
		o.lines = append([][]byte{line[n:]}, o.lines...)
	} else {
		o.wroteLocked(1)
	}
	if len(o.lines) == 0 && !o.closing {
		o.writing = false
	} else {
		go o.write() // lines came meanwhile, or the socket is full: a writer finishes
	}
	o.mu.Unlock()
	return true
}

// writeNow writes what the socket takes of b without waiting for it to take
// more: n < len(b) when its buffer is full.
func (o *Outbox) writeNow(b []byte) (n int, err error) {
	cerr := o.raw.Write(func(fd uintptr) bool {
		for n < len(b) {
			m, werr := syscall.Write(int(fd), b[n:])
			if werr == syscall.EINTR {
				continue
			}
			if werr == syscall.EAGAIN {
				return true
			}
			if werr != nil {
				err = werr
				return true
			}
			n += m
		}
		return true
	})
	if err == nil {
		err = cerr
	}
	return n, err
}

// queueLocked adds a line and makes sure a writer runs. o.mu is held.
func (o *Outbox) queueLocked(line []byte) {
	if o.done {
		return
	}
	o.taken++
	o.lines = append(o.lines, line)
	if !o.writing {
		o.writing = true
		go o.write()
	}
}

// FlushAndClose has the writer write what is queued, then close the
// connection; a client that does not read gets CloseFlush to take it.
func (o *Outbox) FlushAndClose() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done || o.closing {
		return
	}
	o.closing = true
	o.conn.SetWriteDeadline(time.Now().Add(CloseFlush))
	if !o.writing {
		o.writing = true
		go o.write()
	}
}

// Closed is closed once the connection is closed for writing.
func (o *Outbox) Closed() <-chan struct{} { return o.dead }

// Queued is how many lines wait for the writer.
func (o *Outbox) Queued() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.lines)
}

// write sends queued lines, as many per system call as are waiting, and
// returns when there are none left.
func (o *Outbox) write() {
	var buf []byte
	sent := 0 // lines the last write took, counted under the next lock
	for {
		o.mu.Lock()
		if sent > 0 {
			o.wroteLocked(sent)
		}
		n := 0
		buf = buf[:0]
		for n < len(o.lines) && len(buf) < 64<<10 {
			buf = append(buf, o.lines[n]...)
			n++
		}
		rest := copy(o.lines, o.lines[n:])
		clear(o.lines[rest:])
		o.lines = o.lines[:rest]
		if rest == 0 && cap(o.lines) > 64 {
			o.lines = nil // an idle session does not keep a burst's queue
		}
		if n > 0 && o.room != nil {
			close(o.room)
			o.room = nil
		}
		if n == 0 {
			closing := o.closing
			if !closing {
				o.writing = false
			}
			o.mu.Unlock()
			if closing {
				o.conn.Close()
				o.writeDone()
			}
			return
		}
		o.mu.Unlock()
		if _, err := o.conn.Write(buf); err != nil {
			o.conn.Close()
			o.writeDone()
			return
		}
		sent = n
	}
}

// writeDone marks the connection closed for writing: later lines are dropped.
func (o *Outbox) writeDone() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.writing = false
	if o.done {
		return
	}
	o.done = true
	o.lines = nil
	if o.room != nil {
		close(o.room)
		o.room = nil
	}
	close(o.dead)
}

// Open says whether o neither closes nor is closed: no FlushAndClose yet,
// and the connection still takes lines.
func (o *Outbox) Open() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return !o.closing && !o.done
}
