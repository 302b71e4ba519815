package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// rampFixture drives Evaluate and a Ramper on the base plan with a fake
// clock advanced by hand.
type rampFixture struct {
	t   *testing.T
	p   *config.Plan
	ov  Overrides
	r   *Ramper
	now time.Time
}

func newRampFixture(t *testing.T, main string) *rampFixture {
	p := loadPlan(t, main, baseUsers)
	f := &rampFixture{t: t, p: p, r: NewRamper(p.Policy), now: time.Date(2026, 12, 2, 10, 0, 0, 0, p.Policy.Location)}
	f.step() // first sight: everything at once
	return f
}

func (f *rampFixture) step() []model.Targets {
	return f.r.Step(Evaluate(f.p, f.ov, nil, f.now), f.now)
}

func (f *rampFixture) tick() []model.Targets {
	f.now = f.now.Add(f.p.Policy.Interval)
	return f.step()
}

func userTarget(t *testing.T, ts []model.Targets, iface int, name string) model.UserTarget {
	t.Helper()
	for _, u := range ts[iface].Users {
		if u.Name == name {
			return u
		}
	}
	t.Fatalf("no user %s", name)
	return model.UserTarget{}
}

// wantLinear is from + (to-from)*k/n computed independently of lerp.
func wantLinear(from, to tbf.Rate, k, n int64) tbf.Rate {
	return tbf.Rate(int64(from) + (int64(to)-int64(from))*k/n)
}

// A changed target moves linearly, one step per tick, over the policy's
// ramp (4s here); bursts stay 5 ms of the step's rate, so the HTB buffer
// (ticks) is the same at every step.
func TestRampLinear(t *testing.T) {
	f := newRampFixture(t, baseMain)
	key := RampKey{"lan0", model.Egress, ClassUser, "alice"}
	a0, _ := f.r.Applied(key)
	if a0.Rate != mbit(50) || a0.Ceil != mbit(100) {
		t.Fatalf("initial %+v", a0)
	}
	mustSet(t, &f.ov, Override{Target: Target{TargetUser, "alice"}, Rate: mbit(90), Ceil: mbit(100)})
	f.tick() // the change arrives: the ramp starts here, nothing moves yet
	start := f.now
	rs, ok := f.r.Ramp(key)
	if !ok || rs.From.Rate != mbit(50) || rs.To.Rate != mbit(90) || !rs.Start.Equal(start) || !rs.End.Equal(start.Add(4*time.Second)) {
		t.Fatalf("ramp %+v %v", rs, ok)
	}
	var ticks []uint32
	for k := int64(1); k <= 5; k++ {
		u := userTarget(t, f.tick(), 0, "alice")
		want := wantLinear(mbit(50), mbit(90), min(k, 4), 4)
		if u.Rate != want || u.Ceil != mbit(100) {
			t.Errorf("step %d: %s/%s, want %s/100mbit", k, u.Rate, u.Ceil, want)
		}
		if u.Burst != tbf.RecommendedBurst(u.Rate) || u.CBurst != tbf.RecommendedBurst(u.Ceil) {
			t.Errorf("step %d: burst %s/%s", k, u.Burst, u.CBurst)
		}
		bt, err := tbf.BufferTicks(u.Rate, u.Burst)
		if err != nil {
			t.Fatal(err)
		}
		ticks = append(ticks, bt)
		if _, ok := f.r.Ramp(key); ok != (k < 4) {
			t.Errorf("step %d: ramp reported %v", k, ok)
		}
	}
	for i, bt := range ticks {
		if d := int64(bt) - int64(ticks[0]); d < -1 || d > 1 {
			t.Errorf("step %d: buffer %d ticks, first %d: burst time not constant", i+1, bt, ticks[0])
		}
	}
	// Other users did not move.
	if b, _ := f.r.Applied(RampKey{"lan0", model.Egress, ClassUser, "bob"}); b.Rate != mbit(20) {
		t.Errorf("bob %+v", b)
	}
}

