package daemon

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// refuseApply applies cs one by one like kernel.Apply: a change that
// refuseObj refuses is reported in Result.Refused, the children and
// filters of a class that was not created are skipped, the rest applied.
// k.mu is held.
func (k *fakeKernel) refuseApply(cs []model.Change) (kernel.Result, error) {
	var res kernel.Result
	blocked := map[string]string{} // device + class handle -> why
	key := func(dev string, h model.Handle) string { return dev + " " + h.String() }
	var errs []error
	for _, c := range cs {
		var why string
		switch {
		case c.Class != nil && c.Op != model.OpDelete:
			why = blocked[key(c.Device, c.Class.Parent)]
		case c.Filter != nil && c.Op == model.OpAdd:
			why = blocked[key(c.Device, c.Filter.ClassID)]
		}
		if why != "" {
			e := &kernel.Error{Device: c.Device, Op: c.Op, Object: c.String(), Message: "not applied: " + why, Err: kernel.ErrDependencyRefused}
			if c.Class != nil {
				e.Labels = c.Class.Labels
				blocked[key(c.Device, c.Class.Handle)] = why
			} else if c.Filter != nil {
				e.Labels = c.Filter.Labels
			}
			res.Refused = append(res.Refused, e)
			errs = append(errs, e)
			continue
		}
		if err := k.refuseObj(c); err != nil {
			e := &kernel.Error{Device: c.Device, Op: c.Op, Object: c.String(), Message: err.Error(), Err: syscall.EINVAL}
			if c.Class != nil {
				e.Labels = c.Class.Labels
				if c.Op == model.OpAdd {
					blocked[key(c.Device, c.Class.Handle)] = c.String() + " was refused"
				}
			} else if c.Filter != nil {
				e.Labels = c.Filter.Labels
			}
			res.Refused = append(res.Refused, e)
			errs = append(errs, e)
			continue
		}
		if c.Redirect != nil && c.Op == model.OpAdd {
			k.links[c.Redirect.IFB] = true
		}
		if err := k.mem.Apply([]model.Change{c}); err != nil {
			return res, err
		}
		res.Writes++
	}
	k.writes += res.Writes
	return res, errors.Join(errs...)
}

// refuseUser refuses adding or changing user's class on device, with the
// kernel's text msg.
func refuseUser(device, user, msg string) func(model.Change) error {
	return func(c model.Change) error {
		if c.Device == device && c.Class != nil && c.Class.Labels.User == user && c.Op != model.OpDelete {
			return errors.New(msg)
		}
		return nil
	}
}

func statusOf(d *Daemon, iface, dir string) (control.InterfaceStatus, map[string]control.UserStatus) {
	st := d.status()
	users := map[string]control.UserStatus{}
	for _, u := range st.Users {
		// Both directions of an interface have its name: keep the entry
		// with an error, if any.
		if u.Interface == iface && users[u.Name].Error == "" {
			users[u.Name] = u
		}
	}
	for _, is := range st.Interfaces {
		if is.Name == iface && is.Direction == dir {
			return is, users
		}
	}
	return control.InterfaceStatus{}, users
}

