// Package fleetcli is shaperctl's fleet commands: `fleet push|pull|status`
// and `set-rate ... --fleet` / `clear ... --fleet`. They talk to etcd
// directly (fleet.* of the configuration), not to a daemon's socket.
package fleetcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/shaperd/shaperd/internal/control/jsonout"
	"github.com/shaperd/shaperd/internal/fleet"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/policy"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// DefaultConfig is the configuration whose [fleet] table says where etcd
// is, unless --config or SHAPERD_CONFIG says otherwise.
const DefaultConfig = "/etc/shaperd/shaperd.toml"

// Exit codes, as shaperctl's.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// Env is what the commands need from the process.
type Env struct {
	// Check validates a configuration file like `shaperd --check`
	// (offline.File); nil: config.Check only.
	Check func(path string) []config.Error
	// Getenv reads SHAPERD_CONFIG; nil: none.
	Getenv func(string) string
}

// EndpointsEnv names the environment variable with the etcd endpoints
// when --endpoints is not given (comma-separated, as --endpoints).
const EndpointsEnv = "SHAPERD_ETCD_ENDPOINTS"

// Help is `shaperctl help fleet`.
const Help = `Usage: shaperctl fleet push|pull|status [FLAGS]

Fleet commands (and set-rate or clear with --fleet) talk to the fleet's
etcd, never to a daemon's socket: --socket does not apply and is refused.
Where etcd is: --endpoints, else $SHAPERD_ETCD_ENDPOINTS, else fleet.endpoints
of the [fleet] table of --config FILE (default $SHAPERD_CONFIG, else
/etc/shaperd/shaperd.toml, a router's own configuration). The other [fleet]
keys of that file (prefix, TLS, user name) apply when it has the table.

  shaperctl fleet push --config FILE [--endpoints URLS] [--diff] [--json]
      check FILE and its users file as shaperd --check does and write their
      [policy], [tiers] and users to etcd in one transaction (a new revision);
      an invalid plan prints FILE:LINE:COL errors and writes nothing. FILE
      needs no [fleet] table when --endpoints or $SHAPERD_ETCD_ENDPOINTS
      says where etcd is. A tier's ceil above a router's bandwidth is capped
      to it there (shaperd --check notes it), not refused.
      --diff prints what would change (+/-/~ tier, user, policy) and writes nothing.
  shaperctl fleet pull [--config FILE] [--endpoints URLS] [--json]
      print the shared plan in etcd as TOML.
  shaperctl fleet status [--config FILE] [--endpoints URLS] [--json]
      every router that registered: alive or not, plan revision in force,
      health, version, errors (a refused revision and why). Exits 1 when a
      router is down (its registration lease is gone), refused the shared
      plan, reports interfaces not shaped as planned, or is stale (an older
      revision in force more than a minute after the push).
  shaperctl set-rate TARGET RATE --fleet [--ceil R] [--ramp D] [--for D] [--direction download|upload]
      a fleet-wide override, applied by every router (a local override of
      the same target wins on its router); --for expires it (an etcd lease).
  shaperctl clear TARGET --fleet [--direction download|upload]
      remove fleet overrides of TARGET.
  shaperctl quota reset USER --fleet
      start USER's quota period count again on every router (a reset
      without --fleet forgets one router's share only): the fleet's usage
      keys of USER go at once and every router, also one down or cut off
      now, applies the reset once when it reads it.

Flags (every fleet command):
  --config FILE        the file whose [fleet] table says where etcd is (for
                       push also the plan to push)
  --endpoints URLS     etcd client URLs, comma-separated as etcdctl takes them
                       (http://10.0.0.5:2379,https://etcd2:2379; a bare
                       HOST:PORT means http://)
  --prefix PREFIX      the fleet's key prefix (default: fleet.prefix of --config,
                       else /shaperd)
  --json               print the result as JSON
`

