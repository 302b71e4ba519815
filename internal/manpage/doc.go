// Package manpage writes man pages in plain roff (the man macros) from the
// texts shaperd already has: a command's help text and the commented
// example configuration. The pages are generated, never written by hand,
// so they say what `--help` says (see internal/cmd/genman).
package manpage
