package agent

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
		cred     Cred
		wantUser string
		wantGIDs []int // each must be among the peer's groups
	}{
		{"root is named and in group 0", Cred{UID: 0, GID: 0}, "root", []int{0}},
		{"the kernel's gid counts even when the user is not in it", Cred{UID: 0, GID: 4242}, "root", []int{4242, 0}},
		{"a uid with no user has only the kernel's gid", Cred{UID: 4242424, GID: 77}, "", []int{77}},
		{"unknown credentials have no groups", Cred{UID: -1, GID: -1}, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := resolvePeer(tt.cred)
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

const aclMaster = "redis \"a\" { address = \"h:1\" }\n"

func TestParseACL(t *testing.T) {
	cfg, err := Parse([]byte(aclMaster+`acl {
  rule "root" {
    user  = "root"
    names = ["**"]
  }
  rule "wheel" {
    group = "root"
    names = ["jobs/*", "reports/**"]
    verbs = ["LOCK", "unlock", "lock"]
  }
  rule "n" {
    uid   = 65534
    names = ["x"]
  }
  rule "g" {
    gid   = 4242
    names = ["y"]
  }
}
`), "x.hcl")
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.ACL.Rules
	if len(r) != 4 || r[0].UID != 0 || r[0].GID != -1 || r[1].GID != 0 || r[1].UID != -1 || r[2].UID != 65534 || r[3].GID != 4242 {
		t.Fatalf("rules: %+v", r)
	}
	if !slices.Equal(r[0].Verbs, RuleVerbs) || !slices.Equal(r[1].Verbs, []string{"lock", "unlock"}) {
		t.Fatalf("verbs: %v %v", r[0].Verbs, r[1].Verbs)
	}
	if r[0].Principal != "user root (0)" || r[1].Principal != "group root (0)" || len(r[1].Names) != 2 || r[1].Names[1].Pattern != "reports/**" {
		t.Fatalf("rules: %+v", r)
	}
	if cfg, err := Parse([]byte(aclMaster+"acl {}\n"), "x.hcl"); err != nil || cfg.ACL == nil || len(cfg.ACL.Rules) != 0 {
		t.Fatalf("an empty acl block: %+v %v", cfg.ACL, err)
	}
	if cfg, err := Parse([]byte(aclMaster), "x.hcl"); err != nil || cfg.ACL != nil {
		t.Fatalf("no acl block: %+v %v", cfg.ACL, err)
	}
}

func TestParseACLErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // every one must appear in the error text
	}{
		{"an unknown user is an error at its line", "acl {\n  rule \"r\" {\n    user = \"no-such-user-7f3a\"\n    names = [\"x\"]\n  }\n}",
			[]string{"x.hcl:4", `acl rule "r".user`, `no user "no-such-user-7f3a"`}},
		{"an unknown group is an error at its line", "acl {\n  rule \"r\" {\n    names = [\"x\"]\n    group = \"no-such-group-7f3a\"\n  }\n}",
			[]string{"x.hcl:5", `no group "no-such-group-7f3a"`}},
		{"a rule for no one is an error at the rule", "acl {\n  rule \"r\" {\n    names = [\"x\"]\n  }\n}",
			[]string{"x.hcl:3", "for no one"}},
		{"a rule for two principals is an error", "acl {\n  rule \"r\" {\n    uid = 1\n    gid = 2\n    names = [\"x\"]\n  }\n}",
			[]string{"x.hcl:5", "not uid and gid"}},
		{"a rule without names is an error", "acl {\n  rule \"r\" {\n    uid = 1\n  }\n}",
			[]string{"x.hcl:3", "give the names"}},
		{"a bad glob is an error at the names line", "acl {\n  rule \"r\" {\n    uid = 1\n    names = [\"ok/*\", \"bad/a**\"]\n  }\n}",
			[]string{"x.hcl:5", "whole segment"}},
		{"an unknown verb is an error", "acl {\n  rule \"r\" {\n    uid = 1\n    names = [\"x\"]\n    verbs = [\"lock\", \"frob\"]\n  }\n}",
			[]string{"x.hcl:6", `unknown verb "frob"`}},
		{"a verb that is always allowed is an error", "acl {\n  rule \"r\" {\n    uid = 1\n    names = [\"x\"]\n    verbs = [\"status\"]\n  }\n}",
			[]string{"x.hcl:6", "status is always allowed"}},
		{"an empty verbs list is an error", "acl {\n  rule \"r\" {\n    uid = 1\n    names = [\"x\"]\n    verbs = []\n  }\n}",
			[]string{"x.hcl:6", "allows nothing"}},
		{"a negative uid is an error", "acl {\n  rule \"r\" {\n    uid = -1\n    names = [\"x\"]\n  }\n}",
			[]string{"x.hcl:4", "uid >= 0"}},
		{"two rules with one name is an error", "acl {\n  rule \"r\" {\n    uid = 1\n    names = [\"x\"]\n  }\n  rule \"r\" {\n    uid = 2\n    names = [\"y\"]\n  }\n}",
			[]string{"x.hcl:7", "a second rule"}},
		{"an unknown attribute in a rule is an error", "acl {\n  rule \"r\" {\n    uid = 1\n    names = [\"x\"]\n    nmaes = [\"y\"]\n  }\n}",
			[]string{"x.hcl:6", "nmaes"}},
		{"every error of every rule is reported together", "acl {\n  rule \"a\" {\n    user = \"no-such-user-7f3a\"\n    names = [\"x\"]\n  }\n  rule \"b\" {\n    uid = 1\n    names = [\"\"]\n  }\n}",
			[]string{"x.hcl:4", "x.hcl:9", "empty glob"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(aclMaster+tt.src), "x.hcl")
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q missing from:\n%v", w, err)
				}
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
			p := resolvePeer(Cred{UID: uid, GID: primary})
			if !slices.Contains(p.GIDs, gid) || !slices.Contains(p.GIDs, primary) {
				t.Fatalf("%s (uid %d) is a member of %s (%d), but its peer has gids %v", member, uid, f[0], gid, p.GIDs)
			}
			t.Logf("%s (uid %d) is in its supplementary group %s (%d): gids %v", member, uid, f[0], gid, p.GIDs)
			return
		}
	}
	t.Skip("no user of this host has a supplementary group in /etc/group")
}

