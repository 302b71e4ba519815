package control

import (
	"net"
	"os"
	"path/filepath"
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

// SO_PEERGROUPS gives the peer's supplementary groups as the kernel holds
// them (here the peer is this process; TestRoles runs real processes of
// other uids and groups through the same path).
func TestPeerGroupsFromSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	raw, err := s.(*net.UnixConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got []uint32
	raw.Control(func(fd uintptr) { got = peerGroupsOf(int(fd)) })
	want, err := os.Getgroups()
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || len(got) != len(want) {
		t.Fatalf("SO_PEERGROUPS %v, want this process's groups %v", got, want)
	}
	for _, g := range want {
		if !slices.Contains(got, uint32(g)) {
			t.Errorf("SO_PEERGROUPS %v lacks group %d", got, g)
		}
	}
}
