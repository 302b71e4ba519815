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
  status     show interfaces, nodes and users: configured, effective and measured rates
  set-rate   change the rates of a user, a tier or an interface at run time
  clear      remove run-time changes; the target returns to its plan
  overrides  list the run-time changes in force: who set them, when, until when
  reload     reread the configuration (refused, old one kept, when invalid)
  top        live per-user (--nodes: per-node) throughput, heaviest first
  quota      quota reset USER: start the user's quota period count again
  user       add, change, remove and list users at run time (DHCP, portals, RADIUS)
  node       add, remove and list nodes (sites, buildings, access points) at run time
  simulate   predict what every user gets (live plan, what-if changes), change nothing
  export     write the plan in force as users.toml or CSV, or LibreQoS's files
  import     write users.toml (and nodes) from LibreQoS's files or a CSV
  completion print the bash, zsh or fish completion script
  fleet      push, pull and watch a fleet's shared plan in etcd (not the socket)
  help       show help for a command: shaperctl help set-rate

Global flags:
  --socket PATH   the control socket (default $SHAPERD_SOCKET, else /run/shaperd/shaperd.sock)

Who may do what (shaperd checks the caller's uid and groups on the socket):
  read     status, top, overrides, simulate, reload --dry-run, export, user list, node list: root, daemon.socket_group and daemon.admin_group
  change   set-rate, clear, reload, quota reset, user add/set-addresses/add-address/remove-address/remove/move, node add/remove: root and daemon.admin_group
Others get "permission denied: set-rate needs the admin group '...'".
The socket file belongs to socket_group (mode 0660) with an ACL entry for
admin_group, so members of either group can connect.

Rates use tc's units: bit kbit mbit gbit tbit, or bps kbps mbps gbps for bytes/s.
Durations use Go syntax: 250ms, 2s, 1h30m.
Exit status: 0 ok, 1 error (also permission denied), 2 usage error (also a
malformed value the daemon finds, as in simulate --set alice=3).
status exits 1 when an interface is not ok, the daemon cannot save its state
or the router refused the fleet's shared plan, fleet status when a router is
not ok, reload when an interface is failed or degraded after it: scripts and
monitoring can rely on it.
`

// commandHelp is each command's help.
var commandHelp = map[string]string{
	"status": `Usage: shaperctl status [USER | tier:NAME | node:NAME | iface:NAME] [--json] [--explain] [--tree [--users N|all]]

Show every managed interface and every user: the configured rate and
ceiling, the effective ones in force now (after schedules, overrides, quotas
and ramps) with the reason, the measured throughput, bytes and drops, and
DELAY: how long the bytes queued in the user's class at the last sample take
to leave it (the leaf's backlog over the rate the class drains at, its
throughput held within its effective rate and ceil; "-" with an empty
queue; queue_delay in JSON).
With a user name, tier:NAME or iface:NAME show only that user, the tier's
users or the interface's users (and the interfaces they are on); node:NAME
(a name or a path, "north/ap-1") shows the node, the nodes behind it and
their users, on the interfaces the node is on.

With nodes ([nodes.NAME]), a NODES table comes before the users, most
loaded first (THROUGHPUT over EFFECTIVE ceil, %CEIL), one row per node and
direction: NODE is its path, RATE/CEIL as configured, EFFECTIVE in force
(after schedules, node overrides, the cap to the parent's ceil, scaled
guarantees and ramps), THROUGHPUT and BYTES of the node's class (every user
behind it), DROPS of the classes behind it, USERS behind it in all and
DIRECT the ones hanging from it; the users table gets a NODE column. In
JSON each interface has "nodes" (name, parent, path, rate, ceil,
effective_rate, effective_ceil, reason, throughput, bytes, drops, users,
total_users, ramp) and each user "node".

--tree draws each interface as a tree instead of the tables: the root
(bandwidth in force, the total throughput of its users), its nodes nested
as configured, siblings most loaded first, and the users under their node
(users of no node under the root), each line with the RATE/CEIL in force,
THROUGHPUT, %CEIL and, for nodes, USERS behind them. To stay readable with
thousands of users, each node and the root list only their heaviest users
(--users N, default 5; 0 none, all every one) and a "... N more users"
line for the rest. With node:NAME the tree is the node's branch.

Each user has one row per direction: DIRECTION is download (an egress
interface) or upload (ingress), DEVICE the device carrying the class (the
IFB device for uploads); in JSON the keys direction and device.
An interface override shows as BANDWIDTH "80mbit (override; plan 300mbit)",
a tier override as "gold 30mbit/40mbit (override; plan 50mbit/100mbit)"; the
tier of the default class (addresses of no user) is marked "(default class)".
The last reload's time and result follow the interfaces.

