package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/lab/etcdlab"
	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// soakFleet is the soak's fleet part (SHAPERD_SOAK_FLEET=1): a real etcd
// in the router's namespace (the router reaches it on its loopback, as it
// reaches its fleet's etcd), the lab's plan pushed to it with `shaperctl
// fleet push` whenever the soak edits the plan, etcd killed and restarted
// (a plan pushed as soon as it is back, before the router has
// reconnected; sometimes the daemon restarted while etcd is down), and
// fleet overrides with and without leases.
type soakFleet struct {
	s    *soak
	etcd *etcdlab.Server
	down bool
	// outages are the etcd outages: from the kill to the restart.
	outages [][2]time.Time
	// lastRev is the newest revision pushed.
	lastRev int64
	// overrides are the fleet overrides set-rate --fleet confirmed.
	overrides map[string]soakOverride
	unknown   map[string]bool
	// leases are when fleet overrides with a lease were set, by key.
	leases map[string]time.Time
	// graceUntil: connected and revision are checked after it (the
	// client's reconnect backoff reaches 10 s).
	graceUntil time.Time
}

// soakFleetConfig is the [fleet] table of the router's shaperd.toml, which
// is also the plan file pushed (its [policy], [tiers] and users).
const soakFleetConfig = `
[fleet]
endpoints = ["http://127.0.0.1:2379"]
prefix = "/soak"
router = "soak-r1"
dial_timeout = "1s"
`

func (f *soakFleet) startEtcd(lab *netnslab.RouterLab) {
	f.etcd = etcdlab.StartIn(f.s.t, lab.Router)
	f.overrides, f.unknown, f.leases = map[string]soakOverride{}, map[string]bool{}, map[string]time.Time{}
}

// ctl runs shaperctl in the router's namespace (where etcd listens) with
// the router's configuration, which says where etcd is.
func (f *soakFleet) ctl(args ...string) (int, string) {
	cmd := f.s.u.Router.Command(append([]string{f.s.u.ctl}, args...)...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		return -1, err.Error()
	}
	return 0, string(out)
}

// push pushes the router's configuration as the fleet's plan; it returns
// the exit code and output, and records the revision.
func (f *soakFleet) push() (int, string) {
	code, out := f.ctl("fleet", "push", "--config", f.s.u.cfg, "--json")
	if code == 0 {
		var r struct {
			Revision int64 `json:"revision"`
		}
		if err := json.Unmarshal([]byte(out), &r); err == nil && r.Revision > 0 {
			f.lastRev = r.Revision
		}
	}
	return code, out
}

// afterStart pushes the lab's plan once the daemon runs.
func (f *soakFleet) afterStart() {
	if code, out := f.push(); code != 0 {
		f.s.t.Fatalf("fleet push: exit %d\n%s", code, out)
	}
	f.graceUntil = time.Now().Add(soakSettle)
}

// opOutage kills etcd for 2-8 s; meanwhile a fleet override is tried
// (refused: not acknowledged) and, one time in two, the daemon restarted
// (it comes back from its fleet cache); once etcd is back a plan is pushed
// at once, before the router has reconnected.
func (f *soakFleet) opOutage(op *soakOp) {
	op.errorsOK = true
	s := f.s
	d := time.Duration(2000+s.rng.Intn(6000)) * time.Millisecond
	restart := s.rng.Intn(2) == 0
	begin := time.Now()
	f.etcd.Stop()
	f.down = true
	code, _ := f.ctl("set-rate", "u0", "7mbit", "--fleet", "--config", s.u.cfg)
	details := []string{fmt.Sprintf("etcd killed for %v", d), fmt.Sprintf("set-rate --fleet meanwhile: exit %d", code)}
	if code == 0 {
		f.overrides["u0|both"] = soakOverride{target: "u0", dir: "both", rate: 7 * tbf.Mbit}
	}
	if restart {
		details = append(details, "the daemon restarted (kill -9) while etcd is down")
		s.kill9()
		if !s.restartWait(op) {
			return
		}
	}
	time.Sleep(time.Until(begin.Add(d)))
	f.etcd.Restart()
	f.down = false
	f.outages = append(f.outages, [2]time.Time{begin, time.Now()})
	s.massRate = s.pick("40kbit", "50kbit", "60kbit")
	s.writePlanOnly()
	pc, pout := f.push()
	details = append(details, fmt.Sprintf("etcd back, plan pushed at once (mass rate %s): %s", s.massRate, result(pc, pout)))
	if pc != 0 {
		s.violate("operation refused", "fleet push after etcd came back: "+result(pc, pout))
	}
	f.graceUntil = time.Now().Add(15 * time.Second)
	op.Detail = strings.Join(details, "; ")
	if op.Result == "" {
		op.Result = "ok"
	}
}

