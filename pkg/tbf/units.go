package tbf

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"strings"
)

// Rate is a data rate in bits per second, as tc writes rates ("10mbit").
// It is 64-bit throughout: rates above 2^32 bytes/s (~34.4 Gbit/s) are valid.
// The kernel works in bytes per second; see BytesPerSecond.
type Rate uint64

// Size is an amount of data in bytes, as tc writes sizes ("64kb" = 65536 bytes).
type Size uint64

// Common rates.
const (
	Bit  Rate = 1
	Kbit Rate = 1000 * Bit
	Mbit Rate = 1000 * Kbit
	Gbit Rate = 1000 * Mbit
	Tbit Rate = 1000 * Gbit
)

// Common sizes (1024-based, as tc counts them).
const (
	Byte     Size = 1
	Kibibyte Size = 1024 * Byte
	Mebibyte Size = 1024 * Kibibyte
	Gibibyte Size = 1024 * Mebibyte
)

// BytesPerSecond is the rate in bytes per second, rounded down, as tc hands
// it to the kernel (1 bit/s becomes 0 bytes/s).
func (r Rate) BytesPerSecond() uint64 { return uint64(r) / 8 }

// RateFromBytes returns the rate of n bytes per second. Above 2^61-1 B/s
// the bit rate does not fit in 64 bits and saturates at the largest Rate.
func RateFromBytes(n uint64) Rate {
	if n > math.MaxUint64/8 {
		return Rate(math.MaxUint64)
	}
	return Rate(n * 8)
}

// unit is one suffix with its scale in the base unit (bits for rates, bytes
// for sizes).
type unit struct {
	name  string
	scale uint64
}

// rateUnits are tc's rate suffixes (iproute2 tc_util.c), matched without
// regard to ASCII case, so "bps" means bytes per second as in tc.
var rateUnits = []unit{
	{"bit", 1},
	{"kibit", 1 << 10}, {"kbit", 1e3},
	{"mibit", 1 << 20}, {"mbit", 1e6},
	{"gibit", 1 << 30}, {"gbit", 1e9},
	{"tibit", 1 << 40}, {"tbit", 1e12},
	{"bps", 8},
	{"kibps", 8 << 10}, {"kbps", 8e3},
	{"mibps", 8 << 20}, {"mbps", 8e6},
	{"gibps", 8 << 30}, {"gbps", 8e9},
	{"tibps", 8 << 40}, {"tbps", 8e12},
}

// sizeUnits are tc's size suffixes: 1024-based bytes, and "kbit"-style sizes
// in bits of 1024.
var sizeUnits = []unit{
	{"b", 1},
	{"k", 1 << 10}, {"kb", 1 << 10},
	{"m", 1 << 20}, {"mb", 1 << 20},
	{"g", 1 << 30}, {"gb", 1 << 30},
}

// sizeBitUnits are the sizes tc also accepts in bits ("kbit" = 128 bytes).
var sizeBitUnits = []unit{
	{"kbit", 1 << 10}, {"mbit", 1 << 20}, {"gbit", 1 << 30},
}

// ErrOverflow is returned (wrapped) when a value does not fit in 64 bits.
var ErrOverflow = errors.New("value does not fit in 64 bits")

// ParseRate parses a tc-style rate such as "10mbit", "1.5gbit", "125kbps"
// (bytes/s) or "34.4gbit". A unit is required.
//
// The syntax is strict: digits with at most one decimal point, then the
// unit, nothing else: no sign ("+8bit"), no spaces ("8 bit", " 8bit"), no
// exponent. Units are ASCII and matched without regard to ASCII case only
// ("8KBIT" is 8kbit; "8Kbit", with the Kelvin sign, is refused).
//
// The number is read as an exact decimal, so any number of decimal places
// is accepted as long as the result is a whole number of bits per second
// that fits in 64 bits: "0.00000095367431640625mibit" is exactly 1 bit,
// while "1.5bit" is refused. At most about 19 significant digits are
// kept (trailing fractional zeros do not count).
func ParseRate(s string) (Rate, error) {
	num, suffix, err := splitNumber(s)
	if err != nil {
		return 0, fmt.Errorf("rate %q: %w", s, err)
	}
	if suffix == "" {
		return 0, fmt.Errorf("rate %q: missing unit (use bit, kbit, mbit, gbit, tbit, or bps, kbps, mbps, gbps for bytes/s)", s)
	}
	u, ok := lookupUnit(rateUnits, suffix)
	if !ok {
		if spaced(suffix, rateUnits) {
			return 0, fmt.Errorf("rate %q: %w", s, errSpaces)
		}
		return 0, fmt.Errorf("rate %q: unknown unit %q (use bit, kbit, mbit, gbit, tbit, or bps, kbps, mbps, gbps for bytes/s)", s, strings.TrimSpace(suffix))
	}
	v, err := num.scale(u.scale, 1)
	if err != nil {
		return 0, fmt.Errorf("rate %q: %w", s, err)
	}
	return Rate(v), nil
}

