package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/control"
)

// A reload's answer is the result applied: refused with the problems, ok
// with every interface's state, degraded when the kernel then refuses an
// interface's plan; status shows the last one.
func TestReloadResult(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock()
	d, dir := newTestDaemon(t, k, clk, "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d.status().LastReload != nil {
		t.Error("a last reload before any reload")
	}
	writeConfig(t, dir, strings.Replace(testConfig, `ceil = "100mbit"`, `ceil = "1mbit"`, 1), testUsers)
	if err := d.reload(false); err == nil {
		t.Fatal("invalid reload accepted")
	}
	r := d.status().LastReload
	if r == nil || r.Result != control.ReloadRefused || len(r.Problems) == 0 || !strings.Contains(r.Problems[0], "tiers.gold.ceil") || !r.At.Equal(clk.Now()) {
		t.Errorf("refused reload: %+v", r)
	}

	// A valid reload that changes alice's tier, which the kernel refuses.
	writeConfig(t, dir, testConfig, strings.Replace(testUsers, `tier = "gold"`, `tier = "bronze"`, 1))
	k.mu.Lock()
	k.refuse = errors.New("RTNETLINK answers: No space left on device")
	k.mu.Unlock()
	if err := d.reload(false); err != nil {
		t.Fatalf("valid reload: %v", err)
	}
	r = d.status().LastReload
	if r == nil || r.Result != control.ReloadDegraded || len(r.Interfaces) != 2 {
		t.Fatalf("reload with a kernel refusal: %+v", r)
	}
	for _, i := range r.Interfaces {
		if i.State != control.StateFailed || !strings.Contains(i.Error, "No space left") {
			t.Errorf("%s %s: %s %q, want failed with the kernel's refusal", i.Name, i.Direction, i.State, i.Error)
		}
	}

	k.mu.Lock()
	k.refuse = nil
	k.mu.Unlock()
	writeConfig(t, dir, testConfig, testUsers)
	if err := d.reload(false); err != nil {
		t.Fatal(err)
	}
	if r = d.status().LastReload; r.Result != control.ReloadOK || len(r.Interfaces) != 2 || r.Interfaces[0].State != control.StateOK {
		t.Errorf("ok reload: %+v", r)
	}
}

// usersFile writes n users u0..u(n-1) of tier bronze, one address each.
func usersFile(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "[[user]]\nname = \"u%d\"\ntier = \"bronze\"\naddresses = [\"198.18.2.%d\"]\n\n", i, i+1)
	}
	return b.String()
}

// A reload that removes most users (more than daemon.max_reload_removals,
// and more than two) or every user is refused, names how many would go and
// how to confirm, and writes nothing; fewer removals, or a confirmed
// reload, are applied.
func TestReloadRefusesRemovingMostUsers(t *testing.T) {
	k := newFakeKernel("lan0")
	dir := t.TempDir()
	writeConfig(t, dir, testConfig, usersFile(6))
	d, _ := newTestDaemon(t, k, newFakeClock(), dir)
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	w := k.writeCount()
	for _, c := range []struct {
		users int
		want  string
	}{
		{0, "remove all 6 users in force"},
		{2, "remove 4 of the 6 users in force (u2; u3; u4; u5)"},
	} {
		writeConfig(t, dir, testConfig, usersFile(c.users))
		err := d.reload(false)
		var ve *control.ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 1 {
			t.Fatalf("reload keeping %d of 6 users: %v, want a refusal", c.users, err)
		}
		for _, want := range []string{c.want, `max_reload_removals = "50%"`, "shaperctl reload --allow-removals", "users.toml"} {
			if !strings.Contains(ve.Problems[0], want) {
				t.Errorf("refusal %q lacks %q", ve.Problems[0], want)
			}
		}
		if len(d.plan.Users) != 6 || k.writeCount() != w {
			t.Errorf("refused reload: %d users in force, %d kernel writes; want 6, 0", len(d.plan.Users), k.writeCount()-w)
		}
		if r := d.status().LastReload; r == nil || r.Result != control.ReloadRefused {
			t.Errorf("last reload %+v, want refused", r)
		}
	}

	// Two of six (not more than half) go without a confirmation.
	writeConfig(t, dir, testConfig, usersFile(4))
	if err := d.reload(false); err != nil {
		t.Fatalf("reload removing 2 of 6 users: %v", err)
	}
	if len(d.plan.Users) != 4 {
		t.Errorf("%d users after removing 2 of 6, want 4", len(d.plan.Users))
	}
	// A confirmed reload may remove everyone.
	writeConfig(t, dir, testConfig, "")
	if err := d.reload(true); err != nil {
		t.Fatalf("confirmed reload removing every user: %v", err)
	}
	if len(d.plan.Users) != 0 {
		t.Errorf("%d users after a confirmed reload of an empty users file", len(d.plan.Users))
	}
}

// With daemon.max_reload_removals = "100%" the guard is off; the value in
// force counts, not the one in the file being loaded.
func TestReloadRemovalsLimitInForce(t *testing.T) {
	k := newFakeKernel("lan0")
	dir := t.TempDir()
	off := strings.Replace(testConfig, `reconcile_interval = "5s"`, "reconcile_interval = \"5s\"\nmax_reload_removals = \"100%%\"", 1) // %% for writeConfig's Sprintf
	writeConfig(t, dir, testConfig, usersFile(5))
	d, _ := newTestDaemon(t, k, newFakeClock(), dir)
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, dir, off, "")
	if err := d.reload(false); err == nil {
		t.Fatal("a file lifting the guard removed every user in the same reload")
	}
	writeConfig(t, dir, off, usersFile(5))
	if err := d.reload(false); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, dir, off, "")
	if err := d.reload(false); err != nil {
		t.Fatalf("reload with the guard off: %v", err)
	}
	if len(d.plan.Users) != 0 {
		t.Errorf("%d users left", len(d.plan.Users))
	}
}
