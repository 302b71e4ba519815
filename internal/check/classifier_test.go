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
