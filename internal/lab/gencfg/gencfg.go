// Package gencfg generates random shaperd configurations (the main file
// and the users file) for property tests and fuzzing: random tiers with
// rates, bursts, schedules and quotas, HTB and TBF interfaces in both
// directions, and users with IPv4 and IPv6 prefixes of every length. Many
// of them are invalid or cannot be built on purpose; the tests check that
// whatever the checks accept builds. Lab tooling only: never imported by
// the daemon.
package gencfg

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
)

// Config is one generated configuration.
type Config struct {
	Main, Users string
}

var rates = []string{
	"8bit", "1000bit", "1007bit", "1900bit", "1kbit", "64kbit", "1mbit", "2mbit", "10mbit",
	"100mbit", "1gbit", "10gbit", "40gbit", "700gbit", "1tbit",
}

var sizes = []string{"1514b", "1600b", "15kb", "64kb", "1mb", "32mb", "1gb", "4gb", "8gb"}

var latencies = []string{"1ms", "50ms", "1s", "1h"}

// Options bound what New generates.
type Options struct {
	// MaxUsers is the most users (default 12).
	MaxUsers int
	// Netns restricts names and addresses to what a namespace lab may use
	// (interfaces "gen0".."gen2" are expected to exist; addresses in
	// 198.18.0.0/15 and 2001:db8::/32).
	Netns bool
}

// New generates one configuration from rng.
func New(rng *rand.Rand, o Options) Config {
	if o.MaxUsers == 0 {
		o.MaxUsers = 12
	}
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	wild := func() bool { return rng.IntN(5) == 0 }
	// Rates are sorted: tame values keep a tier's rates below the
	// interfaces' bandwidths (index 9 is 1gbit) and ceils above rates.
	rateAt := func(lo, hi int) (string, int) {
		if wild() {
			i := rng.IntN(len(rates))
			return rates[i], i
		}
		hi = max(hi, lo)
		i := lo + rng.IntN(hi-lo+1)
		return rates[i], i
	}
	var m strings.Builder
	m.WriteString("[daemon]\nusers_file = \"users.toml\"\n\n")
	nIf := 1 + rng.IntN(3)
	for i := 0; i < nIf; i++ {
		fmt.Fprintf(&m, "[[interface]]\nname = \"gen%d\"\n", i)
		if rng.IntN(2) == 0 {
			fmt.Fprintf(&m, "direction = \"ingress\"\nifb = \"genifb%d\"\n", i)
		}
		bw, _ := rateAt(9, 11)
		fmt.Fprintf(&m, "bandwidth = %q\n", bw)
		if rng.IntN(4) == 0 {
			m.WriteString("shaper = \"tbf\"\n")
			if rng.IntN(2) == 0 {
				fmt.Fprintf(&m, "burst = %q\n", pick(sizes))
			}
			if rng.IntN(3) == 0 {
				fmt.Fprintf(&m, "latency = %q\n", pick(latencies))
			}
			if rng.IntN(3) == 0 {
				pr, _ := rateAt(12, 14)
				fmt.Fprintf(&m, "peakrate = %q\nmtu = %q\n", pr, pick(sizes[:4]))
			}
		} else {
			switch rng.IntN(4) {
			case 0:
				r, _ := rateAt(4, 8)
				fmt.Fprintf(&m, "default_rate = %q\n", r)
			case 1:
				m.WriteString("default_tier = \"t0\"\n")
			}
			if rng.IntN(3) == 0 {
				m.WriteString("leaf_qdisc = \"pfifo\"\nleaf_limit = 1000\n")
			}
		}
		m.WriteString("\n")
	}
	nTiers := 1 + rng.IntN(4)
	for i := 0; i < nTiers; i++ {
		r, ri := rateAt(0, 8)
		fmt.Fprintf(&m, "[tiers.t%d]\nrate = %q\n", i, r)
		if rng.IntN(2) == 0 {
			c, _ := rateAt(ri, 9)
			fmt.Fprintf(&m, "ceil = %q\n", c)
		}
		if rng.IntN(3) == 0 {
			r, _ := rateAt(0, 8)
			fmt.Fprintf(&m, "upload_rate = %q\n", r)
		}
		if rng.IntN(2) == 0 {
			fmt.Fprintf(&m, "burst = %q\n", pick(sizes))
		}
		if rng.IntN(3) == 0 {
			fmt.Fprintf(&m, "cburst = %q\n", pick(sizes))
		}
		if rng.IntN(4) == 0 {
			a, _ := rateAt(6, 9)
			fmt.Fprintf(&m, "aggregate_rate = %q\n", a)
		}
		if rng.IntN(3) == 0 {
			q, _ := rateAt(0, 6)
			fmt.Fprintf(&m, "quota = \"1gb\"\nover_quota_rate = %q\n", q)
		}
		for s := rng.IntN(3); s > 0; s-- {
			sr, _ := rateAt(0, 8)
			fmt.Fprintf(&m, "[[tiers.t%d.schedule]]\ndays = [\"all\"]\nfrom = \"%02d:00\"\nto = \"%02d:30\"\nrate = %q\n", i, s, s, sr)
		}
		m.WriteString("\n")
	}
	var u strings.Builder
	nUsers := 1 + rng.IntN(o.MaxUsers)
	for i := 0; i < nUsers; i++ {
		fmt.Fprintf(&u, "[[user]]\nname = \"u%d\"\ntier = \"t%d\"\naddresses = [", i, rng.IntN(nTiers))
		for j := 0; j < 1+rng.IntN(3); j++ {
			if j > 0 {
				u.WriteString(", ")
			}
			fmt.Fprintf(&u, "%q", prefix(rng, i, j, o.Netns))
		}
		u.WriteString("]\n")
		if rng.IntN(4) == 0 {
			r, _ := rateAt(0, 8)
			fmt.Fprintf(&u, "rate = %q\n", r)
		}
		u.WriteString("\n")
	}
	return Config{Main: m.String(), Users: u.String()}
}

// prefix returns a prefix for user i's j-th address: mostly distinct hosts,
// sometimes networks of any length (which may overlap, or be lengths the
// classifier refuses).
func prefix(rng *rand.Rand, i, j int, lab bool) string {
	if rng.IntN(2) == 0 {
		a := netip.AddrFrom4([4]byte{198, 18 + byte(j&1), byte(i), byte(1 + j)})
		bits := 32
		if rng.IntN(8) == 0 {
			bits = 15 + rng.IntN(18)
			if !lab {
				bits = rng.IntN(33)
			}
		}
		return netip.PrefixFrom(a, bits).Masked().String()
	}
	a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 6: byte(j), 7: byte(i), 14: byte(j), 15: byte(i)})
	bits := 128
	if rng.IntN(8) == 0 {
		bits = 32 + rng.IntN(97)
		if !lab {
			bits = rng.IntN(129)
		}
	}
	return netip.PrefixFrom(a, bits).Masked().String()
}
