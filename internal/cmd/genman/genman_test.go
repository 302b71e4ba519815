package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestManPagesUpToDate regenerates the man pages from `shaperd --help`,
// `shaperctl help` and configs/shaperd.toml and fails when a committed
// page in docs/man differs: the pages cannot drift from the help texts.
func TestManPagesUpToDate(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) != 3 {
		t.Errorf("%d pages, want shaperd.8, shaperctl.8, shaperd.toml.5", len(pages))
	}
	for name, want := range pages {
		got, err := os.ReadFile(filepath.Join(root, "docs", "man", name))
		if err != nil {
			t.Errorf("%v: run go run ./internal/cmd/genman", err)
			continue
		}
		if string(got) != want {
			t.Errorf("docs/man/%s is out of date: run go run ./internal/cmd/genman (first difference at line %d)", name, firstDiff(string(got), want))
		}
	}
}

// TestManPagesCarryTheHelp checks that the pages hold what they document:
// every shaperd flag, every shaperctl command and every config key.
func TestManPagesCarryTheHelp(t *testing.T) {
	root, _ := filepath.Abs("../../..")
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	for page, wants := range map[string][]string{
		"shaperd.8":      {`\-\-config FILE`, `\-\-teardown`, `.SH "SYNOPSIS"`, `.SH "EXIT STATUS"`, `.SH "SIGNALS"`, ".B SIGHUP"},
		"shaperctl.8":    {".SS set\\-rate", ".SS completion", ".SS import", ".SS export", `\-\-ceil RATE`, `.SH "EXIT STATUS"`, `.SH "SIGNALS"`, ".B 2\na usage error"},
		"shaperd.toml.5": {`.SS "[daemon]"`, `\fBreconcile_interval = "5s"\fR`, `.SS "[[tiers.gold.schedule]]"`, `.SH "USERS FILE"`},
	} {
		for _, w := range wants {
			if !strings.Contains(pages[page], w) {
				t.Errorf("%s lacks %q", page, w)
			}
		}
	}
}

func firstDiff(a, b string) int {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return i + 1
		}
	}
	return min(len(al), len(bl)) + 1
}
