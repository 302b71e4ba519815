package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/shaperd/shaperd/internal/check/offline"
	"github.com/shaperd/shaperd/internal/fleet"
	"github.com/shaperd/shaperd/pkg/config"
)

// routerPlan loads and checks the file at path offline as the daemon
// would start with it, and returns the plan it checked (nil when it does
// not load). Without [fleet] it is offline.Load. With [fleet] it checks
// the file with the shared plan the daemon would start with: the current
// one in etcd (asked with fleet.dial_timeout), else the cached one in
// state_dir, else none (the file alone, with its own tiers and users).
// note says which.
func routerPlan(path string) (plan *config.Plan, errs []config.Error, note string) {
	f, err := config.LoadFleet(path)
	if err != nil || f == nil {
		plan, errs = offline.Load(path)
		return plan, errs, ""
	}
	var p *fleet.Plan
	// etcd says why there is no shared plan from it: unreachable (with
	// the error), or reachable with none pushed under the prefix.
	eps := strings.Join(f.Endpoints, ",")
	etcd := "etcd " + eps + " unreachable"
	c, err := fleet.Dial(f)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), f.DialTimeout)
		p, err = fleet.Pull(ctx, c, f.Prefix)
		cancel()
		c.Close()
	}
	switch {
	case err != nil:
		etcd += " (" + err.Error() + ")"
	case p != nil:
		note = fmt.Sprintf("checked with the fleet's shared plan, revision %d (etcd %s)", p.Revision, eps)
	default:
		etcd = fmt.Sprintf("etcd %s holds no shared plan under %s (none pushed yet)", eps, f.Prefix)
	}
	if p == nil {
		stateDir, _ := fleet.PeekLocal(path)
		var cached fleet.Cache
		if b, err := os.ReadFile(filepath.Join(stateDir, fleet.CacheFile)); err == nil && json.Unmarshal(b, &cached) == nil && cached.Plan != nil {
			p = cached.Plan
			note = fmt.Sprintf("%s; checked with the cached shared plan, revision %d", etcd, p.Revision)
		}
	}
	if p == nil {
		plan, errs = offline.Load(path)
		return plan, errs, "no shared plan (" + etcd + ", none cached): checked the file alone, with its own tiers and users"
	}
	plan, err = config.LoadShared(path, p.SharedFor())
	if err != nil {
		var ce *config.Errors
		if errors.As(err, &ce) {
			return nil, ce.List, note
		}
		return nil, []config.Error{{File: path, Msg: err.Error()}}, note
	}
	return plan, offline.Plan(plan), note
}
