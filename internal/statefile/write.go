// Package statefile keeps files crash-safe: whole files replaced
// atomically (WriteAtomic, SaveJSON), an append-only journal of
// checksummed records synced one by one (Journal, Replay), and the
// flock(2)s that make one process the only manager of a network interface
// (LockInterfaces). It uses the standard library only.
package statefile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteAtomic replaces path with data crash-safely: the data goes to a
// temporary file in the same directory, which is synced, renamed over path,
// and then the directory is synced, so that after a crash path holds either
// the old or the new contents, never a mix. The directory is created (0750)
// when missing. Errors name path and the step, not the temporary file's
// random name, so that retries of one fault give the same message.
func WriteAtomic(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("state dir %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: create temporary file: %w", path, bare(err))
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, bare(err))
	}
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: chmod: %w", path, bare(err))
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write %s: sync: %w", path, bare(err))
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: close: %w", path, bare(err))
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: rename the temporary file over it: %w", path, bare(err))
	}
	ok = true
	return SyncDir(dir)
}

// SaveJSON writes v as JSON, with a trailing newline, to name in dir with
// WriteAtomic (mode 0640).
func SaveJSON(dir, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	return WriteAtomic(filepath.Join(dir, name), append(b, '\n'), 0o640)
}

// SyncDir fsyncs directory dir, so that a new or renamed file's entry in
// it survives a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// bare strips the path from a *fs.PathError or *os.LinkError (the caller
// names the file).
func bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}
