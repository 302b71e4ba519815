package config

import (
	"strconv"
	"strings"
	"sync"
)

// pos is a 1-based line and byte column.
type pos struct{ Line, Col int }

// positions is where the keys of one parsed file are written, found only
// when a message needs them: the file's text is kept (a few dozen bytes a
// user) instead of a map of every key path (several hundred bytes a user),
// and scanned by keyPositions the first time a position is asked for.
type positions struct {
	src []byte
	mu  sync.Mutex
	m   map[string]pos
	// top holds the top-level paths alone ("user", "user[3]": no '.'),
	// which every user's Source needs at load: far smaller than m, made
	// by the same scan.
	top map[string]pos
}

// newPositions returns the lazy positions of the TOML document src.
func newPositions(src []byte) *positions { return &positions{src: src} }

// fresh returns positions of the same text not scanned yet: the Plan gets
// these, so that the map the load's own messages needed is not kept with it.
func (p *positions) fresh() *positions { return newPositions(p.src) }

// lookup returns where path is written; ok is false when it is not
// written, or p is nil (a Plan that Load did not make).
func (p *positions) lookup(path string) (pos, bool) {
	if p == nil {
		return pos{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil && topLevel(path) {
		if p.top == nil {
			p.top = scanPositions(p.src, topLevel)
		}
		at, ok := p.top[path]
		return at, ok
	}
	if p.m == nil {
		p.m, p.top = keyPositions(p.src), nil
	}
	at, ok := p.m[path]
	return at, ok
}

// topLevel reports whether path is a top-level key or an element of a
// top-level array ("user[3]").
func topLevel(path string) bool { return !strings.Contains(path, ".") }

// keyPositions maps every key path of a TOML document to where it is
// written: "daemon.socket", "interface[1].name", "tiers.gold.schedule[0]"
// (the [[...]] header), "user[0].addresses[2]" (an array element).
//
// BurntSushi/toml's MetaData keeps positions internally but does not expose
// them, and it keys entries of arrays of tables without their index, so this
// small scanner walks the text itself. It is only run on documents the TOML
// parser accepted, and it never panics on anything else.
func keyPositions(src []byte) map[string]pos { return scanPositions(src, nil) }

// scanPositions is keyPositions keeping only the paths keep accepts (nil:
// all).
func scanPositions(src []byte, keep func(string) bool) map[string]pos {
	s := &posScanner{src: src, line: 1, out: map[string]pos{}, arrays: map[string]int{}, keep: keep}
	s.document()
	return s.out
}

type posScanner struct {
	src       []byte
	i         int
	line      int
	lineStart int
	cur       string            // path of the current table
	out       map[string]pos    // path -> position
	arrays    map[string]int    // array-of-tables path -> entries so far
	keep      func(string) bool // nil: every path
}

func (s *posScanner) here() pos { return pos{s.line, s.i - s.lineStart + 1} }

func (s *posScanner) eof() bool { return s.i >= len(s.src) }

func (s *posScanner) peek(off int) byte {
	if s.i+off < len(s.src) {
		return s.src[s.i+off]
	}
	return 0
}

// advance moves one byte, counting lines.
func (s *posScanner) advance() {
	if s.eof() {
		return
	}
	if s.src[s.i] == '\n' {
		s.line++
		s.lineStart = s.i + 1
	}
	s.i++
}

func (s *posScanner) record(path string, p pos) {
	if s.keep != nil && !s.keep(path) {
		return
	}
	if _, ok := s.out[path]; !ok {
		s.out[path] = p
	}
}

func join(base, key string) string {
	if base == "" {
		return key
	}
	return base + "." + key
}

func index(base string, i int) string { return base + "[" + strconv.Itoa(i) + "]" }

// skipSpace skips blanks, and with newlines also line ends and comments.
func (s *posScanner) skipSpace(newlines bool) {
	for !s.eof() {
		switch c := s.src[s.i]; {
		case c == ' ' || c == '\t':
			s.advance()
		case newlines && (c == '\n' || c == '\r'):
			s.advance()
		case newlines && c == '#':
			s.skipLine()
		default:
			return
		}
	}
}

func (s *posScanner) skipLine() {
	for !s.eof() && s.src[s.i] != '\n' {
		s.advance()
	}
}

func (s *posScanner) document() {
	for !s.eof() {
		start := s.i
		s.skipSpace(true)
		if s.eof() {
			return
		}
		if s.src[s.i] == '[' {
			s.header()
		} else {
			s.keyValue(s.cur)
		}
		s.skipSpace(false)
		if !s.eof() && s.src[s.i] == '#' {
			s.skipLine()
		}
		if s.i == start { // not TOML we understand: move on
			s.advance()
		}
	}
}

// header reads [a.b] or [[a.b]] and makes it the current table.
func (s *posScanner) header() {
	at := s.here()
	s.advance()
	array := s.peek(0) == '['
	if array {
		s.advance()
	}
	s.skipSpace(false)
	segs := s.key()
	path := ""
	for i, seg := range segs {
		path = join(path, seg)
		s.record(path, at)
		if n, ok := s.arrays[path]; ok && (i < len(segs)-1 || !array) {
			path = index(path, n-1)
		} else if array && i == len(segs)-1 {
			s.arrays[path] = n + 1
			path = index(path, n)
		}
		s.record(path, at)
	}
	if !array && len(segs) > 0 {
		// [a.b] after [[a.b.c]] or [a.b.d] defines a.b here: prefer the
		// table's own header to the one that created it implicitly.
		if s.keep == nil || s.keep(path) {
			s.out[path] = at
		}
	}
	s.cur = path
	for !s.eof() && s.src[s.i] != ']' && s.src[s.i] != '\n' {
		s.advance()
	}
	for !s.eof() && s.src[s.i] == ']' {
		s.advance()
	}
}

// keyValue reads key = value in the table at base.
func (s *posScanner) keyValue(base string) {
	at := s.here()
	segs := s.key()
	if len(segs) == 0 {
		return
	}
	path := base
	for _, seg := range segs {
		path = join(path, seg)
		s.record(path, at)
	}
	s.skipSpace(false)
	if s.peek(0) != '=' {
		return
	}
	s.advance()
	s.skipSpace(false)
	s.value(path)
}

// key reads a dotted key: bare, "basic" or 'literal' parts.
func (s *posScanner) key() []string {
	var segs []string
	for !s.eof() {
		s.skipSpace(false)
		switch c := s.peek(0); {
		case c == '"':
			raw := s.quoted('"')
			if v, err := strconv.Unquote(raw); err == nil {
				segs = append(segs, v)
			} else {
				segs = append(segs, strings.Trim(raw, `"`))
			}
		case c == '\'':
			segs = append(segs, strings.Trim(s.quoted('\''), "'"))
		case isBare(c):
			start := s.i
			for !s.eof() && isBare(s.src[s.i]) {
				s.advance()
			}
			segs = append(segs, string(s.src[start:s.i]))
		default:
			return segs
		}
		s.skipSpace(false)
		if s.peek(0) != '.' {
			return segs
		}
		s.advance()
	}
	return segs
}

func isBare(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// quoted reads a one-line string with delimiter q and returns it with its quotes.
func (s *posScanner) quoted(q byte) string {
	start := s.i
	s.advance()
	for !s.eof() && s.src[s.i] != q && s.src[s.i] != '\n' {
		if q == '"' && s.src[s.i] == '\\' {
			s.advance()
		}
		s.advance()
	}
	s.advance()
	return string(s.src[start:min(s.i, len(s.src))])
}

// value skips one value, recording the positions of array elements and of
// the keys of inline tables under path.
func (s *posScanner) value(path string) {
	switch c := s.peek(0); c {
	case '"', '\'':
		if s.peek(1) == c && s.peek(2) == c {
			s.multiline(c)
		} else {
			s.quoted(c)
		}
	case '[':
		s.advance()
		for n := 0; ; n++ {
			s.skipSpace(true)
			if s.eof() || s.peek(0) == ']' {
				break
			}
			start := s.i
			s.record(index(path, n), s.here())
			s.value(index(path, n))
			s.skipSpace(true)
			if s.peek(0) == ',' {
				s.advance()
			} else if s.i == start {
				break
			}
		}
		s.advance()
	case '{':
		s.advance()
		for {
			s.skipSpace(true)
			if s.eof() || s.peek(0) == '}' {
				break
			}
			start := s.i
			s.keyValue(path)
			s.skipSpace(true)
			if s.peek(0) == ',' {
				s.advance()
			} else if s.i == start {
				break
			}
		}
		s.advance()
	default:
		for !s.eof() && !strings.ContainsRune(",]}#\r\n", rune(s.src[s.i])) {
			s.advance()
		}
	}
}

// multiline skips a multi-line string (three double or three single quotes).
func (s *posScanner) multiline(q byte) {
	s.i += 3
	for !s.eof() {
		c := s.src[s.i]
		if q == '"' && c == '\\' {
			s.advance()
			s.advance()
			continue
		}
		if c == q && s.peek(1) == q && s.peek(2) == q {
			s.i += 3
			for extra := 0; extra < 2 && s.peek(0) == q; extra++ {
				s.i++
			}
			return
		}
		s.advance()
	}
}
