package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/shaperd/shaperd/internal/migrate"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/policy"
)

// networkImport is `import libreqos --network`: what the command line
// asks for.
type networkImport struct {
	csv     []byte
	csvName string
	// network is network.json's path; config the shaperd.toml to update.
	network, config string
	// autoTiers: a tier per distinct set of rates, written into config
	// with the nodes; else the circuits map to config's own tiers.
	autoTiers bool
	// usersOut is the users file to write; "": config's own.
	usersOut      string
	force, asJSON bool
}

// importedBy starts the files an import of LibreQoS wrote: such a users
// file is replaced by the next import without --force.
const importedBy = "# Written by shaperctl import libreqos "

// importNetwork imports ShapedDevices.csv with LibreQoS's network.json:
// the nodes (and auto tiers) go into the block of o.config, the users
// with their nodes into its users file. Everything is checked as
// `shaperd --check` would before anything is written.
func importNetwork(o networkImport, out io.Writer, env Env) error {
	netData, err := os.ReadFile(o.network)
	if err != nil {
		return err
	}
	netName := filepath.Base(o.network)
	main, err := os.ReadFile(o.config)
	if err != nil {
		return fmt.Errorf("%w (--network writes the nodes into this shaperd.toml)", err)
	}
	circuits, errs := migrate.ReadLibreQoS(bytes.NewReader(o.csv), o.csvName)
	net, nerrs := migrate.ReadNetwork(netData, netName)
	if errs = append(errs, nerrs...); errs != nil {
		return importErrors(errs)
	}
	// What the last import wrote is replaced: tiers are mapped against
	// the file without it.
	base, err := migrate.WithoutBlock(main, o.config)
	if err != nil {
		return err
	}
	var users []migrate.User
	var tiers []migrate.Tier
	if o.autoTiers {
		tiers, users = migrate.AutoTiers(circuits)
	} else {
		plan, perrs := migrate.Validate(o.config, base, "", "", nil, nil)
		if perrs != nil {
			return importErrors(append([]error{fmt.Errorf("--tiers %s is not a valid shaperd.toml (the problems follow)", o.config)}, perrs...))
		}
		if users, errs = migrate.MapTiers(circuits, plan, o.csvName); errs != nil {
			return importErrors(errs)
		}
	}
	if errs := migrate.AssignNodes(circuits, users, net, o.csvName); errs != nil {
		return importErrors(errs)
	}
	var nodeNames, tierNames []string
	for _, n := range net.Nodes {
		nodeNames = append(nodeNames, n.Name)
	}
	for _, t := range tiers {
		tierNames = append(tierNames, t.Name)
	}
	if errs := append(migrate.Clashes(main, o.config, "nodes", nodeNames), migrate.Clashes(main, o.config, "tiers", tierNames)...); errs != nil {
		return importErrors(errs)
	}

	header := fmt.Sprintf("Written by shaperctl import libreqos from %s and %s.", o.csvName, netName)
	newMain := base
	if len(tiers)+len(net.Nodes) > 0 {
		block := migrate.NetworkBlock(header, tiers, net.Nodes)
		if newMain, err = migrate.SetBlock(main, o.config, block); err != nil {
			return err
		}
	}
	usersText := migrate.UsersTOML(header, users)
	check := env.CheckPlan
	if check == nil {
		check = policy.Check
	}
	src := migrate.Sources{Src: o.csvName, Users: users, Tiers: tiers, Network: net}
	if _, errs := migrate.ValidateImport(o.config, newMain, usersText, src, check); errs != nil {
		return importErrors(errs)
	}

	// Everything is valid: check the destinations, then write.
	usersPath := o.usersOut
	if usersPath == "" {
		usersPath = migrate.UsersFile(o.config, newMain)
	}
	if fi, err := os.Stat(filepath.Dir(usersPath)); err != nil || !fi.IsDir() {
		return fmt.Errorf("cannot write %s: %s is not a directory; nothing written", usersPath, filepath.Dir(usersPath))
	}
	oldUsers, err := os.ReadFile(usersPath)
	switch {
	case err == nil && !o.force && !bytes.HasPrefix(oldUsers, []byte(importedBy)):
		return fmt.Errorf("%s exists and was not written by shaperctl import libreqos; nothing written (--force replaces it)", usersPath)
	case err != nil && !errors.Is(err, iofs.ErrNotExist):
		return err
	}
	res := importResult{UserCount: len(users), Files: []string{}}
	for _, f := range []struct {
		path      string
		old, text []byte
	}{
		// The users first: until shaperd.toml has their nodes, a reload
		// refuses them and keeps the plan in force.
		{usersPath, oldUsers, []byte(usersText)},
		{o.config, main, newMain},
	} {
		if bytes.Equal(f.old, f.text) {
			res.Unchanged = append(res.Unchanged, f.path)
			continue
		}
		if err := replaceFile(f.path, string(f.text)); err != nil {
			return err
		}
		res.Files = append(res.Files, f.path)
	}
	res.Tiers = tierNames
	res.Nodes = nodeNames
	for _, n := range net.Renamed() {
		res.Renamed = append(res.Renamed, renamedNode{NetworkJSON: n.Original, Name: n.Name})
	}
	for _, n := range net.Virtual {
		res.Virtual = append(res.Virtual, n.Path)
	}
	if o.asJSON {
		return writeJSON(out, res)
	}
	printNetworkImport(out, res, usersPath, o.config, netName)
	if own := migrate.UsersFile(o.config, newMain); !sameFile(own, usersPath) {
		fmt.Fprintf(out, "note: shaperd reads its users from %s (daemon.users_file of %s), not from %s\n", own, o.config, usersPath)
	}
	return nil
}

