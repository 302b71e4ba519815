package policy

import (
	"fmt"
	"slices"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Leaf qdiscs. A user's leaf is chosen level by level, the first that
// sets one winning as a whole (kind and parameters): the user's
// leaf_qdisc, the tier's, the interface's; likewise queue_latency (user,
// tier, interface, default 50ms) sizes a bfifo without leaf_limit.
//
// The running kernel decides what is possible (plan.LeafKinds, probed by
// the daemon): a configured kind the kernel lacks is replaced by a bfifo
// sized to the queue latency, and an interface without leaf_qdisc gets
// fq_codel where the kernel has it, else that bfifo. LeafNotes says so.
// Offline (LeafKinds nil) every leaf is used as configured and an
// interface without leaf_qdisc keeps the kernel's default pfifo.

// resolvedLeaf is the leaf a configured setting gets on this kernel, and
// the fallback note when it is not the configured one ("" otherwise).
func resolvedLeaf(l config.Leaf, latency time.Duration, kinds map[string]bool) (*model.LeafQdisc, string) {
	fallback := func(missing string) (*model.LeafQdisc, string) {
		return &model.LeafQdisc{Kind: model.LeafBfifo, Latency: latency},
			fmt.Sprintf("%s not available in this kernel; using bfifo sized to %s (behind a tbf that splits TCP aggregates where it is small)", missing, latency)
	}
	if l.Kind == "" {
		switch {
		case kinds == nil:
			return nil, ""
		case kinds[model.LeafFQCodel]:
			return &model.LeafQdisc{Kind: model.LeafFQCodel}, ""
		}
		return fallback(model.LeafFQCodel)
	}
	if have, probed := kinds[l.Kind]; probed && !have {
		return fallback(l.Kind)
	}
	return &model.LeafQdisc{Kind: l.Kind, Limit: l.Limit, Target: l.Target, Interval: l.Interval,
		Flows: l.Flows, Quantum: l.Quantum, Diffserv: l.Diffserv, Latency: latency}, ""
}

// effectiveLeaf layers a user's, its tier's and the interface's leaf
// settings: the first level with a kind, and the first with a latency.
// own reports whether the user or tier set anything (else the
// interface's leaf applies unchanged).
func effectiveLeaf(in *config.Interface, t *config.Tier, u *config.User) (l config.Leaf, latency time.Duration, own bool) {
	l, latency = in.Leaf, in.QueueLatency
	if latency == 0 {
		latency = config.DefaultQueueLatency
	}
	if t != nil {
		if t.Leaf.Kind != "" {
			l, own = t.Leaf, true
		}
		if t.QueueLatency != 0 {
			latency, own = t.QueueLatency, true
		}
	}
	if u != nil {
		if u.Leaf.Kind != "" {
			l, own = u.Leaf, true
		}
		if u.QueueLatency != 0 {
			latency, own = u.QueueLatency, true
		}
	}
	return l, latency, own
}

// leafCache resolves the leaves of one interface's users once per tier
// (users without a leaf setting of their own share their tier's).
type leafCache struct {
	in     *config.Interface
	kinds  map[string]bool
	byTier map[string]*model.LeafQdisc
}

// user returns the leaf of user u of tier t on the interface; nil: the
// interface's (InterfaceSpec.Leaf).
func (c *leafCache) user(t *config.Tier, u *config.User) *model.LeafQdisc {
	if u.Leaf.Kind == "" && u.QueueLatency == 0 {
		if t == nil {
			return nil
		}
		if l, ok := c.byTier[t.Name]; ok {
			return l
		}
		var l *model.LeafQdisc
		if cl, lat, own := effectiveLeaf(c.in, t, nil); own {
			l, _ = resolvedLeaf(cl, lat, c.kinds)
		}
		if c.byTier == nil {
			c.byTier = map[string]*model.LeafQdisc{}
		}
		c.byTier[t.Name] = l
		return l
	}
	cl, lat, _ := effectiveLeaf(c.in, t, u)
	l, _ := resolvedLeaf(cl, lat, c.kinds)
	return l
}

// LeafNotes says what happens to the plan's leaf settings on this
// router, one note per setting (an interface without leaf_qdisc
// included), at the setting's position:
//   - for a plan whose LeafKinds were probed, each kind the running kernel
//     lacks and what replaces it: "shaperd.toml:20:1: interface[0].leaf_qdisc:
//     fq_codel not available in this kernel; using bfifo sized to 50ms";
//   - each bfifo leaf_limit that holds fewer than model.SegmentBelow of
//     the interface's largest aggregates (plan.Links, else 64 KiB): the
//     aggregates are split into frames in front of it, and a limit below
//     one frame drops every full-size packet.
//
// `shaperd --check` prints them; the daemon logs them as warnings.
func LeafNotes(plan *config.Plan) []string {
	var notes []string
	add := func(where, key, msg string) {
		n := fmt.Sprintf("%s: %s: %s", where, key, msg)
		if where == "" {
			n = key + ": " + msg
		}
		if !slices.Contains(notes, n) {
			notes = append(notes, n)
		}
	}
	for i := range plan.Interfaces {
		in := &plan.Interfaces[i]
		if in.Shaper == config.ShaperTBF {
			continue
		}
		limitNote := func(l config.Leaf) {
			if msg := leafLimitNote(plan, in, l); msg != "" {
				add(l.Source, l.Key, msg)
			}
		}
		limitNote(in.Leaf)
		for j := range plan.Tiers {
			limitNote(plan.Tiers[j].Leaf)
		}
		for j := range plan.Users {
			limitNote(plan.Users[j].Leaf)
		}
		if plan.LeafKinds == nil {
			continue
		}
		cl, lat, _ := effectiveLeaf(in, nil, nil)
		if _, msg := resolvedLeaf(cl, lat, plan.LeafKinds); msg != "" {
			if in.Leaf.Kind != "" {
				add(in.Leaf.Source, in.Leaf.Key, msg)
			} else {
				add(in.Source, fmt.Sprintf("interface[%d] (%s %s)", i, in.Name, in.Direction), "default leaf qdisc: "+msg)
			}
		}
		for j := range plan.Tiers {
			t := &plan.Tiers[j]
			if t.Leaf.Kind == "" {
				continue
			}
			cl, lat, _ := effectiveLeaf(in, t, nil)
			if _, msg := resolvedLeaf(cl, lat, plan.LeafKinds); msg != "" {
				add(t.Leaf.Source, t.Leaf.Key, msg)
			}
		}
		for j := range plan.Users {
			u := &plan.Users[j]
			if u.Leaf.Kind == "" {
				continue
			}
			t, _ := plan.Tier(u.Tier)
			cl, lat, _ := effectiveLeaf(in, t, u)
			if _, msg := resolvedLeaf(cl, lat, plan.LeafKinds); msg != "" {
				add(u.Leaf.Source, u.Leaf.Key, msg)
			}
		}
	}
	return notes
}

// leafLimitNote is LeafNotes' note on a bfifo leaf_limit l on interface
// in, "" when it holds model.SegmentBelow aggregates or more.
func leafLimitNote(plan *config.Plan, in *config.Interface, l config.Leaf) string {
	if l.Kind != model.LeafBfifo || l.Limit == 0 {
		return ""
	}
	ls := plan.Links[in.Name]
	frame, aggregate := model.LinkSizesOf(model.InterfaceSpec{Frame: ls.Frame, Aggregate: ls.Aggregate})
	where := fmt.Sprintf("on interface %s (%s)", in.Name, in.Direction)
	switch {
	case tbf.Size(l.Limit) < frame:
		return fmt.Sprintf("leaf_limit %d bytes is below one %d-byte frame %s: every full-size packet is dropped; raise it to at least %d (two frames), or remove it to size the queue from queue_latency",
			l.Limit, frame, where, 2*frame)
	case uint64(l.Limit) < model.SegmentBelow*uint64(aggregate):
		return fmt.Sprintf("leaf_limit %d bytes holds fewer than %d of the %s aggregates TCP and GRO hand the qdisc %s: shaperd splits them into frames in front of the queue (a tbf leaf), since a bfifo drops an aggregate larger than its free space whole and TCP then gets a few percent of the rate",
			l.Limit, model.SegmentBelow, aggregate, where)
	}
	return ""
}
