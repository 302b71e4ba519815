package config

import (
	"slices"
	"strings"
	"time"
)

// Leaf is a leaf qdisc setting: the qdisc under user classes, from an
// [[interface]] (every user class and the default class), a [tiers.NAME]
// (that tier's users) or a [[user]] (that user). Kind "" means the level
// does not choose one. Zero parameters are the kernel's defaults.
type Leaf struct {
	// Kind: "fq_codel", "cake", "sfq", "bfifo", "pfifo", or another queue
	// the kernel may know (sent without options).
	Kind string
	// Limit (leaf_limit): packets for pfifo, fq_codel and sfq; bytes for bfifo.
	Limit uint32
	// Target and Interval (leaf_target, leaf_interval): fq_codel's.
	Target, Interval time.Duration
	// Flows (leaf_flows): fq_codel's flow count, sfq's most flows.
	Flows uint32
	// Quantum (leaf_quantum): fq_codel's and sfq's bytes per round.
	Quantum uint32
	// Diffserv (leaf_diffserv): cake's mode, "besteffort", "diffserv3",
	// "diffserv4", "diffserv8" or "precedence".
	Diffserv string
	// Source is the position of the leaf_qdisc key, "FILE:LINE:COL"; Key
	// is its path ("interface[0].leaf_qdisc"), for notes.
	Source, Key string
}

// DefaultQueueLatency is the default queue_latency: the queue a bfifo
// leaf (configured without leaf_limit, or the fallback for a missing
// kind) holds, in time at the class's ceil.
const DefaultQueueLatency = 50 * time.Millisecond

// Limits of queue_latency and the leaf parameters.
const (
	MinQueueLatency = time.Millisecond
	MaxQueueLatency = 10 * time.Second
)

// CakeModes are leaf_diffserv's values.
var CakeModes = []string{"besteffort", "diffserv3", "diffserv4", "diffserv8", "precedence"}

// leafKeys are the keys decodeLeaf reads (all HTB-only on interfaces).
var leafKeys = []string{"leaf_qdisc", "leaf_limit", "leaf_target", "leaf_interval", "leaf_flows", "leaf_quantum", "leaf_diffserv", "queue_latency"}

// leafParams says which parameters each kind takes.
var leafParams = map[string][]string{
	"pfifo":    {"leaf_limit"},
	"bfifo":    {"leaf_limit"},
	"fq_codel": {"leaf_limit", "leaf_target", "leaf_interval", "leaf_flows", "leaf_quantum"},
	"sfq":      {"leaf_limit", "leaf_flows", "leaf_quantum"},
	"cake":     {"leaf_diffserv"},
}

// decodeLeaf reads leaf_qdisc and its parameters, and queue_latency
// (returned separately: 0 when not set), from an interface, tier or user
// table. A parameter needs leaf_qdisc in the same table and must be one
// its kind takes.
func decodeLeaf(t *table) (Leaf, time.Duration) {
	var l Leaf
	var latency time.Duration
	if v, ok := t.duration("queue_latency", MinQueueLatency); ok {
		if v > MaxQueueLatency {
			t.errf("queue_latency", "%s is above %s", v, MaxQueueLatency)
		} else {
			latency = v
		}
	}
	kind, kindOK := t.str("leaf_qdisc")
	if kindOK {
		switch {
		case kind == "" || strings.Trim(kind, "abcdefghijklmnopqrstuvwxyz0123456789_") != "":
			t.errf("leaf_qdisc", "%q is not a qdisc kind (such as fq_codel, cake, sfq, bfifo, pfifo)", kind)
			kindOK = false
		case slices.Contains(notLeafKinds, kind):
			t.errf("leaf_qdisc", "%q cannot be the leaf qdisc of a class: it is classful, root-only or needs options shaperd does not send (use a queue such as fq_codel, cake, sfq, bfifo or pfifo)", kind)
			kindOK = false
		default:
			l.Kind, l.Source, l.Key = kind, t.f.where(t.path+".leaf_qdisc"), t.path+".leaf_qdisc"
		}
	}
	// param reports whether key may be used with this kind (and reports why not).
	param := func(key string) bool {
		switch {
		case !t.has("leaf_qdisc"):
			t.errf(key, "needs leaf_qdisc")
		case !kindOK:
		case !slices.Contains(leafParams[kind], key):
			takes := "no parameters shaperd sends; it keeps its own defaults"
			if ps := leafParams[kind]; len(ps) > 0 {
				takes = "only " + strings.Join(ps, ", ")
			}
			t.errf(key, "is not a parameter of leaf_qdisc %q (it takes %s)", kind, takes)
		default:
			return true
		}
		return false
	}
	if n, ok := t.integer("leaf_limit", 0, 1<<32-1); ok && param("leaf_limit") {
		l.Limit = uint32(n)
	}
	if v, ok := t.duration("leaf_target", time.Microsecond); ok && param("leaf_target") {
		l.Target = v
	}
	if v, ok := t.duration("leaf_interval", time.Microsecond); ok && param("leaf_interval") {
		l.Interval = v
	}
	for _, k := range []string{"leaf_target", "leaf_interval"} {
		if v := map[string]time.Duration{"leaf_target": l.Target, "leaf_interval": l.Interval}[k]; v > time.Hour {
			t.errf(k, "%s is above 1h", v)
		}
	}
	if l.Target != 0 && l.Interval != 0 && l.Target >= l.Interval {
		t.errf("leaf_target", "%s is not below leaf_interval %s", l.Target, l.Interval)
	}
	if n, ok := t.integer("leaf_flows", 1, 65535); ok && param("leaf_flows") {
		l.Flows = uint32(n)
	}
	if n, ok := t.integer("leaf_quantum", 256, 1<<20); ok && param("leaf_quantum") {
		l.Quantum = uint32(n)
	}
	if s, ok := t.enum("leaf_diffserv", CakeModes...); ok && param("leaf_diffserv") {
		l.Diffserv = s
	}
	return l, latency
}
