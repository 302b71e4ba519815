package offline

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testConfig = `
[daemon]
state_dir = "%[1]s/state"

[[interface]]
name = "lan0"
bandwidth = "1gbit"
default_tier = "bronze"
%[2]s

[tiers.bronze]
rate = "5mbit"
ceil = "20mbit"
`

const testUsers = `
[[user]]
name = "alice"
tier = "bronze"
addresses = ["198.18.1.10", "2001:db8:1::/96"]
`

func writeConfig(t *testing.T, classifier string) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "shaperd.toml")
	if err := os.WriteFile(p, []byte(fmt.Sprintf(testConfig, dir, classifier)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "users.toml"), []byte(testUsers), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// An IPv6 /96 has no u32 table: an error at the address's key where the
// interface may classify with u32 (the key absent, or "u32"), none where
// it says "bpf".
func TestPlanClassifierLayout(t *testing.T) {
	for _, tt := range []struct {
		classifier string
		fails      bool
	}{
		{"", true},
		{`classifier = "u32"`, true},
		{`classifier = "bpf"`, false},
	} {
		plan, errs := Load(writeConfig(t, tt.classifier))
		if plan == nil && !tt.fails {
			t.Fatalf("%q: %v", tt.classifier, errs)
		}
		if fails := len(errs) > 0; fails != tt.fails {
			t.Errorf("%q: errors %v, want some: %v", tt.classifier, errs, tt.fails)
		}
		for _, e := range errs {
			if !strings.Contains(e.Key, "addresses[1]") || !strings.HasSuffix(e.File, "users.toml") {
				t.Errorf("%q: %v; want it at the /96's key in users.toml", tt.classifier, e)
			}
		}
	}
	if errs := File(filepath.Join(t.TempDir(), "missing.toml")); len(errs) != 1 {
		t.Errorf("a missing file: %v, want one error", errs)
	}
}
