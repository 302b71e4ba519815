package fleet

import (
	"github.com/BurntSushi/toml"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/policy"
)

// CacheFile is the last shared plan and fleet overrides a router applied,
// in its daemon.state_dir, so that a restart without etcd shapes as before
// (and `shaperd --check` checks with it).
const CacheFile = "fleet-cache.json"

// Cache is CacheFile's contents (JSON).
type Cache struct {
	Plan      *Plan             `json:"plan"`
	Overrides []policy.Override `json:"overrides"`
}

// PeekLocal reads daemon.state_dir (config.DefaultStateDir when the key
// is absent or the file does not parse) and whether [fleet] is set from a
// router's main file, before the plan can be loaded (loading it may need
// the cached shared plan).
func PeekLocal(path string) (stateDir string, hasFleet bool) {
	var raw struct {
		Daemon struct {
			StateDir string `toml:"state_dir"`
		} `toml:"daemon"`
		Fleet map[string]any `toml:"fleet"`
	}
	stateDir = config.DefaultStateDir
	if _, err := toml.DecodeFile(path, &raw); err != nil {
		return stateDir, false
	}
	if raw.Daemon.StateDir != "" {
		stateDir = raw.Daemon.StateDir
	}
	return stateDir, raw.Fleet != nil
}
