package config

import "testing"

// TestGroupsExist: socket_group and admin_group name existing groups (by
// name or numeric gid) and reach the plan; testdata/bad/groups.txt has the
// refusals.
func TestGroupsExist(t *testing.T) {
	p := mustLoad(t, `
[daemon]
socket_group = "root"
admin_group = "0"

[[interface]]
name = "lan0"
bandwidth = "1gbit"
`, "")
	if p.Daemon.SocketGroup != "root" || p.Daemon.AdminGroup != "0" {
		t.Errorf("socket_group %q, admin_group %q; want \"root\", \"0\"", p.Daemon.SocketGroup, p.Daemon.AdminGroup)
	}
}
