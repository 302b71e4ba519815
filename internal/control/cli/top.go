package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Terminal control sequences of top.
const (
	clearScreen = "\x1b[H\x1b[2J" // cursor home, erase the screen
	topHeadRows = 3               // header, blank line, column titles
)

func runTop(ctx context.Context, c *control.Client, args []string, out io.Writer, env Env) error {
	fs := newFlagSet("top")
	interval := fs.Duration("interval", time.Second, "")
	iterations := fs.Int("iterations", 0, "")
	once := fs.Bool("once", false, "")
	asJSON := fs.Bool("json", false, "")
	nodes := fs.Bool("nodes", false, "")
	sortKey := fs.String("sort", "throughput", "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagError("top", err)
	}
	order, ok := topOrders[*sortKey]
	screen := func(out io.Writer, st *control.Status, maxRows int, terminal bool) {
		writeTop(out, st, maxRows, terminal, order)
	}
	snapshot := func(out io.Writer, st *control.Status) error { return writeTopJSON(out, st, order) }
	if *nodes {
		screen, snapshot = writeTopNodes, writeTopNodesJSON
	}
	switch {
	case len(pos) > 0:
		return usagef("top", "unexpected argument %q", pos[0])
	case !ok:
		return usagef("top", "--sort %q: want one of %s", *sortKey, strings.Join(slices.Sorted(maps.Keys(topOrders)), ", "))
	case *nodes && *sortKey != "throughput":
		return usagef("top", "--sort %s: --nodes shows the most loaded node first (throughput) only", *sortKey)
	case *interval <= 0:
		return usagef("top", "--interval must be positive")
	case *iterations < 0:
		return usagef("top", "--iterations must not be negative")
	}
	if *once {
		*iterations = 1
		env.Terminal = false // one plain snapshot, no screen
	}
	if *asJSON {
		env.Terminal = false
	}
	after := env.After
	if after == nil {
		after = time.After
	}
	var quit <-chan struct{}
	if env.Terminal {
		if env.Cbreak != nil {
			restore, err := env.Cbreak()
			if err != nil {
				return fmt.Errorf("set up the terminal: %w", err)
			}
			defer restore()
		}
		if env.Stdin != nil {
			quit = watchQuit(env.Stdin)
		}
	}
	for i := 1; ; i++ {
		st, err := c.Top(ctx)
		switch {
		case ctx.Err() != nil:
			return nil // Ctrl-C: quit quietly
		case err != nil && !env.Terminal:
			return err
		case *asJSON:
			if err := snapshot(out, st); err != nil {
				return err
			}
		case err != nil:
			// Keep going on a terminal: the daemon may be restarting.
			fmt.Fprintf(out, "%sshaperctl top: %v\n", clearScreen, err)
		case env.Terminal:
			fmt.Fprint(out, clearScreen)
			screen(out, st, rows(env), true)
		default:
			screen(out, st, 0, false)
			fmt.Fprintln(out)
		}
		if *iterations > 0 && i >= *iterations {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-quit:
			return nil
		case <-after(*interval):
		}
	}
}

// rows is the terminal's height, 0 when unknown.
func rows(env Env) int {
	if env.Rows == nil {
		return 0
	}
	return env.Rows()
}

// watchQuit reads keys from in and closes the returned channel on q, Q or
// Ctrl-C (when the terminal delivers it as a key). The reader goroutine
// ends with in.
func watchQuit(in io.Reader) <-chan struct{} {
	quit := make(chan struct{})
	go func() {
		buf := make([]byte, 64)
		for {
			n, err := in.Read(buf)
			for _, k := range buf[:n] {
				if k == 'q' || k == 'Q' || k == 0x03 {
					close(quit)
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return quit
}

// topOrders are top's --sort keys: each puts first the user with the most
// (by name: A first); ties go by name, then interface.
var topOrders = map[string]func(a, b control.UserStatus) int{
	"throughput": func(a, b control.UserStatus) int { return cmp.Compare(b.Throughput, a.Throughput) },
	"delay":      func(a, b control.UserStatus) int { return cmp.Compare(b.QueueDelay, a.QueueDelay) },
	"drops":      func(a, b control.UserStatus) int { return cmp.Compare(b.Drops, a.Drops) },
	"name":       func(a, b control.UserStatus) int { return 0 },
}

// sortTop returns st's users in top's order.
func sortTop(st *control.Status, order func(a, b control.UserStatus) int) []control.UserStatus {
	users := slices.Clone(st.Users)
	slices.SortStableFunc(users, func(a, b control.UserStatus) int {
		return cmp.Or(order(a, b), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Interface, b.Interface))
	})
	return users
}

// writeTop writes one top screen: a header and every user on every
// interface in order (topOrders), at most maxRows lines in all when
// maxRows > 0.
func writeTop(out io.Writer, st *control.Status, maxRows int, terminal bool, order func(a, b control.UserStatus) int) {
	users := sortTop(st, order)
	var total tbf.Rate
	for _, u := range users {
		total += u.Throughput
	}
	hint := ""
	if terminal {
		hint = "  (q quits)"
	}
	fmt.Fprintf(out, "shaperd top at %s: %s, total %s%s\n\n",
		st.Generated.Format(time.TimeOnly), plural(countUsers(users), "user"), formatRate(total), hint)
	more := 0
	if maxRows > 0 && len(users) > maxRows-topHeadRows-1 {
		keep := max(maxRows-topHeadRows-1, 0)
		more = len(users) - keep
		users = users[:keep]
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "USER\tINTERFACE\tDIRECTION\tDEVICE\tTIER\tTHROUGHPUT\tCEIL\t%CEIL\tBYTES\tDROPS\tDELAY")
	for _, u := range users {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", u.Name, u.Interface, dash(u.Direction), dash(u.Device), dash(u.Tier),
			formatRate(u.Throughput), formatRate(u.EffectiveCeil), percent(u.Throughput, u.EffectiveCeil),
			formatBytes(u.Bytes), u.Drops, formatDelay(u.QueueDelay))
	}
	tw.Flush()
	if more > 0 {
		fmt.Fprintf(out, "... %d more\n", more)
	}
}

// percent is a of b in whole percent, "-" when b is 0.
func percent(a, b tbf.Rate) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", float64(a)*100/float64(b))
}
