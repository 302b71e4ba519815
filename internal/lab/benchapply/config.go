package main

import (
	"fmt"
	"net/netip"
	"strings"
)

// userAddr is user i's address: 198.18.0.0 + i (the benchmarking range).
func userAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{198, 18 + byte(i>>16), byte(i >> 8), byte(i)})
}

// daemonPlan is a configuration the daemon runs: Main is shaperd.toml
// without its [daemon] table (daemonlab adds it), Users is users.toml.
type daemonPlan struct {
	dev         string
	users       int
	main, files string
}

// iface describes the one [[interface]] of a bench plan: an egress HTB
// interface without link overhead whose users' classes keep the kernel's
// default leaf (leaf_qdisc = "pfifo" without a limit), so that the tc
// -batch peers build the same objects.
type iface struct {
	dev, bandwidth string
	// defaultRate is the default class's rate (its ceil is the bandwidth).
	defaultRate string
	// classifier is the classifier key ("": the daemon's default, bpf
	// where the kernel allows it); queues the queues key (0, 1: one tree).
	classifier string
	queues     int
}

// header writes [policy] and the [[interface]] table: set-rate, user
// changes and node changes take effect at once (ramp "0s").
func (in iface) header(sb *strings.Builder) {
	sb.WriteString("[policy]\nramp = \"0s\"\ntimezone = \"UTC\"\n\n")
	fmt.Fprintf(sb, "[[interface]]\nname = %q\nbandwidth = %q\ndefault_rate = %q\ndefault_ceil = %q\nleaf_qdisc = \"pfifo\"\n",
		in.dev, in.bandwidth, in.defaultRate, in.bandwidth)
	if in.classifier != "" {
		fmt.Fprintf(sb, "classifier = %q\n", in.classifier)
	}
	if in.queues > 1 {
		fmt.Fprintf(sb, "queues = %d\n", in.queues)
	}
	sb.WriteString("\n")
}

// tier writes a [tiers.NAME] table.
func tier(sb *strings.Builder, name, rate, ceil string) {
	fmt.Fprintf(sb, "[tiers.%s]\nrate = %q\nceil = %q\n\n", name, rate, ceil)
}

// user writes one [[user]] of users.toml.
func user(sb *strings.Builder, name, tier, node string, addr netip.Addr) {
	fmt.Fprintf(sb, "[[user]]\nname = %q\ntier = %q\n", name, tier)
	if node != "" {
		fmt.Fprintf(sb, "node = %q\n", node)
	}
	fmt.Fprintf(sb, "addresses = [%q]\n", addr.String())
}

// userName is the name of user i of a bench plan.
func userName(i int) string { return fmt.Sprintf("u%05d", i) }

// flatPlan is the flat bench plan: n users (userName(i), address
// userAddr(i), one /32 each) of tier bench, 1 mbit guaranteed and 10 mbit
// ceiling, on a 10 gbit interface (the plan of pkg/kernel's
// BenchmarkApply), with queues per-queue trees (0: one tree).
func flatPlan(dev string, n, queues int, classifier string) daemonPlan {
	var m, u strings.Builder
	iface{dev: dev, bandwidth: "10gbit", defaultRate: "1mbit", classifier: classifier, queues: queues}.header(&m)
	tier(&m, "bench", "1mbit", "10mbit")
	for i := range n {
		user(&u, userName(i), "bench", "", userAddr(i))
	}
	return daemonPlan{dev: dev, users: n, main: m.String(), files: u.String()}
}

// throughputPlan is the plan of (d): users users on a 20 gbit interface;
// the target (the last user, "target") gets 10 gbit guaranteed and may use
// all 20, the others have flatPlan's 1/10 mbit. The target's address is
// that of user n-1 of an n-user plan, the highest, so in the n-user plan
// its filter sorts last and is added last; a 1-user plan uses the same
// address.
func throughputPlan(dev string, users, n int, classifier string) daemonPlan {
	var m, u strings.Builder
	iface{dev: dev, bandwidth: "20gbit", defaultRate: "1mbit", classifier: classifier}.header(&m)
	tier(&m, "bench", "1mbit", "10mbit")
	tier(&m, "target", "10gbit", "20gbit")
	for i := range users - 1 {
		user(&u, userName(i), "bench", "", userAddr(i))
	}
	user(&u, "target", "target", "", userAddr(n-1))
	return daemonPlan{dev: dev, users: users, main: m.String(), files: u.String()}
}

