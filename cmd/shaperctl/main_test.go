package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersion builds shaperctl with -X main.version as scripts/package.sh
// does and checks that --version prints it.
func TestVersion(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "shaperctl")
	const v = "1.2.3+git20261202.4.abc1234"
	if out, err := exec.Command("go", "build", "-ldflags", "-X main.version="+v, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "shaperctl "+v {
		t.Fatalf("shaperctl --version: %v, %q; want %q", err, out, "shaperctl "+v)
	}
}

func TestPrintVersionOnlyAlone(t *testing.T) {
	var b strings.Builder
	for _, args := range [][]string{nil, {"status"}, {"--version", "status"}, {"status", "--version"}} {
		if printVersion(args, &b) {
			t.Errorf("printVersion(%q) = true; want false (a command's arguments)", args)
		}
	}
	if !printVersion([]string{"--version"}, &b) || b.String() != "shaperctl devel\n" {
		t.Errorf("printVersion(--version) printed %q", b.String())
	}
}
