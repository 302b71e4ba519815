package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/shaperd/shaperd/internal/control"
)

// stringList is a repeatable string flag (--set A --set B).
type stringList []string

func (l *stringList) String() string     { return fmt.Sprint(*l) }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

func runSimulate(ctx context.Context, c *control.Client, args []string, out io.Writer, _ Env) error {
	fs := newFlagSet("simulate")
	demand := fs.String("demand", "", "")
	var set stringList
	fs.Var(&set, "set", "")
	asJSON := fs.Bool("json", false, "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagError("simulate", err)
	}
	if len(pos) > 0 {
		return usagef("simulate", "unexpected argument %q", pos[0])
	}
	resp, err := c.Simulate(ctx, control.SimulateRequest{Demand: *demand, Set: set})
	if err != nil {
		return err
	}
	if *asJSON {
		_, err := fmt.Fprintf(out, "%s\n", resp.Report)
		return err
	}
	_, err = io.WriteString(out, resp.Text)
	return err
}

// runReloadDryRun is `reload --dry-run`: what reloading would change.
func runReloadDryRun(ctx context.Context, c *control.Client, out io.Writer, asJSON bool) error {
	resp, err := c.PlanDiff(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(out, resp)
	}
	_, err = io.WriteString(out, resp.Text)
	return err
}

// explain joins a simulation on measured demand into st: each user entry's
// reason gets what limits it now ("limited by ceil (tier gold)").
func explain(ctx context.Context, c *control.Client, st *control.Status) error {
	sim, err := c.Simulate(ctx, control.SimulateRequest{})
	if err != nil {
		return fmt.Errorf("--explain: %w", err)
	}
	type key struct{ user, iface, dir string }
	lim := make(map[key]string, len(sim.Users))
	for _, u := range sim.Users {
		lim[key{u.User, u.Interface, u.Direction}] = u.LimitedBy
	}
	for i := range st.Users {
		u := &st.Users[i]
		if l, ok := lim[key{u.Name, u.Interface, u.Direction}]; ok {
			u.LimitedBy = l
		}
	}
	return nil
}
