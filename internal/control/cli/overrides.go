package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/shaperd/shaperd/internal/control"
)

func runOverrides(ctx context.Context, c *control.Client, args []string, out io.Writer, _ Env) error {
	fs := newFlagSet("overrides")
	asJSON := fs.Bool("json", false, "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagError("overrides", err)
	}
	if len(pos) > 0 {
		return usagef("overrides", "unexpected argument %q", pos[0])
	}
	resp, err := c.Overrides(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(out, resp)
	}
	return writeOverrides(out, resp.Overrides)
}

// writeOverrides writes the overrides table, or a line saying there is none.
func writeOverrides(out io.Writer, os []control.OverrideStatus) error {
	if len(os) == 0 {
		fmt.Fprintln(out, "no overrides: every target follows its plan")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tDIRECTION\tRATE\tCEIL\tRAMP\tUNTIL\tSET BY\tSET AT\tSOURCE")
	for _, o := range os {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", o.Target, o.Direction, formatRate(o.Rate), formatRate(o.Ceil),
			rampText(o.Ramp), untilText(o.Until), uidText(o.SetBy), o.Set.Format("2006-01-02 15:04:05 MST"), sourceText(o))
	}
	return tw.Flush()
}

// sourceText is the SOURCE column: "local", "fleet", or "fleet (local
// wins)" for a fleet override a local one replaces on this router.
func sourceText(o control.OverrideStatus) string {
	switch {
	case o.Source == "":
		return control.SourceLocal
	case o.Shadowed:
		return o.Source + " (local wins)"
	}
	return o.Source
}

func rampText(r *control.Duration) string {
	if r == nil {
		return "default"
	}
	return r.String()
}

func untilText(u *time.Time) string {
	if u == nil {
		return "cleared"
	}
	return u.Format("2006-01-02 15:04:05 MST")
}

// uidText is "uid N";
// "-" when unknown.
func uidText(uid *uint32) string {
	if uid == nil {
		return "-"
	}
	return "uid " + strconv.FormatUint(uint64(*uid), 10)
}

func runQuota(ctx context.Context, c *control.Client, args []string, out io.Writer, _ Env) error {
	fs := newFlagSet("quota")
	asJSON := fs.Bool("json", false, "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagError("quota", err)
	}
	if len(pos) == 0 || pos[0] != "reset" {
		return usagef("quota", "expected 'quota reset USER'")
	}
	if len(pos) != 2 {
		return usagef("quota", "expected one USER after 'quota reset', got %s", plural(len(pos)-1, "argument"))
	}
	t, err := control.ParseTarget(pos[1])
	if err != nil {
		return usagef("quota", "%v", err)
	}
	if t.Kind != control.TargetUser {
		return usagef("quota", "%q is not a user name", pos[1])
	}
	resp, err := c.ResetQuota(ctx, control.QuotaResetRequest{User: pos[1]})
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(out, resp)
	}
	msg := fmt.Sprintf("%s: quota usage reset (was %s)", resp.User, formatBytes(resp.Was))
	if resp.Restored {
		msg += "; back from the over-quota rates to the plan"
	}
	fmt.Fprintln(out, msg)
	return nil
}
