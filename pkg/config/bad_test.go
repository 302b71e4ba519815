package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

var update = flag.Bool("update", false, "rewrite the want sections of testdata/bad/*.txt (review the diff!)")

// archive is a test case file: sections "-- NAME --" holding files, and a
// "want" section with the expected errors, one per line.
type archive struct {
	names []string
	files map[string]string
}

func readArchive(t testing.TB, path string) archive {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a := archive{files: map[string]string{}}
	cur := ""
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if strings.HasPrefix(line, "-- ") && strings.HasSuffix(strings.TrimSpace(line), " --") {
			cur = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), "-- "), " --")
			a.names = append(a.names, cur)
			a.files[cur] = ""
			continue
		}
		if cur != "" {
			a.files[cur] += line
		}
	}
	return a
}

func (a archive) fs() fstest.MapFS {
	m := fstest.MapFS{}
	for name, body := range a.files {
		if name != "want" {
			m[name] = &fstest.MapFile{Data: []byte(body)}
		}
	}
	return m
}

func (a archive) format() string {
	var b strings.Builder
	for _, n := range a.names {
		b.WriteString("-- " + n + " --\n")
		b.WriteString(a.files[n])
	}
	return b.String()
}

// TestBadConfigs loads each testdata/bad/*.txt and expects exactly the
// errors of its want section, in order, all from one Load.
func TestBadConfigs(t *testing.T) {
	paths, err := filepath.Glob("testdata/bad/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no test cases: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			a := readArchive(t, path)
			plan, err := LoadFS(a.fs(), "shaperd.toml")
			if plan != nil {
				t.Errorf("got a plan for a bad config")
			}
			var errs *Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error is %T (%v), want *Errors", err, err)
			}
			got := errs.Error() + "\n"
			if *update {
				a.files["want"] = got
				if err := os.WriteFile(path, []byte(a.format()), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, ok := a.files["want"]
			if !ok {
				t.Fatalf("%s has no want section", path)
			}
			if got != want {
				t.Errorf("errors differ\n--- got\n%s--- want\n%s", got, want)
			}
		})
	}
}
