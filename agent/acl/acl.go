// Package acl is the agent's access rules by peer credentials: who a peer
// is (its uid, user and groups), the rules of the config's acl block, and
// whether they let a peer do a verb on a lock name.
package acl

import (
	"fmt"
	"os/user"
	"path"
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
var RuleVerbs = []string{"lock", "unlock", "extend", "who"}

// AlwaysAllowed are verbs a rule may not name: they carry no lock name.
var AlwaysAllowed = []string{"status", "ping", "hello", "holds", "quit", "cancel"}

// Peer is who sent a request: its uid and every group it is in.
type Peer struct {
	UID  int
	User string // "" when the uid has no user on this host
	GIDs []int
}

func (p Peer) String() string {
	if p.User == "" {
		return "uid " + strconv.Itoa(p.UID)
	}
	return fmt.Sprintf("uid %d (%s)", p.UID, p.User)
}

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

// Glob is a pattern for lock names, matched segment by segment (segments are
// split at '/'): a "*" within a segment matches any run of characters of that
// segment, and a segment that is "**" matches zero or more whole segments
// ("reports/**" matches reports, reports/a and reports/a/b). Every other
// character matches itself.
type Glob struct {
	Pattern string
	segs    []string
}

// ParseGlob checks a pattern: characters of lock names and '*', and "**"
// only as a whole segment.
func ParseGlob(pattern string) (Glob, error) {
	if pattern == "" {
		return Glob{}, fmt.Errorf("an empty glob matches no name")
	}
	for _, c := range pattern {
		if !nameChar(c) && c != '*' {
			return Glob{}, fmt.Errorf("glob %q: %q is not a character of lock names (A-Z a-z 0-9 . _ : / @ + -) or '*'", pattern, c)
		}
	}
	segs := strings.Split(pattern, "/")
	for _, s := range segs {
		if strings.Contains(s, "**") && s != "**" {
			return Glob{}, fmt.Errorf("glob %q: \"**\" must be a whole segment (\"a/**/b\"); within a segment use \"*\"", pattern)
		}
	}
	return Glob{Pattern: pattern, segs: segs}, nil
}

func nameChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._:/@+-", c)
}

// Match reports whether name matches the glob.
func (g Glob) Match(name string) bool {
	return matchSegments(g.segs, strings.Split(name, "/"))
}

// matchSegments is wildcard matching over segments, "**" being the
// wildcard: on a mismatch it backtracks to the last "**" and lets it take
// one more segment, which is enough (a later "**" covers what an earlier
// one could), so the work is at most len(pat)×len(name).
func matchSegments(pat, name []string) bool {
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pat) && pat[p] == "**":
			star, mark = p, n
			p++
		case p < len(pat) && segmentMatch(pat[p], name[n]):
			p++
			n++
		case star >= 0:
			p = star + 1
			mark++
			n = mark
		default:
			return false
		}
	}
	for p < len(pat) && pat[p] == "**" {
		p++
	}
	return p == len(pat)
}

// segmentMatch matches one segment. ParseGlob lets through no character
// path.Match treats specially but '*', so it cannot fail.
func segmentMatch(pattern, segment string) bool {
	ok, _ := path.Match(pattern, segment)
	return ok
}

// Resolve looks up a peer in the host's user database: its user name, and
// its groups: gid, the one the kernel reported at connect (SO_PEERCRED), and
// the user's primary and supplementary groups. A uid with no user has only
// the kernel's gid; -1 is unknown.
func Resolve(uid, gid int) Peer {
	p := Peer{UID: uid}
	if gid >= 0 {
		p.GIDs = append(p.GIDs, gid)
	}
	if uid < 0 {
		return p
	}
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return p
	}
	p.User = u.Username
	ids, _ := u.GroupIds()
	for _, id := range append(ids, u.Gid) {
		if g, err := strconv.Atoi(id); err == nil && !slices.Contains(p.GIDs, g) {
			p.GIDs = append(p.GIDs, g)
		}
	}
	return p
}
