package main

import (
	"io"
	"strings"
	"testing"
)

// TestTakeoverFlag: --takeover is parsed (and off by default).
func TestTakeoverFlag(t *testing.T) {
	f, err := parseFlags([]string{"--config", "x.toml"}, io.Discard, io.Discard)
	if err != nil || f.takeover {
		t.Errorf("default: takeover %v, %v; want false", f != nil && f.takeover, err)
	}
	f, err = parseFlags([]string{"--config", "x.toml", "--takeover"}, io.Discard, io.Discard)
	if err != nil || !f.takeover {
		t.Errorf("--takeover: %v, %v; want true", f != nil && f.takeover, err)
	}
}

// A flag error names the flag with two dashes, as --help and the man page
// write it, and exits 2.
func TestFlagErrorsUseTwoDashes(t *testing.T) {
	for _, tt := range []struct{ args, want string }{
		{"--bogus", "shaperd: flag provided but not defined: --bogus"},
		{"--config", "shaperd: flag needs an argument: --config"},
		{"--v=maybe", `shaperd: invalid boolean value "maybe" for --v`},
	} {
		var errb strings.Builder
		code := run(strings.Fields(tt.args), io.Discard, &errb)
		if code != 2 || !strings.Contains(errb.String(), tt.want) || strings.Contains(errb.String(), " -"+strings.TrimLeft(tt.args, "-")[:1]) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 with %q and no one-dash flag", tt.args, code, errb.String(), tt.want)
		}
	}
}
