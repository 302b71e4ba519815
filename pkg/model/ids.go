package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// ErrTooManyUsers is returned (wrapped) when an interface has more users than
// there are user class minors (FirstUserMinor..LastUserMinor: 65279).
var ErrTooManyUsers = errors.New("too many users")

// ErrTooManyTiers is returned (wrapped) when an interface has more tiers with
// an aggregate class than there are tier minors (FirstTierMinor..LastTierMinor: 240).
var ErrTooManyTiers = errors.New("too many tiers with an aggregate class")

// MaxUsers is the number of user classes one interface can hold.
const MaxUsers = int(LastUserMinor) - int(FirstUserMinor) + 1

// MaxTiers is the number of tier aggregate classes one interface can hold.
const MaxTiers = int(LastTierMinor) - int(FirstTierMinor) + 1

// Assignment maps user names and tier names to the minors of their HTB
// classes on one interface, so that a user keeps its class (and the kernel's
// counters and token state) across rebuilds, reloads and daemon restarts.
//
// New names get the lowest free minor at or after a cursor that only moves
// forward (wrapping at the end of the range), "next fit" as the kernel hands
// out PIDs. A minor released by a removed user is therefore not handed to a
// different user until the range has wrapped: a new user never inherits the
// counters, queue or token state of a class that someone else just left.
// Within one Assign call new names are taken in sorted order, so the result
// is a pure function of the previous Assignment and the given names.
// Stability across restarts comes from persisting the Assignment (it
// marshals to JSON) or, without a state file, from AssignmentFromTree.
//
// The zero value is an empty Assignment, as NewAssignment returns. Use it by
// pointer (*Assignment carries the JSON methods). It is not safe for
// concurrent use.
type Assignment struct {
	users *pool
	tiers *pool
	// queues is set by AssignQueues (per-queue trees under mq).
	queues *queueState
}

// NewAssignment returns an empty Assignment.
func NewAssignment() *Assignment {
	return &Assignment{
		users: newPool(FirstUserMinor, LastUserMinor),
		tiers: newPool(FirstTierMinor, LastTierMinor),
	}
}

// u returns the user pool, creating it in a zero Assignment.
func (a *Assignment) u() *pool {
	if a.users == nil {
		a.users = newPool(FirstUserMinor, LastUserMinor)
	}
	return a.users
}

// t returns the tier pool, creating it in a zero Assignment.
func (a *Assignment) t() *pool {
	if a.tiers == nil {
		a.tiers = newPool(FirstTierMinor, LastTierMinor)
	}
	return a.tiers
}

// Assign gives every name in users a user class minor: names that already
// have one keep it, names no longer listed are released, new names get
// minors as described on Assignment. Duplicate names count once. More than
// MaxUsers names is an error wrapping ErrTooManyUsers, and then the
// Assignment is unchanged.
func (a *Assignment) Assign(users []string) error {
	if err := a.u().assign(users); err != nil {
		return fmt.Errorf("%d users: %w: an interface holds at most %d user classes (minors %x..%x)",
			countUnique(users), ErrTooManyUsers, MaxUsers, FirstUserMinor, LastUserMinor)
	}
	return nil
}

// AssignTiers does for tier aggregate classes what Assign does for users;
// more than MaxTiers names is an error wrapping ErrTooManyTiers.
func (a *Assignment) AssignTiers(tiers []string) error {
	if err := a.t().assign(tiers); err != nil {
		return fmt.Errorf("%d tiers: %w: an interface holds at most %d tier classes (minors %x..%x)",
			countUnique(tiers), ErrTooManyTiers, MaxTiers, FirstTierMinor, LastTierMinor)
	}
	return nil
}

// User returns the minor of user's class.
func (a *Assignment) User(user string) (uint16, bool) {
	m, ok := a.u().byName[user]
	return m, ok
}

// Tier returns the minor of tier's aggregate class.
func (a *Assignment) Tier(tier string) (uint16, bool) {
	m, ok := a.t().byName[tier]
	return m, ok
}

// Users returns a copy of the user name -> minor map.
func (a *Assignment) Users() map[string]uint16 {
	out := make(map[string]uint16, len(a.u().byName))
	for n, m := range a.u().byName {
		if !isNodeKey(n) {
			out[n] = m
		}
	}
	return out
}

