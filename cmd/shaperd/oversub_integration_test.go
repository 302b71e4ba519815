package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Downloads: three users guaranteed 20mbit each on a 30mbit interface
// (root oversubscribed x2.02 with the default class). Uploads: the same
// users guaranteed 10mbit each under a 20mbit tier aggregate on a 1gbit
// IFB (the aggregate oversubscribed x1.5).
const oversubConfig = `
[daemon]
socket = "%[1]s/shaperd.sock"
state_dir = "%[1]s/state"
metrics = "` + metricsAddr + `"
reconcile_interval = "1s"

[policy]
ramp = "0s"
timezone = "UTC"

[[interface]]
name = "r-lan"
bandwidth = "30mbit"
default_tier = "t"

[[interface]]
name = "r-lan"
direction = "ingress"
ifb = "r-ifb"
bandwidth = "1gbit"
default_tier = "t"

[tiers.t]
rate = "20mbit"
ceil = "30mbit"
upload_rate = "10mbit"
upload_ceil = "20mbit"
upload_aggregate_rate = "20mbit"
upload_aggregate_ceil = "20mbit"
`

// classRate measures the bit rate through class h of device (the kernel's
// byte counters, link-layer frames) over window, while flows run.
func classRates(t *testing.T, u *unitLab, device string, window time.Duration, handles ...model.Handle) []float64 {
	t.Helper()
	bytes := func() []uint64 {
		tr, err := u.k.Dump(device)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]uint64, len(handles))
		for i, h := range handles {
			for _, c := range tr.Classes {
				if c.Handle == h && c.Stats != nil {
					out[i] = c.Stats.Bytes
				}
			}
		}
		return out
	}
	b0 := bytes()
	start := time.Now()
	time.Sleep(window)
	b1 := bytes()
	secs := time.Since(start).Seconds()
	rates := make([]float64, len(handles))
	for i := range handles {
		rates[i] = float64(b1[i]-b0[i]) * 8 / secs
	}
	return rates
}

// TestOversubscribedBandwidthIsACap: when the users' guarantees add up to
// more than the interface (or their tier aggregate), the bandwidth stays a
// cap with every user saturated, and each user still gets at least its
// scaled guarantee.
func TestOversubscribedBandwidthIsACap(t *testing.T) {
	u := newUnitLab(t, 3, oversubConfig, func(lab *netnslab.RouterLab) string {
		return strings.NewReplacer(`"bronze"`, `"t"`, `"silver"`, `"t"`, `"gold"`, `"t"`).Replace(labUsers(lab))
	})
	st := u.status()
	var scaled int
	for _, us := range st.Users {
		if strings.Contains(us.Reason, "oversubscribed x") {
			scaled++
		}
	}
	if scaled != 6 {
		t.Errorf("%d of 6 user entries say they are oversubscribed:\n%s", scaled, u.mustCtl("status"))
	}

	for _, c := range []struct {
		name     string
		dir      netnslab.Direction
		device   string
		capacity tbf.Rate // the parent whose cap is checked
	}{
		{"downloads under the interface", netnslab.Download, "r-lan", 30 * tbf.Mbit},
		{"uploads under the tier aggregate", netnslab.Upload, "r-ifb", 20 * tbf.Mbit},
	} {
		t.Run(c.name, func(t *testing.T) {
			var handles []model.Handle
			var parent model.Handle
			for _, a := range u.Users4 {
				cl := u.classOf(c.device, a)
				handles = append(handles, cl.Handle)
				parent = cl.Parent
			}
			var flows []netnslab.Flow
			for _, a := range u.Users4 {
				flows = append(flows, netnslab.Flow{User: a, Dir: c.dir, Streams: 4})
			}
			done := make(chan []float64, 1)
			go func() { done <- u.Measure(t, 7, flows...) }()
			time.Sleep(2500 * time.Millisecond) // past iperf3's omitted second and slow start
			rates := classRates(t, u, c.device, 5*time.Second, append(handles, parent)...)
			goodput := <-done
			total := rates[len(rates)-1]
			t.Logf("%s: parent %s %.2f Mbit/s (cap %v); users %.2f %.2f %.2f Mbit/s at the class; iperf3 %.2f %.2f %.2f",
				c.name, parent, total/1e6, c.capacity, rates[0]/1e6, rates[1]/1e6, rates[2]/1e6, goodput[0]/1e6, goodput[1]/1e6, goodput[2]/1e6)
			if total > 1.03*float64(c.capacity) {
				t.Errorf("%s: %.2f Mbit/s through %s, above the %v cap by more than 3%%", c.name, total/1e6, parent, c.capacity)
			}
			if total < 0.9*float64(c.capacity) {
				t.Errorf("%s: %.2f Mbit/s through %s, well below the %v the users could use", c.name, total/1e6, parent, c.capacity)
			}
			for i, r := range rates[:len(handles)] {
				g := u.classOf(c.device, u.Users4[i]).Rate
				if r < 0.95*float64(g) {
					t.Errorf("user %d: %.2f Mbit/s, below its scaled guarantee %v", i, r/1e6, g)
				}
			}
		})
	}
}

