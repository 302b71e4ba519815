package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// A three-level network behind r-lan: a site, a building under it and two
// access points under the building, with capacities that bind at each
// level. Users u0 (gold) and u1 (bronze, added at run time) are behind
// ap-1, u2 (gold) and u3 (bronze) behind ap-2.
const nodesConfig = `
[daemon]
socket = "%[1]s/shaperd.sock"
state_dir = "%[1]s/state"
metrics = "` + metricsAddr + `"
reconcile_interval = "1s"

[policy]
timezone = "UTC"

[[interface]]
name = "r-lan"
bandwidth = "100mbit"
default_tier = "bronze"

[[interface]]
name = "r-lan"
direction = "ingress"
ifb = "r-ifb"
bandwidth = "100mbit"
default_tier = "bronze"

[tiers.bronze]
rate = "2mbit"
ceil = "50mbit"

[tiers.gold]
rate = "8mbit"
ceil = "50mbit"

[nodes.campus]
rate = "50mbit"

[nodes.dorm]
parent = "campus"
rate = "25mbit"

[nodes.ap-1]
parent = "dorm"
rate = "10mbit"
ceil = "20mbit"
upload_rate = "6mbit"
upload_ceil = "12mbit"

[nodes.ap-2]
parent = "dorm"
rate = "5mbit"
ceil = "8mbit"
`

// nodesUsers puts u0, u2 and u3 of lab in users.toml (u1 comes at run
// time).
func nodesUsers(lab *netnslab.RouterLab) string {
	var b strings.Builder
	for _, u := range []struct {
		i          int
		tier, node string
	}{{0, "gold", "campus/dorm/ap-1"}, {2, "gold", "ap-2"}, {3, "bronze", "ap-2"}} {
		fmt.Fprintf(&b, "[[user]]\nname = \"u%d\"\ntier = %q\nnode = %q\naddresses = [%q, %q]\n\n", u.i, u.tier, u.node, lab.Users4[u.i], lab.Users6[u.i])
	}
	return b.String()
}

// parentOf returns the class that is c's parent on device.
func (u *unitLab) parentOf(device string, c model.Class) model.Class {
	u.t.Helper()
	tr, err := u.k.Dump(device)
	if err != nil {
		u.t.Fatal(err)
	}
	for _, p := range tr.Classes {
		if p.Handle == c.Parent {
			return p
		}
	}
	u.t.Fatalf("%s: no parent %s of class %s", device, c.Parent, c.Handle)
	return model.Class{}
}

