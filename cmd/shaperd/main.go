// Command shaperd is the traffic-shaping daemon. See docs/architecture.md,
// shaperd(8) and 'shaperd --help'.
//
// Exit status: 0 success; 1 an invalid configuration (--check and every
// mode), a failed apply (--once) or teardown, or a daemon that could not
// start; 2 a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/shaperd/shaperd/internal/check"
	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/daemon"
	"github.com/shaperd/shaperd/internal/fleet/fleetcli"
	"github.com/shaperd/shaperd/internal/simulate"
	"github.com/shaperd/shaperd/pkg/config"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "devel"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type flags struct {
	config, logLevel, logFormat, netns string
	check, once, teardown, version     bool
	force, takeover, diff, verbose     bool
	sim                                *simulate.Flags
}

// usage prints the synopsis and every flag as --name.
func usage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "usage: shaperd [--config FILE] [--check | --once | --teardown | --simulate] [--netns NAME] [--force] [--takeover] [--log-level L] [--log-format text|json]\n\n")
	fmt.Fprintf(w, "Without a mode flag shaperd runs as the daemon (see systemd/shaperd.service).\n\nFlags:\n")
	fs.VisitAll(func(f *flag.Flag) {
		name, text := flag.UnquoteUsage(f)
		if name != "" {
			name = " " + strings.ToUpper(name)
		}
		fmt.Fprintf(w, "  --%s%s\n      %s", f.Name, name, text)
		if f.DefValue != "" && f.DefValue != "false" {
			fmt.Fprintf(w, " (default %q)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

func parseFlags(args []string, stdout, stderr io.Writer) (*flags, error) {
	f := &flags{}
	fs := flag.NewFlagSet("shaperd", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // run prints parse errors, with the flags' two dashes
	fs.StringVar(&f.config, "config", "/etc/shaperd/shaperd.toml", "the configuration `file`")
	fs.BoolVar(&f.check, "check", false, "validate the configuration, print every error as FILE:LINE:COL: KEY: MSG and exit (1 when invalid)")
	fs.BoolVar(&f.once, "once", false, "apply the plan once, verify it and exit (non-zero with the reason on failure)")
	fs.BoolVar(&f.teardown, "teardown", false, "remove everything shaperd installed on the configured interfaces (and its interface lock files) and exit")
	fs.StringVar(&f.logLevel, "log-level", "", "debug, info, warn or error (default: daemon.log_level of the configuration)")
	fs.StringVar(&f.logFormat, "log-format", "text", "text or json")
	fs.StringVar(&f.netns, "netns", "", "shape in the named network `namespace` (as 'ip netns' knows it) instead of this one")
	fs.BoolVar(&f.force, "force", false, "go on even when another shaperd process manages one of the interfaces (two managers undo each other's changes)")
	fs.BoolVar(&f.diff, "diff", false, "with --check: also compare the plan (with the overrides and quota usage in state_dir) with what the kernel holds and print what applying it would change, writing nothing")
	fs.BoolVar(&f.verbose, "v", false, "with --check --diff: list every kernel change")
	fs.BoolVar(&f.version, "version", false, "print the version and exit")
	f.sim = simulate.AddFlags(fs)
	fs.BoolVar(&f.takeover, "takeover", false, "replace root qdiscs of other tools on every configured interface (as takeover = true on each); each takeover is logged")
	fs.Usage = func() { usage(fs, stderr) }
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			usage(fs, stdout) // asked for: stdout, exit 0
			return nil, flag.ErrHelp
		}
		if a == "--" {
			break
		}
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	n := 0
	for _, b := range []bool{f.check, f.once, f.teardown, f.sim.Simulate} {
		if b {
			n++
		}
	}
	if f.diff && !f.check {
		return nil, errors.New("--diff goes with --check")
	}
	if n > 1 {
		return nil, errors.New("--check, --once, --teardown and --simulate exclude each other")
	}
	if f.logFormat != "text" && f.logFormat != "json" {
		return nil, fmt.Errorf("--log-format %q: want text or json", f.logFormat)
	}
	return f, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	f, err := parseFlags(args, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "shaperd:", fleetcli.DoubleDash(err.Error()))
		return 2
	}
	if f.version {
		fmt.Fprintln(stdout, "shaperd", version)
		return 0
	}
	if f.sim.Simulate {
		return simulate.Main(f.config, f.sim, time.Now(), stdout, stderr)
	}
	if f.check {
		code := printCheck(check.Run(f.config, check.Options{}), stdout, stderr)
		if code == 0 && f.diff {
			return planDiff(f, stdout, stderr)
		}
		return code
	}

	level := new(slog.LevelVar)
	fixed := f.logLevel != ""
	if fixed {
		if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
			fmt.Fprintf(stderr, "shaperd: --log-level %q: want debug, info, warn or error\n", f.logLevel)
			return 2
		}
	}
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(stderr, hopts)
	if f.logFormat == "json" {
		h = slog.NewJSONHandler(stderr, hopts)
	}
	logger := slog.New(h)
	servePprof(logger)
	opts := daemon.Options{ConfigPath: f.config, NetNS: f.netns, Logger: logger, Takeover: f.takeover,
		Notifier: daemon.Systemd{}, Watchdog: daemon.SystemdWatchdog(), ReturnMemory: true, Force: f.force}
	if !fixed {
		opts.LogLevel = level
	}
	opts.Version = version

	d, err := daemon.New(opts)
	if err != nil {
		var ce *daemon.ConfigError
		if errors.As(err, &ce) {
			for _, p := range ce.Problems {
				fmt.Fprintln(stderr, p)
			}
			return 1
		}
		logger.Error("cannot start", "err", err)
		if errors.Is(err, daemon.ErrLocked) {
			fmt.Fprintln(stderr, "shaperd:", err)
		}
		return 1
	}
	defer d.Close()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	switch {
	case f.once:
		if err := d.Once(ctx); err != nil {
			logger.Error("apply failed", "err", err)
			fmt.Fprintln(stderr, "shaperd: apply failed:", err)
			return 1
		}
		logger.Info("applied and verified")
		return 0
	case f.teardown:
		if err := d.Teardown(ctx); err != nil {
			fmt.Fprintln(stderr, "shaperd: teardown:", err)
			return 1
		}
		return 0
	}

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			logger.Info("SIGHUP: reloading")
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			if _, err := d.Reload(rctx, control.ReloadRequest{}); err != nil {
				logger.Error("reload failed", "err", err)
			}
			cancel()
		}
	}()
	if err := d.Run(ctx); err != nil {
		logger.Error("daemon failed", "err", err)
		return 1
	}
	return 0
}

