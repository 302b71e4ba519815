package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// MinRate is the smallest rate accepted anywhere: the kernel works in whole
// bytes per second.
const MinRate = 8 * tbf.Bit

// file is one parsed TOML file: its name for messages, where its keys are,
// and the collector its errors go to.
type file struct {
	name string
	pos  *positions
	c    *collector
}

// at returns the position of path, or of its nearest ancestor that has one.
func (f *file) at(path string) pos {
	for path != "" {
		if p, ok := f.pos.lookup(path); ok {
			return p
		}
		cut := max(strings.LastIndexByte(path, '.'), strings.LastIndexByte(path, '['))
		if cut < 0 {
			break
		}
		path = path[:cut]
	}
	return pos{1, 1}
}

// errf reports a problem with the key at path.
func (f *file) errf(path, format string, args ...any) {
	p := f.at(path)
	f.c.add(Error{File: f.name, Line: p.Line, Col: p.Col, Key: path, Msg: fmt.Sprintf(format, args...)})
}

// notef reports a remark on the valid key at path (Plan.Notes).
func (f *file) notef(path, format string, args ...any) {
	p := f.at(path)
	f.c.note(Error{File: f.name, Line: p.Line, Col: p.Col, Key: path, Msg: fmt.Sprintf(format, args...)})
}

// where formats the position of path for messages that name a second place.
func (f *file) where(path string) string {
	p := f.at(path)
	return fmt.Sprintf("%s:%d:%d", f.name, p.Line, p.Col)
}

// table reads the keys of one TOML table, reporting every problem.
type table struct {
	f       *file
	path    string
	m       map[string]any
	allowed []string
}

func (f *file) table(path string, m map[string]any) *table {
	return &table{f: f, path: path, m: m}
}

func (t *table) key(k string) string { return join(t.path, k) }

func (t *table) errf(k, format string, args ...any) { t.f.errf(t.key(k), format, args...) }

// has reports whether key k is set.
func (t *table) has(k string) bool { _, ok := t.m[k]; return ok }

// allow declares keys the table may hold.
func (t *table) allow(keys ...string) { t.allowed = append(t.allowed, keys...) }

// finish reports keys that were not allowed, in file order, and drops the
// list of allowed keys.
func (t *table) finish() {
	var unknown []string
	for k := range t.m {
		if !slices.Contains(t.allowed, k) {
			unknown = append(unknown, k)
		}
	}
	defer func() { t.allowed = nil }()
	if len(unknown) == 0 {
		return
	}
	slices.SortFunc(unknown, func(a, b string) int {
		pa, pb := t.f.at(t.key(a)), t.f.at(t.key(b))
		if pa.Line != pb.Line {
			return pa.Line - pb.Line
		}
		return pa.Col - pb.Col
	})
	known := slices.Clone(t.allowed)
	slices.Sort(known)
	for _, k := range unknown {
		if near := nearest(k, known); near != "" {
			t.errf(k, "unknown key; did you mean %q?", near)
		} else {
			t.errf(k, "unknown key (allowed here: %s)", strings.Join(known, ", "))
		}
	}
}

// require reports each key of keys that is missing, at the table's position.
func (t *table) require(keys ...string) bool {
	ok := true
	for _, k := range keys {
		if !t.has(k) {
			t.f.errf(t.key(k), "missing required key %q", k)
			ok = false
		}
	}
	return ok
}

// typeName names the TOML type of a decoded value.
func typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case time.Time:
		return "a date-time"
	case map[string]any:
		return "a table"
	case []map[string]any:
		return "an array of tables"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("a %T", v)
}

// str returns the string at k; ok is false when k is missing or not a string.
func (t *table) str(k string) (string, bool) {
	t.allow(k)
	v, ok := t.m[k]
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		t.errf(k, "must be a string, not %s", typeName(v))
	}
	return s, ok
}

// boolean returns the boolean at k; ok is false when k is missing or not
// a boolean.
func (t *table) boolean(k string) (bool, bool) {
	t.allow(k)
	v, ok := t.m[k]
	if !ok {
		return false, false
	}
	b, ok := v.(bool)
	if !ok {
		t.errf(k, "must be true or false, not %s", typeName(v))
	}
	return b, ok
}

// typed returns the string at k like str, naming what the string should
// hold when it is of another type.
func (t *table) typed(k, what string) (string, bool) {
	t.allow(k)
	v, ok := t.m[k]
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		t.errf(k, "must be %s (a string), not %s", what, typeName(v))
	}
	return s, ok
}

// rate returns the rate at k (at least MinRate).
func (t *table) rate(k string) (tbf.Rate, bool) {
	s, ok := t.typed(k, `a rate such as "10mbit"`)
	if !ok {
		return 0, false
	}
	r, err := tbf.ParseRate(s)
	if err != nil {
		t.errf(k, "%v", err)
		return 0, false
	}
	if r < MinRate {
		t.errf(k, "rate %s is below the minimum 8bit (1 byte/s)", s)
		return 0, false
	}
	if bits, ok := bytesUnit(s); ok {
		t.f.notef(t.key(k), "rate %q is %s: in tc's units %s counts bytes per second; %s counts bits (write %q if %s was meant)",
			s, r, s[len(s)-len(bits.bytes):], bits.bits, bits.written, bits.written)
	}
	return r, true
}

