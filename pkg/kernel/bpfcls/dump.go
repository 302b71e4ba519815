package bpfcls

import (
	"cmp"
	"slices"

	"github.com/cilium/ebpf"

	"github.com/shaperd/shaperd/pkg/model"
)

// Dump reads the maps back as filters (prefix, match field, class id),
// sorted by prefix and then match field; Labels stay empty (the kernel
// does not hold them). When shaperd's tc filter is missing or does not
// run this classifier's program, every filter is returned Damaged, so
// that Diff re-adds them and the Apply that does so re-attaches the
// program (Ensure). Entries whose keys shaperd cannot have written (a
// prefix shorter than the match word, a match byte other than dst or src,
// non-zero padding) are not returned but remembered, and every filter is
// Damaged too: the Ensure of the repairing Apply deletes them (one write
// each). Without maps (nothing installed yet) Dump returns no filters.
func (c *Classifier) Dump() ([]model.Filter, error) {
	if c.connErr != nil {
		return nil, c.errorf(c.connErr, "no netlink connection")
	}
	if err := c.dumpTC(); err != nil {
		return nil, c.errorf(err, "dump filters")
	}
	if _, err := c.open(false); err != nil {
		return nil, err
	}
	if c.objs == nil {
		return nil, nil
	}
	var out []model.Filter
	c.junk = nil
	for i, m := range []*ebpf.Map{c.objs.v4, c.objs.v6} {
		var k []byte
		var v uint32
		it := m.Iterate()
		for it.Next(&k, &v) {
			p, match, ok := parseKey(k)
			if !ok {
				c.junk = append(c.junk, junkKey{i == 1, slices.Clone(k)})
				continue
			}
			out = append(out, model.Filter{Prefix: p, Match: match, ClassID: model.Handle(v)})
		}
		if err := it.Err(); err != nil {
			return nil, c.errorf(err, "read map %s", m.String())
		}
	}
	if c.st.attached == 0 || c.st.attached != uint32(c.objs.progID) || len(c.junk) > 0 {
		for i := range out {
			out[i].Damaged = true
		}
	}
	slices.SortFunc(out, func(a, b model.Filter) int {
		return cmp.Or(a.Prefix.Addr().Compare(b.Prefix.Addr()), cmp.Compare(a.Prefix.Bits(), b.Prefix.Bits()), cmp.Compare(a.Match, b.Match))
	})
	return out, nil
}

// Foreign describes the filters under the qdisc, as of the last Dump or
// Ensure, that are neither shaperd's cls_bpf filter nor in the Replaces
// priorities: one entry per kind, priority and protocol, at most
// maxForeign (as the u32 classifier says them).
func (c *Classifier) Foreign() []string {
	if c.st == nil {
		return nil
	}
	return c.st.foreign
}