// printCheck prints what --check found (rep): a fleet router's note on
// its shared plan (stdout), then every error (stderr, exit 1), else the
// notes and "FILE: ok" (stdout, exit 0).
func printCheck(rep check.Report, stdout, stderr io.Writer) int {
	if rep.FleetNote != "" {
		fmt.Fprintf(stdout, "%s: fleet: %s\n", rep.Path, rep.FleetNote)
	}
	for _, line := range config.FormatErrors(rep.Errors, config.MaxPrinted) {
		fmt.Fprintln(stderr, line)
	}
	if len(rep.Errors) > 0 {
		return 1
	}
	if rep.ClassifierErr != nil {
		fmt.Fprintln(stderr, rep.ClassifierErr)
		return 1
	}
	for _, n := range config.FormatNotes(rep.KeyNotes, config.MaxPrinted) {
		fmt.Fprintln(stdout, n)
	}
	for _, n := range slices.Concat(rep.Notes, rep.ClassifierNotes) {
		fmt.Fprintf(stdout, "%s: note: %s\n", rep.Path, n)
	}
	fmt.Fprintf(stdout, "%s: ok\n", rep.Path)
	return 0
}

// planDiff prints what applying the configuration would change (see
// daemon.Daemon.DiffPlan); it reads the kernel and state_dir and writes
// nothing.
func planDiff(f *flags, stdout, stderr io.Writer) int {
	d, err := daemon.New(daemon.Options{ConfigPath: f.config, NetNS: f.netns, ReadOnly: true})
	if err != nil {
		fmt.Fprintln(stderr, "shaperd: --diff:", err)
		return 1
	}
	defer d.Close()
	check.WritePlanDiff(stdout, d.DiffPlan(time.Now()), f.verbose)
	return 0
}
