package migrate

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// Circuit is one LibreQoS circuit: the devices (rows) sharing a Circuit
// ID, shaped together. It becomes one shaperd user.
type Circuit struct {
	ID, Name string
	// Devices are the device IDs of its rows.
	Devices []string
	// Addresses are the IPv4 and IPv6 prefixes of all its devices.
	Addresses []string
	// DownMin/DownMax and UpMin/UpMax are the download and upload minimum
	// (guaranteed) and maximum rates.
	DownMin, UpMin, DownMax, UpMax tbf.Rate
	// ParentNode is the Parent Node of its first row: the network.json
	// node it is behind; "" for none (an empty cell or "none").
	ParentNode string
	// SQM is its sqm cell as leaf queue keys (zero: none given).
	SQM SQM
	// Line is the line of its first row.
	Line int

	// parentConflict is the first row of the circuit naming another
	// Parent Node than the first, if any (an error only where the
	// hierarchy is imported: see AssignNodes).
	parentConflict *parentRow
}

// parentRow is a row's Parent Node.
type parentRow struct {
	name string
	line int
}

// The columns of ShapedDevices.csv that shaperd reads (LibreQoS's header
// names; others, such as MAC and Comment, are ignored). Parent Node and
// sqm may be missing: every circuit then has none.
const (
	colCircuitID   = "circuit id"
	colCircuitName = "circuit name"
	colDeviceID    = "device id"
	colDeviceName  = "device name"
	colParentNode  = "parent node"
	colIPv4        = "ipv4"
	colIPv6        = "ipv6"
	colDownMin     = "download min mbps"
	colUpMin       = "upload min mbps"
	colDownMax     = "download max mbps"
	colUpMax       = "upload max mbps"
)

var requiredColumns = []string{colCircuitID, colCircuitName, colDeviceID, colIPv4, colIPv6, colDownMin, colUpMin, colDownMax, colUpMax}

// ReadLibreQoS reads LibreQoS's ShapedDevices.csv (file names it in
// errors): a header row naming the columns, then one row per device; lines
// starting with '#' are comments. Devices with the same Circuit ID form one
// circuit; a device without one is a circuit of its own. Rates are in
// Mbit/s and may have decimals ("2.5"). It returns the circuits in file
// order, or every problem found, each naming its line.
func ReadLibreQoS(r io.Reader, file string) ([]Circuit, []error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1 // LibreQoS's own example has rows with extra commas in Comment
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, []error{lineErr(file, 0, "empty: no header row")}
		}
		return nil, []error{csvError(file, err)}
	}
	hline, _ := cr.FieldPos(0)
	col := map[string]int{}
	for i, h := range header {
		col[strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))] = i
	}
	var errs []error
	for _, c := range requiredColumns {
		if _, ok := col[c]; !ok {
			errs = append(errs, lineErr(file, hline, "no column %q in the header (is this LibreQoS's ShapedDevices.csv?)", c))
		}
	}
	if errs != nil {
		return nil, errs
	}
	// A row must reach the last required column; a shorter one was cut
	// off (one error naming the row, not one per missing value).
	need := 0
	for _, c := range requiredColumns {
		need = max(need, col[c]+1)
	}
	var circuits []Circuit
	byID := map[string]int{}       // circuit ID -> index in circuits
	seen := map[netip.Prefix]int{} // address -> line of its first row
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs = append(errs, csvError(file, err))
			var pe *csv.ParseError
			if errors.As(err, &pe) && pe.Err == csv.ErrFieldCount {
				continue
			}
			break // the reader cannot go on after a quoting error
		}
		line, _ := cr.FieldPos(0)
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if len(rec) < need {
			errs = append(errs, lineErr(file, line, "the row has %d columns, the header %d: it stops before %q (a row cut short?)",
				len(rec), len(header), header[len(rec)]))
			continue
		}
		field := func(c string) string {
			if i, ok := col[c]; ok && i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		var rowErrs []string
		bad := func(format string, args ...any) { rowErrs = append(rowErrs, fmt.Sprintf(format, args...)) }
		c := Circuit{ID: field(colCircuitID), Name: field(colCircuitName), ParentNode: field(colParentNode), Line: line}
		if strings.EqualFold(c.ParentNode, "none") {
			c.ParentNode = ""
		}
		if q, err := parseSQM(field(colSQM)); err != nil {
			bad("%s: %v", header[col[colSQM]], err)
		} else {
			c.SQM = q
		}
		dev := field(colDeviceID)
		if dev == "" {
			bad("Device ID is empty")
		}
		c.Devices = []string{dev}
		rates := []*tbf.Rate{&c.DownMin, &c.UpMin, &c.DownMax, &c.UpMax}
		for k, name := range []string{colDownMin, colUpMin, colDownMax, colUpMax} {
			r, err := parseMbps(field(name))
			if err != nil {
				bad("%s: %v", header[col[name]], err)
			}
			*rates[k] = r
		}
		if c.DownMin > 0 && c.DownMax > 0 && c.DownMin > c.DownMax {
			bad("Download Min Mbps %s is above Download Max Mbps %s", field(colDownMin), field(colDownMax))
		}
		if c.UpMin > 0 && c.UpMax > 0 && c.UpMin > c.UpMax {
			bad("Upload Min Mbps %s is above Upload Max Mbps %s", field(colUpMin), field(colUpMax))
		}
		for _, fam := range []struct {
			col string
			v4  bool
		}{{colIPv4, true}, {colIPv6, false}} {
			for _, a := range splitList(field(fam.col)) {
				p, err := parseAddress(a)
				switch {
				case err != nil:
					bad("%s: %v", header[col[fam.col]], err)
				case p.Addr().Is4() != fam.v4:
					bad("%s: %s is not an %s address", header[col[fam.col]], a, header[col[fam.col]])
				case seen[p] != 0:
					bad("address %s is already on line %d", p, seen[p])
				default:
					seen[p] = line
					c.Addresses = append(c.Addresses, p.String())
				}
			}
		}
		if field(colIPv4) == "" && field(colIPv6) == "" {
			bad("the device has no IPv4 or IPv6 address")
		}
		if c.ID == "" {
			c.ID = "device-" + dev // a device without a circuit is its own
			if c.Name == "" {
				c.Name = field(colDeviceName)
			}
		}
		if i, ok := byID[c.ID]; ok && len(rowErrs) == 0 {
			first := &circuits[i]
			if first.DownMin != c.DownMin || first.UpMin != c.UpMin || first.DownMax != c.DownMax || first.UpMax != c.UpMax {
				bad("circuit %s has other rates on line %d; a circuit's devices share one set of rates", c.ID, first.Line)
			} else if c.SQM != first.SQM {
				bad("circuit %s has another sqm on line %d; a circuit's devices share one queue", c.ID, first.Line)
			} else {
				first.Devices = append(first.Devices, dev)
				first.Addresses = append(first.Addresses, c.Addresses...)
				if c.ParentNode != first.ParentNode && first.parentConflict == nil {
					first.parentConflict = &parentRow{name: c.ParentNode, line: line}
				}
			}
		} else if len(rowErrs) == 0 {
			byID[c.ID] = len(circuits)
			circuits = append(circuits, c)
		}
		for _, m := range rowErrs {
			errs = append(errs, lineErr(file, line, "%s", m))
		}
	}
	if errs == nil && len(circuits) == 0 {
		errs = append(errs, lineErr(file, 0, "no devices"))
	}
	if errs != nil {
		return nil, errs
	}
	return circuits, nil
}

