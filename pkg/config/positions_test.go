package config

import "testing"

// TestKeyPositions checks the scanner on the TOML forms a config may use:
// dotted and quoted keys, inline tables, arrays over several lines,
// multi-line strings that contain brackets and '=', and arrays of tables.
func TestKeyPositions(t *testing.T) {
	src := `# comment [not a table]
top = 1
a.b = "x"   # trailing
"quoted key" = 'lit'
text = """
[fake]
x = 1"""
lit = '''
[[fake]]'''
arr = [
  "one", # c
  { k = 1, m = [2, 3] },
]

[tbl]
key = { inner = "v", deep.er = 2 }

[[list]]
name = "first"

[late.sub]
[late]

[[list]]
  name = "second"
  [list.sub]
  x = 1
  [[list.items]]
  y = 2
`
	want := map[string]pos{
		"top":                {2, 1},
		"a":                  {3, 1},
		"a.b":                {3, 1},
		"quoted key":         {4, 1},
		"text":               {5, 1},
		"lit":                {8, 1},
		"arr":                {10, 1},
		"arr[0]":             {11, 3},
		"arr[1]":             {12, 3},
		"arr[1].k":           {12, 5},
		"arr[1].m":           {12, 12},
		"arr[1].m[1]":        {12, 20},
		"tbl":                {15, 1},
		"tbl.key":            {16, 1},
		"tbl.key.inner":      {16, 9},
		"tbl.key.deep.er":    {16, 22},
		"list":               {18, 1},
		"list[0]":            {18, 1},
		"list[0].name":       {19, 1},
		"late":               {22, 1},
		"late.sub":           {21, 1},
		"list[1]":            {24, 1},
		"list[1].name":       {25, 3},
		"list[1].sub":        {26, 3},
		"list[1].sub.x":      {27, 3},
		"list[1].items[0]":   {28, 3},
		"list[1].items[0].y": {29, 3},
	}
	got := keyPositions([]byte(src))
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("%s: got %v (found %v), want %v", k, g, ok, w)
		}
	}
	for _, k := range []string{"fake", "x", "text.x"} {
		if _, ok := got[k]; ok {
			t.Errorf("%q recorded from inside a string", k)
		}
	}
}

// TestKeyPositionsGarbage feeds text that is not TOML: no panic, no hang.
func TestKeyPositionsGarbage(t *testing.T) {
	for _, src := range []string{"[", "[[", "a = [", "a = {", `a = "`, `a = """`, "= = =", "[a.\n", "a = [1,,]", "\x00\xff", "'''", "a.'b"} {
		keyPositions([]byte(src))
	}
}

// TestKeyPositionsCRLF checks line counting with Windows line ends.
func TestKeyPositionsCRLF(t *testing.T) {
	got := keyPositions([]byte("a = 1\r\n[t]\r\n  b = [\r\n 1,\r\n 2]\r\n"))
	want := map[string]pos{"a": {1, 1}, "t": {2, 1}, "t.b": {3, 3}, "t.b[1]": {5, 2}}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: got %v, want %v", k, got[k], w)
		}
	}
}

// The lazy positions answer a top-level path ("user[1]") from a scan that
// keeps only those, with the position the full scan gives; any other path
// from the full scan.
func TestLazyPositions(t *testing.T) {
	src := []byte("# users\n[[user]]\nname = \"a\"\naddresses = [\"198.18.0.1\",\n  \"198.18.0.2\"]\n\n  [[user]]\nname = \"b\"\n[[user]]\n")
	full := keyPositions(src)
	p := newPositions(src)
	for _, path := range []string{"user", "user[0]", "user[1]", "user[2]"} {
		if at, ok := p.lookup(path); !ok || at != full[path] {
			t.Errorf("%s: %v %v, want %v", path, at, ok, full[path])
		}
	}
	if p.m != nil || len(p.top) != 4 {
		t.Errorf("top-level lookups scanned everything (%d paths) or kept %d top-level paths, want 4", len(p.m), len(p.top))
	}
	if at, ok := p.lookup("user[0].addresses[1]"); !ok || at != full["user[0].addresses[1]"] || at.Line != 5 {
		t.Errorf("user[0].addresses[1]: %v %v, want %v", at, ok, full["user[0].addresses[1]"])
	}
	if at, ok := p.lookup("user[1]"); !ok || at != full["user[1]"] {
		t.Errorf("user[1] after the full scan: %v %v", at, ok)
	}
}
