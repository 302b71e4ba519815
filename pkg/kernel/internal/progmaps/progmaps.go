// Package progmaps finds the maps a loaded eBPF program uses by their
// names: how the classifier and the steering program adopt objects that
// were loaded by an earlier process and are known only by the program id
// an attached filter shows.
package progmaps

import (
	"fmt"
	"slices"

	"github.com/cilium/ebpf"
)

// Find returns the maps prog uses that are named one of names (the first
// of each name), by name. Every other map it opens is closed again; a name
// it does not find is absent. Opening maps by id needs CAP_SYS_ADMIN (those
// it cannot open are skipped).
func Find(prog *ebpf.Program, names ...string) (map[string]*ebpf.Map, error) {
	info, err := prog.Info()
	if err != nil {
		return nil, fmt.Errorf("program info: %w", err)
	}
	ids, _ := info.MapIDs()
	out := make(map[string]*ebpf.Map, len(names))
	for _, id := range ids {
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			continue
		}
		mi, err := m.Info()
		if err == nil && slices.Contains(names, mi.Name) && out[mi.Name] == nil {
			out[mi.Name] = m
			continue
		}
		_ = m.Close()
	}
	return out, nil
}

// UsesOnly reports whether the program described by info uses exactly the
// maps ms (no more, no other): that a program found by id is the one
// that goes with these maps.
func UsesOnly(info *ebpf.ProgramInfo, ms ...*ebpf.Map) bool {
	ids, ok := info.MapIDs()
	if !ok || len(ids) != len(ms) {
		return false
	}
	for _, m := range ms {
		mi, err := m.Info()
		if err != nil {
			return false
		}
		id, ok := mi.ID()
		if !ok || !slices.Contains(ids, id) {
			return false
		}
	}
	return true
}
