package filtercheck

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/pkg/model"
)

// The bpf classifier takes every length (a /0, an IPv6 /96 u32 has no
// table for) but no prefix a map key cannot hold; u32 refuses what its
// layout has no table for.
func TestFilters(t *testing.T) {
	fs := []model.Filter{
		{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Match: model.MatchDst},
		{Prefix: netip.MustParsePrefix("2001:db8::/96"), Match: model.MatchDst},
		{Prefix: netip.MustParsePrefix("198.18.1.1/24"), Match: model.MatchDst},
		{Prefix: netip.MustParsePrefix("::ffff:198.18.1.0/120"), Match: model.MatchSrc},
		{Prefix: netip.MustParsePrefix("198.18.2.0/24"), Match: model.MatchSrc},
	}
	bpf := Filters(ClassifierBPF, fs)
	if len(bpf) != 2 || bpf[0].Index != 2 || !strings.Contains(bpf[0].Err.Error(), "host bits set") ||
		bpf[1].Index != 3 || !strings.Contains(bpf[1].Err.Error(), "IPv4-mapped") {
		t.Errorf("bpf: %v; want filters 2 (host bits) and 3 (IPv4-mapped)", bpf)
	}
	refused := map[int]bool{}
	for _, p := range Filters(ClassifierU32, fs) {
		refused[p.Index] = true
	}
	for i, want := range []bool{true, true, true, true, false} {
		if refused[i] != want {
			t.Errorf("u32: filter %d (%v) refused %v, want %v", i, fs[i].Prefix, refused[i], want)
		}
	}
	if err := BPFPrefix(netip.Prefix{}); err == nil {
		t.Error("the zero prefix: no error")
	}
}
