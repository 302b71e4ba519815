package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/tbf"
)

func isHelp(err error) bool { return errors.Is(err, flag.ErrHelp) }

func runSetRate(ctx context.Context, c *control.Client, args []string, out io.Writer, _ Env) error {
	fs := newFlagSet("set-rate")
	var ceil rateFlag
	var ramp, dur durationFlag
	fs.Var(&ceil, "ceil", "")
	fs.Var(&ramp, "ramp", "")
	fs.Var(&dur, "for", "")
	direction := fs.String("direction", "", "")
	asJSON := fs.Bool("json", false, "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagError("set-rate", err)
	}
	req, err := setRateRequest(pos, ceil, ramp.v, dur.v)
	if err != nil {
		return err
	}
	req.Direction = *direction
	if err := req.Validate(); err != nil {
		return usagef("set-rate", "%v", err)
	}
	resp, err := c.SetRate(ctx, req)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(out, resp)
	}
	fmt.Fprintln(out, describeSetRate(resp))
	return nil
}

// setRateRequest checks the command line and builds the request with the
// rates as written (the daemon's messages echo them). Mistakes are usage
// errors; the values are checked by SetRateRequest.Validate, the check the
// daemon makes too (the interface bandwidth bound only the daemon knows).
func setRateRequest(pos []string, ceil rateFlag, ramp, dur *control.Duration) (control.SetRateRequest, error) {
	const cmd = "set-rate"
	if len(pos) != 2 {
		return control.SetRateRequest{}, usagef(cmd, "expected TARGET and RATE, got %s", plural(len(pos), "argument"))
	}
	rate, err := tbf.ParseRate(pos[1])
	if err != nil {
		return control.SetRateRequest{}, usagef(cmd, "%v", err)
	}
	req := control.SetRateRequest{Target: pos[0], Rate: rate, RateText: pos[1],
		Ceil: ceil.v, CeilText: ceil.text, Ramp: ramp, For: dur}
	if err := req.Validate(); err != nil {
		return control.SetRateRequest{}, usagef(cmd, "%v", err)
	}
	return req, nil
}

// describeSetRate says what a set-rate did, in one line.
func describeSetRate(r *control.SetRateResponse) string {
	var b strings.Builder
	switch {
	case r.Direction == "download" || r.Direction == "upload":
		fmt.Fprintf(&b, "%s: %s rate %s, ceil %s", r.Target, r.Direction, r.Rate, r.Ceil)
	case r.UploadRate != 0:
		fmt.Fprintf(&b, "%s: download rate %s, ceil %s; upload rate %s, ceil %s (scaled by the tier's upload/download ratio)",
			r.Target, r.Rate, r.Ceil, r.UploadRate, r.UploadCeil)
	default:
		fmt.Fprintf(&b, "%s: rate %s, ceil %s", r.Target, r.Rate, r.Ceil)
	}
	if r.Ramp == 0 {
		b.WriteString(", at once")
	} else {
		fmt.Fprintf(&b, ", ramping over %s", r.Ramp)
	}
	if r.Until != nil {
		fmt.Fprintf(&b, ", until %s", r.Until.Format(time.DateTime+" MST"))
	} else {
		b.WriteString(", until cleared")
	}
	var who []string
	if len(r.Users) > 0 && (len(r.Users) != 1 || r.Users[0] != r.Target) {
		who = append(who, fmt.Sprintf("%s: %s", plural(len(r.Users), "user"), strings.Join(r.Users, ", ")))
	}
	if len(r.DefaultOf) > 0 {
		who = append(who, "the default class (addresses of no user) of "+strings.Join(r.DefaultOf, ", "))
	}
	if len(who) == 0 && len(r.Users) == 0 && !strings.HasPrefix(r.Target, "iface:") {
		who = append(who, "no user has this tier now; it applies to users who get it")
	}
	if len(who) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(who, "; "))
	}
	return b.String()
}

