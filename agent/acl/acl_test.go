package acl

import (
	"errors"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lock-agent/lock-agent/protocol"
)

func TestGlobMatch(t *testing.T) {
	tests := []struct {
		name, glob, lock string
		want             bool
	}{
		{"a name matches itself", "jobs/x", "jobs/x", true},
		{"a name does not match another", "jobs/x", "jobs/y", false},
		{"a star matches a whole segment", "jobs/*", "jobs/nightly", true},
		{"a star matches an empty segment", "jobs/*", "jobs/", true},
		{"a star does not cross a slash", "jobs/*", "jobs/a/b", false},
		{"a star needs its segment to be there", "jobs/*", "jobs", false},
		{"a star matches part of a segment", "jobs/db-*", "jobs/db-main", true},
		{"a star within a segment keeps the literal part", "jobs/db-*", "jobs/web-main", false},
		{"two stars in one segment match around a literal", "*.lock/x", "a.b.lock/x", true},
		{"a star segment in the middle matches one segment", "a/*/c", "a/b/c", true},
		{"a star segment in the middle does not match two", "a/*/c", "a/b/b/c", false},
		{"a double star matches every name", "**", "a/b/c", true},
		{"a double star matches a name with one segment", "**", "a", true},
		{"a trailing double star matches one segment below", "reports/**", "reports/q1", true},
		{"a trailing double star matches many segments below", "reports/**", "reports/2026/q1/final", true},
		{"a trailing double star matches the name itself", "reports/**", "reports", true},
		{"a trailing double star does not match a sibling prefix", "reports/**", "reportsx/q1", false},
		{"a double star in the middle matches no segment", "a/**/z", "a/z", true},
		{"a double star in the middle matches several segments", "a/**/z", "a/b/c/z", true},
		{"a double star in the middle needs the last segment", "a/**/z", "a/b/c", false},
		{"a leading double star matches any prefix", "**/lock", "x/y/lock", true},
		{"two double stars backtrack to find the segments", "**/b/**/d", "a/b/c/b/x/d", true},
		{"two double stars fail when a segment is missing", "**/b/**/d", "a/c/x/d", false},
		{"a double star and a star combine", "a/**/*.db", "a/x/y/main.db", true},
		{"the case of a letter matters", "Jobs/*", "jobs/x", false},
		{"a leading slash is a segment of its own", "/jobs/*", "/jobs/x", true},
		{"a leading slash must be there", "/jobs/*", "jobs/x", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := ParseGlob(tt.glob)
			if err != nil {
				t.Fatal(err)
			}
			if got := g.Match(tt.lock); got != tt.want {
				t.Fatalf("%q matching %q = %v, want %v", tt.glob, tt.lock, got, tt.want)
			}
		})
	}
}

func TestParseGlobErrors(t *testing.T) {
	tests := []struct {
		name, glob, want string
	}{
		{"an empty glob is an error", "", "empty"},
		{"a double star inside a segment is an error", "jobs/a**", "whole segment"},
		{"a triple star is an error", "jobs/***", "whole segment"},
		{"a character no name can have is an error", "jobs/[ab]", "'['"},
		{"a question mark is not a wildcard", "jobs/?", "'?'"},
		{"a space is an error", "jobs/a b", "' '"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseGlob(tt.glob)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseGlob(%q) = %v, want an error with %q", tt.glob, err, tt.want)
			}
		})
	}
}

func globs(t *testing.T, patterns ...string) []Glob {
	var out []Glob
	for _, p := range patterns {
		g, err := ParseGlob(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, g)
	}
	return out
}

