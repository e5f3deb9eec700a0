package protocol

import (
	"errors"
	"testing"
	"time"
)

// TestRepliesAreFormattedAsTheProtocolSays: each typed reply as
// docs/protocol.md writes it (the examples under each verb, or its grammar
// where the example is of an older agent), each optional field both ways.
func TestRepliesAreFormattedAsTheProtocolSays(t *testing.T) {
	const settings = "lease=15s;drift=0.01;quarantine=15.26s;cohort_hold=20ms;cohort_handoffs=128"
	for _, tc := range []struct {
		name  string
		reply Message
		want  string
	}{
		{"PING's OK", Done{Tag: "10"}, "10 OK"},
		{"a LOCK not granted in its wait", Busy{Tag: "3"}, "3 BUSY"},
		{"an error with a code and text", Failed{Tag: "2", Err: Errorf(ErrBadRequest, "tag 2 already names a waiting LOCK")},
			"2 ERR BAD_REQUEST tag 2 already names a waiting LOCK"},
		{"an error's line breaks made spaces", Failed{Tag: "3", Err: Errorf(ErrNotHeld, "a is not held\r\nby you")},
			"3 ERR NOT_HELD a is not held  by you"},
		{"an error of no code of ours", Failed{Tag: "3", Err: errors.New("boom")}, "3 ERR INTERNAL boom"},
		{"HELLO", Welcome{Tag: "1", Agent: "0.1.0", Session: 1, Masters: 3, Quorum: 2},
			"1 OK proto=1 agent=0.1.0 session=1 masters=3 quorum=2"},
		{"a lock's grant", Granted{Tag: "2", Fence: 1795548014000000, Validity: 14846 * time.Millisecond, Count: 1, Limit: 1},
			"2 OK fence=1795548014000000 validity=14846 count=1"},
		{"a re-entry's grant", Granted{Tag: "4", Fence: 1795548014000000, Validity: 13946 * time.Millisecond, Count: 2},
			"4 OK fence=1795548014000000 validity=13946 count=2"},
		{"a semaphore's grant says its slot", Granted{Tag: "5", Fence: 7, Validity: 14 * time.Second, Count: 1, Limit: 3, Slot: 2},
			"5 OK fence=7 validity=14000 count=1 slot=2"},
		{"a multi-lock's grant", GrantedAll{Tag: "14", Fences: []int64{1795548053000000, 1795548037000002, 1795548053000000},
			Validity: 14847 * time.Millisecond, Counts: []int{1, 1, 1}, Slots: []int{0, 0, 0}, Limit: 1},
			"14 OK fence=1795548053000000,1795548037000002,1795548053000000 validity=14847 count=1,1,1"},
		{"a multi-lock of a semaphore's names says their slots", GrantedAll{Tag: "1", Fences: []int64{5, 6},
			Validity: time.Second, Counts: []int{1, 2}, Slots: []int{0, 2}, Limit: 3},
			"1 OK fence=5,6 validity=1000 count=1,2 slot=0,2"},
		{"UNLOCK of one name", Released{Tag: "9", Counts: []int{1}}, "9 OK count=1"},
		{"UNLOCK of several", Released{Tag: "9", Counts: []int{0, 2}}, "9 OK count=0,2"},
		{"EXTEND", Extended{Tag: "2", Validity: 14843 * time.Millisecond}, "2 OK validity=14843"},
		{"HOLDS's end", Counted{Tag: "10", N: 3}, "10 OK n=3"},
		{"CHECK of a current fence", Checked{Tag: "5", Current: true}, "5 OK current=true"},
		{"CHECK of an old fence", Checked{Tag: "5"}, "5 OK current=false"},
		{"HOLDS's line of a lock", HoldInfo{Tag: "10", Name: "cfg", Fence: 1795548047000000, Count: 1, Mode: "shared",
			Validity: 14038 * time.Millisecond, Limit: 1},
			"10 DATA name=cfg owner= fence=1795548047000000 count=1 mode=shared validity=14038"},
		{"HOLDS's line of a semaphore", HoldInfo{Tag: "10", Name: "pool", Fence: 1795548048000000, Count: 2, Mode: "exclusive",
			Validity: 14038 * time.Millisecond, Limit: 3, Slot: 1},
			"10 DATA name=pool owner= fence=1795548048000000 count=2 mode=exclusive validity=14038 limit=3 slot=1"},
		{"WHO's holder", Holder{Tag: "2", Agent: "vm", PID: 29243, Mode: "exclusive", Fence: 1795548235000000, Since: 1795548235824, Limit: 1},
			"2 DATA agent=vm pid=29243 uid=0 owner= mode=exclusive fence=1795548235000000 since=1795548235824"},
		{"WHO's holder of a slot, with a value", Holder{Tag: "2", Agent: "a", PID: 1, UID: 1000, Owner: "w", Mode: "exclusive",
			Fence: 9, Since: 10, Limit: 3, Slot: 2, Value: "10.0.0.6:5432"},
			"2 DATA agent=a pid=1 uid=1000 owner=w mode=exclusive fence=9 since=10 limit=3 slot=2 value=10.0.0.6:5432"},
		{"WHO's delay", Delayed{Tag: "2", Until: 1795548236102}, "2 DATA delayed_until=1795548236102"},
		{"WHO's waiting agent", Waiting{Tag: "2", Agent: "db2", Count: 3, Since: 1795548235990},
			"2 DATA waiting agent=db2 count=3 since=1795548235990"},
		{"WHO's end with waiters and a queue", Who{Tag: "2", N: 1, Waiting: 4, WaitingKnown: true, Queued: 1},
			"2 OK n=1 waiting=4 queued=1"},
		{"WHO's end with none waiting", Who{Tag: "6", N: 1, WaitingKnown: true}, "6 OK n=1 waiting=0"},
		{"WHO's end when no majority said who waits", Who{Tag: "6", N: 0, Cached: []string{"a", "b"}},
			"6 OK n=0 cached=a,b"},
		{"STATUS's master that votes", Master{Tag: "11", Name: "dev1", Address: "127.0.0.1:40439", State: "up", Settings: settings},
			"11 DATA master=dev1 address=127.0.0.1:40439 state=up settings=" + settings},
		{"STATUS's master that is down", Master{Tag: "3", Name: "a", Address: "127.0.0.1:48157", State: "down", Reason: "timed_out", Settings: settings},
			"3 DATA master=a address=127.0.0.1:48157 state=down reason=timed_out settings=" + settings},
		{"STATUS's master that is down for no reason it can word says so, empty", Master{Tag: "3", Name: "a", Address: "h:1", State: "down"},
			"3 DATA master=a address=h:1 state=down reason="},
		{"STATUS's quarantined master", Master{Tag: "1", Name: "a", Address: "127.0.0.1:48157", State: "quarantined",
			QuarantineLeft: 15250 * time.Millisecond, HasQuarantineLeft: true, Reason: "new_or_lost_its_data", Data: "lost", Settings: settings},
			"1 DATA master=a address=127.0.0.1:48157 state=quarantined quarantine_left=15250 reason=new_or_lost_its_data data=lost settings=" + settings},
		{"STATUS's master that is a cluster", Master{Tag: "6", Name: "c", Address: "cluster@10.0.0.1:7000", State: "up",
			Shards: []string{"address=10.0.0.1:7000;slots=0-8191;state=up", "address=10.0.0.2:7000;slots=8192-16383;state=up"}},
			"6 DATA master=c address=cluster@10.0.0.1:7000 state=up shard=address=10.0.0.1:7000;slots=0-8191;state=up shard=address=10.0.0.2:7000;slots=8192-16383;state=up"},
		{"STATUS's end", Status{Tag: "3", Agent: "0.1.0", ID: "web-7", Sessions: 1, Quorum: 2, Tolerates: 1, Settings: settings},
			"3 OK agent=0.1.0 id=web-7 sessions=1 holds=0 waiters=0 quorum=2 tolerates=1 lock_delay=0 settings=" + settings},
		{"STATUS's end when a majority records other settings", Status{Tag: "4", Agent: "0.1.0", ID: "web-7", Sessions: 1, Quorum: 2,
			Tolerates: 1, Settings: settings, SettingsDiffer: []string{"lease", "quarantine"}},
			"4 OK agent=0.1.0 id=web-7 sessions=1 holds=0 waiters=0 quorum=2 tolerates=1 lock_delay=0 settings=" + settings + " settings_differ=lease,quarantine"},
		{"a new leader", Leader{Name: "service/db", Held: true, Fence: 1795548235000000, Value: "10.0.0.6:5432", Agent: "host-a"},
			"* LEADER service/db fence=1795548235000000 value=10.0.0.6:5432 agent=host-a"},
		{"no leader", Leader{Name: "service/db", Fence: 7, Value: "v"}, "* LEADER service/db none"},
		{"the last line", Bye{Reason: "shutdown"}, "* BYE reason=shutdown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(tc.reply.Bytes()); got != tc.want+"\n" {
				t.Fatalf("got  %q\nwant %q", got, tc.want+"\n")
			}
		})
	}
}
