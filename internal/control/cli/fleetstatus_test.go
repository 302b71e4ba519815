package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/controltest"
)

// TestStatusShowsFleet: the fleet line says the link is down, the
// revision in force and a refused one with why; none without [fleet].
func TestStatusShowsFleet(t *testing.T) {
	st := &control.Status{Generated: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC),
		Fleet: &control.FleetStatus{Router: "r1", Revision: 41, Refused: 42, Overrides: 2,
			Errors: []string{"fleet rev 42: shared.toml:9:1: tiers.gold.ceil: 1mbit is below rate 30mbit"}}}
	var b strings.Builder
	if err := writeStatus(&b, st); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"fleet: router r1, etcd DISCONNECTED (shaping with the last plan applied), shared plan revision 41, 2 fleet overrides",
		"fleet: refused revision 42; the old plan stays in force",
		"fleet: fleet rev 42: shared.toml:9:1: tiers.gold.ceil",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in:\n%s", want, b.String())
		}
	}
	b.Reset()
	st.Fleet = nil
	if err := writeStatus(&b, st); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "fleet") {
		t.Errorf("a fleet line without [fleet]:\n%s", b.String())
	}
}

// A fleet router that refused the shared plan is not ok: status prints
// everything and exits 1 naming the refused revision; one that applied the
// plan exits 0.
func TestStatusExitsNotOKWhenFleetRefused(t *testing.T) {
	for _, tt := range []struct {
		refused int64
		code    int
	}{{0, ExitOK}, {42, ExitError}} {
		st := controltest.Sample()
		for i := range st.Interfaces {
			st.Interfaces[i].State = control.StateOK
		}
		st.Fleet = &control.FleetStatus{Router: "r1", Connected: true, Revision: 41, Refused: tt.refused}
		sock := controltest.Serve(t, &controltest.Fake{State: st})
		for _, args := range [][]string{{"--socket", sock, "status"}, {"--socket", sock, "status", "--json"}} {
			var out, errb bytes.Buffer
			code := Run(context.Background(), args, &out, &errb, Env{})
			if code != tt.code {
				t.Errorf("refused %d: %q exits %d, want %d\n%s%s", tt.refused, args, code, tt.code, out.String(), errb.String())
			}
			if tt.refused != 0 && !strings.Contains(errb.String(), "refused the shared plan revision 42 and shapes with revision 41") {
				t.Errorf("%q: stderr does not name the refused revision: %q", args, errb.String())
			}
			if out.Len() == 0 {
				t.Errorf("%q: printed no status", args)
			}
		}
	}
}

// overrides lists fleet overrides, marked as such, and says when a local
// override replaces one on this router.
func TestOverridesShowFleet(t *testing.T) {
	set := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	var b strings.Builder
	if err := writeOverrides(&b, []control.OverrideStatus{
		{Target: "alice", Direction: "both", Rate: 3e6, Ceil: 3e6, Set: set, Source: control.SourceLocal},
		{Target: "alice", Direction: "both", Rate: 7e6, Ceil: 7e6, Set: set, Source: control.SourceFleet, Shadowed: true},
		{Target: "tier:gold", Direction: "both", Rate: 9e6, Ceil: 9e6, Set: set, Source: control.SourceFleet},
	}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || !strings.HasSuffix(lines[0], "SOURCE") || !strings.HasSuffix(lines[1], " local") ||
		!strings.HasSuffix(lines[2], " fleet (local wins)") || !strings.HasSuffix(lines[3], " fleet") {
		t.Errorf("overrides table:\n%s", b.String())
	}
}
