package migrate

import (
	"encoding/csv"
	"errors"
	"io"
	"strings"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// plainColumns are the columns of a plain CSV, in their default order.
var plainColumns = []string{"name", "tier", "addresses", "rate", "ceil", "upload_rate", "upload_ceil"}

// ReadCSV reads a plain CSV of users (file names it in errors): one user a
// row, name,tier,addresses[,rate,ceil,upload_rate,upload_ceil]; addresses
// separated by spaces or semicolons (or commas inside a quoted field);
// rates in tc's units, empty for the tier's. A first row naming the
// columns (as `shaperctl export --format csv` writes) may reorder them;
// other columns of such a header are ignored. Lines starting with '#' are
// comments. It returns the users, or every problem found, each naming its
// line.
func ReadCSV(r io.Reader, file string) ([]User, []error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	col := map[string]int{}
	for i, c := range plainColumns {
		col[c] = i
	}
	var users []User
	var errs []error
	names := map[string]int{}
	first := true
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs = append(errs, csvError(file, err))
			break
		}
		line, _ := cr.FieldPos(0)
		if first {
			first = false
			if strings.EqualFold(strings.TrimSpace(strings.TrimPrefix(rec[0], "\ufeff")), "name") {
				col = map[string]int{}
				for i, h := range rec {
					col[strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))] = i
				}
				for _, c := range plainColumns[:3] {
					if _, ok := col[c]; !ok {
						errs = append(errs, lineErr(file, line, "the header has no column %q", c))
					}
				}
				if errs != nil {
					return nil, errs
				}
				continue
			}
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		field := func(c string) string {
			if i, ok := col[c]; ok && i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		var rowErrs []string
		u := User{Name: field("name"), Tier: field("tier"), Line: line}
		switch {
		case u.Name == "":
			rowErrs = append(rowErrs, "no name")
		case !config.ValidName(u.Name):
			rowErrs = append(rowErrs, "name "+quoteName(u.Name)+": use "+config.NameRule)
		case names[u.Name] != 0:
			rowErrs = append(rowErrs, "user "+u.Name+" is already on line "+itoa(names[u.Name]))
		default:
			names[u.Name] = line
		}
		if u.Tier == "" {
			rowErrs = append(rowErrs, "no tier")
		}
		for _, a := range splitList(field("addresses")) {
			p, err := parseAddress(a)
			if err != nil {
				rowErrs = append(rowErrs, err.Error())
				continue
			}
			u.Addresses = append(u.Addresses, p.String())
		}
		if field("addresses") == "" {
			rowErrs = append(rowErrs, "no addresses")
		}
		for _, rc := range []struct {
			col string
			v   *tbf.Rate
		}{{"rate", &u.Rate}, {"ceil", &u.Ceil}, {"upload_rate", &u.UploadRate}, {"upload_ceil", &u.UploadCeil}} {
			if s := field(rc.col); s != "" {
				r, err := tbf.ParseRate(s)
				if err != nil {
					rowErrs = append(rowErrs, rc.col+": "+err.Error())
				}
				*rc.v = r
			}
		}
		for _, m := range rowErrs {
			errs = append(errs, lineErr(file, line, "%s", m))
		}
		if rowErrs == nil {
			users = append(users, u)
		}
	}
	if errs == nil && len(users) == 0 {
		errs = append(errs, lineErr(file, 0, "no users"))
	}
	if errs != nil {
		return nil, errs
	}
	return users, nil
}
