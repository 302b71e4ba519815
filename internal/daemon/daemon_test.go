package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/statefile"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// userClass returns user's class in the fake kernel's tree of device.
func userClass(t *testing.T, d *Daemon, k *fakeKernel, key, device, user string) model.Class {
	t.Helper()
	var st *reconciler
	for _, s := range d.ifaces {
		if s.key == key {
			st = s
		}
	}
	if st == nil {
		t.Fatalf("no interface %s", key)
	}
	m, ok := st.ids.User(user)
	if !ok {
		t.Fatalf("%s: user %s has no class", key, user)
	}
	c := findClass(k.tree(device), model.MakeHandle(1, m))
	if c == nil {
		t.Fatalf("%s: class 1:%x of %s not in the kernel", key, m, user)
	}
	return *c
}

func TestOnceAppliesAndRestartAdoptsWithZeroWrites(t *testing.T) {
	k := newFakeKernel("lan0")
	d, dir := newTestDaemon(t, k, newFakeClock(), "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatalf("Once: %v", err)
	}
	w := k.writeCount()
	if w == 0 {
		t.Fatal("Once wrote nothing")
	}
	if c := userClass(t, d, k, "lan0/egress", "lan0", "alice"); c.Rate != 50*tbf.Mbit || c.Ceil != 100*tbf.Mbit {
		t.Errorf("alice egress: rate %v ceil %v, want 50mbit/100mbit", c.Rate, c.Ceil)
	}
	if tr := k.tree("ifb-lan0"); tr.Root == nil || tr.Redirect == nil || tr.Redirect.Interface != "lan0" {
		t.Errorf("ingress: no HTB with redirect on ifb-lan0: %+v", tr)
	}
	if _, err := os.Stat(filepath.Join(dir, "state", AssignmentsFile)); err != nil {
		t.Errorf("assignments not saved: %v", err)
	}

	// A restart with the state file adopts the kernel's tree.
	d2, _ := newTestDaemon(t, k, newFakeClock(), dir)
	if err := d2.Once(context.Background()); err != nil {
		t.Fatalf("second Once: %v", err)
	}
	if got := k.writeCount() - w; got != 0 {
		t.Errorf("restart with state: %d writes, want 0", got)
	}
	// And without it: the assignment is recovered from the kernel.
	if err := os.Remove(filepath.Join(dir, "state", AssignmentsFile)); err != nil {
		t.Fatal(err)
	}
	d3, _ := newTestDaemon(t, k, newFakeClock(), dir)
	if err := d3.Once(context.Background()); err != nil {
		t.Fatalf("third Once: %v", err)
	}
	if got := k.writeCount() - w; got != 0 {
		t.Errorf("restart without state: %d writes, want 0", got)
	}
}

