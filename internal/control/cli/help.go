package cli

import (
	"fmt"
	"io"
)

// mainUsage is shaperctl's help.
const mainUsage = `shaperctl controls a running shaperd over its control socket.

Usage:
  shaperctl [--socket PATH] COMMAND [ARGS] [FLAGS]

Commands:
  status     show interfaces and users: configured, effective and measured rates
  set-rate   change the rates of a user, a tier or an interface at run time
  clear      remove run-time changes; the target returns to its plan
  reload     reread the configuration (refused, old one kept, when invalid)
  top        live per-user throughput, heaviest first
  export     write the plan in force as users.toml or CSV
  import     write users.toml from LibreQoS's ShapedDevices.csv or a CSV
  completion print the bash, zsh or fish completion script
  help       show help for a command: shaperctl help set-rate

Global flags:
  --socket PATH   the control socket (default $SHAPERD_SOCKET, else /run/shaperd/shaperd.sock)

Who may do what (shaperd checks the caller's uid and groups on the socket):
  read     status, top, export: root, daemon.socket_group and daemon.admin_group
  change   set-rate, clear, reload: root and daemon.admin_group
Others get "permission denied: set-rate needs the admin group '...'".
The socket file belongs to socket_group (mode 0660) with an ACL entry for
admin_group, so members of either group can connect.

Rates use tc's units: bit kbit mbit gbit tbit, or bps kbps mbps gbps for bytes/s.
Durations use Go syntax: 250ms, 2s, 1h30m.
Exit status: 0 ok, 1 error (also permission denied), 2 usage error.
`

// commandHelp is each command's help.
var commandHelp = map[string]string{
	"status": `Usage: shaperctl status [USER | tier:NAME | iface:NAME] [--json]

Show every managed interface and every user: the configured rate and
ceiling, the effective ones in force now (after schedules, overrides, quotas
and ramps) with the reason, the measured throughput, bytes and drops.
With a user name, tier:NAME or iface:NAME show only that user, the tier's
users or the interface's users (and the interfaces they are on).

Flags:
  --json   print the status as JSON (rates as tc strings, "10mbit")
`,
	"set-rate": `Usage: shaperctl set-rate TARGET RATE [--ceil RATE] [--ramp DUR] [--for DUR] [--json]

Change the rates of TARGET at run time, until cleared or for a while.
TARGET is a user name, tier:NAME (each user of the tier) or iface:NAME (the
interface's total bandwidth: its root class, or its TBF rate). RATE becomes
both the guaranteed rate and the ceiling, unless --ceil gives a higher ceiling.

RATE and --ceil are at least 8bit and at most the configured bandwidth of
the target's interfaces: for iface:NAME every interface of that name (both
directions), for a user or tier the smallest shaped (htb) interface, since
the change applies to downloads and uploads alike. Rates in bytes/s are
echoed in bits: "rate 1gbps (8gbit) is above lan0's bandwidth 1gbit".
Needs root or daemon.admin_group.

Flags:
  --ceil RATE   the most the target may borrow up to; at least RATE
  --ramp DUR    how long the change takes; 0s changes at once
                (default: the policy's ramp from shaperd.toml)
  --for DUR     undo the change after DUR (default: until 'shaperctl clear')
  --json        print the daemon's answer as JSON

Examples:
  shaperctl set-rate alice 3mbit
  shaperctl set-rate tier:gold 20mbit --ceil 50mbit --for 2h
  shaperctl set-rate iface:lan0 100mbit --ramp 0s
`,
	"clear": `Usage: shaperctl clear TARGET [--json]

Remove the run-time changes (set-rate) of TARGET: a user name, tier:NAME or
iface:NAME. The target returns to its plan, smoothly (the policy's ramp).
Needs root or daemon.admin_group.

Flags:
  --json   print the result as JSON: {"target": ..., "cleared": true}
`,
	"reload": `Usage: shaperctl reload [--json]

Reread shaperd.toml and users.toml. An invalid configuration is refused and
its errors listed (file:line:col: message); the old one stays in force.
Same as sending SIGHUP to shaperd. Needs root or daemon.admin_group.

Flags:
  --json   print the result as JSON: {"reloaded": true}
`,
	"top": `Usage: shaperctl top [--interval DUR] [--iterations N] [--once] [--json]

Show per-user throughput, heaviest first, refreshed every second, like top.
Press q or Ctrl-C to quit. When the output is not a terminal, print one
plain snapshot per refresh instead.

Flags:
  --interval DUR    time between refreshes (default 1s)
  --iterations N    stop after N refreshes (default 0: until quit)
  --once            print one plain snapshot and exit (same as
                    --iterations 1, never redrawing the terminal)
  --json            print each snapshot as one line of JSON: generated,
                    total and the users, heaviest first (rates as tc
                    strings, as in status --json)
`,
	"help": `Usage: shaperctl help [COMMAND]

Show help for shaperctl or for one command.
`,
}

// printHelp writes the help of cmd ("" for shaperctl) to w.
func printHelp(w io.Writer, cmd string) {
	if h, ok := commandHelp[cmd]; ok {
		fmt.Fprint(w, h)
		fmt.Fprint(w, "\nGlobal flags:\n  --socket PATH   the control socket (default $SHAPERD_SOCKET, else /run/shaperd/shaperd.sock)\n")
		return
	}
	fmt.Fprint(w, mainUsage)
}
