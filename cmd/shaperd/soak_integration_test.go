package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// TestSoak is the soak: shaperd started as the unit starts it in a router
// lab, real iperf3 traffic for a changing set of users, and a seeded,
// reproducible stream of operations and faults, with invariants checked
// every second and after every operation settles. It runs only when
// SHAPERD_SOAK is a duration (scripts/soak.sh sets it); docs/testing.md
// describes what it does and checks.
//
//	SHAPERD_SOAK=3m            how long the operations run
//	SHAPERD_SOAK_SEED=N        the seed (default: the time); the report names it
//	SHAPERD_SOAK_USERS=2000    users in users.toml
//	SHAPERD_SOAK_FLEET=1       follow a real etcd (fleet operations too)
//	SHAPERD_SOAK_JSON=FILE     also write the report as JSON
func TestSoak(t *testing.T) {
	durS := os.Getenv("SHAPERD_SOAK")
	if durS == "" {
		t.Skip("skipping: the soak runs only when asked: SHAPERD_SOAK=<duration> (scripts/soak.sh)")
	}
	dur, err := time.ParseDuration(durS)
	if err != nil || dur <= 0 {
		t.Fatalf("SHAPERD_SOAK=%q: want a duration such as 3m", durS)
	}
	seed := time.Now().UnixNano() % 1e9
	if v := os.Getenv("SHAPERD_SOAK_SEED"); v != "" {
		if seed, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("SHAPERD_SOAK_SEED=%q: %v", v, err)
		}
	}
	users := 2000
	if v := os.Getenv("SHAPERD_SOAK_USERS"); v != "" {
		if users, err = strconv.Atoi(v); err != nil || users < soakCfgHosts+1 || users > 60000 {
			t.Fatalf("SHAPERD_SOAK_USERS=%q: want %d to 60000", v, soakCfgHosts+1)
		}
	}
	fleetOn := os.Getenv("SHAPERD_SOAK_FLEET") == "1"
	s := newSoak(t, dur, seed, users, fleetOn)
	s.run()
	rep := s.report()
	fmt.Print(rep.text())
	if p := os.Getenv("SHAPERD_SOAK_JSON"); p != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(p, append(b, '\n'), 0o644); err != nil {
			t.Errorf("write %s: %v", p, err)
		}
	}
	if rep.ViolationsTotal > 0 {
		t.Errorf("%d invariant violations (first: %s: %s); replay with --seed %d", rep.ViolationsTotal,
			rep.FirstViolation.Invariant, rep.FirstViolation.Detail, seed)
	}
}

// The soak lab: soakHosts user hosts on the lab's lan; the first
// soakCfgHosts are users of users.toml (u0, u1, ...), the others are
// addresses for run-time users, so that their traffic is classified too.
const (
	soakHosts    = 10
	soakCfgHosts = 6
	// soakJournalCompact is the daemon's journal compaction threshold in
	// records (internal/daemon's journalCompactRecords).
	soakJournalCompact = 1000
	// soakSettle is the settle bound: a difference between the kernel and
	// the plan, an acknowledged change not in force, or an interface not ok
	// is a violation when it lasts longer than this.
	soakSettle = 5 * time.Second
	// soakCapSlack is the tolerance of the caps: measured <= ceil x 1.03
	// (plus one cburst per window: HTB lets a full bucket through).
	soakCapSlack = 1.03
	// soakMaxFlow: no user's ceil is above 40mbit (gold; overrides are
	// lower), so a transfer faster than this was not shaped.
	soakMaxFlow = 44e6
)

// soakConfig: three interfaces (downloads and uploads on r-lan, and r-x0,
// which the soak deletes and recreates), u32 classifiers (the soak changes
// filters by hand with tc), four tiers (silver's users share an aggregate
// class of 30mbit, whose cap the caps check measures as every class's); %[2]s is the mass tier's rate,
// which valid reloads edit.
const soakConfig = `
[daemon]
socket = "%[1]s/shaperd.sock"
state_dir = "%[1]s/state"
metrics = "` + metricsAddr + `"
reconcile_interval = "1s"
log_level = "info"

[policy]
interval = "500ms"
ramp = "2s"
timezone = "UTC"

[[interface]]
name = "r-lan"
bandwidth = "1gbit"
default_tier = "bronze"
classifier = "u32"

[[interface]]
name = "r-lan"
direction = "ingress"
ifb = "r-ifb"
bandwidth = "1gbit"
default_tier = "bronze"
classifier = "u32"

[[interface]]
name = "r-x0"
bandwidth = "1gbit"
default_tier = "bronze"
classifier = "u32"

[tiers.bronze]
rate = "10mbit"
ceil = "10mbit"

[tiers.silver]
rate = "20mbit"
ceil = "20mbit"
aggregate_rate = "30mbit"
aggregate_ceil = "30mbit"

[tiers.gold]
rate = "30mbit"
ceil = "40mbit"
upload_rate = "15mbit"
upload_ceil = "20mbit"

[tiers.mass]
rate = "%[2]s"
ceil = "1mbit"
`

var soakTiers = []string{"bronze", "silver", "gold"}

// soakOp is one operation of the log.
type soakOp struct {
	N      int           `json:"n"`
	At     time.Duration `json:"at_ns"`
	AtS    string        `json:"at"`
	Kind   string        `json:"kind"`
	Detail string        `json:"detail"`
	Result string        `json:"result"`
	start  time.Time
	end    time.Time
	// errorsOK: the operation makes the daemon log errors (a fault).
	errorsOK bool
}

// soakOverride is an override shaperctl confirmed.
type soakOverride struct {
	target, dir string // dir: both, download, upload
	rate        tbf.Rate
	until       time.Time // zero: until cleared
}

// soakRTUser is a run-time user shaperctl confirmed.
type soakRTUser struct {
	tier  string
	addrs []string // prefixes, as status prints them
	// leased are addresses added with --for, by prefix: when they end.
	leased map[string]time.Time
	host   int // the lab host whose addresses it has, -1 none
}

type soakViolation struct {
	At        string   `json:"at"`
	Invariant string   `json:"invariant"`
	Detail    string   `json:"detail"`
	OpLog     []soakOp `json:"op_log,omitempty"`
}

type soak struct {
	t        *testing.T
	u        *unitLab
	rng      *rand.Rand
	seed     int64
	dur      time.Duration
	nUsers   int
	fleet    *soakFleet
	start    time.Time
	client   *control.Client
	stateDir string

	ops       []soakOp
	opCount   map[string]int
	checks    map[string]int
	violCount map[string]int
	viols     []soakViolation

	// The plan as the soak wrote it, and what shaperctl confirmed.
	massRate   string
	massTier   map[int]string // mass users whose tier a reload changed
	massGone   map[int]bool   // mass users a reload removed
	extra      map[string]string
	overrides  map[string]soakOverride // by target|dir
	unknown    map[string]bool         // overrides whose last change failed: not checked
	rt         map[string]*soakRTUser
	rtUnknown  map[string]bool
	nextRT     int
	nextAddr   int
	hostOwner  map[int]string
	x0Down     bool
	foreign    bool
	roUntil    time.Time
	pending    map[string]time.Time // mismatch -> first seen
	reported   map[string]bool
	lastDump   map[string]soakDump
	ceilSince  map[string]time.Time // device/class -> when its ceil was last seen to change
	lastCeil   map[string]tbf.Rate
	latencies  []time.Duration
	samples    map[string]*soakSample
	flowsOK    atomic.Int64
	flowsFail  atomic.Int64
	flowBits   atomic.Int64
	stopFlows  chan struct{}
	flowsDone  sync.WaitGroup
	aborted    string
	statusFail int
	stopOnce   sync.Once
	flowMu     sync.Mutex
	fastFlows  []soakFlow
	// deck is the kinds of operation not drawn yet in the first round.
	deck []int
	// settled counts differences seen that went within the settle bound.
	settled int
	// soakConfigFmt is shaperd.toml's format (soakConfig, with [fleet]).
	soakConfigFmt string
}