func runClear(ctx context.Context, c *control.Client, args []string, out io.Writer, _ Env) error {
	fs := newFlagSet("clear")
	direction := fs.String("direction", "", "")
	asJSON := fs.Bool("json", false, "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagError("clear", err)
	}
	if len(pos) != 1 {
		return usagef("clear", "expected one TARGET, got %s", plural(len(pos), "argument"))
	}
	if _, _, err := control.ParseDirectedTarget(pos[0], *direction); err != nil {
		return usagef("clear", "%v", err)
	}
	resp, err := c.Clear(ctx, control.ClearRequest{Target: pos[0], Direction: *direction})
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(out, resp)
	}
	fmt.Fprintln(out, describeClear(pos[0], resp))
	return nil
}

// describeClear says what a clear did: what it removed, or that nothing
// was set.
func describeClear(target string, r *control.ClearResponse) string {
	if len(r.Cleared) == 0 {
		msg := target + ": nothing to clear: no run-time change is set"
		if r.Direction == "download" || r.Direction == "upload" {
			msg = fmt.Sprintf("%s: nothing to clear: no run-time change is set for %s", target, r.Direction)
		}
		if r.Note != "" {
			msg += " (" + r.Note + ")"
		}
		return msg
	}
	parts := make([]string, len(r.Cleared))
	for i, o := range r.Cleared {
		parts[i] = fmt.Sprintf("%s %s/%s", o.Direction, formatRate(o.Rate), formatRate(o.Ceil))
	}
	return fmt.Sprintf("%s: run-time changes cleared (%s); back to its plan", target, strings.Join(parts, ", "))
}

func runReload(ctx context.Context, c *control.Client, args []string, out io.Writer, _ Env) error {
	fs := newFlagSet("reload")
	asJSON := fs.Bool("json", false, "")
	dryRun := fs.Bool("dry-run", false, "")
	allowRemovals := fs.Bool("allow-removals", false, "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagError("reload", err)
	}
	if len(pos) > 0 {
		return usagef("reload", "unexpected argument %q", pos[0])
	}
	if *dryRun {
		return runReloadDryRun(ctx, c, out, *asJSON)
	}
	res, err := c.Reload(ctx, control.ReloadRequest{AllowRemovals: *allowRemovals})
	if err != nil {
		return err
	}
	if *asJSON {
		if err := writeJSON(out, res); err != nil {
			return err
		}
	} else {
		writeReload(out, res)
	}
	if bad := badInterfaces(res.Interfaces); len(bad) > 0 {
		return fmt.Errorf("configuration reloaded, but %s", strings.Join(bad, "; "))
	}
	return nil
}

// writeReload writes a reload's result: one line, and one per interface
// that is not ok.
func writeReload(out io.Writer, r *control.ReloadStatus) {
	if r.Result == "" { // an older daemon answers {}
		fmt.Fprintln(out, "configuration reloaded")
		return
	}
	fmt.Fprintf(out, "configuration reloaded: %s, %s\n", r.Result, plural(len(r.Interfaces), "interface"))
	for _, i := range r.Interfaces {
		if i.State != control.StateOK {
			fmt.Fprintf(out, "  %s (%s): %s%s\n", i.Name, i.Direction, i.State, prefixed(": ", i.Error))
		}
	}
}

// badInterfaces names the interfaces of a reload's result that are failed
// or degraded (neither ok, missing nor pending).
func badInterfaces(is []control.InterfaceResult) []string {
	var bad []string
	for _, i := range is {
		switch i.State {
		case control.StateOK, control.StateMissing, control.StatePending:
		default:
			bad = append(bad, fmt.Sprintf("%s (%s) is %s", i.Name, i.Direction, i.State))
		}
	}
	return bad
}

// prefixed is p+s, or "" when s is empty.
func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}

// plural formats n with noun, adding an s unless n is 1: "1 user", "2 users".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
