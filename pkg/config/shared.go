package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// Shared is the part of a plan a fleet of routers shares (`shaperctl
// fleet push`): Main holds the [policy], [tiers] and [nodes] tables, Users is a
// users file. Name and UsersName name the two documents in messages
// (positions are within them).
type Shared struct {
	Name, UsersName string
	Main, Users     []byte
}

// LoadShared is Load for a router of a fleet: [daemon], [[interface]] and
// [fleet] come from the local file at path, [policy], [tiers] and the
// users from sh. The local file's own [policy] and [tiers] tables, and its
// users file, are not used. Errors name the document they are in
// (path, sh.Name or sh.UsersName) with line and column.
func LoadShared(path string, sh *Shared) (*Plan, error) {
	if sh == nil {
		return nil, errors.New("config: LoadShared without a shared plan")
	}
	return load(path, sh, os.ReadFile, nil)
}

// loadShared is load's branch for LoadShared.
func loadShared(mainPath string, sh *Shared, read func(string) ([]byte, error), c *collector) (*Plan, error) {
	c.order[sh.Name] = 1
	c.order[sh.UsersName] = 2
	data, err := read(mainPath)
	if err != nil {
		c.add(Error{File: mainPath, Msg: err.Error()})
		return nil, c.result()
	}
	root, mf, ok := parseFile(mainPath, data, c)
	if !ok {
		return nil, c.result()
	}
	shared, sf, ok := parseFile(sh.Name, sh.Main, c)
	if !ok {
		return nil, c.result()
	}
	plan := &Plan{Path: mainPath, SharedPath: sh.Name, UsersPath: sh.UsersName,
		keys: keyPos{main: mf.pos.fresh(), shared: sf.pos.fresh()}}
	st := sf.table("", shared)
	plan.Policy = decodePolicy(st)
	plan.Tiers = decodeTiers(st)
	rt := mf.table("", root)
	plan.Daemon = decodeDaemon(rt)
	plan.Interfaces = decodeInterfaces(rt, plan.Tiers)
	checkTierInterfaces(sf, plan.Tiers, plan.Interfaces, true)
	plan.Nodes = decodeNodes(st, plan.Interfaces, true)
	plan.indexNodes()
	st.finish()
	plan.Fleet = decodeFleet(rt)
	rt.allow("policy", "tiers", "nodes") // the fleet's are in force
	rt.finish()
	if users, uf, ok := decodeUsersChunked(sh.UsersName, sh.Users, c, plan.Tiers, plan.Nodes, plan.Interfaces); ok {
		plan.keys.users = uf.pos.fresh()
		plan.Users = users
	} else if users, uf, ok := parseFile(sh.UsersName, sh.Users, c); ok {
		plan.keys.users = uf.pos.fresh()
		ut := uf.table("", users)
		plan.Users = decodeUsers(ut, plan.Tiers, plan.Nodes, plan.Interfaces)
		ut.finish()
	}
	if errs := c.result(); errs != nil {
		return nil, errs
	}
	plan.Notes = c.notes
	return plan, nil
}

// sharedTables are the top-level tables of a Shared document.
var sharedTables = []string{"policy", "tiers", "nodes"}

// ExtractShared reads the configuration at path (which Load should have
// accepted) and returns its shared part: the [policy], [tiers] and [nodes]
// tables and the users file verbatim. The shared document is the file
// itself with every other line blanked ([daemon], [[interface]], [fleet]:
// one router's own), so a router that refuses the plan names the
// operator's lines; where that cannot be done faithfully (a header-like
// line inside a multi-line string) it is the shared tables re-encoded.
// Names are the two files' base names.
func ExtractShared(path string) (*Shared, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if _, err := toml.Decode(string(data), &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]any{}
	for _, k := range sharedTables {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	main := blankLocalTables(data)
	var back map[string]any
	if _, err := toml.Decode(string(main), &back); err != nil || !reflect.DeepEqual(back, out) {
		var buf bytes.Buffer
		if err := toml.NewEncoder(&buf).Encode(out); err != nil {
			return nil, fmt.Errorf("%s: encoding the shared tables: %w", path, err)
		}
		main = buf.Bytes()
	}
	usersFile := DefaultUsersFile
	if d, ok := m["daemon"].(map[string]any); ok {
		if s, ok := d["users_file"].(string); ok && s != "" {
			usersFile = s
		}
	}
	if !filepath.IsAbs(usersFile) {
		usersFile = filepath.Join(filepath.Dir(path), usersFile)
	}
	users, err := os.ReadFile(usersFile)
	if err != nil {
		return nil, err
	}
	return &Shared{Name: filepath.Base(path), UsersName: filepath.Base(usersFile), Main: main, Users: users}, nil
}

// blankLocalTables returns data with every line outside the shared
// tables emptied, line numbers kept: lines before the first table header
// and the lines of tables whose first key is not one of sharedTables.
// Headers are recognised by line ("[name...]" or "[[name...]]" after
// blanks); the caller checks the result decodes to the shared tables.
func blankLocalTables(data []byte) []byte {
	lines := strings.SplitAfter(string(data), "\n")
	keep := false
	for i, l := range lines {
		if h := strings.TrimLeft(l, " \t"); strings.HasPrefix(h, "[") {
			name := strings.TrimLeft(h, "[ \t")
			if end := strings.IndexAny(name, ".] \t"); end >= 0 {
				name = name[:end]
			}
			keep = slices.Contains(sharedTables, strings.Trim(name, `"'`))
		}
		if !keep {
			lines[i] = l[len(strings.TrimRight(l, "\r\n")):] // the line ending alone
		}
	}
	return []byte(strings.Join(lines, ""))
}
