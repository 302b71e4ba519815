package main

import (
	"encoding/binary"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
)

// withoutBPFCaps runs ExecStart under setpriv without CAP_BPF,
// CAP_SYS_ADMIN and CAP_PERFMON: a kernel that refuses bpf(2) to shaperd.
func withoutBPFCaps(t *testing.T) unitEdit {
	setpriv := netnslab.RequireTool(t, "setpriv")
	return unitEdit{unit: func(u *netnslab.Unit) {
		u.ExecStart[0] = append([]string{setpriv, "--bounding-set=-bpf,-sys_admin,-perfmon", "--inh-caps=-bpf,-sys_admin,-perfmon"}, u.ExecStart[0]...)
	}}
}

// u32Config is cfg with classifier = "u32" on every interface, for tests
// that work on u32 objects by hand (the u32 path, kept as the fallback).
func u32Config(cfg string) string {
	return strings.ReplaceAll(cfg, "default_tier = \"bronze\"\n", "default_tier = \"bronze\"\nclassifier = \"u32\"\n")
}

// asUnitCaps runs ExecStart with the unit's capabilities only
// (CAP_NET_ADMIN and CAP_BPF: setpriv drops the others from the bounding
// set). `ip netns exec` gives the daemon a fresh /sys without bpffs;
// bpffs says what to put at /sys/fs/bpf first, as systemd mounts it at
// boot: "" nothing, "new" a new bpffs (gone with the daemon), else the
// path of a bpffs of the test's, bind-mounted (kept across restarts).
func asUnitCaps(t *testing.T, bpffs string) unitEdit {
	setpriv := netnslab.RequireTool(t, "setpriv")
	mount := ""
	switch bpffs {
	case "":
	case "new":
		mount = "mount -t bpf bpf /sys/fs/bpf && "
	default:
		mount = "mount --bind " + bpffs + " /sys/fs/bpf && "
	}
	return unitEdit{unit: func(u *netnslab.Unit) {
		u.ExecStart[0] = append([]string{"sh", "-c", mount + `exec "$0" --reuid=0 --bounding-set=-all,+net_admin,+bpf --inh-caps=-all,+net_admin,+bpf --ambient-caps=+net_admin,+bpf "$@"`, setpriv}, u.ExecStart[0]...)
	}}
}

// bpfConfig is daemonConfig with classifier = "bpf" on r-lan's egress.
var bpfConfig = strings.Replace(daemonConfig, "name = \"r-lan\"\nbandwidth = \"1gbit\"\n", "name = \"r-lan\"\nbandwidth = \"1gbit\"\nclassifier = \"bpf\"\n", 1)

