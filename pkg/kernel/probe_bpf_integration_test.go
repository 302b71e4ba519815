package kernel

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
)

// TestProbeBPF: as root the probe succeeds (maps, program, a cls_bpf
// filter on a throwaway loopback); without CAP_BPF and CAP_SYS_ADMIN
// (this test binary run again under setpriv) it fails with EPERM in its
// reason.
func TestProbeBPF(t *testing.T) {
	if os.Getenv("SHAPERD_PROBE_BPF_CHILD") == "1" {
		err := ProbeBPF()
		if err == nil {
			t.Fatal("probe succeeded without CAP_BPF and CAP_SYS_ADMIN")
		}
		t.Logf("refused: %v", err)
		if !strings.Contains(err.Error(), "operation not permitted") {
			t.Errorf("reason %q does not say EPERM", err)
		}
		return
	}
	netnslab.Require(t)
	if err := ProbeBPF(); err != nil {
		t.Fatalf("ProbeBPF as root: %v", err)
	}
	setpriv := netnslab.RequireTool(t, "setpriv")
	cmd := exec.Command(setpriv, "--bounding-set=-bpf,-sys_admin,-perfmon", "--inh-caps=-bpf,-sys_admin,-perfmon",
		os.Args[0], "-test.run=^TestProbeBPF$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "SHAPERD_PROBE_BPF_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("probe without capabilities: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "refused:") {
		t.Errorf("the child did not run the refused probe:\n%s", out)
	}
	t.Logf("%s", out)
}
