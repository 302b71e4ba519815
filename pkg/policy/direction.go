package policy

import (
	"fmt"
	"math"
	"strings"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Direction is the traffic direction an override applies to, as operators
// say it: "download" (interfaces with direction egress), "upload" (direction
// ingress) or DirBoth.
type Direction string

// Directions of an override.
const (
	// DirBoth applies to both directions. Written "" in JSON and on the
	// wire; an override from an older state file, which has no direction,
	// is one for both.
	DirBoth     Direction = ""
	DirDownload Direction = "download"
	DirUpload   Direction = "upload"
)

// ParseDirection reads "download", "upload", or "" / "both" (DirBoth).
func ParseDirection(s string) (Direction, error) {
	switch strings.ToLower(s) {
	case "", "both":
		return DirBoth, nil
	case string(DirDownload):
		return DirDownload, nil
	case string(DirUpload):
		return DirUpload, nil
	}
	return DirBoth, fmt.Errorf("direction %q: use download or upload (omit it for both)", s)
}

// String is "download", "upload" or "both".
func (d Direction) String() string {
	if d == DirBoth {
		return "both"
	}
	return string(d)
}

// DirectionOf is the operator's name of an interface direction: egress is
// download, ingress is upload.
func DirectionOf(d config.Direction) Direction {
	if d == config.Ingress {
		return DirUpload
	}
	return DirDownload
}

// Covers reports whether an override for d applies on an interface with
// direction cd.
func (d Direction) Covers(cd config.Direction) bool {
	return d == DirBoth || d == DirectionOf(cd)
}

// ParseDirectedTarget reads a target as ParseTarget does, plus an
// interface target's direction suffix: "iface:lan0/download",
// "iface:lan0/upload". Without a suffix the direction is DirBoth.
func ParseDirectedTarget(s string) (Target, Direction, error) {
	if k, rest, ok := strings.Cut(s, ":"); ok && TargetKind(k) == TargetIface {
		if name, suffix, ok := strings.Cut(rest, "/"); ok {
			d, err := ParseDirection(suffix)
			if err != nil || d == DirBoth {
				return Target{}, DirBoth, fmt.Errorf("target %q: the suffix after / must be download or upload", s)
			}
			t, err := ParseTarget(k + ":" + name)
			return t, d, err
		}
	}
	t, err := ParseTarget(s)
	return t, DirBoth, err
}

// UploadScale is the rule for a user or tier override set for both
// directions: it gives the download rates as written, and on upload
// (ingress) interfaces the same rates scaled by the tier's own
// upload/download ratio (upload_rate/rate for the rate, upload_ceil/ceil
// for the ceil). `set-rate tier:gold 30mbit --ceil 40mbit` on a 50/100 down,
// 10/20 up tier gives 30/40 down and 6/8 up. A tier with equal upload and
// download rates (upload_rate not configured) keeps the rates as written.
// The scaled rate is at least config.MinRate and the ceil at least the rate.
// It reports whether the rates were scaled (a ratio other than 1).
func UploadScale(rate, ceil tbf.Rate, t *config.Tier) (tbf.Rate, tbf.Rate, bool) {
	if t == nil {
		return rate, ceil, false
	}
	dr, dc := t.Rates(config.Egress)
	ur, uc := t.Rates(config.Ingress)
	dc, uc = max(dc, dr), max(uc, ur)
	if dr == 0 || dc == 0 || (dr == ur && dc == uc) {
		return rate, ceil, false
	}
	r := ratioRate(rate, ur, dr)
	c := max(ratioRate(ceil, uc, dc), r)
	return r, c, true
}

// ratioRate is v*num/den, rounded, at least config.MinRate.
func ratioRate(v, num, den tbf.Rate) tbf.Rate {
	x := math.Round(float64(v) * float64(num) / float64(den))
	if x >= math.MaxUint64 {
		return tbf.Rate(math.MaxUint64)
	}
	return max(tbf.Rate(x), config.MinRate)
}
