package kernel

import (
	"bytes"
	"encoding/hex"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
)

// tcRequest runs `tc qdisc add dev DEV root handle 1: ARGS...` under
// strace in ns and returns the attributes of the RTM_NEWQDISC request tc
// sent (after nlmsghdr and tcmsg), whether or not the kernel accepted it.
func tcRequest(t *testing.T, ns *netnslab.NS, dev string, args ...string) []byte {
	t.Helper()
	b := tcSent(t, ns, tcwire.RTMNewQdisc, append([]string{"qdisc", "add", "dev", dev, "root", "handle", "1:"}, args...)...)
	_, _ = ns.Run("tc", "qdisc", "del", "dev", dev, "root")
	return b
}

// tcSent runs `tc ARGS...` under strace in ns and returns the attributes
// of the request of type typ it sent (after nlmsghdr and tcmsg).
func tcSent(t *testing.T, ns *netnslab.NS, typ byte, args ...string) []byte {
	t.Helper()
	argv := append([]string{"strace", "-e", "trace=sendmsg", "-e", "write=all", "tc"}, args...)
	out, _ := ns.Command(argv...).CombinedOutput()
	// One hex dump per sendmsg, each starting at offset 00000.
	var msgs [][]byte
	line := regexp.MustCompile(`^ \| ([0-9a-f]{5})  ((?:[0-9a-f]{2}  ?)+)`)
	for _, l := range strings.Split(string(out), "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		b, err := hex.DecodeString(strings.ReplaceAll(m[2], " ", ""))
		if err != nil {
			t.Fatalf("strace dump %q: %v", l, err)
		}
		if m[1] == "00000" {
			msgs = append(msgs, nil)
		}
		msgs[len(msgs)-1] = append(msgs[len(msgs)-1], b...)
	}
	const hdr = 16 + tcwire.TcmsgLen // nlmsghdr + tcwire.Tcmsg
	for _, msg := range msgs {
		if len(msg) > hdr && msg[4] == typ {
			return msg[hdr:]
		}
	}
	t.Fatalf("no request of type %d in strace output of tc %v:\n%s", typ, args, out)
	return nil
}

// The leaf encoder writes exactly the attributes iproute2's tc sends for
// the same options, for every kind (tc sends them even when the kernel
// lacks the kind; strace records the request).
func TestLeafEncodingMatchesTc(t *testing.T) {
	netnslab.Require(t)
	if _, err := exec.LookPath("strace"); err != nil {
		t.Fatalf("strace is needed to record tc's requests (apt-get install strace): %v", err)
	}
	ns := netnslab.NewNS(t, "tcenc")
	peer := netnslab.NewNS(t, "tcenc2")
	netnslab.Veth(t, ns, "e0", peer, "e1")
	tests := []struct {
		args []string
		leaf model.LeafQdisc
	}{
		{[]string{"pfifo", "limit", "1000"}, model.LeafQdisc{Kind: "pfifo", Limit: 1000}},
		{[]string{"bfifo", "limit", "31250"}, model.LeafQdisc{Kind: "bfifo", Limit: 31250}},
		{[]string{"pfifo"}, model.LeafQdisc{Kind: "pfifo"}},
		{[]string{"fq_codel", "limit", "1000", "flows", "64", "quantum", "300", "interval", "50ms", "target", "2ms"},
			model.LeafQdisc{Kind: "fq_codel", Limit: 1000, Flows: 64, Quantum: 300, Interval: 50 * time.Millisecond, Target: 2 * time.Millisecond}},
		{[]string{"fq_codel", "target", "5ms"}, model.LeafQdisc{Kind: "fq_codel", Target: 5 * time.Millisecond}},
		{[]string{"sfq", "limit", "127", "flows", "64", "quantum", "1514"}, model.LeafQdisc{Kind: "sfq", Limit: 127, Flows: 64, Quantum: 1514}},
		{[]string{"cake", "besteffort"}, model.LeafQdisc{Kind: "cake", Diffserv: "besteffort"}},
		{[]string{"cake", "diffserv4"}, model.LeafQdisc{Kind: "cake", Diffserv: "diffserv4"}},
		{[]string{"cake", "diffserv8"}, model.LeafQdisc{Kind: "cake", Diffserv: "diffserv8"}},
		{[]string{"cake", "precedence"}, model.LeafQdisc{Kind: "cake", Diffserv: "precedence"}},
	}
	for _, tt := range tests {
		want := tcRequest(t, ns, "e0", tt.args...)
		var a tcwire.Attrs
		encodeLeaf(&a, &tt.leaf)
		if !bytes.Equal(a.B, want) {
			t.Errorf("tc qdisc add ... %s:\nshaperd % x\ntc      % x", strings.Join(tt.args, " "), a.B, want)
		}
	}
}
