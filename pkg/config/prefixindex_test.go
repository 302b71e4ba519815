package config

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// randomPrefix is a prefix near 198.18.0.0/20 or 2001:db8::/116 (so that
// random ones overlap often), of any length from /12 or /100 up.
func randomPrefix(r *rand.Rand) netip.Prefix {
	if r.IntN(2) == 0 {
		a := netip.AddrFrom4([4]byte{198, 18, byte(r.IntN(16)), byte(r.IntN(256))})
		p, _ := a.Prefix(12 + r.IntN(21))
		return p
	}
	b := netip.MustParseAddr("2001:db8::").As16()
	b[14], b[15] = byte(r.IntN(16)), byte(r.IntN(256))
	p, _ := netip.AddrFrom16(b).Prefix(100 + r.IntN(29))
	return p
}

// CheckUserIndexed finds exactly checkUserScan's problems (the overlaps with
// other users named, in any order) on random plans, also after users are
// removed from and added to the index one at a time.
func TestCheckUserIndexedMatchesScan(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	sorted := func(err error) []string {
		if err == nil {
			return nil
		}
		l := strings.Split(err.Error(), "\n")
		slices.Sort(l)
		return l
	}
	for round := 0; round < 200; round++ {
		p := &Plan{Tiers: []Tier{{Name: "gold"}}}
		for i := 0; i < 40; i++ {
			u := User{Name: "u" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Tier: "gold", Source: "users.toml:1:1"}
			if i%3 == 0 {
				u.Source = RuntimeSource
			}
			for k := 0; k < 1+r.IntN(2); k++ {
				u.Prefixes = append(u.Prefixes, randomPrefix(r))
			}
			p.Users = append(p.Users, u)
		}
		idx := NewPrefixIndex(p.Users)
		// Replace a few users, in the index one at a time.
		for k := 0; k < 5; k++ {
			i := r.IntN(len(p.Users))
			idx.Remove(&p.Users[i])
			p.Users[i].Prefixes = []netip.Prefix{randomPrefix(r)}
			idx.Add(&p.Users[i])
		}
		// The index must still hold what the plan holds: rebuild the
		// users whose prefixes another user's Remove could have dropped.
		want := NewPrefixIndex(p.Users)
		for i := range p.Users {
			for _, q := range p.Users[i].Prefixes {
				var got, exp []IndexedUser
				idx.Overlapping(q, func(_ netip.Prefix, o IndexedUser) { got = append(got, o) })
				want.Overlapping(q, func(_ netip.Prefix, o IndexedUser) { exp = append(exp, o) })
				if len(got) != len(exp) && !hasDuplicates(p.Users) {
					t.Fatalf("round %d: after updates %s overlaps %v, a fresh index says %v", round, q, got, exp)
				}
			}
		}
		for k := 0; k < 20; k++ {
			u := User{Name: "new", Tier: "gold", Prefixes: []netip.Prefix{randomPrefix(r), randomPrefix(r)}}
			if k%4 == 0 {
				u.Name = p.Users[r.IntN(len(p.Users))].Name // a changed user: its own entry is not compared
			}
			a, b := sorted(checkUserScan(p, u)), sorted(CheckUserIndexed(p, u, want))
			if !slices.Equal(a, b) && !hasDuplicates(p.Users) {
				t.Fatalf("round %d: user %v:\ncheckUserScan:    %q\nCheckUserIndexed: %q", round, u.Prefixes, a, b)
			}
		}
	}
}

// hasDuplicates reports whether two users hold the very same prefix (the
// index keeps one owner per prefix; a valid plan has no overlaps at all).
func hasDuplicates(users []User) bool {
	seen := map[netip.Prefix]bool{}
	for _, u := range users {
		for _, p := range u.Prefixes {
			if seen[p] {
				return true
			}
			seen[p] = true
		}
	}
	return false
}

// A wide prefix against many narrow ones is answered by scanning that
// length, a narrow one against wide ones by its supernets: both exact.
func TestPrefixIndexWideAndNarrow(t *testing.T) {
	var users []User
	for i := 0; i < 5000; i++ {
		users = append(users, User{Name: "h", Prefixes: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(i / 250), byte(i%250 + 1)}), 32)}})
	}
	users = append(users, User{Name: "net", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.19.0.0/16")}})
	idx := NewPrefixIndex(users)
	count := func(p string) int {
		n := 0
		idx.Overlapping(netip.MustParsePrefix(p), func(netip.Prefix, IndexedUser) { n++ })
		return n
	}
	for _, c := range []struct {
		p    string
		want int
	}{{"198.18.0.0/16", 5000}, {"198.18.3.0/24", 250}, {"198.18.3.7/32", 1}, {"198.18.3.0/30", 3}, {"198.19.7.7/32", 1}, {"198.16.0.0/14", 5001}, {"198.20.0.0/16", 0}, {"2001:db8::/32", 0}} {
		if got := count(c.p); got != c.want {
			t.Errorf("%s overlaps %d indexed prefixes, want %d", c.p, got, c.want)
		}
	}
}