// byteRate is a rate written in a bytes-per-second unit ("mbps"), with
// the bits unit of the same prefix ("mbit") and the rate written in it.
type byteRate struct{ bytes, bits, written string }

// bytesUnit reports whether rate text s uses a bytes-per-second unit
// (bps, kbps, mbps, ..., any case), which people often mean as bits.
func bytesUnit(s string) (byteRate, bool) {
	t := strings.TrimSpace(s)
	if len(t) < 3 || !strings.EqualFold(t[len(t)-3:], "bps") {
		return byteRate{}, false
	}
	num := strings.TrimRight(t[:len(t)-3], "kKmMgGtTiI")
	prefix := t[len(num) : len(t)-3]
	return byteRate{bytes: prefix + t[len(t)-3:], bits: strings.ToLower(prefix) + "bit",
		written: strings.TrimSpace(num) + strings.ToLower(prefix) + "bit"}, true
}

// size returns the size at k: a tc size string or an integer of bytes.
func (t *table) size(k string) (tbf.Size, bool) {
	t.allow(k)
	v, ok := t.m[k]
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case int64:
		if x < 0 {
			t.errf(k, "size %d is negative", x)
			return 0, false
		}
		return tbf.Size(x), true
	case string:
		n, err := tbf.ParseSize(x)
		if err != nil {
			t.errf(k, "%v", err)
			return 0, false
		}
		return n, true
	}
	t.errf(k, "must be a size (a string such as \"64kb\" or an integer of bytes), not %s", typeName(v))
	return 0, false
}

// duration returns the Go duration at k, which must be at least lo.
func (t *table) duration(k string, lo time.Duration) (time.Duration, bool) {
	s, ok := t.typed(k, `a duration such as "2s"`)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.errf(k, "%q is not a duration (use Go syntax such as \"250ms\", \"2s\", \"1m30s\")", s)
		return 0, false
	}
	if d < lo {
		t.errf(k, "duration %s is below the minimum %s", s, lo)
		return 0, false
	}
	return d, true
}

// integer returns the integer at k, within [lo, hi].
func (t *table) integer(k string, lo, hi int64) (int64, bool) {
	t.allow(k)
	v, ok := t.m[k]
	if !ok {
		return 0, false
	}
	n, ok := v.(int64)
	if !ok {
		t.errf(k, "must be an integer, not %s", typeName(v))
		return 0, false
	}
	if n < lo || n > hi {
		t.errf(k, "%d is out of range [%d, %d]", n, lo, hi)
		return 0, false
	}
	return n, true
}

// enum returns the string at k, which must be one of allowed.
func (t *table) enum(k string, allowed ...string) (string, bool) {
	s, ok := t.str(k)
	if !ok {
		return "", false
	}
	if !slices.Contains(allowed, s) {
		t.errf(k, "%q is not one of %s", s, strings.Join(allowed, ", "))
		return "", false
	}
	return s, true
}

// element is one string of an array with its index in the array.
type element struct {
	i int
	s string
}

// strs returns the array of strings at k; elements of other types are
// reported and left out.
func (t *table) strs(k string) ([]element, bool) {
	t.allow(k)
	v, ok := t.m[k]
	if !ok {
		return nil, false
	}
	arr, ok := v.([]any)
	if !ok {
		t.errf(k, "must be an array of strings, not %s", typeName(v))
		return nil, false
	}
	out := make([]element, 0, len(arr))
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			t.f.errf(index(t.key(k), i), "must be a string, not %s", typeName(e))
			continue
		}
		out = append(out, element{i, s})
	}
	return out, true
}

// sub returns the table at k.
func (t *table) sub(k string) (*table, bool) {
	t.allow(k)
	v, ok := t.m[k]
	if !ok {
		return nil, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.errf(k, "must be a table, not %s", typeName(v))
		return nil, false
	}
	return t.f.table(t.key(k), m), true
}

// tables returns the array of tables at k.
func (t *table) tables(k string) ([]*table, bool) {
	t.allow(k)
	v, ok := t.m[k]
	if !ok {
		return nil, false
	}
	var out []*table
	switch x := v.(type) {
	case []map[string]any:
		for i, m := range x {
			out = append(out, t.f.table(index(t.key(k), i), m))
		}
	case []any:
		for i, e := range x {
			m, ok := e.(map[string]any)
			if !ok {
				t.f.errf(index(t.key(k), i), "must be a table, not %s", typeName(e))
				continue
			}
			out = append(out, t.f.table(index(t.key(k), i), m))
		}
	default:
		t.errf(k, "must be an array of tables ([[%s]]), not %s", k, typeName(v))
		return nil, false
	}
	return out, true
}
