// Command genman writes shaperd's man pages, docs/man/shaperd.8,
// shaperctl.8 and shaperd.toml.5, from the texts they document: the output
// of `shaperd --help`, of `shaperctl help` and `shaperctl help CMD`, and
// the commented example configuration configs/shaperd.toml. Run it from
// the repository's root after changing any of them:
//
//	go run ./internal/cmd/genman
//
// With -check it writes nothing and exits 1 when a committed page differs
// from what it would write (its test does the same).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	check := flag.Bool("check", false, "only report pages that differ from what would be written")
	flag.Parse()
	pages, err := Pages(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "genman:", err)
		os.Exit(1)
	}
	dir := filepath.Join(*root, "docs", "man")
	names := make([]string, 0, len(pages))
	for n := range pages {
		names = append(names, n)
	}
	slices.Sort(names)
	stale := false
	for _, n := range names {
		p := filepath.Join(dir, n)
		if *check {
			if old, err := os.ReadFile(p); err != nil || string(old) != pages[n] {
				fmt.Fprintf(os.Stderr, "genman: %s is out of date: run go run ./internal/cmd/genman\n", p)
				stale = true
			}
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "genman:", err)
			os.Exit(1)
		}
		if err := os.WriteFile(p, []byte(pages[n]), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "genman:", err)
			os.Exit(1)
		}
	}
	if stale {
		os.Exit(1)
	}
}