// A change in the middle of a ramp starts from the instantaneous value;
// a ramp of 0 (set-rate --ramp 0s) changes at once; an override's own
// ramp replaces the policy's.
func TestRampMidChangeAndOverrideRamp(t *testing.T) {
	f := newRampFixture(t, baseMain)
	key := RampKey{"lan0", model.Egress, ClassUser, "alice"}
	mustSet(t, &f.ov, Override{Target: Target{TargetUser, "alice"}, Rate: mbit(90), Ceil: mbit(100)})
	f.tick()
	f.tick()
	f.tick() // 2s into 50 -> 90: at 70
	mustSet(t, &f.ov, Override{Target: Target{TargetUser, "alice"}, Rate: mbit(30)})
	u := userTarget(t, f.step(), 0, "alice") // same instant: new ramp from 70/100
	if u.Rate != mbit(70) || u.Ceil != mbit(100) {
		t.Fatalf("mid-ramp start %s/%s", u.Rate, u.Ceil)
	}
	rs, _ := f.r.Ramp(key)
	if rs.From != (Rates{mbit(70), mbit(100)}) || rs.To != (Rates{mbit(30), mbit(30)}) {
		t.Fatalf("new ramp %+v", rs)
	}
	u = userTarget(t, f.tick(), 0, "alice")
	if u.Rate != wantLinear(mbit(70), mbit(30), 1, 4) || u.Ceil != wantLinear(mbit(100), mbit(30), 1, 4) {
		t.Errorf("after mid-ramp change %s/%s", u.Rate, u.Ceil)
	}
	zero := time.Duration(0)
	mustSet(t, &f.ov, Override{Target: Target{TargetUser, "alice"}, Rate: mbit(5), Ramp: &zero})
	if u = userTarget(t, f.step(), 0, "alice"); u.Rate != mbit(5) || u.Ceil != mbit(5) {
		t.Errorf("ramp 0: %s/%s", u.Rate, u.Ceil)
	}
	if _, ok := f.r.Ramp(key); ok {
		t.Error("ramp 0 left a ramp")
	}
	eight := 8 * time.Second
	mustSet(t, &f.ov, Override{Target: Target{TargetUser, "alice"}, Rate: mbit(85), Ramp: &eight})
	f.step()
	if rs, _ = f.r.Ramp(key); rs.End.Sub(rs.Start) != eight {
		t.Errorf("override ramp %s", rs.End.Sub(rs.Start))
	}
	if u = userTarget(t, f.tick(), 0, "alice"); u.Rate != wantLinear(mbit(5), mbit(85), 1, 8) {
		t.Errorf("8s ramp step 1: %s", u.Rate)
	}
	// Clearing the override ramps back with the policy's default ramp.
	f.ov.Clear(Target{TargetUser, "alice"})
	f.step()
	if rs, _ = f.r.Ramp(key); rs.End.Sub(rs.Start) != f.p.Policy.Ramp || rs.To != (Rates{mbit(50), mbit(100)}) {
		t.Errorf("after clear: %+v", rs)
	}
}

// A decrease caps the burst at new_rate*smooth_window, and HTB's kept
// tokens then cannot release more than that: replayed with the kernel's
// HTB arithmetic. The step after the ramp restores the configured burst
// (HTB keeps its tokens, so raising the buffer grants nothing).
func TestRampHTBDecreaseCap(t *testing.T) {
	main := baseMain
	main = replace(t, main, `smooth_window = "1s"`, `smooth_window = "10ms"`)
	main = replace(t, main, "[tiers.gold]\n", "[tiers.gold]\nburst = \"1mb\"\n")
	f := newRampFixture(t, main)
	mustSet(t, &f.ov, Override{Target: Target{TargetUser, "alice"}, Rate: mbit(10), Ceil: mbit(10)})
	f.step()
	const pkt = 1514
	var prev model.UserTarget = userTarget(t, f.step(), 0, "alice")
	for k := 1; k <= 4; k++ {
		u := userTarget(t, f.tick(), 0, "alice")
		if u.Rate >= prev.Rate {
			t.Fatalf("step %d not a decrease: %s -> %s", k, prev.Rate, u.Rate)
		}
		capB := SmoothCap(tbf.Mebibyte, u.Rate, 10*time.Millisecond)
		if u.Burst != capB || capB >= StepBurst(u.Rate, tbf.Mebibyte, mbit(10)) {
			t.Errorf("step %d: burst %s, want the cap %s", k, u.Burst, capB)
		}
		// The class was saturated and idle long enough to have a full
		// bucket at the previous step's buffer: replay 10 ms at the new
		// step with those tokens kept.
		pt, _ := tbf.BufferTicks(prev.Rate, prev.Burst)
		sent, _ := predictHTB(u.Rate, u.Burst, psched.TicksToNS(pt), 10*time.Millisecond, pkt)
		bound := uint64(u.Burst) + u.Rate.BytesPerSecond()/100 + pkt
		if sent > bound {
			t.Errorf("step %d: %d bytes in 10ms, bound %d", k, sent, bound)
		}
		// At the first cut, without the cap the tokens kept from the 1mb
		// buffer would release far more.
		unc, _ := predictHTB(u.Rate, StepBurst(u.Rate, tbf.Mebibyte, mbit(10)), psched.TicksToNS(pt), 10*time.Millisecond, pkt)
		if k == 1 && unc <= bound {
			t.Errorf("step %d: uncapped %d bytes: the cap made no difference", k, unc)
		}
		prev = u
	}
	if u := userTarget(t, f.tick(), 0, "alice"); u.Rate != mbit(10) || u.Burst != tbf.Mebibyte {
		t.Errorf("settle: %s burst %s, want 10mbit burst 1mb", u.Rate, u.Burst)
	}
}

