package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/jsonout"
)

func runStatus(ctx context.Context, c *control.Client, args []string, out io.Writer, _ Env) error {
	fs := newFlagSet("status")
	asJSON := fs.Bool("json", false, "")
	explainFlag := fs.Bool("explain", false, "")
	tree := fs.Bool("tree", false, "")
	usersFlag := fs.String("users", "", "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagError("status", err)
	}
	if len(pos) > 1 {
		return usagef("status", "unexpected argument %q", pos[1])
	}
	perNode := defaultTreeUsers
	switch {
	case *tree && *asJSON:
		return usagef("status", "--tree draws the text output; --json has the nodes in interfaces[].nodes and each user's in users[].node")
	case *usersFlag != "" && !*tree:
		return usagef("status", "--users goes with --tree")
	case *usersFlag != "":
		if perNode, err = parseTreeUsers(*usersFlag); err != nil {
			return err
		}
	}
	st, err := c.Status(ctx)
	if err != nil {
		return err
	}
	if len(pos) == 1 {
		if st, err = filterStatus(st, pos[0]); err != nil {
			return err
		}
	}
	if *explainFlag {
		if err := explain(ctx, c, st); err != nil {
			return err
		}
	}
	switch {
	case *asJSON:
		err = writeJSON(out, st)
	case *tree:
		err = writeTree(out, st, perNode)
	default:
		err = writeStatus(out, st)
	}
	if err != nil {
		return err
	}
	return notOK(st)
}

// notOK is an error naming the interfaces whose state is not ok, the
// state files the daemon cannot save (its overrides, quota usage or class
// ids would be lost at the next restart) and a fleet router's refused
// shared plan, so that status exits 1 for scripts and monitoring; nil when
// all is well. Problems met at start (a corrupt or unreadable file, moved
// aside and recovered from) are shown but do not count: the daemon works
// on without them.
func notOK(st *control.Status) error {
	var bad, unsaved []string
	for _, i := range st.Interfaces {
		if i.State != control.StateOK {
			bad = append(bad, fmt.Sprintf("%s (%s) is %s", i.Name, i.Direction, dash(i.State)))
		}
	}
	for _, p := range st.StateProblems {
		if p.Kind == control.StateProblemWrite {
			unsaved = append(unsaved, p.File)
		}
	}
	var msgs []string
	if len(bad) > 0 {
		msgs = append(msgs, "not every interface is ok: "+strings.Join(bad, "; "))
	}
	if len(unsaved) > 0 {
		msgs = append(msgs, "the daemon cannot save its state (is state_dir full or read-only?): "+strings.Join(unsaved, ", "))
	}
	if f := st.Fleet; f != nil && f.Refused != 0 {
		inForce := fmt.Sprintf("revision %d", f.Revision)
		if f.Revision == 0 {
			inForce = "the local file's plan"
		}
		msgs = append(msgs, fmt.Sprintf("fleet: this router refused the shared plan revision %d and shapes with %s", f.Refused, inForce))
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "; "))
}

// flagError turns a flag parse error into a usage error (or ErrHelp).
func flagError(cmd string, err error) error {
	if err == nil || isHelp(err) {
		return err
	}
	return usagef(cmd, "%v", err)
}

// writeJSON writes v as indented JSON in the shape of docs/json.md
// (jsonout: rates in bit/s, snake_case keys, `out` tags over wire names).
func writeJSON(out io.Writer, v any) error {
	return jsonout.Encode(out, v)
}

