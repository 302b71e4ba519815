package daemon

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/netnslab"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
)

// probingKernel is the fake kernel with a fixed set of leaf kinds.
type probingKernel struct {
	*fakeKernel
	kinds map[string]bool
}

func (k probingKernel) LeafKinds() (map[string]bool, error) { return k.kinds, nil }

// A kernel without fq_codel gets every user class a bfifo sized to
// queue_latency at the class's ceil (the default leaf's fallback); with
// fq_codel the default is fq_codel.
func TestDaemonDefaultLeaf(t *testing.T) {
	for _, tt := range []struct {
		kinds map[string]bool
		want  model.LeafQdisc
	}{
		{map[string]bool{"fq_codel": false, "bfifo": true}, model.LeafQdisc{Kind: "bfifo", Limit: 625000, Latency: 50 * time.Millisecond}}, // gold ceil 100mbit * 50ms
		{map[string]bool{"fq_codel": true, "bfifo": true}, model.LeafQdisc{Kind: "fq_codel"}},
	} {
		k := probingKernel{newFakeKernel("lan0"), tt.kinds}
		d, _ := newTestDaemon(t, k, newFakeClock(), "")
		if err := d.Once(context.Background()); err != nil {
			t.Fatal(err)
		}
		alice := userClass(t, d, k.fakeKernel, "lan0/egress", "lan0", "alice")
		if alice.Leaf == nil || *alice.Leaf != tt.want {
			t.Errorf("kinds %v: alice's leaf %+v, want %+v", tt.kinds, alice.Leaf, tt.want)
		}
	}
}

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
	plan, errs := checkFile(p)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	notes := CheckNotes(plan)
	want := p + ":16:1: interface[0].leaf_qdisc: sfq not available in this kernel; using bfifo sized to 30ms"
	if got := slices.Contains(notes, want); got == have["sfq"] {
		t.Errorf("sfq available %v, notes %q", have["sfq"], notes)
	}
	wantDefault := "default leaf qdisc: fq_codel not available in this kernel; using bfifo sized to 50ms"
	found := false
	for _, n := range notes {
		found = found || strings.HasSuffix(n, wantDefault) && strings.Contains(n, "(lan0 ingress)")
	}
	if found == have["fq_codel"] {
		t.Errorf("fq_codel available %v, notes %q", have["fq_codel"], notes)
	}
}
