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
)

// usageKey is router's usage key of user.
func usageKey(prefix, user, router string) string {
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
