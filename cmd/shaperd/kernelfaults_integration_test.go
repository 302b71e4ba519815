package main

import (
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
)

// Two faults of the kernel's kind, with shaperd started as the unit starts
// it: the kernel refuses part of the plan, and another tool owns the root.

// degradedConfig asks for codel leaves on r-lan, which this kernel does
// not have: every user's leaf qdisc is refused there. (codel is not one of
// the kinds shaperd probes and replaces: it is sent as configured. A
// probed kind such as fq_codel falls back to a bfifo instead, see
// TestLeafFallbackAsUnit.)
var degradedConfig = strings.Replace(daemonConfig, "default_tier = \"bronze\"\n", "default_tier = \"bronze\"\nleaf_qdisc = \"codel\"\n", 1)

// interfaceStatus returns the status of the interface on device.
func interfaceStatus(u *unitLab, device string) control.InterfaceStatus {
	for _, is := range u.status().Interfaces {
		if is.Device == device {
			return is
		}
	}
	return control.InterfaceStatus{}
}

// TestKernelRefusesPartOfThePlan (one object the kernel refuses must not
// take down the rest; other tools' filters are left alone): the refused leaf qdiscs
// make r-lan degraded with every user's error naming codel, while their
// classes and filters are in the kernel and their traffic is shaped; the
// upload interface stays ok; the service is READY and says what is not ok.
// A cls_bpf filter added by hand is listed as foreign and does not stop
// drift repair.
func TestKernelRefusesPartOfThePlan(t *testing.T) {
	u := newUnitLab(t, 3, u32Config(degradedConfig), labUsers) // deletes a u32 priority by hand
	waitFor(t, 15*time.Second, "r-lan degraded, r-ifb ok", func() bool {
		return interfaceStatus(u, "r-lan").State == control.StateDegraded && interfaceStatus(u, "r-ifb").State == control.StateOK
	})
	if !u.Notify.Has("STATUS=shaping 3 interfaces, 3 users; not ok: r-lan/egress degraded") {
		t.Errorf("STATUS= does not say r-lan is degraded: %q", u.Notify.States())
	}
	if e := interfaceStatus(u, "r-lan").Error; !strings.Contains(e, "codel") {
		t.Errorf("r-lan error %q; want the refused codel named", e)
	}
	errs := 0
	for _, us := range u.status().Users {
		if us.Error != "" {
			errs++
			if !strings.Contains(us.Error, "codel") || !strings.Contains(us.Error, "user "+us.Name) {
				t.Errorf("%s's error %q; want codel and the user named", us.Name, us.Error)
			}
		}
	}
	if errs != len(u.Users4) {
		t.Errorf("%d users with an error, want %d", errs, len(u.Users4))
	}
	if code, out := u.shaperctl("status"); !strings.Contains(out, "degraded") || !strings.Contains(out, "codel") {
		t.Errorf("shaperctl status (exit %d) does not show the refusal:\n%s", code, out)
	}
	if got := measureDownload(t, u.RouterLab, u.Users4[2], 40e6); !within(got, 40e6, 0.8, 1.1) {
		t.Errorf("u2 (gold) downloads at %.2f Mbit/s with the default leaf, want ~40", got/1e6)
	}
	if n := u.metric("shaperd_errors_total", `kind="kernel"`); n < 3 {
		t.Errorf("shaperd_errors_total{kind=\"kernel\"} = %v, want the 3 refusals counted", n)
	}

	u.Router.MustRun("tc", "filter", "add", "dev", "r-lan", "parent", "1:", "prio", "7", "protocol", "all",
		"bpf", "bytecode", "1,6 0 0 0,", "classid", "1:2")
	u.Router.MustRun("tc", "filter", "del", "dev", "r-lan", "parent", "1:", "prio", "100", "protocol", "ip")
	waitFor(t, 15*time.Second, "foreign filter listed and the IPv4 filters repaired", func() bool {
		is := interfaceStatus(u, "r-lan")
		if len(is.Foreign) != 1 || !strings.Contains(is.Foreign[0], "bpf filter pref 7") {
			return false
		}
		tr, err := u.k.Dump("r-lan")
		return err == nil && len(tr.Filters) == 2*len(u.Users4)
	})
}

