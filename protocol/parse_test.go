package protocol

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		line     string
		wantTag  string
		wantVerb string
		wantArgs int
		wantOpts int
		wantCode Code // "" for no error
	}{
		{"a plain request parses", "1 PING", "1", "PING", 0, 0, ""},
		{"the verb is case-insensitive", "a.b-c_d lock x", "a.b-c_d", "LOCK", 1, 0, ""},
		{"a trailing CR is ignored", "7 PING\r", "7", "PING", 0, 0, ""},
		{"many spaces separate words", "7   LOCK   a  wait=1s ", "7", "LOCK", 1, 1, ""},
		{"a word with = is an option", "9 LOCK a owner=x ttl=5s", "9", "LOCK", 1, 2, ""},
		{"an empty line is nothing", "", "", "", 0, 0, ""},
		{"a tag with a bad character answers with -", "a/b PING", NoTag, "", 0, 0, CodeBadRequest},
		{"a 33-character tag is too long", strings.Repeat("t", 33) + " PING", NoTag, "", 0, 0, CodeBadRequest},
		{"a tag with no verb is bad", "5", "5", "", 0, 0, CodeBadRequest},
		{"the same option twice is bad", "5 LOCK a wait=1 wait=2", "5", "LOCK", 1, 1, CodeBadRequest},
		{"an option with no key is bad", "5 LOCK a =1", "5", "LOCK", 1, 0, CodeBadRequest},
		{"a line over 4096 bytes is bad", "5 LOCK " + strings.Repeat("a", MaxLine), NoTag, "", 0, 0, CodeBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse(tt.line)
			if tt.wantCode != "" {
				if err == nil || CodeOf(err) != tt.wantCode {
					t.Fatalf("err = %v, want code %s", err, tt.wantCode)
				}
			} else if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if r == nil {
				if tt.wantTag != "" {
					t.Fatalf("got nil request")
				}
				return
			}
			if r.Tag != tt.wantTag {
				t.Errorf("tag = %q, want %q", r.Tag, tt.wantTag)
			}
			if err == nil && (r.Verb != tt.wantVerb || len(r.Args) != tt.wantArgs || len(r.Opts) != tt.wantOpts) {
				t.Errorf("got %+v", r)
			}
		})
	}
}

