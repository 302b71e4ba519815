// Command shaperctl controls a running shaperd over its control socket:
// status, set-rate, clear, reload and top. See 'shaperctl help'.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/shaperd/shaperd/internal/control/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	env := cli.Env{Getenv: os.Getenv, Stdin: os.Stdin, After: time.After}
	if cli.IsTerminal(os.Stdout.Fd()) {
		env.Terminal = true
		env.Rows = func() int { return cli.TerminalRows(os.Stdout.Fd()) }
		if cli.IsTerminal(os.Stdin.Fd()) {
			env.Cbreak = func() (func(), error) { return cli.Cbreak(os.Stdin.Fd()) }
		}
	}
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr, env)
	stop()
	os.Exit(code)
}
