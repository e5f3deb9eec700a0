package config

import (
	"fmt"
	"os/user"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/lock-agent/lock-agent/agent/acl"
)

// acl turns the acl block into rules, looking up users and groups given by
// name: one that does not exist on this host is an error at its line.
func (v *validator) acl(b *aclBlock) *acl.ACL {
	if b == nil {
		return nil
	}
	// As for masters: the i-th decoded rule is the i-th rule block.
	var syntax []*hclsyntax.Block
	if blocks := blocksOf(v.body, "acl"); len(blocks) > 0 {
		syntax = blocksOf(blocks[0].Body, "rule")
	}
	rules := &acl.ACL{Rules: []acl.Rule{}}
	seen := map[string]bool{}
	for i, rb := range b.Rules {
		orElse := func(string) hcl.Range { return v.rangeOf("acl", "", "") }
		errorf := v.errorsIn(nth(syntax, i), orElse, "acl rule", rb.Name)
		if seen[rb.Name] {
			errorf("", "a second rule named %q", rb.Name)
		}
		seen[rb.Name] = true
		rules.Rules = append(rules.Rules, rule(rb, errorf))
	}
	return rules
}

// rule checks one rule block: whom it is for, its names and its verbs.
func rule(rb aclRuleBlock, errorf errorFunc) acl.Rule {
	r := acl.Rule{Name: rb.Name, UID: -1, GID: -1}
	principal(rb, &r, errorf)
	if rb.Names == nil || len(*rb.Names) == 0 {
		errorf("names", "give the names the rule allows, as globs such as [\"jobs/*\"]; [\"**\"] is every name")
	} else {
		for _, p := range *rb.Names {
			g, err := acl.ParseGlob(p)
			if err != nil {
				errorf("names", "%v", err)
				continue
			}
			r.Names = append(r.Names, g)
		}
	}
	r.Verbs = acl.RuleVerbs
	if rb.Verbs != nil {
		r.Verbs = verbs(*rb.Verbs, errorf)
	}
	return r
}

// principal sets whom a rule is for: exactly one of user, uid, group and
// gid, users and groups looked up by name on this host.
func principal(rb aclRuleBlock, r *acl.Rule, errorf errorFunc) {
	var given []string
	if rb.User != nil {
		given = append(given, "user")
		if u, err := user.Lookup(*rb.User); err != nil {
			errorf("user", "no user %q on this host (give an existing user, or its uid)", *rb.User)
		} else {
			r.UID, _ = strconv.Atoi(u.Uid)
			r.Principal = fmt.Sprintf("user %s (%s)", *rb.User, u.Uid)
		}
	}
	if rb.UID != nil {
		given = append(given, "uid")
		if r.UID, r.Principal = *rb.UID, fmt.Sprintf("uid %d", *rb.UID); r.UID < 0 {
			errorf("uid", "want a uid >= 0, got %d", r.UID)
		}
	}
	if rb.Group != nil {
		given = append(given, "group")
		if g, err := user.LookupGroup(*rb.Group); err != nil {
			errorf("group", "no group %q on this host (give an existing group, or its gid)", *rb.Group)
		} else {
			r.GID, _ = strconv.Atoi(g.Gid)
			r.Principal = fmt.Sprintf("group %s (%s)", *rb.Group, g.Gid)
		}
	}
	if rb.GID != nil {
		given = append(given, "gid")
		if r.GID, r.Principal = *rb.GID, fmt.Sprintf("gid %d", *rb.GID); r.GID < 0 {
			errorf("gid", "want a gid >= 0, got %d", r.GID)
		}
	}
	switch {
	case len(given) == 0:
		errorf("", "the rule is for no one: give one of user, uid, group or gid")
	case len(given) > 1:
		errorf(given[1], "give one of user, uid, group or gid, not %s", strings.Join(given, " and "))
	}
}

// verbs checks a rule's verbs list: rule verbs only, each kept once.
func verbs(given []string, errorf errorFunc) []string {
	var out []string
	if len(given) == 0 {
		errorf("verbs", "an empty verbs list allows nothing; leave verbs out for all of %s", strings.Join(acl.RuleVerbs, ", "))
	}
	for _, verb := range given {
		verb = strings.ToLower(verb)
		switch {
		case slices.Contains(acl.RuleVerbs, verb) || slices.Contains(acl.OperatorVerbs, verb):
			if !slices.Contains(out, verb) {
				out = append(out, verb)
			}
		case slices.Contains(acl.AlwaysAllowed, verb):
			errorf("verbs", "%s is always allowed; rules govern %s", verb, strings.Join(acl.RuleVerbs, ", "))
		default:
			errorf("verbs", "unknown verb %q: want %s", verb, strings.Join(append(slices.Clone(acl.RuleVerbs), acl.OperatorVerbs...), ", "))
		}
	}
	return out
}
