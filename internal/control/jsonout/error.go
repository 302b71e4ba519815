package jsonout

import (
	"io"
	"strconv"
	"strings"
)

// ErrorObject is what a command run with --json prints on standard
// output when it fails: the message it prints on standard error too, the
// exit code, and what the error carries where it has it.
type ErrorObject struct {
	Error    string `json:"error"`
	ExitCode int    `json:"exit_code"`
	// Target is the unknown target of a command that named one.
	Target string `json:"target,omitempty"`
	// Problems are the configuration errors of a refused plan (reload,
	// fleet push, import), with file and line where they have them.
	Problems []Problem `json:"problems,omitempty"`
}

// Problem is one configuration error: "FILE:LINE:COL: MESSAGE" as
// printed, split where it has that form.
type Problem struct {
	Message string `json:"message"`
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
}

// WriteError writes e as one indented JSON object.
func WriteError(w io.Writer, e ErrorObject) error {
	return Encode(w, e)
}

// ParseProblem splits a "FILE:LINE:COL: MESSAGE" (or "FILE:LINE:
// MESSAGE") line into a Problem; another line is all Message.
func ParseProblem(s string) Problem {
	parts := strings.SplitN(s, ":", 4)
	if len(parts) >= 3 {
		line, err := strconv.Atoi(parts[1])
		if err == nil && line > 0 && parts[0] != "" {
			p := Problem{File: parts[0], Line: line, Message: strings.TrimSpace(strings.Join(parts[2:], ":"))}
			if len(parts) == 4 {
				if col, err := strconv.Atoi(parts[2]); err == nil {
					p.Column, p.Message = col, strings.TrimSpace(parts[3])
				}
			}
			return p
		}
	}
	return Problem{Message: s}
}

// Problems is ParseProblem of each line.
func Problems(lines []string) []Problem {
	var out []Problem
	for _, l := range lines {
		out = append(out, ParseProblem(l))
	}
	return out
}

// Requested reports whether a command line asks for JSON: --json (one
// dash or two, or --json=true) before any "--".
func Requested(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--json", "-json", "--json=true", "-json=true", "--json=1", "-json=1":
			return true
		}
	}
	return false
}

// Tracker is a writer that records whether anything went through it: a
// command that printed its result before failing (status of a degraded
// daemon) prints no error object after it.
type Tracker struct {
	W     io.Writer
	Wrote bool
}

// Write writes p to W.
func (t *Tracker) Write(p []byte) (int, error) {
	if len(p) > 0 {
		t.Wrote = true
	}
	return t.W.Write(p)
}