Exit status: 0 when every interface is ok; 1 when one is not (missing,
pending, failed, degraded), when the daemon cannot save a state file
(state_dir full or read-only: overrides, quota usage or class ids would be
lost at the next restart), or when this fleet router refused the shared
plan: the status is printed all the same, and what is not ok is named on
stderr. A state file found corrupt or unreadable at start is shown but does
not count (the daemon recovered). Scripts and monitoring rely on it.

Flags:
  --json      print the status as JSON (rates as tc strings, "10mbit")
  --explain   add to each user's reason what limits them now ("limited by
              ceil (tier gold)", "parent (interface)", "demand"): the
              simulator on each user's measured rate (see simulate)
  --tree      draw each interface's hierarchy: root > nodes > users (text
              only, not with --json)
  --users N   with --tree, the heaviest users shown under each node and
              the root: a number (default 5; 0: none) or all
`,
	"simulate": `Usage: shaperctl simulate [--demand SPEC] [--set TARGET=RATE[:CEIL]]... [--json]

Predict what every user gets with the daemon's live plan, overrides and
quota usage, the way HTB shares the bandwidth (the same model as
shaperd --simulate; see docs/simulator.md). Nothing changes.

--demand SPEC is a comma list of TARGET=DEMAND, TARGET a user, tier:NAME,
default:IFACE or *, DEMAND max, 0, a rate, or DOWN/UP ("*=max,carol=2mbit").
Without it each user asks for what it got at the last reconcile (max when it
was at its ceiling: it would take more).
--set TARGET=RATE[:CEIL] tries a change without making it ("what if"):
"--set tier:gold=30mbit:40mbit --set alice=5mbit". Repeatable.
--json prints the prediction with rates in bits per second.

