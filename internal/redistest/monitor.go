package redistest

import (
	"bufio"
	"strconv"
	"strings"
	"time"
)

// Command is one command a server ran, as MONITOR shows it.
type Command struct {
	// At is when the server ran it, on the server's clock: the host's wall
	// clock, the one time.Now reads, to the microsecond.
	At     time.Time
	Script bool     // a script (EVAL) ran it
	Args   []string // the command and its arguments
}

// Monitor calls each, in one goroutine, with every command s runs from now
// on (MONITOR), in the order s runs them, until each returns false; it
// returns once s is monitored, and done is closed when each has returned
// false or the connection ended. Its times are the server's, so they order
// the server's commands against a test's time.Now however late the test
// reads them.
func (s *Server) Monitor(each func(Command) (more bool)) (done <-chan struct{}) {
	s.t.Helper()
	conn, err := s.dial()
	if err != nil {
		s.t.Fatalf("redistest: MONITOR: %v", err)
	}
	if _, err := conn.Write([]byte("*1\r\n$7\r\nMONITOR\r\n")); err != nil {
		s.t.Fatalf("redistest: MONITOR: %v", err)
	}
	r := bufio.NewReader(conn)
	if ok, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(ok, "+OK") {
		s.t.Fatalf("redistest: MONITOR: %q %v", ok, err)
	}
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		defer conn.Close()
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if c, ok := parseMonitor(strings.TrimRight(line, "\r\n")); ok && !each(c) {
				return
			}
		}
	}()
	s.t.Cleanup(func() { conn.Close(); <-ch })
	return ch
}

// parseMonitor reads one MONITOR line:
// +1795548309.500986 [0 lua] "SET" "k" "1"
func parseMonitor(line string) (Command, bool) {
	stamp, rest, ok := strings.Cut(strings.TrimPrefix(line, "+"), " [")
	if !ok {
		return Command{}, false
	}
	secs, micros, _ := strings.Cut(stamp, ".")
	sec, err1 := strconv.ParseInt(secs, 10, 64)
	us, err2 := strconv.ParseInt(micros, 10, 64)
	client, quoted, ok := strings.Cut(rest, "] ")
	if err1 != nil || err2 != nil || !ok {
		return Command{}, false
	}
	c := Command{At: time.Unix(sec, us*1000), Script: strings.HasSuffix(client, " lua")}
	for quoted != "" {
		// Each word is a double-quoted string with backslash escapes.
		end := 1
		for end < len(quoted) && quoted[end] != '"' {
			if quoted[end] == '\\' {
				end++
			}
			end++
		}
		word, err := strconv.Unquote(quoted[:min(end+1, len(quoted))])
		if err != nil {
			word = quoted[1:min(end, len(quoted))]
		}
		c.Args = append(c.Args, word)
		quoted = strings.TrimPrefix(quoted[min(end+1, len(quoted)):], " ")
	}
	return c, true
}
