package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// decodeUsers reads every [[user]] of the users file and checks names,
// tiers and that no two addresses overlap.
func decodeUsers(ut *table, tiers []Tier, nodes []Node, ifaces []Interface) []User {
	entries, ok := ut.tables("user")
	if !ok {
		return nil
	}
	f := ut.f
	byNode := make(map[string]*Node, len(nodes))
	for i := range nodes {
		byNode[nodes[i].Name] = &nodes[i]
	}
	users := make([]User, 0, len(entries))
	var addrs []addrEntry
	first := map[string]string{} // name -> path of its first entry
	for i, t := range entries {
		u, at := decodeUser(t, tiers, byNode, ifaces)
		if u.Name != "" {
			if p, dup := first[u.Name]; dup {
				f.errf(t.key("name"), "duplicate user %q (first defined by %s at %s)", u.Name, p, f.where(p+".name"))
			} else {
				first[u.Name] = t.path
			}
		}
		for j, p := range u.Prefixes {
			addrs = append(addrs, addrEntry{prefix: p, user: i, table: t.path, at: at[j]})
		}
		users = append(users, u)
	}
	reportOverlaps(f, users, addrs)
	return users
}

// decodeUser reads one [[user]]; at holds the index in addresses of each
// of the user's Prefixes.
func decodeUser(t *table, tiers []Tier, nodes map[string]*Node, ifaces []Interface) (u User, at []int) {
	u = User{Source: t.f.where(t.path)}
	t.require("name", "tier", "addresses")
	if s, ok := t.str("name"); ok {
		if ValidName(s) {
			u.Name = s
		} else {
			t.errf("name", "user name %q is not valid: use %s", s, NameRule)
		}
	}
	if s, ok := t.str("tier"); ok {
		if tierIndex(tiers, s) < 0 {
			t.errf("tier", "unknown tier %q for user %q (%s)", s, u.Name, tierList(tiers))
		} else {
			u.Tier = s
		}
	}
	if addrs, ok := t.strs("addresses"); ok {
		if raw, _ := t.m["addresses"].([]any); len(raw) == 0 {
			t.errf("addresses", "no addresses given")
		}
		for _, a := range addrs {
			p, err := parseAddress(a.s)
			if err != nil {
				t.f.errf(index(t.key("addresses"), a.i), "%v", err)
				continue
			}
			u.Prefixes = append(u.Prefixes, p)
			at = append(at, a.i)
		}
	}
	u.Rate, u.Ceil, _, _ = rateCeil(t, "rate", "ceil")
	if !t.has("ceil") {
		u.Ceil = 0
	}
	u.UploadRate, u.UploadCeil, _, _ = rateCeil(t, "upload_rate", "upload_ceil")
	if !t.has("upload_ceil") {
		u.UploadCeil = 0
	}
	decodeUserTierSettings(t, &u, tiers)
	u.Leaf, u.QueueLatency = decodeLeaf(t)
	nodeOfUser(t, &u, nodes)
	if list, ok := t.strs("interfaces"); ok {
		if len(list) == 0 {
			t.errf("interfaces", "no interfaces given (leave the key out for the tier's)")
		}
		for _, e := range list {
			if !htbInterface(ifaces, e.s) {
				t.f.errf(index(t.key("interfaces"), e.i), "user %q is on interface %q, which no [[interface]] with shaper = \"htb\" configures", u.Name, e.s)
				continue
			}
			u.Interfaces = append(u.Interfaces, e.s)
		}
	}
	t.finish()
	return u, at
}

