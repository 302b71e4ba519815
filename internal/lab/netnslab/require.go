package netnslab

import (
	"os"
	"os/exec"
	"testing"
)

// RequireEnv is the environment variable that turns Require's skips into
// failures ("1" = namespaces must work, as in CI).
const RequireEnv = "SHAPERD_REQUIRE_NETNS"

// Require skips the test when network namespaces cannot be used here (not
// root, or ip/tc/iperf3 missing, or `ip netns add` fails). With
// SHAPERD_REQUIRE_NETNS=1 it calls t.Fatal instead of skipping. Under
// `go test -short` it skips (unless SHAPERD_REQUIRE_NETNS=1): a quick run
// of the unit tests as root leaves the kernel and the CPU alone.
func Require(t testing.TB) {
	t.Helper()
	if testing.Short() && os.Getenv(RequireEnv) != "1" {
		t.Skip("skipping: namespace test under -short")
	}
	if reason := unavailable(); reason != "" {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("network namespaces required (%s=1) but unavailable: %s", RequireEnv, reason)
		}
		t.Skipf("skipping: network namespaces unavailable: %s (set %s=1 to fail instead)", reason, RequireEnv)
	}
}

// unavailable returns why namespaces can't be used, or "" when they can.
func unavailable() string {
	if os.Geteuid() != 0 {
		return "not running as root"
	}
	for _, tool := range []string{"ip", "tc", "iperf3"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " not found in PATH"
		}
	}
	name := "sdprobe-" + suffix()
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return "ip netns add: " + string(out)
	}
	_ = exec.Command("ip", "netns", "del", name).Run()
	return ""
}

// RequireTool returns the path of the program name, as Require treats
// namespaces: a missing one skips the test, or fails it with
// SHAPERD_REQUIRE_NETNS=1 (CI must not pass by skipping).
func RequireTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%s required (%s=1) but not found in PATH", name, RequireEnv)
		}
		t.Skipf("skipping: %s not found in PATH (set %s=1 to fail instead)", name, RequireEnv)
	}
	return p
}
