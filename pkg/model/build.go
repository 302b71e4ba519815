package model

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/shaperd/shaperd/pkg/tbf"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// Defaults and limits Build applies.
const (
	// MinDefaultClassRate is the least guaranteed rate of the default class
	// when InterfaceSpec.DefaultRate is 0; see DefaultClassRate.
	MinDefaultClassRate = tbf.Mbit
	// MaxPrio is the highest HTB class priority (the kernel has 8: 0..7).
	MaxPrio = 7
)

// DefaultClassRate is the guaranteed rate Build gives unclassified traffic
// when InterfaceSpec.DefaultRate is 0: 1% of the bandwidth, at least
// MinDefaultClassRate (1mbit), at most the bandwidth. It is small on
// purpose: the default class guarantees that unclassified traffic (ARP
// replies, DNS, management) is never starved, and may still borrow up to
// DefaultCeil (default: the whole bandwidth) when users leave capacity idle.
func DefaultClassRate(bandwidth tbf.Rate) tbf.Rate {
	return min(bandwidth, max(MinDefaultClassRate, bandwidth/100))
}

// Build returns the desired Tree of one interface from its targets.
//
// Zero values in the interface spec take defaults: Shaper "" is HTB,
// Direction "" is egress, Match "" is dst for egress and src for ingress.
// For ingress the Tree is on the IFB device and carries a Redirect from the
// real interface.
//
// HTB: root qdisc 1: with default minor 2; root class 1:1 with rate = ceil =
// Bandwidth; the default class 1:2 under 1:1 (DefaultRate, default
// DefaultClassRate; DefaultCeil, default Bandwidth); one aggregate class per
// TierTarget (minors FirstTierMinor..LastTierMinor) under 1:1; one leaf class
// per user (minors FirstUserMinor..LastUserMinor) under its tier's class if
// the tier has a TierTarget, else under 1:1; one filter per user prefix
// (masked to its prefix length) pointing to the user's class. Every class
// has an explicit quantum (psched.HTBQuantum of its rate), Burst/CBurst (given,
// else tbf.RecommendedBurst of rate/ceil; a tier's Burst serves as both)
// and the Buffer/CBuffer ticks the kernel holds (tbf.BufferTicks). User
// classes and the default class get the interface's Leaf qdisc; a pfifo leaf
// without a limit is the kernel's default and is left nil. Leaf pointers
// are shared between the classes of a tree: treat them as read-only. A Ceil of 0
// means Ceil = Rate. Child rates may add up to more than the parent's
// (HTB allows oversubscription), and a ceil above the parent's ceil is kept
// as given: HTB never lets a child borrow more than its parent has.
//
// ids supplies stable class minors: Build calls ids.AssignTiers with the
// TierTarget names and ids.Assign with the user names, so users and tiers
// missing from t are released from ids. On error ids is unchanged. A nil
// ids uses a fresh Assignment (minors then follow sorted names).
//
// TBF: one tbf root qdisc with rate Bandwidth, burst Burst (default
// tbf.RecommendedBurst, at least one MaxFrame), limit = rate*Latency + burst
// (Latency default DefaultTBFLatency) and, when PeakRate is set, the peak
// bucket with MTU (default MaxFrame). A TBF shapes the whole link: Tiers
// and Users are ignored (assigning users to a TBF interface is a config
// concern) and ids is not touched.
//
// Errors name the interface and the user or tier: a rate below 8 bit/s
// (0 bytes/s), a ceil below the rate, an invalid or duplicate prefix, a
// duplicate user or tier name, a prio above MaxPrio, a burst whose buffer
// does not fit the kernel's 32-bit tick fields, more users or tiers than
// there are minors (ErrTooManyUsers, ErrTooManyTiers).
func Build(t Targets, ids *Assignment) (Tree, error) {
	spec := t.Interface
	if spec.Name == "" {
		return Tree{}, fmt.Errorf("build: interface without a name")
	}
	tree, err := buildDevice(spec)
	if err != nil {
		return Tree{}, fmt.Errorf("interface %s: %w", spec.Name, err)
	}
	switch spec.Shaper {
	case ShaperHTB, "":
		if spec.Queues > 1 {
			err = buildMQ(&tree, t, ids)
		} else {
			err = buildHTB(&tree, t, ids)
		}
	case ShaperTBF:
		tree.Root, err = buildTBF(spec)
	default:
		err = fmt.Errorf("unknown shaper %q (want %q or %q)", spec.Shaper, ShaperHTB, ShaperTBF)
	}
	if err != nil {
		return Tree{}, fmt.Errorf("interface %s: %w", spec.Name, err)
	}
	return tree, nil
}

