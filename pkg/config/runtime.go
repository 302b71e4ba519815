package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
)

// RuntimeSource is the Source of a user added at run time (shaperctl user
// add), not written in users.toml.
const RuntimeSource = "runtime"

// ParseAddress reads one address as users.toml's addresses are read: an IP
// address (a /32 or /128) or a CIDR prefix without host bits.
func ParseAddress(s string) (netip.Prefix, error) { return parseAddress(s) }

// CheckUserIndexed checks u, a user added or changed at run time, the way
// users.toml's [[user]] entries are checked: the name rule, a known tier,
// rate and ceil (ceil not below rate), and no address that overlaps
// another address of u or one of another user of plan (named, with where
// that user is written). plan's entry named u.Name, if any, is the one u
// replaces and is not compared. The problems are joined, one a line.
// Checks that need the whole plan (rates above the bandwidth, prefix
// lengths the classifier refuses) are offline.Plan's (internal/check/offline).
//
// The other users' addresses are looked up in idx (which must index
// plan's users) instead of scanned: its time does not grow with the
// number of users. The overlaps are listed per address of u, shortest
// overlapping prefix first.
func CheckUserIndexed(plan *Plan, u User, idx *PrefixIndex) error {
	errs := checkUserOwn(plan, u)
	for _, p := range u.Prefixes {
		idx.Overlapping(p, func(q netip.Prefix, o IndexedUser) {
			if o.Name != u.Name {
				errs = append(errs, overlapError(p, u.Name, q, o.Name, o.Source))
			}
		})
	}
	return errors.Join(errs...)
}

// overlapError says that address p of user overlaps q of user other
// (written at source).
func overlapError(p netip.Prefix, user string, q netip.Prefix, other, source string) error {
	return fmt.Errorf("%s of user %q overlaps %s of user %q (%s)",
		showPrefix(p), user, showPrefix(q), other, userWhere(&User{Source: source}))
}

// checkUserOwn is CheckUserIndexed's checks of u itself: name, tier, rates and
// its own addresses.
func checkUserOwn(plan *Plan, u User) []error {
	var errs []error
	if !ValidName(u.Name) {
		errs = append(errs, fmt.Errorf("user name %q is not valid: use %s", u.Name, NameRule))
	}
	if tierIndex(plan.Tiers, u.Tier) < 0 {
		errs = append(errs, fmt.Errorf("unknown tier %q for user %q (%s)", u.Tier, u.Name, tierList(plan.Tiers)))
	}
	if _, ok := plan.Node(u.Node); u.Node != "" && !ok {
		errs = append(errs, fmt.Errorf("unknown node %q for user %q (%s)", u.Node, u.Name, nodeList(plan.Nodes)))
	}
	if u.Rate != 0 && u.Rate < MinRate || u.Ceil != 0 && u.Ceil < MinRate {
		errs = append(errs, fmt.Errorf("user %q: rate and ceil must be at least %s", u.Name, MinRate))
	}
	if u.Rate != 0 && u.Ceil != 0 && u.Ceil < u.Rate {
		errs = append(errs, fmt.Errorf("user %q: ceil %s is below rate %s", u.Name, u.Ceil, u.Rate))
	}
	for i, p := range u.Prefixes {
		if p.Masked() != p || !p.IsValid() {
			errs = append(errs, fmt.Errorf("user %q: %s is not a valid prefix", u.Name, p))
		}
		for _, q := range u.Prefixes[:i] {
			if p.Overlaps(q) {
				errs = append(errs, fmt.Errorf("%s of user %q overlaps %s of the same user", showPrefix(p), u.Name, showPrefix(q)))
			}
		}
	}
	return errs
}

// userWhere says where a user is defined, for messages.
func userWhere(u *User) string {
	if u.Source == RuntimeSource {
		return "added at run time"
	}
	return "at " + u.Source
}

// PrefixConflict is one address of a later user that overlaps an address
// of an earlier one (see Conflicts).
type PrefixConflict struct {
	// User and Prefix are the later user's index and address; Other and
	// OtherPrefix the earlier user's.
	User, Other         int
	Prefix, OtherPrefix netip.Prefix
}

// String describes the conflict for logs.
func (c PrefixConflict) String() string {
	return showPrefix(c.Prefix) + " overlaps " + showPrefix(c.OtherPrefix) + " of user #" + strconv.Itoa(c.Other)
}

// Conflicts returns every pair of overlapping addresses of different
// users, each reported at the later user (the higher index): what keeps
// users from being one plan. It takes O(n log n + pairs) time.
func Conflicts(users []User) []PrefixConflict {
	var entries []addrEntry
	for i := range users {
		for _, p := range users[i].Prefixes {
			entries = append(entries, addrEntry{prefix: p, user: i})
		}
	}
	var out []PrefixConflict
	for _, pr := range overlaps(entries) {
		a, b := entries[pr[0]], entries[pr[1]]
		if a.user == b.user {
			continue
		}
		if a.user > b.user {
			a, b = b, a
		}
		out = append(out, PrefixConflict{User: b.user, Other: a.user, Prefix: b.prefix, OtherPrefix: a.prefix})
	}
	return out
}
