package protocol

import (
	"strconv"
	"strings"
)

// Reply kinds: the word after the tag.
const (
	KindOK   = "OK"
	KindBusy = "BUSY"
	KindErr  = "ERR"
	KindData = "DATA"
)

// Line builds one reply or push line. The zero value is unusable; start with
// Reply or Push. Values must not contain spaces or newlines: callers pass
// names, numbers and words the agent itself validated.
type Line struct {
	b []byte
}

// Reply starts a line "TAG KIND".
func Reply(tag, kind string) *Line {
	l := &Line{b: make([]byte, 0, 64)}
	l.b = append(l.b, tag...)
	l.b = append(l.b, ' ')
	l.b = append(l.b, kind...)
	return l
}

// Push starts an unsolicited line "* KIND".
func Push(kind string) *Line { return Reply("*", kind) }

// Word appends " w".
func (l *Line) Word(w string) *Line {
	l.b = append(l.b, ' ')
	l.b = append(l.b, w...)
	return l
}

// Str appends " key=value".
func (l *Line) Str(key, value string) *Line {
	l.b = append(l.b, ' ')
	l.b = append(l.b, key...)
	l.b = append(l.b, '=')
	l.b = append(l.b, value...)
	return l
}

// Int appends " key=n".
func (l *Line) Int(key string, n int64) *Line {
	l.b = append(l.b, ' ')
	l.b = append(l.b, key...)
	l.b = append(l.b, '=')
	l.b = strconv.AppendInt(l.b, n, 10)
	return l
}

// Bytes returns the line with its LF.
func (l *Line) Bytes() []byte { return append(l.b, '\n') }

// String returns the line without its LF.
func (l *Line) String() string { return string(l.b) }

// ErrorLine formats "TAG ERR CODE text" for err.
func ErrorLine(tag string, err error) []byte {
	msg := strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, message(err))
	l := Reply(tag, KindErr).Word(string(CodeOf(err)))
	if msg != "" {
		l.Word(msg)
	}
	return l.Bytes()
}