// IsFleet reports whether args (shaperctl's, without the program name)
// are a fleet command: `fleet ...`, or set-rate/clear with --fleet,
// after any global flags (--socket PATH).
func IsFleet(args []string) bool {
	_, args = leadingSocket(args)
	if len(args) == 0 {
		return false
	}
	switch args[0] {
	case "fleet":
		return true
	case "help":
		return len(args) == 2 && args[1] == "fleet"
	case "set-rate", "clear", "quota":
		return slices.ContainsFunc(args[1:], func(a string) bool { return a == "--fleet" || a == "-fleet" || a == "--fleet=true" })
	}
	return false
}

// leadingSocket splits shaperctl's global --socket flag (--socket PATH,
// --socket=PATH, one dash or two) off the front of args, as shaperctl
// takes it before the command; socket is "" when there is none.
func leadingSocket(args []string) (socket string, rest []string) {
	for len(args) > 0 {
		a := args[0]
		switch {
		case (a == "--socket" || a == "-socket") && len(args) > 1:
			socket, args = "--socket "+args[1], args[2:]
		case strings.HasPrefix(a, "--socket="), strings.HasPrefix(a, "-socket="):
			socket, args = a, args[1:]
		default:
			return socket, args
		}
	}
	return socket, args
}

// errSocket refuses --socket with a fleet command.
func errSocket(cmd string) error {
	return usageErr(fmt.Sprintf("%s talks to the fleet's etcd, not to a daemon's socket: --socket does not apply "+
		"(say where etcd is with --endpoints URLS, $%s or --config FILE with a [fleet] table; see 'shaperctl help fleet')", cmd, EndpointsEnv))
}

// Run runs a fleet command (IsFleet(args)) and returns the exit code.
//
// With --json a failing command also prints one JSON object on stdout,
// {"error": ..., "exit_code": N} (docs/json.md), unless it printed its
// result already (fleet status of an unhealthy fleet).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, env Env) int {
	var err error
	jsonArgs := args
	tracked := &jsonout.Tracker{W: stdout}
	stdout = tracked
	socket, args := leadingSocket(args)
	switch {
	case len(args) == 0:
		err = usageErr("usage: shaperctl fleet push|pull|status [--config FILE] ...")
	case socket != "" && args[0] != "help":
		name := args[0]
		if name == "fleet" && len(args) > 1 {
			name += " " + args[1]
		} else if name != "fleet" {
			name += " --fleet"
		}
		err = errSocket(name)
	case args[0] == "help" || len(args) == 1 || args[1] == "help" || args[1] == "--help" || args[1] == "-h":
		fmt.Fprint(stdout, Help)
		return ExitOK
	case args[0] == "fleet" && len(args) > 1 && args[1] == "push":
		err = push(ctx, args[2:], stdout, env)
	case args[0] == "fleet" && len(args) > 1 && args[1] == "pull":
		err = pull(ctx, args[2:], stdout, env)
	case args[0] == "fleet" && len(args) > 1 && args[1] == "status":
		err = status(ctx, args[2:], stdout, env)
	case args[0] == "set-rate":
		err = setRate(ctx, args[1:], stdout, env)
	case args[0] == "clear":
		err = clearFleet(ctx, args[1:], stdout, env)
	case args[0] == "quota":
		err = quotaResetFleet(ctx, args[1:], stdout, env)
	default:
		err = usageErr("usage: shaperctl fleet push|pull|status [--config FILE] ...")
	}
	code := report(err, stderr)
	if err != nil && !tracked.Wrote && jsonout.Requested(jsonArgs) {
		writeError(tracked.W, err, code)
	}
	return code
}

// report writes err on stderr and returns the exit code for it.
func report(err error, stderr io.Writer) int {
	var ue usageErr
	var ce checkErr
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "shaperctl: %s\n", DoubleDash(err.Error()))
		return ExitUsage
	case errors.As(err, &ce):
		for _, l := range ce {
			fmt.Fprintln(stderr, l)
		}
		fmt.Fprintf(stderr, "shaperctl: the plan is invalid; nothing was written\n")
		return ExitError
	default:
		fmt.Fprintf(stderr, "shaperctl: %v\n", err)
		return ExitError
	}
}