With nodes ([nodes.NAME]) each node has a row, "node ap-1 (RATE/CEIL)"
with its class's rates in force, above its branch: its child nodes, then its
users, indented; RATE is what passes through the node (its users' summed),
LIMITED_BY "ceil" when the node holds them back. In JSON "nodes" lists them
(node, parent, path, interface, direction, users, demand_bits_per_second,
bits_per_second, rate_bits_per_second, ceil_bits_per_second, limited_by,
detail) and each user has "node".
`,
	"set-rate": `Usage: shaperctl set-rate TARGET RATE [--ceil RATE] [--direction download|upload] [--ramp DUR] [--for DUR] [--json] [--fleet]

Change the rates of TARGET at run time, until cleared or for a while.
TARGET is a user name, tier:NAME (each user of the tier, and the default
class of interfaces whose default_tier it is), node:NAME (a node of the
network behind the router, [nodes.NAME]: what its users share; only its
class changes, a node's own ramp as any other) or iface:NAME (the
interface's total bandwidth: its root class, or its TBF rate). RATE becomes
both the guaranteed rate and the ceiling, unless --ceil gives a higher ceiling.

Directions: --direction download changes only the download side (egress
interfaces), --direction upload only the upload side (ingress, the IFB
device). iface:NAME/download and iface:NAME/upload do the same for an
interface shaped both ways. Without a direction:
  - a user or tier gets RATE/CEIL on downloads, and on uploads the same
    scaled by its tier's own upload/download ratio (upload_rate/rate for
    the rate, upload_ceil/ceil for the ceiling): on a tier of 50/100mbit
    down and 10/20mbit up, 'set-rate tier:gold 30mbit --ceil 40mbit' gives
    30/40mbit down and 6/8mbit up. A tier without upload rates of its own
    has a ratio of 1: both sides get RATE/CEIL.
  - iface:NAME sets the bandwidth of every interface of that name.
A directed change takes precedence over one for both directions on its
side; a change for both directions replaces the target's directed ones.

RATE and --ceil are at least 8bit and at most the configured bandwidth of
the interfaces the change applies to (uploads checked with the scaled
rates): for iface:NAME every interface of that name, for a user or tier the
smallest shaped (htb) interface of each side. A higher value is refused,
not capped (it is likely a typo such as 1gbps for 1gbit), while a tier's
ceil in the configuration above a smaller interface is capped to it. Rates in bytes/s are echoed
in bits: "rate 1gbps (8gbit) is above lan0's bandwidth 1gbit".
Needs root or daemon.admin_group. Who set it (uid) and when are kept, also
across restarts: see 'shaperctl overrides'.

Flags:
  --ceil RATE          the most the target may borrow up to; at least RATE
  --direction DIR      download or upload (default: both, see above)
  --ramp DUR           how long the change takes; 0s changes at once, at
                       most 24h (default: the policy's ramp from shaperd.toml)
  --for DUR            undo the change after DUR, at most 8760h (a year)
                       (default: until 'shaperctl clear')
  --json               print the daemon's answer as JSON
  --fleet              a fleet-wide change kept in etcd for every router, in
                       any position; it talks to etcd, not to a daemon's
                       socket, so --socket is refused (see 'shaperctl help fleet')

Examples:
  shaperctl set-rate alice 3mbit
  shaperctl set-rate alice 5mbit --direction download
  shaperctl set-rate tier:gold 20mbit --ceil 50mbit --for 2h
  shaperctl set-rate iface:lan0 100mbit --ramp 0s
  shaperctl set-rate iface:lan0/upload 40mbit
`,
	"clear": `Usage: shaperctl clear TARGET [--direction download|upload] [--json]

Remove the run-time changes (set-rate) of TARGET: a user name, tier:NAME,
node:NAME or iface:NAME (iface:NAME/download, iface:NAME/upload). The target returns to
its plan, smoothly (the policy's ramp). Without --direction every change of
the target goes; with it only the change set for that direction (a change
set for both directions stays: clear it without --direction).
A target with nothing set is not an error: clear says so and exits 0.
Needs root or daemon.admin_group.

Flags:
  --json   print the result as JSON: {"target": ..., "cleared": true}
  --fleet  remove fleet-wide changes from etcd instead (see 'shaperctl help fleet')
`,
	"overrides": `Usage: shaperctl overrides [--json]

List every run-time change (set-rate) in force: TARGET, DIRECTION
(download, upload or both), RATE, CEIL, RAMP (default: the policy's),
UNTIL (cleared: until 'shaperctl clear'), SET BY (the uid of the caller,
from the socket's peer credentials), SET AT and SOURCE: local (this
router's set-rate) or fleet (set-rate --fleet; "fleet (local wins)" when
a local override of the same target and direction replaces it here).
Local overrides and who set them survive restarts
(daemon.state_dir/overrides.json); fleet overrides live in etcd.
`,
	"quota": `Usage: shaperctl quota reset USER [--json]
       shaperctl quota reset USER --fleet [--config FILE] [--endpoints URLS] [--prefix P] [--json]

Set USER's quota usage of the current period to zero: a user over quota
gets the plan back at once (logged as a quota_restored event). Only bytes
after the reset count. Needs root or daemon.admin_group.
In a fleet a router's reset forgets that router's share of the usage
only; with --fleet the reset goes to the fleet's etcd and every router
applies it (see shaperctl help fleet).
Each user's usage is also in the metrics: shaperd_quota_used_bytes.
`,
	"node": `Usage: shaperctl node add NAME --rate R [--ceil C] [--upload-rate R] [--upload-ceil C]
                          [--parent NODE] [--interface IFACE]... [--json]
       shaperctl node remove NAME [--json]
       shaperctl node list [--json]

Nodes (a site, a building, an access point: the network behind the
router) added and removed at run time, without editing the configuration.
A node added here is checked as a [nodes.NAME] table is: the name rule, a
name no node has, a known parent (name or path), at most 6 node levels,
a ceil not below the rate, interfaces that are HTB [[interface]]s its
parent is on. A refused change changes nothing (exit 1). An accepted one is
saved in daemon.state_dir/nodes.json (it survives restarts and reloads;
a node the configuration later names is the configuration's) and makes or
deletes only that node's class when nothing else moves: a node whose
ceil is above its parent's (capped) or whose guarantee oversubscribes
its parent re-evaluates every class instead.

Put users behind a new node with 'shaperctl user move NAME NODE' (run-time
users) or their node key in users.toml; 'shaperctl set-rate node:NAME'
changes its rates for a while.

  add      a new node, empty; its class hangs from its parent's (or the
           interface's root class for a top-level node)
  remove   a run-time node that no users and no nodes are behind
           (nodes of the configuration are removed there, then reload)
  list     every node, parents first, with its rates and its source:
           where the configuration writes it, or runtime

Flags:
  --rate RATE         the node's download rate (add; required)
  --ceil RATE         its download ceiling (default: the rate)
  --upload-rate RATE  its upload rate (default: the rate)
  --upload-ceil RATE  its upload ceiling (default: the larger of the ceil and the upload rate)
  --parent NODE       the node it is behind (default: none, a top-level node)
  --interface IFACE   an interface it is on, repeatable (default: its
                      parent's; for a top-level node every HTB interface)
  --json              print the answer as JSON
`,
	"user": `Usage: shaperctl user add NAME --tier TIER [--node NODE] [--address A]... [--rate R] [--ceil C] [--json]
       shaperctl user set-addresses NAME A... [--json]
       shaperctl user add-address NAME A [--for DUR] [--json]
       shaperctl user remove-address NAME A [--json]
       shaperctl user remove NAME [--json]
       shaperctl user move NAME NODE|none [--json]
       shaperctl user list [--json]

Users that come and go at run time (DHCP leases, captive portals, RADIUS),
without editing users.toml. Each change is checked as users.toml is: the
name rule, a known tier, addresses that are IPs or CIDR prefixes without
host bits, no address that overlaps another user's (the other user is
named), rates the interfaces can hold. A refused change changes nothing
(exit 1). An accepted one is saved in daemon.state_dir/users.json (it
survives restarts and reloads) and changes that user's classes and filters.

  add             a new user; --address may repeat, or come later
  set-addresses   replace all of the user's addresses
  add-address     one more address; --for DUR (a lease time, e.g. 1h) ends it
                  by itself; adding an address the user has renews its end
  remove-address  one address less
  remove          the user and its classes
  move            put the user behind another node ([nodes.NAME], by name or
                  path; "none": behind no node): its class moves under the
                  node's (made again there: HTB cannot move a class), its
                  filters follow, nothing else changes
  list            every user with its node and its source: users.toml or runtime

Flags:
  --tier TIER      the new user's tier (add)
  --address A      an address of the new user, repeatable (add)
  --rate RATE      the new user's own rate, replacing the tier's (add)
  --ceil RATE      the new user's own ceiling (add)
  --node NODE      the node the new user is behind (add)
  --for DUR        the address ends by itself after DUR (add-address)
  --json           print the answer as JSON

Only run-time users can be changed here; users.toml's are changed in the
file. When a reload finds a run-time user's name in users.toml, the file
wins: the run-time entry is dropped (logged). status shows each user's
source. add, set-addresses, add-address, remove-address and remove need
root or daemon.admin_group; list needs the read role.
`,
	"reload": `Usage: shaperctl reload [--allow-removals] [--dry-run] [--json]

Reread shaperd.toml and users.toml. An invalid configuration is refused and
its errors listed (file:line:col: message); the old one stays in force
(exit 1). A valid one is applied and the answer is what the daemon applied:
the result and each interface that is not ok after it. Exit 1 also when an
interface is then failed or degraded (missing ones are waited for and do not
count). Like SIGHUP to shaperd, which answers nobody. status shows the last
reload's time and result. Needs root or daemon.admin_group.

A reload that would remove more of the users in force than
daemon.max_reload_removals allows (default "50%", and always more than two),
or every user, is refused the same way, naming how many users would go: an
emptied or truncated users.toml must not drop everyone into the default
class. --allow-removals confirms such a reload. SIGHUP cannot confirm: use
shaperctl reload --allow-removals. Quota usage of removed users is kept for
their current period and counts again when the same name comes back.

--dry-run changes nothing: it validates the configuration files and prints
what reloading them would do with the overrides and quota usage in force:
the kernel changes (each one) and every user whose class changes, before ->
after, with the rate the simulator predicts when every class is busy
(like shaperd --check --diff). The read role may ask.
`,
	"top": `Usage: shaperctl top [--interval DUR] [--iterations N] [--once] [--json] [--sort KEY] [--nodes]

Show per-user throughput, heaviest first, refreshed every second, like top,
one row per user and direction (DIRECTION, DEVICE), with the queue DELAY of
each user's class (as in status). --sort delay puts the longest queues
first, drops the most drops, name A first. Press q or Ctrl-C to
quit. When the output is not a terminal, print one plain snapshot per
refresh instead.

--nodes shows the nodes ([nodes.NAME]) instead of the users, most loaded
first: THROUGHPUT of the node's class (every user behind it) over its CEIL
in force (%CEIL), USERS behind it, BYTES and DROPS; the header's total is
the top-level nodes' throughput.

Each refresh asks the daemon to read the kernel's counters afresh: it dumps
the classes of each interface (there is no lighter class-stats request yet),
at most once per 200ms however many tops run. THROUGHPUT is over the time
since the previous read.

Flags:
  --interval DUR    time between refreshes (default 1s)
  --iterations N    stop after N refreshes (default 0: until quit)
  --once            print one plain snapshot and exit (same as
                    --iterations 1, never redrawing the terminal)
  --json            print each snapshot as one line of JSON: generated,
                    total and the users, heaviest first (rates as tc
                    strings, as in status --json); with --nodes, "nodes"
                    instead of "users", each node as in status --json with
                    its interface, direction and device
  --sort KEY        order the users by throughput (default), delay, drops
                    or name (--json too); --nodes takes throughput only
  --nodes           show the nodes, most loaded first, instead of the users
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
