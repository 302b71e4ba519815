package migrate

import (
	"errors"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/shaperd/shaperd/pkg/config"
)

// MinimalMain is the main configuration Validate uses when the operator
// gives none: one shaped interface each way, wide enough for any tier.
const MinimalMain = `[[interface]]
name = "lan0"
bandwidth = "1tbit"

[[interface]]
name = "lan0"
direction = "ingress"
bandwidth = "1tbit"
`

// Validate loads main (the text of shaperd.toml, named mainName in
// errors) with users as the text of its users file, exactly as `shaperd
// --check` would, and returns the plan or every problem. Problems in the
// users file are reported at the source line of the user concerned (src
// names the source file; users[i].Line is user i's line) and problems of a
// tier at the line of the tier's first user.
func Validate(mainName string, main []byte, usersText string, src string, users []User, tiers []Tier) (*config.Plan, []error) {
	return ValidateChecked(mainName, main, usersText, src, users, tiers, nil)
}

// ValidateChecked is Validate that also runs check on the plan once it
// loads, as `shaperd --check` runs its policy check after loading (nil:
// loading only). check's problems are pointed at their source lines as
// loading's are.
func ValidateChecked(mainName string, main []byte, usersText string, src string, users []User, tiers []Tier,
	check func(*config.Plan) []config.Error) (*config.Plan, []error) {
	return ValidateImport(mainName, main, usersText, Sources{Src: src, Users: users, Tiers: tiers}, check)
}

// Sources are what an import generated, for pointing configuration errors
// at the lines they come from.
type Sources struct {
	// Src names the file the users and tiers come from: Users[i].Line is
	// user i's line in it, Tiers[i].Line the line of the tier's first user.
	Src   string
	Users []User
	Tiers []Tier
	// Network holds the generated nodes (nil: none), each pointed at its
	// line in network.json.
	Network *Network
}

// ValidateImport is ValidateChecked with everything the import generated
// in s: problems of a generated user, tier or node are reported at the
// source line it comes from.
func ValidateImport(mainName string, main []byte, usersText string, s Sources,
	check func(*config.Plan) []config.Error) (*config.Plan, []error) {
	var d struct {
		Daemon struct {
			UsersFile string `toml:"users_file"`
		} `toml:"daemon"`
	}
	_, _ = toml.Decode(string(main), &d) // a syntax error is Load's to report
	uf := d.Daemon.UsersFile
	if uf == "" {
		uf = "users.toml"
	}
	name := path.Base(mainName)
	usersPath := path.Join(path.Dir(name), uf)
	if path.IsAbs(uf) {
		usersPath = path.Clean(uf[1:])
	}
	fsys := memFS{name: main, usersPath: []byte(usersText)}
	plan, err := config.LoadFS(fsys, name)
	var list []config.Error
	if err == nil {
		if check != nil {
			list = check(plan)
		}
		plan.Path = mainName
		if len(list) == 0 {
			return plan, nil
		}
	} else {
		var ce *config.Errors
		if !errors.As(err, &ce) {
			return nil, []error{err}
		}
		list = ce.List
	}
	var out []error
	for _, e := range list {
		out = append(out, sourceError(e, mainName, usersPath, s))
	}
	return nil, out
}

var (
	userKey = regexp.MustCompile(`^user\[(\d+)\]`)
	tierKey = regexp.MustCompile(`^tiers\.([a-z0-9_-]+)`)
	nodeKey = regexp.MustCompile(`^nodes\.([a-z0-9_-]+)`)
)

// sourceError points a configuration error at the source line it comes from.
func sourceError(e config.Error, mainName, usersPath string, s Sources) error {
	src, users, tiers := s.Src, s.Users, s.Tiers
	if e.File == usersPath {
		if m := userKey.FindStringSubmatch(e.Key); m != nil {
			if i, _ := strconv.Atoi(m[1]); i < len(users) {
				return lineErr(src, users[i].Line, "user %s: %s: %s", users[i].Name, strings.TrimPrefix(e.Key, m[0]+"."), e.Msg)
			}
		}
		e.File = "the generated users file"
		return e
	}
	if m := tierKey.FindStringSubmatch(e.Key); m != nil {
		for _, t := range tiers {
			if t.Name == m[1] {
				return lineErr(src, t.Line, "generated tier %s: %s: %s", t.Name, e.Key, e.Msg)
			}
		}
	}
	if m := nodeKey.FindStringSubmatch(e.Key); m != nil && s.Network != nil {
		for _, n := range s.Network.Nodes {
			if n.Name == m[1] {
				return lineErr(s.Network.File, n.Line, "generated node %s (%q): %s: %s", n.Name, n.Path, e.Key, e.Msg)
			}
		}
	}
	e.File = mainName
	return e
}