// TestNodesCapEveryLevel: with the daemon started as the unit starts it,
// every node's ceiling holds (within 3 %, with the users behind it
// saturated, downloads and uploads), users share by their guarantees, and
// a user moved to another access point under load gets the new node's
// capacity within a second, with no window above it.
func TestNodesCapEveryLevel(t *testing.T) {
	u := newUnitLab(t, 4, nodesConfig, nodesUsers)
	u.mustCtl("user", "add", "u1", "--tier", "bronze", "--node", "ap-1",
		"--address", u.Users4[1].String(), "--address", u.Users6[1].String())

	cls := func(i int) model.Class { return u.classOf("r-lan", u.Users4[i]) }
	ap1 := u.parentOf("r-lan", cls(0))
	ap2 := u.parentOf("r-lan", cls(2))
	dorm := u.parentOf("r-lan", ap1)
	if cls(1).Parent != ap1.Handle || ap2.Parent != dorm.Handle || ap1.Ceil != 20*tbf.Mbit || ap2.Ceil != 8*tbf.Mbit || dorm.Ceil != 25*tbf.Mbit {
		t.Fatalf("the tree: u1 under %s, ap-1 %s ceil %v, ap-2 %s under %s ceil %v, dorm %s ceil %v\n%s",
			cls(1).Parent, ap1.Handle, ap1.Ceil, ap2.Handle, ap2.Parent, ap2.Ceil, dorm.Handle, dorm.Ceil, u.mustCtl("status"))
	}

	// saturate runs flows for 7 s and returns the class rates of handles
	// over 4 s in the middle.
	saturate := func(device string, flows []netnslab.Flow, handles ...model.Handle) []float64 {
		done := make(chan []float64, 1)
		go func() { done <- u.Measure(t, 7, flows...) }()
		time.Sleep(2500 * time.Millisecond) // past iperf3's omitted second and slow start
		rates := classRates(t, u, device, 4*time.Second, handles...)
		<-done
		return rates
	}
	down := func(is ...int) []netnslab.Flow {
		var fs []netnslab.Flow
		for _, i := range is {
			fs = append(fs, netnslab.Flow{User: u.Users4[i], Dir: netnslab.Download, Streams: 4})
		}
		return fs
	}
	capHolds := func(what string, got float64, ceil tbf.Rate) {
		t.Helper()
		if got > 1.03*float64(ceil) {
			t.Errorf("%s: %.2f Mbit/s, above its ceil %v by more than 3%%", what, got/1e6, ceil)
		}
		if got < 0.9*float64(ceil) {
			t.Errorf("%s: %.2f Mbit/s, well below the ceil %v its saturated users could use", what, got/1e6, ceil)
		}
	}
	guaranteed := func(what string, got float64, c model.Class) {
		t.Helper()
		if got < 0.95*float64(c.Rate) {
			t.Errorf("%s: %.2f Mbit/s, below its guarantee %v", what, got/1e6, c.Rate)
		}
	}

	t.Run("one access point saturated", func(t *testing.T) {
		r := saturate("r-lan", down(0, 1), ap1.Handle, cls(0).Handle, cls(1).Handle)
		t.Logf("ap-1 %.2f Mbit/s (ceil 20mbit): u0 gold %.2f, u1 bronze %.2f", r[0]/1e6, r[1]/1e6, r[2]/1e6)
		capHolds("ap-1", r[0], ap1.Ceil)
		guaranteed("u0", r[1], cls(0))
		guaranteed("u1", r[2], cls(1))
		if r[1] <= r[2] {
			t.Errorf("u0 (gold, 8mbit guaranteed) %.2f Mbit/s <= u1 (bronze, 2mbit) %.2f", r[1]/1e6, r[2]/1e6)
		}
	})
	t.Run("every user saturated", func(t *testing.T) {
		r := saturate("r-lan", down(0, 1, 2, 3), dorm.Handle, ap1.Handle, ap2.Handle,
			cls(0).Handle, cls(1).Handle, cls(2).Handle, cls(3).Handle)
		t.Logf("dorm %.2f Mbit/s (ceil 25mbit): ap-1 %.2f (20), ap-2 %.2f (8); users %.2f %.2f %.2f %.2f",
			r[0]/1e6, r[1]/1e6, r[2]/1e6, r[3]/1e6, r[4]/1e6, r[5]/1e6, r[6]/1e6)
		// The building binds: the access points share it by their
		// guarantees, each under its own ceil.
		capHolds("dorm", r[0], dorm.Ceil)
		for i, ap := range []model.Class{ap1, ap2} {
			if r[1+i] > 1.03*float64(ap.Ceil) {
				t.Errorf("ap-%d: %.2f Mbit/s above its ceil %v", i+1, r[1+i]/1e6, ap.Ceil)
			}
			guaranteed(fmt.Sprint("ap-", i+1), r[1+i], ap)
		}
		for i := 0; i < 4; i++ {
			guaranteed(fmt.Sprint("u", i), r[3+i], cls(i))
		}
	})
	t.Run("uploads under their node", func(t *testing.T) {
		up0, up1 := u.classOf("r-ifb", u.Users4[0]), u.classOf("r-ifb", u.Users4[1])
		apUp := u.parentOf("r-ifb", up0)
		if up1.Parent != apUp.Handle || apUp.Ceil != 12*tbf.Mbit {
			t.Fatalf("uploads: u1 under %s, ap-1 %s ceil %v", up1.Parent, apUp.Handle, apUp.Ceil)
		}
		r := saturate("r-ifb", []netnslab.Flow{{User: u.Users4[0], Dir: netnslab.Upload, Streams: 4}, {User: u.Users4[1], Dir: netnslab.Upload, Streams: 4}},
			apUp.Handle, up0.Handle, up1.Handle)
		t.Logf("ap-1 upload %.2f Mbit/s (ceil 12mbit): u0 %.2f, u1 %.2f", r[0]/1e6, r[1]/1e6, r[2]/1e6)
		capHolds("ap-1 upload", r[0], apUp.Ceil)
		guaranteed("u0 upload", r[1], up0)
		guaranteed("u1 upload", r[2], up1)
	})
	t.Run("a node added and removed at run time", func(t *testing.T) {
		// An access point as small as the cheapest tiers: its class
		// alone is made under dorm (nothing else moves), and its ceiling
		// holds for the user moved behind it.
		out := u.mustCtl("node", "add", "ap-3", "--parent", "campus/dorm", "--rate", "1mbit", "--ceil", "2mbit")
		if !strings.Contains(out, "ap-3: at campus/dorm/ap-3, download 1mbit/2mbit") {
			t.Errorf("node add answered %q", out)
		}
		u.mustCtl("user", "move", "u1", "ap-3")
		ap3 := u.parentOf("r-lan", cls(1))
		if ap3.Parent != dorm.Handle || ap3.Rate != tbf.Mbit || ap3.Ceil != 2*tbf.Mbit {
			t.Fatalf("u1 under %s (under %s, %v/%v), want ap-3 under dorm %s with 1mbit/2mbit\n%s",
				ap3.Handle, ap3.Parent, ap3.Rate, ap3.Ceil, dorm.Handle, u.mustCtl("status", "--tree"))
		}
		r := saturate("r-lan", down(1), ap3.Handle)
		t.Logf("ap-3 (added at run time) %.3f Mbit/s (ceil 2mbit)", r[0]/1e6)
		capHolds("ap-3 (added at run time)", r[0], ap3.Ceil)
		if logs := u.Logs.String(); !strings.Contains(logs, `msg="run-time nodes changed" op=add node=ap-3 runtime_nodes=1 patched=true`) {
			t.Errorf("node add did not make ap-3's class alone (patched=true); the log:\n%s", logs)
		}
		if code, out := u.shaperctl("node", "remove", "ap-3"); code != 1 || !strings.Contains(out, "node ap-3 has 1 users behind it (u1)") {
			t.Errorf("removing ap-3 with u1 behind it: exit %d, %q", code, out)
		}
		u.mustCtl("user", "move", "u1", "ap-1")
		u.mustCtl("node", "remove", "ap-3")
		tr, err := u.k.Dump("r-lan")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range tr.Classes {
			if c.Handle == ap3.Handle {
				t.Errorf("ap-3's class %s is still in the kernel after node remove", c.Handle)
			}
		}
		if list := u.mustCtl("node", "list"); strings.Contains(list, "ap-3") || !strings.Contains(list, "ap-2") {
			t.Errorf("node list after the removal:\n%s", list)
		}
		if u1 := cls(1); u1.Parent != ap1.Handle {
			t.Errorf("u1 under %s after moving back, want ap-1 %s", u1.Parent, ap1.Handle)
		}
	})
	t.Run("a user moved under load", func(t *testing.T) {
		done := make(chan []float64, 1)
		go func() { done <- u.Measure(t, 9, down(1)...) }()
		time.Sleep(3 * time.Second)
		before := classRates(t, u, "r-lan", time.Second, cls(1).Handle)[0]
		start := time.Now()
		u.mustCtl("user", "move", "u1", "ap-2")
		answer := time.Since(start)
		after := cls(1)
		if after.Parent != ap2.Handle {
			t.Fatalf("u1 under %s after the move, want ap-2 %s", after.Parent, ap2.Handle)
		}
		// ap-2 in 250 ms windows for 2 s from the move.
		var windows []float64
		for i := 0; i < 8; i++ {
			windows = append(windows, classRates(t, u, "r-lan", 250*time.Millisecond, ap2.Handle)[0])
		}
		<-done
		var text []string
		for _, w := range windows {
			text = append(text, fmt.Sprintf("%.1f", w/1e6))
		}
		t.Logf("u1 alone: %.2f Mbit/s under ap-1 (ceil 20mbit); after the move (shaperctl answered in %v), ap-2 per 250 ms: %s Mbit/s (ceil 8mbit)",
			before/1e6, answer.Round(time.Millisecond), strings.Join(text, " "))
		if before < 0.9*20e6 {
			t.Errorf("before the move u1 got %.2f Mbit/s, below ap-1's 20mbit it could use", before/1e6)
		}
		for i, w := range windows {
			if w > 1.1*8e6 {
				t.Errorf("window %d after the move: %.2f Mbit/s through ap-2, above its 8mbit ceil (a burst)", i, w/1e6)
			}
		}
		// Within a second: the windows from 0.75 s on carry the new rate.
		for i := 3; i < len(windows); i++ {
			if windows[i] < 0.7*8e6 {
				t.Errorf("window %d (%v after the move): %.2f Mbit/s, u1's download did not go on at ap-2's 8mbit", i, time.Duration(i)*250*time.Millisecond, windows[i]/1e6)
			}
		}
	})
}
