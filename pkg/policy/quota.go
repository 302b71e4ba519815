package policy

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
)

// FlushInterval is the persistence contract of Usage: while FlushDue reports
// true the daemon writes Usage (MarshalJSON) to its state file and then
// calls Flushed. Usage becomes due at most FlushInterval after the first
// change since the last flush, so a crash loses at most about FlushInterval
// of counted traffic (plus one sampling interval). The daemon should also
// write it on shutdown and reload.
const FlushInterval = time.Minute

// CounterKey names one kernel byte counter of a user: the interface, the
// direction and the class, e.g. "lan0/egress/1:105". Usage only compares
// keys; the daemon chooses them (they must be stable across restarts).
func CounterKey(iface string, dir config.Direction, class string) string {
	return iface + "/" + string(dir) + "/" + class
}

// Usage counts each user's bytes in the current quota period from the
// kernel's per-class byte counters, summed over every counter (interface,
// direction, class) the user has. The zero value is not usable; create one
// with NewUsage. Not safe for concurrent use.
type Usage struct {
	loc        *time.Location
	periods    map[string]config.Period // user -> period (from the plan)
	users      map[string]*userUsage
	dirty      bool      // changed since the last Flushed
	dirtySince time.Time // when the first unflushed change happened
	lastFlush  time.Time
	// rebuild: the state was lost, so a counter's first reading counts
	// whole (see Rebuild); rebuilt counts those readings.
	rebuild bool
	rebuilt int
	// remote is each user's usage on other routers of a fleet (SetRemote).
	remote map[string][]RemoteUsage
}

// RemoteUsage is a user's usage counted by another router of a fleet in
// the quota period that starts at Start.
type RemoteUsage struct {
	Router string    `json:"router"`
	Start  time.Time `json:"start"`
	Bytes  uint64    `json:"bytes"`
}

type userUsage struct {
	Period   config.Period `json:"period"`
	Start    time.Time     `json:"start"`
	Used     uint64        `json:"used"`
	Counters counterList   `json:"counters"`
	// FleetReset is when the newest fleet-wide reset applied was made
	// (ResetFleet); zero: none.
	FleetReset time.Time `json:"fleet_reset,omitzero"`
}

// NewUsage returns an empty Usage counting periods in loc (nil: time.Local)
// with every user on monthly periods until Configure says otherwise.
func NewUsage(loc *time.Location) *Usage {
	if loc == nil {
		loc = time.Local
	}
	return &Usage{loc: loc, periods: map[string]config.Period{}, users: map[string]*userUsage{}}
}

// Configure takes the time zone and each user's quota period from plan
// (users of tiers without a quota count monthly). Call it after every
// (re)load. A user no longer in the plan keeps the bytes counted in their
// period, so that removing a user and adding the same name back (an
// emptied users file, a run-time user removed and re-added) does not
// reset their quota: only the counter baselines go (their classes go
// too; a returning user's new classes start new baselines). PruneEnded
// drops such users once their period is over. When a user's
// period kind changes, the bytes counted so far carry into the new
// period when the old period began inside it (day -> month: today's
// bytes are this month's too), else the new period starts from zero
// (month -> day: the month's bytes are not all today's); it returns the
// users whose kind changed, for the log.
func (u *Usage) Configure(plan *config.Plan) (changed []string) {
	if plan.Policy.Location != nil {
		u.loc = plan.Policy.Location
	}
	u.periods = make(map[string]config.Period, len(plan.Users))
	for _, usr := range plan.Users {
		p := config.PeriodMonth
		if t, ok := plan.Tier(usr.Tier); ok {
			if t = config.TierFor(t, &usr); t.Quota != 0 && t.QuotaPeriod != "" {
				p = t.QuotaPeriod
			}
		}
		u.periods[usr.Name] = p
	}
	for name := range u.remote {
		if _, ok := u.periods[name]; !ok {
			delete(u.remote, name)
		}
	}
	for name, uu := range u.users {
		p, ok := u.periods[name]
		switch {
		case !ok:
			if len(uu.Counters) > 0 {
				uu.Counters = nil
				u.touch(time.Time{})
			}
		case uu.Period != p:
			changed = append(changed, name)
		}
	}
	slices.Sort(changed)
	return changed
}

// PruneEnded forgets the users the plan no longer has (see Configure)
// whose stored period ended at or before now: their count no longer
// matters to anyone. It returns how many it forgot.
func (u *Usage) PruneEnded(now time.Time) int {
	n := 0
	for name, uu := range u.users {
		if _, ok := u.periods[name]; ok {
			continue
		}
		if _, end := PeriodBounds(uu.Period, uu.Start, u.loc); !now.Before(end) {
			delete(u.users, name)
			n++
		}
	}
	if n > 0 {
		u.touch(now)
	}
	return n
}

// carries reports whether uu's count carries into period kind p, whose
// period containing the time in question starts at start: the old period
// began inside the new one.
func (uu *userUsage) carries(p config.Period, start time.Time) bool {
	return uu.Period != p && !uu.Start.Before(start)
}

