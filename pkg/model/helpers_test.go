package model_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/model/modeltest"
	"github.com/shaperd/shaperd/pkg/tbf"
)

func pfx(t testing.TB, s string) netip.Prefix {
	t.Helper()
	p, err := netip.ParsePrefix(s)
	if err != nil {
		t.Fatalf("bad test prefix %q: %v", s, err)
	}
	return p
}

// egressSpec is an HTB egress interface of 1gbit.
func egressSpec() model.InterfaceSpec {
	return model.InterfaceSpec{Name: "lan0", Shaper: model.ShaperHTB, Direction: model.Egress, Bandwidth: tbf.Gbit, Match: model.MatchDst}
}

// manyUsers returns n users u00000.. with one IPv4 /32 each in 198.18.0.0/15
// and, for every tenth, an IPv6 /64 in 2001:db8::/32; rates vary.
func manyUsers(n int) []model.UserTarget {
	us := make([]model.UserTarget, n)
	for i := range us {
		a := netip.AddrFrom4([4]byte{198, 18 + byte(i>>16&1), byte(i >> 8), byte(i)})
		ps := []netip.Prefix{netip.PrefixFrom(a, 32)}
		if i%10 == 0 {
			ps = append(ps, netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, byte(i >> 8), byte(i)}), 64))
		}
		rate := tbf.Rate(1+i%50) * tbf.Mbit
		us[i] = model.UserTarget{Name: fmt.Sprintf("u%05d", i), Tier: []string{"gold", "silver", "bronze"}[i%3],
			Prefixes: ps, Rate: rate, Ceil: 2 * rate}
	}
	return us
}

func mustBuild(t testing.TB, tg model.Targets, ids *model.Assignment) model.Tree {
	t.Helper()
	tree, err := model.Build(tg, ids)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return tree
}

func findClass(t testing.TB, tree model.Tree, h model.Handle) model.Class {
	t.Helper()
	for _, c := range tree.Classes {
		if c.Handle == h {
			return c
		}
	}
	t.Fatalf("class %s not in tree", h)
	return model.Class{}
}

func classOfUser(t testing.TB, tree model.Tree, user string) model.Class {
	t.Helper()
	for _, c := range tree.Classes {
		if c.Labels.User == user {
			return c
		}
	}
	t.Fatalf("no class for user %s", user)
	return model.Class{}
}

// applyOK applies cs to actual in a MemKernel and fails the test if the
// kernel refuses a change or the result differs from desired.
func applyOK(t testing.TB, actual, desired model.Tree, cs []model.Change) model.Tree {
	t.Helper()
	k := modeltest.NewMemKernel()
	k.Load(actual)
	if err := k.Apply(cs); err != nil {
		t.Fatalf("applying diff: %v\nchanges:\n%s", err, changesText(cs))
	}
	got := k.Tree(desired.Device)
	if m := model.Mismatches(got, desired); len(m) > 0 {
		t.Fatalf("after applying the diff, tree differs from desired: %q\nchanges:\n%s", m, changesText(cs))
	}
	if again := model.Diff(got, desired); len(again) > 0 {
		t.Fatalf("diff after applying is not empty:\n%s", changesText(again))
	}
	return got
}

func changesText(cs []model.Change) string {
	s := ""
	for i, c := range cs {
		s += fmt.Sprintf("  %d: %s\n", i, c)
	}
	return s
}

// opsOf is the changes as short strings, e.g. "add class 1:100".
func opsOf(cs []model.Change) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		switch {
		case c.Redirect != nil:
			out[i] = c.Op.String() + " redirect"
		case c.Qdisc != nil:
			out[i] = fmt.Sprintf("%s qdisc %s", c.Op, c.Qdisc.Kind)
		case c.Class != nil:
			out[i] = fmt.Sprintf("%s class %s", c.Op, c.Class.Handle)
		case c.Filter != nil:
			out[i] = fmt.Sprintf("%s filter %s", c.Op, c.Filter.Prefix)
		}
	}
	return out
}

type netipPrefix = netip.Prefix

func prefix4(a [4]byte) netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4(a), 32) }
