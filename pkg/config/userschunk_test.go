package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// A users file of more than usersChunk [[user]] entries is read a chunk at
// a time with the same users, errors and notes as when read whole; any
// other shape, or a chunk the parser refuses, is read whole.
func TestUsersChunked(t *testing.T) {
	tiers := []Tier{{Name: "t0"}, {Name: "t1"}}
	ifaces := []Interface{{Name: "lan0", Direction: Egress}}
	gen := func(n int, edit func(i int, b *strings.Builder)) []byte {
		var b strings.Builder
		b.WriteString("# users\n\n")
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "[[user]]\nname = \"user%05d\"\ntier = \"t%d\"\naddresses = [\"198.18.%d.%d\"]\n", i, i%2, i/250, i%250+1)
			if edit != nil {
				edit(i, &b)
			}
		}
		return []byte(b.String())
	}
	whole := func(data []byte) ([]User, []Error, []Error) {
		c := &collector{order: map[string]int{"users.toml": 1}}
		m, f, ok := parseFile("users.toml", data, c)
		var users []User
		if ok {
			ut := f.table("", m)
			users = decodeUsers(ut, tiers, nil, ifaces)
			ut.finish()
		}
		return users, c.list, c.notes
	}
	chunked := func(data []byte) ([]User, []Error, []Error, bool) {
		c := &collector{order: map[string]int{"users.toml": 1}}
		users, _, ok := decodeUsersChunked("users.toml", data, c, tiers, nil, ifaces)
		return users, c.list, c.notes, ok
	}
	for _, tc := range []struct {
		name    string
		data    []byte
		chunked bool
	}{
		{"valid", gen(2500, nil), true},
		{"errors", gen(2500, func(i int, b *strings.Builder) {
			switch i {
			case 5, 1500: // a duplicate name, an overlapping address, an unknown key, an unknown tier
				fmt.Fprintf(b, "[[user]]\nname = \"user%05d\"\ntier = \"t9\"\naddresses = [\"198.18.0.%d\"]\nspeed = 1\n", i, i+1)
			}
		}), true},
		{"crlf", []byte(strings.ReplaceAll(string(gen(1200, nil)), "\n", "\r\n")), true},
		{"few", gen(usersChunk, nil), false},
		{"a key first", append([]byte("x = 1\n"), gen(1200, nil)...), false},
		{"indented header", []byte(strings.Replace(string(gen(1200, nil)), "[[user]]", "  [[user]]", 1)), false},
		{"a sub-table array", gen(1200, func(i int, b *strings.Builder) {
			if i == 1100 {
				b.WriteString("[[user.x]]\na = 1\n")
			}
		}), false},
		{"a header in a string", gen(1200, func(i int, b *strings.Builder) {
			if i == 1100 {
				b.WriteString("note = '''\n[[user]]\n'''\n")
			}
		}), false},
		{"syntax error", gen(1200, func(i int, b *strings.Builder) {
			if i == 1100 {
				b.WriteString("oops = \n")
			}
		}), false},
		{"junk before", append([]byte("=== junk\n"), gen(1200, nil)...), false},
	} {
		wu, we, wn := whole(tc.data)
		cu, ce, cn, ok := chunked(tc.data)
		if ok != tc.chunked {
			t.Errorf("%s: read in chunks %v, want %v", tc.name, ok, tc.chunked)
		}
		if !ok {
			if len(ce) != 0 || len(cn) != 0 || cu != nil {
				t.Errorf("%s: not read in chunks, yet reported %d errors, %d notes, %d users", tc.name, len(ce), len(cn), len(cu))
			}
			continue
		}
		if !reflect.DeepEqual(cu, wu) {
			t.Errorf("%s: users differ from the whole file's (%d, %d)", tc.name, len(cu), len(wu))
		}
		if !reflect.DeepEqual(ce, we) || !reflect.DeepEqual(cn, wn) {
			t.Errorf("%s: errors %v notes %v, the whole file's: %v %v", tc.name, ce, cn, we, wn)
		}
		if tc.name == "errors" && len(ce) < 4 {
			t.Errorf("errors: only %d errors: %v", len(ce), ce)
		}
	}
}
