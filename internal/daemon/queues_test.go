package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// queueFake is the fake kernel with transmit queues and per-queue byte
// counters (QueueCounters) and class byte counters (ClassCounters) that
// the test sets.
type queueFake struct {
	*fakeKernel
	tx      int
	bytes   []uint64
	classes map[model.Handle]uint64
	missing string // a device TxQueues does not find
}

func (k *queueFake) ClassCounters(device string, handles []model.Handle) ([]model.Class, error) {
	var out []model.Class
	for _, h := range handles {
		for _, c := range k.tree(device).Classes {
			if c.Handle == h {
				c.Stats = &model.Stats{Bytes: k.classes[h]}
				out = append(out, c)
			}
		}
	}
	return out, nil
}

func (k *queueFake) TxQueues(device string) (int, error) {
	if device == k.missing {
		return 0, fmt.Errorf("device %s: %w", device, kernel.ErrNoDevice)
	}
	return k.tx, nil
}

func (k *queueFake) QueueCounters(device string) ([]model.Qdisc, error) {
	t := k.tree(device)
	out := make([]model.Qdisc, len(t.Queues))
	for q, qd := range t.Queues {
		qd.Stats = &model.Stats{Bytes: k.bytes[q]}
		out[q] = qd
	}
	return out, nil
}

// policyTicker returns a function that runs d's policy tick one second
// after the last (the first one second after clk's time).
func policyTicker(t *testing.T, d *Daemon, clk *fakeClock) func() {
	now := clk.Now()
	return func() {
		t.Helper()
		now = now.Add(time.Second)
		if err := d.policyTick(now); err != nil {
			t.Fatal(err)
		}
	}
}

// send adds rate bit/s for d to queue q's counter.
func (k *queueFake) send(q int, rate tbf.Rate, d time.Duration) {
	k.bytes[q] += uint64(float64(rate) / 8 * d.Seconds())
}

const queuesConfig = `
[daemon]
state_dir = "%[1]s/state"
socket = "%[1]s/shaperd.sock"

[[interface]]
name = "lan0"
bandwidth = "100mbit"
queues = "auto"

[tiers.gold]
rate = "1mbit"
ceil = "100mbit"
`

// queueCeils returns the ceils of the queues' root classes in the fake
// kernel, by queue.
func queueCeils(t *testing.T, k *queueFake, n int) []tbf.Rate {
	t.Helper()
	out := make([]tbf.Rate, n)
	for _, c := range k.tree("lan0").Classes {
		if c.Handle.Minor() == model.RootClass.Minor() && c.Parent.Minor() == 0 {
			out[model.QueueOf(c.Handle)] = c.Ceil
		}
	}
	return out
}

