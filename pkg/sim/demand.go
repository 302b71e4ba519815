package sim

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// Demand is the rate a class would send if nothing limited it, in bits per
// second as the kernel counts them; Max is a class that is always backlogged.
type Demand float64

// Max is the demand of a class that always has packets queued.
var Max = Demand(math.Inf(1))

// IsMax reports whether d is Max.
func (d Demand) IsMax() bool { return math.IsInf(float64(d), 1) }

// String formats d as "max" or a tc rate ("10mbit", "0bit").
func (d Demand) String() string {
	if d.IsMax() {
		return "max"
	}
	return tbf.Rate(d).String()
}

// ParseDemand parses "max", "0" or a tc rate such as "10mbit".
func ParseDemand(s string) (Demand, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "max":
		return Max, nil
	case "":
		return 0, fmt.Errorf("empty demand: want max, 0 or a rate such as 10mbit")
	}
	if n, err := strconv.ParseUint(s, 10, 64); err == nil && n == 0 {
		return 0, nil
	}
	r, err := tbf.ParseRate(s)
	if err != nil {
		return 0, fmt.Errorf("demand: want max, 0 or a rate such as 10mbit: %w", err)
	}
	return Demand(r), nil
}
