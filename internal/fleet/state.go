package fleet

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/shaperd/shaperd/pkg/policy"
)

// State mirrors the plan, override and usage keys of a prefix as reads
// and a watch see them (fleetd's agent keeps one). It is not safe for
// concurrent use.
type State struct {
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

// NewState returns an empty State of prefix.
func NewState(prefix string) *State {
	return &State{prefix: prefix, plan: map[string]kv{}, overrides: map[string]kv{},
		usage: map[string]map[string]policy.RemoteUsage{}}
}

// Put records a key's value, written at revision rev; it reports which
// part changed (neither for a key outside the plan and overrides).
func (s *State) Put(key string, value []byte, rev int64) (plan, overrides bool) {
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

// Del forgets a key; it reports which part changed.
func (s *State) Del(key string) (plan, overrides bool) {
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

// Plan returns the shared plan; nil when no plan key exists.
func (s *State) Plan() *Plan {
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
	p.Shared.Name, p.Shared.UsersName = p.Meta.docNames()
	return p
}

// Overrides decodes every override key, sorted by key; keys that do not
// decode are returned as problems.
func (s *State) Overrides() ([]policy.Override, []string) {
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

// UsageOf splits a usage key into user and router; ok is false for other
// keys.
func (s *State) UsageOf(key string) (user, router string, ok bool) {
	if !under(s.prefix, usageDir, key) {
		return "", "", false
	}
	return strings.Cut(strings.TrimPrefix(key, s.prefix+usageDir), "/")
}

// PutUsage records a usage key's value; it returns the user, or "" when
// the key is not a readable usage key.
func (s *State) PutUsage(key string, value []byte) string {
	user, router, ok := s.UsageOf(key)
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

// DelUsage forgets a usage key; it returns the user ("" for other keys).
func (s *State) DelUsage(key string) string {
	user, router, ok := s.UsageOf(key)
	if !ok {
		return ""
	}
	delete(s.usage[user], router)
	return user
}

// Remote returns user's usage on every router but self, sorted by router.
func (s *State) Remote(user, self string) []policy.RemoteUsage {
	var out []policy.RemoteUsage
	for r, u := range s.usage[user] {
		if r != self {
			out = append(out, u)
		}
	}
	slices.SortFunc(out, func(a, b policy.RemoteUsage) int { return strings.Compare(a.Router, b.Router) })
	return out
}
