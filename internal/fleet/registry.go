package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Registration is what a router says about itself under PREFIX/routers/
// (kept) and PREFIX/alive/ (while its lease lives).
type Registration struct {
	Router  string `json:"router"`
	Version string `json:"version,omitempty"`
	// Revision is the shared plan revision in force on the router; 0:
	// none yet (it shapes with its local file's plan).
	Revision int64 `json:"revision"`
	// Refused is the last plan revision the router refused, with why in
	// Errors; 0 when the newest revision it saw is in force.
	Refused int64 `json:"refused_revision,omitempty"`
	// Errors: why Refused was refused, and fleet overrides it cannot
	// apply.
	Errors []string `json:"errors,omitempty"`
	// Health sums up the router's shaping: "ok" or what fails.
	Health string `json:"health"`
	// Updated is when the router wrote this.
	Updated time.Time `json:"updated"`
	// Alive is true when the router's lease still holds (set by Routers,
	// not stored).
	Alive bool `json:"alive"`
	// Problems is what is wrong with the router (set by `shaperctl fleet
	// status` with Check, not stored); none when it is healthy.
	Problems []string `json:"problems,omitempty"`
}

// StaleAfter is how long after a push a live router may still have an
// older revision in force before fleet status calls it stale (applying a
// large plan takes a while; a router whose watch is stuck never catches up).
const StaleAfter = time.Minute

// Check says what is wrong with router r, in a fleet whose plan in etcd
// is p (nil: none pushed), at now; nil when it is healthy. Each problem
// starts with its kind and a colon:
//   - "down": r's registration lease is gone (it stopped, or lost etcd for
//     longer than LeaseTTL); what it last reported is no longer true;
//   - "refused": r refused a shared plan revision and shapes with an older
//     plan (or its local file's);
//   - "unhealthy": r reports interfaces that are not shaped as planned;
//   - "stale": r is alive but has had an older revision in force than the
//     plan in etcd for more than StaleAfter since it was pushed.
func (r Registration) Check(p *Plan, now time.Time) []string {
	if !r.Alive {
		last := "never"
		if !r.Updated.IsZero() {
			last = r.Updated.Format(time.RFC3339)
		}
		return []string{fmt.Sprintf("down: no live registration (its lease is gone); it last wrote at %s", last)}
	}
	var out []string
	inForce := fmt.Sprintf("revision %d", r.Revision)
	if r.Revision == 0 {
		inForce = "its local file's plan"
	}
	if r.Refused != 0 {
		out = append(out, fmt.Sprintf("refused: it refused revision %d and shapes with %s", r.Refused, inForce))
	}
	if r.Health != "ok" && r.Health != "starting" && r.Health != "" {
		out = append(out, "unhealthy: "+r.Health)
	}
	if p != nil && r.Revision != p.Revision && r.Refused != p.Revision &&
		(p.Meta.PushedAt.IsZero() || now.Sub(p.Meta.PushedAt) > StaleAfter) {
		out = append(out, fmt.Sprintf("stale: it has %s in force, the plan in etcd is revision %d", inForce, p.Revision))
	}
	return out
}

// Routers lists every router that ever registered under prefix, sorted by
// name, with Alive set for those whose lease still holds.
func Routers(ctx context.Context, c KV, prefix string) ([]Registration, error) {
	kvs, _, err := c.Range(ctx, prefix+routersDir, prefix+aliveDir)
	if err != nil {
		return nil, fmt.Errorf("etcd: reading %s: %w", prefix+routersDir, err)
	}
	byName := map[string]*Registration{}
	for i, dir := range []string{routersDir, aliveDir} {
		for _, kv := range kvs[i] {
			name := strings.TrimPrefix(kv.Key, prefix+dir)
			var r Registration
			if err := json.Unmarshal(kv.Value, &r); err != nil {
				r = Registration{Router: name, Errors: []string{fmt.Sprintf("%s: unreadable registration: %v", kv.Key, err)}}
			}
			r.Router = name
			if i == 1 {
				r.Alive = true
				if old, ok := byName[name]; ok && old.Updated.After(r.Updated) {
					old.Alive = true
					continue
				}
			}
			byName[name] = &r
		}
	}
	out := make([]Registration, 0, len(byName))
	for _, r := range byName {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b Registration) int { return strings.Compare(a.Router, b.Router) })
	return out, nil
}
