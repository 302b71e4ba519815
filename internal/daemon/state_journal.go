package daemon

import (
	"encoding/json"
	"errors"
	"path/filepath"

	"github.com/shaperd/shaperd/internal/statefile"
)

// UsersJournal is the append-only journal of run-time user changes made
// since users.json was last written whole, in daemon.state_dir. Each
// change appends one record and syncs it (statefile.Journal) before it is
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

// decodeJournalRecord parses one record's JSON (its checksum verified)
// and checks a put's user as the state file's are checked.
func decodeJournalRecord(js []byte) (journalRecord, error) {
	var r journalRecord
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
// followed them (statefile.Replay: dropped). A bad record followed by
// good ones is corruption: an error naming its number.
func replayJournal(rt []runtimeUser, b []byte) (out []runtimeUser, good int, torn bool, err error) {
	at := make(map[string]int, len(rt))
	for i := range rt {
		at[rt[i].Name] = i
	}
	good, torn, err = statefile.Replay(b, func(js []byte) error {
		r, err := decodeJournalRecord(js)
		if err != nil {
			return err
		}
		if r.Put != nil {
			if i, ok := at[r.Put.Name]; ok {
				rt[i] = *r.Put
			} else {
				at[r.Put.Name] = len(rt)
				rt = append(rt, *r.Put)
			}
			return nil
		}
		if i, ok := at[r.Del]; ok {
			last := len(rt) - 1
			rt[i] = rt[last]
			at[rt[i].Name] = i
			rt = rt[:last]
			delete(at, r.Del)
		}
		return nil
	})
	if err != nil {
		return nil, 0, false, err
	}
	return rt, good, torn, nil
}

// usersJournal is the open journal file (statefile.Journal, at
// UsersJournal in the state directory).
type usersJournal struct {
	statefile.Journal
	// whole: users.json and the journal hold users that are not in force
	// (refused at start): the next change writes users.json whole.
	whole bool
}

// journalPath is the journal's path in state directory dir.
func journalPath(dir string) string { return filepath.Join(dir, UsersJournal) }
