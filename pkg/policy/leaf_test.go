package policy

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
)

const leafMain = `
[[interface]]
name = "lan0"
bandwidth = "100mbit"

[[interface]]
name = "lan1"
bandwidth = "100mbit"
leaf_qdisc = "fq_codel"
leaf_target = "2ms"
queue_latency = "20ms"

[tiers.gold]
rate = "10mbit"

[tiers.cheap]
rate = "1mbit"
leaf_qdisc = "sfq"
leaf_flows = 64

[tiers.fifo]
rate = "5mbit"
queue_latency = "100ms"
`

const leafUsers = `
[[user]]
name = "alice"
tier = "gold"
addresses = ["198.18.1.10"]

[[user]]
name = "bob"
tier = "cheap"
addresses = ["198.18.1.11"]

[[user]]
name = "carol"
tier = "fifo"
addresses = ["198.18.1.12"]
`

// leavesOf returns the interface's leaf and each user's leaf.
func leavesOf(r *Result, i int) (*model.LeafQdisc, map[string]*model.LeafQdisc) {
	users := map[string]*model.LeafQdisc{}
	for _, u := range r.Interfaces[i].Targets.Users {
		users[u.Name] = u.Leaf
	}
	return r.Interfaces[i].Targets.Interface.Leaf, users
}

// Offline (kinds not probed): leaves as configured, no default leaf.
// Probed: the default is fq_codel where present, else a latency-sized
// bfifo; a missing kind falls back to that bfifo; tiers override the
// interface (kind and latency separately).
func TestLeafResolution(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	p := loadPlan(t, leafMain, leafUsers)
	ifl, users := leavesOf(Evaluate(p, Overrides{}, nil, now), 0)
	if ifl != nil || users["alice"] != nil {
		t.Errorf("offline default leaf: interface %+v, alice %+v; want the kernel's (nil)", ifl, users["alice"])
	}
	if want := (model.LeafQdisc{Kind: "sfq", Flows: 64, Latency: 50 * time.Millisecond}); users["bob"] == nil || *users["bob"] != want {
		t.Errorf("offline bob: %+v, want %+v", users["bob"], want)
	}
	if notes := LeafNotes(p); notes != nil {
		t.Errorf("offline notes: %v", notes)
	}

	bfifo := func(lat time.Duration) *model.LeafQdisc { return &model.LeafQdisc{Kind: "bfifo", Latency: lat} }
	tests := []struct {
		name  string
		kinds map[string]bool
		// interface 0 and 1, then bob and carol on interface 0 and 1
		if0, if1                   *model.LeafQdisc
		bob0, carol0, bob1, carol1 *model.LeafQdisc
		notes                      []string
	}{
		{
			name:  "all kinds",
			kinds: map[string]bool{"fq_codel": true, "sfq": true, "bfifo": true, "pfifo": true, "cake": true},
			if0:   &model.LeafQdisc{Kind: "fq_codel"},
			if1:   &model.LeafQdisc{Kind: "fq_codel", Target: 2 * time.Millisecond, Latency: 20 * time.Millisecond},
			bob0:  &model.LeafQdisc{Kind: "sfq", Flows: 64, Latency: 50 * time.Millisecond},
			bob1:  &model.LeafQdisc{Kind: "sfq", Flows: 64, Latency: 20 * time.Millisecond},
			// carol's tier sets only a latency: the interface's kind with it
			carol0: &model.LeafQdisc{Kind: "fq_codel"},
			carol1: &model.LeafQdisc{Kind: "fq_codel", Target: 2 * time.Millisecond, Latency: 100 * time.Millisecond},
		},
		{
			name:   "this kernel",
			kinds:  map[string]bool{"fq_codel": false, "sfq": false, "cake": false, "bfifo": true, "pfifo": true},
			if0:    bfifo(50 * time.Millisecond),
			if1:    bfifo(20 * time.Millisecond),
			bob0:   bfifo(50 * time.Millisecond),
			bob1:   bfifo(20 * time.Millisecond),
			carol0: bfifo(100 * time.Millisecond),
			carol1: bfifo(100 * time.Millisecond),
			notes: []string{
				"shaperd.toml:2:1: interface[0] (lan0 egress): default leaf qdisc: fq_codel not available in this kernel; using bfifo sized to 50ms (behind a tbf that splits TCP aggregates where it is small)",
				"shaperd.toml:18:1: tiers.cheap.leaf_qdisc: sfq not available in this kernel; using bfifo sized to 50ms (behind a tbf that splits TCP aggregates where it is small)",
				"shaperd.toml:9:1: interface[1].leaf_qdisc: fq_codel not available in this kernel; using bfifo sized to 20ms (behind a tbf that splits TCP aggregates where it is small)",
				"shaperd.toml:18:1: tiers.cheap.leaf_qdisc: sfq not available in this kernel; using bfifo sized to 20ms (behind a tbf that splits TCP aggregates where it is small)",
			},
		},
	}
	for _, tt := range tests {
		p := loadPlan(t, leafMain, leafUsers)
		p.LeafKinds = tt.kinds
		r := Evaluate(p, Overrides{}, nil, now)
		if0, u0 := leavesOf(r, 0)
		if1, u1 := leavesOf(r, 1)
		eq := func(what string, got, want *model.LeafQdisc) {
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: %s leaf %+v, want %+v", tt.name, what, got, want)
			}
		}
		eq("lan0", if0, tt.if0)
		eq("lan1", if1, tt.if1)
		eq("alice on lan0 (the interface's)", u0["alice"], nil)
		eq("bob on lan0", u0["bob"], tt.bob0)
		eq("bob on lan1", u1["bob"], tt.bob1)
		eq("carol on lan0", u0["carol"], tt.carol0)
		eq("carol on lan1", u1["carol"], tt.carol1)
		if got := LeafNotes(p); !reflect.DeepEqual(got, tt.notes) {
			t.Errorf("%s: notes\n%q\nwant\n%q", tt.name, got, tt.notes)
		}
		for i := range r.Interfaces {
			if _, err := model.Build(r.Interfaces[i].Targets, nil); err != nil {
				t.Errorf("%s: Build: %v", tt.name, err)
			}
		}
	}
}

