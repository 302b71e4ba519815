package config

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/BurntSushi/toml"
)

// Load reads the main configuration file at path and the users file it
// names, validates both and returns the Plan. On any problem it returns a
// nil Plan and an *Errors listing every problem found in both files, each
// with file, line and column.
func Load(path string) (*Plan, error) {
	return load(path, nil, os.ReadFile, func(rel string) string {
		if filepath.IsAbs(rel) {
			return rel
		}
		return filepath.Join(filepath.Dir(path), rel)
	})
}

// LoadFS is Load on a file system: name and the users file (relative to
// name's directory; an absolute users_file is looked up without its
// leading slash) are read from fsys.
func LoadFS(fsys fs.FS, name string) (*Plan, error) {
	return load(name, nil, func(n string) ([]byte, error) { return fs.ReadFile(fsys, n) }, func(rel string) string {
		if path.IsAbs(rel) {
			return path.Clean(rel[1:])
		}
		return path.Join(path.Dir(name), rel)
	})
}

// Check validates the configuration at path like Load and returns every
// problem (nil when it is valid), sorted by file, line and column; each
// formats as FILE:LINE:COL: KEY: MSG. `shaperd --check` prints these and
// then the offline build checks of offline.Plan (internal/check/offline).
func Check(path string) []Error {
	_, err := Load(path)
	var errs *Errors
	if errors.As(err, &errs) {
		return errs.List
	}
	return nil
}

// load reads the main file with read, resolves the users file with
// resolve, and validates everything. With sh, the policy, tiers and users
// come from sh instead (LoadShared).
func load(mainPath string, sh *Shared, read func(string) ([]byte, error), resolve func(string) string) (*Plan, error) {
	c := &collector{order: map[string]int{mainPath: 0}}
	if sh != nil {
		return loadShared(mainPath, sh, read, c)
	}
	data, err := read(mainPath)
	if err != nil {
		c.add(Error{File: mainPath, Msg: err.Error()})
		return nil, c.result()
	}
	root, mf, ok := parseFile(mainPath, data, c)
	if !ok {
		return nil, c.result()
	}
	plan := &Plan{Path: mainPath, keys: keyPos{main: mf.pos.fresh()}}
	rt := mf.table("", root)
	plan.Daemon = decodeDaemon(rt)
	plan.Policy = decodePolicy(rt)
	plan.Tiers = decodeTiers(rt)
	plan.Interfaces = decodeInterfaces(rt, plan.Tiers)
	checkTierInterfaces(mf, plan.Tiers, plan.Interfaces, false)
	plan.Nodes = decodeNodes(rt, plan.Interfaces, false)
	plan.indexNodes()
	plan.Fleet = decodeFleet(rt)
	rt.finish()

	plan.UsersPath = resolve(plan.Daemon.UsersFile)
	if _, dup := c.order[plan.UsersPath]; dup {
		mf.errf("daemon.users_file", "the users file must not be the main file")
	} else {
		c.order[plan.UsersPath] = 1
		if data, err := read(plan.UsersPath); err != nil {
			mf.errf("daemon.users_file", "cannot read the users file: %v", err)
		} else if users, uf, ok := decodeUsersChunked(plan.UsersPath, data, c, plan.Tiers, plan.Nodes, plan.Interfaces); ok {
			plan.keys.users = uf.pos.fresh()
			plan.Users = users
		} else if users, uf, ok := parseFile(plan.UsersPath, data, c); ok {
			plan.keys.users = uf.pos.fresh()
			ut := uf.table("", users)
			plan.Users = decodeUsers(ut, plan.Tiers, plan.Nodes, plan.Interfaces)
			ut.finish()
		}
	}
	if errs := c.result(); errs != nil {
		return nil, errs
	}
	plan.Notes = c.notes
	return plan, nil
}

// parseFile parses one TOML file into a map, reporting a syntax error.
func parseFile(name string, data []byte, c *collector) (map[string]any, *file, bool) {
	f := &file{name: name, c: c}
	var m map[string]any
	if _, err := toml.Decode(string(data), &m); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			c.add(Error{File: name, Line: max(pe.Position.Line, 1), Col: max(pe.Position.Col, 1), Msg: pe.Message})
		} else {
			c.add(Error{File: name, Line: 1, Col: 1, Msg: err.Error()})
		}
		return nil, f, false
	}
	f.pos = newPositions(data)
	return m, f, true
}
