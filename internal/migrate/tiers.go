package migrate

import (
	"fmt"
	"strings"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// rates are a circuit's four rates: a tier's identity in LibreQoS terms.
type rates struct{ downMin, upMin, downMax, upMax tbf.Rate }

func circuitRates(c Circuit) rates { return rates{c.DownMin, c.UpMin, c.DownMax, c.UpMax} }

// AutoTiers makes one tier per distinct set of rates of the circuits, in
// order of first use: rate/ceil are the download min/max, upload_rate/
// upload_ceil the upload min/max. A tier is named "lqos-DOWN-UP" after its
// maximum rates in Mbit/s ('.' written '_'), with "-min-DOWN-UP" added when
// two sets share the maximums. It returns the tiers and every circuit's
// user with its tier set.
func AutoTiers(circuits []Circuit) ([]Tier, []User) {
	maxUses := map[[2]tbf.Rate]int{}
	seen := map[rates]bool{}
	for _, c := range circuits {
		r := circuitRates(c)
		if !seen[r] {
			seen[r] = true
			maxUses[[2]tbf.Rate{r.downMax, r.upMax}]++
		}
	}
	var tiers []Tier
	names := map[rates]string{}
	users := CircuitUsers(circuits, func(c Circuit) User {
		r := circuitRates(c)
		name, ok := names[r]
		if !ok {
			name = "lqos-" + mbps(r.downMax) + "-" + mbps(r.upMax)
			if maxUses[[2]tbf.Rate{r.downMax, r.upMax}] > 1 {
				name += "-min-" + mbps(r.downMin) + "-" + mbps(r.upMin)
			}
			names[r] = name
			tiers = append(tiers, Tier{Name: name, Rate: r.downMin, Ceil: r.downMax,
				UploadRate: r.upMin, UploadCeil: r.upMax, Line: c.Line})
		}
		return User{Tier: name}
	})
	return tiers, users
}

// mbps writes a rate in Mbit/s for a tier name: "100", "2_5", "0_1".
func mbps(r tbf.Rate) string {
	s := fmt.Sprintf("%g", float64(r)/1e6)
	return strings.ReplaceAll(s, ".", "_")
}

// MapTiers assigns each circuit an existing tier of plan: the tier whose
// rate, ceil, upload_rate and upload_ceil are the circuit's download and
// upload min and max; else the tier with the same ceilings, the user then
// getting its own rate and upload_rate. A circuit no tier fits is an error
// naming its line (file is the source's name).
func MapTiers(circuits []Circuit, plan *config.Plan, file string) ([]User, []error) {
	var errs []error
	users := CircuitUsers(circuits, func(c Circuit) User {
		var sameCeil *config.Tier
		for i := range plan.Tiers {
			t := &plan.Tiers[i]
			if t.Ceil == c.DownMax && t.UploadCeil == c.UpMax {
				if t.Rate == c.DownMin && t.UploadRate == c.UpMin {
					return User{Tier: t.Name}
				}
				if sameCeil == nil {
					sameCeil = t
				}
			}
		}
		if sameCeil != nil {
			u := User{Tier: sameCeil.Name}
			if sameCeil.Rate != c.DownMin {
				u.Rate = c.DownMin
			}
			if sameCeil.UploadRate != c.UpMin {
				u.UploadRate = c.UpMin
			}
			return u
		}
		errs = append(errs, lineErr(file, c.Line, "circuit %s: no tier of %s has ceil %s and upload_ceil %s (download/upload max); add one or use --tiers auto",
			c.ID, plan.Path, c.DownMax, c.UpMax))
		return User{}
	})
	if errs != nil {
		return nil, errs
	}
	return users, nil
}