type usageErr string

// flagName is a flag as the flag package's errors name it, with one dash.
var flagName = regexp.MustCompile(`(defined: |argument: |for flag |value "[^"]*" for )-([A-Za-z][A-Za-z0-9-]*)`)

// DoubleDash rewrites the flag package's error message msg to name flags
// the way shaperctl's and shaperd's help and man pages write them: with two
// dashes ("flag provided but not defined: --yaml", not "-yaml").
func DoubleDash(msg string) string {
	return flagName.ReplaceAllString(msg, "${1}--${2}")
}

func (e usageErr) Error() string { return string(e) }

// checkErr is the FILE:LINE:COL lines of an invalid plan.
type checkErr []string

func (e checkErr) Error() string { return strings.Join(e, "\n") }

// flags is what every fleet command accepts.
type flags struct {
	fs        *flag.FlagSet
	config    *string
	endpoints *string
	prefix    *string
	socket    *string
	asJSON    *bool
	rest      []string
	getenv    func(string) string
}

func newFlags(name string, env Env) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	getenv := env.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	def := DefaultConfig
	if getenv("SHAPERD_CONFIG") != "" {
		def = getenv("SHAPERD_CONFIG")
	}
	f := &flags{fs: fs, config: fs.String("config", def, ""), asJSON: fs.Bool("json", false, ""),
		endpoints: fs.String("endpoints", "", ""), prefix: fs.String("prefix", "", ""),
		socket: fs.String("socket", "", ""), getenv: getenv}
	fs.Bool("fleet", true, "")
	return f
}

// parse parses flags anywhere among the positional arguments.
func (f *flags) parse(args []string) error {
	for len(args) > 0 {
		if err := f.fs.Parse(args); err != nil {
			return usageErr(fmt.Sprintf("%s: %v", f.fs.Name(), err))
		}
		args = f.fs.Args()
		if len(args) > 0 {
			f.rest = append(f.rest, args[0])
			args = args[1:]
		}
	}
	if *f.socket != "" {
		name := f.fs.Name()
		if name == "set-rate" || name == "clear" || name == "quota reset" {
			name += " --fleet"
		}
		return errSocket(name)
	}
	return nil
}

// fleetConfig says where etcd is: --endpoints, else $SHAPERD_ETCD_ENDPOINTS,
// else fleet.endpoints of --config; the other [fleet] keys of --config
// (prefix, TLS, authentication) apply when it has the table, --prefix
// wins over its prefix.
func (f *flags) fleetConfig() (*config.Fleet, error) {
	eps, from := *f.endpoints, "--endpoints"
	if eps == "" {
		eps, from = f.getenv(EndpointsEnv), "$"+EndpointsEnv
	}
	fc, err := config.LoadFleet(*f.config)
	switch {
	case eps == "" && err != nil:
		return nil, fmt.Errorf("reading where the fleet's etcd is: %w (or give --endpoints URLS)", err)
	case eps == "" && fc == nil:
		return nil, fmt.Errorf("%s has no [fleet] table saying where the fleet's etcd is: give --endpoints URLS (or $%s), or --config FILE with a [fleet] table", *f.config, EndpointsEnv)
	case eps != "" && err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("reading the [fleet] table of %s: %w", *f.config, err)
	}
	if eps != "" {
		list, err := config.ParseEndpoints(eps)
		if err != nil {
			return nil, usageErr(fmt.Sprintf("%s: %v", from, err))
		}
		if fc == nil {
			fc = &config.Fleet{Prefix: config.DefaultFleetPrefix, DialTimeout: config.DefaultFleetDialTimeout}
		}
		fc.Endpoints = list
	}
	if *f.prefix != "" {
		if err := config.CheckFleetPrefix(*f.prefix); err != nil {
			return nil, usageErr("--prefix: " + err.Error())
		}
		fc.Prefix = *f.prefix
	}
	return fc, nil
}

