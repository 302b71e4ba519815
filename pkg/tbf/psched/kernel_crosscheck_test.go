package psched_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/pkg/tbf"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// The kernel cross-check: install HTB classes and TBF qdiscs with the
// system's tc in a network namespace of our own and compare what the kernel
// reports with package psched's predictions. The links stay down, so no packet
// ever touches the buckets and HTB's tokens equal the buffer.

// crosscheckNetns creates a namespace with a veth pair (tx0, tx1, both down)
// and removes it when the test ends. It skips unless root and tc/ip are
// present, and fails instead when SHAPERD_REQUIRE_NETNS=1.
func crosscheckNetns(t *testing.T) string {
	t.Helper()
	unavailable := func(why string) {
		t.Helper()
		if os.Getenv("SHAPERD_REQUIRE_NETNS") == "1" {
			t.Fatalf("network namespaces required (SHAPERD_REQUIRE_NETNS=1) but %s", why)
		}
		t.Skipf("kernel cross-check skipped: %s", why)
	}
	if os.Geteuid() != 0 {
		unavailable("not running as root")
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			unavailable(tool + " not found")
		}
	}
	var suffix [3]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		t.Fatalf("random namespace suffix: %v", err)
	}
	ns := "tbfx" + hex.EncodeToString(suffix[:])
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		unavailable(fmt.Sprintf("ip netns add %s: %v: %s", ns, err, out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", ns, err, out)
		}
	})
	crosscheckRun(t, ns, "ip", "link", "add", "tx0", "type", "veth", "peer", "name", "tx1")
	return ns
}