func (u *Usage) period(user string) config.Period {
	if p, ok := u.periods[user]; ok {
		return p
	}
	return config.PeriodMonth
}

// Observe records that counter key of user read counterBytes at now.
//
//   - The first reading of a key is its baseline: it counts nothing (the
//     bytes before it are unknown). The daemon should Observe a class with
//     0 when it creates it, so that none of its bytes are missed. After
//     Rebuild the first reading counts whole instead.
//   - A reading at or above the last one adds the difference.
//   - A reading below the last one means the counter restarted (the class
//     was re-created): it counts its whole value, from 0.
//   - Used restarts at 0 only when the period has really begun: now lies
//     in a later period than the stored one (its start is after the stored
//     start), or the user's period kind changed. A clock stepped back, even
//     into an earlier period, keeps the stored period and its count (the
//     bytes are added to it); a clock moved forward within the period
//     changes nothing. The bytes since the last reading are counted in the
//     period of now.
func (u *Usage) Observe(user, key string, counterBytes uint64, now time.Time) {
	uu := u.users[user]
	p := u.period(user)
	start, _ := PeriodBounds(p, now, u.loc)
	if uu == nil {
		uu = &userUsage{Period: p, Start: start}
		u.users[user] = uu
	} else if uu.carries(p, start) {
		uu.Period, uu.Start = p, start
	} else if uu.Period != p || start.After(uu.Start) {
		uu.Period, uu.Start, uu.Used = p, start, 0
	}
	last, seen := uu.Counters.set(key, counterBytes)
	switch {
	case !seen:
		if u.rebuild {
			uu.Used += counterBytes
			u.rebuilt++
		}
	case counterBytes >= last:
		uu.Used += counterBytes - last
	default:
		uu.Used += counterBytes
	}
	u.touch(now)
}

// Rebuild is for a Usage whose saved state was lost (a missing or corrupt
// state file): from now on the first reading of a counter it does not know
// counts its whole value in the current period instead of being a
// baseline. A kernel class counter counts from the class's creation, so
// this recovers a user's bytes exactly when their classes were created in
// the current period, over-counts by the bytes of earlier periods when the
// classes are older, and cannot recover bytes of classes that were
// deleted or re-created since (their counters restarted). Quotas thus err
// on the side of counting too much, never silently too little.
func (u *Usage) Rebuild() { u.rebuild = true }

// Rebuilt returns how many counters were counted whole since Rebuild.
func (u *Usage) Rebuilt() int { return u.rebuilt }

// Forget drops the baseline of one counter (its class was deleted), so a
// later counter under the same key starts with a new baseline.
func (u *Usage) Forget(user, key string) {
	if uu := u.users[user]; uu != nil {
		if uu.Counters.remove(key) {
			u.touch(time.Time{})
		}
	}
}

// touch marks the state changed at now (zero: long ago, so due at once).
func (u *Usage) touch(now time.Time) {
	if !u.dirty {
		u.dirty, u.dirtySince = true, now
	}
}

// Used returns the bytes user has moved in the period p containing now
// (on this router, plus on the fleet's other routers: SetRemote), and
// that period's bounds. A stored count from an earlier period (the
// period rolled over and no Observe has happened since) reads as 0. When
// now lies before the stored period (the clock stepped back), the stored
// period is still the current one: its count and bounds are returned. It
// does not change u.
func (u *Usage) Used(user string, p config.Period, now time.Time) (used uint64, start, end time.Time) {
	used, start, end = u.Own(user, p, now)
	for _, r := range u.remote[user] {
		if r.Start.Equal(start) {
			used += r.Bytes
		}
	}
	return used, start, end
}

// SetRemote replaces user's usage on the other routers of a fleet: Used
// adds the entries whose Start is the start of the period it reports
// (entries of other periods count nothing). nil forgets them.
func (u *Usage) SetRemote(user string, rs []RemoteUsage) {
	if len(rs) == 0 {
		delete(u.remote, user)
		return
	}
	if u.remote == nil {
		u.remote = map[string][]RemoteUsage{}
	}
	u.remote[user] = rs
}

// Own is Used without the other routers' usage (SetRemote): the bytes
// this router counted, which it reports to the fleet.
func (u *Usage) Own(user string, p config.Period, now time.Time) (used uint64, start, end time.Time) {
	start, end = PeriodBounds(p, now, u.loc)
	if uu := u.users[user]; uu != nil && uu.carries(p, start) {
		return uu.Used, start, end
	}
	if uu := u.users[user]; uu != nil && uu.Period == p && !start.After(uu.Start) {
		if !start.Equal(uu.Start) {
			start, end = PeriodBounds(p, uu.Start, u.loc)
		}
		used = uu.Used
	}
	return used, start, end
}

// Reset sets user's count of the current period to zero and returns what
// it was. The counters' baselines are kept, so only bytes after the reset
// count; the period is unchanged.
func (u *Usage) Reset(user string, now time.Time) uint64 {
	uu := u.users[user]
	if uu == nil {
		return 0
	}
	was := uu.Used
	uu.Used = 0
	u.touch(now)
	return was
}

