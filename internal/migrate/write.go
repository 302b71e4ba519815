package migrate

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// UsersTOML writes users as users.toml, header being its first comment
// lines.
func UsersTOML(header string, users []User) string {
	var b strings.Builder
	writeComment(&b, header)
	for _, u := range users {
		b.WriteString("\n")
		writeComment(&b, u.Comment)
		fmt.Fprintf(&b, "[[user]]\nname = %s\ntier = %s\n", tomlString(u.Name), tomlString(u.Tier))
		if u.Node != "" {
			fmt.Fprintf(&b, "node = %s\n", tomlString(u.Node))
		}
		b.WriteString("addresses = [")
		for i, a := range u.Addresses {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(tomlString(a))
		}
		b.WriteString("]\n")
		writeRates(&b, []string{"rate", "ceil", "upload_rate", "upload_ceil"}, u.Rate, u.Ceil, u.UploadRate, u.UploadCeil)
		if u.SQM.Leaf != "" {
			fmt.Fprintf(&b, "leaf_qdisc = %s\n", tomlString(u.SQM.Leaf))
		}
		if u.SQM.Diffserv != "" {
			fmt.Fprintf(&b, "leaf_diffserv = %s\n", tomlString(u.SQM.Diffserv))
		}
	}
	return b.String()
}

// TiersTOML writes tiers as [tiers.NAME] tables for shaperd.toml.
func TiersTOML(header string, tiers []Tier) string {
	var b strings.Builder
	writeComment(&b, header)
	for _, t := range tiers {
		fmt.Fprintf(&b, "\n[tiers.%s]\n", t.Name)
		writeRates(&b, []string{"rate", "ceil", "upload_rate", "upload_ceil"}, t.Rate, t.Ceil, t.UploadRate, t.UploadCeil)
	}
	return b.String()
}

// NetworkBlock is the text of the block an import with network.json
// writes into shaperd.toml (see SetBlock): header and a word on
// re-imports as comments, then tiers and nodes.
func NetworkBlock(header string, tiers []Tier, nodes []NetworkNode) string {
	var b strings.Builder
	writeComment(&b, header+"\nThe next import replaces everything down to the <<< line: change network.json and\n"+
		"ShapedDevices.csv and import again (or move a table out of here and out of network.json).")
	if len(tiers) > 0 {
		b.WriteString(TiersTOML("", tiers))
	}
	b.WriteString(NodesTOML("", nodes))
	return b.String()
}

// NodesTOML writes nodes as [nodes.NAME] tables for shaperd.toml, in
// their order (parents first): parent, rate, ceil, upload_rate and
// upload_ceil, all four written out. A node whose name is not its
// network.json name says the original in a comment on its table's line.
func NodesTOML(header string, nodes []NetworkNode) string {
	var b strings.Builder
	writeComment(&b, header)
	for _, n := range nodes {
		fmt.Fprintf(&b, "\n[nodes.%s]", n.Name)
		if n.Renamed() {
			fmt.Fprintf(&b, " # network.json: %s", tomlString(n.Original))
		}
		b.WriteString("\n")
		if n.Parent != "" {
			fmt.Fprintf(&b, "parent = %s\n", tomlString(n.Parent))
		}
		writeRates(&b, []string{"rate", "ceil", "upload_rate", "upload_ceil"}, n.Rate, n.Ceil, n.UploadRate, n.UploadCeil)
	}
	return b.String()
}

func writeRates(b *strings.Builder, keys []string, rs ...tbf.Rate) {
	for i, r := range rs {
		if r != 0 {
			fmt.Fprintf(b, "%s = %s\n", keys[i], tomlString(r.String()))
		}
	}
}

func writeComment(b *strings.Builder, text string) {
	for _, l := range strings.Split(text, "\n") {
		if l != "" {
			b.WriteString("# " + l + "\n")
		}
	}
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func itoa(n int) string { return strconv.Itoa(n) }

func quoteName(s string) string { return strconv.Quote(s) }