// buildDevice picks the device and redirect for the spec's direction.
func buildDevice(spec InterfaceSpec) (Tree, error) {
	if spec.Bandwidth.BytesPerSecond() == 0 {
		return Tree{}, &FieldError{"bandwidth", fmt.Errorf("bandwidth %s is below 8bit (0 bytes/s)", spec.Bandwidth)}
	}
	switch spec.Direction {
	case Egress, "":
		return Tree{Device: spec.Name}, nil
	case Ingress:
		if spec.IFB == "" {
			return Tree{}, fmt.Errorf("ingress shaping needs an IFB device")
		}
		if spec.IFB == spec.Name {
			return Tree{}, fmt.Errorf("IFB device %s is the interface itself", spec.IFB)
		}
		r := &Redirect{Interface: spec.Name, IFB: spec.IFB}
		if spec.Queues > 1 {
			r.Queues = spec.Queues
		}
		return Tree{Device: spec.IFB, Redirect: r}, nil
	}
	return Tree{}, fmt.Errorf("unknown direction %q (want %q or %q)", spec.Direction, Egress, Ingress)
}

// matchOf returns the match field, defaulted by direction.
func matchOf(spec InterfaceSpec) (MatchField, error) {
	switch spec.Match {
	case MatchDst, MatchSrc:
		return spec.Match, nil
	case "":
		if spec.Direction == Ingress {
			return MatchSrc, nil
		}
		return MatchDst, nil
	}
	return "", fmt.Errorf("unknown match %q (want %q or %q)", spec.Match, MatchDst, MatchSrc)
}

// normLeaf validates the leaf spec and returns nil for the kernel's default.
func normLeaf(l *LeafQdisc) (*LeafQdisc, error) {
	if l == nil {
		return nil, nil
	}
	if l.Kind == "" {
		return nil, fmt.Errorf("leaf qdisc without a kind")
	}
	if l.Kind == LeafPfifo && l.Limit == 0 {
		return nil, nil
	}
	c := *l
	return &c, nil
}

// sizeLeaf returns the leaf of a class with ceil on interface spec. Only a
// bfifo changes; any other leaf is returned as is. The bfifo's queue is its
// Limit, or, without one, ceil * Latency bytes, at least two frames (at
// most the kernel's u32). When that queue holds fewer than SegmentBelow of
// the interface's largest aggregates, the leaf becomes a LeafTBF that
// splits aggregates into frames in front of the same queue; above a ceil
// of SegmentRate/8 it stays a bfifo of at least two aggregates instead.
// The result is a copy.
func sizeLeaf(l *LeafQdisc, ceil tbf.Rate, spec InterfaceSpec) *LeafQdisc {
	if l == nil || l.Kind != LeafBfifo || (l.Limit == 0 && l.Latency <= 0) {
		return l
	}
	frame, aggregate := LinkSizesOf(spec)
	c := *l
	if c.Limit == 0 {
		bytes := float64(ceil.BytesPerSecond()) * l.Latency.Seconds()
		c.Limit = uint32(min(max(bytes, float64(2*frame)), math.MaxUint32))
	}
	if uint64(c.Limit) >= SegmentBelow*uint64(aggregate) {
		return &c
	}
	if ceil > SegmentRate/8 {
		c.Limit = uint32(min(max(uint64(c.Limit), 2*uint64(aggregate)), math.MaxUint32))
		return &c
	}
	c.Kind, c.Segment = LeafTBF, (frame+SegmentGrain-1)/SegmentGrain*SegmentGrain
	return &c
}

// LinkSizesOf returns the interface's largest frame and aggregate, with
// DefaultFrame and DefaultAggregate for those not known, and an aggregate
// never smaller than a frame.
func LinkSizesOf(spec InterfaceSpec) (frame, aggregate tbf.Size) {
	frame, aggregate = spec.Frame, spec.Aggregate
	if frame == 0 {
		frame = DefaultFrame
	}
	if aggregate == 0 {
		aggregate = DefaultAggregate
	}
	return frame, max(aggregate, frame)
}

