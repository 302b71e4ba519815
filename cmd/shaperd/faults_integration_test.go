package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// The fault matrix: each case does something that goes wrong on routers
// to a daemon started as the systemd unit starts it, then asserts what
// the operator is owed: a clear error that names the thing (where there is
// an error), every other user still shaped at its rate (classes and
// filters in the kernel, and real traffic), class counters not reset, and
// the state (a live override) not lost. docs/faults.md lists the cases.

// faultLab is the unit lab with the invariants the matrix checks.
type faultLab struct {
	*unitLab
	// rates are the users' expected download rates (u1 has an override).
	rates map[string]tbf.Rate
	// bytes are the users' class byte counters at the last check.
	bytes map[string]uint64
}

// check asserts the invariants: every lab user's download class exists
// with its rate and its filter, its byte counter did not go back (unless
// resetOK: the case destroyed the classes on purpose), the override of u1
// is still in force and on disk, and u0's traffic is shaped to its rate.
func (f *faultLab) check(t *testing.T, resetOK bool) {
	t.Helper()
	for i, addr := range f.Users4 {
		name := fmt.Sprintf("u%d", i)
		var c = f.classOf("r-lan", addr)
		if c.Rate != f.rates[name] {
			t.Errorf("%s: rate %v in the kernel, want %v", name, c.Rate, f.rates[name])
		}
		if c.Stats.Bytes < f.bytes[name] && !resetOK {
			t.Errorf("%s: class %s byte counter went back from %d to %d", name, c.Handle, f.bytes[name], c.Stats.Bytes)
		}
		f.bytes[name] = c.Stats.Bytes
	}
	ov, err := os.ReadFile(filepath.Join(f.dir, "state", "overrides.json"))
	if err != nil || !bytes.Contains(ov, []byte(`"u1"`)) {
		t.Errorf("the override of u1 is not in state_dir: %v %s", err, ov)
	}
	if got := f.Download(t, f.Users4[0], 1); !within(got, f.rates["u0"], 0.7, 1.1) {
		t.Errorf("u0's download %.2f Mbit/s, want ~%v", got/1e6, f.rates["u0"])
	}
}

// interfaceStates returns the state status shows for each interface, by
// device (the IFB for an ingress interface).
func (f *faultLab) interfaceStates() map[string]string {
	out := map[string]string{}
	for _, i := range f.status().Interfaces {
		out[i.Device] = i.State
	}
	return out
}

