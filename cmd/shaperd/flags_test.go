package main

import (
	"io"
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
