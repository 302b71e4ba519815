package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/jsonout"
	"github.com/shaperd/shaperd/internal/fleet/fleetcli"
	"github.com/shaperd/shaperd/pkg/config"
)

// Exit codes of Run.
const (
	ExitOK    = 0 // the command did what was asked
	ExitError = 1 // the daemon refused or failed, or could not be reached
	ExitUsage = 2 // the command line is wrong
)

// Env is what Run needs from the process besides arguments and output.
// The zero Env is valid: no environment, no keyboard, not a terminal.
type Env struct {
	// Getenv reads the environment (SHAPERD_SOCKET); nil: empty environment.
	Getenv func(string) string
	// Stdin gives top its keys (q quits) when Terminal is set; nil: none.
	Stdin io.Reader
	// Terminal says stdout is a terminal: top redraws one screen instead of
	// printing plain snapshots.
	Terminal bool
	// Cbreak switches the terminal to key-at-a-time input for top and
	// returns a function that restores it; nil: leave the terminal alone.
	Cbreak func() (restore func(), err error)
	// Rows returns the terminal's height in lines for top; nil or 0: unlimited.
	Rows func() int
	// After is top's refresh timer; nil: time.After.
	After func(time.Duration) <-chan time.Time
	// CheckPlan is the check `shaperd --check` runs on a plan once it
	// loads (offline.Plan), for import to refuse what --check would;
	// nil: policy.Check, its policy part.
	CheckPlan func(*config.Plan) []config.Error
}

// command is one subcommand: it parses its own arguments (flags may follow
// positionals) and talks to the daemon through c.
type command func(ctx context.Context, c *control.Client, args []string, out io.Writer, env Env) error

// commands maps names to commands. "help" is handled by Run.
var commands = map[string]command{
	"status":    runStatus,
	"set-rate":  runSetRate,
	"clear":     runClear,
	"reload":    runReload,
	"top":       runTop,
	"overrides": runOverrides,
	"quota":     runQuota,
	"simulate":  runSimulate,
	"user":      runUser,
	"node":      runNode,
}

// Run runs shaperctl with args (without the program name), writing results
// to stdout and errors to stderr, and returns the exit code: ExitOK,
// ExitError or ExitUsage. It never exits the process. ctx ends the command
// (main cancels it on SIGINT/SIGTERM; top then quits with ExitOK).
//
// With --json a failing command also prints one JSON object on stdout,
// {"error": ..., "exit_code": N} (docs/json.md), unless it printed its
// result already (status of a degraded daemon: the status, exit 1).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, env Env) int {
	out := &jsonout.Tracker{W: stdout}
	code, err := run(ctx, args, out, stderr, env)
	if err != nil && !out.Wrote && jsonout.Requested(args) {
		_ = jsonout.WriteError(stdout, ErrorObject(err, code))
	}
	return code
}

// run is Run without the error object: it returns the exit code and the
// error it reported on stderr (nil with ExitOK).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, env Env) (int, error) {
	fs := newFlagSet("shaperctl")
	socket := fs.String("socket", "", "control socket")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(stdout, "")
			return ExitOK, nil
		}
		return usage(stderr, usagef("", "%v", err))
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return usage(stderr, usagef("", "no command given"))
	}
	name, args := rest[0], rest[1:]
	if name == "help" {
		if len(args) > 1 {
			return usage(stderr, usagef("help", "help takes at most one command"))
		}
		topic := ""
		if len(args) == 1 {
			topic = args[0]
			if _, ok := commandHelp[topic]; !ok {
				return usage(stderr, usagef("", "no command %q", topic))
			}
		}
		printHelp(stdout, topic)
		return ExitOK, nil
	}
	cmd, ok := commands[name]
	if !ok {
		return usage(stderr, usagef("", "unknown command %q", name))
	}
	// A --socket after the command wins over one before it.
	args, sub, err := extractSocket(name, args)
	if err != nil {
		return usage(stderr, err)
	}
	if sub != "" {
		*socket = sub
	}
	c := control.NewClient(control.SocketPath(*socket, env.Getenv))
	defer c.Close()
	err = cmd(ctx, c, args, stdout, env)
	var ue *usageError
	var br *control.BadRequestError
	switch {
	case err == nil:
		return ExitOK, nil
	case errors.Is(err, flag.ErrHelp):
		printHelp(stdout, name)
		return ExitOK, nil
	case errors.As(err, &ue):
		return usage(stderr, err)
	case errors.As(err, &br) && br.Usage:
		// A value the daemon found malformed is a usage error as one
		// shaperctl finds itself.
		return usage(stderr, usagef(name, "%s", strings.TrimPrefix(err.Error(), name+": ")))
	default:
		fmt.Fprintf(stderr, "shaperctl: %v\n", err)
		return ExitError, err
	}
}

// usage reports a usage error and returns ExitUsage with the error as
// reported (flags named with two dashes).
func usage(stderr io.Writer, err error) (int, error) {
	var ue *usageError
	cmd := ""
	if errors.As(err, &ue) {
		cmd = ue.cmd
	}
	msg := fleetcli.DoubleDash(err.Error())
	if cmd == "" {
		fmt.Fprintf(stderr, "shaperctl: %s\nRun 'shaperctl help' for usage.\n", msg)
	} else {
		fmt.Fprintf(stderr, "shaperctl %s: %s\nRun 'shaperctl help %s' for usage.\n", cmd, msg, cmd)
	}
	return ExitUsage, &usageError{cmd: cmd, msg: msg}
}

// extractSocket removes "--socket PATH" / "--socket=PATH" (or one dash) from
// a command's arguments, so every command accepts it anywhere. It stops at "--".
func extractSocket(cmd string, args []string) (rest []string, socket string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(rest, args[i:]...), socket, nil
		case a == "--socket" || a == "-socket":
			if i+1 >= len(args) {
				return nil, "", usagef(cmd, "flag needs an argument: %s", a)
			}
			socket = args[i+1]
			i++
		case strings.HasPrefix(a, "--socket="), strings.HasPrefix(a, "-socket="):
			_, socket, _ = strings.Cut(a, "=")
		default:
			rest = append(rest, a)
		}
	}
	return rest, socket, nil
}
