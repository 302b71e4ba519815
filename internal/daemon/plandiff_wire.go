package daemon

import (
	"math"
	"strings"

	"github.com/shaperd/shaperd/internal/check"
	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// planDiffInterfaces is diffs as data, for reload --dry-run --json.
func planDiffInterfaces(diffs []check.PlanDiff) []control.PlanDiffInterface {
	out := make([]control.PlanDiffInterface, 0, len(diffs))
	for _, pd := range diffs {
		name, dir, _ := strings.Cut(pd.Interface, "/")
		pi := control.PlanDiffInterface{Interface: name, Direction: dir, Device: pd.Device,
			Changes: []control.PlanChange{}, Users: []control.PlanUserChange{}}
		switch {
		case pd.Err != nil:
			pi.State, pi.Error = control.PlanError, pd.Err.Error()
		case pd.Missing:
			pi.State = control.PlanMissing
		case len(pd.Changes) == 0:
			pi.State = control.PlanUnchanged
		default:
			pi.State = control.PlanChanged
		}
		for _, c := range pd.Changes {
			pi.Changes = append(pi.Changes, planChange(c))
		}
		for _, u := range pd.Users {
			pu := control.PlanUserChange{User: u.User, New: u.New,
				After: control.PlanUserRates{Rate: u.AfterRate, Ceil: u.AfterCeil, Predicted: tbf.Rate(math.Round(u.AfterPredicted))}}
			if !u.New {
				pu.Before = &control.PlanUserRates{Rate: u.BeforeRate, Ceil: u.BeforeCeil, Predicted: tbf.Rate(math.Round(u.BeforePredicted))}
			}
			pi.Users = append(pi.Users, pu)
		}
		out = append(out, pi)
	}
	return out
}

// planChange is one kernel write as data.
func planChange(c model.Change) control.PlanChange {
	pc := control.PlanChange{Op: c.Op.String(), Device: c.Device, Text: c.String()}
	labels := func(l model.Labels) { pc.User, pc.Tier, pc.Node = l.User, l.Tier, l.Node }
	switch {
	case c.Redirect != nil:
		pc.Object = "redirect"
	case c.Qdisc != nil:
		pc.Object, pc.Handle, pc.Kind = "qdisc", c.Qdisc.Handle.String(), string(c.Qdisc.Kind)
	case c.Class != nil:
		pc.Object, pc.Handle = "class", c.Class.Handle.String()
		labels(c.Class.Labels)
		switch c.Op {
		case model.OpDelete:
			pc.Before = &control.PlanRates{Rate: c.Class.Rate, Ceil: c.Class.Ceil}
		case model.OpChange:
			pc.After = &control.PlanRates{Rate: c.Class.Rate, Ceil: c.Class.Ceil}
			if c.FromClass != nil {
				pc.Before = &control.PlanRates{Rate: c.FromClass.Rate, Ceil: c.FromClass.Ceil}
			}
		default:
			pc.After = &control.PlanRates{Rate: c.Class.Rate, Ceil: c.Class.Ceil}
		}
	case c.Filter != nil:
		pc.Object, pc.Handle, pc.Prefix = "filter", c.Filter.ClassID.String(), c.Filter.Prefix.String()
		labels(c.Filter.Labels)
	}
	return pc
}
