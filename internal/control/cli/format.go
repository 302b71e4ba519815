package cli

import (
	"strconv"
	"strings"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// scaled is one display unit.
type scaled struct {
	name  string
	scale float64
}

var (
	rateDisplayUnits = []scaled{{"bit", 1}, {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}, {"tbit", 1e12}}
	sizeDisplayUnits = []scaled{{"b", 1}, {"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"tb", 1 << 40}}
)

// formatRate formats r for people with three significant digits in tc's
// decimal units: 9873456 bits/s is "9.87mbit", 50e6 is "50mbit".
func formatRate(r tbf.Rate) string { return formatScaled(float64(r), rateDisplayUnits) }

// formatBytes formats n bytes with three significant digits in tc's
// 1024-based size units: "1.15gb", "96.5kb", "512b".
func formatBytes(n uint64) string { return formatScaled(float64(n), sizeDisplayUnits) }

func formatScaled(v float64, units []scaled) string {
	i := 0
	for i+1 < len(units) && v >= units[i+1].scale {
		i++
	}
	for {
		x := v / units[i].scale
		decimals := 0
		switch {
		case i == 0:
			decimals = 0 // whole bits and bytes
		case x < 10:
			decimals = 2
		case x < 100:
			decimals = 1
		}
		s := strconv.FormatFloat(x, 'f', decimals, 64)
		// Rounding may reach the next unit: 999.7kbit is 1mbit.
		if f, _ := strconv.ParseFloat(s, 64); f*units[i].scale >= units[min(i+1, len(units)-1)].scale && i+1 < len(units) {
			i++
			continue
		}
		if strings.Contains(s, ".") {
			s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
		}
		return s + units[i].name
	}
}

// formatDelay formats a queue delay: "-" for none, to 0.1 ms below 10 ms
// ("2.3ms"), to the millisecond above ("48ms", "1.204s").
func formatDelay(d control.Duration) string {
	switch v := d.Std(); {
	case v <= 0:
		return "-"
	case v < 10*time.Millisecond:
		return v.Round(100 * time.Microsecond).String()
	default:
		return v.Round(time.Millisecond).String()
	}
}
