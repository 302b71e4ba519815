package config

import (
	"net/netip"
	"slices"
)

// PrefixIndex finds the users whose addresses overlap a prefix without
// scanning every user: it keeps each family's prefixes by length, so a
// query looks up the prefix's supernets (one map lookup per length in
// use) and its subnets (per longer length in use, the fewer of the
// possible subnets and the prefixes of that length). It is kept up to
// date one user at a time (Add, Remove), for run-time user changes.
type PrefixIndex struct {
	byLen [2][129]map[netip.Prefix]IndexedUser
}

// IndexedUser is the owner of an indexed prefix: its name and where it is
// written (User.Source).
type IndexedUser struct {
	Name, Source string
}

// NewPrefixIndex indexes every address of users.
func NewPrefixIndex(users []User) *PrefixIndex {
	x := &PrefixIndex{}
	for i := range users {
		x.Add(&users[i])
	}
	return x
}

func family(p netip.Prefix) int {
	if p.Addr().Is4() {
		return 0
	}
	return 1
}

// Add indexes u's addresses.
func (x *PrefixIndex) Add(u *User) {
	for _, p := range u.Prefixes {
		p = p.Masked()
		m := &x.byLen[family(p)][p.Bits()]
		if *m == nil {
			*m = map[netip.Prefix]IndexedUser{}
		}
		(*m)[p] = IndexedUser{Name: u.Name, Source: u.Source}
	}
}

// Remove drops u's addresses (those still indexed under u's name).
func (x *PrefixIndex) Remove(u *User) {
	for _, p := range u.Prefixes {
		p = p.Masked()
		m := x.byLen[family(p)][p.Bits()]
		if o, ok := m[p]; ok && o.Name == u.Name {
			delete(m, p)
		}
	}
}

// maxEnumerated bounds the subnets of one length a query looks up one by
// one; above it (or above the number of prefixes of that length) it
// scans that length's prefixes instead.
const maxEnumerated = 1 << 12

// Overlapping calls f for every indexed prefix that overlaps p (p's
// supernets, p itself and its subnets), shortest first, each length's in
// address order.
func (x *PrefixIndex) Overlapping(p netip.Prefix, f func(q netip.Prefix, owner IndexedUser)) {
	if !p.IsValid() {
		return
	}
	p = p.Masked()
	lens := &x.byLen[family(p)]
	for l := 0; l <= p.Bits(); l++ {
		if len(lens[l]) == 0 {
			continue
		}
		q, _ := p.Addr().Prefix(l)
		if o, ok := lens[l][q]; ok {
			f(q, o)
		}
	}
	bits := p.Addr().BitLen()
	for l := p.Bits() + 1; l <= bits; l++ {
		m := lens[l]
		if len(m) == 0 {
			continue
		}
		var found []netip.Prefix
		if d := l - p.Bits(); d < 31 && 1<<d <= min(len(m), maxEnumerated) {
			a := p.Addr()
			for i := 0; i < 1<<d; i++ {
				q := netip.PrefixFrom(a, l)
				if _, ok := m[q]; ok {
					found = append(found, q)
				}
				a = nextBlock(a, l)
			}
		} else {
			for q := range m {
				if p.Overlaps(q) {
					found = append(found, q)
				}
			}
			slices.SortFunc(found, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
		}
		for _, q := range found {
			f(q, m[q])
		}
	}
}

// nextBlock is the first address of the /l block after a's.
func nextBlock(a netip.Addr, l int) netip.Addr {
	b := a.AsSlice()
	// add 1 at bit l-1 (counting from the most significant bit), with carry
	i, bit := (l-1)/8, 7-(l-1)%8
	carry := uint16(1) << bit
	for ; i >= 0 && carry != 0; i-- {
		s := uint16(b[i]) + carry
		b[i], carry = byte(s), s>>8
	}
	n, _ := netip.AddrFromSlice(b)
	return n
}
