package check

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/sim"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// PlanDiff is what applying a plan would change on one managed interface,
// against what the kernel holds now.
type PlanDiff struct {
	// Interface is "name/direction"; Device carries the tree.
	Interface, Device string
	// Missing is set when the device does not exist; Err when the plan
	// cannot be built or the kernel not read. Neither has Changes.
	Missing bool
	Err     error
	// Changes are the kernel writes applying the plan takes (model.Diff).
	Changes []model.Change
	// Users are the users whose class would change: a new class, other
	// rates, or another predicted share under full demand (UserDiffs).
	Users []UserDiff
}

// UserDiff is one user's class before (the kernel) and after (the plan).
// Rates are bits/s (the kernel's read back from its bytes per second, the
// plan's as configured); Predicted* are sim.Solve's steady state with every
// class of the device backlogged (0 before for a new class).
type UserDiff struct {
	User                                         string
	New                                          bool
	BeforeRate, BeforeCeil, AfterRate, AfterCeil tbf.Rate
	BeforePredicted, AfterPredicted              float64
}

// UserDiffs compares the user classes of desired with the classes of the
// same handle in actual, and both trees' predicted shares, and returns
// the users whose class changes. Rates are compared in bytes per second,
// the unit the kernel keeps (as model.ClassParamsEqual does): a plan rate
// that is not a whole number of bytes reads back a few bit/s lower and is
// not a change.
func UserDiffs(actual, desired *model.Tree) []UserDiff {
	before, after := predicted(actual), predicted(desired)
	old := make(map[model.Handle]*model.Class, len(actual.Classes))
	for i := range actual.Classes {
		old[actual.Classes[i].Handle] = &actual.Classes[i]
	}
	var out []UserDiff
	for _, c := range desired.Classes {
		if c.Labels.Kind != "user" {
			continue
		}
		u := UserDiff{User: c.Labels.User, AfterRate: c.Rate, AfterCeil: c.Ceil, AfterPredicted: after[c.Handle]}
		if o, ok := old[c.Handle]; ok {
			u.BeforeRate, u.BeforeCeil, u.BeforePredicted = o.Rate, o.Ceil, before[c.Handle]
		} else {
			u.New = true
		}
		if u.New || u.BeforeRate.BytesPerSecond() != u.AfterRate.BytesPerSecond() ||
			u.BeforeCeil.BytesPerSecond() != u.AfterCeil.BytesPerSecond() ||
			math.Abs(u.AfterPredicted-u.BeforePredicted) > 0.01*math.Max(u.AfterPredicted, u.BeforePredicted) {
			out = append(out, u)
		}
	}
	return out
}

// predicted is each class's steady-state rate with every leaf backlogged;
// empty when the tree cannot be simulated (no root, a TBF).
func predicted(t *model.Tree) map[model.Handle]float64 {
	out := map[model.Handle]float64{}
	if t.Root == nil || t.Root.Kind != model.ShaperHTB {
		return out
	}
	res, err := sim.Solve(t, func(*model.Class) sim.Demand { return sim.Max }, sim.Options{})
	if err != nil {
		return out
	}
	for _, c := range res.Classes {
		out[c.Handle] = c.Rate
	}
	return out
}

// WritePlanDiff prints diffs for people: per interface the count of
// kernel changes by kind (each one with verbose), then the users whose
// class changes, before -> after, with the predicted rate at full demand.
func WritePlanDiff(w io.Writer, diffs []PlanDiff, verbose bool) {
	for _, pd := range diffs {
		switch {
		case pd.Err != nil:
			fmt.Fprintf(w, "%s (%s): cannot compare: %v\n", pd.Interface, pd.Device, pd.Err)
			continue
		case pd.Missing:
			fmt.Fprintf(w, "%s (%s): device missing; shaped with the plan when it appears\n", pd.Interface, pd.Device)
			continue
		case len(pd.Changes) == 0:
			fmt.Fprintf(w, "%s (%s): the kernel holds the plan; nothing to change\n", pd.Interface, pd.Device)
			continue
		}
		ops := map[model.Op]int{}
		for _, c := range pd.Changes {
			ops[c.Op]++
		}
		fmt.Fprintf(w, "%s (%s): %d kernel changes (%d add, %d change, %d delete)\n", pd.Interface, pd.Device,
			len(pd.Changes), ops[model.OpAdd], ops[model.OpChange], ops[model.OpDelete])
		if verbose {
			for _, c := range pd.Changes {
				fmt.Fprintf(w, "  %s\n", c.String())
			}
		}
		if len(pd.Users) == 0 {
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  USER\tRATE/CEIL NOW\tPLAN\tPREDICTED NOW\tPLAN (every class backlogged)")
		for _, u := range pd.Users {
			now, pnow := u.BeforeRate.String()+"/"+u.BeforeCeil.String(), mbits(u.BeforePredicted)
			if u.New {
				now, pnow = "(new)", "-"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s/%s\t%s\t%s\n", u.User, now, u.AfterRate, u.AfterCeil, pnow, mbits(u.AfterPredicted))
		}
		tw.Flush()
	}
}

// mbits formats bits/s as Mbit/s.
func mbits(b float64) string { return fmt.Sprintf("%.2f Mbit/s", b/1e6) }
