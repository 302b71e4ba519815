package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/shaperd/shaperd/internal/control/cli"
	"github.com/shaperd/shaperd/internal/manpage"
)

// Pages returns the man pages by file name ("shaperd.8"), generated from
// the repository at root.
func Pages(root string) (map[string]string, error) {
	shaperd, err := shaperdPage(root)
	if err != nil {
		return nil, err
	}
	toml, err := configPage(root)
	if err != nil {
		return nil, err
	}
	return map[string]string{
		"shaperd.8":      shaperd.Roff(),
		"shaperctl.8":    shaperctlPage().Roff(),
		"shaperd.toml.5": toml.Roff(),
	}, nil
}

const seeAlsoDaemon = `.PP
\fBshaperctl\fR(8), \fBshaperd.toml\fR(5), \fBtc\fR(8), \fBtc\-htb\fR(8), \fBtc\-tbf\fR(8), \fBsystemctl\fR(1)
`

const files = `.TP
.I /etc/shaperd/shaperd.toml
the configuration (\fBshaperd.toml\fR(5))
.TP
.I /etc/shaperd/users.toml
the users, named by daemon.users_file
.TP
.I /run/shaperd/shaperd.sock
the control socket (daemon.socket)
.TP
.I /var/lib/shaperd
state kept across restarts: overrides, quota usage (daemon.state_dir)
.TP
.I /lib/systemd/system/shaperd.service
the systemd unit
`

// shaperdExit is shaperd(8)'s EXIT STATUS.
const shaperdExit = `.TP
.B 0
\-\-check: the configuration is valid; \-\-once, \-\-teardown, \-\-simulate: done;
the daemon: stopped by SIGTERM or SIGINT (the shaping stays in place).
.TP
.B 1
\-\-check: the configuration is invalid (\fIFILE\fR:\fILINE\fR:\fICOL\fR errors on
stderr) or its classifier cannot be used here; \-\-check \-\-diff: the kernel or
state_dir cannot be read; \-\-simulate: the configuration is invalid; the daemon
cannot start (an invalid configuration, another shaperd manages one of the
interfaces, no access to the kernel) or failed; \-\-once: the plan could not be
applied and verified; \-\-teardown: something could not be removed.
.TP
.B 2
a usage error: an unknown flag or one without its value (named with two
dashes, as above), modes that exclude each other, a bad \-\-log\-level,
\-\-log\-format, \-\-demand or \-\-at.
`

// shaperdSignals is shaperd(8)'s SIGNALS.
const shaperdSignals = `.TP
.B SIGHUP
reload the configuration, as \fBshaperctl reload\fR does; an invalid one is refused
(logged) and the old one stays in force. A signal cannot report the refusal:
the unit's ExecReload runs \fBshaperctl reload\fR, which exits 1 on a refusal, so
that \fBsystemctl reload\fR fails.
.TP
.B SIGTERM, SIGINT
stop; the kernel shaping stays in place and the next start adopts it without
touching traffic (\-\-teardown removes it). They also end \-\-once and
\-\-teardown early (exit 1).
`

// shaperctlExit is shaperctl(8)'s EXIT STATUS, with cli's exit codes.
var shaperctlExit = fmt.Sprintf(`.TP
.B %d
the command did what was asked.
.TP
.B %d
an error, printed on stderr: the daemon (or, for the fleet commands, etcd)
refused the request or failed, could not be reached (the fleet commands name
the etcd endpoints they tried), or permission was denied. Also, after printing
what was asked: \fBstatus\fR when an interface is not ok or the router refused
the fleet's shared plan; \fBfleet status\fR when a router is down, refused the
shared plan, is unhealthy or stale; \fBreload\fR when an interface is failed or
degraded after it.
.TP
.B %d
a usage error: an unknown command or flag, a flag without its value, a
missing or extra argument, or a malformed value (a rate without a unit, a
\-\-set, \-\-demand or address that does not parse), whether shaperctl finds it
or the daemon does. Flags are named with two dashes, as in this page.
.PP
With \-\-json, a command that fails also prints one JSON object on stdout,
{"error": MESSAGE, "exit_code": N}, and exits the same. Every \-\-json output
has one shape (rates as integers in bit/s, the keys user, direction and
interface_direction): see docs/json.md.
`, cli.ExitOK, cli.ExitError, cli.ExitUsage)

// shaperctlSignals is shaperctl(8)'s SIGNALS.
const shaperctlSignals = `.TP
.B SIGINT, SIGTERM
end the command: \fBtop\fR quits (exit 0); other commands stop waiting for the
answer (exit 1), and a change the daemon already received may still be
applied: \fBshaperctl status\fR or \fBoverrides\fR shows what is in force.
`

