package protocol

import (
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary lines through the parser and every verb parser:
// none may panic, every error must map to a code, and a parsed request must
// hold only valid tags, names and owners.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"1 HELLO proto=1 client=demo",
		"2 LOCK jobs/nightly wait=5s",
		"3 LOCK jobs/nightly wait=0 owner=other",
		"4 UNLOCK jobs/nightly",
		"5 EXTEND a ttl=1500",
		"6 CANCEL 2",
		"7 HOLDS", "8 STATUS", "9 WHO a", "10 QUIT", "11 PING",
		"12 LOCK a b mode=shared limit=3 fair=true ttl=2m",
		"x LOCK a wait=forever\r",
		"- LOCK", "a/b PING", "", "   ", "1 LOCK a=b=c", "1 LOCK \xff",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		r, err := Parse(line)
		if err != nil {
			if CodeOf(err) == CodeInternal {
				t.Fatalf("error with no code: %v", err)
			}
			if r == nil || (r.Tag != NoTag && !validTag(r.Tag)) {
				t.Fatalf("bad tag on error: %+v", r)
			}
			return
		}
		if r == nil {
			if strings.TrimSpace(strings.TrimSuffix(line, "\r")) != "" {
				t.Fatalf("nil request for %q", line)
			}
			return
		}
		if !validTag(r.Tag) {
			t.Fatalf("accepted bad tag %q", r.Tag)
		}
		check := func(err error) {
			if err != nil && CodeOf(err) == CodeInternal {
				t.Fatalf("error with no code: %v", err)
			}
		}
		if l, err := ParseLock(r); err == nil {
			for _, n := range l.Names {
				if !ValidName(n) {
					t.Fatalf("accepted bad name %q", n)
				}
			}
			if !ValidOwner(l.Owner) || l.TTL < 0 || (l.Wait < 0 && l.Wait != Forever) {
				t.Fatalf("accepted bad lock %+v", l)
			}
		} else {
			check(err)
		}
		_, err = ParseUnlock(r)
		check(err)
		_, err = ParseExtend(r)
		check(err)
		_, err = ParseHello(r)
		check(err)
		_, err = ParseCancel(r)
		check(err)
		_, err = ParseWho(r)
		check(err)
		check(r.NoArgs())
	})
}
