package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Error is one problem in a configuration file.
type Error struct {
	// File is the file's path as Load was given it (the users file joined
	// to the main file's directory).
	File string
	// Line and Col are 1-based; Col counts bytes. Both are 0 when the
	// problem has no position (the file could not be read).
	Line, Col int
	// Key is the key path the problem concerns ("tiers.gold.ceil",
	// "user[2].tier"); empty for syntax errors and unreadable files.
	Key string
	// Msg says what is wrong, without the position or key.
	Msg string
}

// Error formats the error as FILE:LINE:COL: KEY: MSG, leaving out the
// position when Line is 0 and the key when Key is empty.
func (e Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Col)
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one Load, sorted by file (main file
// first), line and column. Load only returns a non-nil *Errors with at
// least one entry.
type Errors struct {
	List []Error
}

// Error formats every error on its own line.
func (e *Errors) Error() string {
	lines := make([]string, len(e.List))
	for i, x := range e.List {
		lines[i] = x.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the individual errors (for errors.Is/As).
func (e *Errors) Unwrap() []error {
	out := make([]error, len(e.List))
	for i, x := range e.List {
		out[i] = x
	}
	return out
}

// collector gathers errors from all files of one Load.
type collector struct {
	list  []Error
	order map[string]int // file -> rank for sorting (main file first)
	// notes are remarks on valid keys (Plan.Notes).
	notes []Error
}

func (c *collector) add(e Error) { c.list = append(c.list, e) }

func (c *collector) note(e Error) { c.notes = append(c.notes, e) }

// result returns the sorted errors, or nil when there are none.
func (c *collector) result() *Errors {
	if len(c.list) == 0 {
		return nil
	}
	slices.SortStableFunc(c.list, func(a, b Error) int {
		return cmp.Or(
			cmp.Compare(c.order[a.File], c.order[b.File]),
			cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Col, b.Col),
		)
	})
	return &Errors{List: c.list}
}

// MaxPrinted is how many errors FormatErrors prints before it sums up the
// rest: a broken users file of thousands of entries stays readable.
const MaxPrinted = 100

// FormatNotes formats notes (information about keys of a valid
// configuration, held as Errors) one per line as FILE:LINE:COL: note:
// KEY: MSG, the first limit of them, then "... and N more notes"; a
// limit of 0 or less prints every note.
func FormatNotes(notes []Error, limit int) []string {
	n := len(notes)
	if limit > 0 && n > limit {
		n = limit
	}
	out := make([]string, 0, n+1)
	for _, e := range notes[:n] {
		e.Key = strings.TrimSuffix("note: "+e.Key, ": ")
		out = append(out, e.Error())
	}
	if n < len(notes) {
		out = append(out, fmt.Sprintf("... and %d more notes", len(notes)-n))
	}
	return out
}

// FormatErrors formats errs one per line (Error.Error), the first limit of
// them, then one line "... and N more errors" when there are more. A limit
// of 0 or less prints every error.
func FormatErrors(errs []Error, limit int) []string {
	n := len(errs)
	if limit > 0 && n > limit {
		n = limit
	}
	out := make([]string, 0, n+1)
	for _, e := range errs[:n] {
		out = append(out, e.Error())
	}
	if n < len(errs) {
		out = append(out, fmt.Sprintf("... and %d more errors", len(errs)-n))
	}
	return out
}
