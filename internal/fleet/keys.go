package fleet

import (
	"strings"

	"github.com/shaperd/shaperd/pkg/policy"
)

// Key names under the prefix.
const (
	planDir      = "/plan/"
	planShared   = "/plan/shared"
	planUsers    = "/plan/users"
	planMeta     = "/plan/meta"
	overridesDir = "/overrides/"
	routersDir   = "/routers/"
	aliveDir     = "/alive/"
	usageDir     = "/usage/"
	resetDir     = "/quota-reset/"
)

// PlanDir is the directory of the plan's keys under prefix
// ("PREFIX/plan/", with the slash).
func PlanDir(prefix string) string { return prefix + planDir }

// OverridesDir is the directory of the fleet overrides under prefix
// ("PREFIX/overrides/").
func OverridesDir(prefix string) string { return prefix + overridesDir }

// UsageDir is the directory of the quota ledger under prefix
// ("PREFIX/usage/").
func UsageDir(prefix string) string { return prefix + usageDir }

// QuotaResetDir is the directory of the fleet-wide quota resets under
// prefix ("PREFIX/quota-reset/").
func QuotaResetDir(prefix string) string { return prefix + resetDir }

// QuotaResetKey is the fleet-wide quota reset key of user
// ("PREFIX/quota-reset/USER").
func QuotaResetKey(prefix, user string) string { return prefix + resetDir + user }

// RouterKey is router's kept registration key ("PREFIX/routers/NAME").
func RouterKey(prefix, router string) string { return prefix + routersDir + router }

// AliveKey is router's registration key attached to its lease
// ("PREFIX/alive/NAME").
func AliveKey(prefix, router string) string { return prefix + aliveDir + router }

// UsageKey is router's usage key of user ("PREFIX/usage/USER/ROUTER").
func UsageKey(prefix, user, router string) string {
	return prefix + usageDir + user + "/" + router
}

// overrideKey is the key of a fleet override of k.
func overrideKey(prefix string, k policy.Key) string {
	return prefix + overridesDir + k.String()
}

// under reports whether key is in the directory dir ("/plan/", ...) of prefix.
func under(prefix, dir, key string) bool {
	return strings.HasPrefix(key, prefix+dir)
}
