package kernel

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// labKernel builds a router lab and opens a Kernel in its router namespace.
func labKernel(t *testing.T, users int) (*netnslab.RouterLab, *Kernel) {
	t.Helper()
	netnslab.Require(t)
	lab := netnslab.NewRouterLab(t, netnslab.RouterLabOptions{Users: users})
	k, err := Open(Options{NetNS: lab.Router.Name})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return lab, k
}

// reconcile runs the daemon's path: Build, Dump, Diff, Apply, Verify. It
// fails the test on any error or remaining mismatch and returns the desired
// tree and the Apply result.
func reconcile(t *testing.T, k *Kernel, tg model.Targets, ids *model.Assignment) (model.Tree, Result) {
	t.Helper()
	desired, err := model.Build(tg, ids)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	res, err := apply(t, k, desired)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	verify(t, k, desired)
	return desired, res
}

// apply diffs the device's actual tree against desired and applies it.
func apply(t *testing.T, k *Kernel, desired model.Tree) (Result, error) {
	t.Helper()
	actual, err := k.Actual(desired)
	if err != nil {
		t.Fatalf("Actual %s: %v", desired.Device, err)
	}
	return k.Apply(model.Diff(actual, desired))
}

func verify(t *testing.T, k *Kernel, desired model.Tree) {
	t.Helper()
	mm, err := k.Verify(desired)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if len(mm) > 0 {
		t.Fatalf("Verify: %d mismatches:\n%s", len(mm), strings.Join(mm, "\n"))
	}
}

// user is a UserTarget with one address.
func user(name, tier string, addr netip.Addr, rate, ceil tbf.Rate) model.UserTarget {
	return model.UserTarget{Name: name, Tier: tier, Prefixes: []netip.Prefix{netip.PrefixFrom(addr, addr.BitLen())}, Rate: rate, Ceil: ceil}
}

// within reports whether got is within frac of want.
func within(got, want, frac float64) bool { return got >= want*(1-frac) && got <= want*(1+frac) }

// goodput is the TCP payload rate iperf3 reports when the shaper allows
// rate of Ethernet frames (without FCS) on a 1500-byte MTU path: 1448 of
// 1514 bytes per IPv4 segment with timestamps, 1428 for IPv6.
func goodput(rate tbf.Rate, v6 bool) float64 {
	payload := 1448.0
	if v6 {
		payload = 1428
	}
	return float64(rate) * payload / 1514
}

// measure runs flows and retries once (the machine is shared) when ok
// rejects the first result. It returns the last rates.
func measure(t *testing.T, lab *netnslab.RouterLab, ok func([]float64) bool, flows ...netnslab.Flow) []float64 {
	t.Helper()
	rates := lab.Measure(t, 3, flows...)
	if !ok(rates) {
		t.Logf("measurement off (%v), retrying once", mbit(rates))
		rates = lab.Measure(t, 3, flows...)
	}
	return rates
}

// mbit formats rates in Mbit/s for logs.
func mbit(rates []float64) []string {
	out := make([]string, len(rates))
	for i, r := range rates {
		out[i] = strconv.FormatFloat(r/1e6, 'f', 2, 64)
	}
	return out
}
