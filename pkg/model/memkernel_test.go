package model_test

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/model/modeltest"
	"github.com/shaperd/shaperd/pkg/tbf"
)

func TestMemKernelRules(t *testing.T) {
	tree := mustBuild(t, base(t), nil)
	gold := findClass(t, tree, model.MakeHandle(1, model.FirstTierMinor))
	alice := classOfUser(t, tree, "alice")
	aliceF := tree.Filters[0]
	newClass := alice
	newClass.Handle = model.MakeHandle(1, 0x200)
	orphan := newClass
	orphan.Parent = model.MakeHandle(1, 0x300)
	moved := alice
	moved.Parent = model.RootClass
	leafy := gold
	leafy.Leaf = &model.LeafQdisc{Kind: "pfifo", Limit: 10}
	badFilter := model.Filter{Prefix: netip.MustParsePrefix("198.18.9.0/24"), Match: model.MatchDst, ClassID: model.MakeHandle(1, 0x300)}
	tests := []struct {
		name string
		c    model.Change
		want error
	}{
		{"add existing class", model.Change{Op: model.OpAdd, Device: "lan0", Class: &alice}, syscall.EEXIST},
		{"add class without parent", model.Change{Op: model.OpAdd, Device: "lan0", Class: &orphan}, syscall.ENOENT},
		{"re-parent by change", model.Change{Op: model.OpChange, Device: "lan0", Class: &moved}, syscall.EINVAL},
		{"leaf on inner class", model.Change{Op: model.OpChange, Device: "lan0", Class: &leafy}, syscall.EINVAL},
		{"delete class with children", model.Change{Op: model.OpDelete, Device: "lan0", Class: &gold}, syscall.EBUSY},
		{"delete class with filters", model.Change{Op: model.OpDelete, Device: "lan0", Class: &alice}, syscall.EBUSY},
		{"delete missing class", model.Change{Op: model.OpDelete, Device: "lan0", Class: &newClass}, syscall.ENOENT},
		{"add existing filter", model.Change{Op: model.OpAdd, Device: "lan0", Filter: &aliceF}, syscall.EEXIST},
		{"filter to missing class", model.Change{Op: model.OpAdd, Device: "lan0", Filter: &badFilter}, syscall.ENOENT},
		{"delete missing filter", model.Change{Op: model.OpDelete, Device: "lan0", Filter: &badFilter}, syscall.ENOENT},
		{"class on device without root", model.Change{Op: model.OpAdd, Device: "lan9", Class: &newClass}, syscall.EINVAL},
		{"second root", model.Change{Op: model.OpAdd, Device: "lan0", Qdisc: tree.Root}, syscall.EEXIST},
		{"delete missing redirect", model.Change{Op: model.OpDelete, Device: "lan0", Redirect: &model.Redirect{Interface: "lan0", IFB: "ifb0"}}, syscall.ENOENT},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := modeltest.NewMemKernel()
			k.Load(tree)
			err := k.Apply([]model.Change{tt.c})
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
			if m := model.Mismatches(k.Tree("lan0"), tree); len(m) != 0 {
				t.Errorf("a refused change altered the tree: %q", m)
			}
		})
	}
}

func TestMemKernelLeafFollowsChildren(t *testing.T) {
	tg := base(t)
	tg.Interface.Leaf = &model.LeafQdisc{Kind: "bfifo", Limit: 1000}
	tree := mustBuild(t, tg, nil)
	k := modeltest.NewMemKernel()
	k.Load(tree)
	carol := classOfUser(t, tree, "carol")
	child := carol
	child.Handle, child.Parent = model.MakeHandle(1, 0x400), carol.Handle
	if err := k.Apply([]model.Change{{Op: model.OpAdd, Device: "lan0", Class: &child}}); err != nil {
		t.Fatal(err)
	}
	if l := findClass(t, k.Tree("lan0"), carol.Handle).Leaf; l != nil {
		t.Fatalf("carol's class has children and still a leaf %+v", l)
	}
	// Deleting the root qdisc removes classes and filters.
	if err := k.Apply([]model.Change{{Op: model.OpDelete, Device: "lan0", Qdisc: tree.Root}}); err != nil {
		t.Fatal(err)
	}
	if got := k.Tree("lan0"); got.Root != nil || len(got.Classes) != 0 || len(got.Filters) != 0 {
		t.Fatalf("after deleting the root: %+v", got)
	}
}

func TestApplyChangesRefusesOtherDevices(t *testing.T) {
	tree := mustBuild(t, base(t), nil)
	c := tree.Classes[0]
	_, err := modeltest.ApplyChanges(tree, []model.Change{{Op: model.OpChange, Device: "lan1", Class: &c}})
	if !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("error %v, want EINVAL", err)
	}
	c.Rate = 2 * tbf.Gbit
	c.Ceil = 2 * tbf.Gbit
	got, err := modeltest.ApplyChanges(tree, []model.Change{{Op: model.OpChange, Device: "lan0", Class: &c}})
	if err != nil {
		t.Fatal(err)
	}
	if r := findClass(t, got, model.RootClass).Rate; r != 2*tbf.Gbit {
		t.Errorf("root rate %s after change, want 2gbit", r)
	}
}