// sameFile reports whether paths a and b name the same file.
func sameFile(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// replaceFile writes text to path as writeFileAtomic does, keeping the
// mode and (where this process may set it) the owner of the file it
// replaces: shaperd.toml may be readable by its group only.
func replaceFile(path, text string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, iofs.ErrNotExist) {
		return writeFileAtomic(path, text)
	}
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(fi.Mode().Perm()); err != nil {
		f.Close()
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		_ = f.Chown(int(st.Uid), int(st.Gid)) // only root may give a file away: best effort
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(f.Name(), path)
}

// printNetworkImport says what an import with --network wrote.
func printNetworkImport(out io.Writer, res importResult, usersPath, mainPath, netName string) {
	say := func(path, what, where string) {
		if slices.Contains(res.Unchanged, path) {
			fmt.Fprintf(out, "%s already holds these %s: not written\n", path, what)
			return
		}
		fmt.Fprintf(out, "wrote %s to %s%s\n", what, path, where)
	}
	say(usersPath, plural(res.UserCount, "user"), "")
	what := plural(len(res.Nodes), "node")
	if len(res.Nodes) == 0 {
		what = "no nodes (a flat network)"
	}
	if len(res.Tiers) > 0 {
		what += " and " + plural(len(res.Tiers), "tier")
	}
	say(mainPath, what, fmt.Sprintf(" (between its %q and %q lines, which the next import replaces)", migrate.BlockBegin, migrate.BlockEnd))
	if len(res.Renamed) > 0 {
		fmt.Fprintf(out, "renamed %s of %s (shaperd's names are %s):\n", plural(len(res.Renamed), "node"), netName, config.NameRule)
		for _, r := range res.Renamed {
			fmt.Fprintf(out, "  %q -> %s\n", r.NetworkJSON, r.Name)
		}
	}
	if len(res.Virtual) > 0 {
		fmt.Fprintf(out, "not shaped, as in LibreQoS: %s of %s (%s); what hangs from one hangs from the shaped node above it\n",
			plural(len(res.Virtual), "virtual node"), netName, strings.Join(res.Virtual, ", "))
	}
}
