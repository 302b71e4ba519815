package tbf

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in   string
		want Rate
	}{
		// every rate unit of the configuration (and tc's binary ones)
		{"1bit", 1},
		{"8kbit", 8_000},
		{"10mbit", 10_000_000},
		{"1gbit", 1_000_000_000},
		{"2tbit", 2_000_000_000_000},
		{"1bps", 8}, // bps = bytes/s, as in tc
		{"125kbps", 1_000_000},
		{"1mbps", 8_000_000},
		{"1gbps", 8_000_000_000},
		{"1tbps", 8_000_000_000_000},
		{"1kibit", 1024},
		{"1mibit", 1 << 20},
		{"1gibit", 1 << 30},
		{"1tibit", 1 << 40},
		{"1kibps", 8 << 10},
		{"1mibps", 8 << 20},
		{"1gibps", 8 << 30},
		{"1tibps", 8 << 40},
		// case does not matter
		{"10MBIT", 10_000_000},
		{"10Mbit", 10_000_000},
		{"1KBps", 8_000},
		// decimals, kept exact
		{"1.5mbit", 1_500_000},
		{".5mbit", 500_000},
		{"5.mbit", 5_000_000},
		{"0.5bps", 4},
		{"34.4gbit", 34_400_000_000},
		{"1.50000000000000000000000mbit", 1_500_000}, // trailing zeros beyond 64 bits of digits
		// 64-bit rates (above 2^32 bits/s and above 2^32 bytes/s)
		{"40gbit", 40_000_000_000},
		{"100gbit", 100_000_000_000},
		{"34359738368bit", 1 << 35}, // 2^32 B/s
		{"18446744073709551615bit", math.MaxUint64},
		{"2305843009213693951bps", 2305843009213693951 * 8},
		// surrounding space and an explicit plus are accepted; so is a
		// space between number and unit (lenient for TOML strings)
		{"5MBIT", 5_000_000},
		{"0.00000095367431640625mibit", 1}, // exactly 1 bit: any exact decimal that is a whole number of bits
		{"1.000000000000000000000000000000mbit", 1_000_000},
		{"0bit", 0},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRate(tt.in)
			if err != nil {
				t.Fatalf("ParseRate(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseRate(%q) = %d, want %d", tt.in, uint64(got), uint64(tt.want))
			}
		})
	}
}

func TestParseRateErrors(t *testing.T) {
	tests := []struct {
		in       string
		contains string
		overflow bool
	}{
		{"", "empty", false},
		{"   ", "empty", false},
		{"mbit", "not a number", false},
		{".mbit", "not a number", false},
		{"10 mbits", `unknown unit "mbits"`, false},
		{"10 mbit", "spaces are not allowed", false},
		{" 5mbit", "spaces are not allowed", false},
		{"5mbit ", "spaces are not allowed", false},
		{"+5mbit", "sign", false},
		{"8\u212abit", "unknown unit", false}, // the Kelvin sign is not k
		{"8kbıt", "unknown unit", false},      // dotless i
		{"0.00000095367431640624mibit", "not a whole number", false},
		{"0.0000000000000000000000000000000000000000001mbit", "not a whole number", false},
		{"10mbits", `unknown unit "mbits"`, false},
		{"10mb", `unknown unit "mb"`, false}, // a size unit, not a rate
		{"-5mbit", "negative", false},
		{"1e3mbit", `unknown unit "e3mbit"`, false},
		{"1..5mbit", "unknown unit", false},
		{"100", "missing unit", false},
		{"1.5", "missing unit", false},
		{"0.5bit", "not a whole number", false},
		{"1.0000001kbit", "not a whole number", false},
		{"99999999tbit", "", true},
		{"18446744073709551616bit", "", true},
		{"2305843009213693952bps", "", true},
		{"99999999999999999999999mbit", "", true},
		{"1.00000000000000000000001mbit", "significant digits", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRate(tt.in)
			if err == nil {
				t.Fatalf("ParseRate(%q) = %d, want an error", tt.in, uint64(got))
			}
			if !strings.Contains(err.Error(), tt.contains) || !strings.Contains(err.Error(), `"`+tt.in+`"`) {
				t.Errorf("ParseRate(%q) error %q, want it to name the input and contain %q", tt.in, err, tt.contains)
			}
			if errors.Is(err, ErrOverflow) != tt.overflow {
				t.Errorf("ParseRate(%q) error %v: errors.Is(ErrOverflow) = %v, want %v", tt.in, err, !tt.overflow, tt.overflow)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want Size
	}{
		{"0", 0},
		{"1600", 1600}, // bare number = bytes
		{"1600b", 1600},
		{"1600B", 1600},
		{"1k", 1024},
		{"64kb", 65536},
		{"64KB", 65536},
		{"1m", 1 << 20},
		{"1mb", 1 << 20},
		{"1.5m", 1_572_864},
		{"1g", 1 << 30},
		{"16gb", 16 << 30},
		// tc's sizes in bits of 1024: kbit = 128 B, mbit = 131072 B, gbit = 2^27 B
		{"8kbit", 1024},
		{"1kbit", 128},
		{"1mbit", 131_072},
		{"1gbit", 1 << 27},
		{"0.5kb", 512},
		{"17179869183gb", 17179869183 << 30},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSize(tt.in)
			if err != nil {
				t.Fatalf("ParseSize(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseSize(%q) = %d, want %d", tt.in, uint64(got), uint64(tt.want))
			}
		})
	}
}

