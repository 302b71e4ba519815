package u32

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/pkg/model"
)

func TestCheckLayoutRefusesWhatAddRefuses(t *testing.T) {
	fs := []model.Filter{
		{Prefix: netip.MustParsePrefix("198.18.0.1/32"), Match: model.MatchDst},
		{Prefix: netip.MustParsePrefix("2001:db8::/96"), Match: model.MatchDst},
		{Prefix: netip.MustParsePrefix("::/0"), Match: model.MatchSrc},
		{Prefix: netip.MustParsePrefix("2001:db8::1/128"), Match: model.MatchSrc},
		{Prefix: netip.MustParsePrefix("2001:db8::/65"), Match: model.MatchSrc},
	}
	got := CheckLayout(fs)
	var idx []int
	for _, p := range got {
		idx = append(idx, p.Index)
	}
	if fmt.Sprint(idx) != "[1 2 4]" {
		t.Fatalf("problems at %v (%v); want [1 2 4]", idx, got)
	}
	if !strings.Contains(got[0].Err.Error(), "/65../112") {
		t.Errorf("message %q does not say which lengths", got[0].Err)
	}
}

func TestCheckLayoutCountsNodesPerBucket(t *testing.T) {
	// The IPv6 root list holds 85 prefixes of each length /1../48.
	var fs []model.Filter
	for i := 0; i < 86; i++ {
		fs = append(fs, model.Filter{Prefix: netip.MustParsePrefix(fmt.Sprintf("2001:db8:%x::/48", i)), Match: model.MatchDst})
	}
	if p := CheckLayout(fs[:85]); len(p) != 0 {
		t.Fatalf("85 /48s: %v", p)
	}
	p := CheckLayout(fs)
	if len(p) != 1 || p[0].Index != 85 {
		t.Fatalf("86 /48s: %v; want the 86th refused", p)
	}
	// The same prefixes as src filters are another tree.
	for i := range fs[:85] {
		fs = append(fs, model.Filter{Prefix: fs[i].Prefix, Match: model.MatchSrc})
	}
	if p := CheckLayout(fs); len(p) != 1 {
		t.Fatalf("86 dst + 85 src /48s: %v; want one problem", p)
	}
}