// soakFlow is a transfer faster than every ceil.
type soakFlow struct {
	from, to time.Time
	up       bool
	what     string
}

type soakDump struct {
	// at and done are when the dump began and ended: the counters were
	// read in between.
	at, done time.Time
	bytes    map[model.Handle]uint64
	ceil     map[model.Handle]tbf.Rate
	cbuf     map[model.Handle]tbf.Size
}

type soakSample struct {
	Start float64 `json:"start"`
	Max   float64 `json:"max"`
	End   float64 `json:"end"`
	n     int
}

func (x *soakSample) add(v float64) {
	if x.n == 0 {
		x.Start = v
	}
	x.n++
	x.Max = max(x.Max, v)
	x.End = v
}

func newSoak(t *testing.T, dur time.Duration, seed int64, users int, fleetOn bool) *soak {
	s := &soak{t: t, dur: dur, seed: seed, nUsers: users, rng: rand.New(rand.NewSource(seed)),
		opCount: map[string]int{}, checks: map[string]int{}, violCount: map[string]int{},
		massRate: "50kbit", massTier: map[int]string{}, massGone: map[int]bool{}, extra: map[string]string{},
		overrides: map[string]soakOverride{}, unknown: map[string]bool{}, rt: map[string]*soakRTUser{},
		rtUnknown: map[string]bool{}, hostOwner: map[int]string{}, pending: map[string]time.Time{},
		reported: map[string]bool{}, lastDump: map[string]soakDump{}, ceilSince: map[string]time.Time{},
		lastCeil: map[string]tbf.Rate{}, samples: map[string]*soakSample{}, stopFlows: make(chan struct{})}
	config := soakConfig
	var before func(*netnslab.RouterLab)
	if fleetOn {
		s.fleet = &soakFleet{s: s}
		config += soakFleetConfig
		before = s.fleet.startEtcd
	}
	before2 := func(lab *netnslab.RouterLab) {
		lab.Router.MustRun("ip", "link", "add", "r-x0", "type", "veth", "peer", "name", "r-x1")
		lab.Router.MustRun("ip", "link", "set", "r-x0", "up")
		if before != nil {
			before(lab)
		}
	}
	t0 := time.Now()
	s.u = newUnitLabBefore(t, soakHosts, s.config(config), s.usersTOML, before2, unitEdit{prefix: "soak"})
	s.soakConfigFmt = config
	t.Logf("soak: lab and first apply of %d users in %v", users, time.Since(t0).Round(time.Millisecond))
	s.stateDir = filepath.Join(s.u.dir, "state")
	s.client = control.NewClient(s.u.sock)
	t.Cleanup(s.client.Close)
	// Also when the test fails half-way: the transfers end before the
	// lab's namespaces go.
	t.Cleanup(s.endTraffic)
	if s.fleet != nil {
		s.fleet.afterStart()
	}
	return s
}

// config returns the shaperd.toml format with the mass rate filled in
// (and %[1]s, the directory, left for writeConfig).
func (s *soak) config(format string) string {
	return strings.ReplaceAll(format, "%[2]s", s.massRate)
}

// usersTOML is users.toml as the soak's plan has it now.
func (s *soak) usersTOML(lab *netnslab.RouterLab) string {
	var b strings.Builder
	for i := 0; i < soakCfgHosts; i++ {
		fmt.Fprintf(&b, "[[user]]\nname = \"u%d\"\ntier = %q\naddresses = [%q, %q]\n\n", i, soakTiers[i%3], lab.Users4[i], lab.Users6[i])
	}
	for i := 0; i < s.nUsers-soakCfgHosts; i++ {
		if s.massGone[i] {
			continue
		}
		tier := "mass"
		if tt, ok := s.massTier[i]; ok {
			tier = tt
		}
		fmt.Fprintf(&b, "[[user]]\nname = \"m%05d\"\ntier = %q\naddresses = [\"198.18.%d.%d\", \"2001:db8:100::%x\"]\n\n",
			i, tier, 64+i/250, i%250+1, i+1)
	}
	names := make([]string, 0, len(s.extra))
	for n := range s.extra {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		fmt.Fprintf(&b, "[[user]]\nname = %q\ntier = %q\naddresses = [\"198.18.202.%d\"]\n\n", n, s.extra[n], i+1)
	}
	return b.String()
}

// writePlan writes shaperd.toml and users.toml, and with a fleet pushes
// them as the fleet's plan (when etcd is up).
func (s *soak) writePlan() {
	s.writePlanOnly()
	if s.fleet != nil && !s.fleet.down {
		if code, out := s.fleet.push(); code != 0 {
			s.violate("operation refused", "fleet push: "+result(code, out))
		}
	}
}

func (s *soak) writePlanOnly() {
	s.u.writeConfig(s.config(s.soakConfigFmt), s.usersTOML(s.u.RouterLab))
}

// since is the time since the operations started.
func (s *soak) since() time.Duration { return time.Since(s.start).Round(time.Millisecond) }

// ctl runs shaperctl (a separate process) and returns its exit code and output.
func (s *soak) ctl(args ...string) (int, string) {
	cmd := exec.Command(s.u.ctl, append([]string{"--socket", s.u.sock}, args...)...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		return -1, err.Error()
	}
	return 0, string(out)
}

// violate records a violation of invariant.
func (s *soak) violate(invariant, detail string) {
	s.violCount[invariant]++
	v := soakViolation{At: s.since().String(), Invariant: invariant, Detail: detail}
	if len(s.viols) == 0 {
		from := max(0, len(s.ops)-15)
		v.OpLog = append([]soakOp(nil), s.ops[from:]...)
	}
	if len(s.viols) < 100 {
		s.viols = append(s.viols, v)
	}
	s.t.Logf("VIOLATION at %v: %s: %s", s.since(), invariant, detail)
}

// run does the soak: operations at random gaps of 1-3 s, each followed by
// its settle; checks every second in between.
func (s *soak) run() {
	s.start = time.Now()
	s.sampleDaemon()
	s.startTraffic()
	deadline := s.start.Add(s.dur)
	nextOp := time.Now().Add(time.Second)
	for time.Now().Before(deadline) && s.aborted == "" {
		if !time.Now().Before(nextOp) {
			s.operate()
			if s.aborted != "" {
				break
			}
			s.settle()
			nextOp = time.Now().Add(time.Second + time.Duration(s.rng.Intn(2000))*time.Millisecond)
		}
		tick := time.Now()
		s.check("tick")
		if s.checks["tick"]%5 == 0 {
			s.sampleDaemon()
		}
		time.Sleep(time.Second - min(time.Since(tick), time.Second))
	}
	s.endTraffic()
	s.checks["traffic shaped"] = int(s.flowsOK.Load())
	for _, f := range s.fastFlows {
		if op := s.unshapedBy(f); op != nil {
			s.checks["traffic unshaped by an operation"]++
			s.t.Logf("a transfer above every ceil during op %d (%s), which removes shaping: %s", op.N, op.Kind, f.what)
			continue
		}
		s.violate("traffic shaped", "a transfer above every ceil: "+f.what)
	}
	if s.aborted == "" {
		if time.Now().Before(s.roUntil) || !s.roUntil.IsZero() {
			s.endReadOnly()
		}
		s.settle()
		s.check("final")
		s.sampleDaemon()
	}
	s.checkLog()
}

