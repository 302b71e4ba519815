package main

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/tbf"
)

const dhcpHook = "../../contrib/dnsmasq/shaperd-dhcp-hook"

// hasFilterFor reports whether device has a filter for addr.
func (u *unitLab) hasFilterFor(device string, addr netip.Addr) bool {
	u.t.Helper()
	tr, err := u.k.Dump(device)
	if err != nil {
		u.t.Fatal(err)
	}
	for _, f := range tr.Filters {
		if f.Prefix.Addr() == addr && f.Prefix.IsSingleIP() {
			return true
		}
	}
	return false
}

// TestDnsmasqHook runs contrib/dnsmasq's --dhcp-script as dnsmasq does
// (ACTION MAC IP HOSTNAME, the DNSMASQ_* environment) against shaperd
// started as the unit, and checks the kernel: a known client's lease adds
// its address to its user (created with the mapping file's tier), a del
// removes it, a lease that is never released ends by itself, and a
// client not in the mapping file is left alone.
func TestDnsmasqHook(t *testing.T) {
	// Three hosts; users.toml names the first two, the third is a DHCP
	// client (the laptop).
	u := newUnitLab(t, 3, daemonConfig, func(lab *netnslab.RouterLab) string {
		var b strings.Builder
		for i := range 2 {
			fmt.Fprintf(&b, "[[user]]\nname = \"u%d\"\ntier = \"bronze\"\naddresses = [%q]\n\n", i, lab.Users4[i])
		}
		return b.String()
	})
	laptop := u.Users4[2]
	mapFile := filepath.Join(u.dir, "dhcp-users")
	if err := os.WriteFile(mapFile, []byte("# test\n52:54:00:00:00:01  laptop  gold  # by MAC\nid:01:aa:bb  phone  silver\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hook := func(env []string, args ...string) {
		t.Helper()
		cmd := exec.Command("sh", append([]string{dhcpHook}, args...)...)
		cmd.Env = append(os.Environ(), "SHAPERCTL="+u.ctl, "SHAPERD_SOCKET="+u.sock, "SHAPERD_USER_MAP="+mapFile)
		cmd.Env = append(cmd.Env, env...)
		if code, out := runCmd(t, cmd); code != 0 {
			t.Fatalf("hook %v: exit %d\n%s\ndaemon log:\n%s", args, code, out, u.Logs.String())
		}
	}
	expires := func(d time.Duration) string {
		return fmt.Sprintf("DNSMASQ_LEASE_EXPIRES=%d", time.Now().Add(d).Unix())
	}

	hook([]string{expires(time.Hour)}, "add", "52:54:00:00:00:01", laptop.String(), "laptop")
	if c := u.classOf("r-lan", laptop); c.Rate != 40*tbf.Mbit {
		t.Errorf("the laptop's class after add: %v, want gold's 40mbit", c.Rate)
	}
	found := false
	for _, us := range u.status().Users {
		if us.Name == "laptop" {
			found = true
			if us.Source != control.SourceRuntime || us.Tier != "gold" {
				t.Errorf("status of laptop: source %q tier %q", us.Source, us.Tier)
			}
		}
	}
	if !found {
		t.Error("laptop not in status")
	}
	// A DHCPv6 lease of the same laptop: the DUID is the argument, the MAC
	// in DNSMASQ_MAC.
	laptop6 := u.Users6[2]
	hook([]string{expires(time.Hour), "DNSMASQ_IAID=1", "DNSMASQ_MAC=52:54:00:00:00:01"}, "add", "00:01:00:01:2c:00:00:01", laptop6.String())
	if c := u.classOf("r-lan", laptop6); c.Rate != 40*tbf.Mbit {
		t.Errorf("the laptop's IPv6 class: %v, want gold's 40mbit", c.Rate)
	}
	// A renewal (old) of the same lease changes nothing but its end.
	hook([]string{expires(2 * time.Hour)}, "old", "52:54:00:00:00:01", laptop.String(), "laptop")
	if out := u.mustCtl("user", "list"); !strings.Contains(out, "laptop") || !strings.Contains(out, "runtime") {
		t.Errorf("user list after renewal:\n%s", out)
	}

	// A restart keeps the run-time user and adopts its class: no writes.
	if err := u.Stop(); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, u.Logs.String())
	}
	u.Start()
	u.WaitReady(60 * time.Second)
	time.Sleep(1200 * time.Millisecond) // a reconcile tick
	if got := u.metric("shaperd_kernel_writes_total"); got != 0 {
		t.Errorf("restart with a run-time user: %v kernel writes, want 0", got)
	}
	if c := u.classOf("r-lan", laptop); c.Rate != 40*tbf.Mbit {
		t.Errorf("the laptop's class after restart: %v, want 40mbit", c.Rate)
	}

	hook(nil, "del", "52:54:00:00:00:01", laptop.String(), "laptop")
	if u.hasFilterFor("r-lan", laptop) {
		t.Error("the laptop's filter stayed after del")
	}

	// A client-id lease of 2 s that dnsmasq never reports ended.
	phone := netip.MustParseAddr("198.18.250.9")
	hook([]string{"DNSMASQ_CLIENT_ID=01:AA:BB", "DNSMASQ_LEASE_LENGTH=2"}, "add", "52:54:00:00:00:99", phone.String())
	if !u.hasFilterFor("r-lan", phone) {
		t.Fatalf("no filter for the phone's lease\n%s", u.Logs.String())
	}
	waitFor(t, 10*time.Second, "the phone's lease to end by itself", func() bool { return !u.hasFilterFor("r-lan", phone) })

	// Unknown clients and other actions are left alone.
	stranger := netip.MustParseAddr("198.18.250.10")
	hook(nil, "add", "52:54:00:00:00:77", stranger.String())
	hook(nil, "init")
	if u.hasFilterFor("r-lan", stranger) {
		t.Error("a client not in the mapping file got a filter")
	}

	// users.toml takes the laptop over at a reload: the file wins.
	hook([]string{expires(time.Hour)}, "add", "52:54:00:00:00:01", laptop.String(), "laptop")
	u.writeConfig(daemonConfig, fmt.Sprintf("[[user]]\nname = \"laptop\"\ntier = \"bronze\"\naddresses = [%q]\n", laptop))
	u.mustCtl("reload")
	if c := u.classOf("r-lan", laptop); c.Rate != 10*tbf.Mbit {
		t.Errorf("the laptop after users.toml took it over: %v, want bronze's 10mbit", c.Rate)
	}
	if out := u.mustCtl("user", "list", "--json"); !strings.Contains(out, `"user": "laptop",
      "tier": "bronze",
      "source": "users.toml"`) {
		t.Errorf("user list after the reload:\n%s", out)
	}
	if !strings.Contains(u.Logs.String(), "the file wins") {
		t.Errorf("no log line says the file won:\n%s", u.Logs.String())
	}
}

