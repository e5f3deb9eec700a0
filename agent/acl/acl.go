// Package acl is the agent's access rules by peer credentials: who a peer
// is (its uid, user and groups), the rules of the config's acl block, and
// whether they let a peer do a verb on a lock name.
package acl

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/lock-agent/lock-agent/protocol"
)

// ACL is the agent's access rules by peer credentials: the acl block. A nil
// *ACL is no acl block: whoever can open the socket may do anything. With
// one, a request that carries names (LOCK, UNLOCK, EXTEND, WHO) is allowed
// when, for every name, some rule is for the peer's uid or one of its
// groups, lists the verb, and has a glob that matches the name. An acl block
// with no rules allows none of them. STATUS, PING, HELLO, HOLDS, QUIT and
// CANCEL (which withdraws only the session's own wait) are always allowed.
type ACL struct {
	Rules []Rule
}

// Rule is one `rule "NAME"` of the acl block.
type Rule struct {
	Name string
	// Exactly one of UID and GID is >= 0: whom the rule is for. Users and
	// groups given by name were looked up when the file was loaded.
	UID, GID int
	// Principal is the rule's user or group as the file gave it, for
	// messages: "user alice (1001)", "uid 1001", "group batch (1001)", "gid 1001".
	Principal string
	Names     []Glob
	// Verbs are lowercase, from RuleVerbs; all of them when the file gave none.
	Verbs []string
}

// RuleVerbs are the verbs rules govern; every other verb is always allowed.
var RuleVerbs = []string{"lock", "unlock", "extend", "who", "set", "observe", "check"}

// OperatorVerbs are verbs a rule grants only when it names them: a rule
// without verbs grants RuleVerbs, never these.
var OperatorVerbs = []string{"revoke"}

// AlwaysAllowed are verbs a rule may not name: they carry no lock name.
var AlwaysAllowed = []string{"status", "ping", "hello", "holds", "quit", "cancel"}

// Allow returns nil if peer may do verb on every one of names, else an
// error wrapping protocol.ErrDenied that says which name and why. Each name
// may be allowed by a different rule. A nil ACL allows everything.
func (acl *ACL) Allow(peer Peer, verb string, names ...string) error {
	if acl == nil {
		return nil
	}
	verb = strings.ToLower(verb)
	var forPeer, withVerb []*Rule
	for i := range acl.Rules {
		r := &acl.Rules[i]
		if !r.isFor(peer) {
			continue
		}
		forPeer = append(forPeer, r)
		if slices.Contains(r.Verbs, verb) {
			withVerb = append(withVerb, r)
		}
	}
	for _, name := range names {
		if !slices.ContainsFunc(withVerb, func(r *Rule) bool { return r.matches(name) }) {
			return protocol.Errorf(protocol.ErrDenied, "no rule allows %v to %s %s: %s", peer, verb, name, why(peer, verb, forPeer, withVerb))
		}
	}
	return nil
}

func (r *Rule) isFor(p Peer) bool {
	if r.UID >= 0 {
		return p.UID == r.UID
	}
	return slices.Contains(p.GIDs, r.GID)
}

func (r *Rule) matches(name string) bool {
	return slices.ContainsFunc(r.Names, func(g Glob) bool { return g.Match(name) })
}

// why explains a denial to the client, in the terms of its own rules.
func why(p Peer, verb string, forPeer, withVerb []*Rule) string {
	switch {
	case len(forPeer) == 0:
		gids := make([]string, len(p.GIDs))
		for i, g := range p.GIDs {
			gids[i] = strconv.Itoa(g)
		}
		return fmt.Sprintf("no rule is for this uid or its groups (gids %s)", strings.Join(gids, ","))
	case len(withVerb) == 0:
		return fmt.Sprintf("its rules %s do not allow %s", ruleNames(forPeer), verb)
	}
	var globs []string
	for _, r := range withVerb {
		for _, g := range r.Names {
			globs = append(globs, g.Pattern)
		}
	}
	if len(globs) > 8 { // the reply stays one readable line
		globs = append(globs[:8], "...")
	}
	return fmt.Sprintf("its rules %s allow %s only on %s", ruleNames(withVerb), verb, strings.Join(globs, ","))
}

func ruleNames(rules []*Rule) string {
	names := make([]string, len(rules))
	for i, r := range rules {
		names[i] = strconv.Quote(r.Name)
	}
	return strings.Join(names, ",")
}

// String is a one-line summary, for the log of a reload.
func (acl *ACL) String() string {
	if acl == nil {
		return "none (anyone who can open the socket may do anything)"
	}
	if len(acl.Rules) == 0 {
		return "no rules (only verbs that carry no name are allowed)"
	}
	rules := make([]string, len(acl.Rules))
	for i, r := range acl.Rules {
		globs := make([]string, len(r.Names))
		for j, g := range r.Names {
			globs[j] = g.Pattern
		}
		rules[i] = fmt.Sprintf("rule %q: %s may %s on %s", r.Name, r.Principal, strings.Join(r.Verbs, ","), strings.Join(globs, ","))
	}
	return strings.Join(rules, "; ")
}
