package statefile

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

type rec struct {
	N int `json:"n"`
}

// replayAll replays b into a list of the records' numbers; a record with
// a negative number is refused.
func replayAll(b []byte) ([]int, int, bool, error) {
	var got []int
	good, torn, err := Replay(b, func(js []byte) error {
		var r rec
		if err := json.Unmarshal(js, &r); err != nil {
			return err
		}
		if r.N < 0 {
			return errors.New("negative")
		}
		got = append(got, r.N)
		return nil
	})
	return got, good, torn, err
}

func line(t *testing.T, n int) string {
	t.Helper()
	b, err := EncodeRecord(rec{n})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Replay takes whole good records, drops a torn or bad last one, and
// refuses a bad record followed by good ones, naming its number.
func TestReplay(t *testing.T) {
	one, two := line(t, 1), line(t, 2)
	for _, tt := range []struct {
		name string
		b    string
		want []int
		good int
		torn bool
		err  string
	}{
		{"empty", "", nil, 0, false, ""},
		{"whole", one + two, []int{1, 2}, len(one + two), false, ""},
		{"no newline", one + two[:len(two)-1], []int{1}, len(one), true, ""},
		{"half a line", one + two[:5], []int{1}, len(one), true, ""},
		{"refused last", one + line(t, -1), []int{1}, len(one), true, ""},
		{"bad checksum last", one + "00000000 {}\n\n", []int{1}, len(one), true, ""},
		{"corrupt inside", one + "garbage\n" + two, nil, 0, false, "record 2: no checksum"},
		{"refused inside", one + line(t, -1) + two, nil, 0, false, "record 2: negative"},
	} {
		got, good, torn, err := replayAll([]byte(tt.b))
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%s: error %v, want %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil || good != tt.good || torn != tt.torn || jsonOf(got) != jsonOf(tt.want) {
			t.Errorf("%s: %v, good %d, torn %v, %v; want %v, good %d, torn %v", tt.name, got, good, torn, err, tt.want, tt.good, tt.torn)
		}
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Append syncs whole records after a torn tail (cut at open to Size),
// Reset empties the file, and a closed Journal opens again.
func TestJournalAppendReset(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state", "j.journal")
	var j Journal
	for n := 1; n <= 2; n++ {
		if err := j.Append(p, rec{n}); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(line(t, 3)[:4]) // a crash while writing record 3
	f.Close()
	b, _ := os.ReadFile(p)
	got, good, torn, err := replayAll(b)
	if err != nil || !torn || len(got) != 2 {
		t.Fatalf("replay: %v, torn %v, %v; want 2 records and a torn tail", got, torn, err)
	}
	j = Journal{Size: int64(good), Records: len(got)}
	if err := j.Append(p, rec{4}); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(p)
	if got, _, torn, err := replayAll(b); err != nil || torn || jsonOf(got) != "[1,2,4]" || j.Records != 3 || j.Size != int64(len(b)) {
		t.Fatalf("after an append past the torn tail: %v, torn %v, %v, %d records, size %d of %d", got, torn, err, j.Records, j.Size, len(b))
	}
	if err := j.Reset(p); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if b, _ := os.ReadFile(p); len(b) != 0 || j.Size != 0 || j.Records != 0 {
		t.Errorf("after Reset: %q, size %d, %d records", b, j.Size, j.Records)
	}
}

// Replay takes any bytes: no panic, whole records end with a newline,
// and a torn tail's whole records alone replay the same.
func FuzzReplay(f *testing.F) {
	good, _ := EncodeRecord(rec{1})
	for _, s := range []string{"", string(good), string(good) + string(good[:5]), "garbage\n" + string(good), "00000000 {}\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, good, torn, err := replayAll(b)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		if !torn && good != len(b) || good > len(b) || good > 0 && b[good-1] != '\n' {
			t.Fatalf("replay took %d of %d bytes as whole records (torn %v)", good, len(b), torn)
		}
		if torn {
			again, g2, torn2, err := replayAll(b[:good])
			if err != nil || torn2 || g2 != good || len(again) != len(got) {
				t.Fatalf("the whole records alone: %v, %d bytes, torn %v, %v; want %v", again, g2, torn2, err, got)
			}
		}
	})
}
