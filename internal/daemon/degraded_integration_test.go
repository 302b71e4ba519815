package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/netnslab"
	"github.com/shaperd/shaperd/pkg/kernel"
)

const degradedConfig = `
[daemon]
socket = "%[1]s/shaperd.sock"
state_dir = "%[1]s/state"
reconcile_interval = "1s"

[policy]
interval = "500ms"
ramp = "0s"
timezone = "UTC"

[[interface]]
name = "r-lan"
bandwidth = "1gbit"
default_tier = "bronze"
leaf_qdisc = "fq_codel"

[[interface]]
name = "r-lan"
direction = "ingress"
ifb = "r-ifb"
bandwidth = "1gbit"
default_tier = "bronze"

[tiers.bronze]
rate = "10mbit"
ceil = "10mbit"

[tiers.silver]
rate = "20mbit"
ceil = "20mbit"

[tiers.gold]
rate = "40mbit"
ceil = "40mbit"
`

// TestDegradedAndForeignInNamespace (issue 8 §3, §4): the real kernel
// refuses the users' leaf qdisc (fq_codel is not available here) on one
// interface: that interface is degraded with every user's error naming
// fq_codel, their classes and filters are in the kernel all the same,
// the other interface is ok; a cls_bpf filter added by hand is listed as
// foreign and does not stop the reconciles.
func TestDegradedAndForeignInNamespace(t *testing.T) {
	netnslab.Require(t)
	lab := netnslab.NewRouterLab(t, netnslab.RouterLabOptions{Users: 3})
	dir := e2eDir(t)
	writeConfig(t, dir, degradedConfig, e2eUsers(lab))
	k, err := kernel.Open(kernel.Options{NetNS: lab.Router.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	e := startE2E(t, lab, dir)
	status := func() *control.Status {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := e.c.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	iface := func(st *control.Status, dir string) control.InterfaceStatus {
		for _, is := range st.Interfaces {
			if is.Direction == dir {
				return is
			}
		}
		return control.InterfaceStatus{}
	}
	waitFor(t, 15*time.Second, "egress degraded, ingress ok", func() bool {
		st := status()
		return iface(st, "egress").State == control.StateDegraded && iface(st, "ingress").State == control.StateOK
	})
	st := status()
	if eg := iface(st, "egress"); !strings.Contains(eg.Error, "fq_codel") {
		t.Errorf("egress error %q; want the refused fq_codel named", eg.Error)
	}
	errs := 0
	for _, u := range st.Users {
		if u.Error != "" {
			errs++
			if !strings.Contains(u.Error, "fq_codel") || !strings.Contains(u.Error, "user "+u.Name) {
				t.Errorf("%s's error %q; want fq_codel and the user named", u.Name, u.Error)
			}
		}
	}
	if errs != len(lab.Users4) {
		t.Errorf("%d users with an error, want %d (one per user on the egress interface)", errs, len(lab.Users4))
	}
	tr, err := k.Dump(netnslab.RouterLANDev)
	if err != nil {
		t.Fatal(err)
	}
	users, filters := 0, 0
	for _, c := range tr.Classes {
		if c.Handle.Minor() >= 0x100 {
			users++
		}
	}
	filters = len(tr.Filters)
	if users != len(lab.Users4) || filters != 2*len(lab.Users4) {
		t.Errorf("r-lan holds %d user classes and %d filters; want %d and %d: the users are shaped with the default leaf",
			users, filters, len(lab.Users4), 2*len(lab.Users4))
	}

	// A filter of another tool on the shaped device: listed, and the
	// reconciles go on (the ingress interface stays ok, drift is repaired).
	lab.Router.MustRun("tc", "filter", "add", "dev", netnslab.RouterLANDev, "parent", "1:", "prio", "7", "protocol", "all",
		"bpf", "bytecode", "1,6 0 0 0,", "classid", "1:2")
	lab.Router.MustRun("tc", "filter", "del", "dev", netnslab.RouterLANDev, "parent", "1:", "prio", "100", "protocol", "ip")
	waitFor(t, 15*time.Second, "foreign filter listed and the IPv4 filters repaired", func() bool {
		eg := iface(status(), "egress")
		if len(eg.Foreign) != 1 || !strings.Contains(eg.Foreign[0], "bpf filter pref 7") {
			return false
		}
		tr, err := k.Dump(netnslab.RouterLANDev)
		return err == nil && len(tr.Filters) == 2*len(lab.Users4)
	})
}

// TestForeignRootNeedsTakeover (issue 8 §4): a root qdisc another tool
// put on a managed interface is not replaced: the interface is failed with
// an error naming the device and the qdisc, and the qdisc stays; after a
// reload with takeover = true it is replaced, logged and counted, and
// the interface is shaped.
func TestForeignRootNeedsTakeover(t *testing.T) {
	netnslab.Require(t)
	lab := netnslab.NewRouterLab(t, netnslab.RouterLabOptions{Users: 1})
	dir := e2eDir(t)
	cfg := strings.Replace(degradedConfig, "leaf_qdisc = \"fq_codel\"\n", "", 1)
	writeConfig(t, dir, cfg, e2eUsers(lab))
	lab.Router.MustRun("tc", "qdisc", "replace", "dev", netnslab.RouterLANDev, "root", "handle", "8001:", "tbf",
		"rate", "100mbit", "burst", "32k", "latency", "50ms")
	e := startE2E(t, lab, dir)
	egress := func() control.InterfaceStatus {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := e.c.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, is := range st.Interfaces {
			if is.Direction == "egress" {
				return is
			}
		}
		return control.InterfaceStatus{}
	}
	waitFor(t, 15*time.Second, "egress failed over the foreign root", func() bool { return egress().State == control.StateFailed })
	is := egress()
	for _, want := range []string{"r-lan", "root qdisc tbf 8001: was not created by shaperd", "takeover = true", "--takeover"} {
		if !strings.Contains(is.Error, want) {
			t.Errorf("egress error %q lacks %q", is.Error, want)
		}
	}
	if len(is.Foreign) != 1 || is.Foreign[0] != "root qdisc tbf 8001:" {
		t.Errorf("foreign %q; want the tbf root", is.Foreign)
	}
	if out := lab.Router.MustRun("tc", "qdisc", "show", "dev", netnslab.RouterLANDev); !strings.Contains(out, "tbf 8001: root") {
		t.Errorf("the foreign root was touched:\n%s", out)
	}
	if n := counterValue(t, e.d.stats.takeovers); n != 0 {
		t.Errorf("takeovers %v before takeover = true", n)
	}
	// takeover = true on the interface, and a reload.
	writeConfig(t, dir, strings.Replace(cfg, "default_tier = \"bronze\"\n", "default_tier = \"bronze\"\ntakeover = true\n", 1), e2eUsers(lab))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.c.Reload(ctx); err != nil {
		t.Fatalf("reload: %v", err)
	}
	waitFor(t, 15*time.Second, "egress ok after the takeover", func() bool { return egress().State == control.StateOK })
	if out := lab.Router.MustRun("tc", "qdisc", "show", "dev", netnslab.RouterLANDev); !strings.Contains(out, "htb 1: root") {
		t.Errorf("not taken over:\n%s", out)
	}
	if n := counterValue(t, e.d.stats.takeovers); n != 1 {
		t.Errorf("shaperd_takeovers_total = %v, want 1", n)
	}
}