// shaperdPage is shaperd(8) from `shaperd --help`: its first line is the
// synopsis, the rest the description.
func shaperdPage(root string) (manpage.Page, error) {
	help, err := shaperdHelp(root)
	if err != nil {
		return manpage.Page{}, err
	}
	synopsis, rest, _ := strings.Cut(help, "\n")
	synopsis = strings.TrimPrefix(synopsis, "usage: ")
	return manpage.Page{
		Name: "shaperd", Section: "8", Manual: "System Administration",
		Summary: "traffic-shaping daemon for routers",
		Sections: []manpage.Section{
			{Title: "Synopsis", Body: manpage.Text(synopsis)},
			{Title: "Description", Body: manpage.Text(strings.TrimLeft(rest, "\n"))},
			{Title: "Exit status", Body: shaperdExit},
			{Title: "Signals", Body: shaperdSignals},
			{Title: "Files", Body: files},
			{Title: "See also", Body: seeAlsoDaemon},
		},
	}, nil
}

// shaperdHelp runs `shaperd --help` built from root's cmd/shaperd; the
// SHAPERD_BIN environment variable names a built binary to run instead.
func shaperdHelp(root string) (string, error) {
	argv := []string{"go", "run", "./cmd/shaperd", "--help"}
	if bin := os.Getenv("SHAPERD_BIN"); bin != "" {
		argv = []string{bin, "--help"}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	return string(out), nil
}

// shaperctlPage is shaperctl(8) from `shaperctl help` and `shaperctl help
// CMD` for every command.
func shaperctlPage() manpage.Page {
	main := help("")
	first, rest, _ := strings.Cut(main, "\n")
	summary := strings.TrimSuffix(strings.TrimPrefix(first, "shaperctl "), ".")
	var cmds strings.Builder
	for _, name := range cli.HelpTopics() {
		// The global flags are in the description once.
		text, _, _ := strings.Cut(help(name), "\nGlobal flags:\n")
		fmt.Fprintf(&cmds, ".SS %s\n%s", manpage.Escape(name), manpage.Text(text))
	}
	return manpage.Page{
		Name: "shaperctl", Section: "8", Manual: "System Administration",
		Summary: summary,
		Sections: []manpage.Section{
			{Title: "Description", Body: manpage.Text(strings.TrimLeft(rest, "\n"))},
			{Title: "Commands", Body: cmds.String()},
			{Title: "Exit status", Body: shaperctlExit},
			{Title: "Signals", Body: shaperctlSignals},
			{Title: "Environment", Body: ".TP\n.B SHAPERD_SOCKET\nthe control socket when \\-\\-socket is not given\n"},
			{Title: "See also", Body: ".PP\n\\fBshaperd\\fR(8), \\fBshaperd.toml\\fR(5)\n"},
		},
	}
}

// help is the output of `shaperctl help TOPIC` ("" for `shaperctl help`).
func help(topic string) string {
	args := []string{"help"}
	if topic != "" {
		args = append(args, topic)
	}
	var out, errOut bytes.Buffer
	if code := cli.Run(context.Background(), args, &out, &errOut, cli.Env{}); code != cli.ExitOK {
		panic(fmt.Sprintf("shaperctl help %s: exit %d: %s", topic, code, errOut.String()))
	}
	return out.String()
}

// configPage is shaperd.toml(5) from configs/shaperd.toml and
// configs/users.toml.
func configPage(root string) (manpage.Page, error) {
	main, err := os.ReadFile(filepath.Join(root, "configs", "shaperd.toml"))
	if err != nil {
		return manpage.Page{}, err
	}
	users, err := os.ReadFile(filepath.Join(root, "configs", "users.toml"))
	if err != nil {
		return manpage.Page{}, err
	}
	desc, ref := manpage.Config(string(main))
	udesc, uref := manpage.Config(string(users))
	return manpage.Page{
		Name: "shaperd.toml", Section: "5", Manual: "File Formats",
		Summary: "shaperd's configuration: interfaces, tiers and users",
		Sections: []manpage.Section{
			{Title: "Description", Body: desc},
			{Title: "Keys", Body: ref},
			{Title: "Users file", Body: udesc + uref},
			{Title: "Files", Body: files},
			{Title: "See also", Body: ".PP\n\\fBshaperd\\fR(8), \\fBshaperctl\\fR(8)\n"},
		},
	}, nil
}
