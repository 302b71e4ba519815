package kernel

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/kernel/bpfcls"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// bpfLab is a router lab with a Kernel whose LAN device uses the bpf
// classifier, pinning under root.
func bpfLab(t *testing.T, root string) (*netnslab.RouterLab, *Kernel) {
	t.Helper()
	netnslab.Require(t)
	lab := netnslab.NewRouterLab(t, netnslab.RouterLabOptions{Users: 3})
	k, err := Open(Options{NetNS: lab.Router.Name, BPFPinRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	k.SetClassifier(netnslab.RouterLANDev, ClassifierBPF)
	return lab, k
}

// inodeOf is the nsfs inode of the named network namespace.
func inodeOf(t *testing.T, name string) uint64 {
	var st unix.Stat_t
	if err := unix.Stat("/run/netns/"+name, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// pinFiles lists the files under root.
func pinFiles(root string) []string {
	var out []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, strings.TrimPrefix(p, root))
		}
		return nil
	})
	return out
}

// TestBPFClassifierApply: two namespaces whose LAN devices have the same
// name (and maybe index) shape with the bpf classifier at once, pinned
// under one bpffs in directories of their own (the namespace's inode is in
// the path); a new Kernel adopts with zero writes; a user's new address
// is one write (a map update; the tc filter and its program stay); and
// Teardown removes the pins.
func TestBPFClassifierApply(t *testing.T) {
	mnt := filepath.Join(t.TempDir(), "bpf")
	root := filepath.Join(mnt, "shaperd")
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	labA, kA := bpfLab(t, root)
	labB, kB := bpfLab(t, root)
	// Pins of a device that is gone (ifindex 999 in A's namespace): the
	// first bpf classifier removes them.
	ino := inodeOf(t, labA.Router.Name)
	stale := bpfcls.PinDir(root, ino, 999, model.RootQdisc)
	if err := bpfcls.EnsureBPFFS(root); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(stale, 0o700); err != nil {
		t.Fatal(err)
	}
	var desired [2]model.Tree
	for i, lk := range []struct {
		lab *netnslab.RouterLab
		k   *Kernel
	}{{labA, kA}, {labB, kB}} {
		desired[i], _ = reconcile(t, lk.k, threeTiers(lk.lab), model.NewAssignment())
		out := lk.lab.Router.MustRun("tc", "filter", "show", "dev", netnslab.RouterLANDev)
		if !strings.Contains(out, "bpf") || strings.Contains(out, "u32") {
			t.Fatalf("filters on %s:\n%s", netnslab.RouterLANDev, out)
		}
	}
	if _, err := os.Stat(filepath.Dir(stale)); !os.IsNotExist(err) {
		t.Errorf("pins of a device that is gone: %v", err)
	}
	files := pinFiles(root)
	t.Logf("pins: %v", files)
	if len(files) != 6 {
		t.Fatalf("pins %v, want 3 per namespace", files)
	}
	dirs := map[string]bool{}
	for _, f := range files {
		dirs[filepath.Dir(f)] = true
	}
	if len(dirs) != 2 {
		t.Errorf("pin directories %v, want one per namespace", dirs)
	}

	// Adoption by a new Kernel: nothing to do.
	k2, err := Open(Options{NetNS: labA.Router.Name, BPFPinRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	defer k2.Close()
	k2.SetClassifier(netnslab.RouterLANDev, ClassifierBPF)
	if res, err := apply(t, k2, desired[0]); err != nil || res.Writes != 0 {
		t.Errorf("adoption: %d writes, %v; want 0", res.Writes, err)
	}
	prog := func() string {
		out := labA.Router.MustRun("tc", "filter", "show", "dev", netnslab.RouterLANDev)
		_, id, _ := strings.Cut(out, " id ")
		return strings.Fields(id + " ")[0]
	}
	before := prog()

	// A new address of alice's: one map update.
	tg := threeTiers(labA)
	tg.Users[0].Prefixes = append(tg.Users[0].Prefixes, netip.MustParsePrefix("198.18.250.0/24"))
	want, err := model.Build(tg, model.AssignmentFromTree(desired[0], map[string][]netip.Prefix{
		"alice": tg.Users[0].Prefixes, "bob": tg.Users[1].Prefixes, "carol": tg.Users[2].Prefixes}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := apply(t, k2, want)
	if err != nil || res.Writes != 1 {
		t.Errorf("one new address: %d writes, %v; want 1 (a map update)", res.Writes, err)
	}
	verify(t, k2, want)
	if after := prog(); after != before || before == "" {
		t.Errorf("program id %q -> %q: the filter was rewritten", before, after)
	}

	// A TBF root in place of A's HTB (a qdisc that takes no filters): the
	// new root removes the HTB's bpf pins (their maps describe a tree that
	// is gone); Teardown removes B's.
	reconcile(t, kA, model.Targets{Interface: model.InterfaceSpec{Name: netnslab.RouterLANDev, Shaper: model.ShaperTBF, Bandwidth: 20 * tbf.Mbit}}, nil)
	for _, f := range pinFiles(root) {
		if strings.Contains(f, fmt.Sprintf("netns-%d/", ino)) {
			t.Errorf("pin %s of A's HTB left after the TBF root replaced it", f)
		}
	}
	for _, k := range []*Kernel{kA, kB} {
		if err := k.Teardown(netnslab.RouterLANDev, ""); err != nil {
			t.Fatal(err)
		}
	}
	if left := pinFiles(root); len(left) != 0 {
		t.Errorf("pins left after Teardown: %v", left)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Errorf("pin directories left after Teardown: %v", ents)
	}
}
