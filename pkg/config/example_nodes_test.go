package config

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"
)

// TestExampleNodes loads configs/shaperd.toml with its commented [nodes]
// example, and configs/users.toml with alice's commented node key, both
// uncommented: the example documents a hierarchy shaperd accepts.
func TestExampleNodes(t *testing.T) {
	main, err := os.ReadFile("../../configs/shaperd.toml")
	if err != nil {
		t.Fatal(err)
	}
	users, err := os.ReadFile("../../configs/users.toml")
	if err != nil {
		t.Fatal(err)
	}
	// The example runs from its first commented [nodes...] table to the
	// blank line after it.
	lines := strings.Split(string(main), "\n")
	in := false
	for i, l := range lines {
		if strings.HasPrefix(l, "#[nodes.") {
			in = true
		}
		if l == "" {
			in = false
		}
		if in {
			lines[i] = strings.TrimPrefix(l, "#")
		}
	}
	uncommented := strings.Replace(string(users), "# node = ", "node = ", 1)
	if uncommented == string(users) {
		t.Fatal("configs/users.toml has no commented node key")
	}
	plan, err := LoadFS(fstest.MapFS{
		"shaperd.toml": {Data: []byte(strings.Join(lines, "\n"))},
		"users.toml":   {Data: []byte(uncommented)},
	}, "shaperd.toml")
	if err != nil {
		t.Fatalf("the uncommented example is invalid:\n%v", err)
	}
	ap, ok := plan.Node("ap-3")
	if len(plan.Nodes) != 3 || !ok || ap.Path != "north/dorm-a/ap-3" || len(ap.Schedules) != 1 {
		t.Fatalf("nodes: %+v", plan.Nodes)
	}
	if plan.Users[0].Name != "alice" || plan.Users[0].Node != "ap-3" {
		t.Errorf("alice's node: %q", plan.Users[0].Node)
	}
}
