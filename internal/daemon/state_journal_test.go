package daemon

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/statefile"
	"github.com/shaperd/shaperd/pkg/config"
)

// journalDaemon is a daemon on the fake kernel that applied its plan,
// with the directory of its configuration (state in dir/state).
func journalDaemon(t *testing.T) (*Daemon, *fakeKernel, *fakeClock, string) {
	t.Helper()
	k, clk := newFakeKernel("lan0"), newFakeClock()
	d, dir := newTestDaemon(t, k, clk, "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d, k, clk, dir
}

// change applies one run-time user change or fails the test.
func change(t *testing.T, d *Daemon, req control.UserRequest) {
	t.Helper()
	if req.Op == control.UserAdd && req.Tier == "" {
		req.Tier = "gold"
	}
	if _, err := d.changeUser(req); err != nil {
		t.Fatalf("%s %s: %v", req.Op, req.Name, err)
	}
}

// runtimeNames are d's run-time users as "name=addr,addr", sorted.
func runtimeNames(d *Daemon) []string {
	var out []string
	for _, u := range d.runtime {
		var as []string
		for _, a := range u.Addresses {
			as = append(as, a.Prefix.String())
		}
		out = append(out, u.Name+"="+strings.Join(as, ","))
	}
	slices.Sort(out)
	return out
}

func readState(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "state", name))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return b
}

// A run-time user change appends one record to the journal instead of
// rewriting users.json, and a restart replays the journal: the same users
// come back (and the start folds the journal into users.json).
func TestUsersJournalKeepsChangesAcrossRestart(t *testing.T) {
	d, k, clk, dir := journalDaemon(t)
	change(t, d, userReq(control.UserAdd, "carol", "198.18.1.30"))
	change(t, d, userReq(control.UserAdd, "dave", "198.18.1.40"))
	change(t, d, userReq(control.UserAddAddress, "carol", "198.18.1.31"))
	change(t, d, userReq(control.UserAdd, "erin", "198.18.1.50"))
	change(t, d, userReq(control.UserRemove, "dave"))
	if b := readState(t, dir, UsersFile); len(b) != 0 {
		t.Errorf("users.json was written whole: %s", b)
	}
	if n := strings.Count(string(readState(t, dir, UsersJournal)), "\n"); n != 5 {
		t.Errorf("the journal holds %d records, want 5 (one per change)", n)
	}
	want := runtimeNames(d)
	d2, _ := newTestDaemon(t, k, clk, dir)
	if got := runtimeNames(d2); !slices.Equal(got, want) {
		t.Errorf("after restart the run-time users are %v, want %v", got, want)
	}
	if j := readState(t, dir, UsersJournal); len(j) != 0 {
		t.Errorf("the start did not fold the journal into users.json: %q", j)
	}
	if b := readState(t, dir, UsersFile); !strings.Contains(string(b), "erin") || strings.Contains(string(b), "dave") {
		t.Errorf("users.json after the start: %s", b)
	}
}

