package check

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/check/offline"
	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/kernel"
)

// --check's notes name the leaf kinds this kernel lacks, as probed.
func TestCheckNotesLeaf(t *testing.T) {
	netnslab.Require(t)
	have, err := kernel.LeafKindsAvailable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := writeConfig(t, dir, strings.Replace(testConfig, `default_tier = "bronze"`, `default_tier = "bronze"
leaf_qdisc = "sfq"
queue_latency = "30ms"`, 1), testUsers)
	plan, errs := offline.Load(p)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	notes := planNotes(plan, time.Now())
	want := p + ":16:1: interface[0].leaf_qdisc: sfq not available in this kernel; using bfifo sized to 30ms (behind a tbf that splits TCP aggregates where it is small)"
	if got := slices.Contains(notes, want); got == have["sfq"] {
		t.Errorf("sfq available %v, notes %q", have["sfq"], notes)
	}
	wantDefault := "default leaf qdisc: fq_codel not available in this kernel; using bfifo sized to 50ms (behind a tbf that splits TCP aggregates where it is small)"
	found := false
	for _, n := range notes {
		found = found || strings.HasSuffix(n, wantDefault) && strings.Contains(n, "(lan0 ingress)")
	}
	if found == have["fq_codel"] {
		t.Errorf("fq_codel available %v, notes %q", have["fq_codel"], notes)
	}
}