// TestDaemonBPFClassifier: with classifier = "bpf" the unit's daemon
// classifies with shaperd's cls_bpf program; an entry of its map changed
// by hand is repaired by the reconcile loop, the filter deleted by hand
// comes back at once (a tc event); a restart adopts program, maps and
// filter with zero writes.
func TestDaemonBPFClassifier(t *testing.T) {
	if bpfConfig == daemonConfig {
		t.Fatal("bpfConfig: r-lan egress not found in daemonConfig")
	}
	// Map writes raise no traffic-control event: drift in a map is found
	// by the full reconcile (full_reconcile_interval, 1 s here).
	cfg := strings.Replace(bpfConfig, `reconcile_interval = "1s"`, "reconcile_interval = \"1s\"\nfull_reconcile_interval = \"1s\"", 1)
	u := newUnitLab(t, 3, cfg, labUsers)
	if !strings.Contains(u.Logs.String(), `interface=r-lan/egress device=r-lan classifier=bpf why=configured`) {
		t.Errorf("no log of the choice:\n%s", u.Logs.String())
	}
	if is := interfaceStatus(u, "r-lan"); is.Classifier != "bpf" {
		t.Errorf("status of r-lan: classifier %q, want bpf", is.Classifier)
	}
	if _, st := u.shaperctl("status"); !strings.Contains(st, "htb+bpf") {
		t.Errorf("shaperctl status does not show htb+bpf:\n%s", st)
	}
	out := u.Router.MustRun("tc", "filter", "show", "dev", "r-lan")
	m := regexp.MustCompile(`bpf chain 0 handle 0x1 shaperd_cls_v1 .*id (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no shaperd cls_bpf filter on r-lan:\n%s", out)
	}
	u0 := u.Users4[0]
	want := u.classOf("r-lan", u0).Handle

	// Drift: u0's entry pointed at the default class, as bpftool would.
	id, _ := strconv.Atoi(m[1])
	prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := info.MapIDs()
	var v4 *ebpf.Map
	for _, mid := range ids {
		mp, err := ebpf.NewMapFromID(mid)
		if err != nil {
			t.Fatal(err)
		}
		if mi, err := mp.Info(); err == nil && mi.Name == "shaperd_v4" {
			v4 = mp
			defer mp.Close()
		} else {
			mp.Close()
		}
	}
	if v4 == nil {
		t.Fatalf("program %d has no shaperd_v4 map (%v)", id, ids)
	}
	key := binary.NativeEndian.AppendUint32(nil, 32+32)
	key = append(key, 0, 0, 0, 0)
	key = append(key, u0.AsSlice()...)
	var got uint32
	if err := v4.Lookup(key, &got); err != nil || got != uint32(want) {
		t.Fatalf("map entry of %v: %#x, %v; want class %v", u0, got, err, want)
	}
	if err := v4.Put(key, binary.NativeEndian.AppendUint32(nil, 0x10002)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := v4.Lookup(key, &got); err == nil && got == uint32(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("map entry of %v still %#x after 10 s, want %v repaired\n%s", u0, got, want, u.Logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The cls_bpf filter deleted by hand: the tc event makes the daemon
	// attach the same program again.
	u.Router.MustRun("tc", "filter", "del", "dev", "r-lan", "parent", "1:", "pref", "99")
	waitFor(t, 5*time.Second, "program re-attached", func() bool {
		out, err := u.Router.Run("tc", "filter", "show", "dev", "r-lan")
		return err == nil && strings.Contains(out, "id "+m[1]+" ")
	})
	if c := u.classOf("r-lan", u0); c.Handle != want {
		t.Errorf("u0's class after the repair: %v, want %v", c.Handle, want)
	}

	// Uploads: the IFB's classifier (bpf by default) matches the source.
	upBefore := u.classOf("r-ifb", u0).Stats.Bytes
	u.Upload(t, u0, 1)
	if got := u.classOf("r-ifb", u0).Stats.Bytes - upBefore; got < 100000 {
		t.Errorf("u0's upload class on r-ifb counted %d bytes of a 1 s upload", got)
	}
	if out := u.Router.MustRun("tc", "filter", "show", "dev", "r-ifb"); !strings.Contains(out, "shaperd_cls_v1") {
		t.Errorf("r-ifb does not classify with bpf:\n%s", out)
	}

	// Restart: adopted with zero writes (under `ip netns exec` the bpffs
	// mount dies with the daemon; the program is found through the filter).
	restartAdopts(t, u, m[1], "restart")

	// Switching by reload: u32 replaces the bpf filter, and back.
	for _, c := range []struct{ cfg, has, hasNot string }{
		{u32Config(daemonConfig), "u32", " bpf "},
		{cfg, " bpf ", "u32"},
	} {
		u.writeConfig(c.cfg, labUsers(u.RouterLab))
		if out, err := u.Reload(); err != nil {
			t.Fatalf("reload: %v\n%s", err, out)
		}
		out := u.Router.MustRun("tc", "filter", "show", "dev", "r-lan")
		if !strings.Contains(out, c.has) || strings.Contains(out, c.hasNot) {
			t.Errorf("filters on r-lan after switching to%s:\n%s", c.has, out)
		}
		if got := u.classOf("r-lan", u0).Handle; got != want {
			t.Errorf("u0's class after switching to%s: %v, want %v", c.has, got, want)
		}
		before := u.classOf("r-lan", u0).Stats.Bytes
		u.Download(t, u0, 1)
		if got := u.classOf("r-lan", u0).Stats.Bytes - before; got < 100000 {
			t.Errorf("after switching to%s, u0's class counted %d bytes of a 1 s download", c.has, got)
		}
	}
}

// TestDaemonUnitCapabilities: with only the unit's capabilities
// (CAP_NET_ADMIN, CAP_BPF) and a bpffs at /sys/fs/bpf that outlives the
// daemon (as systemd's does), the daemon uses the bpf classifier, pins
// its maps and program there and classifies; a restart adopts them
// through the pins (it cannot open programs by id without CAP_SYS_ADMIN)
// with zero writes.
func TestDaemonUnitCapabilities(t *testing.T) {
	bpffs := t.TempDir()
	if err := unix.Mount("bpf", bpffs, "bpf", 0, "mode=0700"); err != nil {
		t.Fatalf("mount bpffs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(bpffs, unix.MNT_DETACH) }) // after the daemon is killed: pins and all go
	u := newUnitLabBefore(t, 2, daemonConfig, labUsers, nil, asUnitCaps(t, bpffs))
	if !strings.Contains(u.Logs.String(), "interface=r-lan/egress device=r-lan classifier=bpf") {
		t.Fatalf("bpf not chosen:\n%s", u.Logs.String())
	}
	caps := u.Router.MustRun("grep", "Cap", "/proc/"+strconv.Itoa(u.PID())+"/status")
	if !strings.Contains(caps, "CapEff:\t0000008000001000") {
		t.Errorf("the daemon's capabilities are not CAP_NET_ADMIN+CAP_BPF:\n%s", caps)
	}
	out := u.Router.MustRun("tc", "filter", "show", "dev", "r-lan")
	id := regexp.MustCompile(`shaperd_cls_v1 .*id (\d+)`).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("no cls_bpf filter:\n%s", out)
	}
	pins, _ := filepath.Glob(filepath.Join(bpffs, "shaperd", "netns-*", "ifindex-*", "qdisc-1", "prog"))
	if len(pins) != 2 { // r-lan and r-ifb
		t.Errorf("pinned programs %v, want r-lan's and r-ifb's", pins)
	}
	u0 := u.Users4[0]
	before := u.classOf("r-lan", u0)
	u.Download(t, u0, 1)
	if got := u.classOf("r-lan", u0).Stats.Bytes - before.Stats.Bytes; got < 100000 {
		t.Errorf("u0's class counted %d bytes of a 1 s download", got)
	}

	restartAdopts(t, u, id[1], "restart with the unit's capabilities")
}

// TestDaemonClassifierFallback: a daemon the kernel refuses bpf(2)
// (no CAP_BPF, no CAP_SYS_ADMIN) classifies with u32 and logs why; with
// classifier = "bpf" it refuses to start, naming the interface and the
// kernel's reason.
func TestDaemonClassifierFallback(t *testing.T) {
	t.Run("default falls back to u32", func(t *testing.T) {
		u := newUnitLabBefore(t, 2, daemonConfig, labUsers, nil, withoutBPFCaps(t))
		logs := u.Logs.String()
		if !strings.Contains(logs, "classifier=u32") || !strings.Contains(logs, "operation not permitted") {
			t.Errorf("no log of the u32 fallback with the kernel's reason:\n%s", logs)
		}
		if is := interfaceStatus(u, "r-lan"); is.Classifier != "u32" {
			t.Errorf("status of r-lan: classifier %q, want u32", is.Classifier)
		}
		out := u.Router.MustRun("tc", "filter", "show", "dev", "r-lan")
		if strings.Contains(out, " bpf ") || !strings.Contains(out, "u32") {
			t.Errorf("filters on r-lan:\n%s", out)
		}
		if c := u.classOf("r-lan", u.Users4[1]); c.Handle == 0 {
			t.Error("no class for u1")
		}
	})
	t.Run("the unit's capabilities without bpffs fall back to u32", func(t *testing.T) {
		u := newUnitLabBefore(t, 1, daemonConfig, labUsers, nil, asUnitCaps(t, ""))
		logs := u.Logs.String()
		if !strings.Contains(logs, "classifier=u32") || !strings.Contains(logs, "mounting one needs CAP_SYS_ADMIN") {
			t.Errorf("no log of the u32 fallback for want of bpffs:\n%s", logs)
		}
	})
	t.Run("explicit bpf is an error", func(t *testing.T) {
		edit := withoutBPFCaps(t)
		edit.noWait = true
		u := newUnitLabBefore(t, 1, bpfConfig, labUsers, nil, edit)
		err := u.Wait(30 * time.Second)
		logs := u.Logs.String()
		if err == nil {
			t.Fatalf("started although the kernel refuses bpf:\n%s", logs)
		}
		for _, s := range []string{"r-lan", `classifier = \"bpf\"`, "operation not permitted"} {
			if !strings.Contains(logs, s) {
				t.Errorf("error lacks %q:\n%s", s, logs)
			}
		}
	})
}

// restartWithoutWrites restarts the daemon (SIGTERM, start as the unit
// does) and checks that it adopted the kernel's state with zero writes
// through a reconcile tick.
func restartWithoutWrites(t *testing.T, u *unitLab, what string) {
	t.Helper()
	if err := u.Stop(); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	u.Start()
	u.WaitReady(60 * time.Second)
	time.Sleep(1200 * time.Millisecond) // a reconcile tick
	if w := u.metric("shaperd_kernel_writes_total"); w != 0 {
		t.Errorf("%s: %v kernel writes, want 0\n%s", what, w, u.Logs.String())
	}
}

// restartAdopts restarts the daemon and checks that it adopted the tree
// with zero kernel writes and kept r-lan's bpf program prog (its id).
func restartAdopts(t *testing.T, u *unitLab, prog, what string) {
	t.Helper()
	restartWithoutWrites(t, u, what)
	if out := u.Router.MustRun("tc", "filter", "show", "dev", "r-lan"); !strings.Contains(out, "id "+prog+" ") {
		t.Errorf("%s replaced program %s:\n%s", what, prog, out)
	}
}
