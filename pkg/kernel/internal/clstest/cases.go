package clstest

import (
	"math/rand/v2"
	"net/netip"

	"github.com/shaperd/shaperd/pkg/model"
)

// Classifier is what the shared cases need of a classifier.
type Classifier interface {
	Ensure() (writes int, err error)
	Add(f model.Filter) (writes int, err error)
	Delete(f model.Filter) (writes int, err error)
	Dump() ([]model.Filter, error)
}

// Probe is one packet to send and the class that must count it.
type Probe struct {
	Src, Dst netip.Addr
	Want     model.Handle
}

// Cases is the classification table every classifier must pass: 1,000
// random IPv4 /32s, wide and nested IPv4 prefixes (/16, /20, /24 with a /32
// inside, /25, twenty /28s), fifty IPv6 /128s, IPv6 /64, /56, /48 with a
// /128 inside, /120 and /124, and a source prefix of each family; the
// probes check longest prefix first and the default class for addresses
// no filter covers. Filter i classifies into UserClass(i).
type Cases struct {
	Filters []model.Filter
	// Named filters, for tests that go on to change or damage them.
	W16, W20, W24, In24, W25                    model.Filter
	W28, Host, Host6                            []model.Filter
	N64, N56, N48, In48, H120, H124, Src4, Src6 model.Filter
	Probes                                      []Probe
	// LocalAddrs must be added to the lab's device (the sources of the
	// source-match probes).
	LocalAddrs []string

	taken map[netip.Prefix]bool
}

