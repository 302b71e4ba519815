package daemon

import (
	"errors"
	"testing"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// TestReconcilerState: one state value moves as apply's outcomes say; a
// desired tree that cannot be built keeps the interface failed until a
// build works, except while it is missing.
func TestReconcilerState(t *testing.T) {
	st := newReconciler(config.Interface{Name: "lan0", Direction: config.Egress})
	if s, _ := st.health(); s != control.StatePending {
		t.Fatalf("new: %s, want pending", s)
	}
	st.refused = []*kernel.Error{{Object: "class 1:10"}}
	st.setState(stateDegraded, nil)
	if s, msg := st.health(); s != control.StateDegraded || msg == "" {
		t.Errorf("degraded: %s %q", s, msg)
	}
	st.setState(stateOK, nil)
	if s, _ := st.health(); s != control.StateOK || st.refused != nil {
		t.Errorf("ok: %s, refused %v", s, st.refused)
	}
	bad := errors.New("rate above ceil")
	st.buildFailed(bad)
	st.setState(stateOK, nil) // the kernel holds the older tree
	if s, msg := st.health(); s != control.StateFailed || msg != bad.Error() {
		t.Errorf("build failed, then applied: %s %q, want failed %q", s, msg, bad)
	}
	st.setState(stateMissing, nil)
	if s, _ := st.health(); s != control.StateMissing {
		t.Errorf("build failed, then missing: %s", s)
	}
	st.buildErr = nil
	st.setState(stateOK, nil)
	if s, _ := st.health(); s != control.StateOK {
		t.Errorf("built again: %s", s)
	}
}

// TestClassViewPatched: the metrics' copy of the classes is never
// changed; a patch copies only the chunks it touches.
func TestClassViewPatched(t *testing.T) {
	classes := make([]model.Class, 3*viewChunk)
	for i := range classes {
		classes[i] = model.Class{Handle: model.MakeHandle(1, uint16(i+1)), Rate: tbf.Mbit, Labels: model.Labels{Kind: "user"}}
	}
	v := newClassView(classes)
	classes[viewChunk+5].Rate = 2 * tbf.Mbit // the loop's tree changes ...
	if v.at(viewChunk+5).rate != tbf.Mbit {
		t.Fatal("the view shares the classes")
	}
	w := v.patched(classes, []int{viewChunk + 5}) // ... and is patched in
	if v.at(viewChunk+5).rate != tbf.Mbit || w.at(viewChunk+5).rate != 2*tbf.Mbit {
		t.Errorf("patched: old %v, new %v", v.at(viewChunk+5).rate, w.at(viewChunk+5).rate)
	}
	if &v.chunks[0][0] != &w.chunks[0][0] || &v.chunks[1][0] == &w.chunks[1][0] {
		t.Error("a patch copies just the chunks it touches")
	}
	if w.len() != len(classes) {
		t.Errorf("len %d, want %d", w.len(), len(classes))
	}
}
