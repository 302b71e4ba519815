package fleet

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/shaperd/shaperd/pkg/policy"
)

// state mirrors the plan and override keys of a prefix as a watch sees
// them.
type state struct {
	prefix    string
	plan      map[string]kv // by key
	overrides map[string]kv
	// usage is the usage keys: user -> router -> usage.
	usage map[string]map[string]policy.RemoteUsage
}

type kv struct {
	value []byte
	rev   int64
}

func newState(prefix string) *state {
	return &state{prefix: prefix, plan: map[string]kv{}, overrides: map[string]kv{},
		usage: map[string]map[string]policy.RemoteUsage{}}
}

// put records a key's value; it reports which part changed.
func (s *state) put(key string, value []byte, rev int64) (plan, overrides bool) {
	switch {
	case under(s.prefix, planDir, key):
		s.plan[key] = kv{value, rev}
		return true, false
	case under(s.prefix, overridesDir, key):
		s.overrides[key] = kv{value, rev}
		return false, true
	}
	return false, false
}

// del forgets a key; it reports which part changed.
func (s *state) del(key string) (plan, overrides bool) {
	switch {
	case under(s.prefix, planDir, key):
		delete(s.plan, key)
		return true, false
	case under(s.prefix, overridesDir, key):
		delete(s.overrides, key)
		return false, true
	}
	return false, false
}

// current returns the shared plan; nil when no plan key exists.
func (s *state) current() *Plan {
	if len(s.plan) == 0 {
		return nil
	}
	p := &Plan{}
	for _, v := range s.plan {
		p.Revision = max(p.Revision, v.rev)
	}
	p.Shared.Main = s.plan[s.prefix+planShared].value
	p.Shared.Users = s.plan[s.prefix+planUsers].value
	if m, ok := s.plan[s.prefix+planMeta]; ok {
		_ = json.Unmarshal(m.value, &p.Meta) // informational only
	}
	p.Shared.Name, p.Shared.UsersName = "shared.toml", "users.toml"
	return p
}

// fleetOverrides decodes every override key, sorted by key; keys that do
// not decode are returned as problems.
func (s *state) fleetOverrides() ([]policy.Override, []string) {
	keys := make([]string, 0, len(s.overrides))
	for k := range s.overrides {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []policy.Override
	var problems []string
	for _, k := range keys {
		o, err := DecodeOverride(s.overrides[k].value)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", k, err))
			continue
		}
		if want := strings.TrimPrefix(k, s.prefix+overridesDir); want != o.Key().String() {
			problems = append(problems, fmt.Sprintf("%s: the override is for %s, not %s", k, o.Key(), want))
			continue
		}
		out = append(out, o)
	}
	return out, problems
}

// DecodeOverride reads an override key's value (policy.Override as JSON)
// and validates it.
func DecodeOverride(b []byte) (policy.Override, error) {
	var o policy.Override
	if err := json.Unmarshal(b, &o); err != nil {
		return o, fmt.Errorf("not an override: %w", err)
	}
	if err := o.Validate(); err != nil {
		return o, err
	}
	return o, nil
}

// usageOf splits a usage key into user and router.
func (s *state) usageOf(key string) (user, router string, ok bool) {
	if !under(s.prefix, usageDir, key) {
		return "", "", false
	}
	return strings.Cut(strings.TrimPrefix(key, s.prefix+usageDir), "/")
}

// putUsage records a usage key's value; it returns the user, or "" when
// the key is not a readable usage key.
func (s *state) putUsage(key string, value []byte) string {
	user, router, ok := s.usageOf(key)
	if !ok {
		return ""
	}
	var r policy.RemoteUsage
	if err := json.Unmarshal(value, &r); err != nil {
		return ""
	}
	r.Router = router
	if s.usage[user] == nil {
		s.usage[user] = map[string]policy.RemoteUsage{}
	}
	s.usage[user][router] = r
	return user
}

// delUsage forgets a usage key; it returns the user ("" for other keys).
func (s *state) delUsage(key string) string {
	user, router, ok := s.usageOf(key)
	if !ok {
		return ""
	}
	delete(s.usage[user], router)
	return user
}

// remote returns user's usage on every router but self, sorted by router.
func (s *state) remote(user, self string) []policy.RemoteUsage {
	var out []policy.RemoteUsage
	for r, u := range s.usage[user] {
		if r != self {
			out = append(out, u)
		}
	}
	slices.SortFunc(out, func(a, b policy.RemoteUsage) int { return strings.Compare(a.Router, b.Router) })
	return out
}