// TBF: the intermediate steps of a ramp share one target burst, each is at
// least one full frame, the last step installs the full burst. Replayed
// with the kernel's TBF arithmetic (a refill at every change, a sender that
// never runs dry), the bytes leaving during [Start, End) stay within the
// steps' rates plus one burst, where per-step default bursts would not.
func TestTBFRampBudget(t *testing.T) {
	for _, c := range []struct {
		name     string
		from, to tbf.Rate
		ramp     time.Duration
	}{
		{"down 10 steps", tbf.Gbit, mbit(100), 10 * time.Second},
		{"up 10 steps", mbit(100), tbf.Gbit, 10 * time.Second},
		{"down 60 steps, budget of 10 frames", mbit(200), mbit(10), 60 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newRampFixture(t, baseMain)
			zero := time.Duration(0)
			mustSet(t, &f.ov, Override{Target: Target{TargetIface, "wan1"}, Rate: c.from, Ramp: &zero})
			f.step()
			ramp := c.ramp
			mustSet(t, &f.ov, Override{Target: Target{TargetIface, "wan1"}, Rate: c.to, Ramp: &ramp})
			type change struct {
				at    time.Time
				rate  tbf.Rate
				burst tbf.Size
			}
			first := f.step()[2].Interface
			if first.Bandwidth != c.from {
				t.Fatalf("ramp start moved the TBF: %s", first.Bandwidth)
			}
			start := f.now
			var changes []change
			last := change{f.now, c.from, first.Burst}
			for f.now.Before(start.Add(c.ramp)) {
				in := f.tick()[2].Interface
				if in.Bandwidth != last.rate || in.Burst != last.burst {
					last = change{f.now, in.Bandwidth, in.Burst}
					changes = append(changes, last)
				}
			}
			B := StepBurst(c.to, 0, c.to)
			final := changes[len(changes)-1]
			if !final.at.Equal(start.Add(c.ramp)) || final.rate != c.to || final.burst != B {
				t.Fatalf("final step %+v, want %s burst %s at the end", final, c.to, B)
			}
			inter := changes[:len(changes)-1]
			if len(inter) == 0 {
				t.Fatal("no intermediate steps")
			}
			var sum, naive tbf.Size
			for _, ch := range inter {
				if ch.burst < model.MaxFrame {
					t.Errorf("%s: burst %s below one frame", ch.rate, ch.burst)
				}
				sum += ch.burst
				naive += StepBurst(ch.rate, 0, c.to)
			}
			// Changes are spread over the ramp, never more than a
			// stride apart (ceil(steps/affordable) intervals, +1 tick).
			maxGap := f.p.Policy.Interval * time.Duration((int64(c.ramp/f.p.Policy.Interval)+int64(B/model.MaxFrame)-1)/int64(B/model.MaxFrame)+1)
			prevAt := start
			for _, ch := range changes {
				if gap := ch.at.Sub(prevAt); gap > maxGap {
					t.Errorf("%s without a change before %s (stride %s)", gap, ch.at.Sub(start), maxGap)
				}
				prevAt = ch.at
			}
			t.Logf("%d intermediate changes, bursts %s of budget %s (default bursts: %s)", len(inter), sum, B, naive)
			if sum > B {
				t.Errorf("intermediate bursts sum to %s, budget %s", sum, B)
			}
			if naive <= B {
				t.Errorf("test premise: default bursts (%s) would stay within the budget %s", naive, B)
			}
			// Replay [Start, End): from each change to the next, the TBF
			// starts full (tbf_change) and the sender is saturated.
			const pkt = 1514
			var sent, rateBytes uint64
			segs := append([]change{{start, c.from, first.Burst}}, inter...)
			for i, s := range segs {
				end := start.Add(c.ramp)
				if i+1 < len(segs) {
					end = segs[i+1].at
				}
				d := end.Sub(s.at)
				sent += predictTBF(s.rate, s.burst, d, pkt) // the first segment: the bucket may be full already
				rateBytes += s.rate.BytesPerSecond() * uint64(d) / uint64(time.Second)
			}
			// At most the rate, one target burst for the intermediate steps,
			// the burst the TBF held when the ramp began, and a packet of
			// rounding per segment.
			bound := rateBytes + uint64(B) + uint64(first.Burst) + uint64(len(segs))*pkt
			t.Logf("replayed: %d bytes in the ramp, bound %d", sent, bound)
			if sent > bound {
				t.Errorf("%d bytes in the ramp, bound %d", sent, bound)
			}
			var naiveSent uint64
			for i, s := range segs {
				end := start.Add(c.ramp)
				if i+1 < len(segs) {
					end = segs[i+1].at
				}
				b := s.burst
				if i > 0 {
					b = StepBurst(s.rate, 0, c.to)
				}
				naiveSent += predictTBF(s.rate, b, end.Sub(s.at), pkt)
			}
			if naiveSent <= bound {
				t.Errorf("default per-step bursts would also fit (%d <= %d): the test proves nothing", naiveSent, bound)
			}
		})
	}
}