// settle checks every 500 ms after an operation until a check finds
// nothing pending or the settle bound (plus a margin) passes; a mismatch
// older than the bound is then a violation.
func (s *soak) settle() {
	start := time.Now()
	for {
		n := s.check("settle")
		if n == 0 || time.Since(start) > soakSettle+time.Second || s.aborted != "" {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// operate picks one operation by weight and does it.
func (s *soak) operate() {
	type opKind struct {
		name   string
		weight int
		do     func(op *soakOp)
	}
	kinds := []opKind{
		{"set-rate", 14, s.opSetRate},
		{"clear", 7, s.opClear},
		{"user-add", 5, s.opUserAdd},
		{"user-remove", 3, s.opUserRemove},
		{"user-add-address", 3, s.opUserAddAddress},
		{"runtime-user-then-reload-disagrees", 1, s.opReloadDisagrees},
		{"reload-valid", 3, s.opReloadValid},
		{"reload-invalid", 2, s.opReloadInvalid},
		{"sighup-storm", 1, s.opSighupStorm},
		{"kill-9", 2, s.opKill},
		{"kill-9-during-first-apply", 1, s.opKillFirstApply},
		{"kill-9-during-journal-compaction", 1, s.opKillCompaction},
		{"restart", 1, s.opRestart},
		{"iface-delete-recreate", 1, s.opIfaceRecreate},
		{"ifb-delete", 1, s.opIFBDelete},
		{"tc-class-change", 2, s.opClassChange},
		{"tc-filter-delete", 1, s.opFilterDelete},
		{"foreign-filter", 1, s.opForeignFilter},
		{"state-dir-read-only", 1, s.opReadOnly},
	}
	if s.fleet != nil {
		kinds = append(kinds, opKind{"fleet-etcd-outage", 2, s.fleet.opOutage},
			opKind{"fleet-override", 4, s.fleet.opOverride})
	}
	if !s.roUntil.IsZero() && !time.Now().Before(s.roUntil) {
		kinds = []opKind{{"state-dir-writable", 1, func(op *soakOp) { s.endReadOnly(); op.Result = "ok" }}}
	}
	// Every kind once first, in an order drawn from the seed (so that a
	// short run meets every fault), then drawn by weight.
	if s.deck == nil {
		s.deck = s.rng.Perm(len(kinds))
	}
	var k opKind
	if len(kinds) > 1 && len(s.deck) > 0 {
		k, s.deck = kinds[s.deck[0]], s.deck[1:]
		if len(s.deck) == 0 {
			s.deck = []int{}
		}
	} else {
		total := 0
		for _, k := range kinds {
			total += k.weight
		}
		r := s.rng.Intn(total)
		k = kinds[0]
		for _, kk := range kinds {
			if r < kk.weight {
				k = kk
				break
			}
			r -= kk.weight
		}
	}
	op := soakOp{N: len(s.ops) + 1, Kind: k.name, start: time.Now(), At: s.since()}
	op.AtS = op.At.String()
	// A pending mismatch restarts its clock: the operation may change it.
	s.pending = map[string]time.Time{}
	k.do(&op)
	op.end = time.Now()
	s.opCount[k.name]++
	s.ops = append(s.ops, op)
	s.t.Logf("op %d at %v: %s %s: %s", op.N, op.At, op.Kind, op.Detail, op.Result)
}

// result is the first line of out with the exit code.
func result(code int, out string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	if len(line) > 160 {
		line = line[:160]
	}
	if code == 0 {
		return "ok"
	}
	return fmt.Sprintf("exit %d: %s", code, line)
}

// readOnly reports whether the state dir is read-only now: changes may be
// refused.
func (s *soak) readOnly() bool { return !s.roUntil.IsZero() }

// expectOK records an unexpected failure of an operation that must work.
func (s *soak) expectOK(op *soakOp, code int, out string) bool {
	op.Result = result(code, out)
	if code == 0 {
		return true
	}
	if s.readOnly() {
		op.Result += " (state dir read-only: refusal expected)"
		return false
	}
	s.violate("operation refused", fmt.Sprintf("%s %s: %s", op.Kind, op.Detail, op.Result))
	return false
}

var soakRates = []string{"5mbit", "8mbit", "12mbit", "15mbit", "25mbit"}

func (s *soak) pick(xs ...string) string { return xs[s.rng.Intn(len(xs))] }

func (s *soak) opSetRate(op *soakOp) {
	var target, rate string
	args := []string{}
	dir := s.pick("both", "both", "download", "upload")
	switch s.rng.Intn(4) {
	case 0, 1:
		target = fmt.Sprintf("u%d", s.rng.Intn(soakCfgHosts))
		rate = s.pick(soakRates...)
	case 2:
		target = "tier:" + s.pick(soakTiers...)
		rate = s.pick(soakRates...)
	default:
		target = "iface:" + s.pick("r-lan", "r-x0")
		rate = s.pick("600mbit", "700mbit", "800mbit", "900mbit")
		if dir == "upload" && strings.HasSuffix(target, "r-x0") {
			dir = "download" // r-x0 has no upload side
		}
	}
	args = append(args, "set-rate", target, rate)
	if dir != "both" {
		args = append(args, "--direction", dir)
	}
	if r := s.pick("", "", "0s", "1s", "3s"); r != "" {
		args = append(args, "--ramp", r)
	}
	var until time.Time
	if f := s.pick("", "", "", "8s", "20s"); f != "" {
		args = append(args, "--for", f)
		d, _ := time.ParseDuration(f)
		until = time.Now().Add(d)
	}
	op.Detail = strings.Join(args[1:], " ")
	code, out := s.ctl(args...)
	key := target + "|" + dir
	if !s.expectOK(op, code, out) {
		s.unknown[key] = true
		return
	}
	r, _ := tbf.ParseRate(rate)
	if dir == "both" {
		delete(s.overrides, target+"|download")
		delete(s.overrides, target+"|upload")
	}
	delete(s.unknown, key)
	s.overrides[key] = soakOverride{target: target, dir: dir, rate: r, until: until}
}

func (s *soak) opClear(op *soakOp) {
	keys := make([]string, 0, len(s.overrides))
	for k := range s.overrides {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		keys = []string{"u0|both"}
	}
	key := keys[s.rng.Intn(len(keys))]
	target, dir, _ := strings.Cut(key, "|")
	args := []string{"clear", target}
	if dir != "both" && s.rng.Intn(2) == 0 {
		args = append(args, "--direction", dir)
	} else {
		dir = ""
	}
	op.Detail = strings.Join(args[1:], " ")
	code, out := s.ctl(args...)
	if !s.expectOK(op, code, out) {
		for _, d := range []string{"both", "download", "upload"} {
			if dir == "" || d == dir {
				s.unknown[target+"|"+d] = true
			}
		}
		return
	}
	for _, d := range []string{"both", "download", "upload"} {
		if dir == "" || d == dir {
			delete(s.overrides, target+"|"+d)
			delete(s.unknown, target+"|"+d)
		}
	}
}

func (s *soak) opUserAdd(op *soakOp) {
	name := fmt.Sprintf("rt%d", s.nextRT)
	s.nextRT++
	tier := s.pick(soakTiers...)
	u := &soakRTUser{tier: tier, host: -1, leased: map[string]time.Time{}}
	for h := soakCfgHosts; h < soakHosts; h++ {
		if s.hostOwner[h] == "" {
			u.host = h
			u.addrs = []string{netip.PrefixFrom(s.u.Users4[h], 32).String(), netip.PrefixFrom(s.u.Users6[h], 128).String()}
			break
		}
	}
	if u.host < 0 {
		s.nextAddr++
		u.addrs = []string{fmt.Sprintf("198.18.200.%d/32", s.nextAddr%250+1), fmt.Sprintf("2001:db8:200::%x/128", s.nextAddr)}
	}
	args := []string{"user", "add", name, "--tier", tier}
	for _, a := range u.addrs {
		args = append(args, "--address", a)
	}
	op.Detail = strings.Join(args[2:], " ")
	code, out := s.ctl(args...)
	if !s.expectOK(op, code, out) {
		s.rtUnknown[name] = true
		return
	}
	if u.host >= 0 {
		s.hostOwner[u.host] = name
	}
	s.rt[name] = u
}

func (s *soak) rtNames() []string {
	names := make([]string, 0, len(s.rt))
	for n := range s.rt {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (s *soak) dropRT(name string) {
	if u := s.rt[name]; u != nil && u.host >= 0 {
		delete(s.hostOwner, u.host)
	}
	delete(s.rt, name)
}

// pickRT draws a run-time user; with none it adds one instead (the
// operation becomes a user add) and returns false.
func (s *soak) pickRT(op *soakOp) (string, bool) {
	names := s.rtNames()
	if len(names) == 0 {
		s.opUserAdd(op)
		op.Detail = "(no run-time user) add " + op.Detail
		return "", false
	}
	return names[s.rng.Intn(len(names))], true
}

func (s *soak) opUserRemove(op *soakOp) {
	name, ok := s.pickRT(op)
	if !ok {
		return
	}
	op.Detail = name
	code, out := s.ctl("user", "remove", name)
	if !s.expectOK(op, code, out) {
		s.rtUnknown[name] = true
		s.dropRT(name)
		return
	}
	s.dropRT(name)
}

func (s *soak) opUserAddAddress(op *soakOp) {
	name, ok := s.pickRT(op)
	if !ok {
		return
	}
	s.nextAddr++
	a := fmt.Sprintf("198.18.201.%d/32", s.nextAddr%250+1)
	args := []string{"user", "add-address", name, a}
	lease := s.pick("", "10s")
	if lease != "" {
		args = append(args, "--for", lease)
	}
	op.Detail = strings.Join(args[2:], " ")
	code, out := s.ctl(args...)
	if !s.expectOK(op, code, out) {
		s.rtUnknown[name] = true
		return
	}
	u := s.rt[name]
	if lease != "" {
		u.leased[a] = time.Now().Add(10 * time.Second)
	} else {
		u.addrs = append(u.addrs, a)
	}
}

// opReloadDisagrees adds a run-time user, then a users.toml with the same
// name (another tier, another address) and reloads: the file wins.
func (s *soak) opReloadDisagrees(op *soakOp) {
	s.opUserAdd(op)
	name := fmt.Sprintf("rt%d", s.nextRT-1)
	u := s.rt[name]
	if u == nil {
		return
	}
	tier := soakTiers[(indexOf(soakTiers, u.tier)+1)%3]
	s.extra[name] = tier
	s.writePlan()
	op.Detail += fmt.Sprintf("; users.toml: %s tier %s; reload", name, tier)
	code, out := s.ctl("reload")
	if !s.expectOK(op, code, out) {
		s.rtUnknown[name] = true
		s.dropRT(name)
		return
	}
	s.dropRT(name)
	if len(s.extra) > 3 { // keep users.toml's extras few: the next reload drops one
		for n := range s.extra {
			if n != name {
				delete(s.extra, n)
				break
			}
		}
	}
}

func indexOf(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}

// opReloadValid edits the plan (a tier rate, mass users' tiers, a user
// removed and one back) and reloads by ExecReload, shaperctl or SIGHUP.
func (s *soak) opReloadValid(op *soakOp) {
	var edits []string
	switch s.rng.Intn(3) {
	case 0:
		s.massRate = s.pick("40kbit", "50kbit", "60kbit")
		edits = append(edits, "mass rate "+s.massRate)
	case 1:
		i := s.rng.Intn(s.nUsers - soakCfgHosts)
		s.massTier[i] = s.pick("bronze", "silver", "mass")
		edits = append(edits, fmt.Sprintf("m%05d tier %s", i, s.massTier[i]))
	default:
		for i := range s.massGone {
			delete(s.massGone, i)
			edits = append(edits, fmt.Sprintf("m%05d back", i))
			break
		}
		i := s.rng.Intn(s.nUsers - soakCfgHosts)
		s.massGone[i] = true
		edits = append(edits, fmt.Sprintf("m%05d removed", i))
	}
	s.writePlan()
	how := s.pick("ExecReload", "shaperctl reload", "SIGHUP")
	op.Detail = strings.Join(edits, ", ") + " by " + how
	switch how {
	case "ExecReload":
		out, err := s.u.Reload()
		code := 0
		if err != nil {
			code = 1
		}
		s.expectOK(op, code, out)
	case "shaperctl reload":
		code, out := s.ctl("reload")
		s.expectOK(op, code, out)
	default:
		s.u.Signal(syscall.SIGHUP)
		op.Result = "sent"
	}
}

// opReloadInvalid writes a broken shaperd.toml or users.toml, reloads
// (refused, naming the file) and puts the good files back.
func (s *soak) opReloadInvalid(op *soakOp) {
	op.errorsOK = true
	good, _ := os.ReadFile(s.u.cfg)
	usersPath := filepath.Join(s.u.dir, "users.toml")
	goodUsers, _ := os.ReadFile(usersPath)
	var want string
	switch s.rng.Intn(3) {
	case 0:
		os.WriteFile(s.u.cfg, append(append([]byte(nil), good...), "\n[tiers.broken]\nrate = \"fast\"\n"...), 0o644)
		want, op.Detail = "tiers.broken.rate", "a tier with rate \"fast\""
	case 1:
		os.WriteFile(usersPath, append(append([]byte(nil), goodUsers...), "[[user]]\nname = \"dup\"\ntier = \"gold\"\naddresses = [\"198.18.0.10\"]\n"...), 0o644)
		want, op.Detail = "dup", "a user with u0's address"
	default:
		os.WriteFile(usersPath, append(append([]byte(nil), goodUsers...), "[[user]]\nname = \"nowhere\"\ntier = \"platinum\"\n"...), 0o644)
		want, op.Detail = "platinum", "a user of an unknown tier"
	}
	var out string
	var err error
	if s.fleet != nil {
		// A fleet router takes its tiers and users from the fleet (its
		// own are used only until the first shared plan): the invalid
		// plan is pushed, and refused with nothing written.
		op.Detail += ", pushed to the fleet"
		code, pout := s.fleet.push()
		out = pout
		if code != 0 {
			err = fmt.Errorf("exit %d", code)
		}
	} else {
		out, err = s.u.Reload()
	}
	os.WriteFile(s.u.cfg, good, 0o644)
	os.WriteFile(usersPath, goodUsers, 0o644)
	op.Result = result(1, out)
	if err == nil || !strings.Contains(out, want) {
		s.violate("operation result", fmt.Sprintf("invalid reload (%s): %v, want a refusal naming %q: %.300s", op.Detail, err, want, out))
	}
}

func (s *soak) opSighupStorm(op *soakOp) {
	op.Detail = "20 SIGHUPs 50ms apart"
	for range 20 {
		s.u.Signal(syscall.SIGHUP)
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	if !s.u.Running() {
		s.violate("daemon alive", "died in a SIGHUP storm")
		s.aborted = "daemon died"
	}
	op.Result = "alive"
}

// restartWait starts the daemon and waits for READY=1 (at most 2 min).
func (s *soak) restartWait(op *soakOp) bool {
	s.u.Start()
	start := time.Now()
	for !s.u.Notify.Has("READY=1") {
		if !s.u.Running() || time.Since(start) > 2*time.Minute {
			s.violate("daemon alive", fmt.Sprintf("no READY=1 after a restart (%s): running %v\n%s", op.Kind, s.u.Running(), tail(s.u.Logs.String(), 3000)))
			s.aborted = "no READY after restart"
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	op.Result = fmt.Sprintf("READY in %v", time.Since(start).Round(time.Millisecond))
	s.lastDump = map[string]soakDump{}
	s.afterRestart(op)
	return true
}

func (s *soak) kill9() {
	s.u.Signal(syscall.SIGKILL)
	_ = s.u.Wait(30 * time.Second)
}

func (s *soak) opKill(op *soakOp) {
	op.errorsOK = true
	d := time.Duration(s.rng.Intn(500)) * time.Millisecond
	op.Detail = fmt.Sprintf("kill -9 after %v, restart", d)
	time.Sleep(d)
	s.kill9()
	s.restartWait(op)
}

// opKillFirstApply removes r-lan's tree with the daemon down, so that the
// restart is a first apply of every user there, and kills it again
// during that apply.
func (s *soak) opKillFirstApply(op *soakOp) {
	op.errorsOK = true
	s.kill9()
	s.u.Router.Run("tc", "qdisc", "del", "dev", "r-lan", "root")
	s.u.Start()
	// Kill when the apply is under way: after a random number of r-lan's
	// classes are back (or READY, or 20 s).
	want := 1 + s.rng.Intn(max(1, s.nUsers/2))
	start, n := time.Now(), 0
	for time.Since(start) < 20*time.Second && !s.u.Notify.Has("READY=1") {
		out, _ := s.u.Router.Run("tc", "class", "show", "dev", "r-lan")
		if n = strings.Count(out, "\n"); n >= want {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	ready := s.u.Notify.Has("READY=1")
	op.Detail = fmt.Sprintf("r-lan's root qdisc deleted, restart, kill -9 after %v at %d classes on r-lan (aimed at %d; ready %v)",
		time.Since(start).Round(time.Millisecond), n, want, ready)
	s.kill9()
	s.restartWait(op)
}

// opKillCompaction fills the run-time users' journal to the record count
// at which the reconcile tick folds it into users.json (a run-time user
// added and removed again, over the control socket, until the journal
// holds soakJournalCompact records), then kills the daemon as that
// compaction writes: when the temporary users file appears in state_dir
// (or after 3 s), and restarts it. The last run-time user added stays. A read-only state dir is made
// writable first. Every confirmed run-time user must be
// in force after the restart, by the checks that follow any restart.
func (s *soak) opKillCompaction(op *soakOp) {
	op.errorsOK = true
	ro := ""
	if s.readOnly() { // the journal cannot grow: writable first
		s.endReadOnly()
		ro = "state dir made writable first; "
	}
	journal := filepath.Join(s.stateDir, "users.journal")
	records := func() int {
		b, _ := os.ReadFile(journal)
		return bytes.Count(b, []byte{'\n'})
	}
	// The last add stays: a run-time user confirmed just before the kill,
	// which the checks after the restart must find in force.
	name := fmt.Sprintf("jc%d", op.N)
	addr := fmt.Sprintf("198.18.203.%d/32", op.N%250+1)
	add := control.UserRequest{Op: control.UserAdd, Name: name, Tier: "bronze", Addresses: []string{addr}}
	rm := control.UserRequest{Op: control.UserRemove, Name: name}
	start, before, requests := time.Now(), records(), 0
	reqs := make([]control.UserRequest, 0, soakJournalCompact+1)
	for range max(0, soakJournalCompact-before) / 2 {
		reqs = append(reqs, add, rm)
	}
	for _, req := range append(reqs, add) {
		requests++
		// Each request as shaperctl would make it: its own deadline.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := s.client.ChangeUser(ctx, req)
		cancel()
		if err != nil {
			s.violate("operation refused", fmt.Sprintf("%s: user %s %s (request %d, %v into the fill): %v",
				op.Kind, req.Op, name, requests, time.Since(start).Round(time.Millisecond), err))
			op.Result = "filling the journal failed"
			s.rtUnknown[name] = true // whether the last request took is unknown
			return
		}
	}
	s.rt[name] = &soakRTUser{tier: "bronze", addrs: []string{addr}, leased: map[string]time.Time{}, host: -1}
	filled := time.Since(start)
	// The compaction runs on the next reconcile tick (1 s): watch for its
	// temporary file.
	seen := false
	for wait := time.Now(); !seen && time.Since(wait) < 3*time.Second; time.Sleep(time.Millisecond) {
		tmps, _ := filepath.Glob(filepath.Join(s.stateDir, ".users.json.tmp-*"))
		seen = len(tmps) > 0
	}
	s.kill9()
	after := records()
	op.Detail = fmt.Sprintf("%sjournal %d records + %d requests in %v; kill -9 %s; journal then %d records",
		ro, before, requests, filled.Round(time.Millisecond), map[bool]string{true: "while users.json was being written", false: "(no temporary users file seen in 3 s)"}[seen], after)
	s.restartWait(op)
}

func (s *soak) opRestart(op *soakOp) {
	op.Detail = "SIGTERM, start"
	if err := s.u.Stop(); err != nil {
		s.violate("operation result", fmt.Sprintf("SIGTERM: exit %v", err))
	}
	s.restartWait(op)
}

// afterRestart: every acknowledged override and run-time user must be in
// force again (checked by the next checks; here their count is logged).
func (s *soak) afterRestart(op *soakOp) {
	op.Result += fmt.Sprintf("; %d overrides, %d run-time users acknowledged", len(s.overrides), len(s.rt))
	if !s.roUntil.IsZero() {
		s.roUntil = time.Time{} // a new process: a new mount namespace, writable
		op.Result += "; state dir writable again (new mount namespace)"
	}
}

func (s *soak) opIfaceRecreate(op *soakOp) {
	op.errorsOK = true
	d := time.Duration(500+s.rng.Intn(2500)) * time.Millisecond
	op.Detail = fmt.Sprintf("ip link del r-x0, %v, add again", d)
	s.x0Down = true
	_, err := s.u.Router.Run("ip", "link", "del", "r-x0")
	time.Sleep(d)
	_, err2 := s.u.Router.Run("ip", "link", "add", "r-x0", "type", "veth", "peer", "name", "r-x1")
	_, err3 := s.u.Router.Run("ip", "link", "set", "r-x0", "up")
	op.Result = fmt.Sprintf("%v %v %v", err, err2, err3)
	if err == nil && err2 == nil && err3 == nil {
		op.Result = "ok"
	}
	// Missing is expected until it is shaped again: give it the settle bound.
	time.Sleep(500 * time.Millisecond)
	s.x0Down = false
}

func (s *soak) opIFBDelete(op *soakOp) {
	op.errorsOK = true
	op.Detail = "ip link del r-ifb"
	_, err := s.u.Router.Run("ip", "link", "del", "r-ifb")
	op.Result = fmt.Sprint(err)
	if err == nil {
		op.Result = "ok"
	}
}

func (s *soak) opClassChange(op *soakOp) {
	op.errorsOK = true
	i := s.rng.Intn(soakCfgHosts)
	dev := s.pick("r-lan", "r-ifb")
	tr, err := s.u.k.Dump(dev)
	if err != nil {
		op.Result = err.Error()
		return
	}
	for _, f := range tr.Filters {
		if f.Prefix.Addr() == s.u.Users4[i] {
			for _, c := range tr.Classes {
				if c.Handle == f.ClassID {
					op.Detail = fmt.Sprintf("u%d's class %s on %s to 1mbit", i, c.Handle, dev)
					_, err = s.u.Router.Run("tc", "class", "change", "dev", dev, "parent", c.Parent.String(), "classid", c.Handle.String(),
						"htb", "rate", "1mbit", "ceil", "1mbit")
					op.Result = fmt.Sprint(err)
					if err == nil {
						op.Result = "ok"
					}
					return
				}
			}
		}
	}
	op.Result = fmt.Sprintf("u%d has no class on %s", i, dev)
}

func (s *soak) opFilterDelete(op *soakOp) {
	op.errorsOK = true
	dev := s.pick("r-lan", "r-ifb", "r-x0")
	proto := s.pick("ip", "ipv6")
	out, _ := s.u.Router.Run("tc", "filter", "show", "dev", dev, "parent", "1:", "protocol", proto)
	prefs := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[0] == "filter" {
			for j := range f[:len(f)-1] {
				if f[j] == "pref" {
					prefs[f[j+1]] = true
				}
			}
		}
	}
	var ps []string
	for p := range prefs {
		if p != "900" { // the foreign filter's
			ps = append(ps, p)
		}
	}
	sort.Strings(ps)
	if len(ps) == 0 {
		op.Detail, op.Result = dev+" "+proto, "no filters"
		return
	}
	p := ps[s.rng.Intn(len(ps))]
	op.Detail = fmt.Sprintf("tc filter del dev %s parent 1: pref %s protocol %s", dev, p, proto)
	_, err := s.u.Router.Run("tc", "filter", "del", "dev", dev, "parent", "1:", "pref", p, "protocol", proto)
	op.Result = fmt.Sprint(err)
	if err == nil {
		op.Result = "ok"
	}
}

func (s *soak) opForeignFilter(op *soakOp) {
	op.errorsOK = true
	if s.foreign {
		op.Detail = "the foreign filter removed"
		_, err := s.u.Router.Run("tc", "filter", "del", "dev", "r-lan", "parent", "1:", "pref", "900", "protocol", "ip")
		op.Result = fmt.Sprint(err)
		s.foreign = false
		return
	}
	op.Detail = "tc filter add dev r-lan parent 1: pref 900 protocol ip u32 match ip dst 198.18.250.250/32 flowid 1:1"
	_, err := s.u.Router.Run("tc", "filter", "add", "dev", "r-lan", "parent", "1:", "pref", "900", "protocol", "ip",
		"u32", "match", "ip", "dst", "198.18.250.250/32", "flowid", "1:1")
	op.Result = fmt.Sprint(err)
	if err == nil {
		op.Result = "ok"
		s.foreign = true
	}
}

// opReadOnly makes state_dir read-only in the daemon's mount namespace (a
// read-only bind mount) for 5-15 s; changes meanwhile may be refused.
func (s *soak) opReadOnly(op *soakOp) {
	op.errorsOK = true
	d := time.Duration(5+s.rng.Intn(10)) * time.Second
	op.Detail = fmt.Sprintf("state_dir read-only for %v", d)
	out, err := exec.Command("nsenter", "-t", strconv.Itoa(s.u.PID()), "-m", "sh", "-c",
		fmt.Sprintf("mount --bind %[1]s %[1]s && mount -o remount,bind,ro %[1]s", s.stateDir)).CombinedOutput()
	if err != nil {
		op.Result = fmt.Sprintf("%v: %s", err, out)
		return
	}
	op.Result = "ok"
	s.roUntil = time.Now().Add(d)
}

func (s *soak) endReadOnly() {
	if s.roUntil.IsZero() {
		return
	}
	_ = exec.Command("nsenter", "-t", strconv.Itoa(s.u.PID()), "-m", "umount", s.stateDir).Run()
	s.roUntil = time.Time{}
	// Changes refused meanwhile are unknown; the daemon retries its saves.
}

// check runs the invariants once and returns how many mismatches are
// pending (not yet past the settle bound).
func (s *soak) check(why string) int {
	s.checks[why]++
	if !s.u.Running() {
		s.violate("daemon alive", fmt.Sprintf("the daemon exited: %v\n%s", s.u.Wait(time.Second), tail(s.u.Logs.String(), 3000)))
		s.aborted = "daemon exited"
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t0 := time.Now()
	st, err := s.client.Status(ctx)
	cancel()
	lat := time.Since(t0)
	s.checks["control socket"]++
	if err != nil {
		s.statusFail++
		s.violate("control socket", fmt.Sprintf("status: %v (after %v)", err, lat))
		return 0
	}
	s.latencies = append(s.latencies, lat)
	if lat > 5*time.Second {
		s.violate("control socket", fmt.Sprintf("status took %v", lat))
	}
	now := time.Now()
	mism := map[string]string{}
	s.checkKernel(st, now, mism)
	s.checkAcknowledged(st, now, mism)
	if s.fleet != nil {
		s.fleet.check(st, mism)
	}
	for k, detail := range mism {
		first, ok := s.pending[k]
		if !ok {
			s.pending[k] = now
			continue
		}
		if now.Sub(first) > soakSettle && !s.reported[k] {
			s.reported[k] = true
			inv, _, _ := strings.Cut(k, ":")
			s.violate(inv, fmt.Sprintf("%s (for %v)", detail, now.Sub(first).Round(time.Millisecond)))
		}
	}
	for k := range s.pending {
		if _, ok := mism[k]; !ok {
			if !s.reported[k] {
				s.settled++
			}
			delete(s.pending, k)
			delete(s.reported, k)
		}
	}
	return len(mism)
}

// checkKernel: each interface ok; on each device every user's addresses
// have a filter to one class at the user's effective rate and ceil (users
// in a ramp: the filters only), no filter of an address nobody has, the
// root class at the bandwidth in force; and the caps hold.
func (s *soak) checkKernel(st *control.Status, now time.Time, mism map[string]string) {
	s.checks["kernel equals plan"]++
	byDev := map[string][]control.UserStatus{}
	for _, us := range st.Users {
		byDev[us.Device] = append(byDev[us.Device], us)
	}
	for _, is := range st.Interfaces {
		if is.State != control.StateOK {
			if is.Device == "r-x0" && (s.x0Down || is.State == control.StateMissing && s.x0Down) {
				continue
			}
			mism["interface ok:"+is.Device] = fmt.Sprintf("%s is %s: %s", is.Device, is.State, is.Error)
			continue
		}
		dumpAt := time.Now()
		tr, err := s.u.k.Dump(is.Device)
		dumpDone := time.Now()
		if err != nil {
			mism["kernel equals plan:dump "+is.Device] = err.Error()
			continue
		}
		classes := map[model.Handle]model.Class{}
		var root *model.Class
		for i, c := range tr.Classes {
			classes[c.Handle] = c
			if c.Parent == model.RootQdisc {
				root = &tr.Classes[i]
			}
		}
		filters := map[string]model.Handle{}
		for _, f := range tr.Filters {
			filters[f.Prefix.String()] = f.ClassID
		}
		bw := is.Bandwidth
		if is.EffectiveBandwidth != 0 {
			bw = is.EffectiveBandwidth
		}
		if root == nil {
			mism["kernel equals plan:"+is.Device+" root"] = is.Device + ": no root class"
			continue
		}
		if root.Ceil.BytesPerSecond() != bw.BytesPerSecond() {
			mism["kernel equals plan:"+is.Device+" root"] = fmt.Sprintf("%s: root class ceil %v, bandwidth in force %v", is.Device, root.Ceil, bw)
		}
		owned := map[string]bool{}
		for _, us := range byDev[is.Device] {
			var cls model.Handle
			for _, a := range us.Addresses {
				owned[a] = true
				h, ok := filters[a]
				if !ok {
					mism["kernel equals plan:"+is.Device+" "+us.Name+" "+a] = fmt.Sprintf("%s: no filter for %s's %s (in the default class)", is.Device, us.Name, a)
					continue
				}
				if cls != 0 && h != cls {
					mism["kernel equals plan:"+is.Device+" "+us.Name+" classes"] = fmt.Sprintf("%s: %s's addresses go to classes %s and %s", is.Device, us.Name, cls, h)
				}
				cls = h
			}
			if cls == 0 || us.Ramp != nil {
				continue
			}
			c, ok := classes[cls]
			if !ok {
				mism["kernel equals plan:"+is.Device+" "+us.Name+" class"] = fmt.Sprintf("%s: %s's filters point at class %s, which does not exist", is.Device, us.Name, cls)
				continue
			}
			if c.Rate.BytesPerSecond() != us.EffectiveRate.BytesPerSecond() || c.Ceil.BytesPerSecond() != us.EffectiveCeil.BytesPerSecond() {
				mism["kernel equals plan:"+is.Device+" "+us.Name+" rate"] = fmt.Sprintf("%s: %s's class %s at %v/%v, in force %v/%v (%s)",
					is.Device, us.Name, cls, c.Rate, c.Ceil, us.EffectiveRate, us.EffectiveCeil, us.Reason)
			}
		}
		for p := range filters {
			if !owned[p] {
				mism["kernel equals plan:"+is.Device+" stray "+p] = fmt.Sprintf("%s: a filter for %s, which no user has", is.Device, p)
			}
		}
		s.checkCaps(is.Device, tr, dumpAt, dumpDone)
	}
}

// checkCaps compares each class's bytes since the last dump with its ceil:
// measured <= ceil x 1.03 + cburst, for classes whose ceil has not changed
// for 2 s before the window. A dump reads the counters somewhere between
// its start and end, so the window is taken as long as it may have been
// (from the last dump's start to this one's end): a violation is certain.
func (s *soak) checkCaps(dev string, tr model.Tree, now, done time.Time) {
	d := soakDump{at: now, done: done, bytes: map[model.Handle]uint64{}, ceil: map[model.Handle]tbf.Rate{}, cbuf: map[model.Handle]tbf.Size{}}
	for _, c := range tr.Classes {
		if c.Stats == nil {
			continue
		}
		d.bytes[c.Handle], d.ceil[c.Handle], d.cbuf[c.Handle] = c.Stats.Bytes, c.Ceil, c.CBurst
		key := dev + "/" + c.Handle.String()
		if s.lastCeil[key] != c.Ceil {
			s.lastCeil[key] = c.Ceil
			s.ceilSince[key] = now
		}
	}
	prev, ok := s.lastDump[dev]
	s.lastDump[dev] = d
	if !ok {
		return
	}
	dt := done.Sub(prev.at).Seconds()
	if dt < 0.5 || dt > 4 {
		return
	}
	s.checks["caps"]++
	for h, b := range d.bytes {
		pb, ok := prev.bytes[h]
		key := dev + "/" + h.String()
		if !ok || b < pb || prev.ceil[h] != d.ceil[h] || prev.at.Sub(s.ceilSince[key]) < 2*time.Second {
			continue
		}
		got := float64(b-pb) * 8 / dt
		limit := float64(d.ceil[h])*soakCapSlack + float64(d.cbuf[h])*8/dt
		if got > limit {
			s.violate("caps", fmt.Sprintf("%s class %s: %.2f Mbit/s over %.2fs, ceil %v", dev, h, got/1e6, dt, d.ceil[h]))
		}
	}
}

// overridesFrom is st's overrides of source by target and direction
// ("TARGET|DIRECTION").
func overridesFrom(st *control.Status, source string) map[string]control.OverrideStatus {
	have := map[string]control.OverrideStatus{}
	for _, o := range st.Overrides {
		if o.Source == source {
			have[o.Target+"|"+o.Direction] = o
		}
	}
	return have
}

// checkAcknowledged: every override and run-time user shaperctl confirmed
// is in force (until cleared, removed or expired), and none that was
// cleared or removed is back.
func (s *soak) checkAcknowledged(st *control.Status, now time.Time, mism map[string]string) {
	s.checks["acknowledged in force"]++
	have := overridesFrom(st, control.SourceLocal)
	for k, o := range s.overrides {
		if !o.until.IsZero() && now.After(o.until.Add(-2*time.Second)) {
			if now.After(o.until.Add(soakSettle)) {
				delete(s.overrides, k)
			}
			continue
		}
		h, ok := have[k]
		if !ok {
			mism["acknowledged in force:override "+k] = fmt.Sprintf("override %s %s (%v) acknowledged, not in force", o.target, o.dir, o.rate)
		} else if h.Rate.BytesPerSecond() != o.rate.BytesPerSecond() {
			mism["acknowledged in force:override "+k] = fmt.Sprintf("override %s %s at %v, acknowledged %v", o.target, o.dir, h.Rate, o.rate)
		}
	}
	for k, h := range have {
		if _, ok := s.overrides[k]; ok || s.unknown[k] {
			continue
		}
		if h.Until != nil && now.Before(h.Until.Add(soakSettle)) {
			continue // expiring: the daemon may be a tick behind
		}
		mism["acknowledged in force:extra override "+k] = fmt.Sprintf("override %s %s in force, cleared or never acknowledged", h.Target, h.Direction)
	}
	users := map[string]map[string]bool{}
	source := map[string]string{}
	for _, us := range st.Users {
		if users[us.Name] == nil {
			users[us.Name] = map[string]bool{}
		}
		for _, a := range us.Addresses {
			users[us.Name][a] = true
		}
		source[us.Name] = us.Source
	}
	for name, u := range s.rt {
		if s.rtUnknown[name] {
			continue
		}
		if source[name] != control.SourceRuntime {
			mism["acknowledged in force:user "+name] = fmt.Sprintf("run-time user %s acknowledged, in status as %q", name, source[name])
			continue
		}
		for _, a := range u.addrs {
			if !users[name][a] {
				mism["acknowledged in force:user "+name+" "+a] = fmt.Sprintf("run-time user %s: acknowledged address %s not in force", name, a)
			}
		}
		for a, until := range u.leased {
			if now.Before(until.Add(-2*time.Second)) && !users[name][a] {
				mism["acknowledged in force:user "+name+" "+a] = fmt.Sprintf("run-time user %s: leased address %s not in force before its end", name, a)
			}
			if now.After(until.Add(soakSettle)) {
				if users[name][a] {
					mism["acknowledged in force:lease "+name+" "+a] = fmt.Sprintf("run-time user %s: address %s in force after its lease ended", name, a)
				} else {
					delete(u.leased, a)
				}
			}
		}
	}
	for name, src := range source {
		if src == control.SourceRuntime && s.rt[name] == nil && !s.rtUnknown[name] {
			mism["acknowledged in force:user "+name] = fmt.Sprintf("run-time user %s in force, removed or never acknowledged", name)
		}
	}
	for name := range s.extra {
		if source[name] != control.SourceFile {
			mism["acknowledged in force:file user "+name] = fmt.Sprintf("users.toml's %s in status as %q (the file must win)", name, source[name])
		}
	}
}

// sampleDaemon records RSS, open fds, goroutines and the journal's size.
func (s *soak) sampleDaemon() {
	pid := s.u.PID()
	add := func(k string, v float64) {
		if s.samples[k] == nil {
			s.samples[k] = &soakSample{}
		}
		s.samples[k].add(v)
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				add("rss_mib", kb/1024)
			}
		}
	}
	if es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		add("fds", float64(len(es)))
	}
	if g, err := s.scrape("go_goroutines"); err == nil {
		add("goroutines", g)
	}
	if fi, err := os.Stat(filepath.Join(s.stateDir, "users.journal")); err == nil {
		add("journal_bytes", float64(fi.Size()))
	} else {
		add("journal_bytes", 0)
	}
}

// scrape reads one metric from /metrics in the router namespace.
func (s *soak) scrape(name string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+metricsAddr+"/metrics", nil)
	resp, err := s.u.Router.HTTPClient().Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, name+" ") {
			return strconv.ParseFloat(strings.TrimPrefix(l, name+" "), 64)
		}
	}
	return 0, fmt.Errorf("%s not in /metrics", name)
}

// checkLog: every ERROR line of the daemon's log must fall in the window
// of an operation that causes errors (from its start to 15 s after it).
func (s *soak) checkLog() {
	s.checks["log errors explained"]++
	for _, l := range strings.Split(s.u.Logs.String(), "\n") {
		if !strings.Contains(l, "level=ERROR") {
			continue
		}
		ts, _, _ := strings.Cut(strings.TrimPrefix(l, "time="), " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || at.Before(s.start) {
			continue
		}
		explained := false
		for _, op := range s.ops {
			if op.errorsOK && !at.Before(op.start.Add(-time.Second)) && at.Before(op.end.Add(15*time.Second)) {
				explained = true
				break
			}
		}
		if s.fleet != nil && s.fleet.explains(at) {
			explained = true
		}
		s.checks["log error lines"]++
		if !explained {
			s.violate("log errors explained", "no operation explains: "+l)
		}
	}
}

// unshapedBy returns the operation that removed the shaping f went
// through while f ran (until the daemon has had the settle bound to put it
// back): r-lan's tree deleted with the daemon down, or the IFB deleted
// (uploads).
func (s *soak) unshapedBy(f soakFlow) *soakOp {
	for i := range s.ops {
		op := &s.ops[i]
		if op.Kind != "kill-9-during-first-apply" && (op.Kind != "ifb-delete" || !f.up) {
			continue
		}
		if f.from.Before(op.end.Add(soakSettle)) && f.to.After(op.start) {
			return op
		}
	}
	return nil
}

// endTraffic stops the transfers and waits for them (once).
func (s *soak) endTraffic() {
	s.stopOnce.Do(func() { close(s.stopFlows) })
	s.flowsDone.Wait()
}

// startTraffic runs up to three iperf3 transfers at a time, downloads and
// uploads, IPv4 and IPv6, to random lab hosts (users of users.toml,
// run-time users, or nobody's addresses: the default class).
func (s *soak) startTraffic() {
	rng := rand.New(rand.NewSource(s.seed + 1))
	var mu sync.Mutex
	port := 7000
	for w := 0; w < 3; w++ {
		s.flowsDone.Add(1)
		go func() {
			defer s.flowsDone.Done()
			for {
				select {
				case <-s.stopFlows:
					return
				default:
				}
				mu.Lock()
				h, up, v6, secs := rng.Intn(soakHosts), rng.Intn(2) == 0, rng.Intn(2) == 0, 3+rng.Intn(5)
				port++
				p := port
				mu.Unlock()
				t0 := time.Now()
				bits, err := s.flow(h, up, v6, secs, p)
				if err != nil {
					s.flowsFail.Add(1)
					continue
				}
				s.flowsOK.Add(1)
				s.flowBits.Add(int64(bits))
				if bps := bits / float64(secs); bps > soakMaxFlow {
					s.flowMu.Lock()
					s.fastFlows = append(s.fastFlows, soakFlow{from: t0, to: time.Now(), up: up,
						what: fmt.Sprintf("at %v: host %d %s v6 %v: %.1f Mbit/s over %ds",
							t0.Sub(s.start).Round(time.Millisecond), h, map[bool]string{true: "upload", false: "download"}[up], v6, bps/1e6, secs)})
					s.flowMu.Unlock()
				}
			}
		}()
	}
}

// flow runs one iperf3 transfer and returns the bits received.
func (s *soak) flow(h int, up, v6 bool, secs, port int) (float64, error) {
	user, wan := s.u.Users4[h], s.u.WAN4
	if v6 {
		user, wan = s.u.Users6[h], s.u.WAN6
	}
	srvNS, srvAddr, cliNS, cliAddr := s.u.LAN, user, s.u.WAN, wan
	if up {
		srvNS, srvAddr, cliNS, cliAddr = s.u.WAN, wan, s.u.LAN, user
	}
	srv := srvNS.Command("iperf3", "-s", "-1", "-B", srvAddr.String(), "-p", strconv.Itoa(port))
	if err := srv.Start(); err != nil {
		return 0, err
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	for i := 0; i < 50; i++ {
		if out, err := srvNS.Run("ss", "-Hltn", "sport", "=", ":"+strconv.Itoa(port)); err == nil && strings.Contains(out, ":"+strconv.Itoa(port)) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, _ := cliNS.Run("iperf3", "-J", "-c", srvAddr.String(), "-p", strconv.Itoa(port), "-B", cliAddr.String(), "-t", strconv.Itoa(secs), "--connect-timeout", "3000")
	bps, err := netnslab.ParseIperf3(out)
	return bps * float64(secs), err
}

// soakReport is what the soak prints, and writes as JSON.
type soakReport struct {
	Seed            int64                  `json:"seed"`
	Users           int                    `json:"users"`
	Fleet           bool                   `json:"fleet"`
	Duration        string                 `json:"duration"`
	Elapsed         string                 `json:"elapsed"`
	SettleBound     string                 `json:"settle_bound"`
	Ops             map[string]int         `json:"ops"`
	OpsTotal        int                    `json:"ops_total"`
	Checks          map[string]int         `json:"checks"`
	Violations      map[string]int         `json:"violations"`
	ViolationsTotal int                    `json:"violations_total"`
	FirstViolation  *soakViolation         `json:"first_violation,omitempty"`
	ViolationList   []soakViolation        `json:"violation_list,omitempty"`
	Settled         int                    `json:"differences_settled"`
	Daemon          map[string]*soakSample `json:"daemon"`
	LatencyP50      string                 `json:"status_latency_p50"`
	LatencyP99      string                 `json:"status_latency_p99"`
	LatencyMax      string                 `json:"status_latency_max"`
	StatusCalls     int                    `json:"status_calls"`
	FlowsOK         int64                  `json:"flows_ok"`
	FlowsFailed     int64                  `json:"flows_failed"`
	TrafficGB       float64                `json:"traffic_gbyte"`
	Aborted         string                 `json:"aborted,omitempty"`
	Replay          string                 `json:"replay"`
	OpLog           []soakOp               `json:"op_log"`
}

func (s *soak) report() *soakReport {
	r := &soakReport{Seed: s.seed, Users: s.nUsers, Fleet: s.fleet != nil, Duration: s.dur.String(),
		Elapsed: time.Since(s.start).Round(time.Second).String(), SettleBound: soakSettle.String(),
		Ops: s.opCount, OpsTotal: len(s.ops), Checks: s.checks, Violations: s.violCount,
		ViolationList: s.viols, Settled: s.settled, Daemon: s.samples, StatusCalls: len(s.latencies),
		FlowsOK: s.flowsOK.Load(), FlowsFailed: s.flowsFail.Load(), TrafficGB: float64(s.flowBits.Load()) / 8e9,
		Aborted: s.aborted, OpLog: s.ops}
	for _, n := range s.violCount {
		r.ViolationsTotal += n
	}
	if len(s.viols) > 0 {
		r.FirstViolation = &s.viols[0]
	}
	lat := append([]time.Duration(nil), s.latencies...)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) string {
		if len(lat) == 0 {
			return "-"
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))].Round(100 * time.Microsecond).String()
	}
	r.LatencyP50, r.LatencyP99, r.LatencyMax = q(0.5), q(0.99), q(1)
	fl := ""
	if r.Fleet {
		fl = " --fleet"
	}
	r.Replay = fmt.Sprintf("scripts/soak.sh --duration %s --seed %d --users %d%s", s.dur, s.seed, s.nUsers, fl)
	return r
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (r *soakReport) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n== soak report: seed %d, %d users, fleet %v, %s planned, %s elapsed, settle bound %s\n",
		r.Seed, r.Users, r.Fleet, r.Duration, r.Elapsed, r.SettleBound)
	fmt.Fprintf(&b, "operations: %d\n", r.OpsTotal)
	for _, k := range sortedKeys(r.Ops) {
		fmt.Fprintf(&b, "  %-36s %d\n", k, r.Ops[k])
	}
	fmt.Fprintf(&b, "checks run:\n")
	for _, k := range sortedKeys(r.Checks) {
		fmt.Fprintf(&b, "  %-36s %d\n", k, r.Checks[k])
	}
	fmt.Fprintf(&b, "differences seen that settled within the bound: %d\n", r.Settled)
	fmt.Fprintf(&b, "violations: %d\n", r.ViolationsTotal)
	for _, k := range sortedKeys(r.Violations) {
		fmt.Fprintf(&b, "  %-36s %d\n", k, r.Violations[k])
	}
	fmt.Fprintf(&b, "daemon (start / max / end):\n")
	for _, k := range sortedKeys(r.Daemon) {
		x := r.Daemon[k]
		fmt.Fprintf(&b, "  %-14s %10.1f %10.1f %10.1f\n", k, x.Start, x.Max, x.End)
	}
	fmt.Fprintf(&b, "control socket (GET /v1/status, %d calls): p50 %s, p99 %s, max %s\n", r.StatusCalls, r.LatencyP50, r.LatencyP99, r.LatencyMax)
	fmt.Fprintf(&b, "traffic: %d iperf3 transfers done, %d failed, %.2f GB\n", r.FlowsOK, r.FlowsFailed, r.TrafficGB)
	if r.Aborted != "" {
		fmt.Fprintf(&b, "ABORTED: %s\n", r.Aborted)
	}
	if v := r.FirstViolation; v != nil {
		fmt.Fprintf(&b, "first violation at %s: %s: %s\n  operations before it:\n", v.At, v.Invariant, v.Detail)
		for _, op := range v.OpLog {
			fmt.Fprintf(&b, "    #%d %s %s %s: %s\n", op.N, op.AtS, op.Kind, op.Detail, op.Result)
		}
		for _, v := range r.ViolationList[1:] {
			fmt.Fprintf(&b, "  then at %s: %s: %.300s\n", v.At, v.Invariant, v.Detail)
		}
	}
	fmt.Fprintf(&b, "replay: %s\n", r.Replay)
	return b.String()
}