// Add appends a filter of prefix p classifying into the next user class.
func (u *Cases) Add(p netip.Prefix, m model.MatchField) model.Filter {
	if u.taken == nil {
		u.taken = map[netip.Prefix]bool{}
	}
	f := model.Filter{Prefix: p, Match: m, ClassID: UserClass(len(u.Filters))}
	u.Filters = append(u.Filters, f)
	u.taken[p] = true
	return f
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func addr(s string) netip.Addr  { return netip.MustParseAddr(s) }

// NewCases draws the table with r.
func NewCases(r *rand.Rand) *Cases {
	u := &Cases{}
	// Wide and nested IPv4 prefixes in 198.19.0.0/17; random /32s elsewhere.
	u.W16 = u.Add(pfx("198.18.0.0/16"), model.MatchDst)
	u.W20 = u.Add(pfx("198.19.16.0/20"), model.MatchDst)
	u.W24 = u.Add(pfx("198.19.40.0/24"), model.MatchDst)
	u.In24 = u.Add(pfx("198.19.40.7/32"), model.MatchDst)
	u.W25 = u.Add(pfx("198.19.41.128/25"), model.MatchDst)
	for len(u.W28) < 20 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(64 + r.IntN(64)), byte(r.IntN(16) * 16)}), 28)
		if !u.taken[p] {
			u.W28 = append(u.W28, u.Add(p, model.MatchDst))
		}
	}
	for len(u.Host) < 1000 {
		a := netip.AddrFrom4([4]byte{198, 18, byte(r.IntN(256)), byte(r.IntN(256))})
		if r.IntN(2) == 0 {
			a = netip.AddrFrom4([4]byte{198, 19, byte(128 + r.IntN(120)), byte(r.IntN(256))}) // below .248.0
		}
		if p := netip.PrefixFrom(a, 32); !u.taken[p] {
			u.Host = append(u.Host, u.Add(p, model.MatchDst))
		}
	}
	for len(u.Host6) < 50 {
		p := netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 14: byte(r.IntN(4)), 15: byte(r.IntN(256))}), 128)
		if !u.taken[p] {
			u.Host6 = append(u.Host6, u.Add(p, model.MatchDst))
		}
	}
	u.N64 = u.Add(pfx("2001:db8:2:7::/64"), model.MatchDst)
	u.N56 = u.Add(pfx("2001:db8:3:100::/56"), model.MatchDst)
	u.N48 = u.Add(pfx("2001:db8:4::/48"), model.MatchDst)
	u.In48 = u.Add(pfx("2001:db8:4:0:1::1/128"), model.MatchDst)
	u.H120 = u.Add(pfx("2001:db8:5::ab00/120"), model.MatchDst)
	u.H124 = u.Add(pfx("2001:db8:5::cd10/124"), model.MatchDst)
	// Uploads: source prefixes.
	u.Src4 = u.Add(pfx("198.18.200.0/24"), model.MatchSrc)
	u.Src6 = u.Add(pfx("2001:db8:ff00::/64"), model.MatchSrc)
	u.LocalAddrs = []string{"198.18.200.1/32", "2001:db8:ff00::1/128"}

	s4, s6 := addr(Src4), addr(Src6)
	u.Probes = []Probe{
		{s4, addr("198.19.23.45"), u.W20.ClassID},
		{s4, addr("198.19.40.9"), u.W24.ClassID},
		{s4, addr("198.19.40.7"), u.In24.ClassID},
		{s4, addr("198.19.41.200"), u.W25.ClassID},
		{s4, addr("198.19.41.100"), model.DefaultClass},
		{s4, addr("198.19.250.1"), model.DefaultClass},
		{s6, addr("2001:db8:2:7::abcd"), u.N64.ClassID},
		{s6, addr("2001:db8:2:8::1"), model.DefaultClass},
		{s6, addr("2001:db8:3:1ff::9"), u.N56.ClassID},
		{s6, addr("2001:db8:4:9::9"), u.N48.ClassID},
		{s6, addr("2001:db8:4:0:1::1"), u.In48.ClassID},
		{s6, addr("2001:db8:5::abff"), u.H120.ClassID},
		{s6, addr("2001:db8:5::cd1e"), u.H124.ClassID},
		{s6, addr("2001:db8:5::cd20"), model.DefaultClass},
		{addr("198.18.200.1"), addr("198.19.250.1"), u.Src4.ClassID},
		{addr("2001:db8:ff00::1"), addr("2001:db8:9::1"), u.Src6.ClassID},
	}
	if !u.taken[pfx("198.18.77.77/32")] { // no /32 there: falls back to the /16
		u.Probes = append(u.Probes, Probe{s4, addr("198.18.77.77"), u.W16.ClassID})
	}
	for _, i := range r.Perm(len(u.Host))[:25] {
		u.Probes = append(u.Probes, Probe{s4, u.Host[i].Prefix.Addr(), u.Host[i].ClassID})
	}
	for _, f := range u.W28[:3] {
		u.Probes = append(u.Probes, Probe{s4, RandomIn(r, f.Prefix), f.ClassID})
	}
	for _, f := range u.Host6[:5] {
		u.Probes = append(u.Probes, Probe{s6, f.Prefix.Addr(), f.ClassID})
	}
	return u
}

// RandomIn is a random address in p.
func RandomIn(r *rand.Rand, p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		if r.IntN(2) == 1 {
			b[i/8] |= 0x80 >> (i % 8)
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Install adds the table's filters to c (after Ensure and the lab's
// local addresses and classes) in a random order and checks every probe.
func (u *Cases) Install(l *Lab, c Classifier, r *rand.Rand) (writes int) {
	l.T.Helper()
	for _, a := range u.LocalAddrs {
		args := []string{"ip", "addr", "add", a, "dev", l.Dev}
		if netip.MustParsePrefix(a).Addr().Is6() {
			args = append(args, "nodad")
		}
		l.Shaper.MustRun(args...)
	}
	l.AddClasses(len(u.Filters) + 1)
	if _, err := c.Ensure(); err != nil {
		l.T.Fatal(err)
	}
	for _, i := range r.Perm(len(u.Filters)) { // any order must work
		w, err := c.Add(u.Filters[i])
		if err != nil {
			l.T.Fatal(err)
		}
		writes += w
	}
	return writes
}

// Check sends every probe and checks its class.
func (u *Cases) Check(l *Lab) {
	l.T.Helper()
	for _, p := range u.Probes {
		l.ExpectClass(p.Src, p.Dst, p.Want)
	}
}