// opOverride sets or clears a fleet override, with a lease (--for) or not.
func (f *soakFleet) opOverride(op *soakOp) {
	s := f.s
	if len(f.overrides) > 0 && s.rng.Intn(3) == 0 {
		keys := sortedKeys(f.overrides)
		o := f.overrides[keys[s.rng.Intn(len(keys))]]
		op.Detail = "clear " + o.target + " --fleet"
		code, out := f.ctl("clear", o.target, "--fleet", "--config", s.u.cfg)
		for _, d := range []string{"both", "download", "upload"} {
			delete(f.overrides, o.target+"|"+d)
			if code != 0 {
				f.unknown[o.target+"|"+d] = true
			} else {
				delete(f.unknown, o.target+"|"+d)
			}
		}
		s.expectOK(op, code, out)
		return
	}
	target := s.pick("u0", "u1", "u2", "u3", "tier:bronze", "tier:silver")
	rate := s.pick(soakRates...)
	args := []string{"set-rate", target, rate, "--fleet", "--config", s.u.cfg}
	var until time.Time
	if s.rng.Intn(2) == 0 {
		args = append(args, "--for", "15s")
		until = time.Now().Add(15 * time.Second)
		f.leases[target+"|both"] = time.Now()
	}
	op.Detail = strings.Join(args[1:], " ")
	code, out := f.ctl(args...)
	key := target + "|both"
	if !s.expectOK(op, code, out) {
		f.unknown[key] = true
		return
	}
	delete(f.overrides, target+"|download")
	delete(f.overrides, target+"|upload")
	delete(f.unknown, key)
	f.overrides[key] = soakOverride{target: target, dir: "both", rate: mustRate(rate), until: until}
}

func mustRate(s string) tbf.Rate {
	r, err := tbf.ParseRate(s)
	if err != nil {
		panic(err)
	}
	return r
}

// check: connected, the newest revision pushed in force and none
// refused (after the grace of an outage), and every fleet override
// confirmed in force (kept through outages and restarts).
func (f *soakFleet) check(st *control.Status, mism map[string]string) {
	s := f.s
	s.checks["fleet"]++
	now := time.Now()
	if st.Fleet == nil {
		mism["fleet:status"] = "status has no fleet part"
		return
	}
	if !f.down && now.After(f.graceUntil) {
		if !st.Fleet.Connected {
			mism["fleet:connected"] = "etcd is up, the router not connected"
		}
		if st.Fleet.Revision < f.lastRev {
			mism["fleet:revision"] = fmt.Sprintf("revision %d in force, %d pushed", st.Fleet.Revision, f.lastRev)
		}
		if st.Fleet.Refused != 0 || len(st.Fleet.Errors) > 0 {
			mism["fleet:refused"] = fmt.Sprintf("refused revision %d: %v", st.Fleet.Refused, st.Fleet.Errors)
		}
	}
	have := overridesFrom(st, control.SourceFleet)
	for k, o := range f.overrides {
		if !o.until.IsZero() && now.After(o.until.Add(-2*time.Second)) {
			continue // a lease: etcd ends it (later when it was down meanwhile)
		}
		if h, ok := have[k]; !ok || h.Rate.BytesPerSecond() != o.rate.BytesPerSecond() {
			mism["fleet:override "+k] = fmt.Sprintf("fleet override %s %v acknowledged, in force: %v", k, o.rate, ok)
		}
	}
	if !f.down && now.After(f.graceUntil) {
		for k := range have {
			if _, ok := f.overrides[k]; !ok && !f.unknown[k] && !f.leased(k) {
				mism["fleet:extra override "+k] = "fleet override " + k + " in force, cleared or never acknowledged"
			}
		}
	}
}

// leased reports whether k was set with a lease that may still run:
// etcd renews a lease's time to live when it restarts, so an outage can
// lengthen it by its TTL.
func (f *soakFleet) leased(k string) bool {
	set, ok := f.leases[k]
	return ok && time.Since(set) < time.Duration(len(f.outages)+1)*20*time.Second
}

// explains reports whether at falls in an etcd outage or the 30 s after it.
func (f *soakFleet) explains(at time.Time) bool {
	for _, o := range f.outages {
		if !at.Before(o[0]) && at.Before(o[1].Add(30*time.Second)) {
			return true
		}
	}
	return f.down
}
