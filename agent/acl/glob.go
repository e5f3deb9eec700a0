package acl

import (
	"fmt"
	"path"
	"strings"
)

// Glob is a pattern for lock names, matched segment by segment (segments are
// split at '/'): a "*" within a segment matches any run of characters of that
// segment, and a segment that is "**" matches zero or more whole segments
// ("reports/**" matches reports, reports/a and reports/a/b). Every other
// character matches itself.
type Glob struct {
	Pattern string
	segs    []string
}

// ParseGlob checks a pattern: characters of lock names and '*', and "**"
// only as a whole segment.
func ParseGlob(pattern string) (Glob, error) {
	if pattern == "" {
		return Glob{}, fmt.Errorf("an empty glob matches no name")
	}
	for _, c := range pattern {
		if !nameChar(c) && c != '*' {
			return Glob{}, fmt.Errorf("glob %q: %q is not a character of lock names (A-Z a-z 0-9 . _ : / @ + -) or '*'", pattern, c)
		}
	}
	segs := strings.Split(pattern, "/")
	for _, s := range segs {
		if strings.Contains(s, "**") && s != "**" {
			return Glob{}, fmt.Errorf("glob %q: \"**\" must be a whole segment (\"a/**/b\"); within a segment use \"*\"", pattern)
		}
	}
	return Glob{Pattern: pattern, segs: segs}, nil
}

func nameChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._:/@+-", c)
}

// Match reports whether name matches the glob.
func (g Glob) Match(name string) bool {
	return matchSegments(g.segs, strings.Split(name, "/"))
}

// matchSegments is wildcard matching over segments, "**" being the
// wildcard: on a mismatch it backtracks to the last "**" and lets it take
// one more segment, which is enough (a later "**" covers what an earlier
// one could), so the work is at most len(pat)×len(name).
func matchSegments(pat, name []string) bool {
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pat) && pat[p] == "**":
			star, mark = p, n
			p++
		case p < len(pat) && segmentMatch(pat[p], name[n]):
			p++
			n++
		case star >= 0:
			p = star + 1
			mark++
			n = mark
		default:
			return false
		}
	}
	for p < len(pat) && pat[p] == "**" {
		p++
	}
	return p == len(pat)
}

// segmentMatch matches one segment. ParseGlob lets through no character
// path.Match treats specially but '*', so it cannot fail.
func segmentMatch(pattern, segment string) bool {
	ok, _ := path.Match(pattern, segment)
	return ok
}
