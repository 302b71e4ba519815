package config

import (
	"fmt"
	"strings"
)

// keyPos is where the keys of a Plan's two files are written, kept so that
// checks beyond this package (building the plan, the classifier layout) can
// report their problems at FILE:LINE:COL like Load does.
type keyPos struct {
	main, users *positions
	shared      *positions // the fleet's [policy] and [tiers] (LoadShared)
}

// fileOf returns the file and position map of a key path: paths starting
// with "user[" are in the users file, "tiers", "nodes" and "policy" paths
// in the fleet's shared document when there is one, all others in the main
// file.
func (p *Plan) fileOf(path string) (string, *positions) {
	if strings.HasPrefix(path, "user[") {
		return p.UsersPath, p.keys.users
	}
	if p.SharedPath != "" && (path == "tiers" || path == "policy" || path == "nodes" ||
		strings.HasPrefix(path, "tiers.") || strings.HasPrefix(path, "policy.") || strings.HasPrefix(path, "nodes.")) {
		return p.SharedPath, p.keys.shared
	}
	return p.Path, p.keys.main
}

// Has reports whether the key path is written in the plan's files (false
// for a defaulted key, and for a Plan that Load did not make).
func (p *Plan) Has(path string) bool {
	_, m := p.fileOf(path)
	_, ok := m.lookup(path)
	return ok
}

// Errorf returns an Error about the key path ("tiers.gold.burst",
// "interface[1].bandwidth", "user[3].addresses[0]"; users-file paths start
// with "user[") at the position where it, or its nearest written ancestor,
// is written. Plans not made by Load have no positions: Line is then 0.
func (p *Plan) Errorf(path, format string, args ...any) Error {
	name, m := p.fileOf(path)
	e := Error{File: name, Key: path, Msg: fmt.Sprintf(format, args...)}
	if m != nil {
		f := &file{name: name, pos: m}
		at := f.at(path)
		e.Line, e.Col = at.Line, at.Col
	}
	return e
}

// SortErrors sorts errs by file (the main file first), line and column, as
// Load sorts its errors.
func (p *Plan) SortErrors(errs []Error) {
	c := &collector{list: errs, order: map[string]int{p.Path: 0, p.SharedPath: 1, p.UsersPath: 2}}
	c.result()
}

// Path writes the key path of an array element's key: Path("user", 3,
// "addresses", 1) is "user[3].addresses[1]"; Path("interface", 0,
// "bandwidth") is "interface[0].bandwidth".
func Path(array string, i int, key string, j ...int) string {
	p := index(array, i) + "." + key
	for _, k := range j {
		p = index(p, k)
	}
	return p
}