// Hierarchy is the node tree of the hierarchy bench: Sites top-level
// nodes, Buildings spread evenly over the sites, APs over the buildings
// and the users over the APs (user i behind AP i*APs/users).
type Hierarchy struct {
	Sites, Buildings, APs, Users int
}

// apCeil is an AP's capacity (its ceil) in kbit/s.
const apCeil = 100_000

// Node names of the hierarchy bench.
func siteName(i int) string     { return fmt.Sprintf("site-%d", i) }
func buildingName(i int) string { return fmt.Sprintf("bldg-%d", i) }
func apName(i int) string       { return fmt.Sprintf("ap-%d", i) }

// perParent is the most children any of parents has when children are
// spread evenly over them.
func perParent(children, parents int) int { return (children + parents - 1) / parents }

// apOf is the AP user i is behind.
func (h Hierarchy) apOf(i int) int { return i * h.APs / h.Users }

// rates are the guaranteed rates in kbit/s of a site, a building, an AP
// and a user: what is left of the 10 gbit interface after the default
// class's 10 mbit, shared evenly down the tree; a user gets at most 500
// kbit.
func (h Hierarchy) rates() (site, bldg, ap, user int) {
	site = (10_000_000 - 10_000) / h.Sites
	bldg = site / perParent(h.Buildings, h.Sites)
	ap = bldg / perParent(h.APs, h.Buildings)
	return site, bldg, ap, min(500, ap/perParent(h.Users, h.APs))
}

// check refuses a hierarchy that cannot be spread evenly.
func (h Hierarchy) check() error {
	if h.Sites < 1 || h.Buildings < h.Sites || h.APs < h.Buildings || h.Users < h.APs {
		return fmt.Errorf("hierarchy %d sites, %d buildings, %d APs, %d users: each level needs at least as many as the one above", h.Sites, h.Buildings, h.APs, h.Users)
	}
	return nil
}

// hierarchyPlan is the network hierarchy bench: h.Users users behind
// h.APs access points in h.Buildings buildings at h.Sites sites, downloads
// (egress) on a 10 gbit interface. Each node's ceil is its link's capacity
// (a site 2 gbit, a building 400 mbit, an AP 100 mbit; at least its rate)
// and its rate its
// share of its parent's rate, so that the guarantees fit at every level
// and no oversubscription scaling (policy.Oversubscription) ties one
// node's change to its siblings; users have 0.5 mbit guaranteed (at most
// an AP's rate over its users) and ceilings of 2, 5 or 10 mbit (tiers s,
// m, l in turn).
func hierarchyPlan(dev string, h Hierarchy, classifier string) daemonPlan {
	var m, u strings.Builder
	iface{dev: dev, bandwidth: "10gbit", defaultRate: "10mbit", classifier: classifier}.header(&m)
	site, bldg, ap, userRate := h.rates()
	for i := range h.Sites {
		fmt.Fprintf(&m, "[nodes.%s]\nrate = \"%dkbit\"\nceil = \"%dkbit\"\n\n", siteName(i), site, max(site, 2_000_000))
	}
	for i := range h.Buildings {
		fmt.Fprintf(&m, "[nodes.%s]\nparent = %q\nrate = \"%dkbit\"\nceil = \"%dkbit\"\n\n", buildingName(i), siteName(i*h.Sites/h.Buildings), bldg, max(bldg, 400_000))
	}
	for i := range h.APs {
		fmt.Fprintf(&m, "[nodes.%s]\nparent = %q\nrate = \"%dkbit\"\nceil = \"%dkbit\"\n\n", apName(i), buildingName(i*h.Buildings/h.APs), ap, max(ap, apCeil))
	}
	tiers := []string{"s", "m", "l"}
	for i, c := range []string{"2mbit", "5mbit", "10mbit"} {
		tier(&m, tiers[i], fmt.Sprintf("%dkbit", userRate), c)
	}
	for i := range h.Users {
		user(&u, userName(i), tiers[i%3], apName(h.apOf(i)), userAddr(i))
	}
	return daemonPlan{dev: dev, users: h.Users, main: m.String(), files: u.String()}
}