// ParseSize parses a tc-style size such as "1600", "1600b", "64kb", "1.5m"
// or "8kbit" (1024 bytes). A bare number is bytes. Units are 1024-based, as in tc.
// The syntax and the decimal rule are ParseRate's: no sign or spaces, ASCII
// units in any ASCII case, and any exact decimal whose value is a whole
// number of bytes.
func ParseSize(s string) (Size, error) {
	num, suffix, err := splitNumber(s)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	scale, div := uint64(1), uint64(1)
	if suffix != "" {
		if u, ok := lookupUnit(sizeUnits, suffix); ok {
			scale = u.scale
		} else if u, ok := lookupUnit(sizeBitUnits, suffix); ok {
			scale, div = u.scale, 8
		} else if spaced(suffix, sizeUnits, sizeBitUnits) {
			return 0, fmt.Errorf("size %q: %w", s, errSpaces)
		} else {
			return 0, fmt.Errorf("size %q: unknown unit %q (use b, k, kb, m, mb, g, gb)", s, strings.TrimSpace(suffix))
		}
	}
	v, err := num.scale(scale, div)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	return Size(v), nil
}

// String formats the rate with the largest decimal bit unit that keeps it
// exact ("10mbit", "1500kbit", "34400mbit"); ParseRate reads it back unchanged.
func (r Rate) String() string {
	v := uint64(r)
	for _, u := range []unit{{"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}} {
		if v != 0 && v%u.scale == 0 {
			return strconv.FormatUint(v/u.scale, 10) + u.name
		}
	}
	return strconv.FormatUint(v, 10) + "bit"
}

// String formats the size with the largest 1024-based unit that keeps it
// exact ("64kb", "1600b"); ParseSize reads it back unchanged.
func (s Size) String() string {
	v := uint64(s)
	for _, u := range []unit{{"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}} {
		if v != 0 && v%u.scale == 0 {
			return strconv.FormatUint(v/u.scale, 10) + u.name
		}
	}
	return strconv.FormatUint(v, 10) + "b"
}

// MarshalText implements encoding.TextMarshaler.
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseRate.
func (r *Rate) UnmarshalText(b []byte) error {
	v, err := ParseRate(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseSize.
func (s *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

func lookupUnit(units []unit, suffix string) (unit, bool) {
	for _, u := range units {
		if asciiEqualFold(u.name, suffix) {
			return u, true
		}
	}
	return unit{}, false
}

var errSpaces = errors.New("spaces are not allowed (write the number and its unit together, as in \"10mbit\")")

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'
}

// spaced reports whether suffix is a known unit (or nothing) once its
// spaces are removed: "10 mbit" is then a spacing error, while
// "3 furlongs" is an unknown unit.
func spaced(suffix string, tables ...[]unit) bool {
	t := strings.TrimSpace(suffix)
	if t == suffix {
		return false
	}
	if t == "" {
		return true
	}
	for _, units := range tables {
		if _, ok := lookupUnit(units, t); ok {
			return true
		}
	}
	return false
}

// asciiEqualFold is strings.EqualFold for ASCII only: a non-ASCII byte
// never matches (Unicode folding would read the Kelvin sign as "k").
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y || x >= 0x80 {
			return false
		}
	}
	return true
}

// decimal is a non-negative decimal number kept exactly: digits / 10^frac.
type decimal struct {
	digits uint64
	frac   int
}

// splitNumber splits "1.5mbit" into the exact decimal 1.5 and the suffix "mbit".
func splitNumber(s string) (decimal, string, error) {
	t := s
	if strings.TrimSpace(t) == "" {
		return decimal{}, "", errors.New("empty value")
	}
	if t[0] == '-' {
		return decimal{}, "", errors.New("negative values are not allowed")
	}
	if t[0] == '+' {
		return decimal{}, "", errors.New("a sign is not allowed (write the number alone)")
	}
	if isSpace(t[0]) {
		return decimal{}, "", errSpaces
	}
	var d decimal
	i, seenDigit, seenDot := 0, false, false
	for ; i < len(t); i++ {
		c := t[i]
		switch {
		case c >= '0' && c <= '9':
			seenDigit = true
			hi, lo := bits.Mul64(d.digits, 10)
			sum, carry := bits.Add64(lo, uint64(c-'0'), 0)
			if hi != 0 || carry != 0 {
				if seenDot && c == '0' {
					continue // a trailing fractional zero does not change the value
				}
				if seenDot {
					return decimal{}, "", errors.New("too many significant digits")
				}
				return decimal{}, "", ErrOverflow
			}
			d.digits = sum
			if seenDot {
				d.frac++
			}
		case c == '.' && !seenDot:
			seenDot = true
		default:
			goto done
		}
	}
done:
	if !seenDigit {
		return decimal{}, "", errors.New("not a number")
	}
	return d, t[i:], nil
}

// scale returns d * scale / div, which must be a whole number that fits in 64 bits.
func (d decimal) scale(scale, div uint64) (uint64, error) {
	for d.frac > 0 && d.digits%10 == 0 { // "1.50" is "1.5": fewer decimal places to scale
		d.digits /= 10
		d.frac--
	}
	notWhole := errors.New("not a whole number of the base unit (bits for rates, bytes for sizes)")
	if d.digits == 0 {
		return 0, nil
	}
	// digits < 2^64 and scale < 2^44, so 10^frac with frac > 40 (and div
	// >= 1) is larger than the product: the quotient would be a fraction.
	if d.frac > 40 {
		return 0, notWhole
	}
	num := new(big.Int).Mul(new(big.Int).SetUint64(d.digits), new(big.Int).SetUint64(scale))
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.frac)), nil)
	den.Mul(den, new(big.Int).SetUint64(div))
	q, r := new(big.Int).QuoRem(num, den, new(big.Int))
	if r.Sign() != 0 {
		return 0, notWhole
	}
	if !q.IsUint64() {
		return 0, ErrOverflow
	}
	return q.Uint64(), nil
}