// Node classes take their minors from the users' range (there are far
// more nodes than tier minors in a large network), under a key no user
// name can have: nodeKeyPrefix and the node's name.
const nodeKeyPrefix = "/"

// nodeKey is node's name in the users' pool.
func nodeKey(node string) string { return nodeKeyPrefix + node }

// isNodeKey reports whether a name in the users' pool is a node's.
func isNodeKey(name string) bool { return len(name) > 0 && name[0] == nodeKeyPrefix[0] }

// Node returns the minor of node's class (from the users' range).
func (a *Assignment) Node(node string) (uint16, bool) {
	m, ok := a.u().byName[nodeKey(node)]
	return m, ok
}

// NodeByMinor returns the node whose class has minor m.
func (a *Assignment) NodeByMinor(m uint16) (string, bool) {
	n, ok := a.u().nameOf(m)
	if !ok || !isNodeKey(n) {
		return "", false
	}
	return n[len(nodeKeyPrefix):], true
}

// Nodes returns a copy of the node name -> minor map.
func (a *Assignment) Nodes() map[string]uint16 {
	out := map[string]uint16{}
	for n, m := range a.u().byName {
		if isNodeKey(n) {
			out[n[len(nodeKeyPrefix):]] = m
		}
	}
	return out
}

// SetNode pins node's class to minor m; see SetUser.
func (a *Assignment) SetNode(node string, m uint16) error {
	if err := a.u().set(nodeKey(node), m); err != nil {
		return fmt.Errorf("node %q: %w", node, err)
	}
	return nil
}

// Tiers returns a copy of the tier name -> minor map.
func (a *Assignment) Tiers() map[string]uint16 { return maps.Clone(a.t().byName) }

// UserByMinor returns the user whose class has minor m.
func (a *Assignment) UserByMinor(m uint16) (string, bool) {
	n, ok := a.u().nameOf(m)
	if !ok || isNodeKey(n) {
		return "", false
	}
	return n, true
}

// TierByMinor returns the tier whose aggregate class has minor m.
func (a *Assignment) TierByMinor(m uint16) (string, bool) { return a.t().nameOf(m) }

// SetUser pins user to minor m, as a recovered or operator-chosen
// assignment. It fails if m is outside the user range or held by another user.
func (a *Assignment) SetUser(user string, m uint16) error {
	if err := a.u().set(user, m); err != nil {
		return fmt.Errorf("user %q: %w", user, err)
	}
	return nil
}

// SetTier pins tier to minor m; see SetUser.
func (a *Assignment) SetTier(tier string, m uint16) error {
	if err := a.t().set(tier, m); err != nil {
		return fmt.Errorf("tier %q: %w", tier, err)
	}
	return nil
}

// Clone returns an independent copy.
func (a *Assignment) Clone() *Assignment {
	c := &Assignment{users: a.u().clone(), tiers: a.t().clone()}
	if a.queues != nil {
		c.queues = a.queues.clone()
	}
	return c
}

// assignmentJSON is the state-file form of an Assignment. NextUser/NextTier
// are the allocation cursors, kept so that released minors stay unused
// across restarts too.
type assignmentJSON struct {
	Users    map[string]uint16 `json:"users"`
	Tiers    map[string]uint16 `json:"tiers"`
	NextUser uint16            `json:"next_user,omitempty"`
	NextTier uint16            `json:"next_tier,omitempty"`
	// Queues holds the per-queue trees' assignments (InterfaceSpec.Queues > 1).
	Queues *queueJSON `json:"queues,omitempty"`
}

