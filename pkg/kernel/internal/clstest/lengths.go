package clstest

import (
	"net/netip"

	"github.com/shaperd/shaperd/pkg/model"
)

// Chain base addresses: every prefix of the chain contains them, and they
// are in the lab's ranges.
var (
	chainBase4 = netip.MustParseAddr("198.18.123.45")
	chainBase6 = netip.MustParseAddr("2001:db8:1234:5678:9abc:def0:1357:9bdf")
)

// CheckEveryLength installs, on a lab with no other filters, the prefixes
// of every length 0..32 of an IPv4 address and 0..128 of an IPv6 one
// (those supported says the classifier takes), nested, each classifying
// into its own class. Then, from the longest down, it sends a packet to
// the address, which the longest prefix left must classify, and deletes
// that prefix; with none left the packet goes to the default class. So
// every length classifies, and the longest prefix wins at every length.
// Only the address itself is probed: shorter prefixes than the lab's
// ranges (198.18.0.0/15, 2001:db8::/32) cover addresses a test must not
// send to.
func CheckEveryLength(l *Lab, c Classifier, supported func(netip.Prefix) bool) {
	l.T.Helper()
	var chains [2][]model.Filter
	n := 0
	for i, base := range []netip.Addr{chainBase4, chainBase6} {
		for bits := 0; bits <= base.BitLen(); bits++ {
			p, _ := base.Prefix(bits)
			if supported != nil && !supported(p) {
				continue
			}
			chains[i] = append(chains[i], model.Filter{Prefix: p, Match: model.MatchDst, ClassID: UserClass(n)})
			n++
		}
	}
	l.AddClasses(n)
	if _, err := c.Ensure(); err != nil {
		l.T.Fatal(err)
	}
	for _, ch := range chains {
		for _, f := range ch {
			if _, err := c.Add(f); err != nil {
				l.T.Fatal(err)
			}
		}
	}
	got, err := c.Dump()
	if err != nil {
		l.T.Fatal(err)
	}
	if len(got) != n {
		l.T.Errorf("Dump: %d filters, want %d", len(got), n)
	}
	var noisy []model.Handle // the classes of /0
	for _, ch := range chains {
		if len(ch) > 0 && ch[0].Prefix.Bits() == 0 {
			noisy = append(noisy, ch[0].ClassID)
		}
	}
	for i, base := range []netip.Addr{chainBase4, chainBase6} {
		src := netip.MustParseAddr(Src4)
		if base.Is6() {
			src = netip.MustParseAddr(Src6)
		}
		ch := chains[i]
		for j := len(ch) - 1; j >= 0; j-- {
			l.ExpectClassNoisy(src, base, ch[j].ClassID, noisy...)
			if w, err := c.Delete(ch[j]); err != nil || w == 0 {
				l.T.Fatalf("Delete %v: %d writes, %v", ch[j].Prefix, w, err)
			}
		}
		// The other family's chain is still there: its /0 class may count
		// the namespace's background traffic (IPv6 MLD, router
		// solicitations) while the IPv4 default is probed.
		l.ExpectClassNoisy(src, base, model.DefaultClass, noisy...)
	}
}
