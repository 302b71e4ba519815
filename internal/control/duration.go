package control

import (
	"fmt"
	"time"
)

// Duration is a time.Duration that travels as a Go duration string ("250ms",
// "2s", "1h30m0s"; zero is "0s").
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats d as time.Duration does.
func (d Duration) String() string { return time.Duration(d).String() }

// DurationPtr returns a pointer to d as a Duration, for optional request fields.
func DurationPtr(d time.Duration) *Duration {
	v := Duration(d)
	return &v
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with time.ParseDuration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("duration %q: use Go syntax such as 250ms, 2s or 1h30m", b)
	}
	*d = Duration(v)
	return nil
}
