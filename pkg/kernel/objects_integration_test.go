package kernel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// A foreign root qdisc is refused, naming the device and the qdisc, and
// touched nothing; with SetTakeover it is replaced, also one that has
// shaperd's handle 1: with another kind, and Result.Replaced says so.
func TestForeignRootReplaced(t *testing.T) {
	lab, k := labKernel(t, 1)
	dev := netnslab.RouterLANDev
	tg := model.Targets{Interface: model.InterfaceSpec{Name: dev, Bandwidth: 100 * tbf.Mbit},
		Users: []model.UserTarget{user("alice", "", lab.Users4[0], 5*tbf.Mbit, 10*tbf.Mbit)}}
	for _, foreign := range [][]string{
		{"root", "handle", "1:", "bfifo", "limit", "10000"},
		{"root", "handle", "5:", "htb", "default", "3"},
	} {
		lab.Router.MustRun(append([]string{"tc", "qdisc", "replace", "dev", dev}, foreign...)...)
		actual, err := k.Dump(dev)
		if err != nil {
			t.Fatal(err)
		}
		if actual.Root != nil {
			t.Fatalf("foreign root %v dumped as shaperd's: %+v", foreign, actual.Root)
		}
		desired, err := model.Build(tg, nil)
		if err != nil {
			t.Fatal(err)
		}
		k.SetTakeover(dev, false)
		res, err := k.Apply(model.Diff(actual, desired))
		want := fmt.Sprintf("%s: add root qdisc 1: htb: root qdisc %s %s was not created by shaperd; set takeover = true", dev, foreign[3], foreign[2])
		if !errors.Is(err, ErrForeignRoot) || !strings.Contains(err.Error(), want) || res.Writes != 0 {
			t.Errorf("foreign root %v without takeover: %d writes, %v; want no write and an error containing %q", foreign, res.Writes, err, want)
		}
		if out := lab.Router.MustRun("tc", "qdisc", "show", "dev", dev); !strings.Contains(out, foreign[3]+" "+foreign[2]+" root") {
			t.Errorf("the foreign root was touched:\n%s", out)
		}
		k.SetTakeover(dev, true)
		_, res = reconcile(t, k, tg, nil)
		if len(res.Replaced) != 1 || !strings.Contains(res.Replaced[0], foreign[3]+" "+foreign[2]) {
			t.Errorf("taking over %v: Result.Replaced = %q, want the %s named", foreign, res.Replaced, foreign[3])
		}
		lab.Router.MustRun("tc", "qdisc", "del", "dev", dev, "root")
	}
	// The kernel's default root (pfifo_fast/noqueue, handle 0:) is not
	// foreign: replaced without takeover.
	k.SetTakeover(dev, false)
	// Teardown removes shaperd's root and leaves a foreign one alone.
	reconcile(t, k, tg, nil)
	if err := k.Teardown(dev, ""); err != nil {
		t.Fatal(err)
	}
	if out := lab.Router.MustRun("tc", "qdisc", "show", "dev", dev); strings.Contains(out, "htb") {
		t.Errorf("after Teardown:\n%s", out)
	}
	lab.Router.MustRun("tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "bfifo", "limit", "10000")
	if err := k.Teardown(dev, ""); err != nil {
		t.Fatal(err)
	}
	if out := lab.Router.MustRun("tc", "qdisc", "show", "dev", dev); !strings.Contains(out, "bfifo 1: root") {
		t.Errorf("Teardown touched a foreign root:\n%s", out)
	}
}

// Leaf qdiscs are added, changed in place, changed to another kind (a
// bfifo too small for four aggregates becomes the segmenting tbf) and
// returned to the kernel's default; each step verifies.
func TestLeafChanges(t *testing.T) {
	lab, k := labKernel(t, 1)
	dev := netnslab.RouterLANDev
	tg := model.Targets{Interface: model.InterfaceSpec{Name: dev, Bandwidth: 100 * tbf.Mbit},
		Users: []model.UserTarget{user("alice", "", lab.Users4[0], 5*tbf.Mbit, 10*tbf.Mbit)}}
	ids := model.NewAssignment()
	steps := []*model.LeafQdisc{
		{Kind: "bfifo", Limit: 300000},
		{Kind: "bfifo", Limit: 600000},
		{Kind: "bfifo", Limit: 30000},
		{Kind: "pfifo", Limit: 50},
		nil,
		{Kind: "pfifo", Limit: 20},
	}
	for i, leaf := range steps {
		tg.Interface.Leaf = leaf
		_, res := reconcile(t, k, tg, ids)
		if i > 0 && res.Writes == 0 {
			t.Errorf("step %d (%+v): nothing written", i, leaf)
		}
		out := lab.Router.MustRun("tc", "qdisc", "show", "dev", dev)
		kind := ""
		if leaf != nil {
			kind = leaf.Kind
			if kind == model.LeafBfifo && leaf.Limit < model.SegmentBelow*uint32(model.DefaultAggregate) {
				kind = model.LeafTBF
			}
		}
		if leaf != nil && !strings.Contains(out, kind+" 100: parent 1:100") {
			t.Errorf("step %d: want %s 100: under 1:100 in\n%s", i, kind, out)
		}
		if leaf == nil && strings.Contains(out, "parent 1:100") {
			t.Errorf("step %d: a leaf is left under 1:100:\n%s", i, out)
		}
	}
}

// IFB devices are created up, found, reported by link events and deleted.
func TestLinks(t *testing.T) {
	netnslab.Require(t)
	ns := netnslab.NewNS(t, "links")
	k, err := Open(Options{NetNS: ns.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := k.WatchLinks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := k.LinkExists("sdifb0"); err != nil || ok {
		t.Fatalf("LinkExists before: %v, %v", ok, err)
	}
	if err := k.EnsureIFB("sdifb0"); err != nil {
		t.Fatal(err)
	}
	if err := k.EnsureIFB("sdifb0"); err != nil {
		t.Fatalf("EnsureIFB again: %v", err)
	}
	if up, err := k.LinkUp("sdifb0"); err != nil || !up {
		t.Fatalf("LinkUp: %v, %v", up, err)
	}
	if err := k.EnsureIFB("lo"); err == nil {
		t.Error("EnsureIFB on lo (not an ifb): no error")
	}
	if err := k.DeleteIFB("sdifb0"); err != nil {
		t.Fatal(err)
	}
	var sawUp, sawDel bool
	timeout := time.After(5 * time.Second)
	for !sawUp || !sawDel {
		select {
		case ev := <-events:
			if ev.Name == "sdifb0" {
				sawUp = sawUp || ev.Up
				sawDel = sawDel || ev.Deleted
			}
		case <-timeout:
			t.Fatalf("link events: up %v, deleted %v after 5s", sawUp, sawDel)
		}
	}
	cancel()
	for range events { // closed after cancel
	}
	if tree, err := k.Dump("nosuchdev0"); !errors.Is(err, ErrNoDevice) || tree.Device != "nosuchdev0" {
		t.Errorf("Dump of a missing device: %+v, %v; want an empty tree and ErrNoDevice", tree, err)
	}
}
