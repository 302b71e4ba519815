package main

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// userAddr is user i's address: 198.18.0.0 + i (the benchmarking range).
func userAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{198, 18 + byte(i>>16), byte(i >> 8), byte(i)})
}

// plan is an HTB plan for device dev with n users, each with one /32 dst
// filter, 1 mbit guaranteed and 10 mbit ceiling on a 10 gbit interface
// (the same plan as pkg/kernel's BenchmarkApply).
func plan(dev string, n int) model.Targets {
	tg := model.Targets{Interface: model.InterfaceSpec{Name: dev, Bandwidth: 10 * tbf.Gbit}}
	tg.Users = make([]model.UserTarget, n)
	for i := range tg.Users {
		tg.Users[i] = model.UserTarget{
			Name:     fmt.Sprintf("u%05d", i),
			Rate:     tbf.Mbit,
			Ceil:     10 * tbf.Mbit,
			Prefixes: []netip.Prefix{netip.PrefixFrom(userAddr(i), 32)},
		}
	}
	return tg
}

// classLines writes tc commands creating t's root qdisc and classes with
// the same rate, ceil, burst, cburst, quantum and prio as shaperd's.
func classLines(sb *strings.Builder, t model.Tree) {
	fmt.Fprintf(sb, "qdisc add dev %s root handle 1: htb default %x r2q 10\n", t.Device, t.Root.DefaultMinor)
	for _, c := range t.Classes {
		fmt.Fprintf(sb, "class add dev %s parent %s classid %s htb rate %dbit ceil %dbit burst %d cburst %d quantum %d prio %d\n",
			t.Device, c.Parent, c.Handle, uint64(c.Rate), uint64(c.Ceil), uint64(c.Burst), uint64(c.CBurst), c.Quantum, c.Prio)
	}
}

// flatBatch is the peer a shell-script shaper writes: t's classes, then one
// linear u32 filter per user (`match ip dst X/32 flowid C`, one priority).
func flatBatch(t model.Tree) string {
	var sb strings.Builder
	classLines(&sb, t)
	for _, f := range t.Filters {
		fmt.Fprintf(&sb, "filter add dev %s parent 1: protocol ip prio 1 u32 match ip dst %s flowid %s\n", t.Device, f.Prefix, f.ClassID)
	}
	return sb.String()
}

// hashedBatch creates t's classes and the same u32 objects as shaperd's
// layout (pkg/kernel/u32, doc.go) for IPv4 /32 dst filters: the four
// priorities 100..103 (root tables 800:..803:), the level-1 tables 10:..15:
// with their root links, then per filter its level-2 table 1NN: (NN = the
// 3rd octet) and that table's link from level-1 bucket NN (node 1) when
// first needed, and the filter as node 10 of level-2 bucket = 4th octet.
// The caller checks with a Dump that shaperd reads it as its own tree.
// It returns "" when t has a filter it does not cover.
func hashedBatch(t model.Tree) string {
	var sb strings.Builder
	classLines(&sb, t)
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
			return ""
		}
		a := f.Prefix.Addr().As4()
		if used[[2]byte{a[2], a[3]}] {
			return "" // a second node in the bucket would take id 11
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
	return sb.String()
}
