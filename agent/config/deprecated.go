package config

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
)

// Warning is a setting the file sets that does nothing: deprecated, still
// accepted (an old file keeps loading) and ignored. validate and the
// agent's start-up log name each, with what replaced it, so that an
// operator who relied on one learns that it no longer acts.
type Warning struct {
	Pos     hcl.Pos // where the file sets it
	File    string
	Setting string // block.attribute
	// Instead says what replaced it, or what to do instead.
	Instead string
}

func (w Warning) String() string {
	return fmt.Sprintf("%s:%d: %s is deprecated, accepted and ignored: %s", w.File, w.Pos.Line, w.Setting, w.Instead)
}

// deprecated are the settings that are accepted and ignored, each with
// what replaced it. A setting that stops acting goes here, never silently.
var deprecated = []struct{ block, attr, instead string }{
	{"lock", "max_ttl", "ttl= goes from 50ms to 30 days (protocol.MaxTTL) whatever it says: a ttl= hold is renewed " +
		"like any other until its end, so its length bounds neither a quarantine nor how long a dead holder keeps a name; " +
		"to cap how long a client may hold, give its LOCKs ttl= (exec -ttl), or REVOKE (docs/operations.md)"},
}

// warnings lists the deprecated settings the file sets.
func (v *validator) warnings() []Warning {
	var out []Warning
	for _, d := range deprecated {
		for _, b := range v.body.Blocks {
			if b.Type != d.block {
				continue
			}
			if a, ok := b.Body.Attributes[d.attr]; ok {
				out = append(out, Warning{Pos: a.SrcRange.Start, File: v.file, Setting: d.block + "." + d.attr, Instead: d.instead})
			}
		}
	}
	return out
}
