package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/control/controltest"
)

// buildShaperctl builds shaperctl into a fresh directory and returns it.
func buildShaperctl(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "shaperctl"), ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// bashComplete runs the bash completion script in a real bash with
// COMP_WORDS as bash would split the line (tier:go is "tier" ":" "go")
// and returns COMPREPLY, one reply a line.
func bashComplete(t *testing.T, dir string, env []string, words ...string) string {
	t.Helper()
	var q []string
	for _, w := range words {
		q = append(q, "'"+w+"'")
	}
	script := `source <(shaperctl completion bash) || exit 9
COMP_WORDS=(` + strings.Join(q, " ") + `); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
_shaperctl
printf '%s\n' "${COMPREPLY[@]}"`
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash %q: %v\n%s", words, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestBashCompletion completes commands, flags, and the user, tier and
// interface names of a running (fake) daemon in a real bash, and nothing
// (quietly) when no daemon answers.
func TestBashCompletion(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	dir := buildShaperctl(t)
	sock := controltest.Serve(t, &controltest.Fake{State: controltest.Sample()})
	env := []string{"SHAPERD_SOCKET=" + sock}
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"shaperctl", "se"}, "set-rate"},
		{[]string{"shaperctl", "status", "--j"}, "--json"},
		{[]string{"shaperctl", "completion", ""}, "bash\nfish\nzsh"},
		{[]string{"shaperctl", "status", ""}, "alice\nbob\ncarol\niface:lan0\niface:wan0\ntier:bronze\ntier:gold\ntier:silver"},
		{[]string{"shaperctl", "set-rate", "b"}, "bob"},
		// bash splits at the colon and replaces only what follows it.
		{[]string{"shaperctl", "clear", "tier", ":", "g"}, "gold"},
		{[]string{"shaperctl", "set-rate", "iface", ":"}, "lan0\nwan0"},
		{[]string{"shaperctl", "export", "--format", ""}, "csv\ntoml"},
	} {
		if got := bashComplete(t, dir, env, tc.words...); got != tc.want {
			t.Errorf("%q: COMPREPLY %q, want %q", tc.words, got, tc.want)
		}
	}
	// --socket on the line wins over SHAPERD_SOCKET.
	if got := bashComplete(t, dir, []string{"SHAPERD_SOCKET=/nonexistent"}, "shaperctl", "--socket", sock, "status", "a"); got != "alice" {
		t.Errorf("with --socket: %q, want alice", got)
	}
	// bash splits --socket=PATH at the '='.
	if got := bashComplete(t, dir, []string{"SHAPERD_SOCKET=/nonexistent"}, "shaperctl", "--socket", "=", sock, "clear", "c"); got != "carol" {
		t.Errorf("with --socket=: %q, want carol", got)
	}
	// No daemon: no names, no noise, no failure.
	if got := bashComplete(t, dir, []string{"SHAPERD_SOCKET=" + filepath.Join(t.TempDir(), "none.sock")}, "shaperctl", "status", ""); got != "" {
		t.Errorf("without a daemon: %q, want nothing", got)
	}
	// File names for import's file.
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "ShapedDevices.csv"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := bashComplete(t, dir, env, "shaperctl", "import", "libreqos", filepath.Join(data, "Sh")); got != filepath.Join(data, "ShapedDevices.csv") {
		t.Errorf("import file: %q", got)
	}
}

// TestZshFishCompletionSyntax checks the zsh and fish scripts parse, where
// those shells are installed.
func TestZshFishCompletionSyntax(t *testing.T) {
	dir := buildShaperctl(t)
	ran := false
	for _, sh := range []string{"zsh", "fish"} {
		if _, err := exec.LookPath(sh); err != nil {
			t.Logf("%s not installed", sh)
			continue
		}
		ran = true
		script, err := exec.Command(filepath.Join(dir, "shaperctl"), "completion", sh).Output()
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "c."+sh)
		if err := os.WriteFile(f, script, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(sh, "-n", f).CombinedOutput(); err != nil {
			t.Errorf("%s -n: %v\n%s", sh, err, out)
		}
	}
	if !ran {
		t.Skip("neither zsh nor fish is installed")
	}
}

// TestFishCompletion completes in a real fish (complete -C asks for the
// completions of a command line) against the fake daemon.
func TestFishCompletion(t *testing.T) {
	if _, err := exec.LookPath("fish"); err != nil {
		t.Skip("fish is not installed")
	}
	dir := buildShaperctl(t)
	sock := controltest.Serve(t, &controltest.Fake{State: controltest.Sample()})
	for line, want := range map[string]string{
		"shaperctl se":                "set-rate",
		"shaperctl status tier:g":     "tier:gold",
		"shaperctl clear ca":          "carol",
		"shaperctl top --on":          "--once",
		"shaperctl import ":           "csv\nlibreqos",
		"shaperctl completion z":      "zsh",
		"shaperctl export --format c": "csv",
	} {
		cmd := exec.Command("fish", "--no-config", "-c", `shaperctl completion fish | source; complete -C "$argv[1]"`, line)
		cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "SHAPERD_SOCKET="+sock)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("fish %q: %v\n%s", line, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("fish %q: %q, want %q", line, got, want)
		}
	}
}

// TestZshCompletion runs the zsh function with zsh's completion builtins
// replaced by ones that print what they are given.
func TestZshCompletion(t *testing.T) {
	if _, err := exec.LookPath("zsh"); err != nil {
		t.Skip("zsh is not installed")
	}
	dir := buildShaperctl(t)
	sock := controltest.Serve(t, &controltest.Fake{State: controltest.Sample()})
	script := `compdef() { :; }
compadd() { [[ $1 == -- ]] && shift; print -l -- "$@"; }
_files() { print FILES; }
source <(shaperctl completion zsh)
words=("$@"); CURRENT=$#
_shaperctl`
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"shaperctl", "status", "tier:"}, "tier:bronze\ntier:gold\ntier:silver"},
		{[]string{"shaperctl", "set-rate", "b"}, "bob"},
		{[]string{"shaperctl", "import", "csv", "x"}, "FILES"},
	} {
		cmd := exec.Command("zsh", append([]string{"-f", "-c", script, "zsh"}, tc.words...)...)
		cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "SHAPERD_SOCKET="+sock)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("zsh %q: %v\n%s", tc.words, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("zsh %q: %q, want %q", tc.words, got, tc.want)
		}
	}
}