const keaHook = "../../contrib/kea/shaperd-kea-hook"

// TestKeaHook runs contrib/kea's run_script hook as Kea's run_script
// library does (the hook point as the argument, the lease in LEASE4_* /
// LEASES4_AT<i>_* variables) against shaperd started as the unit, and
// checks the kernel's filter for the address appear and disappear.
func TestKeaHook(t *testing.T) {
	u := newUnitLab(t, 2, daemonConfig, func(lab *netnslab.RouterLab) string {
		return fmt.Sprintf("[[user]]\nname = \"u0\"\ntier = \"bronze\"\naddresses = [%q]\n", lab.Users4[0])
	})
	laptop := u.Users4[1]
	mapFile := filepath.Join(u.dir, "dhcp-users")
	if err := os.WriteFile(mapFile, []byte("52:54:00:00:00:01 laptop gold\nid:01:aa:bb phone silver\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hook := func(point string, env ...string) {
		t.Helper()
		cmd := exec.Command("sh", keaHook, point)
		cmd.Env = append(os.Environ(), "SHAPERCTL="+u.ctl, "SHAPERD_SOCKET="+u.sock, "SHAPERD_USER_MAP="+mapFile)
		cmd.Env = append(cmd.Env, env...)
		if code, out := runCmd(t, cmd); code != 0 {
			t.Fatalf("kea hook %s: exit %d\n%s\ndaemon log:\n%s", point, code, out, u.Logs.String())
		}
	}
	hook("leases4_committed", "LEASES4_SIZE=1", "LEASES4_AT0_ADDRESS="+laptop.String(),
		"LEASES4_AT0_HWADDR=52:54:00:00:00:01", "LEASES4_AT0_VALID_LIFETIME=3600", "DELETED_LEASES4_SIZE=0")
	if c := u.classOf("r-lan", laptop); c.Rate != 40*tbf.Mbit {
		t.Errorf("the laptop's class after leases4_committed: %v, want gold's 40mbit", c.Rate)
	}
	hook("leases4_committed", "LEASES4_SIZE=0", "DELETED_LEASES4_SIZE=1",
		"DELETED_LEASES4_AT0_ADDRESS="+laptop.String(), "DELETED_LEASES4_AT0_HWADDR=52:54:00:00:00:01")
	if u.hasFilterFor("r-lan", laptop) {
		t.Error("the laptop's filter stayed after a deleted lease")
	}
	hook("lease4_renew", "LEASE4_ADDRESS="+laptop.String(), "LEASE4_HWADDR=52:54:00:00:00:01", "LEASE4_VALID_LIFETIME=3600")
	if !u.hasFilterFor("r-lan", laptop) {
		t.Error("no filter after lease4_renew")
	}
	hook("lease4_release", "LEASE4_ADDRESS="+laptop.String(), "LEASE4_HWADDR=52:54:00:00:00:01")
	if u.hasFilterFor("r-lan", laptop) {
		t.Error("the laptop's filter stayed after lease4_release")
	}
	// By client-id, a 2 s lease that Kea never reports expired.
	phone := netip.MustParseAddr("198.18.250.9")
	hook("lease4_renew", "LEASE4_ADDRESS="+phone.String(), "LEASE4_HWADDR=52:54:00:00:00:99",
		"LEASE4_CLIENT_ID=01:AA:BB", "LEASE4_VALID_LIFETIME=2")
	if !u.hasFilterFor("r-lan", phone) {
		t.Fatal("no filter for the phone's lease")
	}
	waitFor(t, 10*time.Second, "the phone's lease to end by itself", func() bool { return !u.hasFilterFor("r-lan", phone) })
	// Unknown clients and other hook points are left alone.
	stranger := netip.MustParseAddr("198.18.250.10")
	hook("lease4_renew", "LEASE4_ADDRESS="+stranger.String(), "LEASE4_HWADDR=52:54:00:00:00:77", "LEASE4_VALID_LIFETIME=60")
	hook("pkt4_receive")
	if u.hasFilterFor("r-lan", stranger) {
		t.Error("a client not in the mapping file got a filter")
	}
}

const radiusHook = "../../contrib/freeradius/shaperd-radius-hook"

// TestFreeRADIUSHook runs contrib/freeradius's exec program with the
// accounting attributes in the environment as FreeRADIUS's exec module
// passes them (quoted strings) against shaperd started as the unit:
// Start makes the user with WISPr-Bandwidth-Max-Down as its rate and the
// Framed-IP-Address as its address, Stop removes it.
func TestFreeRADIUSHook(t *testing.T) {
	u := newUnitLab(t, 2, daemonConfig, func(lab *netnslab.RouterLab) string {
		return fmt.Sprintf("[[user]]\nname = \"u0\"\ntier = \"bronze\"\naddresses = [%q]\n", lab.Users4[0])
	})
	addr := u.Users4[1]
	radius := func(env ...string) {
		t.Helper()
		cmd := exec.Command("sh", radiusHook)
		cmd.Env = append(os.Environ(), "SHAPERCTL="+u.ctl, "SHAPERD_SOCKET="+u.sock,
			"SHAPERD_USER_MAP="+filepath.Join(u.dir, "none"), "SHAPERD_RADIUS_TIER=silver")
		cmd.Env = append(cmd.Env, env...)
		if code, out := runCmd(t, cmd); code != 0 {
			t.Fatalf("radius hook %v: exit %d\n%s\ndaemon log:\n%s", env, code, out, u.Logs.String())
		}
	}
	session := []string{`USER_NAME="Alice@Example.org"`, `FRAMED_IP_ADDRESS=` + addr.String()}
	radius(append(session, `ACCT_STATUS_TYPE=Start`, `WISPR_BANDWIDTH_MAX_DOWN=7000000`)...)
	if c := u.classOf("r-lan", addr); c.Rate != 7*tbf.Mbit || c.Ceil != 7*tbf.Mbit {
		t.Errorf("the session's class: %v/%v, want WISPr's 7mbit/7mbit", c.Rate, c.Ceil)
	}
	found := false
	for _, us := range u.status().Users {
		if us.Name == "alice-example-org" && us.Interface == "r-lan" {
			found = us.Source == control.SourceRuntime && us.Tier == "silver"
		}
	}
	if !found {
		t.Error("no run-time silver user alice-example-org in status")
	}
	radius(append(session, `ACCT_STATUS_TYPE=Interim-Update`)...)
	radius(append(session, `ACCT_STATUS_TYPE=Stop`)...)
	if u.hasFilterFor("r-lan", addr) {
		t.Error("the session's filter stayed after Stop")
	}
	if out := u.mustCtl("user", "list"); strings.Contains(out, "alice-example-org") {
		t.Errorf("the user stayed after Stop:\n%s", out)
	}
}
