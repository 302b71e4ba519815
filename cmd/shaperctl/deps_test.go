package main

import (
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
)

// forbiddenDeps are import path prefixes shaperctl must not link: the
// daemon (its control loop, kernel code and state), the metrics library
// the daemon serves, systemd's libraries (the daemon's notify protocol,
// and the journal writer etcd's clientv3 imports through its logging:
// shaperctl's fleet commands use fleet.Client, etcd's gRPC API without
// clientv3), and eBPF (the kernel's classifier and queue steering).
// shaperctl talks to a daemon over its socket, to etcd, and checks
// configurations offline (internal/check/offline), none of which needs
// them.
var forbiddenDeps = []string{
	"github.com/shaperd/shaperd/internal/daemon",
	"github.com/prometheus/",
	"github.com/coreos/go-systemd/",
	"github.com/cilium/ebpf",
	// etcd's full client: it brought the journal writer above, and its
	// watches, leases and balancer are the daemon's (fleet/fleetd).
	"go.etcd.io/etcd/client/",
}

// TestDeps lists shaperctl's dependencies with `go list -deps` and fails
// naming every forbidden package it links and what imports it. Without
// the go tool in PATH it skips (SHAPERD_REQUIRE_NETNS=1: fails).
func TestDeps(t *testing.T) {
	goTool := netnslab.RequireTool(t, "go")
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", ".").Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list -deps: %v\n%s", err, msg)
	}
	importers := map[string][]string{}
	var deps []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		deps = append(deps, f[0])
		for _, imp := range f[1:] {
			importers[imp] = append(importers[imp], f[0])
		}
	}
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages; want shaperctl's dependencies:\n%s", len(deps), out)
	}
	for _, dep := range deps {
		for _, bad := range forbiddenDeps {
			if dep == bad || strings.HasPrefix(dep, strings.TrimSuffix(bad, "/")+"/") {
				by := importers[dep]
				sort.Strings(by)
				t.Errorf("shaperctl links %s (forbidden: %s), imported by %s", dep, bad, strings.Join(by, ", "))
				break
			}
		}
	}
}
