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
