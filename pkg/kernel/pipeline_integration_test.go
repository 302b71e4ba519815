package kernel

import (
	"errors"
	"testing"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
)

// vethNS is a namespace with a veth pair (dev, dev+"p") and a Kernel in it.
func vethNS(t *testing.T, dev string) *Kernel {
	t.Helper()
	netnslab.Require(t)
	ns := netnslab.NewNS(t, "pipe")
	ns.MustRun("ip", "link", "add", dev, "type", "veth", "peer", "name", dev+"p")
	ns.MustRun("ip", "link", "set", dev, "up")
	k, err := Open(Options{NetNS: ns.Name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return k
}

// splitClasses returns the changes without a class and the class changes.
func splitClasses(changes []model.Change) (other, classes []model.Change) {
	for _, c := range changes {
		if c.Class != nil {
			classes = append(classes, c)
		} else {
			other = append(other, c)
		}
	}
	return other, classes
}

// kernelWrites is how many of the tree's objects a class-and-leaf Apply
// wrote: every class and every explicit leaf qdisc.
func kernelWrites(tr model.Tree) int {
	n := len(tr.Classes)
	for _, c := range tr.Classes {
		if c.Leaf != nil {
			n++
		}
	}
	return n
}

// A refused request in the middle of a pipelined run (a leaf qdisc kind the
// kernel lacks) is reported as exactly that change; the rest of its run is
// applied, later runs are not sent, Result.Writes is what the kernel holds,
// and the next reconcile converges.
func TestPipelinedRunRefusal(t *testing.T) {
	const dev = "pl0"
	k := vethNS(t, dev)
	tg := manyUsers(dev, 150, false) // about 300 requests: several runs
	tg.Interface.Leaf = &model.LeafQdisc{Kind: "pfifo", Limit: 50}
	desired, err := model.Build(tg, nil)
	if err != nil {
		t.Fatal(err)
	}
	pre, classes := splitClasses(model.Diff(model.Tree{Device: dev}, desired))
	if _, err := k.Apply(pre); err != nil {
		t.Fatalf("root qdisc: %v", err)
	}
	// A user class in the middle of the second run (runs are 64 requests,
	// two per user class) gets a leaf kind this kernel lacks.
	bad := -1
	for i := 45; i < len(classes); i++ {
		if classes[i].Class.Labels.User != "" && classes[i].Class.Leaf != nil {
			bad = i
			break
		}
	}
	if bad < 0 {
		t.Fatalf("no user class with a leaf after change 45 of %d", len(classes))
	}
	refused := *classes[bad].Class
	refused.Leaf = &model.LeafQdisc{Kind: "fq_codel"}
	classes[bad].Class = &refused

	res, err := k.Apply(classes)
	var ke *Error
	if !errors.As(err, &ke) {
		t.Fatalf("Apply: %v (%T); want *Error", err, err)
	}
	if !errors.Is(err, ErrKindUnsupported) {
		t.Skipf("this kernel has fq_codel (%v); nothing to refuse", err)
	}
	wantObj := "leaf qdisc fq_codel of " + classObject(&refused)
	if ke.Object != wantObj || ke.Kind != "fq_codel" || ke.Device != dev || ke.Op != model.OpAdd || ke.Message == "" {
		t.Errorf("error %+v; want device %s, op add, object %q, kind fq_codel and the kernel's message", ke, dev, wantObj)
	}

	actual, err := k.Dump(dev)
	if err != nil {
		t.Fatal(err)
	}
	if got := kernelWrites(actual); res.Writes != got {
		t.Errorf("Result.Writes = %d; the kernel holds %d classes and leaf qdiscs", res.Writes, got)
	}
	byHandle := map[model.Handle]model.Class{}
	for _, c := range actual.Classes {
		byHandle[c.Handle] = c
	}
	if c, ok := byHandle[refused.Handle]; !ok || c.Leaf != nil {
		t.Errorf("refused leaf's class %s: present %v, leaf %+v; want the class with the default leaf", refused.Handle, ok, c.Leaf)
	}
	next := classes[bad+1].Class
	if c, ok := byHandle[next.Handle]; !ok || c.Leaf == nil || c.Leaf.Kind != "pfifo" {
		t.Errorf("class %s after the refused one in the same run: present %v, leaf %+v; want it applied with its pfifo", next.Handle, ok, c.Leaf)
	}
	// One bad object never takes down the rest: Apply goes on
	// after the refused run, and reports exactly the one refusal, with
	// the user it serves.
	if len(actual.Classes) != len(classes) {
		t.Errorf("%d classes exist, want all %d: Apply goes on after a refusal", len(actual.Classes), len(classes))
	}
	if len(res.Refused) != 1 || res.Refused[0].Labels.User != refused.Labels.User || res.Refused[0].Object != wantObj {
		t.Errorf("Result.Refused = %v; want the one refusal of %s (user %s)", res.Refused, wantObj, refused.Labels.User)
	}

	if _, err := apply(t, k, desired); err != nil {
		t.Fatalf("reconcile after the refusal: %v", err)
	}
	verify(t, k, desired)
}

// Pipelined deletes of classes that are already gone are no writes and no
// error.
func TestPipelinedDeletesOfGone(t *testing.T) {
	const dev = "pl1"
	k := vethNS(t, dev)
	tg := manyUsers(dev, 100, false)
	tg.Interface.Leaf = &model.LeafQdisc{Kind: "bfifo", Limit: 30000}
	desired, err := model.Build(tg, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Apply(model.Diff(model.Tree{Device: dev}, desired))
	if err != nil {
		t.Fatal(err)
	}
	if res.Writes < kernelWrites(desired)+1 {
		t.Errorf("creating %d classes with leaves: %d writes, want at least %d", len(desired.Classes), res.Writes, kernelWrites(desired)+1)
	}
	rootOnly := desired
	rootOnly.Classes = nil
	_, dels := splitClasses(model.Diff(desired, rootOnly))
	if len(dels) != len(desired.Classes) {
		t.Fatalf("%d class deletes for %d classes", len(dels), len(desired.Classes))
	}
	for i, want := range []int{len(desired.Classes), 0} {
		res, err := k.Apply(dels)
		if err != nil || res.Writes != want {
			t.Errorf("delete pass %d: %d writes, %v; want %d writes, no error", i, res.Writes, err, want)
		}
	}
	actual, err := k.Dump(dev)
	if err != nil {
		t.Fatal(err)
	}
	if len(actual.Classes) != 0 || actual.Root == nil {
		t.Errorf("after the deletes: %d classes, root %+v; want the root qdisc alone", len(actual.Classes), actual.Root)
	}
}
