package simulate

import (
	"fmt"
	"strings"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/sim"
)

// Spec is a parsed --demand: who asks for how much, downloads and uploads.
type Spec struct {
	all      *pair
	users    map[string]pair
	tiers    map[string]pair
	defaults map[string]pair // by interface name; "*" for every interface
	// measured, when set, gives every user's demand per interface and
	// direction (MeasuredSpec) instead of the entries above.
	measured map[MeasuredKey]sim.Demand
}

// pair is a demand for each direction: Down on egress interfaces, Up on
// ingress ones.
type pair struct{ Down, Up sim.Demand }

// MeasuredKey names one user's class: on interface Interface (the
// configured name) in Direction.
type MeasuredKey struct {
	User, Interface string
	Direction       model.Direction
}

// MeasuredSpec is a demand of each user's own rate on each interface, as
// measured. Classes not in m, and unclassified traffic, ask for nothing.
func MeasuredSpec(m map[MeasuredKey]sim.Demand) *Spec {
	return &Spec{users: map[string]pair{}, tiers: map[string]pair{}, defaults: map[string]pair{}, measured: m}
}

// demand is the demand of user (of tier) on interface iface in direction
// d: the measured one for a MeasuredSpec, else as user says.
func (sp *Spec) demand(user, tier, iface string, d model.Direction) sim.Demand {
	if sp.measured != nil {
		return sp.measured[MeasuredKey{user, iface, d}]
	}
	return sp.user(user, tier, d)
}

// DefaultSpec is the --demand default: every user always backlogged.
const DefaultSpec = "*=max"

// ParseSpec parses a comma list of TARGET=DEMAND: TARGET is a user name,
// tier:NAME, * (every user) or default:IFACE (unclassified traffic on
// interface IFACE, * for all); DEMAND is max, 0 or a rate ("10mbit"), or
// DOWN/UP with one for each direction. A user's own entry beats its
// tier's, which beats *; users without any entry ask for nothing, as does
// unclassified traffic without a default: entry.
func ParseSpec(s string) (*Spec, error) {
	sp := &Spec{users: map[string]pair{}, tiers: map[string]pair{}, defaults: map[string]pair{}}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		target, value, ok := strings.Cut(item, "=")
		target = strings.TrimSpace(target)
		if !ok || target == "" {
			return nil, fmt.Errorf("--demand %q: want TARGET=DEMAND (USER, tier:NAME, default:IFACE or *)", item)
		}
		d, err := parsePair(value)
		if err != nil {
			return nil, fmt.Errorf("--demand %q: %w", item, err)
		}
		var m map[string]pair
		name := target
		switch {
		case target == "*":
			sp.all = &d
			continue
		case strings.HasPrefix(target, "tier:"):
			m, name = sp.tiers, strings.TrimPrefix(target, "tier:")
		case strings.HasPrefix(target, "default:"):
			m, name = sp.defaults, strings.TrimPrefix(target, "default:")
		case strings.Contains(target, ":"):
			return nil, fmt.Errorf("--demand %q: unknown target kind (want USER, tier:NAME, default:IFACE or *)", item)
		default:
			m = sp.users
		}
		if name == "" {
			return nil, fmt.Errorf("--demand %q: empty name", item)
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("--demand %q: %s is given twice", item, target)
		}
		m[name] = d
	}
	return sp, nil
}

// parsePair parses DEMAND or DOWN/UP.
func parsePair(s string) (pair, error) {
	down, up, two := strings.Cut(s, "/")
	d, err := sim.ParseDemand(down)
	if err != nil {
		return pair{}, err
	}
	if !two {
		return pair{d, d}, nil
	}
	u, err := sim.ParseDemand(up)
	if err != nil {
		return pair{}, err
	}
	return pair{d, u}, nil
}

// check refuses names the plan does not have.
func (sp *Spec) check(plan *config.Plan) error {
	users := map[string]bool{}
	for _, u := range plan.Users {
		users[u.Name] = true
	}
	ifaces := map[string]bool{"*": true}
	for _, in := range plan.Interfaces {
		ifaces[in.Name] = true
	}
	for name := range sp.users {
		if !users[name] {
			return fmt.Errorf("--demand: no user %q in %s", name, plan.UsersPath)
		}
	}
	for name := range sp.tiers {
		if _, ok := plan.Tier(name); !ok {
			return fmt.Errorf("--demand: no tier %q in %s", name, plan.Path)
		}
	}
	for name := range sp.defaults {
		if !ifaces[name] {
			return fmt.Errorf("--demand: no interface %q in %s", name, plan.Path)
		}
	}
	return nil
}

// user is the demand of user (of tier) in direction d.
func (sp *Spec) user(user, tier string, d model.Direction) sim.Demand {
	if p, ok := sp.users[user]; ok {
		return p.of(d)
	}
	if p, ok := sp.tiers[tier]; ok {
		return p.of(d)
	}
	if sp.all != nil {
		return sp.all.of(d)
	}
	return 0
}

// unclassified is the demand of the default class of iface in direction d.
func (sp *Spec) unclassified(iface string, d model.Direction) sim.Demand {
	if p, ok := sp.defaults[iface]; ok {
		return p.of(d)
	}
	if p, ok := sp.defaults["*"]; ok {
		return p.of(d)
	}
	return 0
}

func (p pair) of(d model.Direction) sim.Demand {
	if d == model.Ingress {
		return p.Up
	}
	return p.Down
}