// classSpec is what a class is made from.
type classSpec struct {
	rate, ceil    tbf.Rate
	burst, cburst tbf.Size
	prio          uint32
}

// makeClass validates s and computes the kernel's parameters. Handle and
// Parent are left to the caller.
func makeClass(s classSpec, leaf *LeafQdisc, labels Labels) (Class, error) {
	if s.rate.BytesPerSecond() == 0 {
		return Class{}, fmt.Errorf("rate %s is below 8bit (0 bytes/s)", s.rate)
	}
	if s.ceil == 0 {
		s.ceil = s.rate
	}
	if s.ceil < s.rate {
		return Class{}, fmt.Errorf("ceil %s is below rate %s", s.ceil, s.rate)
	}
	if s.prio > MaxPrio {
		return Class{}, fmt.Errorf("prio %d is above %d", s.prio, MaxPrio)
	}
	if s.burst == 0 {
		s.burst = tbf.RecommendedBurst(s.rate)
	}
	if s.cburst == 0 {
		s.cburst = tbf.RecommendedBurst(s.ceil)
	}
	buf, err := tbf.BufferTicks(s.rate, s.burst)
	if err != nil {
		return Class{}, fmt.Errorf("burst %s at rate %s: %w", s.burst, s.rate, err)
	}
	cbuf, err := tbf.BufferTicks(s.ceil, s.cburst)
	if err != nil {
		return Class{}, fmt.Errorf("cburst %s at ceil %s: %w", s.cburst, s.ceil, err)
	}
	return Class{
		Rate: s.rate, Ceil: s.ceil,
		Burst: s.burst, CBurst: s.cburst,
		Buffer: buf, CBuffer: cbuf,
		Quantum: psched.HTBQuantum(s.rate.BytesPerSecond()),
		Prio:    s.prio,
		Leaf:    leaf,
		Labels:  labels,
	}, nil
}

func buildHTB(tree *Tree, t Targets, ids *Assignment) error {
	spec := t.Interface
	match, err := matchOf(spec)
	if err != nil {
		return err
	}
	leaf, err := normLeaf(spec.Leaf)
	if err != nil {
		return err
	}
	root, err := makeClass(classSpec{rate: spec.Bandwidth, ceil: spec.Bandwidth}, nil, Labels{Kind: "root"})
	if err != nil {
		return fmt.Errorf("root class: %w", err)
	}
	root.Handle, root.Parent = RootClass, RootQdisc
	defRate, defCeil := spec.DefaultRate, spec.DefaultCeil
	if defRate == 0 {
		defRate = DefaultClassRate(spec.Bandwidth)
	}
	if defCeil == 0 {
		defCeil = spec.Bandwidth
	}
	def, err := makeClass(classSpec{rate: defRate, ceil: defCeil}, sizeLeaf(leaf, defCeil, spec), Labels{Kind: "default"})
	if err != nil {
		return fmt.Errorf("default class: %w", err)
	}
	def.Handle, def.Parent = DefaultClass, RootClass

	tiers, tierNames, err := tierClasses(t.Tiers)
	if err != nil {
		return err
	}
	nodes, nodeKeys, err := nodeClasses(t.Nodes)
	if err != nil {
		return err
	}
	users, userNames, err := userClasses(t.Users, leaf, spec)
	if err != nil {
		return err
	}
	filters, err := userFilters(t.Users, match)
	if err != nil {
		return err
	}
	if len(tierNames) > MaxTiers {
		return fmt.Errorf("%d tiers with an aggregate class: %w: at most %d", len(tierNames), ErrTooManyTiers, MaxTiers)
	}
	if len(userNames)+len(nodeKeys) > MaxUsers {
		return fmt.Errorf("%d users and %d nodes: %w: an interface holds at most %d user and node classes", len(userNames), len(nodeKeys), ErrTooManyUsers, MaxUsers)
	}
	if ids == nil {
		ids = NewAssignment()
	}
	// Cannot fail now: names are unique and within the limits.
	if err := ids.AssignTiers(tierNames); err != nil {
		return err
	}
	if err := ids.Assign(append(userNames, nodeKeys...)); err != nil {
		return err
	}

	major := RootQdisc.Major()
	tierHandle := make(map[string]Handle, len(tiers))
	classes := make([]Class, 0, 2+len(tiers)+len(users))
	rs := spec.Framing.RateSpec()
	root.Framing, def.Framing = rs, rs
	for i := range tiers {
		tiers[i].Framing = rs
	}
	for i := range users {
		users[i].Framing = rs
	}
	for i := range nodes {
		nodes[i].Framing = rs
	}
	classes = append(classes, root, def)
	for _, c := range tiers {
		m, _ := ids.Tier(c.Labels.Tier)
		c.Handle, c.Parent = MakeHandle(major, m), RootClass
		tierHandle[c.Labels.Tier] = c.Handle
		classes = append(classes, c)
	}
	nodeHandle := make(map[string]Handle, len(nodes))
	for i, c := range nodes {
		m, _ := ids.Node(c.Labels.Node)
		c.Handle, c.Parent = MakeHandle(major, m), RootClass
		if p := t.Nodes[i].Parent; p != "" {
			c.Parent = nodeHandle[p] // listed before: nodeClasses checked
		}
		nodeHandle[c.Labels.Node] = c.Handle
		classes = append(classes, c)
	}
	first := len(classes)
	for _, c := range users {
		m, _ := ids.User(c.Labels.User)
		c.Handle, c.Parent = MakeHandle(major, m), RootClass
		if c.Labels.Node != "" {
			h, ok := nodeHandle[c.Labels.Node]
			if !ok {
				return fmt.Errorf("user %s: node %s has no target on this interface", c.Labels.User, c.Labels.Node)
			}
			c.Parent = h
		} else if h, ok := tierHandle[c.Labels.Tier]; ok {
			c.Parent = h
		}
		classes = append(classes, c)
	}
	for i := range filters {
		c := &classes[first+int(filters[i].ClassID)] // the user's index, see userFilters
		filters[i].ClassID, filters[i].Labels = c.Handle, c.Labels
	}
	tree.Root = &Qdisc{Kind: ShaperHTB, Handle: RootQdisc, DefaultMinor: DefaultClass.Minor(),
		SizeOverhead: spec.Framing.SizeTableOverhead()}
	slices.SortFunc(classes, CompareClasses)
	tree.Classes = classes
	tree.Filters = filters // sorted by userFilters; ClassIDs do not change the order
	return nil
}