// thousandsFoldConfig is a 20mbit download shared by tiers lo (5mbit) and
// hi (10mbit); with 3,000 users their guarantees add up to 22.5 gbit,
// oversubscribed x1125.
const thousandsFoldConfig = `
[daemon]
socket = "%[1]s/shaperd.sock"
state_dir = "%[1]s/state"
metrics = "` + metricsAddr + `"

[policy]
ramp = "0s"
timezone = "UTC"

[[interface]]
name = "r-lan"
bandwidth = "20mbit"
default_rate = "1mbit"

[tiers.lo]
rate = "5mbit"
ceil = "20mbit"

[tiers.hi]
rate = "10mbit"
ceil = "20mbit"
`

// TestOversubscribedThousandsFold: guarantees oversubscribed more than a
// thousand times over are scaled in proportion (not all to the kernel's
// 8bit minimum), and a hi user (10mbit) downloading beside a lo user
// (5mbit) gets about twice as much, measured, while the interface stays
// full and capped. Two lab users download; 2,998 others are idle.
func TestOversubscribedThousandsFold(t *testing.T) {
	u := newUnitLab(t, 2, thousandsFoldConfig, func(lab *netnslab.RouterLab) string {
		var b strings.Builder
		fmt.Fprintf(&b, "[[user]]\nname = \"lo0\"\ntier = \"lo\"\naddresses = [%q]\n\n", lab.Users4[0])
		fmt.Fprintf(&b, "[[user]]\nname = \"hi0\"\ntier = \"hi\"\naddresses = [%q]\n\n", lab.Users4[1])
		for i := range 2998 {
			fmt.Fprintf(&b, "[[user]]\nname = \"idle%d\"\ntier = %q\naddresses = [\"198.19.%d.%d\"]\n\n", i, []string{"lo", "hi"}[i%2], 100+i/250, 1+i%250)
		}
		return b.String()
	})
	lo, hi := u.classOf("r-lan", u.Users4[0]), u.classOf("r-lan", u.Users4[1])
	// 5mbit and 10mbit scaled by 20mbit*2^20/22.501gbit: 932/2^20, 4444
	// and 8888 bit/s, read back in whole bytes/s (4440, 8888).
	if lo.Rate < 4000 || float64(hi.Rate) < 1.99*float64(lo.Rate) || float64(hi.Rate) > 2.01*float64(lo.Rate) {
		t.Errorf("scaled guarantees lo %v hi %v in the kernel, want about 4.4kbit and twice that", lo.Rate, hi.Rate)
	}
	if lo.Quantum != 62500 || hi.Quantum != 125000 {
		t.Errorf("quanta lo %d hi %d, want those of 5 and 10mbit (62500, 125000)", lo.Quantum, hi.Quantum)
	}
	if out := u.mustCtl("status", "lo0"); !strings.Contains(out, "oversubscribed x1125.") {
		t.Errorf("status lo0 does not say oversubscribed x1125.xx:\n%s", out)
	}

	flows := []netnslab.Flow{{User: u.Users4[0], Dir: netnslab.Download, Streams: 4}, {User: u.Users4[1], Dir: netnslab.Download, Streams: 4}}
	done := make(chan []float64, 1)
	go func() { done <- u.Measure(t, 7, flows...) }()
	time.Sleep(2500 * time.Millisecond) // past iperf3's omitted second and slow start
	rates := classRates(t, u, "r-lan", 5*time.Second, lo.Handle, hi.Handle, lo.Parent)
	goodput := <-done
	t.Logf("lo %.2f hi %.2f Mbit/s at the classes (ratio %.2f), root %.2f; iperf3 %.2f %.2f",
		rates[0]/1e6, rates[1]/1e6, rates[1]/rates[0], rates[2]/1e6, goodput[0]/1e6, goodput[1]/1e6)
	if rates[2] < 0.9*20e6 || rates[2] > 1.03*20e6 {
		t.Errorf("%.2f Mbit/s through the root, want the 20mbit interface full and capped", rates[2]/1e6)
	}
	if rates[1] < 1.5*rates[0] {
		t.Errorf("hi %.2f Mbit/s, lo %.2f: the 10mbit tier should get about twice the 5mbit one", rates[1]/1e6, rates[0]/1e6)
	}
}
