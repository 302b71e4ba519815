package packaging

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// debEntry is one line of `dpkg-deb -c`: mode, owner and path.
type debEntry struct {
	mode, owner string
}

// wantFiles is the package's file list with modes and owners.
var wantFiles = map[string]debEntry{
	"./":                                   {"drwxr-xr-x", "root/root"},
	"./etc/":                               {"drwxr-xr-x", "root/root"},
	"./etc/shaperd/":                       {"drwxr-xr-x", "root/root"},
	"./etc/shaperd/shaperd.toml":           {"-rw-r--r--", "root/root"},
	"./etc/shaperd/users.toml":             {"-rw-r--r--", "root/root"},
	"./lib/":                               {"drwxr-xr-x", "root/root"},
	"./lib/systemd/":                       {"drwxr-xr-x", "root/root"},
	"./lib/systemd/system/":                {"drwxr-xr-x", "root/root"},
	"./lib/systemd/system/shaperd.service": {"-rw-r--r--", "root/root"},
	"./usr/":                               {"drwxr-xr-x", "root/root"},
	"./usr/bin/":                           {"drwxr-xr-x", "root/root"},
	"./usr/bin/shaperctl":                  {"-rwxr-xr-x", "root/root"},
	"./usr/sbin/":                          {"drwxr-xr-x", "root/root"},
	"./usr/sbin/shaperd":                   {"-rwxr-xr-x", "root/root"},
	"./usr/share/":                         {"drwxr-xr-x", "root/root"},
	"./usr/share/doc/":                     {"drwxr-xr-x", "root/root"},
	"./usr/share/doc/shaperd/":             {"drwxr-xr-x", "root/root"},
	"./usr/share/doc/shaperd/README.md":    {"-rw-r--r--", "root/root"},
	"./usr/share/doc/shaperd/changelog.gz": {"-rw-r--r--", "root/root"},
	"./usr/share/doc/shaperd/copyright":    {"-rw-r--r--", "root/root"},
	"./usr/share/doc/shaperd/examples/":    {"drwxr-xr-x", "root/root"},
	"./usr/share/doc/shaperd/examples/grafana-shaperd.json":  {"-rw-r--r--", "root/root"},
	"./usr/share/doc/shaperd/examples/prometheus-alerts.yml": {"-rw-r--r--", "root/root"},
	"./usr/share/man/":                                     {"drwxr-xr-x", "root/root"},
	"./usr/share/man/man5/":                                {"drwxr-xr-x", "root/root"},
	"./usr/share/man/man5/shaperd.toml.5.gz":               {"-rw-r--r--", "root/root"},
	"./usr/share/man/man8/":                                {"drwxr-xr-x", "root/root"},
	"./usr/share/man/man8/shaperctl.8.gz":                  {"-rw-r--r--", "root/root"},
	"./usr/share/man/man8/shaperd.8.gz":                    {"-rw-r--r--", "root/root"},
	"./usr/share/bash-completion/":                         {"drwxr-xr-x", "root/root"},
	"./usr/share/bash-completion/completions/":             {"drwxr-xr-x", "root/root"},
	"./usr/share/bash-completion/completions/shaperctl":    {"-rw-r--r--", "root/root"},
	"./usr/share/zsh/":                                     {"drwxr-xr-x", "root/root"},
	"./usr/share/zsh/vendor-completions/":                  {"drwxr-xr-x", "root/root"},
	"./usr/share/zsh/vendor-completions/_shaperctl":        {"-rw-r--r--", "root/root"},
	"./usr/share/fish/":                                    {"drwxr-xr-x", "root/root"},
	"./usr/share/fish/vendor_completions.d/":               {"drwxr-xr-x", "root/root"},
	"./usr/share/fish/vendor_completions.d/shaperctl.fish": {"-rw-r--r--", "root/root"},
	"./var/":             {"drwxr-xr-x", "root/root"},
	"./var/lib/":         {"drwxr-xr-x", "root/root"},
	"./var/lib/shaperd/": {"drwxr-x---", "root/root"},
}

