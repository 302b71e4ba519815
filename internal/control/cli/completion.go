package cli

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/shaperd/shaperd/internal/control"
)

// completeTimeout bounds the daemon query of one tab press.
const completeTimeout = 2 * time.Second

// fileDirective, as the last line of `shaperctl __complete`, asks the shell
// script to complete file names as well.
const fileDirective = ":file"

func init() {
	commands["completion"] = runCompletion
	commands["__complete"] = runComplete
	commandHelp["completion"] = completionHelp
}

const completionHelp = `Usage: shaperctl completion bash|zsh|fish

Print the shell completion script for shaperctl. Besides commands and
flags it completes user names, tier:NAME and iface:NAME from the running
daemon (read over the socket; nothing when it is not reachable).

  bash   source <(shaperctl completion bash), or save it as
         /usr/share/bash-completion/completions/shaperctl
  zsh    save it as _shaperctl in a directory of $fpath, e.g.
         /usr/share/zsh/vendor-completions/_shaperctl
  fish   save it as ~/.config/fish/completions/shaperctl.fish or
         /usr/share/fish/vendor_completions.d/shaperctl.fish

The Debian package installs all three.
`

func runCompletion(_ context.Context, _ *control.Client, args []string, out io.Writer, _ Env) error {
	fs := newFlagSet("completion")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagError("completion", err)
	}
	if len(pos) != 1 {
		return usagef("completion", "expected one shell: bash, zsh or fish")
	}
	script, ok := completionScripts[pos[0]]
	if !ok {
		return usagef("completion", "no completion for shell %q: bash, zsh or fish", pos[0])
	}
	_, err = io.WriteString(out, script)
	return err
}

// runComplete is the hidden `shaperctl __complete -- WORD... CUR` the
// completion scripts call: it prints the candidates for CUR, the word
// being completed, after the words before it (without "shaperctl"), one a
// line, and ":file" last when file names fit too. It never fails: without
// a daemon it just knows no names.
func runComplete(ctx context.Context, c *control.Client, args []string, out io.Writer, env Env) error {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		args = []string{""}
	}
	words, cur := args[:len(args)-1], args[len(args)-1]
	names := func(socket string) *control.Status {
		cl := c
		if socket != "" {
			cl = control.NewClient(control.SocketPath(socket, env.Getenv))
			defer cl.Close()
		}
		ctx, cancel := context.WithTimeout(ctx, completeTimeout)
		defer cancel()
		st, err := cl.Status(ctx)
		if err != nil {
			return nil
		}
		return st
	}
	cands, files := complete(words, cur, names)
	for _, s := range cands {
		if strings.HasPrefix(s, cur) {
			fmt.Fprintln(out, s)
		}
	}
	if files {
		fmt.Fprintln(out, fileDirective)
	}
	return nil
}

// flagLine is a flag in a help text: "  --ceil RATE   ...", "  -o FILE ...".
var flagLine = regexp.MustCompile(`(?m)^\s+(--?[a-z][a-z-]*)( [A-Z][A-Z|]*)?`)

// commandFlags returns the flags a command's help lists and whether each
// takes a value (a placeholder such as RATE follows it).
func commandFlags(cmd string) map[string]bool {
	flags := map[string]bool{"--help": false, "--socket": true}
	text, _, _ := strings.Cut(commandHelp[cmd], "\nGlobal flags:")
	for _, m := range flagLine.FindAllStringSubmatch(text, -1) {
		flags[m[1]] = m[2] != ""
	}
	return flags
}

