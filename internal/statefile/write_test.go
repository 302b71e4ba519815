package statefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// WriteAtomic creates the directory, replaces the file whole with the
// mode asked for and leaves no temporary file behind.
func TestWriteAtomic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	p := filepath.Join(dir, "f.json")
	for _, s := range []string{"old contents", "new"} {
		if err := WriteAtomic(p, []byte(s), 0o640); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != s {
			t.Fatalf("read back %q, %v; want %q", b, err, s)
		}
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, %v; want 0640", fi.Mode(), err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Errorf("the directory holds %v; want only f.json", left)
	}
	if err := SaveJSON(dir, "v.json", map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "v.json")); string(b) != "{\"a\":1}\n" {
		t.Errorf("SaveJSON wrote %q", b)
	}
}

// A failed write names the file and the step, not the temporary file.
func TestWriteAtomicErrorNamesFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sub")
	if err := os.Mkdir(p, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "x"), nil, 0o640); err != nil {
		t.Fatal(err)
	}
	// Renaming a file over a non-empty directory fails.
	err := WriteAtomic(p, []byte("x"), 0o640)
	if err == nil || !strings.Contains(err.Error(), "write "+p+": rename") || strings.Contains(err.Error(), ".tmp-") {
		t.Fatalf("error %v; want it to name %s and the rename, not the temporary file", err, p)
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Errorf("a failed write left %v", left)
	}
}