// TestDebianPackage builds the package for this machine's architecture
// with scripts/package.sh, checks its control fields, file list, modes,
// conffiles and maintainer scripts, lints it, then installs it (dpkg -i),
// checks the installed daemon, its unit (systemd-analyze verify), group
// and state directory, removes and purges it. Purging also runs on
// cleanup, so a failing test leaves no package behind.
func TestDebianPackage(t *testing.T) {
	needRoot(t, "dpkg-deb", "dpkg", "git", "go", "lintian", "systemd-analyze")
	if out, err := exec.Command("dpkg-query", "-W", "-f=${Status}", "shaperd").Output(); err == nil && strings.Contains(string(out), "installed") {
		need(t, "a shaperd package is installed on this machine; the test would replace and purge it")
	}
	root := repoRoot(t)
	arch := runtime.GOARCH // amd64 or arm64: installable here
	out := t.TempDir()
	run(t, root, filepath.Join(root, "scripts/package.sh"), "-o", out, arch)
	version := strings.TrimSpace(run(t, root, filepath.Join(root, "scripts/version.sh")))
	deb := filepath.Join(out, "shaperd_"+version+"_"+arch+".deb")
	if _, err := os.Stat(deb); err != nil {
		t.Fatalf("package.sh made no %s: %v", deb, err)
	}

	t.Run("control", func(t *testing.T) {
		fields := controlFields(t, run(t, out, "dpkg-deb", "-f", deb))
		for k, want := range map[string]string{
			"Package": "shaperd", "Version": version, "Architecture": arch,
			"Depends": "adduser", "Recommends": "iproute2", "Section": "net", "Priority": "optional",
		} {
			if fields[k] != want {
				t.Errorf("control %s: %q, want %q", k, fields[k], want)
			}
		}
		for _, k := range []string{"Maintainer", "Description", "Homepage"} {
			if fields[k] == "" {
				t.Errorf("control has no %s", k)
			}
		}
		if n, err := strconv.Atoi(fields["Installed-Size"]); err != nil || n < 1000 {
			t.Errorf("Installed-Size %q: want the size in KiB of two Go binaries", fields["Installed-Size"])
		}
	})

	t.Run("files", func(t *testing.T) {
		got := map[string]debEntry{}
		sc := bufio.NewScanner(strings.NewReader(run(t, out, "dpkg-deb", "-c", deb)))
		for sc.Scan() {
			f := strings.Fields(sc.Text()) // mode owner size date time path
			if len(f) != 6 {
				t.Errorf("dpkg-deb -c line %q", sc.Text())
				continue
			}
			got[f[5]] = debEntry{f[0], f[1]}
		}
		for p, w := range wantFiles {
			if g, ok := got[p]; !ok {
				t.Errorf("missing %s", p)
			} else if g != w {
				t.Errorf("%s: %s %s, want %s %s", p, g.mode, g.owner, w.mode, w.owner)
			}
		}
		for p := range got {
			if _, ok := wantFiles[p]; !ok {
				t.Errorf("unexpected %s", p)
			}
		}
	})

	ctrl := t.TempDir()
	run(t, out, "dpkg-deb", "-e", deb, ctrl)
	t.Run("conffiles and scripts", func(t *testing.T) {
		if got := readFile(t, filepath.Join(ctrl, "conffiles")); got != "/etc/shaperd/shaperd.toml\n/etc/shaperd/users.toml\n" {
			t.Errorf("conffiles: %q", got)
		}
		for _, s := range []string{"postinst", "prerm", "postrm"} {
			fi, err := os.Stat(filepath.Join(ctrl, s))
			if err != nil || fi.Mode().Perm() != 0o755 {
				t.Errorf("%s: %v, mode %v; want 0755", s, err, fi.Mode())
			}
			body := readFile(t, filepath.Join(ctrl, s))
			// Nothing is started or enabled without the operator.
			for _, bad := range []string{"systemctl start", "systemctl enable", "systemctl restart", "deb-systemd-invoke start", "deb-systemd-invoke restart", "deb-systemd-helper enable"} {
				if strings.Contains(body, bad) {
					t.Errorf("%s contains %q", s, bad)
				}
			}
			if err := exec.Command("sh", "-n", filepath.Join(ctrl, s)).Run(); err != nil {
				t.Errorf("%s: sh -n: %v", s, err)
			}
		}
	})

	t.Run("contents", func(t *testing.T) {
		x := t.TempDir()
		run(t, out, "dpkg-deb", "-x", deb, x)
		unit := readFile(t, filepath.Join(x, "lib/systemd/system/shaperd.service"))
		for _, want := range []string{
			"ExecStartPre=/usr/sbin/shaperd --config /etc/shaperd/shaperd.toml --check\n",
			"ExecStart=/usr/sbin/shaperd --config /etc/shaperd/shaperd.toml\n",
			"ExecReload=/usr/bin/shaperctl reload\n",
		} {
			if !strings.Contains(unit, want) {
				t.Errorf("the packaged unit lacks %q", want)
			}
		}
		if strings.Contains(unit, "/usr/local") {
			t.Error("the packaged unit names /usr/local")
		}
		src := readFile(t, filepath.Join(root, "systemd/shaperd.service"))
		if strings.Count(unit, "\n") != strings.Count(src, "\n") {
			t.Errorf("the packaged unit has %d lines, systemd/shaperd.service %d", strings.Count(unit, "\n"), strings.Count(src, "\n"))
		}
		// The man pages are docs/man's, compressed.
		for page, dir := range map[string]string{"shaperd.8": "man8", "shaperctl.8": "man8", "shaperd.toml.5": "man5"} {
			got := run(t, out, "gzip", "-dc", filepath.Join(x, "usr/share/man", dir, page+".gz"))
			if got != readFile(t, filepath.Join(root, "docs/man", page)) {
				t.Errorf("the packaged %s is not docs/man/%s", page, page)
			}
		}
		if bash := readFile(t, filepath.Join(x, "usr/share/bash-completion/completions/shaperctl")); !strings.Contains(bash, "complete -F _shaperctl shaperctl") {
			t.Errorf("the bash completion is not shaperctl's:\n%s", bash)
		}
		cfg := readFile(t, filepath.Join(x, "etc/shaperd/shaperd.toml"))
		if !strings.Contains(cfg, "\nsocket_group = \"shaperd\"\n") {
			t.Error("the packaged shaperd.toml does not give the socket to group shaperd")
		}
	})

	t.Run("lintian", func(t *testing.T) {
		// lintian exits non-zero on errors; its tags are the verdict.
		o, _ := exec.Command("lintian", "--tag-display-limit", "0", deb).CombinedOutput()
		for _, line := range strings.Split(string(o), "\n") {
			switch {
			case strings.HasPrefix(line, "E: "):
				t.Errorf("lintian: %s", line)
			case strings.Contains(line, "no-manual-page"), strings.Contains(line, "manpage"), strings.Contains(line, "groff-message"),
				strings.Contains(line, "completion"):
				// The man pages and completions ship and are clean.
				t.Errorf("lintian: %s", line)
			case strings.HasPrefix(line, "W: "), strings.HasPrefix(line, "I: "):
				t.Logf("lintian: %s", line)
			}
		}
	})

	_, groupErr := exec.Command("getent", "group", "shaperd").Output()
	hadGroup := groupErr == nil
	t.Cleanup(func() {
		if o, err := exec.Command("dpkg", "--purge", "shaperd").CombinedOutput(); err != nil {
			t.Errorf("cleanup: dpkg --purge shaperd: %v\n%s", err, o)
		}
		if !hadGroup { // purge removes it when empty; a failed test may leave it
			_ = exec.Command("groupdel", "shaperd").Run()
		}
	})
	run(t, out, "dpkg", "-i", deb)

	t.Run("installed", func(t *testing.T) {
		if o := run(t, out, "/usr/sbin/shaperd", "--version"); o != "shaperd "+version+"\n" {
			t.Errorf("shaperd --version: %q, want %q", o, "shaperd "+version)
		}
		if o := run(t, out, "/usr/bin/shaperctl", "--version"); o != "shaperctl "+version+"\n" {
			t.Errorf("shaperctl --version: %q, want %q", o, "shaperctl "+version)
		}
		if _, err := exec.Command("getent", "group", "shaperd").Output(); err != nil {
			t.Errorf("postinst made no group shaperd: %v", err)
		}
		// The installed configuration is valid as shipped (socket_group
		// names the group postinst made).
		run(t, out, "/usr/sbin/shaperd", "--config", "/etc/shaperd/shaperd.toml", "--check")
		conf := run(t, out, "dpkg-query", "-W", "-f=${Conffiles}", "shaperd")
		for _, f := range []string{"/etc/shaperd/shaperd.toml", "/etc/shaperd/users.toml"} {
			if !strings.Contains(conf, " "+f+" ") {
				t.Errorf("dpkg does not know %s as a conffile: %q", f, conf)
			}
		}
		if fi, err := os.Stat("/var/lib/shaperd"); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o750 {
			t.Errorf("/var/lib/shaperd: %v %v, want a 0750 directory", err, fi)
		}
		if o, err := exec.Command("systemd-analyze", "verify", "/lib/systemd/system/shaperd.service").CombinedOutput(); err != nil {
			t.Errorf("systemd-analyze verify: %v\n%s", err, o)
		} else if len(o) > 0 {
			t.Logf("systemd-analyze verify:\n%s", o)
		}
	})

	// An operator enables the unit (the link is what purge must not leave
	// dangling), and a daemon run outside systemd leaves a lock file.
	const wants = "/etc/systemd/system/multi-user.target.wants/shaperd.service"
	run(t, out, "systemctl", "enable", "shaperd.service")
	if _, err := os.Lstat(wants); err != nil {
		t.Errorf("systemctl enable made no %s: %v", wants, err)
	}
	if err := os.MkdirAll("/run/shaperd", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("/run/shaperd/iface-r-lan.lock", nil, 0o600); err != nil {
		t.Fatal(err)
	}

	// remove keeps the configuration and state; purge removes both.
	state := "/var/lib/shaperd/overrides.json"
	if err := os.WriteFile(state, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, out, "dpkg", "--remove", "shaperd")
	for _, p := range []string{"/usr/sbin/shaperd", "/usr/bin/shaperctl", "/lib/systemd/system/shaperd.service"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s is still there after dpkg --remove", p)
		}
	}
	for _, p := range []string{state, "/etc/shaperd/shaperd.toml"} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("dpkg --remove removed %s: %v", p, err)
		}
	}
	run(t, out, "dpkg", "--purge", "shaperd")
	for _, p := range []string{"/var/lib/shaperd", "/etc/shaperd", "/run/shaperd", wants} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is still there after dpkg --purge", p)
		}
	}
	if _, err := exec.Command("getent", "group", "shaperd").Output(); err == nil && !hadGroup {
		t.Error("the group shaperd (made by the package, nobody in it) is still there after dpkg --purge")
	}
}

// controlFields parses `dpkg-deb -f` output (continuation lines dropped).
func controlFields(t *testing.T, s string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if line == "" || line[0] == ' ' {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			t.Errorf("control line %q", line)
			continue
		}
		m[k] = strings.TrimSpace(v)
	}
	return m
}

// run runs argv in dir and returns its standard output; a failure fails
// the test with its output.
func run(t *testing.T, dir string, argv ...string) string {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	o, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s%s", strings.Join(argv, " "), err, o, stderr.String())
	}
	return string(o)
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
