package daemon

import (
	"sync"
	"testing"

	"github.com/shaperd/shaperd/pkg/model"
)

// A scrape reading while a run-time user's removal moves the last class
// into the removed one's place sees that class twice, and classes added
// at run time come after the sorted ones: each reports every handle once,
// with its own counters.
func TestSnapshotEachOncePerHandleWithItsCounters(t *testing.T) {
	class := func(minor uint16, user string) model.Class {
		return model.Class{Handle: model.MakeHandle(1, minor), Labels: model.Labels{Kind: "user", User: user}}
	}
	s := &ifaceSnapshot{mu: &sync.RWMutex{},
		// 1:12 moved into 1:11's place (1:12 still last); 1:5 added at run time.
		classes: []model.Class{class(10, "a"), class(12, "c"), class(12, "c"), class(5, "e")},
		counters: []classCounters{
			{handle: model.MakeHandle(1, 5), stats: model.Stats{Bytes: 5}},
			{handle: model.MakeHandle(1, 10), stats: model.Stats{Bytes: 10}},
			{handle: model.MakeHandle(1, 12), stats: model.Stats{Bytes: 12}},
		}}
	got := map[string]uint64{}
	s.each(func(l model.Labels, rate, ceil uint64, st *model.Stats) {
		if _, dup := got[l.User]; dup {
			t.Errorf("user %s reported twice", l.User)
		}
		if st == nil {
			t.Errorf("user %s without its counters", l.User)
			return
		}
		got[l.User] = st.Bytes
	})
	if len(got) != 3 || got["a"] != 10 || got["c"] != 12 || got["e"] != 5 {
		t.Errorf("reported %v, want a=10 c=12 e=5", got)
	}
}