// TestRefusedUserDegradesInterface (one refused object must not take down
// the rest): the kernel refuses one
// user's class; every other object is applied, the interface is degraded
// (never ok) naming the user, the user has an error in status, the
// refusal is counted, and once the kernel accepts it the state is ok.
func TestRefusedUserDegradesInterface(t *testing.T) {
	k := newFakeKernel("lan0")
	k.refuseObj = refuseUser("lan0", "alice", "Specified qdisc kind is unknown")
	d, _ := newTestDaemon(t, k, newFakeClock(), "")
	err := d.Once(context.Background())
	if !errors.Is(err, ErrDegraded) || !strings.Contains(err.Error(), "user alice") {
		t.Errorf("Once: %v; want ErrDegraded naming alice", err)
	}
	is, users := statusOf(d, "lan0", "egress")
	if is.State != control.StateDegraded || !strings.Contains(is.Error, "user alice") || !strings.Contains(is.Error, "Specified qdisc kind is unknown") {
		t.Errorf("interface: state %q error %q; want degraded naming alice and the kernel's text", is.State, is.Error)
	}
	if u := users["alice"]; !strings.Contains(u.Error, "not shaped") || !strings.Contains(u.Error, "Specified qdisc kind is unknown") {
		t.Errorf("alice's error %q; want her refusal", u.Error)
	}
	if u := users["bob"]; u.Error != "" {
		t.Errorf("bob's error %q; want none", u.Error)
	}
	// bob is shaped: his class and filter are in the kernel; alice's
	// filters were not applied (her class does not exist).
	tr := k.mem.Tree("lan0")
	var bobClass, aliceFilters, bobFilters int
	for _, c := range tr.Classes {
		if c.Labels.User == "bob" {
			bobClass++
		}
		if c.Labels.User == "alice" {
			t.Errorf("alice's refused class %s is in the kernel", c.Handle)
		}
	}
	for _, f := range tr.Filters {
		switch f.Labels.User {
		case "alice":
			aliceFilters++
		case "bob":
			bobFilters++
		}
	}
	if bobClass != 1 || bobFilters != 1 || aliceFilters != 0 {
		t.Errorf("kernel: bob %d class %d filter, alice %d filters; want bob shaped, alice's filters skipped", bobClass, bobFilters, aliceFilters)
	}
	// The ingress interface has no refusal: ok.
	if is, _ := statusOf(d, "lan0", "ingress"); is.State == control.StateDegraded {
		t.Errorf("ingress state %q; only lan0 egress refused", is.State)
	}
	if n := counterValue(t, d.stats.errors.WithLabelValues("kernel")); n < 1 {
		t.Errorf("shaperd_errors_total{kind=kernel} = %v, want the refusal counted", n)
	}
	// The kernel accepts it now: the next reconcile shapes alice, ok.
	k.mu.Lock()
	k.refuseObj = nil
	k.mu.Unlock()
	if err := d.Once(context.Background()); err != nil {
		t.Fatalf("Once after the kernel accepts: %v", err)
	}
	is, users = statusOf(d, "lan0", "egress")
	if is.State != control.StateOK || users["alice"].Error != "" {
		t.Errorf("after the repair: state %q, alice's error %q; want ok and none", is.State, users["alice"].Error)
	}
}