func TestReconcileRepairsDrift(t *testing.T) {
	k := newFakeKernel("lan0")
	d, _ := newTestDaemon(t, k, newFakeClock(), "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	alice := userClass(t, d, k, "lan0/egress", "lan0", "alice")
	k.mutate("lan0", func(tr *model.Tree) {
		for i := range tr.Classes {
			if tr.Classes[i].Handle == alice.Handle {
				tr.Classes[i].Rate = tbf.Mbit
			}
		}
	})
	w := k.writeCount()
	if err := d.reconcileAll("tick"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if got := k.writeCount() - w; got != 1 {
		t.Errorf("drift repair: %d writes, want 1", got)
	}
	if c := userClass(t, d, k, "lan0/egress", "lan0", "alice"); c.Rate != 50*tbf.Mbit {
		t.Errorf("alice's rate after repair: %v, want 50mbit", c.Rate)
	}
	if m, _ := k.Verify(*d.ifaces[0].tree()); len(m) != 0 {
		t.Errorf("kernel differs after repair: %v", m)
	}
}

func TestInvalidReloadKeepsPlanWithZeroWrites(t *testing.T) {
	k := newFakeKernel("lan0")
	d, dir := newTestDaemon(t, k, newFakeClock(), "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	w := k.writeCount()
	bad := strings.Replace(testConfig, `ceil = "100mbit"`, `ceil = "1mbit"`, 1)
	writeConfig(t, dir, bad, testUsers+"\n[[user]]\nname = \"carol\"\ntier = \"gold\"\naddresses = [\"198.18.1.30\"]\n")
	err := d.reload(false)
	var ve *control.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) == 0 {
		t.Fatalf("reload of an invalid config: %v, want a ValidationError with problems", err)
	}
	if !strings.Contains(ve.Error(), "tiers.gold.ceil") {
		t.Errorf("problems do not name the key: %v", ve.Problems)
	}
	if got := k.writeCount() - w; got != 0 {
		t.Errorf("refused reload wrote %d times, want 0", got)
	}
	if len(d.plan.Users) != 2 {
		t.Errorf("plan has %d users after a refused reload, want the old 2", len(d.plan.Users))
	}
	if err := d.reconcileAll("tick"); err != nil || k.writeCount() != w {
		t.Errorf("reconcile after a refused reload: %v, %d writes", err, k.writeCount()-w)
	}

	// A valid reload that adds carol is applied.
	writeConfig(t, dir, testConfig, testUsers+"\n[[user]]\nname = \"carol\"\ntier = \"gold\"\naddresses = [\"198.18.1.30\"]\n")
	if err := d.reload(false); err != nil {
		t.Fatalf("valid reload: %v", err)
	}
	if c := userClass(t, d, k, "lan0/egress", "lan0", "carol"); c.Rate != 50*tbf.Mbit {
		t.Errorf("carol after reload: %v", c.Rate)
	}
}

func TestSetRateChangesOneClassPerInterfaceAndPersists(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock()
	d, dir := newTestDaemon(t, k, clk, "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	w := k.writeCount()
	rate := 3 * tbf.Mbit
	resp, err := d.setRate(control.SetRateRequest{Target: "alice", Rate: rate, Ceil: &rate, Ramp: control.DurationPtr(0)}, nil)
	if err != nil {
		t.Fatalf("set-rate: %v", err)
	}
	if len(resp.Users) != 1 || resp.Users[0] != "alice" || resp.Rate != rate || resp.Ceil != rate {
		t.Errorf("response %+v", resp)
	}
	// alice is shaped on two interfaces (egress, ingress): one class each.
	if got := k.writeCount() - w; got != 2 {
		t.Errorf("set-rate: %d writes, want 2 (alice's class on each interface)", got)
	}
	for _, c := range []model.Class{
		userClass(t, d, k, "lan0/egress", "lan0", "alice"),
		userClass(t, d, k, "lan0/ingress", "ifb-lan0", "alice"),
	} {
		if c.Rate != rate || c.Ceil != rate {
			t.Errorf("alice's class %s: %v/%v, want 3mbit/3mbit", c.Handle, c.Rate, c.Ceil)
		}
	}
	st := d.status()
	found := false
	for _, u := range st.Users {
		if u.Name == "alice" && u.Interface == "lan0" {
			found = true
			if u.EffectiveRate != rate || !strings.Contains(u.Reason, "override") || u.Rate != 50*tbf.Mbit || u.Ramp != nil {
				t.Errorf("status of alice: %+v", u)
			}
		}
	}
	if !found {
		t.Error("alice not in status")
	}

	// The override survives a restart: the new daemon applies nothing.
	w = k.writeCount()
	d2, _ := newTestDaemon(t, k, clk, dir)
	if d2.overrides.Len() != 1 {
		t.Fatalf("restart: %d overrides, want 1", d2.overrides.Len())
	}
	if err := d2.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := k.writeCount() - w; got != 0 {
		t.Errorf("restart with an override: %d writes, want 0", got)
	}

	// Clear returns alice to gold.
	if _, err := d2.clear(control.ClearRequest{Target: "alice"}); err != nil {
		t.Fatal(err)
	}
	if c := userClass(t, d2, k, "lan0/egress", "lan0", "alice"); c.Rate != 50*tbf.Mbit {
		t.Errorf("after clear: %v, want 50mbit", c.Rate)
	}
	d3, _ := newTestDaemon(t, k, clk, dir)
	if d3.overrides.Len() != 0 {
		t.Errorf("cleared override came back after restart")
	}
}

func TestSetRateErrors(t *testing.T) {
	k := newFakeKernel("lan0")
	d, _ := newTestDaemon(t, k, newFakeClock(), "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	rate := tbf.Mbit
	var nf *control.NotFoundError
	if _, err := d.setRate(control.SetRateRequest{Target: "mallory", Rate: rate, Ceil: &rate}, nil); !errors.As(err, &nf) {
		t.Errorf("unknown user: %v, want NotFoundError", err)
	}
	if _, err := d.setRate(control.SetRateRequest{Target: "tier:platinum", Rate: rate, Ceil: &rate}, nil); !errors.As(err, &nf) {
		t.Errorf("unknown tier: %v, want NotFoundError", err)
	}
	if _, err := d.clear(control.ClearRequest{Target: "mallory"}); !errors.As(err, &nf) {
		t.Errorf("clear unknown: %v, want NotFoundError", err)
	}
	if d.overrides.Len() != 0 {
		t.Errorf("failed set-rates left %d overrides", d.overrides.Len())
	}
}

func TestOverrideExpires(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock()
	d, _ := newTestDaemon(t, k, clk, "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	rate := 2 * tbf.Mbit
	resp, err := d.setRate(control.SetRateRequest{Target: "tier:gold", Rate: rate, Ceil: &rate,
		Ramp: control.DurationPtr(0), For: control.DurationPtr(10e9)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Until == nil || !resp.Until.Equal(clk.Now().Add(10e9)) {
		t.Errorf("until %v", resp.Until)
	}
	if c := userClass(t, d, k, "lan0/egress", "lan0", "alice"); c.Rate != rate {
		t.Fatalf("tier override not applied: %v", c.Rate)
	}
	clk.now = clk.now.Add(11e9)
	if err := d.policyStep(clk.Now()); err != nil {
		t.Fatal(err)
	}
	if c := userClass(t, d, k, "lan0/egress", "lan0", "alice"); c.Rate != 50*tbf.Mbit {
		t.Errorf("after expiry alice has %v, want 50mbit", c.Rate)
	}
	if d.overrides.Len() != 0 {
		t.Errorf("expired override kept")
	}
}

// An override that ends while a targeted change (one user's set-rate,
// which evaluates that user alone) comes in before the next policy tick
// still ends at that tick: the change must not push the next evaluation
// past the ending. (The soak found an interface override in force 8 s
// after its --for ended, until the next override's end.)
func TestOverrideExpiresAfterAUserChange(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock()
	d, _ := newTestDaemon(t, k, clk, "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	rate := 2 * tbf.Mbit
	if _, err := d.setRate(control.SetRateRequest{Target: "tier:gold", Rate: rate, Ceil: &rate,
		Ramp: control.DurationPtr(0), For: control.DurationPtr(10e9)}, nil); err != nil {
		t.Fatal(err)
	}
	if c := userClass(t, d, k, "lan0/egress", "lan0", "alice"); c.Rate != rate {
		t.Fatalf("tier override not applied: %v", c.Rate)
	}
	clk.now = clk.now.Add(10*time.Second + 200*time.Millisecond)
	if _, err := d.setRate(control.SetRateRequest{Target: "bob", Rate: 3 * tbf.Mbit,
		Ramp: control.DurationPtr(0), For: control.DurationPtr(60e9)}, nil); err != nil {
		t.Fatal(err)
	}
	if d.work.userSteps == 0 {
		t.Fatal("bob's set-rate took a full evaluation: the case is not tested")
	}
	if err := d.policyTick(clk.Now()); err != nil {
		t.Fatal(err)
	}
	if c := userClass(t, d, k, "lan0/egress", "lan0", "alice"); c.Rate != 50*tbf.Mbit {
		t.Errorf("after the tier override ended and a policy tick, alice has %v, want 50mbit", c.Rate)
	}
	if c := userClass(t, d, k, "lan0/egress", "lan0", "bob"); c.Rate != 3*tbf.Mbit {
		t.Errorf("bob has %v, want his 3mbit override", c.Rate)
	}
}

func TestOnceFailsWithKernelRefusalAndMissingInterface(t *testing.T) {
	k := newFakeKernel()
	d, _ := newTestDaemon(t, k, newFakeClock(), "")
	err := d.Once(context.Background())
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "lan0") {
		t.Errorf("Once without lan0: %v, want ErrMissing naming lan0", err)
	}
	if is := d.status().Interfaces[0]; is.State != control.StateMissing || is.Error != "" {
		t.Errorf("status without lan0: state %q error %q, want missing", is.State, is.Error)
	}
	k.setLink("lan0", true)
	k.refuse = errors.New("lan0: add class 1:100 (user alice): Specified qdisc kind is unknown")
	d2, _ := newTestDaemon(t, k, newFakeClock(), "")
	err = d2.Once(context.Background())
	if err == nil || !strings.Contains(err.Error(), "user alice") || !strings.Contains(err.Error(), "lan0/egress") {
		t.Errorf("Once with a refusing kernel: %v", err)
	}
	if is := d2.status().Interfaces[0]; is.State != control.StateFailed || !strings.Contains(is.Error, "Specified qdisc kind is unknown") {
		t.Errorf("status after a refusal: state %q error %q, want failed with the kernel's text", is.State, is.Error)
	}
	k.refuse = nil
	if err := d2.Once(context.Background()); err != nil {
		t.Fatalf("Once after the kernel accepts: %v", err)
	}
	if is := d2.status().Interfaces[0]; is.State != control.StateOK || is.Error != "" {
		t.Errorf("status after a successful apply: state %q error %q, want ok", is.State, is.Error)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sub")
	p := filepath.Join(dir, "f.json")
	for _, s := range []string{"one", "two"} {
		if err := statefile.WriteAtomic(p, []byte(s), 0o640); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil || string(b) != s {
			t.Fatalf("read back %q, %v; want %q", b, err, s)
		}
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, %v", fi.Mode(), err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
}

// findClass returns the class with handle h in t (sorted by handle).
func findClass(t model.Tree, h model.Handle) *model.Class {
	i, ok := slices.BinarySearchFunc(t.Classes, h, func(c model.Class, h model.Handle) int {
		switch {
		case c.Handle < h:
			return -1
		case c.Handle > h:
			return 1
		}
		return 0
	})
	if !ok {
		return nil
	}
	return &t.Classes[i]
}

// A set-rate without --ramp follows the policy's default ramp: the class
// moves over the policy ticks and arrives at the end.
func TestSetRateRampsOverPolicyTicks(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock()
	dir := t.TempDir()
	writeConfig(t, dir, strings.Replace(testConfig, `ramp = "0s"`, `ramp = "4s"`, 1), testUsers)
	d, _ := newTestDaemon(t, k, clk, dir)
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	rate := 10 * tbf.Mbit
	if _, err := d.setRate(control.SetRateRequest{Target: "alice", Rate: rate, Ceil: &rate}, nil); err != nil {
		t.Fatal(err)
	}
	prev := userClass(t, d, k, "lan0/egress", "lan0", "alice").Ceil
	if prev == rate {
		t.Fatal("a set-rate with the default 4s ramp changed at once")
	}
	var ramping bool
	for _, u := range d.status().Users {
		if u.Name == "alice" && u.Interface == "lan0" && u.Ramp != nil && u.Ramp.To == rate {
			ramping = true
		}
	}
	if !ramping {
		t.Error("status shows no ramp for alice")
	}
	for i := 0; i < 5; i++ {
		clk.now = clk.now.Add(time.Second)
		if err := d.policyStep(clk.Now()); err != nil {
			t.Fatal(err)
		}
		c := userClass(t, d, k, "lan0/egress", "lan0", "alice").Ceil
		if c > prev {
			t.Errorf("tick %d: ceil went up from %v to %v on the way down to %v", i, prev, c, rate)
		}
		prev = c
	}
	if prev != rate {
		t.Errorf("after the ramp alice's ceil is %v, want %v", prev, rate)
	}
}

// TestSameTargetsBuildNothing: the policy tick hands the reconciler
// targets every tick; the same ones (a copy) change nothing, a changed
// ceil or leaf does.
func TestSameTargetsBuildNothing(t *testing.T) {
	k := newFakeKernel("lan0")
	d, _ := newTestDaemon(t, k, newFakeClock(), "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := d.ifaces[0]
	a := *st.targets()
	b := a
	b.Users = slices.Clone(a.Users)
	if changed, _ := d.setTargets(st, b); changed {
		t.Fatal("a copy of the targets changed the tree")
	}
	b.Users[1].Ceil += tbf.Mbit
	if changed, cs := d.setTargets(st, b); !changed || len(cs) != 1 {
		t.Errorf("a changed ceil: changed %v, %d changes", changed, len(cs))
	}
	c := b
	c.Interface.Leaf = &model.LeafQdisc{Kind: "pfifo", Limit: 10}
	if changed, _ := d.setTargets(st, c); !changed {
		t.Error("a changed leaf changed nothing")
	}
}

// A user class the daemon creates counts towards the quota from its first
// byte; status reports its counters and throughput from the last two dumps.
func TestNewClassCountsFromZeroAndThroughput(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock()
	d, _ := newTestDaemon(t, k, clk, "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := d.ifaces[0]
	alice := userClass(t, d, k, "lan0/egress", "lan0", "alice")
	dump := func(bytes uint64, backlog uint32) {
		tr := k.tree("lan0")
		for i := range tr.Classes {
			if tr.Classes[i].Handle == alice.Handle {
				tr.Classes[i].Stats = &model.Stats{Bytes: bytes, Drops: 3, Backlog: backlog}
			}
		}
		d.sample(st, tr, clk.Now())
	}
	dump(1000, 0)
	if used, _, _ := d.usage.Used("alice", "month", clk.Now()); used != 1000 {
		t.Errorf("alice used %d bytes after her new class sent 1000, want 1000", used)
	}
	clk.now = clk.now.Add(2 * time.Second)
	dump(1000+250000, 125000) // 250 kB in 2 s: 1 Mbit/s; 1 Mbit queued
	for _, u := range d.status().Users {
		if u.Name == "alice" { // the first entry is the egress interface's
			if u.Throughput != tbf.Mbit || u.Bytes != 251000 || u.Drops != 3 {
				t.Errorf("status of alice: throughput %v bytes %d drops %d; want 1mbit, 251000, 3", u.Throughput, u.Bytes, u.Drops)
			}
			// Her 1 Mbit/s is below her rate in force: the queue drains at
			// that rate at least.
			if u.EffectiveRate <= tbf.Mbit {
				t.Fatalf("alice's rate in force %v: the test wants one above her 1mbit throughput", u.EffectiveRate)
			}
			if want := time.Duration(float64(time.Second) * 1e6 / float64(u.EffectiveRate)); u.QueueDelay.Std() != want {
				t.Errorf("alice's queue delay %v, want 1 Mbit queued over her rate %v = %v", u.QueueDelay, u.EffectiveRate, want)
			}
			break
		}
	}
}

// reconcileAll reconciles every interface, as a tick of the loop does, and
// returns the errors joined (missing interfaces included, wrapping
// ErrMissing).
func (d *Daemon) reconcileAll(why string) error {
	var errs []error
	for _, st := range d.ifaces {
		if err := d.reconcile(st, why); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
