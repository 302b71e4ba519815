package cli

import (
	"slices"

	"github.com/shaperd/shaperd/internal/control"
)

// filterStatus keeps what target selects: a user name keeps that user's
// rows, tier:NAME the rows of the tier's users, iface:NAME the interface's
// rows; the interfaces table keeps the interfaces those rows are on (for
// iface:NAME, that interface even without users), and their nodes the
// ones above the rows' users (for iface:NAME, every node). node:NAME keeps
// the node, the nodes behind it and their users (see filterNodes). A
// target selecting nothing is a *control.NotFoundError.
func filterStatus(st *control.Status, target string) (*control.Status, error) {
	t, err := control.ParseTarget(target)
	if err != nil {
		return nil, usagef("status", "%v", err)
	}
	if t.Kind == control.TargetNode {
		return filterNodes(st, t, target)
	}
	out := *st
	out.Users = nil
	ifaces := map[string]bool{}
	for _, u := range st.Users {
		if t.Kind == control.TargetUser && u.Name == t.Name ||
			t.Kind == control.TargetTier && u.Tier == t.Name ||
			t.Kind == control.TargetIface && u.Interface == t.Name {
			out.Users = append(out.Users, u)
			ifaces[u.Interface] = true
		}
	}
	if t.Kind == control.TargetIface {
		ifaces[t.Name] = true
	}
	out.Interfaces = slices.DeleteFunc(slices.Clone(st.Interfaces), func(i control.InterfaceStatus) bool { return !ifaces[i.Name] })
	if len(out.Users) == 0 && len(out.Interfaces) == 0 {
		return nil, &control.NotFoundError{Target: target}
	}
	if out.Users == nil {
		out.Users = []control.UserStatus{}
	}
	if t.Kind != control.TargetIface {
		keepNodesAbove(&out)
	}
	return &out, nil
}
