package kernel

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
)

// update makes TestCaptureDecoderCorpus capture the decoders' fuzz seed
// corpora from the kernel.
var update = flag.Bool("update", false, "capture the netlink decoders' fuzz seed corpora from the kernel into testdata/fuzz (root; review the diff!)")

// TestCaptureDecoderCorpus writes the fuzz seed corpora of the netlink
// decoders (FuzzDecodeObject here, FuzzParseObject in pkg/kernel/u32,
// FuzzSelector in pkg/kernel/internal/tcwire) from what the real kernel
// dumps in a namespace holding shaperd's objects and other tools' (tbf,
// pfifo/bfifo leaves, ingress with mirred, u32 with actions, cls_bpf). It
// runs only with -update, as root and without -short (it needs a network
// namespace); the corpora are committed. Regenerate them after a change of
// what shaperd installs or decodes, and review the diff:
//
//	sudo go test ./pkg/kernel -run '^TestCaptureDecoderCorpus$' -update
func TestCaptureDecoderCorpus(t *testing.T) {
	if !*update {
		t.Skip("run with -update (as root) to capture the fuzz corpora from the kernel")
	}
	netnslab.Require(t)
	ns := netnslab.NewNS(t, "corp")
	run := func(args ...string) { ns.MustRun(args...) }
	run("ip", "link", "add", "c0", "type", "veth", "peer", "name", "c1")
	run("ip", "link", "add", "c2", "type", "veth", "peer", "name", "c3")
	for _, d := range []string{"c0", "c1", "c2", "c3"} {
		run("ip", "link", "set", d, "up")
	}
	run("tc", "qdisc", "add", "dev", "c0", "root", "handle", "1:", "htb", "default", "2")
	run("tc", "class", "add", "dev", "c0", "parent", "1:", "classid", "1:1", "htb", "rate", "40gbit", "ceil", "40gbit", "quantum", "200000")
	run("tc", "class", "add", "dev", "c0", "parent", "1:1", "classid", "1:2", "htb", "rate", "1mbit", "ceil", "10mbit")
	run("tc", "class", "add", "dev", "c0", "parent", "1:1", "classid", "1:100", "htb", "rate", "5mbit", "ceil", "10mbit", "burst", "64k")
	run("tc", "class", "add", "dev", "c0", "parent", "1:1", "classid", "1:101", "htb", "rate", "5mbit", "ceil", "10mbit")
	run("tc", "qdisc", "add", "dev", "c0", "parent", "1:100", "handle", "100:", "pfifo", "limit", "100")
	run("tc", "qdisc", "add", "dev", "c0", "parent", "1:101", "handle", "101:", "bfifo", "limit", "30000")
	run("tc", "filter", "add", "dev", "c0", "parent", "1:", "prio", "100", "protocol", "ip", "handle", "10:", "u32", "divisor", "256")
	run("tc", "filter", "add", "dev", "c0", "parent", "1:", "prio", "100", "protocol", "ip", "u32", "link", "10:", "hashkey", "mask", "0x0000ff00", "at", "16", "match", "u32", "0", "0")
	run("tc", "filter", "add", "dev", "c0", "parent", "1:", "prio", "100", "protocol", "ip", "handle", "10:5:10", "u32", "ht", "10:5:", "match", "ip", "dst", "198.18.5.7/32", "flowid", "1:100")
	run("tc", "filter", "add", "dev", "c0", "parent", "1:", "prio", "102", "protocol", "ipv6", "u32", "match", "ip6", "dst", "2001:db8::/48", "flowid", "1:101")
	run("tc", "filter", "add", "dev", "c0", "parent", "1:", "prio", "5", "protocol", "ip", "u32", "match", "ip", "dst", "198.18.250.1/32",
		"action", "mirred", "egress", "mirror", "dev", "c2")
	run("tc", "filter", "add", "dev", "c0", "parent", "1:", "prio", "7", "protocol", "all", "bpf", "bytecode", "1,6 0 0 0,", "classid", "1:2")
	run("tc", "qdisc", "add", "dev", "c2", "root", "handle", "1:", "tbf", "rate", "100mbit", "burst", "32k", "latency", "50ms",
		"peakrate", "200mbit", "mtu", "1514")
	run("tc", "qdisc", "add", "dev", "c1", "root", "handle", "8001:", "tbf", "rate", "20gbit", "burst", "1mb", "latency", "10ms")
	run("tc", "qdisc", "add", "dev", "c2", "ingress")
	run("tc", "filter", "add", "dev", "c2", "parent", "ffff:", "prio", strconv.Itoa(int(RedirectPref)), "protocol", "all", "u32", "match", "u32", "0", "0",
		"action", "mirred", "egress", "redirect", "dev", "c3")

	h, err := netns.GetFromName(ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	conn, err := netlink.Dial(unix.NETLINK_ROUTE, &netlink.Config{NetNS: int(h)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dump := func(typ netlink.HeaderType, ifindex, parent uint32) [][]byte {
		body := tcwire.Tcmsg{Ifindex: ifindex, Parent: parent}.AppendTo(nil)
		msgs, err := conn.Execute(netlink.Message{Header: netlink.Header{Type: typ, Flags: netlink.Request | netlink.Dump}, Data: body})
		if err != nil {
			t.Fatalf("dump %d: %v", typ, err)
		}
		var out [][]byte
		for _, m := range msgs {
			out = append(out, m.Data)
		}
		return out
	}
	idx := func(dev string) uint32 {
		out := ns.MustRun("cat", "/sys/class/net/"+dev+"/ifindex")
		n, err := strconv.Atoi(out[:len(out)-1])
		if err != nil {
			t.Fatal(err)
		}
		return uint32(n)
	}
	var all [][]byte
	all = append(all, dump(tcwire.RTMGetQdisc, 0, 0)...)
	all = append(all, dump(tcwire.RTMGetTClass, idx("c0"), 0)...)
	all = append(all, dump(tcwire.RTMGetTFilter, idx("c0"), 0x10000)...)
	all = append(all, dump(tcwire.RTMGetTFilter, idx("c2"), 0xffff0000)...)
	u32s := dump(tcwire.RTMGetTFilter, idx("c0"), 0x10000)
	write := func(dir string, seeds [][]byte) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, b := range seeds {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("kernel-%02d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%s: %d seeds", dir, len(seeds))
	}
	write("testdata/fuzz/FuzzDecodeObject", all)
	write("u32/testdata/fuzz/FuzzParseObject", u32s)
	var sels [][]byte
	for _, m := range u32s {
		o, err := parseObject(m)
		if err != nil {
			t.Fatal(err)
		}
		_ = tcwire.EachAttr(o.options, func(typ uint16, p []byte) {
			if typ == tcwire.TCAU32Sel {
				sels = append(sels, append([]byte(nil), p...))
			}
		})
	}
	write("internal/tcwire/testdata/fuzz/FuzzSelector", sels)
}
