package cli

import (
	"context"
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/migrate"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/tbf"
)

func init() {
	commands["export"] = runExport
	commandHelp["export"] = exportHelp
}

const exportHelp = `Usage: shaperctl export [--format FORMAT] [-o FILE] [--json]
       shaperctl export libreqos [--config FILE] [-o FILE] [--network FILE]

Write the plan in force, read from the daemon's status: every user with
its tier, addresses and own rates (where they differ from the tier's).

  toml   (default) users.toml, each user's rates in force now as a comment
  csv    a header and one row per user: name,tier,addresses,rate,ceil,
         upload_rate,upload_ceil and the effective_* rates and reason in
         force now; 'shaperctl import csv' reads it back

export libreqos writes the configuration (--config, read from the files;
needs no daemon) in LibreQoS's terms: ShapedDevices.csv with one circuit
of one device per user (named after the user, its node as Parent Node,
rate/ceil as Download Min/Max Mbps, upload_rate/upload_ceil as Upload
Min/Max Mbps), and network.json with the nodes nested by parent, each
node's ceil and upload_ceil as its downloadBandwidthMbps and
uploadBandwidthMbps (LibreQoS's capacity) and its rate and upload_rate,
where below, as downloadBandwidthMbpsMin and uploadBandwidthMbpsMin.
Schedules, quotas and node interfaces have no place there and are left
out. 'shaperctl import libreqos FILE --network FILE' reads both back.

Flags:
  --format FORMAT   toml or csv (default toml)
  -o FILE           write to FILE instead of standard output
  --json            print the users as JSON instead
  --config FILE     libreqos: the shaperd.toml to export (default
                    /etc/shaperd/shaperd.toml)
  --network FILE    libreqos: where network.json goes (needed when the
                    configuration has nodes)
`

// exportUser is one user of an export: the plan (user's own rates where
// they differ from the tier's) and what is in force now.
type exportUser struct {
	migrate.User
	EffRate, EffCeil, EffUploadRate, EffUploadCeil tbf.Rate
	Reason                                         string
}

// exportJSON is one user of `export --json`; rates in bit/s (printed
// by writeJSON), a user's own rates only where they differ from the
// tier's.
type exportJSON struct {
	Name                string   `json:"user"`
	Tier                string   `json:"tier"`
	Addresses           []string `json:"addresses"`
	Rate                tbf.Rate `json:"rate,omitempty"`
	Ceil                tbf.Rate `json:"ceil,omitempty"`
	UploadRate          tbf.Rate `json:"upload_rate,omitempty"`
	UploadCeil          tbf.Rate `json:"upload_ceil,omitempty"`
	EffectiveRate       tbf.Rate `json:"effective_rate,omitempty"`
	EffectiveCeil       tbf.Rate `json:"effective_ceil,omitempty"`
	EffectiveUploadRate tbf.Rate `json:"effective_upload_rate,omitempty"`
	EffectiveUploadCeil tbf.Rate `json:"effective_upload_ceil,omitempty"`
	Reason              string   `json:"reason"`
}

func runExport(ctx context.Context, c *control.Client, args []string, out io.Writer, _ Env) error {
	const cmd = "export"
	fs := newFlagSet(cmd)
	format := fs.String("format", "toml", "")
	output := fs.String("o", "-", "")
	asJSON := fs.Bool("json", false, "")
	configPath := fs.String("config", "", "")
	network := fs.String("network", "", "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagError(cmd, err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if len(pos) == 1 && pos[0] == "libreqos" {
		if set["format"] || set["json"] {
			return usagef(cmd, "--format and --json are for export without libreqos")
		}
		return exportLibreQoS(*configPath, *output, *network, out)
	}
	if len(pos) > 0 {
		return usagef(cmd, "unexpected argument %q (the one format argument is libreqos)", pos[0])
	}
	if set["config"] || set["network"] {
		return usagef(cmd, "--config and --network are for export libreqos")
	}
	if *format != "toml" && *format != "csv" {
		return usagef(cmd, "--format %q: toml or csv", *format)
	}
	st, err := c.Status(ctx)
	if err != nil {
		return err
	}
	users := exportUsers(st)
	var text string
	switch {
	case *asJSON:
		js := make([]exportJSON, len(users))
		for i, u := range users {
			js[i] = exportJSON{Name: u.Name, Tier: u.Tier, Addresses: u.Addresses, Rate: u.Rate, Ceil: u.Ceil,
				UploadRate: u.UploadRate, UploadCeil: u.UploadCeil, EffectiveRate: u.EffRate, EffectiveCeil: u.EffCeil,
				EffectiveUploadRate: u.EffUploadRate, EffectiveUploadCeil: u.EffUploadCeil, Reason: u.Reason}
		}
		var b strings.Builder
		if err := writeJSON(&b, js); err != nil {
			return err
		}
		text = b.String()
	case *format == "csv":
		text, err = exportCSV(users)
		if err != nil {
			return err
		}
	default:
		plain := make([]migrate.User, len(users))
		for i, u := range users {
			plain[i] = u.User
			plain[i].Comment = fmt.Sprintf("in force: %s/%s down, %s/%s up (%s)",
				rateOrDash(u.EffRate), rateOrDash(u.EffCeil), rateOrDash(u.EffUploadRate), rateOrDash(u.EffUploadCeil), dash(u.Reason))
		}
		text = migrate.UsersTOML(fmt.Sprintf("Written by shaperctl export from shaperd's status at %s.", st.Generated.Format("2006-01-02 15:04:05 MST")), plain)
	}
	if *output == "-" {
		_, err := io.WriteString(out, text)
		return err
	}
	return writeFileAtomic(*output, text)
}