// MarshalJSON writes {"users":{"alice":256},"tiers":{"gold":16},"next_user":257,"next_tier":17}
// (minors in decimal).
func (a *Assignment) MarshalJSON() ([]byte, error) {
	j := assignmentJSON{
		Users: a.u().byName, Tiers: a.t().byName,
		NextUser: a.u().next, NextTier: a.t().next,
	}
	if a.queues != nil {
		j.Queues = a.queues.toJSON()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes. Minors outside their range or
// held twice are errors; a missing or out-of-range cursor restarts after the
// highest minor in use.
func (a *Assignment) UnmarshalJSON(b []byte) error {
	var j assignmentJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("class id assignment: %w", err)
	}
	n, err := assignmentFromJSON(j)
	if err != nil {
		return err
	}
	if j.Queues != nil {
		if n.queues, err = queueStateFromJSON(j.Queues); err != nil {
			return fmt.Errorf("class id assignment: %w", err)
		}
	}
	*a = *n
	return nil
}

// assignmentFromJSON rebuilds the user and tier pools of j.
func assignmentFromJSON(j assignmentJSON) (*Assignment, error) {
	n := NewAssignment()
	for _, name := range sortedKeys(j.Users) {
		if err := n.SetUser(name, j.Users[name]); err != nil {
			return nil, fmt.Errorf("class id assignment: %w", err)
		}
	}
	for _, name := range sortedKeys(j.Tiers) {
		if err := n.SetTier(name, j.Tiers[name]); err != nil {
			return nil, fmt.Errorf("class id assignment: %w", err)
		}
	}
	n.users.setCursor(j.NextUser)
	n.tiers.setCursor(j.NextTier)
	return n, nil
}

// pool hands out minors lo..hi to names.
type pool struct {
	lo, hi uint16
	next   uint16 // the next minor to try (next fit)
	byName map[string]uint16
	owner  map[uint16]string
}

func newPool(lo, hi uint16) *pool {
	return &pool{lo: lo, hi: hi, next: lo, byName: map[string]uint16{}, owner: map[uint16]string{}}
}

func (p *pool) size() int { return int(p.hi) - int(p.lo) + 1 }

func (p *pool) nameOf(m uint16) (string, bool) {
	n, ok := p.owner[m]
	return n, ok
}

func (p *pool) clone() *pool {
	return &pool{lo: p.lo, hi: p.hi, next: p.next, byName: maps.Clone(p.byName), owner: maps.Clone(p.owner)}
}

// assign keeps listed names, releases the others and allocates new ones.
func (p *pool) assign(names []string) error {
	want := make(map[string]struct{}, len(names))
	for _, n := range names {
		want[n] = struct{}{}
	}
	if len(want) > p.size() {
		return errors.New("exhausted")
	}
	for n, m := range p.byName {
		if _, ok := want[n]; !ok {
			delete(p.byName, n)
			delete(p.owner, m)
		}
	}
	var fresh []string
	for n := range want {
		if _, ok := p.byName[n]; !ok {
			fresh = append(fresh, n)
		}
	}
	slices.Sort(fresh)
	for _, n := range fresh {
		m := p.nextFree()
		p.byName[n] = m
		p.owner[m] = n
	}
	return nil
}

// nextFree returns the first free minor at or after the cursor, wrapping,
// and moves the cursor past it. The caller guarantees a free minor exists.
func (p *pool) nextFree() uint16 {
	m := p.next
	for {
		if _, used := p.owner[m]; !used {
			break
		}
		m = p.step(m)
	}
	p.next = p.step(m)
	return m
}

func (p *pool) step(m uint16) uint16 {
	if m >= p.hi {
		return p.lo
	}
	return m + 1
}

func (p *pool) set(name string, m uint16) error {
	if m < p.lo || m > p.hi {
		return fmt.Errorf("minor %x outside %x..%x", m, p.lo, p.hi)
	}
	if o, ok := p.owner[m]; ok && o != name {
		return fmt.Errorf("minor %x already belongs to %q", m, o)
	}
	if old, ok := p.byName[name]; ok {
		delete(p.owner, old)
	}
	p.byName[name] = m
	p.owner[m] = name
	return nil
}

// setCursor sets the cursor to c, or (c out of range) to just after the
// highest minor in use.
func (p *pool) setCursor(c uint16) {
	if c >= p.lo && c <= p.hi {
		p.next = c
		return
	}
	p.next = p.lo
	if len(p.owner) == 0 {
		return
	}
	hi := p.lo
	for m := range p.owner {
		hi = max(hi, m)
	}
	p.next = p.step(hi)
}

func countUnique(names []string) int {
	seen := make(map[string]struct{}, len(names))
	for _, n := range names {
		seen[n] = struct{}{}
	}
	return len(seen)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
