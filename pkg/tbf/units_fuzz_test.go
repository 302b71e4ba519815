package tbf

import (
	"strings"
	"testing"
)

// FuzzParseRate: ParseRate never panics, accepts only the strict syntax
// (ASCII digits, one optional point, an ASCII unit; no sign or space), and
// what it accepts formats back to the same rate.
func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"10mbit", "1.5gbit", "125kbps", "8\u212abit", "8 bit", "+8bit", "0.00000095367431640625mibit", "34.4gbit", "1e3mbit"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err != nil {
			return
		}
		checkStrict(t, s)
		if back, err := ParseRate(r.String()); err != nil || back != r {
			t.Fatalf("ParseRate(%q) = %d; its String %q reads back as %d, %v", s, uint64(r), r.String(), uint64(back), err)
		}
	})
}

// FuzzParseSize is FuzzParseRate for sizes.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"1600", "64kb", "1.5m", "8kbit", "64 kb", "+64kb", "64\u212ab", "0.5b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSize(s)
		if err != nil {
			return
		}
		checkStrict(t, s)
		if back, err := ParseSize(v.String()); err != nil || back != v {
			t.Fatalf("ParseSize(%q) = %d; its String %q reads back as %d, %v", s, uint64(v), v.String(), uint64(back), err)
		}
	})
}

func checkStrict(t *testing.T, s string) {
	t.Helper()
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			t.Fatalf("accepted %q with a non-ASCII byte", s)
		}
	}
	if strings.ContainsAny(s, " \t\r\n\v\f+-") {
		t.Fatalf("accepted %q with a space or sign", s)
	}
}
