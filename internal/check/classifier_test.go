package check

import (
	"errors"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/kernel"
)

// TestChooseClassifier: absent is bpf where the kernel allows it, else u32
// with the reason; u32 is always u32; a configured bpf the kernel refuses
// is an error naming the interface, its position and the kernel's reason.
func TestChooseClassifier(t *testing.T) {
	refused := errors.New("create an LPM-trie map: operation not permitted")
	in := config.Interface{Name: "lan0", Direction: config.Egress, Source: "shaperd.toml:3:1"}
	for _, c := range []struct {
		cfg      config.ClassifierKind
		avail    error
		want     string
		whyHas   string
		errParts []string
	}{
		{config.ClassifierAuto, nil, kernel.ClassifierBPF, "default", nil},
		{config.ClassifierAuto, refused, kernel.ClassifierU32, "operation not permitted", nil},
		{config.ClassifierU32, nil, kernel.ClassifierU32, "configured", nil},
		{config.ClassifierBPF, nil, kernel.ClassifierBPF, "configured", nil},
		{config.ClassifierBPF, refused, "", "", []string{"shaperd.toml:3:1", "lan0", `classifier = "bpf"`, "operation not permitted"}},
	} {
		in.Classifier = c.cfg
		kind, why, err := ChooseClassifier(in, c.avail)
		if kind != c.want || !strings.Contains(why, c.whyHas) {
			t.Errorf("%q, %v: %q (%s), want %q (%s)", c.cfg, c.avail, kind, why, c.want, c.whyHas)
		}
		for _, p := range c.errParts {
			if err == nil || !strings.Contains(err.Error(), p) {
				t.Errorf("%q, %v: error %v lacks %q", c.cfg, c.avail, err, p)
			}
		}
		if c.errParts == nil && err != nil {
			t.Errorf("%q, %v: %v", c.cfg, c.avail, err)
		}
	}
}

// TestClassifierNotesSayWhatTheUnitDoes: where bpf works for this process
// only because it may mount a bpffs (root), --check's note says that the
// unit (CAP_NET_ADMIN, CAP_BPF) classifies with u32 there, or refuses a
// configured bpf; with a bpffs mounted the note is the plain choice.
func TestClassifierNotesSayWhatTheUnitDoes(t *testing.T) {
	plan := &config.Plan{Interfaces: []config.Interface{
		{Name: "lan0", Direction: config.Egress, Shaper: config.ShaperHTB},
		{Name: "lan1", Direction: config.Egress, Shaper: config.ShaperHTB, Classifier: config.ClassifierBPF},
		{Name: "wan0", Direction: config.Egress, Shaper: config.ShaperTBF},
	}}
	notMounted := errors.New("/sys/fs/bpf is not a bpf filesystem")
	notes, err := classifierNotes(plan, nil, notMounted)
	if err != nil || len(notes) != 2 {
		t.Fatalf("notes %q, %v; want one per HTB interface", notes, err)
	}
	for i, want := range []string{"cannot mount one and classifies with u32", `cannot mount one and refuses to start (classifier = "bpf")`} {
		if !strings.Contains(notes[i], "classifier bpf") || !strings.Contains(notes[i], want) || !strings.Contains(notes[i], "/sys/fs/bpf is not a bpf filesystem") {
			t.Errorf("note %d: %q, want it to say %q", i, notes[i], want)
		}
	}
	notes, _ = classifierNotes(plan, nil, nil)
	if len(notes) != 2 || strings.Contains(notes[0], "unit") {
		t.Errorf("with a bpffs mounted: %q", notes)
	}
	notes, _ = classifierNotes(&config.Plan{Interfaces: plan.Interfaces[:1]}, errors.New("no CAP_BPF"), notMounted)
	if len(notes) != 1 || !strings.Contains(notes[0], "classifier u32") || strings.Contains(notes[0], "unit") {
		t.Errorf("bpf refused outright: %q", notes)
	}
}