// crosscheckRun runs a command inside the namespace and returns its stdout.
func crosscheckRun(t *testing.T, ns string, args ...string) string {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("netns %s: %s: %v: %s", ns, strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// tcConversions returns the xmittime/xmitsize that the installed tc uses:
// the rounding fix came with iproute2 6.15.
func tcConversions(t *testing.T) (xmit func(uint64, uint32) uint32, size func(uint64, uint32) uint64, version string) {
	t.Helper()
	out, err := exec.Command("tc", "-V").CombinedOutput()
	if err != nil {
		t.Fatalf("tc -V: %v: %s", err, out)
	}
	m := regexp.MustCompile(`iproute2-(?:ss)?v?(\d+)\.(\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("cannot read the iproute2 version from %q", out)
	}
	major, _ := strconv.Atoi(string(m[1]))
	minor, _ := strconv.Atoi(string(m[2]))
	version = fmt.Sprintf("%d.%d", major, minor)
	if major > 6 || (major == 6 && minor >= 15) {
		return psched.XmitTime, psched.XmitSize, version
	}
	return psched.XmitTimeLegacy, func(r uint64, ticks uint32) uint64 { return uint64(psched.XmitSizeLegacy(r, ticks)) }, version
}

func TestKernelCrosscheckHTB(t *testing.T) {
	ns := crosscheckNetns(t)
	xmit, _, version := tcConversions(t)
	crosscheckRun(t, ns, "tc", "qdisc", "add", "dev", "tx0", "root", "handle", "1:", "htb")
	tests := []struct{ rate, burst string }{
		{"10mbit", "1600"}, // docs/kernel.md: tokens 20000
		{"10mbit", "1514"},
		{"1gbit", "1600"},
		{"1gbit", ""},         // tc's default burst
		{"20gbit", ""},        // default burst 1602 B: 0 ticks with old tc
		{"34400mbit", "64kb"}, // above 2^32 B/s: TCA_HTB_RATE64
		{"100gbit", "62500000"},
		{"100mbit", "15140"},
	}
	for i, tt := range tests {
		classid := fmt.Sprintf("1:%x", 0x10+i)
		args := []string{"tc", "class", "add", "dev", "tx0", "parent", "1:", "classid", classid, "htb", "rate", tt.rate, "quantum", "60000"}
		if tt.burst != "" {
			args = append(args, "burst", tt.burst)
		}
		crosscheckRun(t, ns, args...)
	}
	dump := crosscheckRun(t, ns, "tc", "-s", "-d", "class", "show", "dev", "tx0")
	re := regexp.MustCompile(`(?s)class htb (1:[0-9a-f]+) .*?tokens: (-?\d+) ctokens: (-?\d+)`)
	found := 0
	for _, m := range re.FindAllStringSubmatch(dump, -1) {
		classid := m[1]
		i, err := strconv.ParseInt(strings.TrimPrefix(classid, "1:"), 16, 64)
		if err != nil || i < 0x10 || int(i-0x10) >= len(tests) {
			t.Fatalf("unexpected class %s in\n%s", classid, dump)
		}
		tt := tests[i-0x10]
		rate, err := tbf.ParseRate(tt.rate)
		if err != nil {
			t.Fatal(err)
		}
		burst := tbf.Size(psched.HTBDefaultBurst(rate.BytesPerSecond()))
		if tt.burst != "" {
			if burst, err = tbf.ParseSize(tt.burst); err != nil {
				t.Fatal(err)
			}
		}
		wantTokens := xmit(rate.BytesPerSecond(), uint32(burst))
		wantCtokens := xmit(rate.BytesPerSecond(), uint32(psched.HTBDefaultBurst(rate.BytesPerSecond()))) // cburst default, ceil = rate
		tokens, _ := strconv.ParseInt(m[2], 10, 64)
		ctokens, _ := strconv.ParseInt(m[3], 10, 64)
		// A fresh class starts full: tokens = PSCHED_NS2TICKS(PSCHED_TICKS2NS(buffer)) = buffer.
		if tokens != int64(wantTokens) || ctokens != int64(wantCtokens) {
			t.Errorf("tc %s, class %s rate %s burst %s: kernel tokens %d ctokens %d, predicted %d %d",
				version, classid, tt.rate, burst, tokens, ctokens, wantTokens, wantCtokens)
		}
		found++
	}
	if found != len(tests) {
		t.Fatalf("found %d of %d classes in\n%s", found, len(tests), dump)
	}
}

func TestKernelCrosscheckTBF(t *testing.T) {
	ns := crosscheckNetns(t)
	_, xsize, version := tcConversions(t)
	tests := []struct{ rate, burst string }{
		{"10mbit", "1600"},
		{"1gbit", "15140"},
		{"34400mbit", "64kb"},
		{"100gbit", "62500000"}, // tc 6.1 shows 62487500 (L2T rounds 5 ms down to 4999999 ns)
		{"100gbit", "1612"},
	}
	for _, tt := range tests {
		t.Run(tt.rate+"/"+tt.burst, func(t *testing.T) {
			crosscheckRun(t, ns, "tc", "qdisc", "replace", "dev", "tx1", "root", "handle", "1:", "tbf",
				"rate", tt.rate, "burst", tt.burst, "limit", "100000")
			var qdiscs []struct {
				Kind    string `json:"kind"`
				Options struct {
					Rate  uint64 `json:"rate"`
					Burst uint64 `json:"burst"`
				} `json:"options"`
			}
			js := crosscheckRun(t, ns, "tc", "-j", "qdisc", "show", "dev", "tx1")
			if err := json.Unmarshal([]byte(js), &qdiscs); err != nil || len(qdiscs) != 1 || qdiscs[0].Kind != "tbf" {
				t.Fatalf("tc -j qdisc show: %v: %s", err, js)
			}
			rate, err := tbf.ParseRate(tt.rate)
			if err != nil {
				t.Fatal(err)
			}
			burst, err := tbf.ParseSize(tt.burst)
			if err != nil {
				t.Fatal(err)
			}
			// tc sends TCA_TBF_BURST: the kernel keeps buffer = L2T(burst) ns
			// and dumps it as ticks; tc turns those ticks back into bytes.
			tb := psched.TBFFromBurst(psched.NewRateConfig(rate.BytesPerSecond(), 0, 0), uint32(burst))
			want := xsize(rate.BytesPerSecond(), tb.DumpTicks())
			got := qdiscs[0].Options
			if got.Rate != rate.BytesPerSecond() || got.Burst != want {
				t.Errorf("tc %s, tbf rate %s burst %s: kernel shows rate %d B/s burst %d B, predicted %d B/s %d B (buffer %d ns = %d ticks)",
					version, tt.rate, tt.burst, got.Rate, got.Burst, rate.BytesPerSecond(), want, tb.BufferNS, tb.DumpTicks())
			}
		})
	}
}