// userFilters validates the users' prefixes and returns their filters,
// masked and sorted, with ClassID holding the user's index in us until the
// caller knows the class. Two users (or one user twice) with the same
// prefix is an error naming both.
func userFilters(us []UserTarget, match MatchField) ([]Filter, error) {
	n := 0
	for i := range us {
		n += len(us[i].Prefixes)
	}
	filters := make([]Filter, 0, n)
	for i, u := range us {
		for _, p := range u.Prefixes {
			if !p.IsValid() {
				return nil, fmt.Errorf("user %s: invalid prefix %q", u.Name, p.String())
			}
			filters = append(filters, Filter{Prefix: p.Masked(), Match: match, ClassID: Handle(i)})
		}
	}
	slices.SortFunc(filters, func(a, b Filter) int {
		if c := CompareFilters(a, b); c != 0 {
			return c
		}
		return cmp.Compare(a.ClassID, b.ClassID)
	})
	for i := 1; i < len(filters); i++ {
		if filters[i].Prefix != filters[i-1].Prefix {
			continue
		}
		a, b := us[filters[i-1].ClassID].Name, us[filters[i].ClassID].Name
		if a == b {
			return nil, fmt.Errorf("user %s: prefix %s listed twice", b, filters[i].Prefix)
		}
		return nil, fmt.Errorf("user %s: prefix %s already belongs to user %s", b, filters[i].Prefix, a)
	}
	return filters, nil
}

// tierClasses validates the tier targets and makes their classes (without
// handles), in input order, with their names.
func tierClasses(ts []TierTarget) ([]Class, []string, error) {
	classes := make([]Class, 0, len(ts))
	names := make([]string, 0, len(ts))
	seen := make(map[string]bool, len(ts))
	for _, tt := range ts {
		if tt.Name == "" {
			return nil, nil, fmt.Errorf("tier without a name")
		}
		if seen[tt.Name] {
			return nil, nil, fmt.Errorf("tier %s: listed twice", tt.Name)
		}
		seen[tt.Name] = true
		c, err := makeClass(classSpec{rate: tt.Rate, ceil: tt.Ceil, burst: tt.Burst, cburst: tt.Burst}, nil,
			Labels{Kind: "tier", Tier: tt.Name})
		if err != nil {
			return nil, nil, fmt.Errorf("tier %s: %w", tt.Name, err)
		}
		classes = append(classes, c)
		names = append(names, tt.Name)
	}
	return classes, names, nil
}

