package control

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
)

// Role is what a caller may do on the control socket.
type Role int

// Roles, each including the ones before it.
const (
	// RoleNone may do nothing.
	RoleNone Role = iota
	// RoleRead may read: status, top, any GET.
	RoleRead
	// RoleAdmin may also change: set-rate, clear, reload.
	RoleAdmin
)

// String names the role.
func (r Role) String() string {
	switch r {
	case RoleRead:
		return "read"
	case RoleAdmin:
		return "admin"
	}
	return "none"
}

// Access decides each caller's role from the kernel's credentials of the
// peer (SO_PEERCRED): uid 0 (and the daemon's own uid) and members of the
// admin group are admins,
// members of the socket group may read, nobody else may do anything.
// Membership is the peer process's primary gid or one of its supplementary
// groups, as the kernel holds them for that process (/proc/PID/status), so
// a user added to a group must log in again, as for file permissions. The
// zero Access (or a nil one) admits root only.
type Access struct {
	socketGroup, adminGroup string
	socketGID, adminGID     int // -1: not configured

	// groups returns the supplementary groups of a peer (peerGroups).
	groups func(Peer) []uint32
}

// NewAccess resolves the configured groups (names or numeric gids; ""
// means not configured). A group that does not exist is an error.
func NewAccess(socketGroup, adminGroup string) (*Access, error) {
	a := &Access{socketGroup: socketGroup, adminGroup: adminGroup, socketGID: -1, adminGID: -1}
	if socketGroup != "" {
		g, err := lookupGroup(socketGroup)
		if err != nil {
			return nil, fmt.Errorf("socket_group: %w", err)
		}
		a.socketGID = g
	}
	if adminGroup != "" {
		g, err := lookupGroup(adminGroup)
		if err != nil {
			return nil, fmt.Errorf("admin_group: %w", err)
		}
		a.adminGID = g
	}
	return a, nil
}

// FileGroup is the group the socket file gets (see Listen): the socket
// group, or the admin group when only that one is configured. A file has
// one group: with both configured, the admin group gets its own ACL entry
// (see ExtraGroup and AllowGroup).
func (a *Access) FileGroup() string {
	if a == nil {
		return ""
	}
	if a.socketGroup != "" {
		return a.socketGroup
	}
	return a.adminGroup
}

// ExtraGroup is the admin group's gid when the socket file belongs to
// another group (both groups configured and different): that group needs
// AllowGroup to connect.
func (a *Access) ExtraGroup() (int, bool) {
	if a == nil || a.socketGID < 0 || a.adminGID < 0 || a.socketGID == a.adminGID {
		return 0, false
	}
	return a.adminGID, true
}

// Role returns p's role. uid 0 is an admin, and so is the daemon's own uid
// (it owns the socket and could change the daemon anyway; it is root in
// production).
func (a *Access) Role(p Peer) Role {
	if p.UID == 0 || p.UID == uint32(os.Geteuid()) {
		return RoleAdmin
	}
	if a == nil || (a.socketGID < 0 && a.adminGID < 0) {
		return RoleNone
	}
	groups := a.groups
	if groups == nil {
		groups = peerGroups
	}
	var supp []uint32
	read := false
	member := func(gid int) bool {
		if gid < 0 {
			return false
		}
		if p.GID == uint32(gid) {
			return true
		}
		if !read {
			supp, read = groups(p), true
		}
		return slices.Contains(supp, uint32(gid))
	}
	switch {
	case member(a.adminGID):
		return RoleAdmin
	case member(a.socketGID):
		return RoleRead
	}
	return RoleNone
}

// need says, for a refusal, what op needs: "root", "the admin group 'x'"...
func (a *Access) need(r Role) string {
	var adminGroup, socketGroup string
	if a != nil {
		adminGroup, socketGroup = a.adminGroup, a.socketGroup
	}
	switch {
	case r == RoleAdmin && adminGroup == "":
		return "root (no daemon.admin_group is configured)"
	case r == RoleAdmin:
		return fmt.Sprintf("the admin group '%s' (or root)", adminGroup)
	case socketGroup != "" && adminGroup != "":
		return fmt.Sprintf("the socket group '%s' or the admin group '%s' (or root)", socketGroup, adminGroup)
	case socketGroup != "":
		return fmt.Sprintf("the socket group '%s' (or root)", socketGroup)
	case adminGroup != "":
		return fmt.Sprintf("the admin group '%s' (or root)", adminGroup)
	}
	return "root (no daemon.socket_group is configured)"
}

// ForbiddenError refuses a caller whose role is too small (403).
type ForbiddenError struct {
	Message string
}

func (e *ForbiddenError) Error() string { return e.Message }

// forbidden refuses op to peer p, which needs role r.
func (a *Access) forbidden(op string, r Role, p Peer, known bool) *ForbiddenError {
	who := "the caller's credentials are unknown"
	if known {
		who = fmt.Sprintf("the caller is uid %d", p.UID)
	}
	return &ForbiddenError{Message: fmt.Sprintf("permission denied: %s needs %s; %s", op, a.need(r), who)}
}

// peerGroups returns the supplementary groups of the peer: the kernel's
// SO_PEERGROUPS answer taken at accept time (Peer.Groups), else
// /proc/PID/status when that process still has the peer's uid, else the
// user database (the groups of the uid's user).
func peerGroups(p Peer) []uint32 {
	if p.Groups != nil {
		return p.Groups
	}
	if p.PID > 0 {
		if g, ok := procGroups(fmt.Sprintf("/proc/%d/status", p.PID), p.UID); ok {
			return g
		}
	}
	u, err := user.LookupId(strconv.FormatUint(uint64(p.UID), 10))
	if err != nil {
		return nil
	}
	ids, err := u.GroupIds()
	if err != nil {
		return nil
	}
	var out []uint32
	for _, id := range ids {
		if n, err := strconv.ParseUint(id, 10, 32); err == nil {
			out = append(out, uint32(n))
		}
	}
	return out
}

// procGroups reads the Groups: line of a /proc/PID/status file. It reports
// false when the file cannot be read or its effective uid is not uid (the
// process is gone and the PID reused).
func procGroups(path string, uid uint32) ([]uint32, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	var groups []uint32
	uidOK, seen := false, false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		switch k {
		case "Uid": // real, effective, saved, fs
			uidOK = len(f) >= 2 && f[1] == strconv.FormatUint(uint64(uid), 10)
		case "Groups":
			seen = true
			for _, s := range f {
				n, err := strconv.ParseUint(s, 10, 32)
				if err != nil {
					return nil, false
				}
				groups = append(groups, uint32(n))
			}
		}
	}
	return groups, uidOK && seen
}
