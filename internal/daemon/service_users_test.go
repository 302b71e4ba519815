package daemon

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// hasFilter reports whether device's tree in k has a filter for prefix
// into user's class.
func hasFilter(k *fakeKernel, device, prefix, user string) bool {
	p := netip.MustParsePrefix(prefix)
	for _, f := range k.tree(device).Filters {
		if f.Prefix == p && f.Labels.User == user {
			return true
		}
	}
	return false
}

// recordChanges makes k record every change it is given.
func recordChanges(k *fakeKernel) *[]model.Change {
	var seen []model.Change
	k.mu.Lock()
	k.refuseObj = func(c model.Change) error { seen = append(seen, c); return nil }
	k.mu.Unlock()
	return &seen
}

// onlyUser fails unless every change in cs concerns user's objects.
func onlyUser(t *testing.T, what string, cs []model.Change, user string) {
	t.Helper()
	if len(cs) == 0 {
		t.Errorf("%s: no kernel changes", what)
	}
	for _, c := range cs {
		var l model.Labels
		switch {
		case c.Class != nil:
			l = c.Class.Labels
		case c.Filter != nil:
			l = c.Filter.Labels
		default:
			t.Errorf("%s: change %s is not a class or filter", what, c)
			continue
		}
		if l.User != user {
			t.Errorf("%s: change %s touches %q, want only %s's objects", what, c, l.User, user)
		}
	}
}

func userReq(op, name string, addrs ...string) control.UserRequest {
	return control.UserRequest{Op: op, Name: name, Addresses: addrs}
}

