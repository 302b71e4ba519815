package daemon

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

	"golang.org/x/sys/unix"
)

// UsersJournal is the append-only journal of run-time user changes made
// since users.json was last written whole, in daemon.state_dir. Each
// change appends one record and syncs it (fdatasync) before it is
// acknowledged, instead of rewriting users.json (whose size grows with
// the number of run-time users); users.json plus the journal's records,
// replayed in order, are the run-time users. The journal is folded into
// users.json (compacted) on a reconcile tick once it holds
// journalCompactRecords records, at start after replaying it, and by
// every whole write (a reload that drops run-time users, expiry at start).
const UsersJournal = "users.journal"

// journalCompactRecords is how many records the journal holds before a
// reconcile tick folds it into users.json.
const journalCompactRecords = 1000

// journalRecord is one change: Put is the user's whole entry after it
// (added or changed), Del the name of a removed user. Replaying a record
// is idempotent, so records already in users.json (a crash between
// writing users.json and truncating the journal) replay harmlessly.
type journalRecord struct {
	Put *runtimeUser `json:"put,omitempty"`
	Del string       `json:"del,omitempty"`
}

// journalCRC is the checksum of a record's JSON (Castagnoli).
var journalCRC = crc32.MakeTable(crc32.Castagnoli)

// encodeJournalRecord is r as a journal line: the CRC-32C of the JSON in
// 8 hex digits, a space, the JSON and a newline.
func encodeJournalRecord(r journalRecord) ([]byte, error) {
	js, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	line := make([]byte, 0, len(js)+10)
	line = fmt.Appendf(line, "%08x ", crc32.Checksum(js, journalCRC))
	line = append(line, js...)
	return append(line, '\n'), nil
}

// decodeJournalLine parses one journal line (without its newline).
func decodeJournalLine(line []byte) (journalRecord, error) {
	var r journalRecord
	sum, js, ok := bytes.Cut(line, []byte{' '})
	if !ok || len(sum) != 8 {
		return r, errors.New("no checksum")
	}
	want, err := strconv.ParseUint(string(sum), 16, 32)
	if err != nil {
		return r, errors.New("no checksum")
	}
	if crc32.Checksum(js, journalCRC) != uint32(want) {
		return r, errors.New("checksum mismatch")
	}
	if err := json.Unmarshal(js, &r); err != nil {
		return r, err
	}
	switch {
	case (r.Put == nil) == (r.Del == ""):
		return r, errors.New("neither one put nor one del")
	case r.Put != nil:
		if _, err := decodeRuntimeUsersList([]runtimeUser{*r.Put}); err != nil {
			return r, err
		}
	}
	return r, nil
}

// replayJournal applies the journal b to rt and returns the result, the
// length of b's whole good records, and whether a torn last record
// followed them (no newline, or a bad last line: a crash while it was
// written; it was never acknowledged and is dropped). A bad record
// followed by good ones is corruption: an error naming its number.
func replayJournal(rt []runtimeUser, b []byte) (out []runtimeUser, good int, torn bool, err error) {
	at := make(map[string]int, len(rt))
	for i := range rt {
		at[rt[i].Name] = i
	}
	for n := 1; good < len(b); n++ {
		line, rest, complete := bytes.Cut(b[good:], []byte{'\n'})
		r, err := decodeJournalLine(line)
		if err != nil || !complete {
			if len(bytes.TrimSpace(rest)) == 0 {
				return rt, good, true, nil
			}
			if err == nil {
				err = errors.New("no newline")
			}
			return nil, 0, false, fmt.Errorf("record %d: %w", n, err)
		}
		good += len(line) + 1
		if r.Put != nil {
			if i, ok := at[r.Put.Name]; ok {
				rt[i] = *r.Put
			} else {
				at[r.Put.Name] = len(rt)
				rt = append(rt, *r.Put)
			}
			continue
		}
		if i, ok := at[r.Del]; ok {
			last := len(rt) - 1
			rt[i] = rt[last]
			at[rt[i].Name] = i
			rt = rt[:last]
			delete(at, r.Del)
		}
	}
	return rt, good, false, nil
}

// usersJournal is the open journal file.
type usersJournal struct {
	f       *os.File
	path    string
	size    int64 // bytes of whole, synced records
	records int
	// whole: users.json and the journal hold users that are not in force
	// (refused at start): the next change writes users.json whole.
	whole bool
}

// open opens (creating, and then syncing the directory) the journal in
// dir for appending; size and records are what a replay found there.
func (j *usersJournal) open(dir string) error {
	if j.f != nil {
		return nil
	}
	j.path = filepath.Join(dir, UsersJournal)
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
	if err := f.Truncate(j.size); err != nil {
		f.Close()
		return fmt.Errorf("truncate %s to its whole records: %w", j.path, bare(err))
	}
	if created {
		if err := syncDir(dir); err != nil {
			f.Close()
			return err
		}
	}
	j.f = f
	return nil
}

// append writes r at the end of the journal and syncs it. A failure
// truncates what it wrote (best effort) and closes the file; the caller
// then writes users.json whole.
func (j *usersJournal) append(dir string, r journalRecord) error {
	line, err := encodeJournalRecord(r)
	if err != nil {
		return fmt.Errorf("encode %s record: %w", UsersJournal, err)
	}
	if err := j.open(dir); err != nil {
		return err
	}
	// O_APPEND: the record goes to the file's end even when the file was
	// emptied behind this daemon's back (another instance's compaction,
	// in tests that start two on one state_dir).
	var end int64
	if _, err = j.f.Write(line); err == nil {
		if err = unix.Fdatasync(int(j.f.Fd())); err == nil {
			end, err = j.f.Seek(0, io.SeekCurrent)
		}
	}
	if err != nil {
		_ = j.f.Truncate(j.size)
		j.close()
		return fmt.Errorf("append to %s: %w", j.path, bare(err))
	}
	j.size = end
	j.records++
	return nil
}

// reset empties the journal after users.json was written whole (it holds
// every record). A failure leaves records that replay harmlessly.
func (j *usersJournal) reset(dir string) error {
	if j.records == 0 && j.size == 0 {
		return nil
	}
	if err := j.open(dir); err != nil {
		return err
	}
	if err := j.f.Truncate(0); err != nil {
		j.close()
		return fmt.Errorf("truncate %s: %w", j.path, bare(err))
	}
	if err := unix.Fdatasync(int(j.f.Fd())); err != nil {
		j.close()
		return fmt.Errorf("sync %s: %w", j.path, bare(err))
	}
	j.size, j.records = 0, 0
	return nil
}

// close closes the file; the next append opens it again.
func (j *usersJournal) close() {
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
}

// syncDir fsyncs directory dir (a new file's entry).
func syncDir(dir string) error {
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
