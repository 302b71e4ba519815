package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// classLines writes tc commands creating t's root qdisc and classes with
// the same rate, ceil, burst, cburst, quantum and prio as shaperd's,
// parents before their children (node classes, then the classes below
// them). It refuses a tree tc's lines would not reproduce: per-queue
// trees, explicit leaf qdiscs, link overhead.
func classLines(sb *strings.Builder, t model.Tree) error {
	if t.Root == nil || t.Root.Kind != model.ShaperHTB || len(t.Queues) > 0 || t.Root.SizeOverhead != 0 {
		return fmt.Errorf("the tc peer builds one HTB tree without a size table")
	}
	fmt.Fprintf(sb, "qdisc add dev %s root handle 1: htb default %x r2q 10\n", t.Device, t.Root.DefaultMinor)
	parent := make(map[model.Handle]model.Handle, len(t.Classes))
	for _, c := range t.Classes {
		parent[c.Handle] = c.Parent
	}
	depth := func(h model.Handle) int {
		n := 0
		for p, ok := parent[h]; ok && n <= len(parent); p, ok = parent[p] {
			n++
		}
		return n
	}
	classes := slices.Clone(t.Classes)
	slices.SortStableFunc(classes, func(a, b model.Class) int { return cmp.Compare(depth(a.Handle), depth(b.Handle)) })
	for _, c := range classes {
		if c.Leaf != nil || c.Framing != (psched.Framing{}) {
			return fmt.Errorf("class %s has a leaf qdisc or link framing the tc peer does not write", c.Handle)
		}
		fmt.Fprintf(sb, "class add dev %s parent %s classid %s htb rate %dbit ceil %dbit burst %d cburst %d quantum %d prio %d\n",
			t.Device, c.Parent, c.Handle, uint64(c.Rate), uint64(c.Ceil), uint64(c.Burst), uint64(c.CBurst), c.Quantum, c.Prio)
	}
	return nil
}

// flatBatch is the peer a shell-script shaper writes: t's classes, then one
// linear u32 filter per user (`match ip dst X/32 flowid C`, one priority).
// It refuses a filter that is not an IPv4 destination.
func flatBatch(t model.Tree) (string, error) {
	var sb strings.Builder
	if err := classLines(&sb, t); err != nil {
		return "", err
	}
	for _, f := range t.Filters {
		if !f.Prefix.Addr().Is4() || f.Match != model.MatchDst {
			return "", fmt.Errorf("filter %s: the flat tc peer writes IPv4 destination filters only", f.Prefix)
		}
		fmt.Fprintf(&sb, "filter add dev %s parent 1: protocol ip prio 1 u32 match ip dst %s flowid %s\n", t.Device, f.Prefix, f.ClassID)
	}
	return sb.String(), nil
}

// hashedBatch creates t's classes and the same u32 objects as shaperd's
// layout (pkg/kernel/u32, doc.go) for IPv4 /32 dst filters: the four
// priorities 100..103 (root tables 800:..803:), the level-1 tables 10:..15:
// with their root links, then per filter its level-2 table 1NN: (NN = the
// 3rd octet) and that table's link from level-1 bucket NN (node 1) when
// first needed, and the filter as node 10 of level-2 bucket = 4th octet.
// The caller checks with a Dump that shaperd reads it as its own tree.
// It refuses a tree with a filter it does not cover.
func hashedBatch(t model.Tree) (string, error) {
	var sb strings.Builder
	if err := classLines(&sb, t); err != nil {
		return "", err
	}
	d := t.Device
	prios := []struct {
		prio  int
		proto string
		root  string
		links []string // "node htid off" of the root links, in node order
	}{
		{100, "ip", "800", []string{"1 10 16"}},
		{101, "ip", "801", []string{"1 11 12"}},
		{102, "ipv6", "802", []string{"1 14 36", "2 12 28"}},
		{103, "ipv6", "803", []string{"1 15 20", "2 13 12"}},
	}
	for _, p := range prios {
		fmt.Fprintf(&sb, "filter add dev %s parent 1: protocol %s prio %d u32\n", d, p.proto, p.prio)
	}
	for _, p := range prios {
		for _, l := range p.links {
			var node, htid, off int
			fmt.Sscanf(l, "%d %x %d", &node, &htid, &off)
			fmt.Fprintf(&sb, "filter add dev %s parent 1: protocol %s prio %d handle %x: u32 divisor 256\n", d, p.proto, p.prio, htid)
			fmt.Fprintf(&sb, "filter add dev %s parent 1: protocol %s prio %d handle %s::%x u32 ht %s:: link %x: hashkey mask 0x0000ff00 at %d match u32 0 0\n",
				d, p.proto, p.prio, p.root, node, p.root, htid, off)
		}
	}
	made := map[byte]bool{}
	used := map[[2]byte]bool{}
	for _, f := range t.Filters {
		if !f.Prefix.Addr().Is4() || f.Prefix.Bits() != 32 || f.Match != model.MatchDst {
			return "", fmt.Errorf("filter %s: the hashed tc peer covers IPv4 /32 destination filters only", f.Prefix)
		}
		a := f.Prefix.Addr().As4()
		if used[[2]byte{a[2], a[3]}] {
			return "", fmt.Errorf("filter %s: a second node in its bucket (the hashed tc peer writes one)", f.Prefix)
		}
		used[[2]byte{a[2], a[3]}] = true
		l2 := 0x100 + int(a[2])
		if !made[a[2]] {
			made[a[2]] = true
			fmt.Fprintf(&sb, "filter add dev %s parent 1: protocol ip prio 100 handle %x: u32 divisor 256\n", d, l2)
			fmt.Fprintf(&sb, "filter add dev %s parent 1: protocol ip prio 100 handle 10:%x:1 u32 ht 10:%x: link %x: hashkey mask 0x000000ff at 16 match u32 0 0\n",
				d, a[2], a[2], l2)
		}
		fmt.Fprintf(&sb, "filter add dev %s parent 1: protocol ip prio 100 handle %x:%x:10 u32 ht %x:%x: match ip dst %s flowid %s\n",
			d, l2, a[3], l2, a[3], f.Prefix, f.ClassID)
	}
	return sb.String(), nil
}
