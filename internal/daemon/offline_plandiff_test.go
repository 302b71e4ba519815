package daemon

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/check"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// byteKernel is the fake kernel read back as Linux reads it back: class
// and TBF rates in whole bytes per second (a plan rate of 263671bit dumps
// as 263664bit), and, when kinds is set, a kernel that probes its leaf
// qdisc kinds.
type byteKernel struct {
	*fakeKernel
	kinds map[string]bool
}

func (k byteKernel) LeafKinds() (map[string]bool, error) { return k.kinds, nil }

// inBytes rounds t's rates down to whole bytes per second.
func inBytes(t model.Tree) model.Tree {
	round := func(r tbf.Rate) tbf.Rate { return tbf.RateFromBytes(r.BytesPerSecond()) }
	for i := range t.Classes {
		c := &t.Classes[i]
		c.Rate, c.Ceil = round(c.Rate), round(c.Ceil)
	}
	if t.Root != nil && t.Root.TBF != nil {
		p := *t.Root.TBF
		p.Rate, p.PeakRate = round(p.Rate), round(p.PeakRate)
		q := *t.Root
		q.TBF = &p
		t.Root = &q
	}
	return t
}

func (k byteKernel) Dump(device string) (model.Tree, error) {
	t, err := k.fakeKernel.Dump(device)
	return inBytes(t), err
}

func (k byteKernel) Actual(desired model.Tree) (model.Tree, error) {
	t, err := k.fakeKernel.Actual(desired)
	return inBytes(t), err
}

func (k byteKernel) Verify(desired model.Tree) ([]string, error) {
	t, err := k.Dump(desired.Device)
	if err != nil {
		return nil, err
	}
	return model.Mismatches(t, desired), nil
}

// oddRateConfig is testConfig with rates that are not whole bytes per
// second.
var oddRateConfig = strings.NewReplacer(`rate = "50mbit"`, `rate = "263671bit"`, `ceil = "100mbit"`, `ceil = "1000003bit"`,
	`rate = "5mbit"`, `rate = "200001bit"`).Replace(testConfig)

// newOddRateDaemon is a daemon on a byteKernel (leaf kinds probed when
// kinds is set) with oddRateConfig, after its first pass.
func newOddRateDaemon(t *testing.T, kinds map[string]bool) (*Daemon, byteKernel, string) {
	t.Helper()
	dir := t.TempDir()
	writeConfig(t, dir, oddRateConfig, testUsers)
	k := byteKernel{newFakeKernel("lan0"), kinds}
	d, _ := newTestDaemon(t, k, newFakeClock(), dir)
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d, k, dir
}

// --check --diff compares rates in the kernel's units: with one class
// changed behind the daemon's back, only that user is listed, not every
// user whose plan rate is not a whole number of bytes per second.
func TestDiffPlanComparesInKernelUnits(t *testing.T) {
	d, k, _ := newOddRateDaemon(t, nil)
	bob := userClass(t, d, k.fakeKernel, "lan0/egress", "lan0", "bob")
	k.mutate("lan0", func(tr *model.Tree) {
		for i := range tr.Classes {
			if tr.Classes[i].Handle == bob.Handle {
				tr.Classes[i].Rate = 1_000_000
			}
		}
	})
	diffs := d.DiffPlan(d.clock.Now())
	for _, pd := range diffs {
		if pd.Err != nil || pd.Missing {
			t.Fatalf("%s: %v (missing %v)", pd.Interface, pd.Err, pd.Missing)
		}
		want, users := 0, []string{}
		if pd.Interface == "lan0/egress" {
			want, users = 1, []string{"bob"}
		}
		var got []string
		for _, u := range pd.Users {
			got = append(got, u.User)
		}
		if len(pd.Changes) != want || strings.Join(got, ",") != strings.Join(users, ",") {
			t.Errorf("%s: %d changes %v, users %v; want %d changes, users %v", pd.Interface, len(pd.Changes), pd.Changes, got, want, users)
		}
	}
	var out bytes.Buffer
	check.WritePlanDiff(&out, diffs, false)
	if strings.Contains(out.String(), "alice") {
		t.Errorf("the diff lists alice, whose class the kernel holds:\n%s", out.String())
	}
}

// reload --dry-run plans what the reload then does: nothing with the
// files unchanged (on a kernel that reads rates back in bytes and whose
// leaf kinds were probed), and, after an edit, exactly the kernel writes
// the reload takes.
func TestReloadDryRunPlansWhatReloadDoes(t *testing.T) {
	d, k, dir := newOddRateDaemon(t, map[string]bool{"fq_codel": false, "bfifo": true})
	var text bytes.Buffer
	planned := func() int {
		t.Helper()
		diffs, _, err := d.reloadDiffs()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, pd := range diffs {
			if pd.Err != nil {
				t.Fatalf("%s: %v", pd.Interface, pd.Err)
			}
			n += len(pd.Changes)
		}
		text.Reset()
		check.WritePlanDiff(&text, diffs, true)
		return n
	}
	if n := planned(); n != 0 {
		t.Errorf("unchanged files: the dry run plans %d changes, want 0:\n%s", n, text.String())
	}
	users := strings.Replace(testUsers, `tier = "bronze"`, `tier = "gold"`, 1) + `
[[user]]
name = "carol"
tier = "bronze"
addresses = ["198.18.1.30"]
`
	if err := os.WriteFile(filepath.Join(dir, "users.toml"), []byte(users), 0o644); err != nil {
		t.Fatal(err)
	}
	n := planned()
	if n == 0 {
		t.Fatal("the dry run plans no change for a moved and an added user")
	}
	w := k.writeCount()
	if err := d.reload(false); err != nil {
		t.Fatal(err)
	}
	if got := k.writeCount() - w; got != n {
		t.Errorf("the dry run planned %d kernel changes, the reload wrote %d", n, got)
	}
	if n := planned(); n != 0 {
		t.Errorf("after the reload the dry run plans %d changes, want 0", n)
	}
}