// session is one command's connection to the fleet's etcd: the client
// (fleet.Client, etcd's gRPC API without clientv3), the [fleet] settings
// it was made from (endpoints, prefix, dial timeout) and the context of
// its requests, which ends the dial timeout plus 5 s after connecting.
type session struct {
	c      *fleet.Client
	fc     *config.Fleet
	ctx    context.Context
	cancel context.CancelFunc
}

// connect finds where etcd is (fleetConfig), connects and starts the
// requests' time; the caller closes the session.
func (f *flags) connect(ctx context.Context) (*session, error) {
	fc, err := f.fleetConfig()
	if err != nil {
		return nil, err
	}
	c, err := fleet.Dial(fc)
	if err != nil {
		return nil, etcdErr(fc, err)
	}
	tctx, cancel := context.WithTimeout(ctx, fc.DialTimeout+5*time.Second)
	return &session{c: c, fc: fc, ctx: tctx, cancel: cancel}, nil
}

// close ends the requests' context and the connection.
func (s *session) close() {
	s.cancel()
	s.c.Close()
}

// pull returns the shared plan in etcd, nil when none was pushed.
func (s *session) pull() (*fleet.Plan, error) {
	p, err := fleet.Pull(s.ctx, s.c, s.fc.Prefix)
	if err != nil {
		return nil, etcdErr(s.fc, err)
	}
	return p, nil
}

func push(ctx context.Context, args []string, out io.Writer, env Env) error {
	f := newFlags("fleet push", env)
	diff := f.fs.Bool("diff", false, "")
	if err := f.parse(args); err != nil {
		return err
	}
	if len(f.rest) != 0 {
		return usageErr("fleet push takes no arguments: shaperctl fleet push --config FILE")
	}
	path := *f.config
	check := env.Check
	if check == nil {
		check = config.Check
	}
	if errs := check(path); len(errs) > 0 {
		return checkErr(config.FormatErrors(errs, config.MaxPrinted))
	}
	sh, err := config.ExtractShared(path)
	if err != nil {
		return err
	}
	plan, err := config.LoadShared(path, sh) // what every router will load
	if err != nil {
		return fmt.Errorf("the shared part of %s does not load on its own: %w", path, err)
	}
	s, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	fc := s.fc
	if *diff {
		cur, err := s.pull()
		if err != nil {
			return err
		}
		var old *config.Plan
		rev := int64(0)
		if cur != nil {
			rev = cur.Revision
			if old, err = config.LoadShared(path, cur.SharedFor()); err != nil {
				old = nil // the plan in etcd is invalid here: everything is new
			}
		}
		lines := planDiff(old, plan)
		if *f.asJSON {
			if lines == nil {
				lines = []string{}
			}
			return writeJSON(out, pushDiffJSON{Revision: rev, Changes: lines})
		}
		fmt.Fprintf(out, "changes from revision %d in %s (nothing written; push without --diff to write):\n", rev, fc.Prefix)
		for _, l := range lines {
			fmt.Fprintln(out, l)
		}
		if len(lines) == 0 {
			fmt.Fprintln(out, "no change")
		}
		return nil
	}
	meta := fleet.Meta{PushedAt: time.Now().UTC(), Source: path, UsersSource: sh.UsersName, PushedBy: pusher()}
	rev, err := fleet.Push(s.ctx, s.c, fc.Prefix, sh, meta)
	if err != nil {
		return etcdErr(fc, err)
	}
	if *f.asJSON {
		return writeJSON(out, pushJSON{Revision: rev, Prefix: fc.Prefix, TierCount: len(plan.Tiers), UserCount: len(plan.Users)})
	}
	fmt.Fprintf(out, "pushed revision %d to %s: %d tiers, %d users\n", rev, fc.Prefix, len(plan.Tiers), len(plan.Users))
	return nil
}

