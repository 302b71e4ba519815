package cli

import "github.com/shaperd/shaperd/internal/fleet/fleetcli"

// The fleet commands run in fleetcli (they talk to etcd, not to the
// socket); their help is listed here too, for 'shaperctl help', the man
// page and completion.
func init() {
	commandHelp["fleet"] = fleetcli.Help
}
