package model

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"github.com/shaperd/shaperd/pkg/tbf"
)

func TestMemKernelRules(t *testing.T) {
	tree := mustBuild(t, base(t), nil)
	gold := findClass(t, tree, MakeHandle(1, FirstTierMinor))
	alice := classOfUser(t, tree, "alice")
	aliceF := tree.Filters[0]
	newClass := alice
	newClass.Handle = MakeHandle(1, 0x200)
	orphan := newClass
	orphan.Parent = MakeHandle(1, 0x300)
	moved := alice
	moved.Parent = RootClass
	leafy := gold
	leafy.Leaf = &LeafQdisc{Kind: "pfifo", Limit: 10}
	badFilter := Filter{Prefix: netip.MustParsePrefix("198.18.9.0/24"), Match: MatchDst, ClassID: MakeHandle(1, 0x300)}
	tests := []struct {
		name string
		c    Change
		want error
	}{
		{"add existing class", Change{Op: OpAdd, Device: "lan0", Class: &alice}, syscall.EEXIST},
		{"add class without parent", Change{Op: OpAdd, Device: "lan0", Class: &orphan}, syscall.ENOENT},
		{"re-parent by change", Change{Op: OpChange, Device: "lan0", Class: &moved}, syscall.EINVAL},
		{"leaf on inner class", Change{Op: OpChange, Device: "lan0", Class: &leafy}, syscall.EINVAL},
		{"delete class with children", Change{Op: OpDelete, Device: "lan0", Class: &gold}, syscall.EBUSY},
		{"delete class with filters", Change{Op: OpDelete, Device: "lan0", Class: &alice}, syscall.EBUSY},
		{"delete missing class", Change{Op: OpDelete, Device: "lan0", Class: &newClass}, syscall.ENOENT},
		{"add existing filter", Change{Op: OpAdd, Device: "lan0", Filter: &aliceF}, syscall.EEXIST},
		{"filter to missing class", Change{Op: OpAdd, Device: "lan0", Filter: &badFilter}, syscall.ENOENT},
		{"delete missing filter", Change{Op: OpDelete, Device: "lan0", Filter: &badFilter}, syscall.ENOENT},
		{"class on device without root", Change{Op: OpAdd, Device: "lan9", Class: &newClass}, syscall.EINVAL},
		{"second root", Change{Op: OpAdd, Device: "lan0", Qdisc: tree.Root}, syscall.EEXIST},
		{"delete missing redirect", Change{Op: OpDelete, Device: "lan0", Redirect: &Redirect{Interface: "lan0", IFB: "ifb0"}}, syscall.ENOENT},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := NewMemKernel()
			k.Load(tree)
			err := k.Apply([]Change{tt.c})
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
			if m := Mismatches(k.Tree("lan0"), tree); len(m) != 0 {
				t.Errorf("a refused change altered the tree: %q", m)
			}
		})
	}
}

func TestMemKernelLeafFollowsChildren(t *testing.T) {
	tg := base(t)
	tg.Interface.Leaf = &LeafQdisc{Kind: "bfifo", Limit: 1000}
	tree := mustBuild(t, tg, nil)
	k := NewMemKernel()
	k.Load(tree)
	carol := classOfUser(t, tree, "carol")
	child := carol
	child.Handle, child.Parent = MakeHandle(1, 0x400), carol.Handle
	if err := k.Apply([]Change{{Op: OpAdd, Device: "lan0", Class: &child}}); err != nil {
		t.Fatal(err)
	}
	if l := findClass(t, k.Tree("lan0"), carol.Handle).Leaf; l != nil {
		t.Fatalf("carol's class has children and still a leaf %+v", l)
	}
	// Deleting the root qdisc removes classes and filters.
	if err := k.Apply([]Change{{Op: OpDelete, Device: "lan0", Qdisc: tree.Root}}); err != nil {
		t.Fatal(err)
	}
	if got := k.Tree("lan0"); got.Root != nil || len(got.Classes) != 0 || len(got.Filters) != 0 {
		t.Fatalf("after deleting the root: %+v", got)
	}
}

func TestApplyChangesRefusesOtherDevices(t *testing.T) {
	tree := mustBuild(t, base(t), nil)
	c := tree.Classes[0]
	_, err := ApplyChanges(tree, []Change{{Op: OpChange, Device: "lan1", Class: &c}})
	if !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("error %v, want EINVAL", err)
	}
	c.Rate = 2 * tbf.Gbit
	c.Ceil = 2 * tbf.Gbit
	got, err := ApplyChanges(tree, []Change{{Op: OpChange, Device: "lan0", Class: &c}})
	if err != nil {
		t.Fatal(err)
	}
	if r := findClass(t, got, RootClass).Rate; r != 2*tbf.Gbit {
		t.Errorf("root rate %s after change, want 2gbit", r)
	}
}
