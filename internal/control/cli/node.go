package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/shaperd/shaperd/internal/control"
)

// runNode is `shaperctl node add|remove|list ...`.
func runNode(ctx context.Context, c *control.Client, args []string, out io.Writer, _ Env) error {
	fs := newFlagSet("node")
	asJSON := fs.Bool("json", false, "")
	parent := fs.String("parent", "", "")
	var rate, ceil, upRate, upCeil rateFlag
	fs.Var(&rate, "rate", "")
	fs.Var(&ceil, "ceil", "")
	fs.Var(&upRate, "upload-rate", "")
	fs.Var(&upCeil, "upload-ceil", "")
	var ifaces addressList
	fs.Var(&ifaces, "interface", "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagError("node", err)
	}
	if len(pos) == 0 {
		return usagef("node", "expected a subcommand: add, remove or list")
	}
	op, pos := pos[0], pos[1:]
	addFlags := *parent != "" || rate.v != nil || ceil.v != nil || upRate.v != nil || upCeil.v != nil || len(ifaces) > 0
	switch op {
	case "list":
		if len(pos) != 0 || addFlags {
			return usagef("node", "node list takes only --json")
		}
		resp, err := c.Nodes(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(out, resp)
		}
		return writeNodeList(out, resp.Nodes)
	case control.NodeAdd, control.NodeRemove:
	default:
		return usagef("node", "unknown subcommand %q (want add, remove or list)", op)
	}
	if len(pos) != 1 {
		return usagef("node", "node %s: expected one NAME, got %s", op, plural(len(pos), "argument"))
	}
	req := control.NodeRequest{Op: op, Name: pos[0]}
	if op == control.NodeRemove {
		if addFlags {
			return usagef("node", "--parent, --rate, --ceil, --upload-rate, --upload-ceil and --interface go with node add only")
		}
	} else {
		if rate.v == nil {
			return usagef("node", "node add %s: --rate is required", req.Name)
		}
		req.Parent, req.Rate, req.Ceil, req.UploadRate, req.UploadCeil, req.Interfaces = *parent, rate.v, ceil.v, upRate.v, upCeil.v, ifaces
	}
	resp, err := c.ChangeNode(ctx, req)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(out, resp)
	}
	if resp.Node == nil {
		fmt.Fprintf(out, "%s: removed\n", resp.Name)
	} else {
		n := resp.Node
		fmt.Fprintf(out, "%s: at %s, download %s/%s, upload %s/%s, on %s\n", n.Name, n.Path,
			n.Rate, n.Ceil, n.UploadRate, n.UploadCeil, nodeInterfaces(n.Interfaces))
	}
	if resp.Note != "" {
		fmt.Fprintf(out, "note: %s\n", resp.Note)
	}
	return nil
}

// nodeInterfaces names a node's interfaces for text output.
func nodeInterfaces(in []string) string {
	if len(in) == 0 {
		return "every interface"
	}
	return strings.Join(in, ", ")
}

// writeNodeList prints node list's table.
func writeNodeList(out io.Writer, ns []control.ListedNode) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPATH\tRATE\tCEIL\tUPLOAD RATE\tUPLOAD CEIL\tINTERFACES\tSOURCE")
	for _, n := range ns {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, n.Path, n.Rate, n.Ceil, n.UploadRate, n.UploadCeil, nodeInterfaces(n.Interfaces), n.Source)
	}
	return tw.Flush()
}