// TestTheSampleACLIsValid uncomments the acl block of the sample agent.hcl
// (its group put to one that exists here) and loads it.
func TestTheSampleACLIsValid(t *testing.T) {
	data, err := os.ReadFile("../agent.hcl")
	if err != nil {
		t.Fatal(err)
	}
	var block []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "# acl {") || len(block) > 0 && strings.HasPrefix(line, "# ") {
			block = append(block, strings.TrimPrefix(line, "# "))
		} else if len(block) > 0 {
			break // the block's comment ends at the first other line
		}
	}
	if len(block) < 3 {
		t.Fatal("no commented acl block in the sample")
	}
	src := strings.ReplaceAll(string(data)+strings.Join(block, "\n"), `group = "batch"`, `group = "root"`)
	cfg, err := Parse([]byte(src), "agent.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.ACL.Rules) != 2 || len(cfg.ACL.Rules[0].Verbs) != 4 || cfg.ACL.Rules[1].Verbs[0] != "who" {
		t.Fatalf("the sample's rules: %v", cfg.ACL)
	}
}

// TestTheOperationsACLExampleIsValid loads the example of docs/operations.md's
// "Access rules" (its group put to one that exists here).
func TestTheOperationsACLExampleIsValid(t *testing.T) {
	data, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(data), "## Access rules")
	_, example, _ := strings.Cut(section, "```hcl\n")
	example, _, _ = strings.Cut(example, "```")
	cfg, err := Parse([]byte(aclMaster+strings.ReplaceAll(example, `group = "batch"`, `group = "root"`)), "operations.md")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ACL == nil || len(cfg.ACL.Rules) != 2 {
		t.Fatalf("the example's rules: %v", cfg.ACL)
	}
}