// A bfifo leaf_limit that holds fewer than four of the link's aggregates
// gets a note saying they are split in front of it (64 KiB aggregates by
// default, the measured size when the plan has one); one below a frame, a
// note that full-size packets are dropped; a large one, none.
func TestLeafLimitNotes(t *testing.T) {
	const main = `
[[interface]]
name = "lan0"
bandwidth = "100mbit"
leaf_qdisc = "bfifo"
leaf_limit = 12500

[tiers.gold]
rate = "10mbit"
leaf_qdisc = "bfifo"
leaf_limit = 1000

[tiers.big]
rate = "10mbit"
leaf_qdisc = "bfifo"
leaf_limit = 300000
`
	p := loadPlan(t, main, "")
	want := []string{
		"shaperd.toml:5:1: interface[0].leaf_qdisc: leaf_limit 12500 bytes holds fewer than 4 of the 64kb aggregates TCP and GRO hand the qdisc on interface lan0 (egress): shaperd splits them into frames in front of the queue (a tbf leaf), since a bfifo drops an aggregate larger than its free space whole and TCP then gets a few percent of the rate",
		"shaperd.toml:10:1: tiers.gold.leaf_qdisc: leaf_limit 1000 bytes is below one 1522-byte frame on interface lan0 (egress): every full-size packet is dropped; raise it to at least 3044 (two frames), or remove it to size the queue from queue_latency",
	}
	if got := LeafNotes(p); !reflect.DeepEqual(got, want) {
		t.Errorf("notes\n%q\nwant\n%q", got, want)
	}
	p.Links = map[string]config.LinkSizes{"lan0": {Frame: 1522, Aggregate: 2048}} // aggregates of 2 KiB: 12,500 bytes hold six
	if got := LeafNotes(p); len(got) != 1 || !strings.Contains(got[0], "tiers.gold") {
		t.Errorf("with 2 KiB aggregates: notes %q, want only tiers.gold's", got)
	}
}
