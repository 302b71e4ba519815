package lab

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
)

// products are the shipped programs: none of them may depend on a lab.
var products = []string{
	"github.com/shaperd/shaperd/cmd/shaperd",
	"github.com/shaperd/shaperd/cmd/shaperctl",
}

const labPrefix = "github.com/shaperd/shaperd/internal/lab"

// TestProductImportsNoLab lists every package the shipped programs build
// from (go list -deps) and fails if one of them is under internal/lab.
// Without the go tool it skips, or fails with SHAPERD_REQUIRE_NETNS=1.
func TestProductImportsNoLab(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv(netnslab.RequireEnv) == "1" {
			t.Fatalf("go tool required (%s=1) but not found in PATH", netnslab.RequireEnv)
		}
		t.Skipf("skipping: go tool not found in PATH (set %s=1 to fail instead)", netnslab.RequireEnv)
	}
	args := append([]string{"list", "-deps"}, products...)
	out, err := exec.Command(goTool, args...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps: %v\n%s", err, stderr)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps listed no packages")
	}
	for _, p := range deps {
		if p == labPrefix || strings.HasPrefix(p, labPrefix+"/") {
			t.Errorf("a shipped program depends on lab package %s", p)
		}
	}
}
