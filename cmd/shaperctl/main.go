// Command shaperctl controls a running shaperd over its control socket:
// status, set-rate, clear, reload and top. See 'shaperctl help'.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/shaperd/shaperd/internal/check/offline"
	"github.com/shaperd/shaperd/internal/control/cli"
	"github.com/shaperd/shaperd/internal/fleet/fleetcli"
)

// version is set at build time with -ldflags "-X main.version=..."
// (scripts/version.sh; scripts/package.sh does).
var version = "devel"

func main() {
	if printVersion(os.Args[1:], os.Stdout) {
		os.Exit(0)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	env := cli.Env{Getenv: os.Getenv, Stdin: os.Stdin, After: time.After, CheckPlan: offline.Plan}
	if cli.IsTerminal(os.Stdout.Fd()) {
		env.Terminal = true
		env.Rows = func() int { return cli.TerminalRows(os.Stdout.Fd()) }
		if cli.IsTerminal(os.Stdin.Fd()) {
			env.Cbreak = func() (func(), error) { return cli.Cbreak(os.Stdin.Fd()) }
		}
	}
	var code int
	if fleetcli.IsFleet(os.Args[1:]) { // fleet push|pull|status, set-rate/clear --fleet: etcd, not the socket
		code = fleetcli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr, fleetcli.Env{Check: offline.File, Getenv: os.Getenv})
	} else {
		code = cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr, env)
	}
	stop()
	os.Exit(code)
}

// printVersion prints "shaperctl VERSION" to w and reports true when args
// is just --version (or -version).
func printVersion(args []string, w io.Writer) bool {
	if len(args) != 1 || (args[0] != "--version" && args[0] != "-version") {
		return false
	}
	fmt.Fprintln(w, "shaperctl", version)
	return true
}