// A crash while a record was written leaves a torn last line: it was
// never acknowledged, so the restart drops it (with a log line), keeps
// every whole record, and the next change's record follows the whole
// ones. A bad record followed by good ones is corruption: the journal is
// moved aside and reported, users.json's users stay.
func TestUsersJournalTornAndCorruptRecords(t *testing.T) {
	d, k, clk, dir := journalDaemon(t)
	change(t, d, userReq(control.UserAdd, "carol", "198.18.1.30"))
	d.closeUsers() // users.json holds carol; the journal is empty
	change(t, d, userReq(control.UserAdd, "dave", "198.18.1.40"))
	change(t, d, userReq(control.UserAdd, "erin", "198.18.1.50"))
	jpath := filepath.Join(dir, "state", UsersJournal)
	whole := readState(t, dir, UsersJournal)
	lines := strings.SplitAfter(string(whole), "\n")

	t.Run("torn", func(t *testing.T) {
		torn := lines[0] + lines[1][:len(lines[1])/2]
		if err := os.WriteFile(jpath, []byte(torn), 0o640); err != nil {
			t.Fatal(err)
		}
		logs := &syncBuffer{}
		d2, _ := newTestDaemonLogs(t, k, clk, dir, logs)
		if got := runtimeNames(d2); !slices.Equal(got, []string{"carol=198.18.1.30/32", "dave=198.18.1.40/32"}) {
			t.Errorf("after a torn last record the run-time users are %v, want carol and dave", got)
		}
		if !strings.Contains(logs.String(), "torn") {
			t.Errorf("no log line about the torn record:\n%s", logs)
		}
		if len(d2.problems) != 0 {
			t.Errorf("a torn last record is not a problem: %v", d2.stateProblemList())
		}
	})
	t.Run("bad last line", func(t *testing.T) {
		// A whole line with a bad checksum at the end is torn too: the
		// whole records end where it starts (later records go there).
		bad := lines[0] + "0badc0de" + lines[1][8:]
		rt, good, torn, err := replayJournal(nil, []byte(bad))
		if err != nil || !torn || good != len(lines[0]) || len(rt) != 1 {
			t.Errorf("replay of a bad last line: %d users, %d whole bytes, torn %v, %v; want 1, %d, true", len(rt), good, torn, err, len(lines[0]))
		}
	})
	t.Run("corrupt", func(t *testing.T) {
		carol := slices.DeleteFunc(slices.Clone(d.runtime), func(u runtimeUser) bool { return u.Name != "carol" })
		if err := statefile.SaveJSON(filepath.Join(dir, "state"), UsersFile, runtimeFile{Users: carol}); err != nil {
			t.Fatal(err)
		}
		bad := lines[0][:5] + "x" + lines[0][6:] + lines[1]
		if err := os.WriteFile(jpath, []byte(bad), 0o640); err != nil {
			t.Fatal(err)
		}
		d2, _ := newTestDaemon(t, k, clk, dir)
		if got := runtimeNames(d2); !slices.Equal(got, []string{"carol=198.18.1.30/32"}) {
			t.Errorf("after a corrupt journal the run-time users are %v, want users.json's carol", got)
		}
		probs := d2.stateProblemList()
		if len(probs) != 1 || probs[0].File != UsersJournal || probs[0].Kind != StateCorrupt || probs[0].MovedTo == "" {
			t.Fatalf("problems %+v, want the journal corrupt and moved aside", probs)
		}
	})
}

// A torn tail left by a failed append is cut before the next record, so
// that the journal stays readable.
func TestUsersJournalAppendsAfterTornTail(t *testing.T) {
	d, k, clk, dir := journalDaemon(t)
	change(t, d, userReq(control.UserAdd, "carol", "198.18.1.30"))
	jpath := filepath.Join(dir, "state", UsersJournal)
	f, err := os.OpenFile(jpath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`0badc0de {"put":{"name":"ghost"`)
	f.Close()
	d2, _ := newTestDaemon(t, k, clk, dir) // replays carol, drops the tail, folds the journal in
	if err := d2.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	change(t, d2, userReq(control.UserAdd, "dave", "198.18.1.40"))
	// Tear by hand again, then append: the next record starts on its own line.
	f, _ = os.OpenFile(jpath, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`0badc0de {"put"`)
	f.Close()
	d2.journal.Close() // as after a failed append: the next one reopens and cuts the tail
	change(t, d2, userReq(control.UserAdd, "erin", "198.18.1.50"))
	d3, _ := newTestDaemon(t, k, clk, dir)
	if got := runtimeNames(d3); !slices.Equal(got, []string{"carol=198.18.1.30/32", "dave=198.18.1.40/32", "erin=198.18.1.50/32"}) {
		t.Errorf("run-time users %v, want carol, dave and erin", got)
	}
	if len(d3.problems) != 0 {
		t.Errorf("problems: %+v", d3.stateProblemList())
	}
}

// Compaction writes users.json whole, then empties the journal. A crash
// between the two leaves records that users.json already holds: they
// replay harmlessly (a put is the user's whole entry, a del of an absent
// user does nothing). A crash before users.json's rename leaves the old
// users.json and the whole journal.
func TestUsersJournalCrashBetweenCompactionSteps(t *testing.T) {
	d, k, clk, dir := journalDaemon(t)
	change(t, d, userReq(control.UserAdd, "carol", "198.18.1.30"))
	change(t, d, userReq(control.UserAdd, "dave", "198.18.1.40"))
	change(t, d, userReq(control.UserSetAddresses, "carol", "198.18.1.33"))
	change(t, d, userReq(control.UserRemove, "dave"))
	want := runtimeNames(d)
	journal := readState(t, dir, UsersJournal)

	// Before the rename: users.json is as it was (none), the journal whole.
	d2, _ := newTestDaemon(t, k, clk, dir)
	if got := runtimeNames(d2); !slices.Equal(got, want) {
		t.Errorf("crash before compaction: %v, want %v", got, want)
	}
	// After users.json was written whole, before the journal was emptied.
	if err := statefile.SaveJSON(filepath.Join(dir, "state"), UsersFile, runtimeFile{Users: d.runtime}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "state", UsersJournal), journal, 0o640); err != nil {
		t.Fatal(err)
	}
	d3, _ := newTestDaemon(t, k, clk, dir)
	if got := runtimeNames(d3); !slices.Equal(got, want) {
		t.Errorf("crash between the compaction's steps: %v, want %v", got, want)
	}
}

