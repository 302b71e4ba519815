package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// Defaults of [[interface]].
const (
	// QueuesAuto is Interface.Queues for queues = "auto": one tree per
	// transmit queue of the device, as many as it has.
	QueuesAuto = -1
	// MaxQueues is the most queues = N accepts (model.MaxQueues).
	MaxQueues = 1024
	// DefaultLatency is a TBF interface's default latency.
	DefaultLatency = 50 * time.Millisecond
	// MinTBFBurst is the smallest TBF burst accepted: one full-size
	// Ethernet frame (a packet larger than the burst is dropped).
	MinTBFBurst tbf.Size = 1514
)

// notLeafKinds are qdisc kinds that cannot sit under an HTB class the way
// shaperd attaches leaves (TCA_KIND only, options only for pfifo/bfifo
// limits): classful qdiscs, root- or ingress-only ones, and ones whose
// options are mandatory. Other kinds are left to the running kernel.
var notLeafKinds = []string{
	"htb", "hfsc", "cbq", "drr", "qfq", "prio", "multiq", "ets", "atm", "dsmark",
	"tbf", "red", "gred", "choke", "cbs", "etf", "taprio",
	"mq", "mqprio", "ingress", "clsact",
}

var (
	htbOnlyKeys = append([]string{"default_tier", "default_rate", "default_ceil", "classifier", "queues"}, leafKeys...)
	tbfOnlyKeys = []string{"burst", "latency", "peakrate", "mtu"}
)

// decodeInterfaces reads every [[interface]] and checks that each
// (name, direction) and each IFB appears once.
func decodeInterfaces(rt *table, tiers []Tier) []Interface {
	entries, ok := rt.tables("interface")
	if !ok && !rt.has("interface") || ok && len(entries) == 0 {
		rt.f.errf("interface", "no [[interface]] is configured")
	}
	if len(entries) == 0 {
		return nil
	}
	var out []Interface
	paths := []string{}
	for _, t := range entries {
		out = append(out, decodeInterface(t, tiers))
		paths = append(paths, t.path)
	}
	f := rt.f
	// Each interface once per direction.
	seen := map[string]int{}
	for i, in := range out {
		if in.Name == "" || in.Direction == "" {
			continue
		}
		k := in.Name + "\x00" + string(in.Direction)
		if j, dup := seen[k]; dup {
			f.errf(paths[i]+".name", "interface %q is already shaped in direction %s by %s at %s",
				in.Name, in.Direction, paths[j], f.where(paths[j]+".name"))
			continue
		}
		seen[k] = i
	}
	// IFB devices: unique, and not a managed interface.
	names := map[string]bool{}
	for _, in := range out {
		names[in.Name] = true
	}
	ifbs := map[string]string{} // IFB -> key path that names it
	for i, in := range out {
		if in.IFB == "" {
			continue
		}
		key := paths[i] + ".ifb"
		if !entries[i].has("ifb") {
			key = paths[i] + ".name"
		}
		hint := ""
		if !entries[i].has("ifb") {
			hint = fmt.Sprintf(" (the default for %q; set ifb to another name)", in.Name)
		}
		if other, dup := ifbs[in.IFB]; dup {
			f.errf(key, "IFB device %q is also used by %s at %s%s", in.IFB, other[:strings.LastIndexByte(other, '.')], f.where(other), hint)
			continue
		}
		if names[in.IFB] {
			f.errf(key, "IFB device %q is also the name of a shaped interface%s", in.IFB, hint)
		}
		ifbs[in.IFB] = key
	}
	return out
}

// decodeInterface reads one [[interface]].
func decodeInterface(t *table, tiers []Tier) Interface {
	in := Interface{Shaper: ShaperHTB, Direction: Egress, Source: t.f.where(t.path)}
	t.require("name", "bandwidth")
	if s, ok := t.str("name"); ok {
		if err := checkIfName(s); err != nil {
			t.errf("name", "%v", err)
		} else {
			in.Name = s
		}
	}
	if s, ok := t.enum("shaper", string(ShaperHTB), string(ShaperTBF)); ok {
		in.Shaper = ShaperKind(s)
	}
	if b, ok := t.boolean("takeover"); ok {
		in.Takeover = b
	}
	if s, ok := t.enum("direction", string(Egress), string(Ingress)); ok {
		in.Direction = Direction(s)
	} else if t.has("direction") {
		in.Direction = "" // invalid: reported; no duplicate check
	}
	in.Match = MatchDst
	if in.Direction == Ingress {
		in.Match = MatchSrc
	}
	if s, ok := t.enum("match", string(MatchDst), string(MatchSrc)); ok {
		in.Match = MatchField(s)
	}
	if s, ok := t.str("ifb"); ok {
		switch err := checkIfName(s); {
		case in.Direction != Ingress:
			t.errf("ifb", "is only used with direction = \"ingress\"")
		case err != nil:
			t.errf("ifb", "%v", err)
		case s == in.Name:
			t.errf("ifb", "IFB device %q is the interface itself", s)
		default:
			in.IFB = s
		}
	} else if in.Direction == Ingress && in.Name != "" {
		in.IFB = defaultIFB(in.Name)
	}
	in.Bandwidth, _ = t.rate("bandwidth")
	decodeFraming(t, &in)

	// Keys of the other shaper.
	other, otherKind := tbfOnlyKeys, ShaperTBF
	if in.Shaper == ShaperTBF {
		other, otherKind = htbOnlyKeys, ShaperHTB
	}
	for _, k := range other {
		if t.has(k) {
			t.allow(k)
			t.errf(k, "is only used with shaper = %q", otherKind)
		}
	}
	if in.Shaper == ShaperTBF {
		decodeTBF(t, &in)
	} else {
		decodeHTB(t, &in, tiers)
	}
	t.finish()
	return in
}

