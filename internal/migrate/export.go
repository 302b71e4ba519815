package migrate

import (
	"encoding/csv"
	"encoding/json"
	"net/netip"
	"strconv"
	"strings"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// libreqosHeader is ShapedDevices.csv's header row as LibreQoS writes it.
var libreqosHeader = []string{"Circuit ID", "Circuit Name", "Device ID", "Device Name", "Parent Node", "MAC", "IPv4", "IPv6",
	"Download Min Mbps", "Upload Min Mbps", "Download Max Mbps", "Upload Max Mbps", "Comment"}

// ShapedDevices writes plan's users as LibreQoS's ShapedDevices.csv,
// header being its first comment lines: one circuit of one device per
// user (Circuit ID, Circuit Name, Device ID and Device Name are the user's
// name), the user's node as Parent Node (empty for none), its IPv4 and
// IPv6 addresses (a single address without /32 or /128) and its rates in
// Mbit/s: rate and ceil as Download Min and Max, upload_rate and
// upload_ceil as Upload Min and Max, the tier's with the user's own in
// their place. Comment names the tier. Schedules, quotas, priorities and
// leaf settings have no column in LibreQoS and are left out.
func ShapedDevices(header string, plan *config.Plan) (string, error) {
	var b strings.Builder
	writeComment(&b, header)
	w := csv.NewWriter(&b)
	if err := w.Write(libreqosHeader); err != nil {
		return "", err
	}
	for i := range plan.Users {
		u := &plan.Users[i]
		var v4, v6 []string
		for _, p := range u.Prefixes {
			s := addrString(p)
			if p.Addr().Is4() {
				v4 = append(v4, s)
			} else {
				v6 = append(v6, s)
			}
		}
		var dmin, dmax, umin, umax tbf.Rate
		if t, ok := plan.Tier(u.Tier); ok {
			dmin, dmax = ownRates(t.Rate, t.Ceil, u.Rate, u.Ceil)
			umin, umax = ownRates(t.UploadRate, t.UploadCeil, u.UploadRate, u.UploadCeil)
		}
		row := []string{u.Name, u.Name, u.Name, u.Name, u.Node, "", strings.Join(v4, ", "), strings.Join(v6, ", "),
			Mbps(dmin), Mbps(umin), Mbps(dmax), Mbps(umax), "tier " + u.Tier}
		if err := w.Write(row); err != nil {
			return "", err
		}
	}
	w.Flush()
	return b.String(), w.Error()
}

// ownRates applies a user's own rate and ceil (0: unset) to its tier's,
// as config.User documents: a rate without its ceil keeps the tier's ceil
// (or the rate, when higher); a ceil without its rate keeps the tier's
// rate (or the ceil, when lower).
func ownRates(tierRate, tierCeil, rate, ceil tbf.Rate) (tbf.Rate, tbf.Rate) {
	switch {
	case rate != 0 && ceil != 0:
		return rate, ceil
	case rate != 0:
		return rate, max(rate, tierCeil)
	case ceil != 0:
		return min(tierRate, ceil), ceil
	}
	return tierRate, tierCeil
}

// Mbps writes a rate in Mbit/s as LibreQoS takes it: "100", "2.5".
func Mbps(r tbf.Rate) string {
	return strconv.FormatFloat(float64(r)/1e6, 'f', -1, 64)
}

// NetworkJSON writes plan's nodes as LibreQoS's network.json: nested by
// parent (children in name order), each with downloadBandwidthMbps and
// uploadBandwidthMbps from its ceil and upload_ceil (the capacity LibreQoS
// holds a node to), and downloadBandwidthMbpsMin and
// uploadBandwidthMbpsMin from its rate and upload_rate where they are
// below. A plan without nodes is "{}", LibreQoS's flat network. Schedules
// and interfaces of nodes have no place in it and are left out.
func NetworkJSON(plan *config.Plan) string {
	children := map[string][]*config.Node{}
	for i := range plan.Nodes { // parents first, then by name
		n := &plan.Nodes[i]
		children[n.Parent] = append(children[n.Parent], n)
	}
	var b strings.Builder
	writeNodes(&b, children, "", "")
	b.WriteString("\n")
	return b.String()
}

// writeNodes writes the nodes under parent as a JSON object, indent being
// the indentation of its braces.
func writeNodes(b *strings.Builder, children map[string][]*config.Node, parent, indent string) {
	kids := children[parent]
	if len(kids) == 0 {
		b.WriteString("{}")
		return
	}
	b.WriteString("{\n")
	in := indent + "  "
	for i, n := range kids {
		name, _ := json.Marshal(n.Name)
		b.WriteString(in + string(name) + ": {\n")
		fields := []string{
			`"downloadBandwidthMbps": ` + Mbps(n.Ceil),
			`"uploadBandwidthMbps": ` + Mbps(n.UploadCeil),
		}
		if n.Rate < n.Ceil {
			fields = append(fields, `"downloadBandwidthMbpsMin": `+Mbps(n.Rate))
		}
		if n.UploadRate < n.UploadCeil {
			fields = append(fields, `"uploadBandwidthMbpsMin": `+Mbps(n.UploadRate))
		}
		b.WriteString(in + "  " + strings.Join(fields, ",\n"+in+"  "))
		if len(children[n.Name]) > 0 {
			b.WriteString(",\n" + in + `  "children": `)
			writeNodes(b, children, n.Name, in+"  ")
		}
		b.WriteString("\n" + in + "}")
		if i < len(kids)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString(indent + "}")
}

// addrString is a prefix as ShapedDevices.csv writes it: a single address
// without its /32 or /128.
func addrString(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}
