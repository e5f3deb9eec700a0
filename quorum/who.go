package quorum

import (
	"context"
	"sync/atomic"
)

// Holder is one current holder of a name as recorded in the masters, with
// the highest fence any of them recorded.
type Holder struct {
	ID     string
	Record Record
}

// Who returns the holders of name that a majority of the voting masters
// record, with the highest fence any of them recorded.
func (c *Cluster) Who(ctx context.Context, name string) ([]Holder, error) {
	type seen struct {
		h     Holder
		count int
	}
	byID := map[string]*seen{}
	var order []string
	r, never := c.vote(ctx, roundSpec{op: OpWho, script: whoScript, keys: []string{c.setKey(name)}, args: []string{c.holderPrefix(name)}, whole: true,
		judge: func(a answer) (int, bool, error) {
			vals, err := a.res.ToArray()
			if err != nil {
				return 0, false, err
			}
			width := 1 + len(recordFields)
			for j := 0; j+width <= len(vals); j += width {
				id, _ := vals[j].ToString()
				f := make([]string, len(recordFields))
				for k := range f {
					f[k], _ = vals[j+1+k].ToString()
				}
				r := recordOf(f)
				s := byID[id]
				if s == nil {
					s = &seen{h: Holder{ID: id, Record: r}}
					byID[id] = s
					order = append(order, id)
				}
				s.count++
				s.h.Record.Fence = max(s.h.Record.Fence, r.Fence)
			}
			return 0, true, nil
		}})
	switch {
	case never != nil:
		return nil, never.Err()
	case r.yes() < c.quorum:
		return nil, c.noQuorumErr(r)
	}
	var out []Holder
	for _, id := range order {
		if s := byID[id]; s.count >= c.quorum {
			out = append(out, s.h)
		}
	}
	return out, nil
}

// Retag makes holder's record of name on every master that has it carry r's
// fence and who-info: the hold was passed to another local holder, and WHO
// should name it. It returns when every master answered or its deadline
// (4×MasterTimeout) passed, and says on how many it landed. A master that
// missed it keeps the earlier holder's fence and who-info, which only WHO
// reads, until a renewal re-creates the record.
func (c *Cluster) Retag(ctx context.Context, name, holder string, r Record) int {
	if c.closed() {
		return 0
	}
	f := r.fields() // recordFields order: fence is 3, who-info 4..8
	keys, args := []string{c.holderKey(name, holder)}, append([]string{f[3]}, f[4:]...)
	var n atomic.Int32
	c.eachMaster(ctx, func(ctx context.Context, m *master) {
		if v, err := m.eval(ctx, retagScript, keys, args).AsInt64(); err == nil && v == 1 {
			n.Add(1)
		}
	})
	return int(n.Load())
}