// TestRefusedChangeKeepsOldSettings (a refusal says what is in force
// instead): a change (a reload, a
// set-rate) the kernel refuses for one user says that user's old settings
// are still in force, and the interface is degraded.
func TestRefusedChangeKeepsOldSettings(t *testing.T) {
	k := newFakeKernel("lan0")
	d, _ := newTestDaemon(t, k, newFakeClock(), "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	k.mu.Lock()
	k.refuseObj = func(c model.Change) error {
		if c.Op == model.OpChange && c.Class != nil && c.Class.Labels.User == "bob" {
			return errors.New("HTB: quantum of class is big")
		}
		return nil
	}
	k.mu.Unlock()
	r := 1 * tbf.Mbit
	if _, err := d.setRate(control.SetRateRequest{Target: "tier:bronze", Rate: r, Ceil: &r, Ramp: control.DurationPtr(0)}, nil); err != nil {
		t.Logf("set-rate: %v", err)
	}
	is, users := statusOf(d, "lan0", "egress")
	if is.State != control.StateDegraded {
		t.Errorf("state %q, want degraded", is.State)
	}
	if u := users["bob"]; !strings.Contains(u.Error, "old settings still in force") || !strings.Contains(u.Error, "user bob") {
		t.Errorf("bob's error %q; want his old settings named", u.Error)
	}
}

// TestFailingDumpShowsInStatus (an interface that is not shaped as planned
// is never shown ok): a reconcile that fails (the
// dump errs) makes the interface failed with the error, never ok.
func TestFailingDumpShowsInStatus(t *testing.T) {
	k := newFakeKernel("lan0")
	d, _ := newTestDaemon(t, k, newFakeClock(), "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	if is, _ := statusOf(d, "lan0", "egress"); is.State != control.StateOK {
		t.Fatalf("state %q, want ok first", is.State)
	}
	k.mu.Lock()
	k.dumpErr = errors.New("decode filter message: u32 attribute of 2 bytes, want 4")
	k.mu.Unlock()
	if err := d.Once(context.Background()); err == nil {
		t.Error("Once with a failing dump: no error")
	}
	if is, _ := statusOf(d, "lan0", "egress"); is.State != control.StateFailed || !strings.Contains(is.Error, "u32 attribute of 2 bytes") {
		t.Errorf("state %q error %q; want failed with the dump's error", is.State, is.Error)
	}
}

// TestPanicInOneInterface (a bug in one interface's apply must not stop
// the others): a panic while applying one
// interface is recovered: that interface is failed with the panic's text,
// counted, and the other interface is still shaped.
func TestPanicInOneInterface(t *testing.T) {
	k := newFakeKernel("lan0")
	k.panicOn = "lan0"
	d, _ := newTestDaemon(t, k, newFakeClock(), "")
	err := d.Once(context.Background())
	if err == nil || !strings.Contains(err.Error(), "panic") {
		t.Errorf("Once: %v; want the recovered panic", err)
	}
	if is, _ := statusOf(d, "lan0", "egress"); is.State != control.StateFailed || !strings.Contains(is.Error, "fake kernel: bug on lan0") {
		t.Errorf("lan0 egress: state %q error %q; want failed with the panic's text", is.State, is.Error)
	}
	if is, _ := statusOf(d, "lan0", "ingress"); is.State != control.StateOK {
		t.Errorf("lan0 ingress (ifb-lan0): state %q error %q; want ok", is.State, is.Error)
	}
	if tr := k.mem.Tree("ifb-lan0"); tr.Root == nil || len(tr.Classes) == 0 {
		t.Errorf("ifb-lan0 not shaped after the panic on lan0: %+v", tr)
	}
	if n := counterValue(t, d.stats.errors.WithLabelValues("panic")); n < 1 {
		t.Errorf("shaperd_errors_total{kind=panic} = %v, want the panic counted", n)
	}
}

// TestTakeoverPassedToKernel: takeover = true on an interface allows the
// kernel to replace a foreign root on its device only; --takeover
// (Options.Takeover) on every device.
func TestTakeoverPassedToKernel(t *testing.T) {
	dir := t.TempDir()
	cfg := strings.Replace(testConfig, "default_tier = \"bronze\"\n", "default_tier = \"bronze\"\ntakeover = true\n", 1)
	path := writeConfig(t, dir, cfg, testUsers)
	for _, all := range []bool{false, true} {
		k := newFakeKernel("lan0")
		if _, err := New(Options{ConfigPath: path, Kernel: k, Clock: newFakeClock(), Takeover: all}); err != nil {
			t.Fatal(err)
		}
		if !k.takeover["lan0"] || k.takeover["ifb-lan0"] != all {
			t.Errorf("Options.Takeover %v: kernel told %v; want lan0 true, ifb-lan0 %v", all, k.takeover, all)
		}
	}
}

// panicDumpKernel panics in Dump, as a bug reading the kernel would.
type panicDumpKernel struct{ *fakeKernel }

func (k panicDumpKernel) Dump(string) (model.Tree, error) { panic("fake kernel: dump bug") }

// TestPanicReadingAssignmentAtStart: a panic while recovering the class
// assignment from the kernel at start does not stop the daemon from
// starting; it is counted.
func TestPanicReadingAssignmentAtStart(t *testing.T) {
	k := panicDumpKernel{newFakeKernel("lan0")}
	d, _ := newTestDaemon(t, k, newFakeClock(), "")
	if n := counterValue(t, d.stats.errors.WithLabelValues("panic")); n < 1 {
		t.Errorf("panic not counted: %v", n)
	}
	if err := d.Once(context.Background()); err != nil {
		t.Errorf("Once after the start: %v", err)
	}
}
