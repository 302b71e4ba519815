package control

import (
	"os"
	"slices"
	"testing"
)

// TestProcGroups reads this process's supplementary groups from /proc and
// refuses the file when its uid is not the peer's (a reused PID).
func TestProcGroups(t *testing.T) {
	want, err := os.Getgroups()
	if err != nil {
		t.Fatal(err)
	}
	got, ok := procGroups("/proc/self/status", uint32(os.Geteuid()))
	if !ok {
		t.Fatal("procGroups of /proc/self/status: not ok")
	}
	var w []uint32
	for _, g := range want {
		w = append(w, uint32(g))
	}
	slices.Sort(got)
	slices.Sort(w)
	if !slices.Equal(got, w) {
		t.Errorf("groups %v, want %v", got, w)
	}
	if _, ok := procGroups("/proc/self/status", uint32(os.Geteuid())+1); ok {
		t.Error("a status file of another uid was accepted")
	}
	if _, ok := procGroups("/proc/0/status", 0); ok {
		t.Error("a missing status file was accepted")
	}
}

// TestPeerGroupsFallsBackToUserDatabase: without a PID (a peer in another
// PID namespace) the groups come from the user database: root's include 0.
func TestPeerGroupsFallsBackToUserDatabase(t *testing.T) {
	if got := peerGroups(Peer{PID: 0, UID: 0}); !slices.Contains(got, 0) {
		t.Errorf("root's groups from the user database: %v, want gid 0 among them", got)
	}
}
