package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// decodeUsers reads every [[user]] of the users file and checks names,
// tiers and that no two addresses overlap.
func decodeUsers(ut *table, tiers []Tier, nodes []Node, ifaces []Interface) []User {
	entries, ok := ut.tables("user")
	if !ok {
		return nil
	}
	d := newUsersDecoder(ut.f, len(entries), tiers, nodes, ifaces)
	for _, t := range entries {
		d.add(t)
	}
	return d.finish()
}

// usersDecoder reads [[user]] entries one at a time, in file order, and
// then checks them together (duplicate names, overlapping addresses).
type usersDecoder struct {
	f      *file
	tiers  []Tier
	ifaces []Interface
	byNode map[string]*Node
	users  []User
	addrs  []addrEntry
	first  map[string]string // name -> path of its first entry
}

func newUsersDecoder(f *file, n int, tiers []Tier, nodes []Node, ifaces []Interface) *usersDecoder {
	d := &usersDecoder{f: f, tiers: tiers, ifaces: ifaces, byNode: make(map[string]*Node, len(nodes)),
		users: make([]User, 0, n), first: map[string]string{}}
	for i := range nodes {
		d.byNode[nodes[i].Name] = &nodes[i]
	}
	return d
}

// add reads the next entry.
func (d *usersDecoder) add(t *table) {
	f, i := d.f, len(d.users)
	u, at := decodeUser(t, d.tiers, d.byNode, d.ifaces)
	if u.Name != "" {
		if p, dup := d.first[u.Name]; dup {
			f.errf(t.key("name"), "duplicate user %q (first defined by %s at %s)", u.Name, p, f.where(p+".name"))
		} else {
			d.first[u.Name] = t.path
		}
	}
	for j, p := range u.Prefixes {
		d.addrs = append(d.addrs, addrEntry{prefix: p, user: i, table: t.path, at: at[j]})
	}
	d.users = append(d.users, u)
}

// finish checks the entries together and returns the users.
func (d *usersDecoder) finish() []User {
	reportOverlaps(d.f, d.users, d.addrs)
	return d.users
}

// usersChunk is how many [[user]] entries decodeUsersChunked parses at a
// time (smaller files are parsed whole).
const usersChunk = 1000

// decodeUsersChunked reads a users file made of [[user]] entries alone
// (comments aside) a chunk of usersChunk entries at a time, so that the
// TOML parser's tree of only one chunk is in memory at once (for 100,000
// users the whole file's is a few hundred megabytes), with the same
// results as parseFile and decodeUsers on the whole file. It returns
// handled false, having reported nothing, for any other file, and for one
// that a chunk's parse refuses: the caller then reads the file whole (the
// syntax error is reported as the whole file's parse words it).
func decodeUsersChunked(name string, data []byte, c *collector, tiers []Tier, nodes []Node, ifaces []Interface) (users []User, f *file, handled bool) {
	starts, top, ok := userHeaders(data)
	if !ok || len(starts) <= usersChunk {
		return nil, nil, false
	}
	f = &file{name: name, c: c, pos: newPositions(data)}
	f.pos.top = top
	nErrs, nNotes := len(c.list), len(c.notes)
	d := newUsersDecoder(f, len(starts), tiers, nodes, ifaces)
	for k := 0; k < len(starts); k += usersChunk {
		end := len(data)
		if k+usersChunk < len(starts) {
			end = starts[k+usersChunk]
		}
		var m map[string]any
		if _, err := toml.Decode(string(data[starts[k]:end]), &m); err != nil {
			c.list, c.notes = c.list[:nErrs], c.notes[:nNotes]
			return nil, nil, false
		}
		entries, _ := m["user"].([]map[string]any)
		if len(m) != 1 || len(entries) != min(usersChunk, len(starts)-k) {
			c.list, c.notes = c.list[:nErrs], c.notes[:nNotes]
			return nil, nil, false
		}
		for j, e := range entries {
			d.add(f.table(index("user", k+j), e))
		}
	}
	return d.finish(), f, true
}

// userHeaders returns the byte offsets of the [[user]] headers of src,
// and the positions of its top-level paths, when src holds nothing else at
// its top level: every top-level path is
// "user" or "user[N]", each entry starts with a [[user]] header of its
// own (not an inline array of tables) at the start of a line, and the
// first header comes before any key.
func userHeaders(src []byte) ([]int, map[string]pos, bool) {
	top := scanPositions(src, topLevel)
	first, ok := top["user"]
	if !ok {
		return nil, nil, false
	}
	var starts []int
	line, lineStart := 1, 0
	for i := 0; i <= len(src); i++ {
		if i == len(src) || src[i] == '\n' {
			if rest := src[lineStart:i]; len(rest) >= 2 && rest[0] == '[' && rest[1] == '[' {
				starts = append(starts, lineStart)
				if p, ok := top[index("user", len(starts)-1)]; !ok || p != (pos{line, 1}) {
					return nil, nil, false // a [[...]] line that is not the next user's header
				}
			}
			line, lineStart = line+1, i+1
		}
	}
	if len(starts) == 0 || len(top) != len(starts)+1 || top[index("user", 0)] != first {
		return nil, nil, false
	}
	for _, l := range strings.Split(string(src[:starts[0]]), "\n") { // comments and blank lines only
		if l = strings.TrimSpace(l); l != "" && l[0] != '#' {
			return nil, nil, false
		}
	}
	return starts, top, true
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
