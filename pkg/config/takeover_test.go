package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInterfaceTakeover: takeover = true is read per interface, false by
// default, and a value that is not a boolean is an error at its position.
func TestInterfaceTakeover(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "shaperd.toml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := os.WriteFile(filepath.Join(dir, "users.toml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	const base = "[[interface]]\nname = \"lan0\"\nbandwidth = \"1gbit\"\nshaper = \"tbf\"\n"
	plan, err := Load(write(base + "takeover = true\n[[interface]]\nname = \"lan1\"\nbandwidth = \"1gbit\"\nshaper = \"tbf\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Interfaces[0].Takeover || plan.Interfaces[1].Takeover {
		t.Errorf("takeover = %v, %v; want true, false", plan.Interfaces[0].Takeover, plan.Interfaces[1].Takeover)
	}
	_, err = Load(write(base + "takeover = \"yes\"\n"))
	if err == nil || !strings.Contains(err.Error(), ":5:") || !strings.Contains(err.Error(), "takeover") {
		t.Errorf("takeover = \"yes\": %v; want an error at line 5 naming the key", err)
	}
}