// Every policy tick rebalances the queues' shares from what each sent: one
// busy queue gets (nearly) the whole interface, all busy share it
// equally, and the ceils never add up to more than the bandwidth.
func TestQueuesRebalanceEveryTick(t *testing.T) {
	k := &queueFake{fakeKernel: newFakeKernel("lan0"), tx: 4, bytes: make([]uint64, 4)}
	clk := newFakeClock()
	dir := t.TempDir()
	var users strings.Builder
	for i := 0; i < 8; i++ {
		users.WriteString("[[user]]\nname = \"u" + string(rune('a'+i)) + "\"\ntier = \"gold\"\naddresses = [\"198.18.1." + string(rune('1'+i)) + "\"]\n")
	}
	writeConfig(t, dir, queuesConfig, users.String())
	d, err := New(Options{ConfigPath: filepath.Join(dir, "shaperd.toml"), Kernel: k, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	bw := 100 * tbf.Mbit
	tr := k.tree("lan0")
	if tr.Root == nil || tr.Root.Kind != model.ShaperMQ || len(tr.Queues) != 4 {
		t.Fatalf("queues = \"auto\" on a 4-queue device: root %+v with %d queues", tr.Root, len(tr.Queues))
	}
	sum := func(cs []tbf.Rate) (s tbf.Rate) {
		for _, c := range cs {
			s += c
		}
		return s
	}
	if c := queueCeils(t, k, 4); c[0] != bw/4 || sum(c) != bw {
		t.Fatalf("first split %v, want %s each", c, bw/4)
	}
	now := clk.Now()
	tick := func() []tbf.Rate {
		t.Helper()
		now = now.Add(time.Second)
		w := k.writeCount()
		if err := d.policyTick(now); err != nil {
			t.Fatal(err)
		}
		// Only the queues' root classes change (patchSplit), not the
		// tree: at most one write per queue.
		if w := k.writeCount() - w; w > 4 {
			t.Fatalf("a policy tick wrote %d changes, want at most the 4 queue root classes", w)
		}
		c := queueCeils(t, k, 4)
		if s := sum(c); s > bw {
			t.Fatalf("queue ceils %v add up to %s, above %s", c, s, bw)
		}
		return c
	}
	tick() // the first reading
	for i := 0; i < 2; i++ {
		k.send(2, queueCeils(t, k, 4)[2], time.Second)
		tick()
	}
	if c := queueCeils(t, k, 4); c[2] < bw*95/100 {
		t.Errorf("only queue 2 busy: ceils %v, want queue 2 at >= 95%% of %s", c, bw)
	}
	for i := 0; i < 3; i++ {
		c := queueCeils(t, k, 4)
		for q := range c {
			k.send(q, c[q], time.Second)
		}
		tick()
	}
	for q, c := range queueCeils(t, k, 4) {
		if c < bw/4*97/100 || c > bw/4*103/100 {
			t.Errorf("all busy: queue %d ceil %s, want %s +-3%%", q, c, bw/4)
		}
	}
}

// Under per-queue trees a user's class counters reach its status and its
// quota usage: the class is found in the user's queue's tree.
func TestQueuesUserCounters(t *testing.T) {
	k := &queueFake{fakeKernel: newFakeKernel("lan0"), tx: 4, bytes: make([]uint64, 4)}
	clk := newFakeClock()
	dir := t.TempDir()
	writeConfig(t, dir, queuesConfig, "[[user]]\nname = \"ua\"\ntier = \"gold\"\naddresses = [\"198.18.1.1\"]\n"+
		"[[user]]\nname = \"ub\"\ntier = \"gold\"\naddresses = [\"198.18.1.2\"]\n")
	d, err := New(Options{ConfigPath: filepath.Join(dir, "shaperd.toml"), Kernel: k, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := d.ifaces[0]
	h, ok := userHandle(st, "ub")
	if !ok || h.Major() == model.RootQdisc.Major() {
		t.Fatalf("ub's class %s (%v): want one in another queue's tree than ua's", h, ok)
	}
	if u, ok := userOfHandle(st, h); !ok || u != "ub" {
		t.Fatalf("userOfHandle(%s) = %q, %v", h, u, ok)
	}
	sample := func(bytes uint64) {
		tr := k.tree("lan0")
		for i := range tr.Classes {
			if tr.Classes[i].Handle == h {
				tr.Classes[i].Stats = &model.Stats{Bytes: bytes}
			}
		}
		d.sample(st, tr, clk.Now())
	}
	sample(1000)
	clk.now = clk.now.Add(2 * time.Second)
	sample(1000 + 250000)
	found := false
	for _, u := range d.status().Users {
		if u.Name == "ub" {
			found = true
			if u.Bytes != 251000 || u.Throughput != tbf.Mbit {
				t.Errorf("status of ub: %d bytes at %s, want 251000 at 1mbit", u.Bytes, u.Throughput)
			}
		}
	}
	if !found {
		t.Error("ub not in status")
	}
}

// Every policy tick also moves each tier's share between the queues' trees
// (model.RebalanceTier): the tier's users busy on one queue get its whole
// aggregate ceil, busy on all queues they share it, and the tier's classes
// together never exceed its aggregate ceil.
func TestQueuesRebalanceTiers(t *testing.T) {
	k, clk, opts := goldQueues(t)
	d := startQueues(t, opts)
	tierCeils := func() []tbf.Rate {
		out := make([]tbf.Rate, 2)
		var rate tbf.Rate
		for _, c := range k.tree("lan0").Classes {
			if c.Labels.Kind == "tier" {
				out[model.QueueOf(c.Handle)] = c.Ceil
				rate += c.Rate
			}
		}
		if s := out[0] + out[1]; s != 40*tbf.Mbit {
			t.Fatalf("gold's classes' ceils %v add up to %s, want its aggregate ceil 40mbit", out, s)
		}
		// Each class's rate is at least its floor (the user's 1mbit).
		if rate < 10*tbf.Mbit-16 || rate > 11*tbf.Mbit {
			t.Fatalf("gold's classes' rates add up to %s, want its aggregate rate 10mbit (+ up to a 1mbit floor)", rate)
		}
		return out
	}
	if c := tierCeils(); c[0] != 20*tbf.Mbit {
		t.Fatalf("first split of gold %v, want 20mbit each", c)
	}
	ha, _ := userHandle(d.ifaces[0], "ua")
	qa := model.QueueOf(ha)
	gold := func(q int) model.Handle {
		m, _ := d.ifaces[0].ids.QueueIDs(q).Tier("gold")
		return model.MakeHandle(model.QueueHandle(q).Major(), m)
	}
	tick := policyTicker(t, d, clk)
	send := func(q int, rate tbf.Rate) {
		k.classes[gold(q)] += uint64(rate / 8)
		k.send(q, rate, time.Second)
	}
	tick() // the first reading
	for i := 0; i < 2; i++ {
		send(qa, tierCeils()[qa]) // only ua is busy
		tick()
	}
	if c := tierCeils(); c[qa] < 40*tbf.Mbit*95/100 {
		t.Errorf("only ua busy: gold's ceils %v, want ua's queue %d at >= 95%% of 40mbit", c, qa)
	}
	for i := 0; i < 3; i++ {
		c := tierCeils()
		send(0, c[0])
		send(1, c[1])
		tick()
	}
	for q, c := range tierCeils() {
		if c < 20*tbf.Mbit*97/100 || c > 20*tbf.Mbit*103/100 {
			t.Errorf("both busy: gold's class in queue %d ceil %s, want 20mbit +-3%%", q, c)
		}
	}
}

// A restart adopts per-queue trees as the policy loop left them: the new
// process takes the queues' and the tiers' split from the kernel (and its
// ramps start from the kernel's rates), so its first apply writes nothing.
func TestQueuesRestartAdoptsSplit(t *testing.T) {
	k, clk, opts := goldQueues(t)
	d := startQueues(t, opts)
	st := d.ifaces[0]
	ha, _ := userHandle(st, "ua")
	qa := model.QueueOf(ha)
	m, _ := st.ids.QueueIDs(qa).Tier("gold")
	gold := model.MakeHandle(model.QueueHandle(qa).Major(), m)
	now := clk.Now()
	for i := 0; i < 3; i++ { // only ua busy: its queue and its tier class there grow
		k.classes[gold] += uint64(30 * tbf.Mbit / 8)
		k.send(qa, 30*tbf.Mbit, time.Second)
		now = now.Add(time.Second)
		if err := d.policyTick(now); err != nil {
			t.Fatal(err)
		}
	}
	split := *st.targets()
	if len(split.Queues) != 2 || split.Queues[qa].Ceil < 60*tbf.Mbit || split.TierQueues["gold"][qa].Ceil < 35*tbf.Mbit {
		t.Fatalf("after 3 busy ticks: queues %v, gold %v; want ua's queue and tier class grown", split.Queues, split.TierQueues["gold"])
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	before := k.writeCount()
	d2, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if err := d2.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w := k.writeCount() - before; w != 0 {
		t.Errorf("the restarted daemon wrote %d changes; want 0 (queues %v -> %v, gold %v -> %v)", w,
			split.Queues, d2.ifaces[0].targets().Queues, split.TierQueues["gold"], d2.ifaces[0].targets().TierQueues["gold"])
	}
}

// Under per-queue trees, run-time user changes touch only that user's
// class and filters (no rebuild of the trees: the queue split and tier
// classes stay), a new user is placed on a queue, and a full step and
// reconcile afterwards find nothing to write.
func TestQueuesRuntimeUsersAreIncremental(t *testing.T) {
	k, clk, opts := goldQueues(t)
	d := startQueues(t, opts)
	defer d.Close()
	steps := []struct {
		req  control.UserRequest
		user string
	}{
		{control.UserRequest{Op: control.UserAdd, Name: "carol", Tier: "gold", Addresses: []string{"198.18.1.30", "2001:db8:1::30"}}, "carol"},
		{control.UserRequest{Op: control.UserAdd, Name: "dave", Tier: "gold"}, "dave"},
		{userReq(control.UserAddAddress, "dave", "198.18.1.40"), "dave"},
		{userReq(control.UserSetAddresses, "carol", "198.18.1.31"), "carol"},
		{userReq(control.UserRemove, "dave"), "dave"},
	}
	evals, dumps := d.work.evaluations, k.dumpCount()
	for _, s := range steps {
		seen := recordChanges(k.fakeKernel)
		if _, err := d.changeUser(s.req); err != nil {
			t.Fatalf("user %s %s: %v", s.req.Op, s.req.Name, err)
		}
		onlyUser(t, s.req.Op+" "+s.req.Name, *seen, s.user)
	}
	if d.work.evaluations != evals {
		t.Errorf("%d full evaluations for run-time changes, want none", d.work.evaluations-evals)
	}
	// Patched, not rebuilt and reconciled (which dumps the kernel).
	if n := k.dumpCount() - dumps; n != 0 {
		t.Errorf("%d dumps for run-time changes, want none (the trees were rebuilt)", n)
	}
	st := d.ifaces[0]
	qc, okc := st.ids.Queue("carol")
	qd, okd := st.ids.Queue("dave")
	if !okc || !okd || qc == qd {
		t.Errorf("carol on queue %d (%v), dave on %d (%v): want both placed, on different queues (balanced)", qc, okc, qd, okd)
	}
	if !hasFilter(k.fakeKernel, "lan0", "198.18.1.31/32", "carol") || hasFilter(k.fakeKernel, "lan0", "198.18.1.30/32", "carol") {
		t.Error("carol's filters do not follow set-addresses")
	}
	w := k.writeCount()
	if err := d.policyStep(clk.Now()); err != nil {
		t.Fatal(err)
	}
	if err := d.reconcile(st, "test"); err != nil {
		t.Fatal(err)
	}
	if got := k.writeCount() - w; got != 0 {
		t.Errorf("a full step after the incremental changes wrote %d times, want 0", got)
	}
}

// queues = "auto" for uploads whose IFB shaperd has yet to create counts
// the interface's transmit queues (the IFB is made with as many).
func TestQueuesAutoIngressWithoutIFB(t *testing.T) {
	k := &queueFake{fakeKernel: newFakeKernel("lan0"), tx: 3, bytes: make([]uint64, 3), missing: "ifb-lan0"}
	dir := t.TempDir()
	writeConfig(t, dir, queuesConfig+`
[[interface]]
name = "lan0"
direction = "ingress"
ifb = "ifb-lan0"
bandwidth = "100mbit"
queues = "auto"
`, "[[user]]\nname = \"ua\"\ntier = \"gold\"\naddresses = [\"198.18.1.1\"]\n")
	d, err := New(Options{ConfigPath: filepath.Join(dir, "shaperd.toml"), Kernel: k, Clock: newFakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, in := range d.plan.Interfaces {
		if in.Queues != 3 {
			t.Errorf("interface %s %s: queues %d, want the interface's 3", in.Name, in.Direction, in.Queues)
		}
	}
}

// goldQueues is a 2-queue fake device and the options of a daemon with
// users ua and ub in tier gold (aggregate 10mbit/40mbit) on it.
func goldQueues(t *testing.T) (*queueFake, *fakeClock, Options) {
	t.Helper()
	k := &queueFake{fakeKernel: newFakeKernel("lan0"), tx: 2, bytes: make([]uint64, 2), classes: map[model.Handle]uint64{}}
	clk := newFakeClock()
	dir := t.TempDir()
	writeConfig(t, dir, queuesConfig+"aggregate_rate = \"10mbit\"\naggregate_ceil = \"40mbit\"\n",
		"[[user]]\nname = \"ua\"\ntier = \"gold\"\naddresses = [\"198.18.1.1\"]\n"+
			"[[user]]\nname = \"ub\"\ntier = \"gold\"\naddresses = [\"198.18.1.2\"]\n")
	return k, clk, Options{ConfigPath: filepath.Join(dir, "shaperd.toml"), Kernel: k, Clock: clk}
}

// startQueues makes a daemon with opts and runs it once.
func startQueues(t *testing.T, opts Options) *Daemon {
	t.Helper()
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d
}
