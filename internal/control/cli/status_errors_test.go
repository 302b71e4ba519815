package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/controltest"
)

// TestStatusShowsRefusalsAndForeign: a degraded interface, a user whose
// class was refused (the ERROR column, shown only then) and foreign objects
// on an interface appear in the human status.
func TestStatusShowsRefusalsAndForeign(t *testing.T) {
	st := controltest.Sample()
	var out bytes.Buffer
	if err := writeStatus(&out, &st); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "ERROR") {
		t.Errorf("ERROR column without any user error:\n%s", out.String())
	}
	st.Interfaces[0].State = control.StateDegraded
	st.Interfaces[0].Error = "1 object refused"
	st.Interfaces[0].Foreign = []string{"bpf filter pref 7 protocol 0x0003 (1 objects)"}
	st.Users[2].Error = "not shaped: lan0: add class 1:101 (user bob): invalid argument"
	out.Reset()
	if err := writeStatus(&out, &st); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"degraded", "ERROR", "not shaped: lan0: add class 1:101 (user bob)",
		"lan0 (egress): not shaperd's: bpf filter pref 7"} {
		if !strings.Contains(s, want) {
			t.Errorf("status lacks %q:\n%s", want, s)
		}
	}
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "carol ") && !strings.HasSuffix(strings.TrimSpace(line), "-") {
			t.Errorf("carol has no error, want '-' in the ERROR column: %q", line)
		}
	}
}
