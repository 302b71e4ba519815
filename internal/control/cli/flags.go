package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// usageError is a mistake in the command line (exit 2).
type usageError struct {
	cmd string // the subcommand, "" for shaperctl itself
	msg string
}

func (e *usageError) Error() string { return e.msg }

func usagef(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}

// newFlagSet returns a silent flag set: Run reports errors itself.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseInterspersed parses flags anywhere among the positional arguments
// ("set-rate alice 3mbit --ramp 0s"), which the flag package alone does not:
// it stops at the first positional. After "--" everything is positional.
// It returns the positional arguments in order; flag.ErrHelp for -h/--help.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// rateFlag is an optional tc-style rate flag; text keeps it as written.
type rateFlag struct {
	v    *tbf.Rate
	text string
}

func (f *rateFlag) String() string {
	if f.v == nil {
		return ""
	}
	return f.v.String()
}

func (f *rateFlag) Set(s string) error {
	r, err := tbf.ParseRate(s)
	if err != nil {
		return err
	}
	f.v, f.text = &r, s
	return nil
}

// durationFlag is an optional duration flag in Go syntax.
type durationFlag struct{ v *control.Duration }

func (f *durationFlag) String() string {
	if f.v == nil {
		return ""
	}
	return f.v.String()
}

func (f *durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("use Go syntax such as 250ms, 2s or 1h30m")
	}
	f.v = control.DurationPtr(d)
	return nil
}
