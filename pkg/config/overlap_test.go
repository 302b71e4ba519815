package config

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// TestOverlapsMatchesBruteForce compares overlaps with an O(n²) check on
// random prefixes drawn from a small space, so that many overlap.
func TestOverlapsMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 50; round++ {
		var entries []addrEntry
		for i := 0; i < 60; i++ {
			var p netip.Prefix
			if rng.IntN(4) == 0 {
				a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(rng.IntN(16))})
				p = netip.PrefixFrom(a, 124+rng.IntN(5)).Masked()
			} else {
				a := netip.AddrFrom4([4]byte{198, 18, 0, byte(rng.IntN(64))})
				p = netip.PrefixFrom(a, 26+rng.IntN(7)).Masked()
			}
			entries = append(entries, addrEntry{prefix: p, user: i})
		}
		var want []string
		for i := range entries {
			for j := i + 1; j < len(entries); j++ {
				if entries[i].prefix.Overlaps(entries[j].prefix) {
					want = append(want, fmt.Sprint(i, j))
				}
			}
		}
		var got []string
		for _, p := range overlaps(entries) {
			i, j := min(p[0], p[1]), max(p[0], p[1])
			got = append(got, fmt.Sprint(i, j))
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: got %d pairs, want %d\ngot  %v\nwant %v", round, len(got), len(want), got, want)
		}
	}
}

// usersFile writes n users with one IPv4 and one IPv6 address each.
func usersFile(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "[[user]]\nname = \"u%d\"\ntier = \"t\"\naddresses = [\"198.18.%d.%d\", \"2001:db8::%x/128\"]\n\n", i, i/256, i%256, i)
	}
	return b.String()
}

const bigMain = `[[interface]]
name = "lan0"
bandwidth = "10gbit"
[tiers.t]
rate = "1mbit"
`

// TestTenThousandUsers loads 10,000 users, then the same with one
// overlapping address, which must be the only error.
func TestTenThousandUsers(t *testing.T) {
	users := usersFile(10000)
	plan, err := LoadFS(fstest.MapFS{"shaperd.toml": {Data: []byte(bigMain)}, "users.toml": {Data: []byte(users)}}, "shaperd.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Users) != 10000 || plan.Users[9999].Name != "u9999" {
		t.Fatalf("got %d users", len(plan.Users))
	}
	users += "[[user]]\nname = \"late\"\ntier = \"t\"\naddresses = [\"198.18.20.0/24\"]\n"
	_, err = LoadFS(fstest.MapFS{"shaperd.toml": {Data: []byte(bigMain)}, "users.toml": {Data: []byte(users)}}, "shaperd.toml")
	errs, ok := err.(*Errors)
	if !ok || len(errs.List) != 256 {
		t.Fatalf("want 256 overlaps (198.18.20.0/24 holds u5120..u5375), got %v", err)
	}
	if e := errs.List[0]; e.Key != "user[10000].addresses[0]" || !strings.Contains(e.Msg, `user "u5120"`) {
		t.Errorf("first overlap: %v", e)
	}
}

func BenchmarkLoad10kUsers(b *testing.B) {
	fsys := fstest.MapFS{"shaperd.toml": {Data: []byte(bigMain)}, "users.toml": {Data: []byte(usersFile(10000))}}
	for b.Loop() {
		if _, err := LoadFS(fsys, "shaperd.toml"); err != nil {
			b.Fatal(err)
		}
	}
}

// sameAddressUsers writes n users that all have the address 198.18.0.1.
func sameAddressUsers(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "[[user]]\nname = \"u%d\"\ntier = \"t\"\naddresses = [\"198.18.0.1\"]\n", i)
	}
	return b.String()
}

// TestSharedAddressIsOneError: 3,000 users with one address make one
// error (not 4.5 million) that names the first users and how many more.
func TestSharedAddressIsOneError(t *testing.T) {
	_, err := LoadFS(fstest.MapFS{"shaperd.toml": {Data: []byte(bigMain)}, "users.toml": {Data: []byte(sameAddressUsers(3000))}}, "shaperd.toml")
	errs, ok := err.(*Errors)
	if !ok || len(errs.List) != 1 {
		t.Fatalf("want one error, got %T with %d", err, len(errs.List))
	}
	want := `users.toml:8:14: user[1].addresses[0]: 198.18.0.1 is written 3000 times, by users "u0", "u1", "u2" and 2997 more (first at users.toml:4:14)`
	if got := errs.List[0].Error(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func BenchmarkSharedAddress3000(b *testing.B) {
	fsys := fstest.MapFS{"shaperd.toml": {Data: []byte(bigMain)}, "users.toml": {Data: []byte(sameAddressUsers(3000))}}
	for b.Loop() {
		LoadFS(fsys, "shaperd.toml")
	}
}