// MaxNodeDepth is how many node classes may stand between the root class
// and a user's: HTB trees are at most 8 classes deep (the kernel refuses a
// class whose grandparent is below level 2), and the root's and the
// user's classes take two.
const MaxNodeDepth = 6

// nodeClasses validates the node targets (names unique, parents listed
// before their children, at most MaxNodeDepth deep) and makes their
// classes (without handles), in input order, with their keys in the
// users' minor pool.
func nodeClasses(ns []NodeTarget) ([]Class, []string, error) {
	classes := make([]Class, 0, len(ns))
	keys := make([]string, 0, len(ns))
	depth := make(map[string]int, len(ns))
	for _, n := range ns {
		if n.Name == "" {
			return nil, nil, fmt.Errorf("node without a name")
		}
		if _, dup := depth[n.Name]; dup {
			return nil, nil, fmt.Errorf("node %s: listed twice", n.Name)
		}
		d := 1
		if n.Parent != "" {
			pd, ok := depth[n.Parent]
			if !ok {
				return nil, nil, fmt.Errorf("node %s: parent %s is not listed before it", n.Name, n.Parent)
			}
			d = pd + 1
		}
		if d > MaxNodeDepth {
			return nil, nil, fmt.Errorf("node %s: %d levels deep, at most %d fit in an HTB tree", n.Name, d, MaxNodeDepth)
		}
		depth[n.Name] = d
		c, err := makeClass(classSpec{rate: n.Rate, ceil: n.Ceil, burst: n.Burst, cburst: n.Burst}, nil,
			Labels{Kind: "node", Node: n.Name})
		if err != nil {
			return nil, nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		classes = append(classes, c)
		keys = append(keys, nodeKey(n.Name))
	}
	return classes, keys, nil
}

// userClasses validates the user targets and makes their classes (without
// handles), in input order, with their names. Each gets its own leaf, else
// leaf, sized for its ceil on interface spec (sizeLeaf); users with the
// same leaf settings and ceil share the sized leaf.
func userClasses(us []UserTarget, leaf *LeafQdisc, spec InterfaceSpec) ([]Class, []string, error) {
	classes := make([]Class, 0, len(us))
	names := make([]string, 0, len(us))
	seen := make(map[string]bool, len(us))
	// Users with the same leaf settings and ceil share one sized leaf (the
	// trees never change a leaf in place).
	type sizedKey struct {
		leaf *LeafQdisc
		ceil tbf.Rate
	}
	sized := map[sizedKey]*LeafQdisc{}
	for _, u := range us {
		if u.Name == "" {
			return nil, nil, fmt.Errorf("user without a name")
		}
		if seen[u.Name] {
			return nil, nil, fmt.Errorf("user %s: listed twice", u.Name)
		}
		seen[u.Name] = true
		ceil := u.Ceil
		if ceil == 0 {
			ceil = u.Rate
		}
		k := sizedKey{u.Leaf, ceil}
		sl, ok := sized[k]
		if !ok {
			ul, err := leaf, error(nil)
			if u.Leaf != nil {
				if ul, err = normLeaf(u.Leaf); err != nil {
					return nil, nil, fmt.Errorf("user %s: %w", u.Name, err)
				}
			}
			sl = sizeLeaf(ul, ceil, spec)
			sized[k] = sl
		}
		c, err := makeClass(classSpec{rate: u.Rate, ceil: u.Ceil, burst: u.Burst, cburst: u.CBurst, prio: u.Prio}, sl,
			Labels{Kind: "user", Tier: u.Tier, User: u.Name, Node: u.Node})
		if err != nil {
			return nil, nil, fmt.Errorf("user %s: %w", u.Name, err)
		}
		if u.Quantum != 0 {
			c.Quantum = u.Quantum
		}
		classes = append(classes, c)
		names = append(names, u.Name)
	}
	return classes, names, nil
}
