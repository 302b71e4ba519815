package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/migrate"
	"github.com/shaperd/shaperd/pkg/policy"
)

func init() {
	commands["import"] = runImport
	commandHelp["import"] = importHelp
}

const importHelp = `Usage: shaperctl import libreqos FILE [--network FILE] [--tiers MODE] [--config FILE] [-o FILE] [--tiers-out FILE] [--force] [--json]
       shaperctl import csv FILE [--config FILE] [-o FILE] [--force] [--json]

Write users.toml from another tool's list of users. Every bad row is
reported with its line number, and nothing is written when there is one.
The result is checked as 'shaperd --check' would check it before anything
is written. Needs no daemon.

libreqos reads LibreQoS's ShapedDevices.csv: Circuit ID, Circuit Name,
Device ID, Device Name, Parent Node, MAC, IPv4, IPv6, Download Min Mbps,
Upload Min Mbps, Download Max Mbps, Upload Max Mbps, Comment. Each circuit
(the devices sharing a Circuit ID) becomes one user, named after the
Circuit Name, with the IPv4 and IPv6 addresses of all its devices. The
minimums become rate and upload_rate, the maximums ceil and upload_ceil.

With --network, LibreQoS's network.json (its sites and access points)
becomes [nodes.NAME] tables and each user gets node = its circuit's Parent
Node (none when empty or "none"; {} is a flat network). A node's
downloadBandwidthMbps becomes its ceil and its rate (the
downloadBandwidthMbpsMin where given), uploadBandwidthMbps upload_ceil and
upload_rate. Names that are not shaperd names ("Site 1", "AP_A") are
lower-cased with other characters as '-' (site-1, ap_a), a taken name gets
-2, -3...; the output lists them and each table says the original. The
nodes (and the auto tiers) go into the shaperd.toml --config names (or
--tiers FILE), between "# >>> shaperctl import libreqos >>>" and
"# <<< shaperctl import libreqos <<<" lines that the next import replaces,
and the users into its users file (daemon.users_file), replaced without
--force when an earlier import wrote it: shaperd can reload at once.
Errors: a node more than 6 levels deep (with its path), a Parent Node that
is not in network.json (with its row and a near name).

csv reads name,tier,addresses[,rate,ceil,upload_rate,upload_ceil], one
user a row, addresses separated by spaces or semicolons; a header row
naming the columns may reorder them ('shaperctl export --format csv'
writes one).

Flags:
  --network FILE     libreqos: LibreQoS's network.json, written as nodes
                     into --config (see above)
  --tiers MODE       libreqos: auto (default) makes a tier per distinct set
                     of min/max rates, named lqos-DOWN-UP after the maximums,
                     and writes them to --tiers-out for shaperd.toml; a file
                     name maps each circuit to a tier of that shaperd.toml with
                     the same rates (or the same ceilings, the user keeping
                     its own minimums)
  --config FILE      the shaperd.toml to check the result against (csv:
                     default /etc/shaperd/shaperd.toml; libreqos auto: the
                     generated tiers are added to it; default a minimal one);
                     with --network, the one to update
  -o FILE            the users file to write (default users.toml; - prints it;
                     with --network, default the users file of --config)
  --tiers-out FILE   libreqos auto: where the tiers go (default tiers.toml
                     next to -o; - prints them); not with --network
  --force            replace files that exist
  --json             print what was written as JSON

Examples:
  shaperctl import libreqos ShapedDevices.csv -o /etc/shaperd/users.toml
  shaperctl import libreqos ShapedDevices.csv --tiers /etc/shaperd/shaperd.toml
  shaperctl import libreqos ShapedDevices.csv --network network.json --config /etc/shaperd/shaperd.toml
  shaperctl import csv users.csv --config /etc/shaperd/shaperd.toml -o users.toml
`

// importResult is what import wrote, for --json.
type importResult struct {
	UserCount int      `json:"user_count"`
	Tiers     []string `json:"tiers,omitempty"`
	// Nodes are the nodes written (--network), parents first; Renamed
	// those whose name is not network.json's; Virtual network.json's
	// virtual nodes, not shaped.
	Nodes   []string      `json:"nodes,omitempty"`
	Renamed []renamedNode `json:"renamed_nodes,omitempty"`
	Virtual []string      `json:"virtual_nodes,omitempty"`
	Files   []string      `json:"files"`
	// Unchanged are files that already held what the import would write.
	Unchanged []string `json:"unchanged,omitempty"`
}

// renamedNode is a node of network.json with another name in shaperd.
type renamedNode struct {
	NetworkJSON string `json:"network_json"`
	Name        string `json:"node"`
}

