package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
)

// need skips the test when reason is not "" (or fails it under
// SHAPERD_REQUIRE_NETNS=1, where everything the tests need must be there).
func need(t *testing.T, reason string) {
	t.Helper()
	if reason == "" {
		return
	}
	if os.Getenv(netnslab.RequireEnv) == "1" {
		t.Fatalf("required (%s=1) but unavailable: %s", netnslab.RequireEnv, reason)
	}
	t.Skipf("skipping: %s (set %s=1 to fail instead)", reason, netnslab.RequireEnv)
}

// needRoot needs root and the tools.
func needRoot(t *testing.T, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		need(t, "not running as root")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			need(t, tool+" is not installed (apt-get install "+aptPackage(tool)+")")
		}
	}
}

// aptPackage is the Debian package that ships tool.
func aptPackage(tool string) string {
	switch tool {
	case "promtool":
		return "prometheus"
	case "dpkg-deb", "dpkg":
		return "dpkg"
	case "systemd-analyze":
		return "systemd"
	case "ip":
		return "iproute2"
	}
	return tool
}

// repoRoot is the repository's top directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../..") // go test runs in the package's directory
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