// exportLibreQoS writes the configuration at configPath (default
// /etc/shaperd/shaperd.toml) as LibreQoS's ShapedDevices.csv (to output,
// "-" standard output) and network.json (to network).
func exportLibreQoS(configPath, output, network string, out io.Writer) error {
	const cmd = "export"
	if configPath == "" {
		configPath = "/etc/shaperd/shaperd.toml"
	}
	plan, err := config.Load(configPath)
	if err != nil {
		return fmt.Errorf("%w\n(shaperd --config %s --check says the same; nothing written)", err, configPath)
	}
	if len(plan.Nodes) > 0 && network == "" {
		return usagef(cmd, "%s has %s: --network FILE names where network.json goes", configPath, plural(len(plan.Nodes), "node"))
	}
	if network != "" && network == output {
		return usagef(cmd, "-o and --network name the same file %s", network)
	}
	devices, err := migrate.ShapedDevices("Written by shaperctl export libreqos from "+filepath.Base(configPath)+".", plan)
	if err != nil {
		return err
	}
	if network != "" {
		if network == "-" {
			_, err = io.WriteString(out, migrate.NetworkJSON(plan))
		} else {
			err = writeFileAtomic(network, migrate.NetworkJSON(plan))
		}
		if err != nil {
			return err
		}
	}
	if output == "-" {
		_, err := io.WriteString(out, devices)
		return err
	}
	return writeFileAtomic(output, devices)
}

func rateOrDash(r tbf.Rate) string {
	if r == 0 {
		return "-"
	}
	return r.String()
}

// exportUsers assembles the users of a status in first-seen order. A user
// appears once per interface; an entry's Direction says which of the
// interfaces of its name it belongs to (an egress and an ingress interface
// may share a name); without it (an older daemon) the k-th entry of a user
// on an interface name belongs to the k-th interface of that name.
func exportUsers(st *control.Status) []exportUser {
	byName := map[string][]int{} // interface name -> indexes into st.Interfaces
	for i, in := range st.Interfaces {
		byName[in.Name] = append(byName[in.Name], i)
	}
	seen := map[[2]string]int{}
	index := map[string]int{}
	var users []exportUser
	for _, us := range st.Users {
		i, ok := index[us.Name]
		if !ok {
			i = len(users)
			index[us.Name] = i
			users = append(users, exportUser{User: migrate.User{Name: us.Name, Tier: us.Tier, Addresses: us.Addresses}})
		}
		u := &users[i]
		k := [2]string{us.Name, us.Interface}
		n := seen[k]
		seen[k]++
		ifs := byName[us.Interface]
		if n >= len(ifs) {
			continue
		}
		in := st.Interfaces[ifs[n]]
		if us.Direction != "" { // the daemon says the direction: no need to count
			want := "egress"
			if us.Direction == "upload" {
				want = "ingress"
			}
			for _, j := range ifs {
				if st.Interfaces[j].Direction == want {
					in = st.Interfaces[j]
				}
			}
		}
		var tr, tc tbf.Rate
		for _, t := range in.Tiers {
			if t.Name == us.Tier {
				tr, tc = t.Rate, t.Ceil
			}
		}
		own := func(v, tier tbf.Rate) tbf.Rate {
			if v == tier {
				return 0
			}
			return v
		}
		if u.Reason == "" || in.Direction != "ingress" {
			u.Reason = us.Reason
		}
		if in.Direction == "ingress" {
			u.UploadRate, u.UploadCeil = own(us.Rate, tr), own(us.Ceil, tc)
			u.EffUploadRate, u.EffUploadCeil = us.EffectiveRate, us.EffectiveCeil
		} else {
			u.Rate, u.Ceil = own(us.Rate, tr), own(us.Ceil, tc)
			u.EffRate, u.EffCeil = us.EffectiveRate, us.EffectiveCeil
		}
	}
	return users
}

// exportCSV writes users as CSV with a header.
func exportCSV(users []exportUser) (string, error) {
	var b strings.Builder
	w := csv.NewWriter(&b)
	rate := func(r tbf.Rate) string {
		if r == 0 {
			return ""
		}
		return r.String()
	}
	w.Write([]string{"name", "tier", "addresses", "rate", "ceil", "upload_rate", "upload_ceil",
		"effective_rate", "effective_ceil", "effective_upload_rate", "effective_upload_ceil", "reason"})
	for _, u := range users {
		w.Write([]string{u.Name, u.Tier, strings.Join(u.Addresses, " "), rate(u.Rate), rate(u.Ceil), rate(u.UploadRate), rate(u.UploadCeil),
			rate(u.EffRate), rate(u.EffCeil), rate(u.EffUploadRate), rate(u.EffUploadCeil), u.Reason})
	}
	w.Flush()
	return b.String(), w.Error()
}