func TestACLAllow(t *testing.T) {
	acl := &ACL{Rules: []Rule{
		{Name: "batch", UID: -1, GID: 1001, Names: globs(t, "jobs/*", "reports/**"), Verbs: []string{"lock", "unlock"}},
		{Name: "alice", UID: 1000, GID: -1, Names: globs(t, "alice/**"), Verbs: RuleVerbs},
		{Name: "alice-who", UID: 1000, GID: -1, Names: globs(t, "**"), Verbs: []string{"who"}},
		{Name: "ops", UID: -1, GID: 2000, Names: globs(t, "**"), Verbs: RuleVerbs},
	}}
	alice := Peer{UID: 1000, User: "alice", GIDs: []int{1000}}
	batchPrimary := Peer{UID: 1001, User: "batch", GIDs: []int{1001}}
	bobInBatch := Peer{UID: 1002, User: "bob", GIDs: []int{1002, 1001}}
	nobody := Peer{UID: 65534, User: "nobody", GIDs: []int{65534}}
	unnamed := Peer{UID: 4242, GIDs: []int{4242}}
	tests := []struct {
		name  string
		acl   *ACL
		peer  Peer
		verb  string
		names []string
		want  string // "" allowed, else a part of the DENIED text
	}{
		{"no acl allows anyone anything", nil, nobody, "lock", []string{"x"}, ""},
		{"an acl with no rules allows no one", &ACL{}, alice, "lock", []string{"alice/x"}, "no rule allows uid 1000 (alice) to lock alice/x: no rule is for this uid"},
		{"a uid rule allows its user on its names", acl, alice, "lock", []string{"alice/a/b"}, ""},
		{"a uid rule allows every rule verb by default", acl, alice, "extend", []string{"alice/a"}, ""},
		{"a uid rule does not allow names outside its globs", acl, alice, "lock", []string{"jobs/x"}, `no rule allows uid 1000 (alice) to lock jobs/x: its rules "alice" allow lock only on alice/**`},
		{"a second rule for the same uid adds what it allows", acl, alice, "who", []string{"jobs/x"}, ""},
		{"a group rule allows a user whose primary group it is", acl, batchPrimary, "lock", []string{"jobs/x"}, ""},
		{"a group rule allows a user with it as a supplementary group", acl, bobInBatch, "unlock", []string{"reports/2026/q1"}, ""},
		{"a group rule does not allow a verb it does not list", acl, bobInBatch, "extend", []string{"jobs/x"}, `no rule allows uid 1002 (bob) to extend jobs/x: its rules "batch" do not allow extend`},
		{"a group rule's star does not cross a slash", acl, bobInBatch, "lock", []string{"jobs/x/y"}, "only on jobs/*,reports/**"},
		{"a peer no rule is for is denied and told its gids", acl, nobody, "lock", []string{"jobs/x"}, "no rule allows uid 65534 (nobody) to lock jobs/x: no rule is for this uid or its groups (gids 65534)"},
		{"a uid with no user is named by its number", acl, unnamed, "who", []string{"x"}, "no rule allows uid 4242 to who x"},
		{"the verb is matched whatever its case", acl, batchPrimary, "LOCK", []string{"jobs/x"}, ""},
		{"every name must be allowed", acl, batchPrimary, "lock", []string{"jobs/x", "secret/y"}, "to lock secret/y"},
		{"each name may be allowed by a different rule", acl, Peer{UID: 1000, GIDs: []int{1001}}, "lock", []string{"alice/x", "jobs/y"}, ""},
		{"a peer whose credentials are unknown is denied", acl, Peer{UID: -1}, "lock", []string{"jobs/x"}, "no rule allows uid -1"},
		{"a group rule for every name allows every verb", acl, Peer{UID: 7, GIDs: []int{7, 2000}}, "extend", []string{"any/thing"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.acl.Allow(tt.peer, tt.verb, tt.names...)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("denied: %v", err)
			case tt.want != "" && err == nil:
				t.Fatal("allowed")
			case tt.want != "" && (!errors.Is(err, protocol.ErrDenied) || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v (code %s), want DENIED with %q", err, protocol.CodeOf(err), tt.want)
			}
		})
	}
}

func TestResolvePeer(t *testing.T) {
	tests := []struct {
		name     string
		cred     struct{ UID, GID int }
		wantUser string
		wantGIDs []int // each must be among the peer's groups
	}{
		{"root is named and in group 0", struct{ UID, GID int }{UID: 0, GID: 0}, "root", []int{0}},
		{"the kernel's gid counts even when the user is not in it", struct{ UID, GID int }{UID: 0, GID: 4242}, "root", []int{4242, 0}},
		{"a uid with no user has only the kernel's gid", struct{ UID, GID int }{UID: 4242424, GID: 77}, "", []int{77}},
		{"unknown credentials have no groups", struct{ UID, GID int }{UID: -1, GID: -1}, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Resolve(tt.cred.UID, tt.cred.GID)
			if p.UID != tt.cred.UID || p.User != tt.wantUser {
				t.Fatalf("got %+v", p)
			}
			for _, g := range tt.wantGIDs {
				if !slices.Contains(p.GIDs, g) {
					t.Fatalf("gid %d missing from %+v", g, p)
				}
			}
			if tt.wantGIDs == nil && len(p.GIDs) != 0 || tt.wantUser == "" && len(p.GIDs) != len(tt.wantGIDs) {
				t.Fatalf("extra groups in %+v", p)
			}
		})
	}
}

// TestResolvePeerFindsSupplementaryGroups takes a user of this host that is a
// member of a group other than its primary one (from /etc/group) and checks
// that a session of its uid is in that group.
func TestResolvePeerFindsSupplementaryGroups(t *testing.T) {
	data, err := os.ReadFile("/etc/group")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) != 4 || f[3] == "" {
			continue
		}
		gid, _ := strconv.Atoi(f[2])
		for _, member := range strings.Split(f[3], ",") {
			u, err := user.Lookup(member)
			if err != nil || u.Gid == f[2] {
				continue
			}
			uid, _ := strconv.Atoi(u.Uid)
			primary, _ := strconv.Atoi(u.Gid)
			p := Resolve(uid, primary)
			if !slices.Contains(p.GIDs, gid) || !slices.Contains(p.GIDs, primary) {
				t.Fatalf("%s (uid %d) is a member of %s (%d), but its peer has gids %v", member, uid, f[0], gid, p.GIDs)
			}
			t.Logf("%s (uid %d) is in its supplementary group %s (%d): gids %v", member, uid, f[0], gid, p.GIDs)
			return
		}
	}
	t.Skip("no user of this host has a supplementary group in /etc/group")
}