func pull(ctx context.Context, args []string, out io.Writer, env Env) error {
	f := newFlags("fleet pull", env)
	if err := f.parse(args); err != nil {
		return err
	}
	s, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	fc := s.fc
	p, err := s.pull()
	if err != nil {
		return err
	}
	if p == nil {
		return fmt.Errorf("no plan was pushed under %s", fc.Prefix)
	}
	if *f.asJSON {
		return writeJSON(out, newPullJSON(fc.Prefix, p))
	}
	fmt.Fprintf(out, "# shaperd fleet plan: %s revision %d", fc.Prefix, p.Revision)
	if p.Meta.PushedBy != "" {
		fmt.Fprintf(out, ", pushed by %s", p.Meta.PushedBy)
	}
	if !p.Meta.PushedAt.IsZero() {
		fmt.Fprintf(out, " at %s", p.Meta.PushedAt.Format(time.RFC3339))
	}
	if p.Meta.Source != "" {
		fmt.Fprintf(out, " from %s", p.Meta.Source)
	}
	fmt.Fprintf(out, "\n# [policy] and [tiers]:\n%s\n# users:\n%s", strings.TrimRight(string(p.Shared.Main), "\n"), p.Shared.Users)
	return nil
}

// status is `fleet status`: the plan in etcd and every router that
// registered, with what is wrong with each (fleet.Registration.Check). It
// returns an error naming the routers that are not healthy (exit 1), after
// printing everything.
func status(ctx context.Context, args []string, out io.Writer, env Env) error {
	f := newFlags("fleet status", env)
	if err := f.parse(args); err != nil {
		return err
	}
	s, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	fc := s.fc
	p, err := s.pull()
	if err != nil {
		return err
	}
	rs, err := fleet.Routers(s.ctx, s.c, fc.Prefix)
	if err != nil {
		return etcdErr(fc, err)
	}
	ovs, problems, err := fleet.Overrides(s.ctx, s.c, fc.Prefix)
	if err != nil {
		return etcdErr(fc, err)
	}
	var rev int64
	if p != nil {
		rev = p.Revision
	}
	now := time.Now()
	var bad []string
	for i := range rs {
		rs[i].Problems = rs[i].Check(p, now)
		for _, pr := range rs[i].Problems {
			bad = append(bad, rs[i].Router+" "+pr)
		}
	}
	health := "ok"
	if len(bad) > 0 {
		health = "not ok"
	}
	var unhealthy error
	if len(bad) > 0 {
		unhealthy = fmt.Errorf("fleet %s: %d of %d routers not ok: %s", fc.Prefix, countNotOK(rs), len(rs), strings.Join(bad, "; "))
	}
	if *f.asJSON {
		if rs == nil {
			rs = []fleet.Registration{}
		}
		if err := writeJSON(out, statusJSON{Prefix: fc.Prefix, Revision: rev, Health: health, Routers: rs,
			OverrideCount: len(ovs), OverrideProblems: problems}); err != nil {
			return err
		}
		return unhealthy
	}
	fmt.Fprintf(out, "fleet %s: plan revision %d, %d fleet overrides\n", fc.Prefix, rev, len(ovs))
	for _, pr := range problems {
		fmt.Fprintf(out, "  unreadable override: %s\n", pr)
	}
	tw := tabwriter.NewWriter(out, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ROUTER\tALIVE\tREVISION\tHEALTH\tVERSION\tUPDATED")
	for _, r := range rs {
		alive := "no"
		if r.Alive {
			alive = "yes"
		}
		revs := fmt.Sprint(r.Revision)
		if r.Revision != rev && rev != 0 {
			revs += " (behind)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Router, alive, revs, healthText(r), r.Version, r.Updated.Format(time.RFC3339))
	}
	tw.Flush()
	for _, r := range rs {
		for _, pr := range r.Problems {
			fmt.Fprintf(out, "%s: %s\n", r.Router, pr)
		}
		for _, e := range r.Errors {
			fmt.Fprintf(out, "  %s: %s\n", r.Router, e)
		}
	}
	return unhealthy
}

// healthText is the HEALTH column: the router's own word when nothing is
// wrong, else the kinds of its problems in capitals (DOWN, REFUSED,
// UNHEALTHY, STALE).
func healthText(r fleet.Registration) string {
	if len(r.Problems) == 0 {
		return r.Health
	}
	kinds := make([]string, len(r.Problems))
	for i, p := range r.Problems {
		kind, _, _ := strings.Cut(p, ":")
		kinds[i] = strings.ToUpper(kind)
	}
	return strings.Join(kinds, ",")
}

// countNotOK counts the routers with problems.
func countNotOK(rs []fleet.Registration) int {
	n := 0
	for _, r := range rs {
		if len(r.Problems) > 0 {
			n++
		}
	}
	return n
}

// etcdErr names the etcd endpoints a failed request went to (a bare
// "context deadline exceeded" does not say where it tried).
func etcdErr(fc *config.Fleet, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("etcd %s: %w", strings.Join(fc.Endpoints, ","), err)
}

// planNames returns the tiers and users of the current plan, to check an
// override's target; nil maps when no plan was pushed.
func planNames(p *fleet.Plan) (tiers, users map[string]bool) {
	if p == nil {
		return nil, nil
	}
	var m struct {
		Tiers map[string]any `toml:"tiers"`
	}
	var u struct {
		User []struct {
			Name string `toml:"name"`
		} `toml:"user"`
	}
	_, _ = toml.Decode(string(p.Shared.Main), &m)
	_, _ = toml.Decode(string(p.Shared.Users), &u)
	tiers, users = map[string]bool{}, map[string]bool{}
	for t := range m.Tiers {
		tiers[t] = true
	}
	for _, x := range u.User {
		users[x.Name] = true
	}
	return tiers, users
}

func setRate(ctx context.Context, args []string, out io.Writer, env Env) error {
	f := newFlags("set-rate", env)
	ceilS := f.fs.String("ceil", "", "")
	rampS := f.fs.String("ramp", "", "")
	forS := f.fs.String("for", "", "")
	dirS := f.fs.String("direction", "", "")
	if err := f.parse(args); err != nil {
		return err
	}
	if len(f.rest) != 2 {
		return usageErr("set-rate --fleet: expected TARGET and RATE")
	}
	t, err := policy.ParseTarget(f.rest[0])
	if err != nil {
		return usageErr("set-rate: " + err.Error())
	}
	rate, err := tbf.ParseRate(f.rest[1])
	if err != nil {
		return usageErr("set-rate: " + err.Error())
	}
	dir, err := policy.ParseDirection(*dirS)
	if err != nil {
		return usageErr("set-rate: " + err.Error())
	}
	now := time.Now()
	uid := uint32(os.Getuid())
	o := policy.Override{Target: t, Direction: dir, Rate: rate, Ceil: rate, Set: now, SetBy: &uid}
	if *ceilS != "" {
		if o.Ceil, err = tbf.ParseRate(*ceilS); err != nil {
			return usageErr("set-rate: --ceil: " + err.Error())
		}
	}
	if *rampS != "" {
		r, err := time.ParseDuration(*rampS)
		if err != nil || r < 0 {
			return usageErr(fmt.Sprintf("set-rate: --ramp %q: not a duration", *rampS))
		}
		o.Ramp = &r
	}
	if *forS != "" {
		d, err := time.ParseDuration(*forS)
		if err != nil || d <= 0 {
			return usageErr(fmt.Sprintf("set-rate: --for %q: not a positive duration", *forS))
		}
		o.Until = now.Add(d)
	}
	var dur *time.Duration
	if !o.Until.IsZero() {
		d := o.Until.Sub(now)
		dur = &d
	}
	if err := policy.CheckDurations(o.Ramp, dur); err != nil {
		return usageErr("set-rate: " + err.Error())
	}
	if err := o.Validate(); err != nil {
		return usageErr("set-rate: " + err.Error())
	}
	s, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	fc := s.fc
	p, err := s.pull()
	if err != nil {
		return err
	}
	if tiers, users := planNames(p); tiers != nil {
		if t.Kind == policy.TargetUser && !users[t.Name] || t.Kind == policy.TargetTier && !tiers[t.Name] {
			return fmt.Errorf("%s: no such %s in the fleet plan (revision %d)", t, t.Kind, p.Revision)
		}
	}
	if err := fleet.SetOverride(s.ctx, s.c, fc.Prefix, o); err != nil {
		return etcdErr(fc, err)
	}
	if *f.asJSON {
		return writeJSON(out, newOverrideJSON(o))
	}
	msg := fmt.Sprintf("%s: fleet-wide rate %s, ceil %s", o.Key(), o.Rate, max(o.Ceil, o.Rate))
	if !o.Until.IsZero() {
		msg += " until " + o.Until.Format(time.RFC3339)
	}
	fmt.Fprintln(out, msg+" (every router; a local override of the same target wins on its router)")
	return nil
}

func clearFleet(ctx context.Context, args []string, out io.Writer, env Env) error {
	f := newFlags("clear", env)
	dirS := f.fs.String("direction", "", "")
	if err := f.parse(args); err != nil {
		return err
	}
	if len(f.rest) != 1 {
		return usageErr("clear --fleet: expected one TARGET")
	}
	t, err := policy.ParseTarget(f.rest[0])
	if err != nil {
		return usageErr("clear: " + err.Error())
	}
	dir, err := policy.ParseDirection(*dirS)
	if err != nil {
		return usageErr("clear: " + err.Error())
	}
	s, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	fc := s.fc
	n, err := fleet.ClearOverride(s.ctx, s.c, fc.Prefix, t, dir)
	if err != nil {
		return etcdErr(fc, err)
	}
	if *f.asJSON {
		return writeJSON(out, clearJSON{Target: t.String(), Cleared: n})
	}
	if n == 0 {
		fmt.Fprintf(out, "%s: nothing to clear: no fleet override is set\n", t)
		return nil
	}
	fmt.Fprintf(out, "%s: fleet override cleared on every router\n", t)
	return nil
}

// quotaResetFleet is `shaperctl quota reset USER --fleet`.
func quotaResetFleet(ctx context.Context, args []string, out io.Writer, env Env) error {
	f := newFlags("quota reset", env)
	if err := f.parse(args); err != nil {
		return err
	}
	if len(f.rest) != 2 || f.rest[0] != "reset" {
		return usageErr("quota --fleet: expected 'quota reset USER --fleet'")
	}
	user := f.rest[1]
	if !config.ValidName(user) {
		return usageErr(fmt.Sprintf("quota reset --fleet: %q is not a user name", user))
	}
	s, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	fc := s.fc
	r := fleet.QuotaReset{At: time.Now().UTC(), By: pusher()}
	rev, deleted, err := fleet.ResetQuota(s.ctx, s.c, fc.Prefix, user, r)
	if err != nil {
		return etcdErr(fc, err)
	}
	if *f.asJSON {
		return writeJSON(out, quotaResetJSON{User: user, Revision: rev, ResetAt: r.At, UsageKeysDeleted: deleted})
	}
	fmt.Fprintf(out, "%s: quota reset on every router at revision %d (%d routers' counts were in etcd)\n", user, rev, deleted)
	return nil
}

// pusher is who writes to etcd, for the record: "user@host".
func pusher() string {
	var by string
	if u, err := user.Current(); err == nil {
		by = u.Username
	}
	if h, err := os.Hostname(); err == nil {
		by += "@" + h
	}
	return by
}
