package protocol

import (
	"errors"
	"reflect"
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
		{"defaults are wait forever, watchdog, exclusive", "1 LOCK a", Lock{Names: []string{"a"}, Wait: Forever, Mode: Exclusive, Delay: NoDelay}, ""},
		{"milliseconds and Go durations both parse", "1 LOCK a wait=1500 ttl=2s", Lock{Names: []string{"a"}, Wait: 1500 * time.Millisecond, TTL: 2 * time.Second, Mode: Exclusive, Delay: NoDelay}, ""},
		{"wait=0 tries once", "1 LOCK a wait=0", Lock{Names: []string{"a"}, Wait: 0, Mode: Exclusive, Delay: NoDelay}, ""},
		{"wait=forever is forever", "1 LOCK a wait=forever", Lock{Names: []string{"a"}, Wait: Forever, Mode: Exclusive, Delay: NoDelay}, ""},
		{"every option parses", "1 LOCK a b owner=w-1 mode=shared limit=3 fair=true", Lock{Names: []string{"a", "b"}, Wait: Forever, Owner: "w-1", Mode: Shared, Limit: 3, Fair: true, Delay: NoDelay}, ""},
		{"the coordination options parse", "1 LOCK a value=http://h:80/x%3Fa=1%20b notify=wanted delay=2s min_hold=1h ttl=720h",
			Lock{Names: []string{"a"}, Wait: Forever, Mode: Exclusive, Value: "http://h:80/x%3Fa=1%20b", NotifyWanted: true, Delay: 2 * time.Second, MinHold: time.Hour, TTL: 720 * time.Hour}, ""},
		{"an empty value and delay=0 are given, not absent", "1 LOCK a value= delay=0", Lock{Names: []string{"a"}, Wait: Forever, Mode: Exclusive, Delay: 0}, ""},
		{"a ttl over 30 days is bad", "1 LOCK a ttl=721h", Lock{}, CodeBadRequest},
		{"a delay over 5 minutes is bad", "1 LOCK a delay=301s", Lock{}, CodeBadRequest},
		{"a min_hold over a day is bad", "1 LOCK a min_hold=25h", Lock{}, CodeBadRequest},
		{"a negative min_hold is bad", "1 LOCK a min_hold=-1s", Lock{}, CodeBadRequest},
		{"notify other than wanted is bad", "1 LOCK a notify=lost", Lock{}, CodeBadRequest},
		{"a value with a bad byte is bad", "1 LOCK a value=a\"b", Lock{}, CodeBadRequest},
		{"a value over 512 bytes is bad", "1 LOCK a value=" + strings.Repeat("v", 513), Lock{}, CodeBadRequest},
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
			if !reflect.DeepEqual(got, tt.want) {
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
		{"SET with a value is fine", "1 SET a value=x:1 owner=o", func(r *Request) error { _, err := ParseSet(r); return err }, ""},
		{"SET with an empty value is fine", "1 SET a value=", func(r *Request) error { _, err := ParseSet(r); return err }, ""},
		{"SET needs a value", "1 SET a", func(r *Request) error { _, err := ParseSet(r); return err }, CodeBadRequest},
		{"SET of a bad value is bad", "1 SET a value=a{b}", func(r *Request) error { _, err := ParseSet(r); return err }, CodeBadRequest},
		{"SET takes one name", "1 SET a b value=x", func(r *Request) error { _, err := ParseSet(r); return err }, CodeBadRequest},
		{"OBSERVE takes one name", "1 OBSERVE a b", func(r *Request) error { _, err := ParseObserve(r); return err }, CodeBadRequest},
		{"OBSERVE of a bad name is BAD_NAME", "1 OBSERVE a{b}", func(r *Request) error { _, err := ParseObserve(r); return err }, CodeBadName},
		{"REVOKE with an agent and a reason is fine", "1 REVOKE a agent=web-7 reason=stuck", func(r *Request) error { _, err := ParseRevoke(r); return err }, ""},
		{"REVOKE of a bad reason is bad", "1 REVOKE a reason=Not-A-Word", func(r *Request) error { _, err := ParseRevoke(r); return err }, CodeBadRequest},
		{"REVOKE of an empty agent is bad", "1 REVOKE a agent=", func(r *Request) error { _, err := ParseRevoke(r); return err }, CodeBadRequest},
		{"CHECK with a fence is fine", "1 CHECK a fence=17", func(r *Request) error { _, err := ParseCheck(r); return err }, ""},
		{"CHECK needs a fence", "1 CHECK a", func(r *Request) error { _, err := ParseCheck(r); return err }, CodeBadRequest},
		{"CHECK of fence=0 is bad", "1 CHECK a fence=0", func(r *Request) error { _, err := ParseCheck(r); return err }, CodeBadRequest},
		{"CHECK of a negative fence is bad", "1 CHECK a fence=-3", func(r *Request) error { _, err := ParseCheck(r); return err }, CodeBadRequest},
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
	got := reply("2", KindOK).Int("fence", 42).Int("validity", 15000).Int("count", 1).String()
	if got != "2 OK fence=42 validity=15000 count=1" {
		t.Fatalf("got %q", got)
	}
	if got := string(Failed{Tag: "3", Err: Errorf(ErrNotHeld, "a is not held\nby you")}.Bytes()); got != "3 ERR NOT_HELD a is not held by you\n" {
		t.Fatalf("got %q", got)
	}
	if got := string(Failed{Tag: "3", Err: errors.New("boom")}.Bytes()); got != "3 ERR INTERNAL boom\n" {
		t.Fatalf("got %q", got)
	}
	if got := push("LOST").Word("a").Str("reason", "quorum").String(); got != "* LOST a reason=quorum" {
		t.Fatalf("got %q", got)
	}
}