// rawRequest sends one HTTP request over the control socket and returns
// the status code and body.
func (f *faultLab) rawRequest(t *testing.T, method, path, contentType string, body io.Reader) (int, string) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", f.sock)
	}}, Timeout: 30 * time.Second}
	req, err := http.NewRequest(method, "http://shaperd"+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// massTier is a tier for many users whose guarantees (100kbit each) fit
// r-lan's 1gbit, so the lab users' rates are not scaled down.
const massTier = "\n[tiers.mass]\nrate = \"100kbit\"\nceil = \"1mbit\"\n"

// manyUsers returns users.toml with the lab's users and n more of tier
// mass (see massTier) on addresses outside the lab (198.18.64.0 and up).
func manyUsers(f *faultLab, n int) string {
	var b strings.Builder
	b.WriteString(labUsers(f.RouterLab))
	for i := range n {
		fmt.Fprintf(&b, "[[user]]\nname = \"x%05d\"\ntier = \"mass\"\naddresses = [\"198.18.%d.%d\"]\n", i, 64+i/250, i%250+1)
	}
	return b.String()
}

func TestFaultMatrix(t *testing.T) {
	u := newUnitLab(t, 3, u32Config(daemonConfig), labUsers) // deletes u32 priorities by hand
	f := &faultLab{unitLab: u, bytes: map[string]uint64{},
		rates: map[string]tbf.Rate{"u0": 10 * tbf.Mbit, "u1": 15 * tbf.Mbit, "u2": 40 * tbf.Mbit}}
	u.mustCtl("set-rate", "u1", "15mbit", "--ramp", "0s")
	u.Download(t, u.Users4[0], 1)
	f.check(t, false)
	bin, _ := binaries(t)
	writes := func() float64 { return u.metric("shaperd_kernel_writes_total") }

	if os.Getenv("FAULT_ONLY_KILL") != "" {
		goto kill
	}
	t.Run("interface missing at start, then created", func(t *testing.T) {
		if st := f.interfaceStates()["r-x0"]; st != control.StateMissing {
			t.Errorf("r-x0 before it exists: state %q, want %q", st, control.StateMissing)
		}
		u.Router.MustRun("ip", "link", "add", "r-x0", "type", "veth", "peer", "name", "r-x1")
		waitFor(t, 3*time.Second, "r-x0 ok in status", func() bool { return f.interfaceStates()["r-x0"] == control.StateOK })
		f.check(t, false)
	})

	t.Run("interface deleted and recreated", func(t *testing.T) {
		u.Router.MustRun("ip", "link", "del", "r-x0")
		waitFor(t, 3*time.Second, "r-x0 missing in status", func() bool { return f.interfaceStates()["r-x0"] == control.StateMissing })
		u.Router.MustRun("ip", "link", "add", "r-x0", "type", "veth", "peer", "name", "r-x1")
		waitFor(t, 3*time.Second, "r-x0 shaped again", func() bool {
			out, err := u.Router.Run("tc", "qdisc", "show", "dev", "r-x0")
			return err == nil && strings.Contains(out, "qdisc htb 1:")
		})
		f.check(t, false)
	})

	t.Run("IFB deleted by hand", func(t *testing.T) {
		u.Router.MustRun("ip", "link", "del", "r-ifb")
		waitFor(t, 5*time.Second, "uploads shaped again", func() bool {
			out, err := u.Router.Run("tc", "class", "show", "dev", "r-ifb")
			return err == nil && strings.Contains(out, "rate 40Mbit")
		})
		if got := f.Upload(t, u.Users4[2], 1); !within(got, 40*tbf.Mbit, 0.7, 1.1) {
			t.Errorf("u2's upload after the IFB came back: %.2f Mbit/s, want ~40", got/1e6)
		}
		f.check(t, false)
	})

	t.Run("root qdisc deleted by hand", func(t *testing.T) {
		u.Router.MustRun("tc", "qdisc", "del", "dev", "r-lan", "root")
		waitFor(t, 5*time.Second, "r-lan shaped again", func() bool {
			out, err := u.Router.Run("tc", "class", "show", "dev", "r-lan")
			return err == nil && strings.Contains(out, "rate 40Mbit")
		})
		f.check(t, true) // the operator destroyed the classes and their counters
	})

	t.Run("class changed by hand", func(t *testing.T) {
		c := u.classOf("r-lan", u.Users4[2])
		u.Router.MustRun("tc", "class", "change", "dev", "r-lan", "parent", c.Parent.String(), "classid", c.Handle.String(),
			"htb", "rate", "1mbit", "ceil", "1mbit")
		waitFor(t, 3*time.Second, "class repaired", func() bool { return u.classOf("r-lan", u.Users4[2]).Rate == 40*tbf.Mbit })
		f.check(t, false)
	})

	t.Run("filter deleted by hand", func(t *testing.T) {
		u.Router.MustRun("tc", "filter", "del", "dev", "r-lan", "parent", "1:", "pref", "102", "protocol", "ipv6")
		waitFor(t, 3*time.Second, "IPv6 filters back", func() bool {
			out, err := u.Router.Run("tc", "filter", "show", "dev", "r-lan", "protocol", "ipv6")
			return err == nil && strings.Contains(out, "u32")
		})
		f.check(t, false)
	})

	t.Run("invalid reload is refused and changes nothing", func(t *testing.T) {
		w := writes()
		good, _ := os.ReadFile(u.cfg)
		os.WriteFile(u.cfg, append(good, []byte("\n[tiers.broken]\nrate = \"fast\"\n")...), 0o644)
		out, err := u.Reload()
		os.WriteFile(u.cfg, good, 0o644)
		if err == nil || !strings.Contains(out, "tiers.broken.rate") || !strings.Contains(out, "shaperd.toml:") {
			t.Errorf("reload of an invalid config: %v, want a refusal naming the file and tiers.broken.rate\n%s", err, out)
		}
		if got := writes() - w; got != 0 {
			t.Errorf("%v kernel writes after a refused reload", got)
		}
		f.check(t, false)
	})

	t.Run("duplicate addresses in different notations", func(t *testing.T) {
		w := writes()
		users := labUsers(u.RouterLab) + "[[user]]\nname = \"dup1\"\ntier = \"bronze\"\naddresses = [\"2001:db8:9::1\"]\n\n" +
			"[[user]]\nname = \"dup2\"\ntier = \"bronze\"\naddresses = [\"2001:0db8:9:0::1\"]\n"
		u.writeConfig(u32Config(daemonConfig), users)
		out, err := u.Reload()
		u.writeConfig(u32Config(daemonConfig), labUsers(u.RouterLab))
		if err == nil || !strings.Contains(out, "dup1") || !strings.Contains(out, "dup2") || !strings.Contains(out, "users.toml:") {
			t.Errorf("reload with one address in two notations: %v, want a refusal naming users.toml, dup1 and dup2\n%s", err, out)
		}
		if got := writes() - w; got != 0 {
			t.Errorf("%v kernel writes after a refused reload", got)
		}
		f.check(t, false)
	})

	t.Run("a user with 1,000 addresses", func(t *testing.T) {
		var addrs []string
		for i := range 1000 {
			addrs = append(addrs, fmt.Sprintf("%q", fmt.Sprintf("198.18.%d.%d/32", 32+i/250, i%250+1)))
		}
		users := labUsers(u.RouterLab) + "[[user]]\nname = \"wide\"\ntier = \"silver\"\naddresses = [" + strings.Join(addrs, ", ") + "]\n"
		u.writeConfig(u32Config(daemonConfig), users)
		if out, err := u.Reload(); err != nil {
			t.Fatalf("reload with a 1,000-address user: %v\n%s", err, out)
		}
		tr, err := u.k.Dump("r-lan")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		wide := u.classOf("r-lan", netip.MustParseAddr("198.18.35.250"))
		for _, fl := range tr.Filters {
			if fl.ClassID == wide.Handle {
				n++
			}
		}
		if n != 1000 || wide.Rate != 20*tbf.Mbit {
			t.Errorf("wide: %d filters to class %s at %v, want 1,000 at 20mbit", n, wide.Handle, wide.Rate)
		}
		f.check(t, false)
		u.writeConfig(u32Config(daemonConfig), labUsers(u.RouterLab))
		if out, err := u.Reload(); err != nil {
			t.Fatalf("reload back: %v\n%s", err, out)
		}
	})

	t.Run("SIGHUP storm: 20 reloads in a second", func(t *testing.T) {
		w, ok := writes(), u.metric("shaperd_reloads_total")
		for range 20 {
			u.Signal(syscall.SIGHUP)
			time.Sleep(50 * time.Millisecond)
		}
		waitFor(t, 10*time.Second, "reloads counted", func() bool { return u.metric("shaperd_reloads_total") > ok })
		if !u.Running() {
			t.Fatalf("the daemon died in a SIGHUP storm\n%s", u.Logs.String())
		}
		if got := writes() - w; got != 0 {
			t.Errorf("%v kernel writes from reloading an unchanged config", got)
		}
		f.check(t, false)
	})

	t.Run("1,000 concurrent shaperctl requests", func(t *testing.T) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var failed []string
		sem := make(chan struct{}, 50)
		for i := range 1000 {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				args := []string{"--socket", u.sock, "status", "--json"}
				if i%10 == 0 {
					args = []string{"--socket", u.sock, "set-rate", "u1", "15mbit", "--ramp", "0s"}
				}
				if out, err := exec.Command(u.ctl, args...).CombinedOutput(); err != nil {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("%v: %s", err, out))
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(failed) > 0 {
			t.Errorf("%d of 1,000 shaperctl requests failed, e.g. %s", len(failed), failed[0])
		}
		f.check(t, false)
	})

	t.Run("malformed requests of every kind", func(t *testing.T) {
		w := writes()
		for _, c := range []struct{ name, method, path, body string }{
			{"not JSON", "POST", "/v1/rate", `{"target": "u0", "rate": `},
			{"unknown field", "POST", "/v1/rate", `{"target": "u0", "rate": 1000000, "bogus": 1}`},
			{"wrong type", "POST", "/v1/rate", `{"target": 7, "rate": "fast"}`},
			{"no target", "POST", "/v1/rate", `{"rate": 1000000}`},
			{"unknown user", "POST", "/v1/rate", `{"target": "nobody", "rate": 1000000}`},
			{"unknown tier", "POST", "/v1/rate", `{"target": "tier:platinum", "rate": 1000000}`},
			{"zero rate", "POST", "/v1/rate", `{"target": "u0", "rate": 0}`},
			{"negative ramp", "POST", "/v1/rate", `{"target": "u0", "rate": 1000000, "ramp": "-1s"}`},
			{"ceil below rate", "POST", "/v1/rate", `{"target": "u0", "rate": 2000000, "ceil": 1000000}`},
			{"empty body", "POST", "/v1/rate", ``},
			{"trailing data", "POST", "/v1/clear", `{"target": "u1"} {"target": "u2"}`},
			{"clear unknown", "POST", "/v1/clear", `{"target": "nobody"}`},
			{"wrong method", "DELETE", "/v1/status", ``},
			{"unknown path", "GET", "/v1/nothing", ``},
		} {
			code, body := f.rawRequest(t, c.method, c.path, "application/json", strings.NewReader(c.body))
			if code < 400 || code >= 500 || !strings.Contains(body, `"error"`) {
				t.Errorf("%s: %d %s, want a 4xx with an error message", c.name, code, body)
			}
		}
		if got := writes() - w; got != 0 {
			t.Errorf("%v kernel writes from malformed requests", got)
		}
		f.check(t, false)
	})

	t.Run("a 10 MB request body", func(t *testing.T) {
		body := `{"target": "u0", "rate": 1000000, "x": "` + strings.Repeat("a", 10<<20) + `"}`
		code, resp := f.rawRequest(t, "POST", "/v1/rate", "application/json", strings.NewReader(body))
		if code != http.StatusRequestEntityTooLarge && code != http.StatusBadRequest {
			t.Errorf("10 MB body: %d %.200s, want 413 or 400", code, resp)
		}
		if !u.Running() {
			t.Fatal("the daemon died")
		}
		f.check(t, false)
	})

	t.Run("a second manager of the interfaces is refused, naming the running daemon", func(t *testing.T) {
		w := writes()
		pid := fmt.Sprintf("pid %d", u.PID())
		for _, args := range [][]string{{}, {"--once"}, {"--teardown"}} {
			// Another socket and state_dir: only the interfaces are shared.
			dir := t.TempDir()
			cfg := strings.Replace(daemonConfig, metricsAddr, "", 1)
			os.WriteFile(filepath.Join(dir, "shaperd.toml"), []byte(fmt.Sprintf(cfg, dir)), 0o644)
			os.WriteFile(filepath.Join(dir, "users.toml"), []byte(labUsers(u.RouterLab)), 0o644)
			code, out := runCmd(t, u.Router.Command(append([]string{bin, "--config", filepath.Join(dir, "shaperd.toml")}, args...)...))
			if code != 1 || !strings.Contains(out, pid) || !strings.Contains(out, "interface r-") {
				t.Errorf("shaperd %v beside a running daemon: exit %d, want 1 naming an interface and %s\n%s", args, code, pid, out)
			}
		}
		if got := writes() - w; got != 0 {
			t.Errorf("%v kernel writes", got)
		}
		f.check(t, false)
	})

	t.Run("set-rate by a user who is not an admin is refused", func(t *testing.T) {
		w := writes()
		code, out := runCmd(t, asUser(exec.Command(u.ctl, "--socket", u.sock, "set-rate", "u0", "1mbit"), 65534, 65534))
		if code != 1 || !strings.Contains(out, "permission denied") {
			t.Errorf("set-rate as nobody: exit %d, want 1 and a permission error\n%s", code, out)
		}
		if got := writes() - w; got != 0 {
			t.Errorf("%v kernel writes", got)
		}
		f.check(t, false)
	})

	t.Run("a rate above the bandwidth is refused with the bound", func(t *testing.T) {
		w := writes()
		code, out := u.shaperctl("set-rate", "u0", "1gbps")
		if code != 1 || !strings.Contains(out, "1gbps (8gbit)") || !strings.Contains(out, "bandwidth") {
			t.Errorf("set-rate u0 1gbps: exit %d, want 1 echoing 8gbit against the bandwidth\n%s", code, out)
		}
		if got := writes() - w; got != 0 {
			t.Errorf("%v kernel writes", got)
		}
		f.check(t, false)
	})

	t.Run("corrupt state files: the daemon starts, moves them aside and says so", func(t *testing.T) {
		if err := u.Stop(); err != nil {
			t.Fatal(err)
		}
		state := filepath.Join(u.dir, "state")
		os.WriteFile(filepath.Join(state, "assignments.json"), []byte(`{"r-lan/egress": {"users": [`), 0o600)
		os.WriteFile(filepath.Join(state, "usage.json"), nil, 0o600)
		u.Start()
		u.WaitReady(60 * time.Second)
		problems := map[string]string{}
		for _, p := range u.status().StateProblems {
			problems[p.File] = p.Kind
		}
		if problems["assignments.json"] != "corrupt" || problems["usage.json"] != "corrupt" {
			t.Errorf("status state problems %v, want assignments.json and usage.json corrupt", problems)
		}
		moved, _ := filepath.Glob(filepath.Join(state, "*.corrupt-*"))
		if len(moved) != 2 {
			t.Errorf("moved aside: %q, want both files", moved)
		}
		time.Sleep(1200 * time.Millisecond) // a reconcile tick
		if got := writes(); got != 0 {
			t.Errorf("%v kernel writes after a restart with lost class ids: they come back from the kernel", got)
		}
		f.check(t, false)
	})

	t.Run("--once with an unknown interface names it and changes nothing", func(t *testing.T) {
		dir := t.TempDir()
		// Only the missing interface: --once beside a running daemon on the
		// same interfaces would be a second manager of them.
		cfg := daemonConfig[:strings.Index(daemonConfig, "[[interface]]")] +
			"[[interface]]\nname = \"r-nope\"\nbandwidth = \"1gbit\"\ndefault_tier = \"bronze\"\n" +
			daemonConfig[strings.Index(daemonConfig, "[tiers.bronze]"):]
		cfg = strings.Replace(cfg, metricsAddr, "", 1)
		os.WriteFile(filepath.Join(dir, "shaperd.toml"), []byte(fmt.Sprintf(cfg, dir)), 0o644)
		os.WriteFile(filepath.Join(dir, "users.toml"), []byte(labUsers(u.RouterLab)), 0o644)
		code, out := runCmd(t, u.Router.Command(bin, "--config", filepath.Join(dir, "shaperd.toml"), "--once"))
		if code != 1 || !strings.Contains(out, "r-nope") {
			t.Errorf("--once with a missing interface: exit %d, want 1 naming r-nope\n%s", code, out)
		}
		f.check(t, false)
	})

	t.Run("65,000 users: --check", func(t *testing.T) {
		dir := t.TempDir()
		var b strings.Builder
		for i := range 65000 {
			j := 64 + i/250 // 198.18.64.0 - 198.19.68.255, 250 users a /24
			fmt.Fprintf(&b, "[[user]]\nname = \"x%05d\"\ntier = \"bronze\"\naddresses = [\"198.%d.%d.%d\", \"2001:db8::%x\"]\n",
				i, 18+j/256, j%256, i%250+1, i+1)
		}
		os.WriteFile(filepath.Join(dir, "shaperd.toml"), []byte(fmt.Sprintf(daemonConfig, dir)), 0o644)
		os.WriteFile(filepath.Join(dir, "users.toml"), []byte(b.String()), 0o644)
		start := time.Now()
		code, out := runCmd(t, exec.Command(bin, "--config", filepath.Join(dir, "shaperd.toml"), "--check"))
		t.Logf("--check of 65,000 users: exit %d in %v", code, time.Since(start))
		if code != 0 || !strings.Contains(out, ": ok") {
			t.Errorf("--check of 65,000 users: exit %d\n%.2000s", code, out)
		}
	})

kill:
	t.Run("kill -9 during an apply, then restart", func(t *testing.T) {
		u.writeConfig(daemonConfig+massTier, manyUsers(f, 4000))
		u.Signal(syscall.SIGHUP)
		waitFor(t, 30*time.Second, "the apply under way", func() bool {
			out, _ := u.Router.Run("tc", "class", "show", "dev", "r-lan")
			return strings.Count(out, "\n") > 200
		})
		u.Signal(syscall.SIGKILL)
		u.Wait(10 * time.Second)
		out, _ := u.Router.Run("tc", "class", "show", "dev", "r-lan")
		t.Logf("killed with %d classes on r-lan", strings.Count(out, "\n"))
		u.Start()
		u.WaitReady(120 * time.Second)
		tr, err := u.k.Dump("r-lan")
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Classes) < 4003 {
			t.Fatalf("after the restart r-lan has %d classes, want the 4,003 users' and more\n%s", len(tr.Classes), tail(u.Logs.String(), 3000))
		}
		for dev, st := range f.interfaceStates() {
			if st != control.StateOK && st != control.StateMissing {
				t.Errorf("%s: state %q after the restart", dev, st)
			}
		}
		f.check(t, false)
		u.writeConfig(u32Config(daemonConfig), labUsers(u.RouterLab))
		// Back to the lab's 3 users: removing the 4,000 is meant, and says so.
		if code, out := u.shaperctl("reload", "--allow-removals"); code != 0 {
			t.Fatalf("reload back: exit %d\n%s", code, out)
		}
	})
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
