package config

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/lock-agent/lock-agent/agent/acl"
)

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
	if !slices.Equal(r[0].Verbs, acl.RuleVerbs) || !slices.Equal(r[1].Verbs, []string{"lock", "unlock"}) {
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

// TestTheSampleACLIsValid uncomments the acl block of the sample agent.hcl
// (its group put to one that exists here) and loads it.
func TestTheSampleACLIsValid(t *testing.T) {
	data, err := os.ReadFile("../../agent.hcl")
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
	data, err := os.ReadFile("../../docs/operations.md")
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
