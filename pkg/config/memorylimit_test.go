package config

import (
	"strings"
	"testing"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// daemon.memory_limit is a size, 0 (the default) for none, else at least
// MinMemoryLimit.
func TestMemoryLimit(t *testing.T) {
	const iface = "[[interface]]\nname = \"lan0\"\nbandwidth = \"1gbit\"\n"
	if p := mustLoad(t, iface, ""); p.Daemon.MemoryLimit != 0 {
		t.Errorf("default %s, want 0", p.Daemon.MemoryLimit)
	}
	for s, want := range map[string]tbf.Size{`"256mb"`: 256 * tbf.Mebibyte, `"1g"`: tbf.Gibibyte, `"0"`: 0, `33554432`: 32 * tbf.Mebibyte} {
		if p := mustLoad(t, "[daemon]\nmemory_limit = "+s+"\n"+iface, ""); p.Daemon.MemoryLimit != want {
			t.Errorf("memory_limit = %s: %s, want %s", s, p.Daemon.MemoryLimit, want)
		}
	}
	for _, s := range []string{`"16mb"`, `"lots"`, `-1`, `true`} {
		_, err := LoadFS(mapFS("[daemon]\nmemory_limit = "+s+"\n"+iface, ""), "etc/shaperd.toml")
		if err == nil || !strings.Contains(err.Error(), "shaperd.toml:2:") || !strings.Contains(err.Error(), "memory_limit") {
			t.Errorf("memory_limit = %s: error %v, want one at line 2 naming the key", s, err)
		}
	}
}