// ResetFleet applies a fleet-wide reset of user's quota made at `at`
// (every router of a fleet gets it, also again after a restart or an
// etcd outage): unless a reset made at or after at was applied already,
// the count of the current period becomes zero as Reset makes it, and at
// is recorded, so that each reset is applied once and the bytes counted
// after it are never forgiven by it again. It returns what the count was
// and whether the reset applied.
func (u *Usage) ResetFleet(user string, at, now time.Time) (was uint64, applied bool) {
	uu := u.users[user]
	if uu == nil { // nothing counted yet: remember the reset all the same
		p := u.period(user)
		start, _ := PeriodBounds(p, now, u.loc)
		uu = &userUsage{Period: p, Start: start}
		u.users[user] = uu
	}
	if !uu.FleetReset.Before(at) {
		return 0, false
	}
	was = uu.Used
	uu.Used, uu.FleetReset = 0, at
	u.touch(now)
	return was, true
}

// Location is the time zone periods are counted in.
func (u *Usage) Location() *time.Location { return u.loc }

// FlushDue reports whether the daemon should write the state now: something
// changed since the last Flushed and FlushInterval has passed since then (or
// since that change, when nothing was flushed yet). A clock stepped back
// behind that instant makes it due at once, so that a step back cannot
// hold the writes off for as long as the step.
func (u *Usage) FlushDue(now time.Time) bool {
	if !u.dirty {
		return false
	}
	since := u.lastFlush
	if since.IsZero() {
		since = u.dirtySince
	}
	return now.Before(since) || !now.Before(since.Add(FlushInterval))
}

// Flushed records that the state was written at now.
func (u *Usage) Flushed(now time.Time) {
	u.dirty, u.dirtySince, u.lastFlush = false, time.Time{}, now
}

type usageJSON struct {
	Version int                   `json:"version"`
	Users   map[string]*userUsage `json:"users"`
}

// MarshalJSON writes the per-user periods, counts and counter baselines:
// {"version":1,"users":{"alice":{"period":"month","start":"2026-12-01T00:00:00+01:00",
// "used":123,"counters":{"lan0/egress/1:105":456}}}}. The location and the
// user periods are configuration, not state: call Configure after loading.
func (u *Usage) MarshalJSON() ([]byte, error) {
	return json.Marshal(usageJSON{Version: 1, Users: u.users})
}

// UnmarshalJSON reads what MarshalJSON writes, replacing the counts and
// baselines (the location and periods stay). Times are read back in the
// stored offsets; periods compare by instant, so that is enough.
func (u *Usage) UnmarshalJSON(b []byte) error {
	var v usageJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	if v.Version != 1 {
		return fmt.Errorf("usage: unsupported version %d", v.Version)
	}
	users := make(map[string]*userUsage, len(v.Users))
	for _, name := range slices.Sorted(maps.Keys(v.Users)) {
		uu := v.Users[name]
		if uu == nil {
			return fmt.Errorf("usage: user %q: null entry", name)
		}
		switch uu.Period {
		case config.PeriodDay, config.PeriodWeek, config.PeriodMonth:
		default:
			return fmt.Errorf("usage: user %q: unknown period %q", name, uu.Period)
		}
		if uu.Start.IsZero() {
			return fmt.Errorf("usage: user %q: no period start", name)
		}
		if y := uu.Start.Year(); y < 1 || y > 9998 { // the period's end must be a JSON time too
			return fmt.Errorf("usage: user %q: period start %s out of range", name, uu.Start.Format(time.RFC3339))
		}
		users[name] = uu
	}
	if u.loc == nil {
		u.loc = time.Local
	}
	if u.periods == nil {
		u.periods = map[string]config.Period{}
	}
	u.users = users
	return nil
}

// counterList is a user's counter baselines: a user has a few counters
// (one class per interface and direction), so a list searched in order
// holds them in a fraction of a map's memory. Its JSON is an object of
// key: bytes, as a map's is.
type counterList []counterEntry

type counterEntry struct {
	key   string
	bytes uint64
}

// set stores bytes under key and returns the previous value, if any.
func (l *counterList) set(key string, bytes uint64) (last uint64, seen bool) {
	for i := range *l {
		if e := &(*l)[i]; e.key == key {
			last, e.bytes = e.bytes, bytes
			return last, true
		}
	}
	*l = append(*l, counterEntry{key, bytes})
	return 0, false
}

// remove drops key; it reports whether it was there.
func (l *counterList) remove(key string) bool {
	for i := range *l {
		if (*l)[i].key == key {
			*l = slices.Delete(*l, i, i+1)
			return true
		}
	}
	return false
}

// MarshalJSON writes {"key":bytes,...} in key order, as encoding/json
// writes a map.
func (l counterList) MarshalJSON() ([]byte, error) {
	m := make(map[string]uint64, len(l))
	for _, e := range l {
		m[e.key] = e.bytes
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads what MarshalJSON writes (null: none).
func (l *counterList) UnmarshalJSON(b []byte) error {
	var m map[string]uint64
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*l = nil
	for _, k := range slices.Sorted(maps.Keys(m)) {
		*l = append(*l, counterEntry{k, m[k]})
	}
	return nil
}
