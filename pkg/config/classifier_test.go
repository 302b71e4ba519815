package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFiles writes shaperd.toml (body) and an empty users.toml in dir.
func writeFiles(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "shaperd.toml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "users.toml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestInterfaceClassifier: classifier is "bpf" or "u32", absent is auto,
// anything else is an error at its position, and it is refused with
// shaper = "tbf".
func TestInterfaceClassifier(t *testing.T) {
	dir := t.TempDir()
	path := writeFiles(t, dir, `
[[interface]]
name = "lan0"
bandwidth = "100mbit"
classifier = "u32"
[[interface]]
name = "lan1"
bandwidth = "100mbit"
classifier = "bpf"
[[interface]]
name = "lan2"
bandwidth = "100mbit"
[tiers.gold]
rate = "1mbit"
`)
	plan, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	got := []ClassifierKind{plan.Interfaces[0].Classifier, plan.Interfaces[1].Classifier, plan.Interfaces[2].Classifier}
	if got[0] != ClassifierU32 || got[1] != ClassifierBPF || got[2] != ClassifierAuto {
		t.Errorf("classifiers = %q, want u32, bpf, auto", got)
	}
	for _, c := range []struct{ body, want string }{
		{"classifier = \"ebpf\"\n", `interface[0].classifier: "ebpf" is not one of bpf, u32`},
		{"shaper = \"tbf\"\nburst = \"10k\"\nlatency = \"50ms\"\nclassifier = \"bpf\"\n", `is only used with shaper = "htb"`},
	} {
		path := writeFiles(t, t.TempDir(), "[[interface]]\nname = \"lan0\"\nbandwidth = \"100mbit\"\n"+c.body+"[tiers.gold]\nrate = \"1mbit\"\n")
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.body, err, c.want)
		}
	}
}
