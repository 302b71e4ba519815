package statefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// A journal is an append-only file of records, one a line: the CRC-32C
// (Castagnoli) of the record's JSON in 8 hex digits, a space, the JSON
// and a newline. Each record is synced (fdatasync) before Append returns,
// so a record the caller acknowledged survives a crash; a crash while a
// record is written leaves a torn last line, which Replay reports and
// drops.

// journalCRC is the checksum of a record's JSON.
var journalCRC = crc32.MakeTable(crc32.Castagnoli)

// EncodeRecord is v's JSON as a journal line, newline included.
func EncodeRecord(v any) ([]byte, error) {
	js, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	line := make([]byte, 0, len(js)+10)
	line = fmt.Appendf(line, "%08x ", crc32.Checksum(js, journalCRC))
	line = append(line, js...)
	return append(line, '\n'), nil
}

// recordJSON checks one journal line's checksum (the line without its
// newline) and returns its JSON.
func recordJSON(line []byte) ([]byte, error) {
	sum, js, ok := bytes.Cut(line, []byte{' '})
	if !ok || len(sum) != 8 {
		return nil, errors.New("no checksum")
	}
	want, err := strconv.ParseUint(string(sum), 16, 32)
	if err != nil {
		return nil, errors.New("no checksum")
	}
	if crc32.Checksum(js, journalCRC) != uint32(want) {
		return nil, errors.New("checksum mismatch")
	}
	return js, nil
}

// Replay reads the journal b record by record and hands each record's
// JSON, its checksum verified, to apply in order; apply returns an error
// for a record it refuses, and must then leave its state as it was. It
// returns the length of b's whole good records and whether a torn last
// record followed them (no newline, or a bad last line: a crash while it
// was written; it was never acknowledged and is dropped, not applied). A
// bad record followed by good ones is corruption: an error naming its
// number (from 1), after which the caller's state is not to be used.
func Replay(b []byte, apply func(js []byte) error) (good int, torn bool, err error) {
	for n := 1; good < len(b); n++ {
		line, rest, complete := bytes.Cut(b[good:], []byte{'\n'})
		err := errors.New("no newline")
		if complete {
			var js []byte
			if js, err = recordJSON(line); err == nil {
				err = apply(js)
			}
		}
		if err != nil {
			if len(bytes.TrimSpace(rest)) == 0 {
				return good, true, nil
			}
			return 0, false, fmt.Errorf("record %d: %w", n, err)
		}
		good += len(line) + 1
	}
	return good, false, nil
}

// Journal is an open journal file. Its zero value is closed; Append and
// Reset open it.
type Journal struct {
	f    *os.File
	path string
	// Size is the length of the file's whole, synced records, and Records
	// their count. After reading the file with Replay the caller sets them
	// (to good and the number of records in it), so that the next open
	// drops a torn tail and the count goes on.
	Size    int64
	Records int
}

// open opens the journal at path (creating it, and then syncing its
// directory) for appending, and cuts it to Size.
func (j *Journal) open(path string) error {
	if j.f != nil {
		return nil
	}
	j.path = path
	dir := filepath.Dir(path)
	_, err := os.Lstat(j.path)
	created := errors.Is(err, fs.ErrNotExist)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("state dir %s: %w", dir, err)
	}
	f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("open %s: %w", j.path, bare(err))
	}
	// Drop a torn tail (never acknowledged) so that records follow whole ones.
	if err := f.Truncate(j.Size); err != nil {
		f.Close()
		return fmt.Errorf("truncate %s to its whole records: %w", j.path, bare(err))
	}
	if created {
		if err := SyncDir(dir); err != nil {
			f.Close()
			return err
		}
	}
	j.f = f
	return nil
}

// Append writes v as a record at the end of the journal at path (opening
// it when closed; an open journal stays at the path it was opened at) and
// syncs it. A failure truncates what it wrote (best effort) and closes the
// file; the caller then keeps its data another way (a whole file).
func (j *Journal) Append(path string, v any) error {
	line, err := EncodeRecord(v)
	if err != nil {
		return fmt.Errorf("encode %s record: %w", filepath.Base(path), err)
	}
	if err := j.open(path); err != nil {
		return err
	}
	// O_APPEND: the record goes to the file's end even when the file was
	// emptied behind this process's back (another instance's compaction,
	// in tests that start two on one directory).
	var end int64
	if _, err = j.f.Write(line); err == nil {
		if err = syscall.Fdatasync(int(j.f.Fd())); err == nil {
			end, err = j.f.Seek(0, io.SeekCurrent)
		}
	}
	if err != nil {
		_ = j.f.Truncate(j.Size)
		j.Close()
		return fmt.Errorf("append to %s: %w", j.path, bare(err))
	}
	j.Size = end
	j.Records++
	return nil
}

// Reset empties the journal at path, for after its records were written
// elsewhere whole (a compaction). A failure leaves the records, which the
// caller's replay must then take harmlessly (records are idempotent).
func (j *Journal) Reset(path string) error {
	if j.Records == 0 && j.Size == 0 {
		return nil
	}
	if err := j.open(path); err != nil {
		return err
	}
	if err := j.f.Truncate(0); err != nil {
		j.Close()
		return fmt.Errorf("truncate %s: %w", j.path, bare(err))
	}
	if err := syscall.Fdatasync(int(j.f.Fd())); err != nil {
		j.Close()
		return fmt.Errorf("sync %s: %w", j.path, bare(err))
	}
	j.Size, j.Records = 0, 0
	return nil
}

// Close closes the file; the next Append or Reset opens it again.
func (j *Journal) Close() {
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
}
