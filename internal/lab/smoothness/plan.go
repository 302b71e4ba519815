package smoothness

import (
	"fmt"
	"net/netip"
	"testing/fstest"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// UserName is the one user of the HTB plan; TierName its tier.
const (
	UserName = "alice"
	TierName = "t"
)

// HTBBandwidth is the HTB interface's bandwidth in the plan: far above the
// user's rates, so only the user's class limits the download.
const HTBBandwidth = tbf.Gbit

// Plan returns the configuration a case runs under: one interface dev (HTB
// with one tier at c.From and user UserName at addr, or a TBF at c.From with
// c.Burst) and the policy with interval and ramp (timezone UTC).
func Plan(c Case, dev string, addr netip.Addr, interval, ramp time.Duration) (*config.Plan, error) {
	main, users, err := planText(c, dev, addr, interval, ramp)
	if err != nil {
		return nil, err
	}
	fs := fstest.MapFS{
		"shaperd.toml": {Data: []byte(main)},
		"users.toml":   {Data: []byte(users)},
	}
	p, err := config.LoadFS(fs, "shaperd.toml")
	if err != nil {
		return nil, fmt.Errorf("case %s: plan: %w\n%s", c, err, main)
	}
	return p, nil
}

// planText is Plan's configuration as the files say it: shaperd.toml
// (without a [daemon] table) and users.toml.
func planText(c Case, dev string, addr netip.Addr, interval, ramp time.Duration) (main, users string, err error) {
	main = fmt.Sprintf("[policy]\ninterval = %q\nramp = %q\ntimezone = \"UTC\"\n\n", interval, ramp)
	switch c.Shaper {
	case model.ShaperHTB:
		main += fmt.Sprintf("[[interface]]\nname = %q\nshaper = \"htb\"\nbandwidth = %q\n\n", dev, HTBBandwidth)
	case model.ShaperTBF:
		// The bandwidth is the higher rate: the daemon refuses an
		// interface override above it. The run starts at From with one.
		main += fmt.Sprintf("[[interface]]\nname = %q\nshaper = \"tbf\"\nbandwidth = %q\n", dev, max(c.From, c.To))
		if c.Burst != 0 {
			main += fmt.Sprintf("burst = %d\n", uint64(c.Burst))
		}
		main += "\n"
	default:
		return "", "", fmt.Errorf("case %s: unknown shaper %q", c, c.Shaper)
	}
	main += fmt.Sprintf("[tiers.%s]\nrate = %q\n", TierName, c.From)
	users = fmt.Sprintf("[[user]]\nname = %q\ntier = %q\naddresses = [%q]\n", UserName, TierName, addr)
	return main, users, nil
}