// writeStatus writes the human status: an interfaces table, a nodes table
// (most loaded first) when there are nodes, and a users table.
func writeStatus(out io.Writer, st *control.Status) error {
	fmt.Fprintf(out, "shaperd status at %s: %s, %s\n\n",
		st.Generated.Format("2006-01-02 15:04:05 MST"), plural(len(st.Interfaces), "interface"), plural(countUsers(st.Users), "user"))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INTERFACE\tDEVICE\tSHAPER\tDIRECTION\tBANDWIDTH\tSTATE\tUSERS\tTIERS")
	for _, i := range st.Interfaces {
		tiers := make([]string, len(i.Tiers))
		for k, t := range i.Tiers {
			tiers[k] = tierText(t, i.DefaultTier)
		}
		shaper := i.Shaper
		if i.Classifier != "" {
			shaper += "+" + i.Classifier // htb+bpf, htb+u32
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", i.Name, i.Device, shaper, i.Direction,
			bandwidthText(i), dash(i.State), len(i.Users), dash(strings.Join(tiers, ", ")))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, i := range st.Interfaces {
		if i.Error != "" {
			fmt.Fprintf(out, "%s (%s): error: %s\n", i.Name, i.Direction, i.Error)
		}
		for _, f := range i.Foreign {
			fmt.Fprintf(out, "%s (%s): not shaperd's: %s\n", i.Name, i.Direction, f)
		}
		for _, c := range i.Capped {
			fmt.Fprintf(out, "%s (%s): %s\n", i.Name, i.Direction, c)
		}
	}
	writeStateProblems(out, st.StateProblems)
	writeFleet(out, st.Fleet)
	if r := st.LastReload; r != nil {
		fmt.Fprintf(out, "last reload: %s at %s", r.Result, r.At.Format("2006-01-02 15:04:05 MST"))
		if bad := badInterfaces(r.Interfaces); len(bad) > 0 {
			fmt.Fprintf(out, " (%s)", strings.Join(bad, "; "))
		}
		if len(r.Problems) > 0 {
			fmt.Fprintf(out, " (%s; the old configuration stayed)", plural(len(r.Problems), "problem"))
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintln(out)
	if err := writeNodeTable(out, st); err != nil {
		return err
	}
	users := slices.Clone(st.Users)
	slices.SortStableFunc(users, func(a, b control.UserStatus) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Interface, b.Interface))
	})
	// The ERROR column appears when some user's objects were refused.
	withErr := slices.ContainsFunc(users, func(u control.UserStatus) bool { return u.Error != "" })
	// The SOURCE column appears when some user was added at run time.
	withSource := slices.ContainsFunc(users, func(u control.UserStatus) bool { return u.Source == control.SourceRuntime })
	// The NODE column appears when some user is behind a node.
	withNode := slices.ContainsFunc(users, func(u control.UserStatus) bool { return u.Node != "" })
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	head := "USER\tINTERFACE\tDIRECTION\tDEVICE\tTIER\tRATE/CEIL\tEFFECTIVE\tTHROUGHPUT\tBYTES\tDROPS\tDELAY\tREASON"
	if withNode {
		head = strings.Replace(head, "TIER\t", "TIER\tNODE\t", 1)
	}
	if withSource {
		head += "\tSOURCE"
	}
	if withErr {
		head += "\tERROR"
	}
	fmt.Fprintln(tw, head)
	for _, u := range users {
		tier := dash(u.Tier)
		if withNode {
			tier += "\t" + dash(u.Node)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s/%s\t%s/%s\t%s\t%s\t%d\t%s\t%s", u.Name, u.Interface, dash(u.Direction), dash(u.Device), tier,
			formatRate(u.Rate), formatRate(u.Ceil), formatRate(u.EffectiveRate), formatRate(u.EffectiveCeil),
			formatRate(u.Throughput), formatBytes(u.Bytes), u.Drops, formatDelay(u.QueueDelay), reason(u))
		if withSource {
			fmt.Fprintf(tw, "\t%s", cmp.Or(u.Source, control.SourceFile))
		}
		if withErr {
			fmt.Fprintf(tw, "\t%s", dash(u.Error))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// bandwidthText is the BANDWIDTH column: the bandwidth in force, and the
// plan's when an override changed it: "80mbit (override; plan 300mbit)".
func bandwidthText(i control.InterfaceStatus) string {
	if i.EffectiveBandwidth == 0 && i.Override == nil {
		return formatRate(i.Bandwidth)
	}
	bw := i.EffectiveBandwidth
	if bw == 0 {
		bw = i.Bandwidth
	}
	return fmt.Sprintf("%s (override; plan %s)", formatRate(bw), formatRate(i.Bandwidth))
}

// tierText is one tier in the TIERS column: "gold 50mbit/100mbit", marked
// "(default class)" when it is the interface's default tier, with an
// override's rates: "gold 30mbit/40mbit (override; plan 50mbit/100mbit)",
// and "(ceil capped to 50mbit)" when its ceil is above the bandwidth.
func tierText(t control.TierStatus, defaultTier string) string {
	name := t.Name
	if t.Name == defaultTier {
		name += " (default class)"
	}
	capped := ""
	if t.CappedCeil != 0 {
		capped = " (ceil capped to " + formatRate(t.CappedCeil) + ")"
	}
	if t.Override == nil {
		return fmt.Sprintf("%s %s/%s%s", name, formatRate(t.Rate), formatRate(t.Ceil), capped)
	}
	return fmt.Sprintf("%s %s/%s (override; plan %s/%s)%s", name, formatRate(t.EffectiveRate), formatRate(t.EffectiveCeil),
		formatRate(t.Rate), formatRate(t.Ceil), capped)
}

// reason is the REASON column: the daemon's reason with a ramp or quota in progress.
func reason(u control.UserStatus) string {
	parts := []string{dash(u.Reason)}
	if r := u.Ramp; r != nil {
		parts = append(parts, fmt.Sprintf("ramping %s -> %s until %s", formatRate(r.From), formatRate(r.To), r.Until.Format(time.TimeOnly)))
	}
	if q := u.Quota; q != nil {
		parts = append(parts, fmt.Sprintf("quota %s of %s until %s", formatBytes(q.Used), formatBytes(q.Limit), q.PeriodEnd.Format("2006-01-02 15:04")))
	}
	if u.LimitedBy != "" {
		parts = append(parts, "limited by "+u.LimitedBy)
	}
	return strings.Join(parts, "; ")
}

// countUsers counts distinct user names (a user may be on several interfaces).
func countUsers(us []control.UserStatus) int {
	seen := map[string]bool{}
	for _, u := range us {
		seen[u.Name] = true
	}
	return len(seen)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeStateProblems writes one line per state file problem: the file, its
// kind and since when, the error, where a corrupt file went and what the
// daemon did about it.
func writeStateProblems(out io.Writer, ps []control.StateProblem) {
	for _, p := range ps {
		parts := []string{p.Error}
		if p.MovedTo != "" {
			parts = append(parts, "moved to "+p.MovedTo)
		}
		if p.Effect != "" {
			parts = append(parts, p.Effect)
		}
		fmt.Fprintf(out, "state file %s: %s since %s: %s\n", p.File, p.Kind,
			p.Since.Format("2006-01-02 15:04:05 MST"), strings.Join(parts, "; "))
	}
}
