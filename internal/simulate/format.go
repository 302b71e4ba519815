package simulate

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shaperd/shaperd/pkg/sim"
)

// WriteTable prints the users and then the interfaces' totals as aligned
// columns.
func (rep *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "simulated at %s\n\n", rep.At.Format("2006-01-02 15:04 MST"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "USER\tTIER\tINTERFACE\tDIRECTION\tDEMAND\tRATE\tLIMITED_BY")
	short, shortQueue := false, false
	for _, u := range rep.Users {
		limited := u.LimitedBy
		if u.Detail != "" {
			limited += " (" + u.Detail + ")"
		}
		if u.ShortBurst {
			limited += " *"
			short = true
		}
		if u.ShortQueue {
			limited += " !"
			shortQueue = true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", u.User, dash(u.Tier), u.Interface, u.Direction,
			u.Demand, FormatRate(u.Rate), limited)
	}
	if short {
		fmt.Fprintf(tw, "* borrows with a cburst below %d packets: the kernel may give less\n", sim.BurstPackets)
	}
	if shortQueue {
		fmt.Fprintln(tw, "! its leaf is a bfifo smaller than one 64 KiB TCP aggregate: the kernel drops aggregates whole and TCP gets a few percent of this rate")
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "INTERFACE\tDIRECTION\tSHAPER\tBANDWIDTH\tDEMAND\tRATE\tTIERS")
	for _, in := range rep.Interfaces {
		demand := "max"
		if !math.IsInf(in.Demand, 1) {
			demand = FormatRate(in.Demand)
		}
		var tiers []string
		for _, t := range in.Tiers {
			tiers = append(tiers, t.Tier+" "+FormatRate(t.Rate))
		}
		rate := FormatRate(in.Rate)
		if in.Oversubscribed {
			rate += " (guarantees " + FormatRate(in.Guaranteed) + " > bandwidth)"
		}
		shaper := string(in.Shaper)
		if len(in.Queues) > 0 {
			shaper = fmt.Sprintf("%s x%d queues", in.Shaper, len(in.Queues))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", in.Interface, in.Direction, shaper,
			FormatRate(in.Bandwidth), demand, rate, dash(strings.Join(tiers, ", ")))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, in := range rep.Interfaces {
		for _, c := range in.Capped {
			fmt.Fprintf(w, "%s %s: %s\n", in.Interface, in.Direction, c)
		}
	}
	for _, in := range rep.Interfaces {
		if len(in.Queues) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s %s: queues after rebalancing (ceil / sent):", in.Interface, in.Direction)
		for _, q := range in.Queues {
			fmt.Fprintf(w, " %d: %s / %s", q.Queue, FormatRate(q.Ceil), FormatRate(q.Sent))
		}
		fmt.Fprintln(w)
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// FormatRate formats bits/s with tc's decimal units and up to two
// decimals: "23.33mbit", "1gbit", "0bit".
func FormatRate(bits float64) string {
	units := []struct {
		name  string
		scale float64
	}{{"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}}
	for _, u := range units {
		if bits >= u.scale {
			return strconv.FormatFloat(math.Round(bits/u.scale*100)/100, 'f', -1, 64) + u.name
		}
	}
	return strconv.FormatFloat(math.Round(bits), 'f', -1, 64) + "bit"
}

// jsonReport is the --json layout; rates are whole bits per second.
type jsonReport struct {
	At         time.Time   `json:"at"`
	Users      []jsonUser  `json:"users"`
	Interfaces []jsonIface `json:"interfaces"`
}

type jsonUser struct {
	User      string `json:"user"`
	Tier      string `json:"tier,omitempty"`
	Interface string `json:"interface"`
	Direction string `json:"direction"`
	// Demand is "max" or a rate; DemandBits is null for max.
	Demand     string  `json:"demand"`
	DemandBits *uint64 `json:"demand_bits_per_second"`
	Bits       uint64  `json:"bits_per_second"`
	LimitedBy  string  `json:"limited_by"`
	Detail     string  `json:"detail,omitempty"`
	ShortBurst bool    `json:"short_burst,omitempty"`
	ShortQueue bool    `json:"short_queue,omitempty"`
}

type jsonIface struct {
	Interface      string     `json:"interface"`
	Device         string     `json:"device"`
	Direction      string     `json:"direction"`
	Shaper         string     `json:"shaper"`
	Bandwidth      uint64     `json:"bandwidth_bits_per_second"`
	DemandBits     *uint64    `json:"demand_bits_per_second"`
	Bits           uint64     `json:"bits_per_second"`
	Guaranteed     uint64     `json:"guaranteed_bits_per_second"`
	Oversubscribed bool       `json:"oversubscribed"`
	Capped         []string   `json:"capped,omitempty"`
	Tiers          []jsonTier `json:"tiers"`
}

type jsonTier struct {
	Tier string `json:"tier"`
	Bits uint64 `json:"bits_per_second"`
}

// bits rounds a rate to whole bits; nil for +Inf (max).
func bits(v float64) *uint64 {
	if math.IsInf(v, 1) {
		return nil
	}
	b := uint64(math.Round(v))
	return &b
}

// WriteJSON prints the report as one JSON object (see jsonReport).
func (rep *Report) WriteJSON(w io.Writer) error {
	out := jsonReport{At: rep.At, Users: []jsonUser{}, Interfaces: []jsonIface{}}
	for _, u := range rep.Users {
		out.Users = append(out.Users, jsonUser{User: u.User, Tier: u.Tier, Interface: u.Interface,
			Direction: string(u.Direction), Demand: u.Demand.String(), DemandBits: bits(float64(u.Demand)),
			Bits: *bits(u.Rate), LimitedBy: u.LimitedBy, Detail: u.Detail, ShortBurst: u.ShortBurst, ShortQueue: u.ShortQueue})
	}
	for _, in := range rep.Interfaces {
		j := jsonIface{Interface: in.Interface, Device: in.Device, Direction: string(in.Direction), Shaper: string(in.Shaper),
			Bandwidth: *bits(in.Bandwidth), DemandBits: bits(in.Demand), Bits: *bits(in.Rate),
			Guaranteed: *bits(in.Guaranteed), Oversubscribed: in.Oversubscribed, Capped: in.Capped, Tiers: []jsonTier{}}
		for _, t := range in.Tiers {
			j.Tiers = append(j.Tiers, jsonTier{Tier: t.Tier, Bits: *bits(t.Rate)})
		}
		out.Interfaces = append(out.Interfaces, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
