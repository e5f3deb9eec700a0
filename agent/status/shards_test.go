package status

import (
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/quorum"
)

func TestStatusLineShowsEachShardOfAClusterMaster(t *testing.T) {
	const master = "1 DATA master=a address=cluster@10.0.0.1:7000,10.0.0.2:7000 state=up settings=lease=15s;drift=0.01"
	for _, tc := range []struct {
		name   string
		shards []quorum.ShardStatus
		want   string // what follows the master's own fields
	}{
		{"a standalone master has no shard field", nil, ""},
		{"a shard that votes says its address, slots and state",
			[]quorum.ShardStatus{{Address: "10.0.0.1:7000", Slots: "0-5460", State: quorum.StateUp}},
			" shard=address=10.0.0.1:7000;slots=0-5460;state=up"},
		{"each shard is its own field, in the order given",
			[]quorum.ShardStatus{
				{Address: "10.0.0.1:7000", Slots: "0-5460", State: quorum.StateUp},
				{Address: "10.0.0.2:7000", Slots: "5461-10922,16000", State: quorum.StateUp},
			},
			" shard=address=10.0.0.1:7000;slots=0-5460;state=up shard=address=10.0.0.2:7000;slots=5461-10922,16000;state=up"},
		{"a shard that lost its data says how many slots sit out and how long is left",
			[]quorum.ShardStatus{{Address: "10.0.0.3:7000", Slots: "10923-16383", State: quorum.StateQuarantined,
				Err: quorum.QuarantineReason, QuarantinedSlots: 5461, QuarantineLeft: 1500 * time.Millisecond}},
			" shard=address=10.0.0.3:7000;slots=10923-16383;state=quarantined;quarantined_slots=5461;quarantine_left=1500;reason=new_or_lost_its_data"},
		{"a shard that votes with some slots in quarantine says so without a reason",
			[]quorum.ShardStatus{{Address: "10.0.0.3:7000", Slots: "10923-16383", State: quorum.StateUp,
				Err: "an old error", QuarantinedSlots: 2, QuarantineLeft: 15250 * time.Millisecond}},
			" shard=address=10.0.0.3:7000;slots=10923-16383;state=up;quarantined_slots=2;quarantine_left=15250"},
		{"a shard with no marker yet says so in the master's word",
			[]quorum.ShardStatus{{Address: "10.0.0.3:7000", Slots: "0-16383", State: quorum.StateQuarantined, Err: quorum.UnplantedReason}},
			" shard=address=10.0.0.3:7000;slots=0-16383;state=quarantined;reason=no_marker_yet"},
		{"a down shard's reason is one word that cannot end its field",
			[]quorum.ShardStatus{{Address: "10.0.0.2:7000", Slots: "5461-10922", State: quorum.StateDown, Err: "dial tcp: i/o timeout; CLUSTERDOWN a=b"}},
			" shard=address=10.0.0.2:7000;slots=5461-10922;state=down;reason=dial_tcp:_i/o_timeout__CLUSTERDOWN_a_b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := quorum.MasterStatus{Name: "a", Address: "cluster@10.0.0.1:7000,10.0.0.2:7000", State: quorum.StateUp, Settings: "lease=15s;drift=0.01", Shards: tc.shards}
			got := strings.TrimSuffix(string(Master("1", m).Bytes()), "\n")
			if got != master+tc.want {
				t.Fatalf("Master =\n  %s\nwant\n  %s", got, master+tc.want)
			}
			if strings.ContainsAny(strings.TrimPrefix(got, master), "\n\t") || strings.Count(got, " ") != strings.Count(master, " ")+len(tc.shards) {
				t.Errorf("a shard is not one word: %q", got)
			}
		})
	}
}
