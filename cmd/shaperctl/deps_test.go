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
// the daemon serves, systemd's notify protocol, and eBPF (the kernel's
// classifier and queue steering). shaperctl talks to a daemon over its
// socket, to etcd, and checks configurations offline
// (internal/check/offline), none of which needs them.
var forbiddenDeps = []string{
	"github.com/shaperd/shaperd/internal/daemon",
	"github.com/prometheus/",
	"github.com/coreos/go-systemd/",
	"github.com/cilium/ebpf",
}

// allowedDeps are forbidden packages shaperctl links anyway, with why.
var allowedDeps = map[string]string{
	// etcd's client (fleet push, pull and status) imports its logutil
	// package, which imports the journal writer on every system but
	// Windows (etcd says it drops it in v3.8). It is not systemd's notify
	// protocol, which the daemon uses.
	"github.com/coreos/go-systemd/v22/journal": "imported by go.etcd.io/etcd/client/pkg/v3/logutil",
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
		if _, ok := allowedDeps[dep]; ok {
			continue
		}
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