// predictTBF agrees with the closed form: a full bucket plus the rate.
func TestPredictTBF(t *testing.T) {
	for _, c := range []struct {
		rate  tbf.Rate
		burst tbf.Size
		d     time.Duration
	}{{mbit(100), 62500, time.Second}, {mbit(10), 15140, 100 * time.Millisecond}, {tbf.Gbit, 625000, 10 * time.Millisecond}} {
		got := predictTBF(c.rate, c.burst, c.d, 1514)
		ideal := uint64(c.burst) + c.rate.BytesPerSecond()*uint64(c.d)/uint64(time.Second)
		if got > ideal+1514 || got+2*1514 < ideal {
			t.Errorf("%s burst %s for %s: %d bytes, ideal %d", c.rate, c.burst, c.d, got, ideal)
		}
	}
	if got := predictTBF(mbit(10), 1000, time.Second, 1514); got != 0 {
		t.Errorf("oversize packets sent: %d", got)
	}
}

// Seed makes the next Step ramp from what the kernel holds; classes no
// longer desired are forgotten.
func TestRamperSeedAndForget(t *testing.T) {
	p := loadPlan(t, baseMain, baseUsers)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, p.Policy.Location)
	res := Evaluate(p, Overrides{}, nil, now)
	applied := res.Targets()
	applied[0].Users = append([]model.UserTarget(nil), applied[0].Users...)
	applied[0].Users[0].Rate = mbit(10) // alice was at 10mbit in the kernel
	r := NewRamper(p.Policy)
	r.Seed(applied)
	u := userTarget(t, r.Step(res, now), 0, "alice")
	if u.Rate != mbit(10) {
		t.Errorf("seeded step %s", u.Rate)
	}
	if rs, ok := r.Ramp(RampKey{"lan0", model.Egress, ClassUser, "alice"}); !ok || rs.From.Rate != mbit(10) || rs.To.Rate != mbit(50) {
		t.Errorf("ramp from seed %+v %v", rs, ok)
	}
	if n := len(r.Ramps()); n != 1 {
		t.Errorf("%d ramps, want 1", n)
	}
	p.Users = p.Users[:1]
	r.Step(Evaluate(p, Overrides{}, nil, now.Add(time.Second)), now.Add(time.Second))
	if _, ok := r.Applied(RampKey{"lan0", model.Egress, ClassUser, "bob"}); ok {
		t.Error("bob not forgotten")
	}
}

func replace(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("%q not in the config", old)
	}
	return strings.Replace(s, old, new, 1)
}

// An iface override on an HTB interface ramps the root class's bandwidth
// (rates only); SetPolicy changes the ramp of later changes.
func TestRampHTBLink(t *testing.T) {
	f := newRampFixture(t, baseMain)
	mustSet(t, &f.ov, Override{Target: Target{TargetIface, "lan0"}, Rate: mbit(600)})
	f.step()
	for k := int64(1); k <= 4; k++ {
		in := f.tick()[0].Interface
		if want := wantLinear(tbf.Gbit, mbit(600), k, 4); in.Bandwidth != want {
			t.Errorf("step %d: bandwidth %s, want %s", k, in.Bandwidth, want)
		}
	}
	pol := f.p.Policy
	pol.Ramp = 0
	f.r.SetPolicy(pol)
	f.ov.Clear(Target{TargetIface, "lan0"})
	if in := f.step()[0].Interface; in.Bandwidth != tbf.Gbit {
		t.Errorf("ramp 0 policy: %s", in.Bandwidth)
	}
	// Clone is independent of the original.
	c := f.ov.Clone()
	mustSet(t, &c, Override{Target: Target{TargetUser, "alice"}, Rate: mbit(1)})
	if f.ov.Len() != 0 || c.Len() != 1 {
		t.Errorf("Clone shares state: %d %d", f.ov.Len(), c.Len())
	}
}
