package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestVersionScript runs scripts/version.sh in a scratch repository
// through its cases: no tag, a tag, commits after a tag, local changes.
func TestVersionScript(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		need(t, "git is not installed")
	}
	repo := t.TempDir()
	if err := os.MkdirAll(filepath.Join(repo, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(repo, "scripts/version.sh")
	if err := os.WriteFile(script, []byte(readFile(t, filepath.Join(repoRoot(t), "scripts/version.sh"))), 0o755); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.org",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.org",
			"GIT_AUTHOR_DATE=2026-12-02T10:00:00Z", "GIT_COMMITTER_DATE=2026-12-02T10:00:00Z")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	version := func() string {
		t.Helper()
		return strings.TrimSpace(run(t, repo, script))
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-qm", "one")
	hash := git("rev-parse", "--short", "HEAD")
	if v := version(); v != "0.0~git20261202."+hash {
		t.Errorf("no tag: %q, want 0.0~git20261202.%s", v, hash)
	}
	if err := os.WriteFile(filepath.Join(repo, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "f") // staged changes make the tree dirty
	if v := version(); v != "0.0~git20261202."+hash+".dirty" {
		t.Errorf("dirty: %q", v)
	}
	git("commit", "-qm", "two")
	git("tag", "v1.2.3")
	if v := version(); v != "1.2.3" {
		t.Errorf("at tag v1.2.3: %q, want 1.2.3", v)
	}
	git("commit", "-q", "--allow-empty", "-m", "three")
	git("commit", "-q", "--allow-empty", "-m", "four")
	hash = git("rev-parse", "--short", "HEAD")
	if v := version(); v != "1.2.3+git20261202.2."+hash {
		t.Errorf("two commits after v1.2.3: %q, want 1.2.3+git20261202.2.%s", v, hash)
	}
	git("tag", "v2.0.0-rc1")
	if v := version(); v != "2.0.0~rc1" {
		t.Errorf("at v2.0.0-rc1: %q, want 2.0.0~rc1 (sorts before 2.0.0)", v)
	}
	// Every answer is a valid Debian version: dpkg agrees where it is installed.
	if _, err := exec.LookPath("dpkg"); err == nil {
		if err := exec.Command("dpkg", "--compare-versions", "2.0.0~rc1", "lt", "2.0.0").Run(); err != nil {
			t.Errorf("dpkg: 2.0.0~rc1 does not sort before 2.0.0")
		}
	}
	if !regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*$`).MatchString(version()) {
		t.Errorf("%q is not a Debian version", version())
	}
}
