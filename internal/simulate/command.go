package simulate

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/sim"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Flags are shaperd's --simulate flags.
type Flags struct {
	Simulate bool
	Demand   string
	At       string
	JSON     bool
	// PacketSize is --packet-size: "" is one 1514-byte frame.
	PacketSize string
}

// AddFlags registers --simulate, --demand, --at and --json on fs.
func AddFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	fs.BoolVar(&f.Simulate, "simulate", false, "predict what every user gets (offline: no root, no kernel) and exit")
	fs.StringVar(&f.Demand, "demand", DefaultSpec, "with --simulate: comma list of `SPEC` USER=DEMAND, tier:NAME=DEMAND, default:IFACE=DEMAND or *=DEMAND; DEMAND is max, 0, a rate (10mbit) or DOWN/UP")
	fs.StringVar(&f.At, "at", "", "with --simulate: the local `time` \"2006-01-02 15:04\" in the policy's timezone (default now)")
	fs.BoolVar(&f.JSON, "json", false, "with --simulate: print JSON")
	fs.StringVar(&f.PacketSize, "packet-size", "", "with --simulate: the mean `size` of the packets HTB dequeues (a GRO/TSO aggregate counts as one: about 40kb; default 1514b)")
	return f
}

// ParseAt parses --at in loc: "2006-01-02 15:04", with seconds, with a
// "T", or RFC 3339 (which carries its own offset). "" is now.
func ParseAt(s string, now time.Time, loc *time.Location) (time.Time, error) {
	if s == "" {
		return now.In(loc), nil
	}
	for _, layout := range []string{"2006-01-02 15:04", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t, nil
		}
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.In(loc), nil
	}
	return time.Time{}, fmt.Errorf("--at %q: want a local time such as \"2026-12-04 21:00\"", s)
}

// Main runs `shaperd --config path --simulate`: it prints the report to
// stdout and returns the exit status (0 ok, 1 an invalid configuration, 2
// a bad --demand or --at), with problems on stderr.
func Main(path string, f *Flags, now time.Time, stdout, stderr io.Writer) int {
	spec, err := ParseSpec(f.Demand)
	if err != nil {
		fmt.Fprintln(stderr, "shaperd:", err)
		return 2
	}
	plan, err := config.Load(path)
	if err != nil {
		var ce *config.Errors
		if errors.As(err, &ce) {
			for _, e := range ce.List {
				fmt.Fprintln(stderr, e.Error())
			}
		} else {
			fmt.Fprintln(stderr, "shaperd:", err)
		}
		return 1
	}
	loc := plan.Policy.Location
	if loc == nil {
		loc = time.Local
	}
	at, err := ParseAt(f.At, now, loc)
	if err != nil {
		fmt.Fprintln(stderr, "shaperd:", err)
		return 2
	}
	if err := spec.check(plan); err != nil {
		fmt.Fprintln(stderr, "shaperd:", err)
		return 2
	}
	var o sim.Options
	if f.PacketSize != "" {
		if o.PacketSize, err = tbf.ParseSize(f.PacketSize); err != nil || o.PacketSize == 0 {
			fmt.Fprintf(stderr, "shaperd: --packet-size %q: want a size such as 1514b or 64kb\n", f.PacketSize)
			return 2
		}
	}
	rep, err := Simulate(plan, spec, at, o)
	if err != nil {
		fmt.Fprintln(stderr, "shaperd: simulate:", err)
		return 1
	}
	if f.JSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteTable(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "shaperd:", err)
		return 1
	}
	return 0
}
