package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInterfaceQueues: queues = N or "auto" is read per HTB interface (1 when
// absent); other values, tbf interfaces and leaf qdiscs with more than one
// queue are errors at the key's position.
func TestInterfaceQueues(t *testing.T) {
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
	const base = "[[interface]]\nname = \"lan0\"\nbandwidth = \"1gbit\"\n"
	for body, want := range map[string]int{"": 0, "queues = 4\n": 4, "queues = 1\n": 1, "queues = \"auto\"\n": QueuesAuto,
		"queues = 4\nleaf_qdisc = \"bfifo\"\n": 4, "queues = \"auto\"\nleaf_qdisc = \"sfq\"\n": QueuesAuto} {
		plan, err := Load(write(base + body))
		if err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		if got := plan.Interfaces[0].Queues; got != want {
			t.Errorf("%q: Queues = %d, want %d", body, got, want)
		}
	}
	for body, msg := range map[string]string{
		"queues = 0\n":                   "out of range",
		"queues = \"many\"\n":            "\"auto\"",
		"queues = 2.5\n":                 "number of queues",
		"shaper = \"tbf\"\nqueues = 2\n": "only used with shaper",
	} {
		_, err := Load(write(base + body))
		if err == nil || !strings.Contains(err.Error(), msg) || !strings.Contains(err.Error(), "queues") {
			t.Errorf("%q: %v; want an error about queues containing %q", body, err, msg)
		}
	}
}
