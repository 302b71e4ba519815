package fleetcli

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/shaperd/shaperd/pkg/config"
)

// planDiff lists what changes from plan old (nil: nothing pushed yet) to
// plan new: the policy, and tiers and users added, removed or changed,
// one line each ("+ tier gold", "~ user alice", "- user bob").
func planDiff(old, new *config.Plan) []string {
	var out []string
	if old == nil {
		old = &config.Plan{}
	}
	if old.Path != "" && !samePolicy(old.Policy, new.Policy) {
		out = append(out, "~ policy")
	}
	tiers := func(p *config.Plan) map[string]any {
		m := map[string]any{}
		for _, t := range p.Tiers {
			t.Source = ""
			m[t.Name] = t
		}
		return m
	}
	users := func(p *config.Plan) map[string]any {
		m := map[string]any{}
		for _, u := range p.Users {
			u.Source = ""
			m[u.Name] = u
		}
		return m
	}
	out = append(out, diffNamed("tier", tiers(old), tiers(new))...)
	out = append(out, diffNamed("user", users(old), users(new))...)
	return out
}

func samePolicy(a, b config.Policy) bool {
	return a.Interval == b.Interval && a.Ramp == b.Ramp && a.SmoothWindow == b.SmoothWindow &&
		a.QuotaInterval == b.QuotaInterval && a.Location.String() == b.Location.String()
}

// diffNamed compares two sets of named values.
func diffNamed(kind string, old, new map[string]any) []string {
	var names []string
	for n := range old {
		names = append(names, n)
	}
	for n := range new {
		if _, ok := old[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var out []string
	for _, n := range names {
		o, inOld := old[n]
		v, inNew := new[n]
		switch {
		case !inOld:
			out = append(out, fmt.Sprintf("+ %s %s", kind, n))
		case !inNew:
			out = append(out, fmt.Sprintf("- %s %s", kind, n))
		case !reflect.DeepEqual(o, v):
			out = append(out, fmt.Sprintf("~ %s %s", kind, n))
		}
	}
	return out
}
