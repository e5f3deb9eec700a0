package acl

import (
	"fmt"
	"os/user"
	"slices"
	"strconv"
)

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
