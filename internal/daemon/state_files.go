package daemon

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
)

// Kinds of state file problems (the kind label of
// shaperd_state_errors_total and control.StateProblem.Kind).
const (
	// StateCorrupt: a state file could not be parsed at start; it was moved
	// aside to NAME.corrupt-TIMESTAMP and the daemon started without it.
	StateCorrupt = "corrupt"
	// StateRead: a state file could not be read at start (an I/O error).
	StateRead = "read"
	// StateWrite: a state file could not be written (read-only or full
	// state_dir); shaping goes on and the write is retried.
	StateWrite = control.StateProblemWrite
)

// stateFiles are the state files, for metric labels.
var stateFiles = []string{OverridesFile, UsageFile, AssignmentsFile, UsersFile}

// corruptStamp is the sortable UTC form of the time in NAME.corrupt-TIMESTAMP.
const corruptStamp = "20060102T150405Z"

// decodeOverrides parses the overrides state file.
func decodeOverrides(b []byte) (policy.Overrides, error) {
	var ov policy.Overrides
	err := decodeState(b, &ov)
	return ov, err
}

// decodeUsage parses the quota usage state file into a Usage counting in
// loc.
func decodeUsage(b []byte, loc *time.Location) (*policy.Usage, error) {
	u := policy.NewUsage(loc)
	if err := decodeState(b, u); err != nil {
		return nil, err
	}
	return u, nil
}

// decodeAssignments parses the class id state file: each interface key's
// assignment.
func decodeAssignments(b []byte) (map[string]*model.Assignment, error) {
	ids := map[string]*model.Assignment{}
	if err := decodeState(b, &ids); err != nil {
		return nil, err
	}
	for k, a := range ids {
		if a == nil {
			return nil, fmt.Errorf("interface %q: null class id assignment", k)
		}
	}
	return ids, nil
}

// decodeState parses one JSON value into v: an empty file, a bare null and
// trailing data are errors (the daemon always writes one object).
func decodeState(b []byte, v any) error {
	t := bytes.TrimSpace(b)
	switch {
	case len(t) == 0:
		return errors.New("empty file")
	case bytes.Equal(t, []byte("null")):
		return errors.New("null instead of an object")
	}
	return json.Unmarshal(t, v) // trailing data is a syntax error
}

// readStateFile reads name in dir and decodes it with decode. A missing file
// returns false and no problem. An unreadable file is a StateRead problem;
// an unparsable one (corrupt, truncated, empty) is a StateCorrupt problem
// and is moved aside to NAME.corrupt-TIMESTAMP (the injected clock's time,
// UTC), so that the next save starts a fresh file and the old contents
// stay for the operator. Either way the daemon goes on without the file:
// effect says what that means, for the log and status.
func (d *Daemon) readStateFile(dir, name, effect string, decode func([]byte) error) bool {
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	now := d.clock.Now()
	if err != nil {
		d.stateProblem(control.StateProblem{File: name, Kind: StateRead, Since: now, Effect: effect,
			Error: fmt.Sprintf("read state file %s: %v", path, err)})
		return false
	}
	if err := decode(b); err != nil {
		p := control.StateProblem{File: name, Kind: StateCorrupt, Since: now, Effect: effect,
			Error: fmt.Sprintf("state file %s (%d bytes): %v", path, len(b), err)}
		if !d.opts.ReadOnly {
			moved, merr := moveAside(path, now)
			if merr != nil {
				p.Effect += "; " + merr.Error()
			}
			p.MovedTo = moved
		}
		d.stateProblem(p)
		return false
	}
	return true
}

// stateProblem records, counts and logs a problem found at start.
func (d *Daemon) stateProblem(p control.StateProblem) {
	d.stats.stateErrors.WithLabelValues(p.File, p.Kind).Inc()
	d.log.Error("state file unusable; starting without it", "file", p.File, "kind", p.Kind,
		"err", p.Error, "moved_to", p.MovedTo, "effect", p.Effect)
	d.problems[p.File+"/"+p.Kind] = &p
}

// moveAside renames path to path.corrupt-TIMESTAMP (with .2, .3, ... when
// that exists) and returns the new path.
func moveAside(path string, now time.Time) (string, error) {
	base := path + ".corrupt-" + now.UTC().Format(corruptStamp)
	dst := base
	for i := 2; ; i++ {
		if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
			break
		}
		if i > 100 {
			return "", fmt.Errorf("cannot move %s aside: %s.2 to .100 exist", path, base)
		}
		dst = fmt.Sprintf("%s.%d", base, i)
	}
	if err := os.Rename(path, dst); err != nil {
		return "", fmt.Errorf("cannot move %s aside: %w", path, err)
	}
	return dst, nil
}

// stateWritten records the outcome of writing the state file name. A
// failure is counted every time and becomes (or updates) a StateWrite
// problem; it is logged when the error differs from the last one, not on
// every retry. A success after failures clears the problem and says so.
func (d *Daemon) stateWritten(name string, err error) {
	key := name + "/" + StateWrite
	p := d.problems[key]
	if err == nil {
		if p != nil {
			delete(d.problems, key)
			d.stats.stateFailing.WithLabelValues(name).Set(0)
			d.log.Info("state file written again", "file", name, "failing_since", p.Since)
		}
		return
	}
	d.stats.errors.WithLabelValues("state").Inc()
	d.stats.stateErrors.WithLabelValues(name, StateWrite).Inc()
	d.stats.stateFailing.WithLabelValues(name).Set(1)
	if p != nil && p.Error == err.Error() {
		return
	}
	if p == nil {
		p = &control.StateProblem{File: name, Kind: StateWrite, Since: d.clock.Now(),
			Effect: "shaping goes on; the file is written again on a later tick once the state directory accepts it"}
		d.problems[key] = p
	}
	p.Error = err.Error()
	d.log.Error("cannot save state file; shaping goes on, retrying on later ticks", "file", name, "err", err)
}

// writeFailing reports whether the last write of state file name failed.
func (d *Daemon) writeFailing(name string) bool {
	return d.problems[name+"/"+StateWrite] != nil
}

// retryState writes again every state file whose last write failed (the
// reconcile tick calls it), so that the state catches up as soon as the
// state directory is writable again.
func (d *Daemon) retryState(now time.Time) {
	if d.writeFailing(OverridesFile) || d.overridesUnsaved {
		d.saveOverrides(d.overrides)
	}
	if d.writeFailing(UsageFile) {
		d.saveUsage(now)
	}
	if d.writeFailing(AssignmentsFile) || d.assignmentsDue && now.Sub(d.assignmentsAt) >= assignmentsEvery {
		d.saveAssignments()
		d.assignmentsAt = now
	}
	d.compactUsers()
}

// assignmentsEvery is how often at most the reconcile tick saves the class
// ids run-time user changes gave out (see assignmentsDue).
const assignmentsEvery = time.Minute

// stateProblemList is the problems for status, by file and kind.
func (d *Daemon) stateProblemList() []control.StateProblem {
	var out []control.StateProblem
	for _, p := range d.problems {
		q := *p
		if q.File == UsageFile && q.Kind != StateWrite {
			q.Effect += fmt.Sprintf(" (%d class counters counted so far)", d.usage.Rebuilt())
		}
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b control.StateProblem) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Kind, b.Kind))
	})
	return out
}