// TestForeignRootNeedsTakeover (another tool's objects are never replaced
// unasked): a root qdisc another tool put
// on a managed interface is not replaced: the interface is failed with an
// error naming the device and the qdisc, the qdisc stays, the other
// interfaces are shaped; after a reload with takeover = true it is
// replaced, logged and counted.
func TestForeignRootNeedsTakeover(t *testing.T) {
	netnslab.Require(t)
	var cfg string
	u := newUnitLabBefore(t, 1, daemonConfig, labUsers, func(lab *netnslab.RouterLab) {
		lab.Router.MustRun("tc", "qdisc", "replace", "dev", "r-lan", "root", "handle", "8001:", "tbf",
			"rate", "100mbit", "burst", "32k", "latency", "50ms")
	})
	cfg = daemonConfig
	waitFor(t, 15*time.Second, "r-lan failed over the foreign root", func() bool {
		return interfaceStatus(u, "r-lan").State == control.StateFailed
	})
	is := interfaceStatus(u, "r-lan")
	for _, want := range []string{"r-lan", "root qdisc tbf 8001: was not created by shaperd", "takeover = true", "--takeover"} {
		if !strings.Contains(is.Error, want) {
			t.Errorf("r-lan error %q lacks %q", is.Error, want)
		}
	}
	if len(is.Foreign) != 1 || is.Foreign[0] != "root qdisc tbf 8001:" {
		t.Errorf("foreign %q; want the tbf root", is.Foreign)
	}
	if out := u.Router.MustRun("tc", "qdisc", "show", "dev", "r-lan"); !strings.Contains(out, "tbf 8001: root") {
		t.Errorf("the foreign root was touched:\n%s", out)
	}
	if st := interfaceStatus(u, "r-ifb").State; st != control.StateOK {
		t.Errorf("r-ifb %q: one foreign root stopped the other interface", st)
	}
	if n := u.metric("shaperd_takeovers_total"); n != 0 {
		t.Errorf("takeovers %v before takeover = true", n)
	}
	u.writeConfig(strings.Replace(cfg, "default_tier = \"bronze\"\n", "default_tier = \"bronze\"\ntakeover = true\n", 1), labUsers(u.RouterLab))
	if out, err := u.Reload(); err != nil {
		t.Fatalf("reload: %v\n%s", err, out)
	}
	waitFor(t, 15*time.Second, "r-lan ok after the takeover", func() bool { return interfaceStatus(u, "r-lan").State == control.StateOK })
	if out := u.Router.MustRun("tc", "qdisc", "show", "dev", "r-lan"); !strings.Contains(out, "htb 1: root") {
		t.Errorf("not taken over:\n%s", out)
	}
	if n := u.metric("shaperd_takeovers_total"); n != 1 {
		t.Errorf("shaperd_takeovers_total = %v, want 1", n)
	}
	if !strings.Contains(u.Logs.String(), "takeover") {
		t.Errorf("the takeover is not logged:\n%s", u.Logs.String())
	}
}

// TestLeafFallbackAsUnit: a leaf kind the kernel lacks is replaced by a
// bfifo sized to queue_latency at the class's ceil (behind the segmenting
// tbf where that is small), with a warning naming the fallback; the
// interface is ok and every user class has that queue. Interfaces without leaf_qdisc get the default (fq_codel
// where the kernel has it, else the same bfifo).
func TestLeafFallbackAsUnit(t *testing.T) {
	have, err := kernel.LeafKindsAvailable()
	if err != nil {
		t.Fatal(err)
	}
	if have["fq_codel"] {
		t.Skip("this kernel has fq_codel: nothing falls back")
	}
	cfg := strings.Replace(daemonConfig, "default_tier = \"bronze\"\n", "default_tier = \"bronze\"\nleaf_qdisc = \"fq_codel\"\nqueue_latency = \"20ms\"\n", 1)
	u := newUnitLab(t, 3, cfg, labUsers)
	waitFor(t, 15*time.Second, "r-lan and r-ifb ok", func() bool {
		return interfaceStatus(u, "r-lan").State == control.StateOK && interfaceStatus(u, "r-ifb").State == control.StateOK
	})
	if logs := u.Logs.String(); !strings.Contains(logs, "interface[0].leaf_qdisc: fq_codel not available in this kernel; using bfifo sized to 20ms") ||
		!strings.Contains(logs, "default leaf qdisc: fq_codel not available in this kernel; using bfifo sized to 50ms") {
		t.Errorf("no fallback warnings in the log:\n%s", tail(logs, 3000))
	}
	for dev, latency := range map[string]float64{"r-lan": 0.020, "r-ifb": 0.050} {
		tr, err := u.k.Dump(dev)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, c := range tr.Classes {
			if c.Labels.Kind == "root" || c.Handle.Minor() < 0x100 {
				continue
			}
			n++
			want := uint32(max(float64(c.Ceil.BytesPerSecond())*latency, 2*float64(model.DefaultFrame)))
			kind := "bfifo" // a queue of fewer than four 64 KiB aggregates is fed by the segmenting tbf
			if uint64(want) < model.SegmentBelow*uint64(model.DefaultAggregate) {
				kind = model.LeafTBF
			}
			if c.Leaf == nil || c.Leaf.Kind != kind || c.Leaf.Limit != want {
				t.Errorf("%s class %s (ceil %s): leaf %+v, want %s limit %d", dev, c.Handle, c.Ceil, c.Leaf, kind, want)
			}
		}
		if n != len(u.Users4) {
			t.Errorf("%s: %d user classes, want %d", dev, n, len(u.Users4))
		}
	}
}