// parseMbps reads a rate in Mbit/s ("100", "2.5") as an exact rate.
func parseMbps(s string) (tbf.Rate, error) {
	if s == "" {
		return 0, errors.New("empty")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a number of Mbit/s", s)
	}
	bits := math.Round(v * 1e6)
	if bits < 8 {
		return 0, fmt.Errorf("%s Mbit/s is below the minimum 8bit", s)
	}
	if bits > 1e15 {
		return 0, fmt.Errorf("%s Mbit/s is too large", s)
	}
	return tbf.Rate(bits), nil
}

func csvError(file string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return lineErr(file, pe.Line, "%v", pe.Err)
	}
	return lineErr(file, 0, "%v", err)
}

// CircuitUsers turns circuits into users of the tiers tierOf gives each
// (the user's rates are set where tierOf says the tier's differ). Names
// come from the Circuit Name (made to follow the name rule), else the
// Circuit ID; a name taken already gets the circuit ID appended.
func CircuitUsers(circuits []Circuit, tierOf func(Circuit) User) []User {
	taken := map[string]bool{}
	users := make([]User, 0, len(circuits))
	for _, c := range circuits {
		u := tierOf(c)
		u.Name = uniqueName(c, taken)
		u.Addresses = slices.Clone(c.Addresses)
		u.Line = c.Line
		u.SQM = c.SQM
		u.Comment = fmt.Sprintf("circuit %s %q, device %s", c.ID, c.Name, strings.Join(c.Devices, ", "))
		users = append(users, u)
	}
	return users
}

func uniqueName(c Circuit, taken map[string]bool) string {
	id := sanitize(c.ID)
	base := sanitize(c.Name)
	if base == "" {
		base = sanitize("circuit-" + c.ID)
	}
	name := base
	if taken[name] {
		name = sanitize(base[:min(len(base), 63-len(id))] + "-" + id)
	}
	for n := 2; taken[name]; n++ {
		suffix := "-" + strconv.Itoa(n)
		name = sanitize(base[:min(len(base), 64-len(suffix))] + suffix)
	}
	taken[name] = true
	return name
}