// parseAddress reads an IP address (a /32 or /128) or a CIDR prefix
// without host bits.
func parseAddress(s string) (netip.Prefix, error) {
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		p, err = netip.ParsePrefix(s)
		if err != nil {
			return p, fmt.Errorf("%q is not an IP address or CIDR prefix", s)
		}
		if p.Masked() != p {
			return p, fmt.Errorf("%s has bits set after the prefix length (did you mean %s?)", s, p.Masked())
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return p, fmt.Errorf("%q is not an IP address or CIDR prefix", s)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Addr().Is4In6() {
		return p, fmt.Errorf("%s is an IPv4-mapped IPv6 address: write the IPv4 address", s)
	}
	return p, nil
}

// showPrefix writes a single address without its /32 or /128.
func showPrefix(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}

// sharedNames is how many user names an error about one address shared by
// many entries lists before it says how many more there are.
const sharedNames = 3

// reportOverlaps reports addresses that are equal or overlap. Entries with
// the same prefix are one group, reported once at the group's second entry
// with the users that share it (the first few names and a count), so n
// users with one address make one error, not n²/2. Overlaps between
// different prefixes are found among the groups' first entries
// (overlaps: sorted, O(n log n) plus one error per pair, and a prefix has
// at most 128 shorter ones containing it).
func reportOverlaps(f *file, users []User, addrs []addrEntry) {
	order := make([]int, len(addrs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		pa, pb := addrs[a].prefix, addrs[b].prefix
		if c := pa.Addr().Compare(pb.Addr()); c != 0 {
			return c
		}
		return pa.Bits() - pb.Bits()
	})
	var firsts []addrEntry
	for lo := 0; lo < len(order); {
		hi := lo + 1
		for hi < len(order) && addrs[order[hi]].prefix == addrs[order[lo]].prefix {
			hi++
		}
		group := order[lo:hi] // in file order: addrs are appended in file order
		firsts = append(firsts, addrs[group[0]])
		if len(group) > 1 {
			reportShared(f, users, addrs, group)
		}
		lo = hi
	}
	for _, o := range overlaps(firsts) {
		a, b := firsts[o[0]], firsts[o[1]]
		if pa, pb := f.at(a.path()), f.at(b.path()); pb.Line < pa.Line || pb.Line == pa.Line && pb.Col < pa.Col {
			a, b = b, a
		}
		owner := fmt.Sprintf("user %q", users[a.user].Name)
		if a.user == b.user {
			owner = "the same user"
		}
		f.errf(b.path(), "%s of user %q overlaps %s of %s at %s",
			showPrefix(b.prefix), users[b.user].Name, showPrefix(a.prefix), owner, f.where(a.path()))
	}
}

// reportShared reports one address written by several entries (group:
// indexes into addrs, in file order) once, at the second entry.
func reportShared(f *file, users []User, addrs []addrEntry, group []int) {
	a, b := addrs[group[0]], addrs[group[1]]
	p := showPrefix(a.prefix)
	if len(group) == 2 {
		owner := fmt.Sprintf("user %q", users[a.user].Name)
		if a.user == b.user {
			owner = "the same user"
		}
		f.errf(b.path(), "%s of user %q is also an address of %s at %s", p, users[b.user].Name, owner, f.where(a.path()))
		return
	}
	names := make([]string, 0, sharedNames)
	for _, i := range group[:min(len(group), sharedNames)] {
		names = append(names, strconv.Quote(users[addrs[i].user].Name))
	}
	more := ""
	if n := len(group) - len(names); n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	f.errf(b.path(), "%s is written %d times, by users %s%s (first at %s)", p, len(group), strings.Join(names, ", "), more, f.where(a.path()))
}

// decodeUserTierSettings reads a user's own burst, cburst, prio, quota,
// quota_period, over_quota_rate and over_quota_ceil, each replacing the
// tier's, with the tier's rules: prio 0..7, quota not 0, a quota needs an
// over_quota_rate (the user's or the tier's), the quota keys need a quota
// (the user's or the tier's), over_quota_ceil not below over_quota_rate.
func decodeUserTierSettings(t *table, u *User, tiers []Tier) {
	u.Burst, _ = t.size("burst")
	u.CBurst, _ = t.size("cburst")
	if n, ok := t.integer("prio", 0, 7); ok {
		u.Prio, u.PrioSet = uint32(n), true
	}
	var tier *Tier
	if i := tierIndex(tiers, u.Tier); i >= 0 {
		tier = &tiers[i]
	}
	q, qSet := t.size("quota")
	if qSet && q == 0 {
		t.errf("quota", "quota is 0 (leave the key out for the tier's quota)")
	}
	u.Quota = q
	if p, ok := t.enum("quota_period", string(PeriodDay), string(PeriodWeek), string(PeriodMonth)); ok {
		u.QuotaPeriod = Period(p)
	}
	rate, ceil, rateSet, ceilSet := rateCeil(t, "over_quota_rate", "over_quota_ceil")
	if rateSet {
		u.OverQuotaRate = rate
	}
	if ceilSet {
		u.OverQuotaCeil = ceil
	}
	tierQuota := tier != nil && tier.Quota != 0
	if !qSet && !tierQuota && tier != nil {
		for _, k := range []string{"quota_period", "over_quota_rate", "over_quota_ceil"} {
			if t.has(k) {
				t.errf(k, "is only used with quota (tier %s has none; set quota here)", tier.Name)
			}
		}
	}
	if qSet && q != 0 && !rateSet && !t.has("over_quota_rate") && !tierQuota && tier != nil {
		t.errf("quota", "needs over_quota_rate (the rate beyond the quota; tier %s has none)", tier.Name)
	}
	if ceilSet && !rateSet && tier != nil && tierQuota && ceil < tier.OverQuotaRate {
		t.errf("over_quota_ceil", "%s is below tier %s's over_quota_rate %s", ceil, tier.Name, tier.OverQuotaRate)
	}
}
