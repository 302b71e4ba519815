package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shaperd/shaperd/internal/control"
)

// addressList is a repeatable --address flag.
type addressList []string

func (a *addressList) String() string { return strings.Join(*a, ",") }

func (a *addressList) Set(s string) error {
	*a = append(*a, s)
	return nil
}

// runUser is `shaperctl user SUBCOMMAND ...`.
func runUser(ctx context.Context, c *control.Client, args []string, out io.Writer, _ Env) error {
	fs := newFlagSet("user")
	asJSON := fs.Bool("json", false, "")
	tier := fs.String("tier", "", "")
	var addrs addressList
	fs.Var(&addrs, "address", "")
	var rate, ceil rateFlag
	fs.Var(&rate, "rate", "")
	fs.Var(&ceil, "ceil", "")
	var forDur durationFlag
	fs.Var(&forDur, "for", "")
	node := fs.String("node", "", "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagError("user", err)
	}
	if len(pos) == 0 {
		return usagef("user", "expected a subcommand: add, set-addresses, add-address, remove-address, remove, move or list")
	}
	op, pos := pos[0], pos[1:]
	if op == "list" {
		if len(pos) != 0 || *tier != "" || len(addrs) > 0 || rate.v != nil || ceil.v != nil || forDur.v != nil || *node != "" {
			return usagef("user", "user list takes only --json")
		}
		resp, err := c.Users(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(out, resp)
		}
		return writeUserList(out, resp.Users)
	}
	req := control.UserRequest{Op: op}
	known := false
	for _, o := range control.UserOps() {
		known = known || o == op
	}
	if !known {
		return usagef("user", "unknown subcommand %q (want add, set-addresses, add-address, remove-address, remove, move or list)", op)
	}
	if len(pos) == 0 {
		return usagef("user", "user %s: no user name given", op)
	}
	req.Name, pos = pos[0], pos[1:]
	flagsOK := func(tierRate, address, forOK bool) error {
		switch {
		case !tierRate && (*tier != "" || rate.v != nil || ceil.v != nil):
			return usagef("user", "--tier, --rate and --ceil go with user add only")
		case !address && len(addrs) > 0:
			return usagef("user", "--address goes with user add only")
		case !forOK && forDur.v != nil:
			return usagef("user", "--for goes with user add-address only")
		case *node != "" && op != control.UserAdd:
			return usagef("user", "--node goes with user add only (user move NAME NODE moves a user)")
		}
		return nil
	}
	switch op {
	case control.UserAdd:
		if err := flagsOK(true, true, false); err != nil {
			return err
		}
		if len(pos) > 0 {
			return usagef("user", "user add: unexpected %q (addresses go with --address)", pos[0])
		}
		if *tier == "" {
			return usagef("user", "user add %s: --tier is required", req.Name)
		}
		req.Tier, req.Addresses, req.Rate, req.Ceil, req.Node = *tier, addrs, rate.v, ceil.v, *node
	case control.UserSetAddresses:
		if err := flagsOK(false, false, false); err != nil {
			return err
		}
		if len(pos) == 0 {
			return usagef("user", "user set-addresses %s: no addresses given", req.Name)
		}
		req.Addresses = pos
	case control.UserAddAddress, control.UserRemoveAddress:
		if err := flagsOK(false, false, op == control.UserAddAddress); err != nil {
			return err
		}
		if len(pos) != 1 {
			return usagef("user", "user %s %s: expected one ADDRESS, got %s", op, req.Name, plural(len(pos), "argument"))
		}
		req.Addresses, req.For = pos, forDur.v
	case control.UserRemove:
		if err := flagsOK(false, false, false); err != nil {
			return err
		}
		if len(pos) > 0 {
			return usagef("user", "user remove %s: unexpected %q", req.Name, pos[0])
		}
	case control.UserMove:
		if err := flagsOK(false, false, false); err != nil {
			return err
		}
		if len(pos) != 1 {
			return usagef("user", "user move %s: expected one NODE (a node's name or path, or \"none\"), got %s", req.Name, plural(len(pos), "argument"))
		}
		if req.Node = pos[0]; req.Node == "none" {
			req.Node = ""
		}
	}
	resp, err := c.ChangeUser(ctx, req)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(out, resp)
	}
	switch {
	case resp.User == nil:
		fmt.Fprintf(out, "%s: removed\n", resp.Name)
	case resp.User.Node != "":
		fmt.Fprintf(out, "%s: tier %s, node %s, addresses %s\n", resp.Name, resp.User.Tier, resp.User.Node, addressText(resp.User.Addresses))
	default:
		fmt.Fprintf(out, "%s: tier %s, addresses %s\n", resp.Name, resp.User.Tier, addressText(resp.User.Addresses))
	}
	if resp.Note != "" {
		fmt.Fprintf(out, "note: %s\n", resp.Note)
	}
	return nil
}

// addressText lists addresses, each with its end when it has one.
func addressText(as []control.ListedAddress) string {
	if len(as) == 0 {
		return "(none)"
	}
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = a.Address
		if a.Until != nil {
			parts[i] += " (until " + a.Until.UTC().Format(time.RFC3339) + ")"
		}
	}
	return strings.Join(parts, ", ")
}

// writeUserList prints user list's table.
func writeUserList(out io.Writer, us []control.ListedUser) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "USER\tTIER\tNODE\tSOURCE\tADDRESSES")
	for _, u := range us {
		node := u.Node
		if node == "" {
			node = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", u.Name, u.Tier, node, u.Source, addressText(u.Addresses))
	}
	return tw.Flush()
}
