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
	asJSON := fs.Bool("json", false, "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagError("set-rate", err)
	}
	req, err := setRateRequest(pos, ceil, ramp.v, dur.v)
	if err != nil {
		return err
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
	fmt.Fprintf(&b, "%s: rate %s, ceil %s", r.Target, r.Rate, r.Ceil)
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
	if len(r.Users) != 1 || r.Users[0] != r.Target {
		fmt.Fprintf(&b, " (%s: %s)", plural(len(r.Users), "user"), strings.Join(r.Users, ", "))
	}
	return b.String()
}

func runClear(ctx context.Context, c *control.Client, args []string, out io.Writer, _ Env) error {
	fs := newFlagSet("clear")
	asJSON := fs.Bool("json", false, "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagError("clear", err)
	}
	if len(pos) != 1 {
		return usagef("clear", "expected one TARGET, got %s", plural(len(pos), "argument"))
	}
	if _, err := control.ParseTarget(pos[0]); err != nil {
		return usagef("clear", "%v", err)
	}
	if err := c.Clear(ctx, pos[0]); err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(out, struct {
			Target  string `json:"target"`
			Cleared bool   `json:"cleared"`
		}{pos[0], true})
	}
	fmt.Fprintf(out, "%s: run-time changes cleared; back to its plan\n", pos[0])
	return nil
}

func runReload(ctx context.Context, c *control.Client, args []string, out io.Writer, _ Env) error {
	fs := newFlagSet("reload")
	asJSON := fs.Bool("json", false, "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagError("reload", err)
	}
	if len(pos) > 0 {
		return usagef("reload", "unexpected argument %q", pos[0])
	}
	if err := c.Reload(ctx); err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(out, struct {
			Reloaded bool `json:"reloaded"`
		}{true})
	}
	fmt.Fprintln(out, "configuration reloaded")
	return nil
}

// plural formats n with noun, adding an s unless n is 1: "1 user", "2 users".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