func TestParseLock(t *testing.T) {
	tests := []struct {
		name     string
		line     string
		want     Lock
		wantCode Code
	}{
		{"defaults are wait forever, watchdog, exclusive", "1 LOCK a", Lock{Names: []string{"a"}, Wait: Forever, Mode: Exclusive}, ""},
		{"milliseconds and Go durations both parse", "1 LOCK a wait=1500 ttl=2s", Lock{Names: []string{"a"}, Wait: 1500 * time.Millisecond, TTL: 2 * time.Second, Mode: Exclusive}, ""},
		{"wait=0 tries once", "1 LOCK a wait=0", Lock{Names: []string{"a"}, Wait: 0, Mode: Exclusive}, ""},
		{"wait=forever is forever", "1 LOCK a wait=forever", Lock{Names: []string{"a"}, Wait: Forever, Mode: Exclusive}, ""},
		{"every option parses", "1 LOCK a b owner=w-1 mode=shared limit=3 fair=true", Lock{Names: []string{"a", "b"}, Wait: Forever, Owner: "w-1", Mode: Shared, Limit: 3, Fair: true}, ""},
		{"ttl=forever is bad", "1 LOCK a ttl=forever", Lock{}, CodeBadRequest},
		{"ttl=0 is bad", "1 LOCK a ttl=0", Lock{}, CodeBadRequest},
		{"a negative wait is bad", "1 LOCK a wait=-1", Lock{}, CodeBadRequest},
		{"a garbage duration is bad", "1 LOCK a wait=soon", Lock{}, CodeBadRequest},
		{"an unknown option is bad", "1 LOCK a color=red", Lock{}, CodeBadRequest},
		{"a name with a space-free bad character is BAD_NAME", "1 LOCK a{b}", Lock{}, CodeBadName},
		{"a 201-byte name is BAD_NAME", "1 LOCK " + strings.Repeat("n", 201), Lock{}, CodeBadName},
		{"a missing name is bad", "1 LOCK wait=1", Lock{}, CodeBadRequest},
		{"a bad mode is bad", "1 LOCK a mode=weird", Lock{}, CodeBadRequest},
		{"limit=0 is bad", "1 LOCK a limit=0", Lock{}, CodeBadRequest},
		{"a bad owner is bad", "1 LOCK a owner=a/b", Lock{}, CodeBadRequest},
		{"the same name twice is bad", "1 LOCK a a", Lock{}, CodeBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse(tt.line)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseLock(r)
			if tt.wantCode != "" {
				if CodeOf(err) != tt.wantCode {
					t.Fatalf("err = %v, want %s", err, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got.Names, ",") != strings.Join(tt.want.Names, ",") || got.Wait != tt.want.Wait || got.TTL != tt.want.TTL ||
				got.Owner != tt.want.Owner || got.Mode != tt.want.Mode || got.Limit != tt.want.Limit || got.Fair != tt.want.Fair {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseOtherVerbs(t *testing.T) {
	tests := []struct {
		name     string
		line     string
		parse    func(*Request) error
		wantCode Code
	}{
		{"HELLO with proto=1 is fine", "1 HELLO proto=1 client=demo", func(r *Request) error { _, err := ParseHello(r); return err }, ""},
		{"HELLO with proto=2 is bad", "1 HELLO proto=2", func(r *Request) error { _, err := ParseHello(r); return err }, CodeBadRequest},
		{"UNLOCK with an owner is fine", "1 UNLOCK a owner=x", func(r *Request) error { _, err := ParseUnlock(r); return err }, ""},
		{"UNLOCK with no name is bad", "1 UNLOCK", func(r *Request) error { _, err := ParseUnlock(r); return err }, CodeBadRequest},
		{"EXTEND needs a ttl", "1 EXTEND a", func(r *Request) error { _, err := ParseExtend(r); return err }, CodeBadRequest},
		{"EXTEND takes one name", "1 EXTEND a b ttl=1s", func(r *Request) error { _, err := ParseExtend(r); return err }, CodeBadRequest},
		{"EXTEND with a ttl is fine", "1 EXTEND a ttl=1s", func(r *Request) error { _, err := ParseExtend(r); return err }, ""},
		{"CANCEL takes a tag", "1 CANCEL 7", func(r *Request) error { _, err := ParseCancel(r); return err }, ""},
		{"CANCEL of a bad tag is bad", "1 CANCEL a/b", func(r *Request) error { _, err := ParseCancel(r); return err }, CodeBadRequest},
		{"WHO of a bad name is BAD_NAME", "1 WHO a,b", func(r *Request) error { _, err := ParseWho(r); return err }, CodeBadName},
		{"PING with an argument is bad", "1 PING x", func(r *Request) error { return r.NoArgs() }, CodeBadRequest},
		{"STATUS with an option is bad", "1 STATUS a=b", func(r *Request) error { return r.NoArgs() }, CodeBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse(tt.line)
			if err != nil {
				t.Fatal(err)
			}
			err = tt.parse(r)
			if tt.wantCode == "" && err != nil {
				t.Fatalf("unexpected %v", err)
			}
			if tt.wantCode != "" && CodeOf(err) != tt.wantCode {
				t.Fatalf("err = %v, want %s", err, tt.wantCode)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	got := Reply("2", KindOK).Int("fence", 42).Int("validity", 15000).Int("count", 1).String()
	if got != "2 OK fence=42 validity=15000 count=1" {
		t.Fatalf("got %q", got)
	}
	if got := string(ErrorLine("3", Errorf(ErrNotHeld, "a is not held\nby you"))); got != "3 ERR NOT_HELD a is not held by you\n" {
		t.Fatalf("got %q", got)
	}
	if got := string(ErrorLine("3", errors.New("boom"))); got != "3 ERR INTERNAL boom\n" {
		t.Fatalf("got %q", got)
	}
	if got := Push("LOST").Word("a").Str("reason", "quorum").String(); got != "* LOST a reason=quorum" {
		t.Fatalf("got %q", got)
	}
}