func runImport(_ context.Context, _ *control.Client, args []string, out io.Writer, env Env) error {
	const cmd = "import"
	fs := newFlagSet(cmd)
	tiersMode := fs.String("tiers", "auto", "")
	configPath := fs.String("config", "", "")
	output := fs.String("o", "users.toml", "")
	tiersOut := fs.String("tiers-out", "", "")
	force := fs.Bool("force", false, "")
	asJSON := fs.Bool("json", false, "")
	network := fs.String("network", "", "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagError(cmd, err)
	}
	if len(pos) != 2 || (pos[0] != "libreqos" && pos[0] != "csv") {
		return usagef(cmd, "expected libreqos FILE or csv FILE")
	}
	kind, src := pos[0], pos[1]
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if kind == "csv" && (set["tiers"] || set["tiers-out"]) {
		return usagef(cmd, "--tiers and --tiers-out are for import libreqos")
	}
	if kind == "libreqos" && *tiersMode != "auto" && (set["tiers-out"] || set["config"]) {
		return usagef(cmd, "--tiers FILE checks against FILE: --config and --tiers-out are for --tiers auto")
	}
	if set["network"] {
		switch {
		case kind != "libreqos":
			return usagef(cmd, "--network is for import libreqos")
		case set["tiers-out"]:
			return usagef(cmd, "--network writes the generated tiers into --config with the nodes: --tiers-out is for imports without it")
		case *output == "-":
			return usagef(cmd, "--network updates files in place: -o - is for imports without it")
		case *tiersMode == "auto" && *configPath == "":
			return usagef(cmd, "--network needs the shaperd.toml to write the nodes into: --config FILE (or --tiers FILE)")
		}
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	name := filepath.Base(src)
	if set["network"] {
		target := *configPath
		if *tiersMode != "auto" {
			target = *tiersMode
		}
		usersOut := ""
		if set["o"] {
			usersOut = *output
		}
		return importNetwork(networkImport{csv: data, csvName: name, network: *network, config: target,
			autoTiers: *tiersMode == "auto", usersOut: usersOut, force: *force, asJSON: *asJSON}, out, env)
	}
	header := fmt.Sprintf("Written by shaperctl import %s from %s.", kind, name)

	var users []migrate.User
	var tiers []migrate.Tier
	var errs []error
	var mainName string
	var main []byte
	switch {
	case kind == "csv":
		mainName = *configPath
		if mainName == "" {
			mainName = "/etc/shaperd/shaperd.toml"
		}
		if main, err = os.ReadFile(mainName); err != nil {
			return fmt.Errorf("%w (--config names the shaperd.toml with the users' tiers)", err)
		}
		users, errs = migrate.ReadCSV(strings.NewReader(string(data)), name)
	case *tiersMode == "auto":
		mainName, main = "a minimal shaperd.toml", []byte(migrate.MinimalMain)
		if *configPath != "" {
			mainName = *configPath
			if main, err = os.ReadFile(mainName); err != nil {
				return err
			}
		}
		var circuits []migrate.Circuit
		if circuits, errs = migrate.ReadLibreQoS(strings.NewReader(string(data)), name); errs == nil {
			tiers, users = migrate.AutoTiers(circuits)
		}
	default:
		mainName = *tiersMode
		if main, err = os.ReadFile(mainName); err != nil {
			return err
		}
		plan, perrs := migrate.Validate(mainName, main, "", "", nil, nil)
		if perrs != nil {
			return importErrors(append([]error{fmt.Errorf("--tiers %s is not a valid shaperd.toml (the problems follow)", mainName)}, perrs...))
		}
		var circuits []migrate.Circuit
		if circuits, errs = migrate.ReadLibreQoS(strings.NewReader(string(data)), name); errs == nil {
			users, errs = migrate.MapTiers(circuits, plan, name)
		}
	}
	if errs != nil {
		return importErrors(errs)
	}
	usersText := migrate.UsersTOML(header, users)
	tiersText := ""
	if len(tiers) > 0 {
		tiersText = migrate.TiersTOML(header+"\nAdd these tiers to shaperd.toml.", tiers)
		main = append(append([]byte(string(main)), '\n'), tiersText...)
	}
	check := env.CheckPlan
	if check == nil {
		check = policy.Check
	}
	if _, errs := migrate.ValidateChecked(mainName, main, usersText, name, users, tiers, check); errs != nil {
		return importErrors(errs)
	}

	// Everything is valid: write.
	files := []struct{ path, text string }{}
	if tiersText != "" {
		p := *tiersOut
		if p == "" {
			p = "tiers.toml"
			if *output != "-" {
				p = filepath.Join(filepath.Dir(*output), "tiers.toml")
			} else {
				p = "-"
			}
		}
		files = append(files, struct{ path, text string }{p, tiersText})
	}
	files = append(files, struct{ path, text string }{*output, usersText})
	// Check every destination before writing any.
	for _, f := range files {
		if f.path == "-" {
			continue
		}
		if fi, err := os.Stat(filepath.Dir(f.path)); err != nil || !fi.IsDir() {
			return fmt.Errorf("cannot write %s: %s is not a directory; nothing written", f.path, filepath.Dir(f.path))
		}
		if _, err := os.Stat(f.path); err == nil && !*force {
			return fmt.Errorf("%s exists; nothing written (--force replaces it)", f.path)
		} else if err != nil && !errors.Is(err, iofs.ErrNotExist) {
			return err
		}
	}
	res := importResult{UserCount: len(users), Files: []string{}}
	for _, t := range tiers {
		res.Tiers = append(res.Tiers, t.Name)
	}
	for _, f := range files {
		if f.path == "-" {
			if _, err := io.WriteString(out, f.text); err != nil {
				return err
			}
			continue
		}
		if err := writeFileAtomic(f.path, f.text); err != nil {
			return err
		}
		res.Files = append(res.Files, f.path)
	}
	switch {
	case *asJSON:
		return writeJSON(out, res)
	case len(res.Files) > 0:
		fmt.Fprintf(out, "wrote %s to %s", plural(len(users), "user"), *output)
		if len(tiers) > 0 && files[0].path != "-" {
			fmt.Fprintf(out, " and %s to %s (add them to shaperd.toml)", plural(len(tiers), "tier"), files[0].path)
		}
		fmt.Fprintln(out)
	}
	return nil
}

// importErrors is every problem of an import, one a line.
func importErrors(errs []error) error {
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = e.Error()
	}
	return fmt.Errorf("%s\n%s; nothing written", strings.Join(lines, "\n"), plural(len(errs), "problem"))
}

// writeFileAtomic writes text to path through a temporary file renamed
// over it, so a reader never sees half a file.
func writeFileAtomic(path, text string) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(f.Name(), path)
}
