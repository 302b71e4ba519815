package cli

import (
	"reflect"
	"testing"
)

func TestParseInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args []string
		pos  []string
		ceil string
		json bool
	}{
		{[]string{"alice", "3mbit", "--ceil", "5mbit"}, []string{"alice", "3mbit"}, "5mbit", false},
		{[]string{"--ceil=5mbit", "alice", "--json", "3mbit"}, []string{"alice", "3mbit"}, "5mbit", true},
		{[]string{"alice", "-json", "3mbit", "-ceil", "5mbit"}, []string{"alice", "3mbit"}, "5mbit", true},
		{[]string{"alice", "--", "--json"}, []string{"alice", "--json"}, "", false},
		{[]string{"--", "-x"}, []string{"-x"}, "", false},
		{nil, nil, "", false},
	} {
		fs := newFlagSet("t")
		ceil := fs.String("ceil", "", "")
		asJSON := fs.Bool("json", false, "")
		pos, err := parseInterspersed(fs, tc.args)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if !reflect.DeepEqual(pos, tc.pos) || *ceil != tc.ceil || *asJSON != tc.json {
			t.Errorf("%q: positionals %q ceil %q json %v, want %q %q %v", tc.args, pos, *ceil, *asJSON, tc.pos, tc.ceil, tc.json)
		}
	}
	fs := newFlagSet("t")
	fs.String("ceil", "", "")
	if _, err := parseInterspersed(fs, []string{"alice", "--nope"}); err == nil {
		t.Error("unknown flag after a positional accepted")
	}
	if _, err := parseInterspersed(fs, []string{"alice", "--ceil"}); err == nil {
		t.Error("flag without its value accepted")
	}
}