// The reconcile tick folds a journal of journalCompactRecords records
// into users.json; shutdown folds in whatever is left.
func TestUsersJournalCompacts(t *testing.T) {
	d, _, clk, dir := journalDaemon(t)
	for i := 0; i < journalCompactRecords/2; i++ {
		change(t, d, userReq(control.UserAdd, "carol", "198.18.1.30"))
		change(t, d, userReq(control.UserRemove, "carol"))
	}
	change(t, d, userReq(control.UserAdd, "dave", "198.18.1.40"))
	d.retryState(clk.Now())
	if j := readState(t, dir, UsersJournal); len(j) != 0 || d.journal.Records != 0 {
		t.Errorf("the tick did not compact %d records (%d bytes left)", journalCompactRecords+1, len(j))
	}
	if b := readState(t, dir, UsersFile); !strings.Contains(string(b), "dave") {
		t.Errorf("users.json after compaction: %s", b)
	}
	change(t, d, userReq(control.UserAdd, "erin", "198.18.1.50"))
	d.retryState(clk.Now())
	if d.journal.Records != 1 {
		t.Errorf("a tick compacted a journal of %d record(s)", d.journal.Records)
	}
	d.closeUsers()
	if b := readState(t, dir, UsersFile); !strings.Contains(string(b), "erin") || len(readState(t, dir, UsersJournal)) != 0 {
		t.Errorf("shutdown did not fold the journal in: users.json %s", b)
	}
}

// When the journal cannot be written the change is kept by writing
// users.json whole (and acknowledged only then).
func TestUsersJournalUnwritableFallsBackToWholeFile(t *testing.T) {
	d, _, _, dir := journalDaemon(t)
	if err := os.MkdirAll(filepath.Join(dir, "state", UsersJournal), 0o750); err != nil {
		t.Fatal(err)
	}
	change(t, d, userReq(control.UserAdd, "carol", "198.18.1.30"))
	if b := readState(t, dir, UsersFile); !strings.Contains(string(b), "carol") {
		t.Errorf("users.json after a journal failure: %q", b)
	}
}

// Run-time users that make the plan invalid at start are not in force;
// the next change writes users.json whole, so that they do not come back
// from the journal at the next start.
func TestUsersJournalDropsUsersRefusedAtStart(t *testing.T) {
	d, k, clk, dir := journalDaemon(t)
	change(t, d, userReq(control.UserAdd, "carol", "198.18.1.30"))
	// A prefix length the classifier refuses (IPv6 /65../112): the plan
	// with carol is invalid at the next start.
	d.runtime[0].Addresses[0].Prefix = netip.MustParsePrefix("2001:db8::/80")
	if err := d.journal.Append(journalPath(filepath.Join(dir, "state")), journalRecord{Put: &d.runtime[0]}); err != nil {
		t.Fatal(err)
	}
	d2, _ := newTestDaemon(t, k, clk, dir)
	if len(d2.runtime) != 0 {
		t.Fatalf("a run-time user of an unknown tier is in force: %v", runtimeNames(d2))
	}
	if err := d2.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	change(t, d2, userReq(control.UserAdd, "dave", "198.18.1.40"))
	d3, _ := newTestDaemon(t, k, clk, dir)
	if got := runtimeNames(d3); !slices.Equal(got, []string{"dave=198.18.1.40/32"}) {
		t.Errorf("after the next change the run-time users are %v, want only dave", got)
	}
}

