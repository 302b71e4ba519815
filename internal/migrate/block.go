package migrate

import (
	"path/filepath"
	"regexp"
	"strings"

	"github.com/BurntSushi/toml"
)

// The lines around what `shaperctl import libreqos --network` writes into
// shaperd.toml. The next import replaces everything between them, so a
// re-import updates the hierarchy instead of adding a second copy.
const (
	BlockBegin = "# >>> shaperctl import libreqos >>>"
	BlockEnd   = "# <<< shaperctl import libreqos <<<"
)

// blockLines finds the import's block in the lines of main: the index of
// its first and last line, or -1, -1 when there is none.
func blockLines(lines []string, file string) (begin, end int, err error) {
	begin, end = -1, -1
	for i, l := range lines {
		switch t := strings.TrimSpace(l); {
		case strings.HasPrefix(t, BlockBegin):
			if begin >= 0 {
				return 0, 0, lineErr(file, i+1, "a second %q line (the first is on line %d); keep one block", BlockBegin, begin+1)
			}
			begin = i
		case strings.HasPrefix(t, BlockEnd):
			if begin < 0 || end >= 0 {
				return 0, 0, lineErr(file, i+1, "a %q line without a %q line before it", BlockEnd, BlockBegin)
			}
			end = i
		}
	}
	if begin >= 0 && end < 0 {
		return 0, 0, lineErr(file, begin+1, "the %q line has no %q line after it", BlockBegin, BlockEnd)
	}
	return begin, end, nil
}

// SetBlock returns main (the text of shaperd.toml, file naming it in
// errors) with the import's block, BlockBegin to BlockEnd, holding text
// (TOML tables): in place of the block main has, else appended at its
// end, where tables may always go. Everything outside the block stays as
// it is.
func SetBlock(main []byte, file, text string) ([]byte, error) {
	lines := strings.Split(string(main), "\n")
	begin, end, err := blockLines(lines, file)
	if err != nil {
		return nil, err
	}
	block := BlockBegin + "\n" + strings.TrimRight(text, "\n") + "\n" + BlockEnd
	if begin < 0 {
		s := strings.TrimRight(string(main), "\n")
		if s != "" {
			s += "\n\n"
		}
		return []byte(s + block + "\n"), nil
	}
	out := append(append(lines[:begin:begin], block), lines[end+1:]...)
	return []byte(strings.Join(out, "\n")), nil
}

// WithoutBlock returns main without the import's block (see SetBlock).
func WithoutBlock(main []byte, file string) ([]byte, error) {
	lines := strings.Split(string(main), "\n")
	begin, end, err := blockLines(lines, file)
	if err != nil || begin < 0 {
		return main, err
	}
	return []byte(strings.Join(append(lines[:begin:begin], lines[end+1:]...), "\n")), nil
}

// tableHeader matches a TOML table header under a top-level table:
// "[nodes.ap-1]", "[[nodes.ap-1.schedule]]", `[tiers."gold"]`.
var tableHeader = regexp.MustCompile(`^\[\[?\s*([a-z]+)\s*\.\s*"?([^".\]\s]+)"?\s*[.\]]`)

// Clashes returns an error for every table of main outside the import's
// block that is also one the import writes: [table.NAME] (or one of its
// sub-tables) for a NAME in names. The import owns those names; a second
// table of the same name would make shaperd.toml invalid.
func Clashes(main []byte, file, table string, names []string) []error {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	lines := strings.Split(string(main), "\n")
	begin, end, err := blockLines(lines, file)
	if err != nil {
		return []error{err}
	}
	var errs []error
	for i, l := range lines {
		if begin >= 0 && i >= begin && i <= end {
			continue
		}
		m := tableHeader.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil || m[1] != table || !want[m[2]] {
			continue
		}
		errs = append(errs, lineErr(file, i+1, "[%s.%s] is written here by hand and is also one the import writes: remove it (the import keeps its %s between the %q and %q lines)",
			table, m[2], table, BlockBegin, BlockEnd))
	}
	return errs
}

// UsersFile returns the users file main (the text of the shaperd.toml at
// mainPath) names: daemon.users_file (default users.toml) relative to
// mainPath's directory unless absolute, as shaperd resolves it.
func UsersFile(mainPath string, main []byte) string {
	var d struct {
		Daemon struct {
			UsersFile string `toml:"users_file"`
		} `toml:"daemon"`
	}
	_, _ = toml.Decode(string(main), &d) // a syntax error is Validate's to report
	uf := d.Daemon.UsersFile
	if uf == "" {
		uf = "users.toml"
	}
	if filepath.IsAbs(uf) {
		return uf
	}
	return filepath.Join(filepath.Dir(mainPath), uf)
}