// complete returns the candidates for cur after words, and whether file
// names fit. status, when a candidate needs the daemon's names, asks the
// daemon on socket ("" the default) and returns nil when it cannot.
func complete(words []string, cur string, status func(socket string) *control.Status) (cands []string, files bool) {
	var cmd, socket string
	var pos []string
	flags := map[string]bool{"--socket": true, "--help": false, "--version": false}
	valueOf := ""
	for _, w := range words {
		if valueOf != "" {
			if valueOf == "--socket" {
				socket = w
			}
			valueOf = ""
			continue
		}
		if strings.HasPrefix(w, "-") && w != "-" {
			name, val, hasVal := strings.Cut(w, "=")
			name = "--" + strings.TrimLeft(name, "-")
			if name == "--socket" && hasVal {
				socket = val
			}
			if !hasVal && (flags[name] || flags[strings.TrimPrefix(name, "-")]) {
				valueOf = name
			}
			continue
		}
		if cmd == "" {
			cmd = w
			flags = commandFlags(cmd)
			continue
		}
		pos = append(pos, w)
	}
	switch {
	case valueOf != "":
		return flagValues(valueOf)
	case strings.HasPrefix(cur, "-"):
		for f := range flags {
			cands = append(cands, f)
		}
		slices.Sort(cands)
		return cands, false
	case cmd == "":
		return visibleCommands(), false
	}
	n := len(pos)
	switch cmd {
	case "help":
		if n == 0 {
			return visibleCommands(), false
		}
	case "completion":
		if n == 0 {
			return []string{"bash", "fish", "zsh"}, false
		}
	case "fleet":
		if n == 0 {
			return []string{"pull", "push", "status"}, false
		}
	case "import":
		if n == 0 {
			return []string{"csv", "libreqos"}, false
		}
		return nil, n == 1
	case "export":
		if n == 0 {
			return []string{"libreqos"}, false
		}
	case "status", "clear", "set-rate":
		if n == 0 {
			return targets(status(socket)), false
		}
	case "user":
		switch {
		case n == 0:
			return []string{"add", "add-address", "list", "move", "remove", "remove-address", "set-addresses"}, false
		case n == 1 && pos[0] != "add" && pos[0] != "list":
			return userNames(status(socket)), false
		}
	case "node":
		switch {
		case n == 0:
			return []string{"add", "list", "remove"}, false
		case n == 1 && pos[0] == "remove":
			return nodeNames(status(socket)), false
		}
	case "quota":
		switch n {
		case 0:
			return []string{"reset"}, false
		case 1:
			return userNames(status(socket)), false
		}
	}
	return nil, false
}

// flagValues completes the value of flag.
func flagValues(flag string) ([]string, bool) {
	switch flag {
	case "--socket", "--o", "--output", "--config", "--network":
		return nil, true
	case "--tiers":
		return []string{"auto"}, true
	case "--format":
		return []string{"csv", "toml"}, false
	case "--direction":
		return []string{"download", "upload"}, false
	}
	return nil, false
}

// visibleCommands are the commands a person types, sorted.
func visibleCommands() []string {
	var cs []string
	for _, t := range HelpTopics() {
		if !strings.HasPrefix(t, "_") {
			cs = append(cs, t)
		}
	}
	return cs
}

// targets are the user names, tier:NAME, node:NAME and iface:NAME of a
// status.
func targets(st *control.Status) []string {
	if st == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, u := range st.Users {
		add(u.Name)
	}
	for _, i := range st.Interfaces {
		add("iface:" + i.Name)
		for _, t := range i.Tiers {
			add("tier:" + t.Name)
		}
		for _, n := range i.Nodes {
			add("node:" + n.Name)
		}
	}
	for _, u := range st.Users {
		if u.Tier != "" {
			add("tier:" + u.Tier)
		}
	}
	slices.Sort(out)
	return out
}

// userNames are the user names of a status, sorted.
func userNames(st *control.Status) []string {
	if st == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, u := range st.Users {
		if !seen[u.Name] {
			seen[u.Name] = true
			out = append(out, u.Name)
		}
	}
	slices.Sort(out)
	return out
}

// nodeNames are the nodes of st, sorted, each once.
func nodeNames(st *control.Status) []string {
	if st == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, in := range st.Interfaces {
		for _, n := range in.Nodes {
			if !seen[n.Name] {
				seen[n.Name] = true
				out = append(out, n.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}