func TestParseSizeErrors(t *testing.T) {
	tests := []struct {
		in       string
		overflow bool
	}{
		{"", false}, {"kb", false}, {"-1", false}, {"-1kb", false},
		{"1e3", false}, {"1tb", false}, {"10 kbs", false}, {"1.5", false},
		{"1.5b", false}, {"0.1kbit", false}, // 12.8 bytes
		{"64 kb", false}, {"+64kb", false}, {" 64kb", false}, {"64\u212ab", false},
		{"17179869184gb", true}, {"18446744073709551616", true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSize(tt.in)
			if err == nil {
				t.Fatalf("ParseSize(%q) = %d, want an error", tt.in, uint64(got))
			}
			if errors.Is(err, ErrOverflow) != tt.overflow {
				t.Errorf("ParseSize(%q) error %v: overflow %v, want %v", tt.in, err, !tt.overflow, tt.overflow)
			}
		})
	}
}

func TestRateString(t *testing.T) {
	tests := []struct {
		r    Rate
		want string
	}{
		{0, "0bit"},
		{1, "1bit"},
		{999, "999bit"},
		{1500 * Kbit, "1500kbit"},
		{10 * Mbit, "10mbit"},
		{34400 * Mbit, "34400mbit"},
		{40 * Gbit, "40gbit"},
		{100 * Gbit, "100gbit"},
		{3 * Tbit, "3tbit"},
		{1 << 20, "1048576bit"}, // binary units are not used for output
		{math.MaxUint64, "18446744073709551615bit"},
	}
	for _, tt := range tests {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("Rate(%d).String() = %q, want %q", uint64(tt.r), got, tt.want)
		}
	}
}

func TestSizeString(t *testing.T) {
	tests := []struct {
		s    Size
		want string
	}{
		{0, "0b"}, {1600, "1600b"}, {1024, "1kb"}, {65536, "64kb"},
		{1 << 20, "1mb"}, {1_572_864, "1536kb"}, {16 << 30, "16gb"}, {1025, "1025b"},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("Size(%d).String() = %q, want %q", uint64(tt.s), got, tt.want)
		}
	}
}

// TestRoundTrip: String output parses back to the same value, through the
// TextMarshaler interfaces too.
func TestRoundTrip(t *testing.T) {
	rates := []Rate{0, 1, 7, 8, 999, Kbit, 1500 * Kbit, 10 * Mbit, 24224 * Kbit, 34_359_738_368, 34400 * Mbit, 40 * Gbit, 100 * Gbit, Tbit, math.MaxUint64}
	for _, r := range rates {
		b, err := r.MarshalText()
		if err != nil {
			t.Fatalf("MarshalText(%d): %v", uint64(r), err)
		}
		var back Rate
		if err := back.UnmarshalText(b); err != nil || back != r {
			t.Errorf("rate %d -> %q -> %d, %v", uint64(r), b, uint64(back), err)
		}
	}
	sizes := []Size{0, 1, 1514, 1600, 15140, 64 * Kibibyte, 1_572_864, Gibibyte, math.MaxUint64}
	for _, s := range sizes {
		b, err := s.MarshalText()
		if err != nil {
			t.Fatalf("MarshalText(%d): %v", uint64(s), err)
		}
		var back Size
		if err := back.UnmarshalText(b); err != nil || back != s {
			t.Errorf("size %d -> %q -> %d, %v", uint64(s), b, uint64(back), err)
		}
	}
	var r Rate
	if err := r.UnmarshalText([]byte("10 mbits")); err == nil {
		t.Errorf("UnmarshalText(10 mbits) = %d, want an error", uint64(r))
	}
	var s Size
	if err := s.UnmarshalText([]byte("1e3")); err == nil {
		t.Errorf("UnmarshalText(1e3) = %d, want an error", uint64(s))
	}
}

func TestBytesPerSecond(t *testing.T) {
	tests := []struct {
		r    Rate
		want uint64
	}{
		{1, 0}, {7, 0}, {8, 1}, {15, 1}, {10 * Mbit, 1_250_000},
		{100 * Gbit, 12_500_000_000}, {34_359_738_368, 1 << 32},
	}
	for _, tt := range tests {
		if got := tt.r.BytesPerSecond(); got != tt.want {
			t.Errorf("Rate(%d).BytesPerSecond() = %d, want %d", uint64(tt.r), got, tt.want)
		}
	}
	if got := RateFromBytes(1_250_000); got != 10*Mbit {
		t.Errorf("RateFromBytes(1250000) = %s, want 10mbit", got)
	}
	if got := RateFromBytes(math.MaxUint64/8 + 1); got != math.MaxUint64 {
		t.Errorf("RateFromBytes(2^61) = %d, want saturation at MaxUint64", uint64(got))
	}
}
