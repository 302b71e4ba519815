package migrate

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// User is one [[user]] of users.toml.
type User struct {
	Name, Tier string
	// Node is the [nodes.NAME] the user is behind; "" for none.
	Node string
	// Addresses are prefixes as users.toml takes them ("198.18.1.10/32").
	Addresses []string
	// Rate, Ceil, UploadRate and UploadCeil override the tier's; 0: unset.
	Rate, Ceil, UploadRate, UploadCeil tbf.Rate
	// SQM is the user's own leaf queue (leaf_qdisc, leaf_diffserv);
	// zero: the tier's or the interface's.
	SQM SQM
	// Comment is written above the entry (one line); empty: none.
	Comment string
	// Line is where the user comes from in the source (its first row).
	Line int
}

// Tier is one [tiers.NAME] to write.
type Tier struct {
	Name                               string
	Rate, Ceil, UploadRate, UploadCeil tbf.Rate
	// Line is the first source row using the tier.
	Line int
}

// LineError is a problem with one line of a source file.
type LineError struct {
	File string
	Line int // 0: the file as a whole
	Msg  string
}

func (e *LineError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

func lineErr(file string, line int, format string, args ...any) *LineError {
	return &LineError{File: file, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// parseAddress reads one address or prefix; a bare address is a /32 or
// /128. Host bits are an error naming the prefix meant, as shaperd's
// configuration refuses them too.
func parseAddress(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not an IP address or prefix", s)
		}
		if a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q: zones are not allowed", s)
		}
		return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an IP address or prefix", s)
	}
	if m := p.Masked(); m != p {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set (the prefix is %s)", s, m)
	}
	return p, nil
}

// splitList splits a list field: addresses separated by commas, semicolons
// or white space.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ';' || r == ' ' || r == '\t'
	})
}

// sanitize makes a name following config.NameRule from free text: lower
// case, every run of other characters a '-', at most 64 bytes; "" when
// nothing is left.
func sanitize(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	out := b.String()
	if len(out) > 64 {
		out = strings.TrimRight(out[:64], "-")
	}
	return out
}
