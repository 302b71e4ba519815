// Package offline checks a configuration without a kernel: what every
// daemon start, reload and `shaperd --check` refuses before anything is
// applied, and what shaperctl checks on any machine (fleet push, import).
// It links no kernel code, so shaperctl stays free of it.
package offline

import (
	"errors"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/kernel/filtercheck"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
)

// File loads the configuration at path (config.Load) and, when that
// succeeds, checks the plan with Plan. It returns every problem with its
// position, sorted: `shaperd --check` of a file without the fleet's
// shared plan.
func File(path string) []config.Error {
	_, errs := Load(path)
	return errs
}

// Load is File that also returns the plan it checked (nil when the files
// do not load).
func Load(path string) (*config.Plan, []config.Error) {
	plan, err := config.Load(path)
	if err != nil {
		var errs *config.Errors
		if errors.As(err, &errs) {
			return nil, errs.List
		}
		return nil, []config.Error{{File: path, Msg: err.Error()}}
	}
	return plan, Plan(plan)
}

// Plan checks a loaded plan against everything the apply path can refuse
// for a configuration, without a kernel: every interface's tree is built
// at every configured policy outcome with fresh class ids (policy.Check:
// rates above the bandwidth, bursts that do not fit, more users than class
// ids, TBF parameters the kernel cannot hold), and every user's addresses
// are laid out in the classifier of every HTB interface
// (filtercheck.Filters: prefix lengths, room in u32's hash buckets; u32
// unless the interface says classifier = "bpf", which takes every length).
// Each problem is at the position of the key that causes it. The daemon's
// start and reload and `shaperd --check` all call it, so a configuration
// --check accepts is one the daemon starts with and reloads to.
func Plan(plan *config.Plan) []config.Error {
	errs := policy.Check(plan)
	seen := map[string]bool{}
	type layout struct {
		match config.MatchField
		kind  string
	}
	laid := map[layout]bool{} // the layout depends only on the match field and the classifier
	for ii := range plan.Interfaces {
		in := &plan.Interfaces[ii]
		// Only an explicit "bpf" is sure to be bpf: without the key an
		// interface may fall back to u32.
		kind := filtercheck.ClassifierU32
		if in.Classifier == config.ClassifierBPF {
			kind = filtercheck.ClassifierBPF
		}
		if in.Shaper == config.ShaperTBF || laid[layout{in.Match, kind}] {
			continue
		}
		laid[layout{in.Match, kind}] = true
		n := 0
		for i := range plan.Users {
			n += len(plan.Users[i].Prefixes)
		}
		filters := make([]model.Filter, 0, n)
		type at struct{ user, addr int } // the key path, formatted for an error only
		keys := make([]at, 0, n)
		for i := range plan.Users {
			for j, p := range plan.Users[i].Prefixes {
				filters = append(filters, model.Filter{Prefix: p, Match: model.MatchField(in.Match)})
				keys = append(keys, at{i, j})
			}
		}
		for _, p := range filtercheck.Filters(kind, filters) {
			k := keys[p.Index]
			e := plan.Errorf(config.Path("user", k.user, "addresses", k.addr), "%v", p.Err)
			if k := e.Key + "\x00" + e.Msg; !seen[k] {
				seen[k] = true
				errs = append(errs, e)
			}
		}
	}
	plan.SortErrors(errs)
	return errs
}