// newTestDaemonLogs is newTestDaemon on dir with its logs in logs.
func newTestDaemonLogs(t *testing.T, k Kernel, clk Clock, dir string, logs *syncBuffer) (*Daemon, string) {
	t.Helper()
	d, err := New(Options{ConfigPath: filepath.Join(dir, "shaperd.toml"), Kernel: k, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return d, dir
}

// The journal replay takes any bytes: no panic, and either run-time users
// that pass the state file's checks or an error with a message; a torn
// tail never is an error.
func FuzzUsersJournal(f *testing.F) {
	good, _ := statefile.EncodeRecord(journalRecord{Put: &runtimeUser{Name: "carol", Tier: "gold",
		Addresses: []runtimeAddr{{Prefix: netip.MustParsePrefix("198.18.1.30/32")}}}})
	del, _ := statefile.EncodeRecord(journalRecord{Del: "carol"})
	for _, s := range []string{"", string(good), string(good) + string(del), string(good) + string(good[:20]),
		string(del) + "garbage\n" + string(good), "00000000 {}\n", string(good[:len(good)-1])} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rt, good, torn, err := replayJournal(nil, b)
		if err != nil {
			checkErr(t, err)
			return
		}
		if _, err := decodeRuntimeUsersList(rt); err != nil {
			t.Fatalf("replay gave users the state file refuses: %v", err)
		}
		if !torn && good != len(b) || good > len(b) || good > 0 && b[good-1] != '\n' {
			t.Fatalf("replay took %d of %d bytes as whole records (torn %v)", good, len(b), torn)
		}
		if torn {
			// The whole records alone replay the same, without a torn tail.
			again, g2, torn2, err := replayJournal(nil, b[:good])
			if err != nil || torn2 || g2 != good || len(again) != len(rt) {
				t.Fatalf("the whole records alone: %d users, %d bytes, torn %v, %v; want %d users", len(again), g2, torn2, err, len(rt))
			}
		}
	})
}

// The indexes a change keeps up to date in place (by name, by address,
// the plan's order after a removal moves the last run-time user into the
// gap) agree with a plan rebuilt from scratch: overlaps name the right
// user, a removed user's address is free again, and the user list and
// the kernel hold every user once. No change dumps the kernel.
func TestUserChangesKeepIndexesExact(t *testing.T) {
	d, k, _, _ := journalDaemon(t)
	k.mu.Lock()
	dumps := k.dumps
	k.mu.Unlock()
	change(t, d, userReq(control.UserAdd, "carol", "198.18.1.30"))
	change(t, d, userReq(control.UserAdd, "dave", "198.18.1.40"))
	change(t, d, userReq(control.UserAdd, "erin", "198.18.1.50"))
	change(t, d, userReq(control.UserRemove, "carol")) // erin takes carol's place
	change(t, d, userReq(control.UserSetAddresses, "erin", "198.18.1.51"))
	_, err := d.changeUser(control.UserRequest{Op: control.UserAdd, Name: "frank", Tier: "gold", Addresses: []string{"198.18.1.51"}})
	if err == nil || !strings.Contains(err.Error(), `of user "erin"`) {
		t.Errorf("an address of the moved user: %v, want an overlap naming erin", err)
	}
	change(t, d, userReq(control.UserAdd, "frank", "198.18.1.30", "198.18.1.50")) // carol's and erin's old ones
	k.mu.Lock()
	if k.dumps != dumps {
		t.Errorf("the changes dumped the kernel %d times, want none", k.dumps-dumps)
	}
	k.mu.Unlock()
	full, _, _ := withRuntime(d.filePlan, d.runtime, d.clock.Now())
	if len(full.Users) != len(d.plan.Users) {
		t.Fatalf("%d users in the plan, %d when rebuilt", len(d.plan.Users), len(full.Users))
	}
	for i, u := range d.plan.Users {
		if j, ok := d.userIdx[u.Name]; !ok || j != i {
			t.Errorf("userIdx[%s] = %d, %v; the plan has it at %d", u.Name, j, ok, i)
		}
		if !slices.Equal(u.Prefixes, full.Users[i].Prefixes) || u.Name != full.Users[i].Name {
			t.Errorf("plan user %d is %s %v, rebuilt %s %v", i, u.Name, u.Prefixes, full.Users[i].Name, full.Users[i].Prefixes)
		}
	}
	kept := d.prefixes
	d.prefixes = nil
	for _, u := range d.plan.Users {
		for _, p := range u.Prefixes {
			var a, b []string
			kept.Overlapping(p, func(_ netip.Prefix, o config.IndexedUser) { a = append(a, o.Name) })
			d.prefixIndex().Overlapping(p, func(_ netip.Prefix, o config.IndexedUser) { b = append(b, o.Name) })
			if !slices.Equal(a, b) || len(a) != 1 || a[0] != u.Name {
				t.Errorf("%s: the kept index says %v, a fresh one %v, want [%s]", p, a, b, u.Name)
			}
		}
	}
	for _, name := range []string{"dave", "erin", "frank"} {
		n := 0
		for _, f := range k.tree("lan0").Filters {
			if f.Labels.User == name {
				n++
			}
		}
		if want := map[string]int{"dave": 1, "erin": 1, "frank": 2}[name]; n != want {
			t.Errorf("%s has %d filters in the kernel, want %d", name, n, want)
		}
	}
	if hasFilter(k, "lan0", "198.18.1.51/32", "frank") || !hasFilter(k, "lan0", "198.18.1.51/32", "erin") {
		t.Error("erin's address is not erin's in the kernel")
	}
}