func TestRuntimeUsersChangeOnlyTheirObjectsAndPersist(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock()
	d, dir := newTestDaemon(t, k, clk, "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	seen := recordChanges(k)
	add := userReq(control.UserAdd, "carol", "198.18.1.30", "2001:db8:1::30")
	// bronze: a gold carol would oversubscribe the 100mbit ingress side,
	// and the policy's scaling then changes every guarantee there.
	add.Tier = "bronze"
	resp, err := d.changeUser(add)
	if err != nil {
		t.Fatalf("user add: %v", err)
	}
	if resp.User == nil || resp.User.Source != control.SourceRuntime || len(resp.User.Addresses) != 2 {
		t.Errorf("user add answered %+v", resp)
	}
	onlyUser(t, "user add", *seen, "carol")
	for _, dev := range []string{"lan0", "ifb-lan0"} {
		if !hasFilter(k, dev, "198.18.1.30/32", "carol") || !hasFilter(k, dev, "2001:db8:1::30/128", "carol") {
			t.Errorf("%s: carol's filters missing after user add", dev)
		}
	}
	sources := map[string]string{}
	for _, u := range d.status().Users {
		sources[u.Name] = u.Source
	}
	if sources["carol"] != control.SourceRuntime || sources["alice"] != control.SourceFile {
		t.Errorf("status sources %v, want carol runtime and alice users.toml", sources)
	}

	*seen = nil
	if _, err := d.changeUser(userReq(control.UserAddAddress, "carol", "198.18.1.31")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.changeUser(userReq(control.UserRemoveAddress, "carol", "198.18.1.30")); err != nil {
		t.Fatal(err)
	}
	onlyUser(t, "add-address/remove-address", *seen, "carol")
	if hasFilter(k, "lan0", "198.18.1.30/32", "carol") || !hasFilter(k, "lan0", "198.18.1.31/32", "carol") {
		t.Error("after add-address .31 and remove-address .30 the filters are wrong")
	}
	if _, err := d.changeUser(userReq(control.UserSetAddresses, "carol", "198.18.1.32", "198.18.1.40/30")); err != nil {
		t.Fatal(err)
	}
	if hasFilter(k, "lan0", "198.18.1.31/32", "carol") || !hasFilter(k, "lan0", "198.18.1.40/30", "carol") {
		t.Error("set-addresses did not replace the addresses")
	}

	// Refusals, each like users.toml's: nothing changes.
	big := 5 * tbf.Gbit
	w := k.writeCount()
	bad := []struct {
		req  control.UserRequest
		want string
	}{
		{userReq(control.UserAddAddress, "carol", "198.18.1.10"), `overlaps 198.18.1.10 of user "alice"`},
		{userReq(control.UserAddAddress, "carol", "198.18.1.0/16"), "bits set after the prefix length"},
		{control.UserRequest{Op: control.UserAdd, Name: "dave", Tier: "platinum"}, `unknown tier "platinum"`},
		{control.UserRequest{Op: control.UserAdd, Name: "Dave!", Tier: "gold"}, "is not valid"},
		{control.UserRequest{Op: control.UserAdd, Name: "carol", Tier: "gold"}, "exists already"},
		{userReq(control.UserAddAddress, "alice", "198.18.1.50"), "users.toml"},
		{userReq(control.UserRemove, "nobody"), "unknown target"},
		{userReq(control.UserRemoveAddress, "carol", "198.18.1.99"), "has no address"},
		{control.UserRequest{Op: control.UserAdd, Name: "big", Tier: "gold", Rate: &big}, "above the bandwidth 1gbit of interface lan0"},
	}
	for _, b := range bad {
		_, err := d.changeUser(b.req)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("user %s %s %v: err %v, want %q", b.req.Op, b.req.Name, b.req.Addresses, err, b.want)
		}
	}
	if got := k.writeCount() - w; got != 0 {
		t.Errorf("refused changes wrote %d times", got)
	}

	// A restart keeps carol and touches nothing.
	w = k.writeCount()
	d2, _ := newTestDaemon(t, k, clk, dir)
	if err := d2.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := k.writeCount() - w; got != 0 {
		t.Errorf("restart with a run-time user: %d writes, want 0", got)
	}
	if d2.userSource("carol") != control.SourceRuntime {
		t.Errorf("carol after restart: source %q", d2.userSource("carol"))
	}
	list := d2.userList()
	if n := len(list.Users); n != 3 || list.Users[2].Name != "carol" || list.Users[2].Source != control.SourceRuntime {
		t.Errorf("user list after restart: %+v", list.Users)
	}

	// user remove takes carol's objects away and nothing else.
	*seen = nil
	if _, err := d2.changeUser(userReq(control.UserRemove, "carol")); err != nil {
		t.Fatal(err)
	}
	onlyUser(t, "user remove", *seen, "carol")
	if hasFilter(k, "lan0", "198.18.1.32/32", "carol") {
		t.Error("carol's filter stayed after user remove")
	}
	d3, _ := newTestDaemon(t, k, clk, dir)
	if _, ok := d3.userIdx["carol"]; ok {
		t.Error("a removed run-time user came back after restart")
	}
}

func TestReloadWithTheSameUserInUsersTomlDropsTheRuntimeEntry(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock()
	d, dir := newTestDaemon(t, k, clk, "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	add := userReq(control.UserAdd, "carol", "198.18.1.30")
	add.Tier = "gold"
	if _, err := d.changeUser(add); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, dir, testConfig, testUsers+"\n[[user]]\nname = \"carol\"\ntier = \"bronze\"\naddresses = [\"198.18.1.33\"]\n")
	if err := d.reload(false); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if d.userSource("carol") != control.SourceFile || len(d.runtime) != 0 {
		t.Errorf("after reload carol is %q with %d run-time users, want users.toml's", d.userSource("carol"), len(d.runtime))
	}
	if hasFilter(k, "lan0", "198.18.1.30/32", "carol") || !hasFilter(k, "lan0", "198.18.1.33/32", "carol") {
		t.Error("after reload carol's filters are not the file's")
	}
	b, err := os.ReadFile(filepath.Join(dir, "state", UsersFile))
	if err != nil || strings.Contains(string(b), "carol") {
		t.Errorf("the state file still holds carol (%v): %s", err, b)
	}
}

func TestRuntimeAddressExpires(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock()
	d, dir := newTestDaemon(t, k, clk, "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	add := userReq(control.UserAdd, "carol", "198.18.1.30")
	add.Tier = "gold"
	if _, err := d.changeUser(add); err != nil {
		t.Fatal(err)
	}
	lease := userReq(control.UserAddAddress, "carol", "198.18.1.31")
	lease.For = control.DurationPtr(time.Hour)
	if _, err := d.changeUser(lease); err != nil {
		t.Fatal(err)
	}
	start := clk.Now()
	if err := d.policyTick(start.Add(59 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	if !hasFilter(k, "lan0", "198.18.1.31/32", "carol") {
		t.Fatal("the leased address is gone before its end")
	}
	// A restart before the end keeps the lease and its end.
	d2, _ := newTestDaemon(t, k, clk, dir)
	if !d2.rtExpiry.Equal(start.Add(time.Hour)) {
		t.Errorf("after restart the next expiry is %v, want %v", d2.rtExpiry, start.Add(time.Hour))
	}
	if err := d.policyTick(start.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if hasFilter(k, "lan0", "198.18.1.31/32", "carol") || !hasFilter(k, "lan0", "198.18.1.30/32", "carol") {
		t.Error("at its end the leased address should be gone and the other one stay")
	}
	if got := d.userList().Users[2].Addresses; len(got) != 1 {
		t.Errorf("user list after expiry: %+v", got)
	}
	d3, _ := newTestDaemon(t, k, clk, dir)
	if len(d3.runtime) != 1 || len(d3.runtime[0].Addresses) != 1 {
		t.Errorf("the state file after expiry: %+v", d3.runtime)
	}
}

func TestCorruptRuntimeUsersFileIsMovedAside(t *testing.T) {
	k := newFakeKernel("lan0")
	dir := t.TempDir()
	writeConfig(t, dir, testConfig, testUsers)
	if err := os.MkdirAll(filepath.Join(dir, "state"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "state", UsersFile), []byte(`{"users":[{"name":`), 0o600); err != nil {
		t.Fatal(err)
	}
	d, _ := newTestDaemon(t, k, newFakeClock(), dir)
	if len(d.runtime) != 0 {
		t.Errorf("run-time users from a corrupt file: %+v", d.runtime)
	}
	probs := d.stateProblemList()
	if len(probs) != 1 || probs[0].File != UsersFile || probs[0].Kind != StateCorrupt || probs[0].MovedTo == "" {
		t.Errorf("state problems %+v, want the users file moved aside", probs)
	}
	if _, err := os.Stat(filepath.Join(dir, "state", UsersFile)); err == nil {
		t.Error("the corrupt file is still in place")
	}
}

// The incremental path (no full evaluation) leaves the daemon where a full
// evaluation would: a policy step after a series of run-time changes finds
// nothing to write. A change that moves the oversubscription scaling (a
// gold user on the 100mbit ingress side) takes a full step instead.
func TestRuntimeChangesAreIncrementalAndMatchAFullStep(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock()
	d, _ := newTestDaemon(t, k, clk, "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	evals := d.work.evaluations
	steps := []control.UserRequest{
		{Op: control.UserAdd, Name: "carol", Tier: "bronze", Addresses: []string{"198.18.1.30"}},
		{Op: control.UserAdd, Name: "dave", Tier: "bronze"},
		userReq(control.UserAddAddress, "dave", "198.18.1.40"),
		userReq(control.UserSetAddresses, "carol", "198.18.1.31", "2001:db8:1::31"),
		userReq(control.UserRemoveAddress, "carol", "198.18.1.31"),
		userReq(control.UserRemove, "dave"),
	}
	for _, r := range steps {
		if _, err := d.changeUser(r); err != nil {
			t.Fatalf("user %s %s: %v", r.Op, r.Name, err)
		}
	}
	if d.work.evaluations != evals {
		t.Errorf("%d full evaluations for run-time changes, want none", d.work.evaluations-evals)
	}
	w := k.writeCount()
	if err := d.policyStep(clk.Now()); err != nil {
		t.Fatal(err)
	}
	if err := d.reconcile(d.ifaces[0], "test"); err != nil {
		t.Fatal(err)
	}
	if got := k.writeCount() - w; got != 0 {
		t.Errorf("a full step after the incremental changes wrote %d times, want 0", got)
	}

	evals = d.work.evaluations
	gold := control.UserRequest{Op: control.UserAdd, Name: "erin", Tier: "gold", Addresses: []string{"198.18.1.50"}}
	if _, err := d.changeUser(gold); err != nil {
		t.Fatal(err)
	}
	if d.work.evaluations != evals+1 {
		t.Errorf("an oversubscribing add took %d full evaluations, want 1", d.work.evaluations-evals)
	}
	if !hasFilter(k, "ifb-lan0", "198.18.1.50/32", "erin") {
		t.Error("erin's filter is missing after the full step")
	}
}

// reload --dry-run keeps the run-time users, as a reload does: with the
// files unchanged it plans no change.
func TestReloadDryRunKeepsRuntimeUsers(t *testing.T) {
	k := newFakeKernel("lan0")
	d, _ := newTestDaemon(t, k, newFakeClock(), "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	add := userReq(control.UserAdd, "carol", "198.18.1.30")
	add.Tier = "bronze"
	if _, err := d.changeUser(add); err != nil {
		t.Fatal(err)
	}
	diffs, _, err := d.reloadDiffs()
	if err != nil {
		t.Fatal(err)
	}
	for _, pd := range diffs {
		if len(pd.Changes) != 0 || pd.Err != nil {
			t.Errorf("%s: the dry run plans %d changes (%v): %v", pd.Interface, len(pd.Changes), pd.Err, pd.Changes)
		}
	}
}

// After a reload, a run-time user gets the leaf the kernel has (the
// probed kinds stay with the plan that run-time changes start from).
func TestRuntimeUserAfterReloadKeepsProbedLeaf(t *testing.T) {
	k := probingKernel{newFakeKernel("lan0"), map[string]bool{"fq_codel": false, "bfifo": true}}
	d, _ := newTestDaemon(t, k, newFakeClock(), "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	dave := control.UserRequest{Op: control.UserAdd, Name: "dave", Tier: "bronze", Addresses: []string{"198.18.1.40"}}
	if _, err := d.changeUser(dave); err != nil {
		t.Fatal(err)
	}
	if err := d.reload(false); err != nil { // with a run-time user
		t.Fatal(err)
	}
	// gold oversubscribes the ingress side: a full evaluation.
	add := userReq(control.UserAdd, "carol", "198.18.1.30")
	add.Tier = "gold"
	if _, err := d.changeUser(add); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"carol", "alice"} {
		c := userClass(t, d, k.fakeKernel, "lan0/egress", "lan0", name)
		if c.Leaf == nil || c.Leaf.Kind != "bfifo" {
			t.Errorf("%s's leaf after a reload and a run-time user: %+v, want the bfifo of a kernel without fq_codel", name, c.Leaf)
		}
	}
}

// A run-time user change that cannot be saved (a read-only state_dir) is
// refused with the write error and changes nothing: an accepted change
// always survives a restart.
func TestRuntimeUserRefusedWhenStateUnwritable(t *testing.T) {
	k := newFakeKernel("lan0")
	d, dir := newTestDaemon(t, k, newFakeClock(), "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	fault := stateFaults[0] // read-only
	fault.break_(t, state)
	defer fault.fix(t, state)
	w := k.writeCount()
	add := userReq(control.UserAdd, "carol", "198.18.1.30")
	add.Tier = "bronze"
	_, err := d.changeUser(add)
	if err == nil || !strings.Contains(err.Error(), fault.want) {
		t.Fatalf("user add on a read-only state_dir: %v, want %q", err, fault.want)
	}
	if _, ok := d.userIdx["carol"]; ok || len(d.runtime) != 0 || k.writeCount() != w {
		t.Errorf("a refused add changed the plan (%v), the run-time users (%d) or the kernel (%d writes)", ok, len(d.runtime), k.writeCount()-w)
	}
}