// decodeHTB reads the default class and leaf qdisc settings.
func decodeHTB(t *table, in *Interface, tiers []Tier) {
	if s, ok := t.enum("classifier", string(ClassifierBPF), string(ClassifierU32)); ok {
		in.Classifier = ClassifierKind(s)
	}
	if s, ok := t.str("default_tier"); ok {
		if tierIndex(tiers, s) < 0 {
			t.errf("default_tier", "unknown tier %q (%s)", s, tierList(tiers))
		} else {
			in.DefaultTier = s
		}
	}
	rate, ceil, rateSet, ceilSet := rateCeil(t, "default_rate", "default_ceil")
	if ceilSet && !rateSet && !t.has("default_rate") {
		t.errf("default_ceil", "needs default_rate")
	}
	if rateSet {
		if in.Bandwidth != 0 && rate > in.Bandwidth {
			t.errf("default_rate", "%s is above bandwidth %s", rate, in.Bandwidth)
		}
		in.DefaultRate, in.DefaultCeil = rate, ceil
	} else if in.DefaultTier == "" && !t.has("default_tier") {
		in.DefaultRate = max(in.Bandwidth/100, MinRate)
		in.DefaultCeil = max(in.Bandwidth, in.DefaultRate)
	}
	var latency time.Duration
	in.Leaf, latency = decodeLeaf(t)
	in.QueueLatency = DefaultQueueLatency
	if latency != 0 {
		in.QueueLatency = latency
	}
	decodeQueues(t, in)
}

// decodeQueues reads queues = N (1..MaxQueues) or "auto". More than one
// queue cannot carry leaf qdiscs (their handles would collide between the
// queues' trees).
func decodeQueues(t *table, in *Interface) {
	t.allow("queues")
	v, ok := t.m["queues"]
	if !ok {
		return
	}
	switch x := v.(type) {
	case string:
		if x != "auto" {
			t.errf("queues", "must be a number of queues or \"auto\", not %q", x)
			return
		}
		in.Queues = QueuesAuto
	case int64:
		if x < 1 || x > MaxQueues {
			t.errf("queues", "%d is out of range [1, %d]", x, MaxQueues)
			return
		}
		in.Queues = int(x)
	default:
		t.errf("queues", "must be a number of queues or \"auto\", not %s", typeName(v))
		return
	}
}

// decodeFraming reads the link's per-packet accounting: overhead (bytes
// added to every packet, -64..256), mpu (0..256) and linklayer
// ("ethernet" or "atm").
func decodeFraming(t *table, in *Interface) {
	if n, ok := t.integer("overhead", psched.MinOverhead, psched.MaxOverhead); ok {
		in.Framing.Overhead = int(n)
	}
	if n, ok := t.integer("mpu", 0, psched.MaxMPU); ok {
		in.Framing.MPU = uint16(n)
	}
	if s, ok := t.enum("linklayer", "ethernet", "atm"); ok {
		in.Framing.ATM = s == "atm"
	}
}

// decodeTBF reads a whole-interface TBF's settings.
func decodeTBF(t *table, in *Interface) {
	in.Latency = DefaultLatency
	if v, ok := t.size("burst"); ok {
		if v < MinTBFBurst {
			t.errf("burst", "%s is smaller than one full-size Ethernet frame (%s); larger packets would be dropped", v, MinTBFBurst)
		}
		in.Burst = v
	}
	if v, ok := t.duration("latency", time.Millisecond); ok {
		in.Latency = v
	}
	if v, ok := t.rate("peakrate"); ok {
		if in.Bandwidth != 0 && v <= in.Bandwidth {
			t.errf("peakrate", "%s must be above bandwidth %s", v, in.Bandwidth)
		}
		in.PeakRate = v
		if !t.has("mtu") {
			t.errf("peakrate", "needs mtu (the peak bucket's size)")
		}
	}
	if v, ok := t.size("mtu"); ok {
		if !t.has("peakrate") {
			t.errf("mtu", "is only used with peakrate")
		} else if v == 0 {
			t.errf("mtu", "mtu is 0")
		}
		in.MTU = v
	}
}

// tierIndex returns the index of the tier called name in tiers (sorted), or -1.
func tierIndex(tiers []Tier, name string) int {
	i, ok := slices.BinarySearchFunc(tiers, name, func(t Tier, n string) int { return strings.Compare(t.Name, n) })
	if !ok {
		return -1
	}
	return i
}

// tierList names the configured tiers for messages.
func tierList(tiers []Tier) string {
	if len(tiers) == 0 {
		return "no tiers are configured"
	}
	names := make([]string, len(tiers))
	for i, t := range tiers {
		names[i] = t.Name
	}
	return "tiers: " + strings.Join(names, ", ")
}
