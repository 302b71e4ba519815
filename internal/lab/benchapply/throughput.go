package main

import (
	"bytes"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
)

// Addresses of a throughput lab: the shaper's side of the link, its peer,
// and the iperf3 server's address (a user address behind the peer).
const (
	tpShaperAddr = "198.19.255.1"
	tpPeerAddr   = "198.19.255.2"
)

// tpLab is a shaper namespace (device sd0, shaped by the daemon) linked to
// a peer namespace that holds the target user's address.
type tpLab struct {
	shaper, peer *lab
	d            *shaperd
	target       netip.Addr
	class        model.Handle // the target user's class
}

// newTPLab builds the two namespaces and has the daemon apply p (Start +
// Once); the daemon's loop does not run (nothing changes).
func newTPLab(o options, name string, p daemonPlan, target netip.Addr) (*tpLab, time.Duration, error) {
	s, err := newLab(name + "-s")
	if err != nil {
		return nil, 0, err
	}
	pe, err := newLab(name + "-p")
	if err != nil {
		_ = s.close()
		return nil, 0, err
	}
	l := &tpLab{shaper: s, peer: pe, target: target}
	fail := func(err error) (*tpLab, time.Duration, error) { l.close(); return nil, 0, err }
	for _, argv := range [][]string{
		{"ip", "-n", s.name, "link", "add", bigDev, "type", "veth", "peer", "name", "pe0", "netns", pe.name},
		{"ip", "-n", s.name, "addr", "add", tpShaperAddr + "/30", "dev", bigDev},
		{"ip", "-n", s.name, "link", "set", bigDev, "up"},
		{"ip", "-n", pe.name, "addr", "add", tpPeerAddr + "/30", "dev", "pe0"},
		{"ip", "-n", pe.name, "addr", "add", l.target.String() + "/32", "dev", "pe0"},
		{"ip", "-n", pe.name, "link", "set", "pe0", "up"},
		{"ip", "-n", s.name, "route", "add", "198.18.0.0/15", "via", tpPeerAddr},
	} {
		if _, err := command(argv...); err != nil {
			return fail(err)
		}
	}
	s.devs = []string{bigDev}
	d, c, err := startShaperd(o, s.name, "tp", p)
	if err != nil {
		return fail(fmt.Errorf("apply %d users in %s: %w", p.users, s.name, err))
	}
	l.d = d
	h, ok := userClass(c.tree, "target")
	if !ok {
		return fail(fmt.Errorf("the daemon made no class for the target user"))
	}
	l.class = h
	return l, c.total.wall, nil
}

// userClass is the handle of user's class in t.
func userClass(t model.Tree, user string) (model.Handle, bool) {
	for _, c := range t.Classes {
		if c.Labels.Kind == "user" && c.Labels.User == user {
			return c.Handle, true
		}
	}
	return 0, false
}

func (l *tpLab) close() {
	if l.d != nil {
		l.d.close()
	}
	_ = l.shaper.close()
	_ = l.peer.close()
}

// packets returns the target class's packet counter.
func (l *tpLab) packets() (uint64, error) {
	t, err := l.d.Kernel.Dump(bigDev)
	if err != nil {
		return 0, err
	}
	for _, c := range t.Classes {
		if c.Handle == l.class && c.Stats != nil {
			return c.Stats.Packets, nil
		}
	}
	return 0, fmt.Errorf("class %s not in the dump", l.class)
}

// iperf measures TCP throughput shaper -> target for seconds (after one
// omitted second) in bits per second, and checks that the target's class
// carried the traffic.
func (l *tpLab) iperf(seconds, port int) (float64, error) {
	srv := exec.Command("ip", "netns", "exec", l.peer.name, "iperf3", "-s", "-1", "-B", l.target.String(), "-p", strconv.Itoa(port))
	var srvOut bytes.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		return 0, err
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	for i := 0; ; i++ {
		out, err := l.peer.run("ss", "-Hltn", "sport", "=", ":"+strconv.Itoa(port))
		if err == nil && strings.Contains(out, ":"+strconv.Itoa(port)) {
			break
		}
		if i == 100 {
			return 0, fmt.Errorf("iperf3 server in %s not listening: %s", l.peer.name, srvOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	before, err := l.packets()
	if err != nil {
		return 0, err
	}
	out, err := l.shaper.run("iperf3", "-J", "-c", l.target.String(), "-p", strconv.Itoa(port), "-B", tpShaperAddr,
		"-O", "1", "-t", strconv.Itoa(seconds))
	bps, perr := netnslab.ParseIperf3(out)
	if perr != nil {
		if err != nil {
			return 0, err
		}
		return 0, perr
	}
	after, err := l.packets()
	if err != nil {
		return 0, err
	}
	if after-before < 1000 {
		return 0, fmt.Errorf("the target's class %s counted %d packets of the iperf3 run", l.class, after-before)
	}
	return bps, nil
}

// throughputResult is (d): median throughput with 1 user and with users
// users (the target's filter added last), runs each, interleaved.
type throughputResult struct {
	one, many []float64 // bits per second
}

// measureThroughput builds both labs, runs iperf3 runs times in each,
// alternating which goes first, and removes the labs again.
func measureThroughput(o options) (throughputResult, error) {
	var r throughputResult
	target := userAddr(o.users - 1)
	one, _, err := newTPLab(o, o.prefix+"-tp1", throughputPlan(bigDev, 1, o.users, o.classifier), target)
	if err != nil {
		return r, err
	}
	defer one.close()
	many, d, err := newTPLab(o, o.prefix+"-tpn", throughputPlan(bigDev, o.users, o.users, o.classifier), target)
	if err != nil {
		return r, err
	}
	defer many.close()
	fmt.Printf("(d) labs: 1 user, and %d users applied by the daemon in %.2f s (classifier %s); target %s (filter added last), iperf3 -t %d, %d runs each\n",
		o.users, d.Seconds(), classifierName(o.classifier), many.target, o.tpSeconds, o.tpRuns)
	port := 5201 + int(time.Now().UnixNano()%1000)
	for i := 0; i < o.tpRuns; i++ {
		order := []struct {
			l    *tpLab
			acc  *[]float64
			what string
		}{{one, &r.one, "1 user"}, {many, &r.many, fmt.Sprintf("%d users", o.users)}}
		if i%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, x := range order {
			port++
			bps, err := x.l.iperf(o.tpSeconds, port)
			if err != nil {
				return r, fmt.Errorf("(d) %s: %w", x.what, err)
			}
			*x.acc = append(*x.acc, bps)
			fmt.Printf("(d) run %d  %-12s %5.2f Gbit/s  [%s]\n", i+1, x.what, bps/1e9, situation(o.prefix))
		}
	}
	return r, nil
}
