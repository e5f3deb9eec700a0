package protocol

import (
	"strconv"
)

// Reply kinds: the word after the tag.
const (
	KindOK   = "OK"
	KindBusy = "BUSY"
	KindErr  = "ERR"
	KindData = "DATA"
)

// line builds one reply or push line, for the typed lines of replies.go
// and push.go only. The zero value is unusable; start with reply or push.
// Values must not contain spaces or newlines: callers pass names, numbers
// and words the agent itself validated.
type line struct {
	b []byte
}

// reply starts a line "TAG KIND".
func reply(tag, kind string) *line {
	l := &line{b: make([]byte, 0, 64)}
	l.b = append(l.b, tag...)
	l.b = append(l.b, ' ')
	l.b = append(l.b, kind...)
	return l
}

// push starts an unsolicited line "* KIND".
func push(kind string) *line { return reply("*", kind) }

// Word appends " w".
func (l *line) Word(w string) *line {
	l.b = append(l.b, ' ')
	l.b = append(l.b, w...)
	return l
}

// Str appends " key=value".
func (l *line) Str(key, value string) *line {
	l.b = append(l.b, ' ')
	l.b = append(l.b, key...)
	l.b = append(l.b, '=')
	l.b = append(l.b, value...)
	return l
}

// Int appends " key=n".
func (l *line) Int(key string, n int64) *line {
	l.b = append(l.b, ' ')
	l.b = append(l.b, key...)
	l.b = append(l.b, '=')
	l.b = strconv.AppendInt(l.b, n, 10)
	return l
}

// Bytes returns the line with its LF.
func (l *line) Bytes() []byte { return append(l.b, '\n') }

// String returns the line without its LF.
func (l *line) String() string { return string(l.b) }