// An address that ends (add-address --for) is removed like a user
// change: a journal record, only that user's objects, no evaluation of
// everyone.
func TestLeaseEndIsOneUserChange(t *testing.T) {
	d, k, clk, dir := journalDaemon(t)
	change(t, d, userReq(control.UserAdd, "carol", "198.18.1.30"))
	change(t, d, userReq(control.UserAdd, "dave", "198.18.1.40"))
	lease := userReq(control.UserAddAddress, "carol", "198.18.1.31")
	lease.For = control.DurationPtr(time.Hour)
	change(t, d, lease)
	records, evals := d.journal.Records, d.work.evaluations
	seen := recordChanges(k)
	if err := d.policyTick(clk.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if hasFilter(k, "lan0", "198.18.1.31/32", "carol") || !hasFilter(k, "lan0", "198.18.1.30/32", "carol") {
		t.Fatal("the lease did not end, or took carol's other address")
	}
	if d.work.evaluations != evals {
		t.Errorf("%d full evaluations for one lease end", d.work.evaluations-evals)
	}
	onlyUser(t, "lease end", *seen, "carol")
	if d.journal.Records != records+1 {
		t.Errorf("the lease end wrote %d journal records, want 1", d.journal.Records-records)
	}
	if b := readState(t, dir, UsersFile); len(b) != 0 {
		t.Errorf("users.json was written whole: %s", b)
	}
}

// With an unwritable or full state_dir a user change is refused, naming
// the error, and changes nothing (plan, kernel); once the directory takes
// writes again the same change goes through and survives a restart.
func TestUserChangeRefusedWhileStateDirBroken(t *testing.T) {
	for _, f := range stateFaults {
		t.Run(f.name, func(t *testing.T) {
			d, k, clk, dir := journalDaemon(t)
			state := d.plan.Daemon.StateDir
			f.break_(t, state)
			t.Cleanup(func() { syscall.Unmount(state, syscall.MNT_DETACH) })
			writes := k.writeCount()
			_, err := d.changeUser(control.UserRequest{Op: control.UserAdd, Name: "carol", Tier: "gold", Addresses: []string{"198.18.1.30"}})
			if err == nil || !strings.Contains(err.Error(), f.want) || !strings.Contains(err.Error(), UsersFile) {
				t.Errorf("user add with a broken state dir: %v, want an error naming %s and %q", err, UsersFile, f.want)
			}
			if _, ok := d.userIdx["carol"]; ok || len(d.runtime) != 0 || k.writeCount() != writes {
				t.Errorf("a refused add changed the plan (%v), the run-time users (%d) or the kernel (%d writes)", ok, len(d.runtime), k.writeCount()-writes)
			}
			f.fix(t, state)
			change(t, d, userReq(control.UserAdd, "carol", "198.18.1.30"))
			if !hasFilter(k, "lan0", "198.18.1.30/32", "carol") {
				t.Error("carol's filter is not in the kernel after the fix")
			}
			d2, _ := newTestDaemon(t, k, clk, dir)
			if got := runtimeNames(d2); !slices.Equal(got, []string{"carol=198.18.1.30/32"}) {
				t.Errorf("after restart: %v, want carol", got)
			}
		})
	}
}

// The class ids run-time user changes give out are saved by a reconcile
// tick at most once a minute (marshalling 10,000 users' ids holds the
// loop for milliseconds), and not lost meanwhile: they are due until then.
func TestAssignmentsSavedAtMostOnceAMinuteAfterUserChanges(t *testing.T) {
	d, _, clk, dir := journalDaemon(t)
	ids := func() string { return string(readState(t, dir, AssignmentsFile)) }
	now := clk.Now()
	change(t, d, userReq(control.UserAdd, "carol", "198.18.1.30"))
	d.retryState(now.Add(5 * time.Second))
	if !strings.Contains(ids(), "carol") {
		t.Fatalf("the first tick after a change did not save carol's class id: %s", ids())
	}
	change(t, d, userReq(control.UserAdd, "dave", "198.18.1.40"))
	d.retryState(now.Add(10 * time.Second))
	if strings.Contains(ids(), "dave") || !d.assignmentsDue {
		t.Errorf("saved again within a minute (due %v): %s", d.assignmentsDue, ids())
	}
	d.retryState(now.Add(65 * time.Second))
	if !strings.Contains(ids(), "dave") || d.assignmentsDue {
		t.Errorf("a minute later dave's class id is not saved (due %v): %s", d.assignmentsDue, ids())
	}
}
